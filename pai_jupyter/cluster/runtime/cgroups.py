"""Per-task cgroups for the process runtime: a memory limit the kernel enforces, a CPU quota, and a cap on the
number of processes (``pids.max``: a fork bomb in one task stays in that task, default ``DEFAULT_PIDS_LIMIT``).

Each task gets ``<the daemon's own cgroup>/pai_jupyter/<key>`` in the memory (and, if writable, cpu and pids)
hierarchy. Nesting under the daemon's own cgroup keeps tasks inside whatever limits the daemon itself runs under
and works in delegated subtrees (containers, systemd user slices). The shim joins the cgroups itself, by writing
its pid to the ``cgroup.procs`` paths listed in ``TASK_DIR/cgroup``, before it runs the command, so the
command and everything it forks are limited from their first instruction.

cgroup v1 (``memory`` + ``cpu`` + ``pids`` hierarchies) is what these machines have; joining the pids one costs
little (the first move of a process waits for an RCU grace period, a move right after it does not: 0.2 ms
measured). cgroup v2 (one unified hierarchy, ``memory.max``) is used when that is the machine's memory controller
and it can be delegated. Nothing here raises when cgroups are unusable: ``CgroupManager.available`` is False and
the caller falls back to a watchdog.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import time
from dataclasses import dataclass
from pathlib import Path

from .base import DEFAULT_PIDS_LIMIT

PARENT_NAME = "pai_jupyter"


def _mounts() -> dict[str, tuple[str, str]]:
    """Controller ("memory", "cpu", "pids", or "" for cgroup2) -> (mount point, root of the mount) from mountinfo."""
    found: dict[str, tuple[str, str]] = {}
    try:
        lines = Path("/proc/self/mountinfo").read_text().splitlines()
    except OSError:
        return found
    for line in lines:
        left, _, right = line.partition(" - ")
        fields, rfields = left.split(), right.split()
        if len(fields) < 5 or len(rfields) < 3:
            continue
        fstype, root, point = rfields[0], fields[3], fields[4]
        if fstype == "cgroup2":
            found.setdefault("", (point, root))
        elif fstype == "cgroup":
            for opt in rfields[2].split(","):
                if opt in ("memory", "cpu", "pids"):
                    found.setdefault(opt, (point, root))
    return found


def _own_paths() -> dict[str, str]:
    """Controller -> this process's cgroup path ("" is the cgroup2 entry), from /proc/self/cgroup."""
    paths: dict[str, str] = {}
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/cgroup").read_text().splitlines():
            _, controllers, path = line.split(":", 2)
            for c in controllers.split(",") if controllers else [""]:
                paths[c] = path
    return paths


def _own_dir(controller: str, mounts: dict[str, tuple[str, str]], own: dict[str, str]) -> Path | None:
    if controller not in mounts or controller not in own:
        return None
    point, root = mounts[controller]
    path = own[controller]
    if root != "/" and path.startswith(root):  # a namespaced mount shows only its own subtree
        path = path[len(root) :]
    return Path(point) / path.lstrip("/")


def _write(path: Path, value: str) -> None:
    with open(path, "w") as f:
        f.write(value)


def _read_counter(path: Path, name: str) -> int:
    """A ``name N`` line of a flat keyed file such as memory.oom_control or memory.events (0 when absent)."""
    with contextlib.suppress(OSError, ValueError):
        for line in path.read_text().splitlines():
            key, _, value = line.partition(" ")
            if key == name:
                return int(value)
    return 0


