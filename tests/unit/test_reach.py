"""Where another host's task reaches this one (cluster/runtime/reach.py), and so where ``pai hub start`` lets the
Hub listen (cli/hubsetup.hub_address): this host's address on the route to a node, never loopback for a node on
another host, never every interface."""

from __future__ import annotations

from pai_jupyter.cli.hubsetup import HubSettings, hub_address
from pai_jupyter.cluster.runtime.reach import source_address, toward


def test_the_route_to_a_node_names_this_hosts_address_on_its_way_and_loopback_is_left_out() -> None:
    assert source_address("127.0.0.1") == "127.0.0.1"
    assert source_address("no-such-node.invalid") is None
    assert toward(["127.0.0.1", "localhost", "no-such-node.invalid"]) == []  # (nodes on this host: loopback does)


def test_the_hub_listens_where_the_daemon_listens_for_the_nodes_else_on_loopback() -> None:
    assert hub_address({"url": "http://127.0.0.1:4000", "nodesUrl": "http://10.203.7.1:4000"}) == "10.203.7.1"
    assert hub_address({"url": "http://127.0.0.1:4000"}) == "127.0.0.1"
    assert hub_address({"nodesUrl": "http://[fd00::1]:4000"}) == "fd00::1"
    chosen = HubSettings("127.0.0.1", 8000, 8081, 8001, "dummy", [], "", hub_ip="fd00::1")
    assert chosen.api_url == "http://[fd00::1]:8081/hub/api"
    assert HubSettings("127.0.0.1", 8000, 8081, 8001, "dummy", [], "").api_url == "http://127.0.0.1:8081/hub/api"
