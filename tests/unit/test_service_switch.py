"""A service added to the catalogue with a form switch and an icon (common/services.py, and nothing else) is in the
notebook's submit form: its switch with its icon, its parameter beside it, and both in the v1 document the form
writes and reads. labextension/test/serviceswitch.test.ts sees the same service in the Lab's form."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import ipywidgets as W
import pytest

from pai_jupyter.common import services
from pai_jupyter.common.services import Param, Service, Switch
from pai_jupyter.protocol.formspec import PLUGIN_KEY, definition

BOARD = Service(
    "board",
    "Board",
    web="http",
    starts="tools",
    switch=Switch(
        "看板", help="runs where its plugin says", params=(Param("board_dir", "dir", "Board dir", "看板目录"),)
    ),
    icon='<circle cx="12" cy="12" r="9"/>',
)
# what a test in another process (the Lab's vitest) runs to see the form definition with the service added
ADDED = (
    "from pai_jupyter.common import services as s; "
    "s.CATALOGUE = (*s.CATALOGUE, s.Service('board', 'Board', web='http', starts='tools', "
    "switch=s.Switch('看板', params=(s.Param('board_dir', 'dir', 'Board dir', '看板目录'),)), "
    'icon=\'<circle cx="12" cy="12" r="9"/>\'))'
)


@pytest.fixture
def board(monkeypatch: pytest.MonkeyPatch) -> Service:
    monkeypatch.setattr(services, "CATALOGUE", (*services.CATALOGUE, BOARD))
    return BOARD


def test_the_form_definition_has_the_services_switch_icon_and_parameter(board: Service) -> None:
    plugins = {f["key"]: f for f in definition()["plugins"]}
    assert plugins["board"]["kind"] == "switch" and plugins["board"]["label_zh"] == "看板"
    assert plugins["board"]["icon"] == board.icon
    assert plugins["board_dir"]["path"] == "board.parameters.dir" and plugins["board_dir"]["kind"] == "text"


def test_the_notebook_form_draws_the_switch_with_its_icon_and_writes_and_reads_the_plugin(board: Service) -> None:
    from pai_jupyter.notebook.form import JobForm

    form = JobForm()
    row = form.plugins.widget.children
    switch = form.switches["board"]
    at = row.index(switch)
    assert isinstance(row[at - 1], W.HTML) and board.icon in row[at - 1].value  # its icon just before it
    assert "看板" in switch.tooltip and form.params["board_dir"] in row
    switch.value, form.params["board_dir"].value = True, "/data/board"
    doc, bad = form.to_v1()
    assert bad == [] and {"plugin": "board", "parameters": {"dir": "/data/board"}} in doc["extras"][PLUGIN_KEY]
    again = JobForm()
    again._fill(json.loads(json.dumps(doc)))
    assert again.switches["board"].value is True and again.params["board_dir"].value == "/data/board"
    assert again.switches["tensorboard"].value is False


def test_without_the_service_neither_form_has_it() -> None:
    """The check above can fail: the shipped catalogue has no such switch."""
    from pai_jupyter.notebook.form import JobForm

    assert "board" not in {f["key"] for f in definition()["plugins"]} and "board" not in JobForm().switches


def test_the_snippet_the_lab_test_runs_adds_the_same_service() -> None:
    code = (
        f"{ADDED}; import json; from pai_jupyter.protocol.formspec import definition; print(json.dumps(definition()))"
    )
    root = Path(__file__).parents[2]
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=root, check=True).stdout
    plugins = {f["key"]: f for f in json.loads(out)["plugins"]}
    assert plugins["board"]["icon"] == BOARD.icon and plugins["board_dir"]["label_zh"] == "看板目录"
