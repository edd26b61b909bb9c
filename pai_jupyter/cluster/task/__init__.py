"""What one task is made of: its spec and env, in-task services (Jupyter, TensorBoard, sshd, desktop) and their
operations, its log files, and the Estimator's /ml layout."""
