"""The embedded local cluster daemon (``python -m pai_jupyter.cluster.daemon``), grouped by what each part holds:

- ``core/``: the cluster's state and bookkeeping: the SQLite store, submit/schedule/complete/stop/delete
  (``service.Cluster``), the queue, capacity and ports, completion rules, recovery after a restart, the OS
  accounts tasks run as, free-space guard, max run time, and the API's error codes.
- ``task/``: what one task is made of: its spec and environment, in-task services (Jupyter, TensorBoard, sshd,
  desktop), their operations (terminal, metrics), log files, the Estimator's /ml layout.
- ``runtime/``: how a task runs: the process and Docker runtimes, the shims and the task directory's files.
- ``http/``: the tornado REST API (OpenPAI v2 subset and /api/v2/local/ extensions, ``openapi.yaml``).
- ``daemon.py`` (start-up), ``control.py`` (start/stop a daemon from a client), ``paths.py`` (its files).
"""
