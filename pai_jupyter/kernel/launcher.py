"""Runs inside the kernel's task (stdlib + ipykernel only: it is shipped into the job's command, not imported).

It writes a connection file (mode 0600, in a private temp dir) from the task's allocated ports
(``PAI_CONTAINER_HOST_<label>_PORT_LIST``) and the two secrets the job carries (``PAI_KERNEL_KEY``, the HMAC key,
and ``PAI_KERNEL_CURVE_KEY``, the CurveZMQ secret key in hex; both removed from the environment before the
kernel starts), then runs ipykernel in a child process. Every one of the kernel's five TCP sockets is a CurveZMQ
server (see provisioner.py for why): ipykernel with CurveZMQ support reads the keys from the connection file;
for an older one the kernel's child sets the same socket options on the sockets that bind (or, for its own debug
socket, connect to) the kernel's ports, so a kernel never listens unencrypted.

A shutdown that asks for a restart says so through a pipe and the loop starts a fresh kernel on the same ports:
the job lives on. A kernel that crashes ends the task with its exit code (or signal), so the job reports it;
after a clean shutdown the launcher waits a little for the provisioner to stop the job, so a shut-down kernel's
job is STOPPED. The connection file's temp dir goes as soon as the kernel has read it.
Lines starting with ``[pai_jupyter kernel]`` are read by the provisioner; keep their wording.
Its types are comments, which mypy checks and no python evaluates: the task's python may be older than ours.
"""

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

TAG = "[pai_jupyter kernel]"
LINGER = 15
LABELS = ("shell", "iopub", "stdin", "control", "hb")
KERNEL = """
import json
import os
import shutil
import sys
import zmq
from ipykernel.ipkernel import IPythonKernel
from ipykernel.kernelapp import IPKernelApp
conn, pipe = sys.argv[1], int(sys.argv[2])
os.set_inheritable(pipe, False)
with open(conn) as f:
    info = json.load(f)
pub, sec = info["curve_publickey"].encode(), info["curve_secretkey"].encode()
ports = {str(info[label + "_port"]) for label in ("shell", "iopub", "stdin", "control", "hb")}
here = {info["ip"], "127.0.0.1", "0.0.0.0", "localhost", "*"}
bind, connect = zmq.Socket.bind, zmq.Socket.connect
def ours(addr, hosts=None):
    addr = addr.decode() if isinstance(addr, bytes) else str(addr)
    host, _, port = addr.rpartition(":")
    return addr.startswith("tcp://") and port in ports and (hosts is None or host[len("tcp://"):] in hosts)
def curve_bind(self, addr):
    if ours(addr):
        self.curve_secretkey, self.curve_publickey, self.curve_server = sec, pub, True
    return bind(self, addr)
def curve_connect(self, addr):
    if ours(addr, here):
        self.curve_serverkey, self.curve_secretkey, self.curve_publickey = pub, sec, pub
    return connect(self, addr)
zmq.Socket.bind, zmq.Socket.connect = curve_bind, curve_connect
class PaiKernel(IPythonKernel):
    def do_shutdown(self, restart):
        if restart:
            os.write(pipe, b"r")
        return super().do_shutdown(restart)
class PaiKernelApp(IPKernelApp):
    def write_connection_file(self, **kwargs):  # once the sockets are bound: read, written back, then off the disk
        if os.path.exists(conn):
            super().write_connection_file(**kwargs)
            shutil.rmtree(os.path.dirname(conn), ignore_errors=True)
PaiKernelApp.launch_instance(argv=["-f", conn], kernel_class=PaiKernel)
"""


def port(label):
    # type: (str) -> int
    value = os.environ.get(f"PAI_CONTAINER_HOST_{label}_PORT_LIST", "")
    if not value:
        sys.exit(f"{TAG} no port labelled {label!r} was allocated to this task")
    return int(value.split(",")[0])


def secret(name, what):
    # type: (str, str) -> str
    value = os.environ.pop(name, "")
    if not value or value.startswith("<%"):
        sys.exit(f"{TAG} the job carries no {what}")
    return value


