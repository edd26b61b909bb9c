"""v2 jobs for the Slurm runtime's tests: a job of roles, a role, and a parameter server (``PS``) and its workers
(``WORKER``) that find it by the environment OpenPAI gives them."""

from __future__ import annotations

import json
from typing import Any


def job(name: str, roles: dict[str, Any], **extra: Any) -> str:
    """A v2 job as JSON (YAML's subset): the scripts need no quoting."""
    body = {"protocolVersion": 2, "name": name, "type": "job", "taskRoles": roles, **extra}
    body["prerequisites"] = [{"name": "img", "type": "dockerimage", "uri": "ubuntu"}]
    return json.dumps(body)


def role(command: str, instances: int = 1, ports: int = 0, **extra: Any) -> dict[str, Any]:
    resources: dict[str, Any] = {"cpu": 1, "memoryMB": 256, "gpu": 0} | ({"ports": {"http": ports}} if ports else {})
    return {
        "instances": instances,
        "dockerImage": "img",
        "resourcePerInstance": resources,
        "commands": [command],
        **extra,
    }


PS = """import os, socket
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind((os.environ["PAI_CURRENT_CONTAINER_IP"], int(os.environ["PAI_PORT_LIST_ps_0_http"])))
s.listen()
for _ in range(2):
    print("ps got", s.accept()[0].recv(100).decode(), flush=True)
"""

WORKER = """import os, socket, time
for _ in range(300):
    try:
        c = socket.create_connection((os.environ["PAI_HOST_IP_ps_0"], int(os.environ["PAI_PORT_LIST_ps_0_http"])))
        break
    except OSError:
        time.sleep(0.1)
c.sendall(("worker %s on %s" % (os.environ["PAI_TASK_INDEX"], os.environ["PAI_CURRENT_CONTAINER_IP"])).encode())
"""
