"""JupyterHub's front door to the workbench (docs/hub.md): ``PAISpawner`` (``spawner.py``, the ``jupyterhub.spawners``
entry point ``pai``) runs each user's server as a job of the cluster, as that user; its spawn page's form
(``form.py``), the server's job (``serverjob.py``) and the pending page's progress (``progress.py``).

A surface like the others: it reaches the cluster through the one client, never the daemon's code."""