@dataclass
class TaskCgroup:
    """The cgroup directories of one task; rebuilt from a TaskHandle's info after a daemon restart."""

    version: int
    dirs: list[Path]  # dirs[0] holds the memory controller (v1: then cpu and pids, where the task has them)
    # each dir's inode when it was made: once the task's cgroup is removed, another task may get a cgroup of the
    # same name (task keys repeat: a job submitted again, the tests' runtimes), which a late remove() of this one
    # (a job deleted after its task ended) must neither kill nor remove. None: not known (an older handle).
    inodes: list[int] | None = None

    def _current(self) -> list[Path]:
        """The dirs that are still this task's own."""
        if self.inodes is None or len(self.inodes) != len(self.dirs):
            return list(self.dirs)
        mine = []
        for d, ino in zip(self.dirs, self.inodes, strict=True):
            with contextlib.suppress(OSError):
                if d.stat().st_ino == ino:
                    mine.append(d)
        return mine

    @property
    def memory_dir(self) -> Path:
        return self.dirs[0]

    def procs_paths(self) -> list[str]:
        return [str(d / "cgroup.procs") for d in self.dirs]

    def enter(self, pid: int) -> None:
        """Move process ``pid`` into the task's cgroup(s) (on v1 each move waits for an RCU grace period)."""
        for path in self.procs_paths():
            _write(Path(path), str(pid))

    def pids(self) -> set[int]:
        found: set[int] = set()
        for d in self._current():
            with contextlib.suppress(OSError, ValueError):
                found.update(int(x) for x in (d / "cgroup.procs").read_text().split())
        return found

    def signal_all(self, sig: int) -> None:
        """Signal every process in the task's cgroups, including any that left the process group (setsid)."""
        for pid in self.pids():
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, sig)

    def oom_kills(self) -> int:
        if self.version == 1:
            return _read_counter(self.memory_dir / "memory.oom_control", "oom_kill")
        return _read_counter(self.memory_dir / "memory.events", "oom_kill")

    def failcnt(self) -> int:
        if self.version == 1:
            with contextlib.suppress(OSError, ValueError):
                return int((self.memory_dir / "memory.failcnt").read_text())
            return 0
        return _read_counter(self.memory_dir / "memory.events", "max")

    def forks_refused(self) -> tuple[int, str]:
        """How many times the task's pids limit refused a fork (``pids.events``' ``max``), and that limit; (0, "")
        where the task has no pids cgroup."""
        for d in self.dirs:
            if (d / "pids.events").exists():
                with contextlib.suppress(OSError):
                    return _read_counter(d / "pids.events", "max"), (d / "pids.max").read_text().strip()
        return 0, ""

    def remove(self, timeout: float = 1.0) -> bool:
        """SIGKILL what is left, then rmdir; a dying process leaves its cgroup a moment after the signal."""
        deadline = time.monotonic() + timeout
        for d in self._current():
            while True:
                try:
                    d.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    if time.monotonic() > deadline:
                        return False
                    self.signal_all(signal.SIGKILL)
                    time.sleep(0.01)
        return True

    def describe(self) -> str:
        return f"cgroup v{self.version}"

    def to_info(self) -> dict[str, object]:
        return {
            "cgroup": str(self.memory_dir),
            "cgroup_dirs": [str(d) for d in self.dirs],
            "cgroup_version": self.version,
            **({"cgroup_inodes": self.inodes} if self.inodes is not None else {}),
        }

    @classmethod
    def from_procs(cls, procs_paths: list[str]) -> TaskCgroup:
        """From the ``cgroup.procs`` paths the shim was told to join (TASK_DIR/cgroup), memory's first."""
        dirs = [Path(p).parent for p in procs_paths]
        return cls(version=1 if (dirs[0] / "memory.limit_in_bytes").exists() else 2, dirs=dirs)

    @classmethod
    def from_info(cls, info: dict[str, object]) -> TaskCgroup | None:
        dirs = info.get("cgroup_dirs") or ([info["cgroup"]] if info.get("cgroup") else [])
        if not dirs or not isinstance(dirs, list):
            return None
        inodes = info.get("cgroup_inodes")
        known = [int(str(i)) for i in inodes] if isinstance(inodes, list) else None
        return cls(version=int(str(info.get("cgroup_version") or 1)), dirs=[Path(str(d)) for d in dirs], inodes=known)


