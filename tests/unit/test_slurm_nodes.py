"""Slurm's nodes as ``sinfo -h -N -o NODE_FORMAT`` prints them: each node once (a node is listed once per partition),
its GPUs from its GRES, and ready only in a state that takes tasks (``idle*``: slurmctld hears nothing from it)."""

from __future__ import annotations

from pai_jupyter.cluster.runtime.base import Node
from pai_jupyter.cluster.runtime.slurm.commands import node_table, parse_nodes

SINFO = """n1 2 4000 gpu:2 idle 10.203.0.11
n1 2 4000 gpu:2 idle 10.203.0.11
n2 4 8000 gpu:tesla:2,gpu:k80:1 mixed 10.203.0.12
n3 8 16000 (null) idle* n3
n4 8 16000 (null) drained 10.203.0.14
"""


def test_each_node_once_with_its_gpus_address_and_readiness() -> None:
    assert node_table(SINFO) == [
        Node("n1", "10.203.0.11", 2, 4000, 2, True),
        Node("n2", "10.203.0.12", 4, 8000, 3, True),
        Node("n3", "n3", 8, 16000, 0, False),
        Node("n4", "10.203.0.14", 8, 16000, 0, False),
    ]
    assert parse_nodes(SINFO) == (22, 44000, 5)
    assert parse_nodes("n1 2 4000 gpu:2\nn1 2 4000 gpu:2\n") == (2, 4000, 2)  # the four columns resources() asks