def curve_keys(hex_secret):
    # type: (str) -> tuple[str, str]
    """(public, secret) Z85 keys from the secret key in hex; exits when pyzmq cannot do CurveZMQ."""
    import zmq
    from zmq.utils import z85

    if not zmq.has("curve"):
        sys.exit(
            f"{TAG} pyzmq {zmq.__version__} of {sys.executable} has no CurveZMQ (libzmq without libsodium): "
            "the kernel's channels must be encrypted; install pyzmq from its wheels"
        )
    sec = z85.encode(bytes.fromhex(hex_secret))
    return zmq.curve_public(sec).decode("ascii"), sec.decode("ascii")


def main():
    # type: () -> None
    key = secret("PAI_KERNEL_KEY", "connection key (secrets.kernelKey)")
    curve = secret("PAI_KERNEL_CURVE_KEY", "CurveZMQ key (secrets.kernelCurveKey)")
    try:
        import ipykernel  # noqa: F401
    except ImportError:
        sys.exit(
            f"{TAG} {sys.executable} has no ipykernel: run the kernel with a python that has it "
            "(an image with python and ipykernel, e.g. `pip install ipykernel`)"
        )
    public, private = curve_keys(curve)
    info = {f"{label}_port": port(label) for label in LABELS}  # type: dict[str, int | str]
    info.update(
        ip=os.environ.get("PAI_KERNEL_IP", "127.0.0.1"),
        key=key,
        transport="tcp",
        signature_scheme="hmac-sha256",
        kernel_name=os.environ.get("PAI_KERNEL_NAME", ""),
        curve_publickey=public,
        curve_secretkey=private,
    )
    child = []  # type: list[tuple[subprocess.Popen[bytes] | None, str]]  # (the kernel's process, its temp dir)

    def ending(signum, _frame):  # stopped: the kernel ends too, and its temp dir goes
        # type: (int, object) -> None
        for proc, home in child:
            if proc is not None and proc.poll() is None:
                proc.send_signal(signum)
            shutil.rmtree(home, ignore_errors=True)
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)

    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, ending)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # an interrupt is the kernel's, never the loop's
    rc = run(info, child)
    if rc == 0:  # a shutdown: the provisioner stops the job now (STOPPED); end on our own if it never does
        time.sleep(LINGER)
    if rc < 0:
        signal.signal(-rc, signal.SIG_DFL)
        os.kill(os.getpid(), -rc)
    sys.exit(rc)


def run(info, child):
    # type: (dict[str, int | str], list[tuple[subprocess.Popen[bytes] | None, str]]) -> int
    """Run kernels until one ends for a reason other than a restart; its exit code (negative: a signal). Each
    kernel gets its connection file in a temp dir of its own, which it removes once it has read it (so not even a
    SIGKILL of the whole task leaves one behind), and a pipe it writes to when its shutdown asks for a restart."""
    n = 0
    while True:
        home = tempfile.mkdtemp(prefix="pai-kernel-")
        child[:] = [(None, home)]
        path = os.path.join(home, "connection.json")
        with os.fdopen(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "w") as f:
            json.dump(info, f)
        said, tell = os.pipe()
        print(f"{TAG} kernel {n} starting in {os.getcwd()}", flush=True)
        try:
            proc = subprocess.Popen(
                [sys.executable, "-c", KERNEL, path, str(tell)],
                pass_fds=(tell,),
                preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
            )
        finally:
            os.close(tell)
        child[:] = [(proc, home)]
        rc = proc.wait()
        shutil.rmtree(home, ignore_errors=True)  # a kernel that failed before reading it
        os.set_blocking(said, False)
        try:
            restart = os.read(said, 1) == b"r"
        except BlockingIOError:  # a process the kernel started holds the pipe open; the kernel wrote nothing
            restart = False
        os.close(said)
        if rc == 0 and restart:
            print(f"{TAG} kernel {n} ended for a restart", flush=True)
            n += 1
            continue
        how = f"signal {-rc}" if rc < 0 else f"exit code {rc}"
        print(f"{TAG} kernel {n} ended with {how}", flush=True)
        return rc


main()
