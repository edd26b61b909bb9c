import './base.css';
import './look.css';
import './sweeps.css';
