import './base.css';
import './look.css';
