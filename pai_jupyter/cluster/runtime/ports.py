"""The ports a runtime's tasks listen on (``PAI_PORT_LIST_*``, the in-task services): picked by the daemon when
it launches a task, from what the runtime supplies (``Runtime.ports``). Tasks of this host's runtimes share its
network, so they get free ports of this host, never one handed out twice while held. A range (``taskPorts`` in
cluster.yaml, Slurm's default) keeps them where a site's firewall lets them through, and off the ephemeral range
another machine's own connections take their local ports from (a Slurm node's, which this host cannot see)."""

from __future__ import annotations

import socket

from ...common.localserver import bindable

Span = tuple[int, int]  # (first, last), both included


def parse_span(text: object) -> Span:
    """``"20000-29999"`` as (20000, 29999); ValueError saying what is wrong."""
    first, sep, last = str(text).strip().partition("-")
    if not sep or not first.strip().isdigit() or not last.strip().isdigit():
        raise ValueError(f"taskPorts: {text!r} is not a range of ports like 20000-29999")
    span = (int(first), int(last))
    if not 1024 <= span[0] <= span[1] <= 65535:
        raise ValueError(f"taskPorts: {text!r} must run upwards within 1024-65535 (no privileged ports)")
    return span


class PortsExhausted(RuntimeError):
    """No free ports for a task now: its job waits for tasks holding some to end."""


class PortAllocator:
    """Free ports of this host, never handed out twice while held (``claim``: held again after a restart); from
    ``span`` when given, handed out in turn through it (a port just given back is the last to be taken again)."""

    def __init__(self, span: Span | None = None) -> None:
        self.held: set[int] = set()
        self.span = span
        self._next = span[0] if span else 0

    @staticmethod
    def _free(port: int) -> bool:
        # a port whose last connections linger in TIME_WAIT is free for a server (they set SO_REUSEADDR):
        # a kernel restarted in a new job gets its old ports back (pai_jupyter.kernel)
        return bindable("", port)

    def allocate(self, count: int, begin_at: int = 0) -> list[int]:
        ports: list[int] = []
        if begin_at:
            port = begin_at
            while len(ports) < count and port < 65536:
                if port not in self.held and self._free(port):
                    ports.append(port)
                port += 1
        if self.span is not None and len(ports) < count:
            ports += self._from_span(count - len(ports), set(ports))
        tries = 0
        while self.span is None and len(ports) < count and tries < 50 * count:
            tries += 1
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
                s.bind(("", 0))
                port = s.getsockname()[1]
            if port not in self.held and port not in ports:
                ports.append(port)
        if len(ports) < count:
            where = f"from {begin_at}" if begin_at else f"in {self.span[0]}-{self.span[1]}" if self.span else "here"
            raise PortsExhausted(f"no {count} free ports {where} ({len(self.held)} held by tasks)")
        self.held.update(ports)
        return ports

    def room(self) -> int | None:
        """How many ports ``span`` holds; None: no range (this host's free ports)."""
        return self.span[1] - self.span[0] + 1 if self.span else None

    def _from_span(self, count: int, taken: set[int]) -> list[int]:
        assert self.span is not None
        first, size = self.span[0], self.room() or 0
        found: list[int] = []
        for step in range(size):
            port = first + (self._next - first + step) % size
            if port not in self.held and port not in taken and self._free(port):
                found.append(port)
                if len(found) == count:
                    self._next = first + (port - first + 1) % size
                    break
        return found

    def claim(self, ports: list[int]) -> None:
        self.held.update(ports)

    def release(self, ports: list[int]) -> None:
        self.held.difference_update(ports)