class CgroupManager:
    """Finds where task cgroups can be made on this machine (checked once, by really making one).
    ``pids_limit``: the most processes a task may have (where a pids cgroup is writable; 0: no limit)."""

    def __init__(self, cpu_limits: bool = True, pids_limit: int = DEFAULT_PIDS_LIMIT) -> None:
        self.version = 0
        self.memory_parent: Path | None = None
        self.cpu_parent: Path | None = None
        self.pids_parent: Path | None = None
        self.pids_limit = max(0, pids_limit)
        mounts, own = _mounts(), _own_paths()
        v1_mem = _own_dir("memory", mounts, own)
        if v1_mem is not None and self._probe(v1_mem / PARENT_NAME, "memory.limit_in_bytes", str(64 << 20)):
            self.version, self.memory_parent = 1, v1_mem / PARENT_NAME
            v1_cpu = _own_dir("cpu", mounts, own) if cpu_limits else None
            if v1_cpu is not None and self._probe(v1_cpu / PARENT_NAME, "cpu.cfs_quota_us", "-1"):
                self.cpu_parent = v1_cpu / PARENT_NAME
            v1_pids = _own_dir("pids", mounts, own) if self.pids_limit else None
            if v1_pids is not None and self._probe(v1_pids / PARENT_NAME, "pids.max", "max"):
                self.pids_parent = v1_pids / PARENT_NAME
            return
        v2 = _own_dir("", mounts, own)
        if v2 is not None and self._setup_v2(v2):
            self.version, self.memory_parent = 2, v2 / PARENT_NAME
            if cpu_limits and "cpu" in self._controllers(self.memory_parent):
                self.cpu_parent = self.memory_parent
            if self.pids_limit and "pids" in self._controllers(self.memory_parent):
                self.pids_parent = self.memory_parent

    @property
    def available(self) -> bool:
        return self.memory_parent is not None

    def describe(self) -> str:
        return f"cgroup v{self.version}" if self.available else "none"

    def describe_pids(self) -> str:
        """The cap on a task's processes, in words."""
        if self.pids_parent is not None:
            return f"at most {self.pids_limit} per task (pids cgroup)"
        return "not limited (pids limit 0)" if not self.pids_limit else "not limited (no writable pids cgroup)"

    @staticmethod
    def _probe(parent: Path, limit_file: str, value: str) -> bool:
        """Really make a cgroup under ``parent`` and set a limit in it: mkdir alone can succeed where writes fail."""
        probe = parent / f"probe-{os.getpid()}"
        try:
            parent.mkdir(exist_ok=True)
            probe.mkdir(exist_ok=True)
            try:
                _write(probe / limit_file, value)
                return True
            finally:
                probe.rmdir()
        except OSError:
            return False

    @staticmethod
    def _controllers(d: Path) -> set[str]:
        with contextlib.suppress(OSError):
            return set((d / "cgroup.subtree_control").read_text().split())
        return set()

    def _setup_v2(self, own: Path) -> bool:
        """v2 needs memory delegated down to pai_jupyter/<key>; the daemon's own cgroup may not allow it."""
        try:
            if "memory" not in (own / "cgroup.controllers").read_text().split():
                return False
            if "memory" not in self._controllers(own):
                _write(own / "cgroup.subtree_control", "+memory")  # EBUSY when own holds processes (no-internal rule)
            for extra in ("+cpu", "+pids"):
                with contextlib.suppress(OSError):
                    _write(own / "cgroup.subtree_control", extra)
            parent = own / PARENT_NAME
            parent.mkdir(exist_ok=True)
            _write(parent / "cgroup.subtree_control", "+memory")
            for extra in ("+cpu", "+pids"):
                with contextlib.suppress(OSError):
                    _write(parent / "cgroup.subtree_control", extra)
            return self._probe(parent, "memory.max", "max")
        except OSError:
            return False

    def create(self, key: str, memory_mb: int, cpu: int) -> TaskCgroup:
        """Make the task's cgroup(s) with the limits set; raises OSError when the machine refuses."""
        cgroup = self.make(key, with_cpu=cpu > 0)
        try:
            self.limit(cgroup, memory_mb, cpu)
        except OSError:
            cgroup.remove(0)
            raise
        return cgroup

    def make(self, key: str, with_cpu: bool = True) -> TaskCgroup:
        """New empty cgroup(s) named after ``key``, without limits (the memory one first)."""
        assert self.memory_parent is not None
        name = re.sub(r"[^A-Za-z0-9_.-]", "_", key)[:180] or "task"
        dirs = [self._fresh_dir(self.memory_parent, name)]
        if self.version == 1:
            wanted = [self.cpu_parent if with_cpu else None, self.pids_parent]
            for i, parent in enumerate(wanted):
                if parent is None or parent == self.memory_parent or parent in wanted[:i]:
                    continue  # none, or a hierarchy mounted together with one before (one cgroup holds both)
                try:
                    dirs.append(self._fresh_dir(parent, name))
                except OSError:
                    TaskCgroup(self.version, dirs).remove(0)
                    raise
        return TaskCgroup(self.version, dirs, [d.stat().st_ino for d in dirs])

    def _dir_under(self, cgroup: TaskCgroup, parent: Path | None) -> Path | None:
        """The task's cgroup of the hierarchy ``parent`` is in (v2: the one directory)."""
        if parent is None:
            return None
        if self.version == 2:
            return cgroup.memory_dir
        return next((d for d in cgroup.dirs if d.parent == parent), None)

    def limit(self, cgroup: TaskCgroup, memory_mb: int, cpu: int) -> None:
        """Set a task's memory limit (MB, 0 = none), CPU quota (cores, 0 = none) and its cap on processes
        (``pids_limit``) on its cgroup(s)."""
        mem = cgroup.memory_dir
        pids_dir = self._dir_under(cgroup, self.pids_parent)
        if pids_dir is not None:
            _write(pids_dir / "pids.max", str(self.pids_limit))
        if self.version == 1:
            if memory_mb > 0:
                _write(mem / "memory.limit_in_bytes", str(memory_mb << 20))
                with contextlib.suppress(OSError):  # absent without swap accounting
                    _write(mem / "memory.memsw.limit_in_bytes", str(memory_mb << 20))
            cpu_dir = self._dir_under(cgroup, self.cpu_parent)
            if cpu_dir is not None and cpu > 0:
                with contextlib.suppress(OSError, ValueError):
                    period = int((cpu_dir / "cpu.cfs_period_us").read_text())
                    _write(cpu_dir / "cpu.cfs_quota_us", str(cpu * period))
                    _write(cpu_dir / "cpu.shares", str(cpu * 1024))  # weighs as much as `cpu` busy processes
        else:
            if memory_mb > 0:
                _write(mem / "memory.max", str(memory_mb << 20))
                with contextlib.suppress(OSError):
                    _write(mem / "memory.swap.max", "0")
            if self.cpu_parent is not None and cpu > 0:
                with contextlib.suppress(OSError):
                    _write(mem / "cpu.max", f"{cpu * 100000} 100000")
                    _write(mem / "cpu.weight", str(min(10000, cpu * 100)))

    def sweep(self, prefix: str) -> int:
        """Remove the empty cgroups named ``prefix*`` (left by the warm shims of a daemon killed with -9); a cgroup
        that still holds a process cannot be removed, so live ones, another daemon's included, stay."""
        removed = 0
        for parent in {p for p in (self.memory_parent, self.cpu_parent, self.pids_parent) if p is not None}:
            with contextlib.suppress(OSError):
                for d in parent.glob(f"{prefix}*"):
                    with contextlib.suppress(OSError):
                        d.rmdir()
                        removed += 1
        return removed

    @staticmethod
    def _fresh_dir(parent: Path, name: str) -> Path:
        """A new, empty cgroup. A taken name (a leftover, or another daemon's task in a hierarchy shared with it,
        such as the cpu one) is side-stepped, never reused."""
        d = parent / name
        try:
            d.mkdir()
        except FileExistsError:
            d = parent / f"{name}.{time.time_ns()}"
            d.mkdir()
        return d
