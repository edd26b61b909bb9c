"""Runs inside the kernel's task (stdlib + ipykernel only: it is shipped into the job's command, not imported).

It writes a connection file (mode 0600, in a private temp dir) from the task's allocated ports
(``PAI_CONTAINER_HOST_<label>_PORT_LIST``) and the key the job carries as a secret (``PAI_KERNEL_KEY``, removed
from the environment before the kernel starts), then runs ipykernel in a child process. A shutdown that asks
for a restart leaves a flag behind and the loop starts a fresh kernel on the same ports: the job lives on.
A kernel that crashes ends the task with its exit code (or signal), so the job reports it; after a clean
shutdown the launcher waits a little for the provisioner to stop the job, so a shut-down kernel's job is STOPPED.
Lines starting with ``[pai_jupyter kernel]`` are read by the provisioner; keep their wording.
"""

import json
import os
import signal
import subprocess
import sys
import tempfile
import time

TAG = "[pai_jupyter kernel]"
LINGER = 15
LABELS = ("shell", "iopub", "stdin", "control", "hb")
KERNEL = """
import sys
from ipykernel.ipkernel import IPythonKernel
from ipykernel.kernelapp import IPKernelApp
flag = sys.argv[2]
class PaiKernel(IPythonKernel):
    def do_shutdown(self, restart):
        if restart:
            open(flag, "w").close()
        return super().do_shutdown(restart)
IPKernelApp.launch_instance(argv=["-f", sys.argv[1]], kernel_class=PaiKernel)
"""


def port(label):
    value = os.environ.get(f"PAI_CONTAINER_HOST_{label}_PORT_LIST", "")
    if not value:
        sys.exit(f"{TAG} no port labelled {label!r} was allocated to this task")
    return int(value.split(",")[0])


def main():
    key = os.environ.pop("PAI_KERNEL_KEY", "")
    if not key or key.startswith("<%"):
        sys.exit(f"{TAG} the job carries no connection key (secrets.kernelKey)")
    try:
        import ipykernel  # noqa: F401
    except ImportError:
        sys.exit(
            f"{TAG} {sys.executable} has no ipykernel: run the kernel with a python that has it "
            "(an image with python and ipykernel, e.g. `pip install ipykernel`)"
        )
    info = {f"{label}_port": port(label) for label in LABELS}
    info.update(
        ip=os.environ.get("PAI_KERNEL_IP", "127.0.0.1"),
        key=key,
        transport="tcp",
        signature_scheme="hmac-sha256",
        kernel_name=os.environ.get("PAI_KERNEL_NAME", ""),
    )
    home = tempfile.mkdtemp(prefix="pai-kernel-")
    path = os.path.join(home, "connection.json")
    with os.fdopen(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "w") as f:
        json.dump(info, f)
    flag = os.path.join(home, "restart")
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # an interrupt is the kernel's, never the loop's
    n = 0
    while True:
        print(f"{TAG} kernel {n} starting in {os.getcwd()}", flush=True)
        rc = subprocess.call(
            [sys.executable, "-c", KERNEL, path, flag], preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL)
        )
        if rc == 0 and os.path.exists(flag):
            os.unlink(flag)
            print(f"{TAG} kernel {n} ended for a restart", flush=True)
            n += 1
            continue
        how = f"signal {-rc}" if rc < 0 else f"exit code {rc}"
        print(f"{TAG} kernel {n} ended with {how}", flush=True)
        os.unlink(path)
        if rc == 0:  # a shutdown: the provisioner stops the job now (STOPPED); end on our own if it never does
            time.sleep(LINGER)
        if rc < 0:
            signal.signal(-rc, signal.SIG_DFL)
            os.kill(os.getpid(), -rc)
        sys.exit(rc)


main()
