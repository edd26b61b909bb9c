"""Every job an MLflow run: the cluster's own tracking server (``server.py``) and the daemon's side of runs
(``tracker.py``)."""
