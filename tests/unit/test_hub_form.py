"""The spawn page's form (pai_jupyter/hub/form.py): the one form definition's fields, checked by the job rules with
the same words as every other form, each problem beside its field, and nothing unescaped into the page."""

from __future__ import annotations

import json
import re
from html import unescape
from typing import Any

import pytest

from pai_jupyter.hub import form
from pai_jupyter.protocol import load as protocol_load
from pai_jupyter.protocol.errors import JobValidationError
from pai_jupyter.protocol.formspec import JOB_FIELDS, ROLE_FIELDS

EVIL = '"><img src=x onerror=alert(1)>'
GOOD = {"vc": "default", "cpu": "2", "memory": "2048", "gpu": "0", "image": "python:3.11", "max_run": "90"}


def data(**over: str) -> dict[str, list[str]]:
    return {k: [v] for k, v in {**GOOD, **over}.items()}


def fields(html: str) -> dict[str, str]:
    """Each field's block of the rendered form, by its key."""
    return dict(re.findall(r'data-field="(\w+)">(.*?)</div>\n(?=<div class="mb-3|</div>$)', html, re.S))


def test_the_fields_are_the_one_form_definitions() -> None:
    html = form.render(["default"], "", form.Rendered(form.DEFAULTS, {}))
    definition = {f.key: f for f in (*JOB_FIELDS, *ROLE_FIELDS)}
    shown = re.findall(r'<label class="form-label" for="pai-(\w+)">([^<]*)</label>', html)
    assert [key for key, _ in shown] == ["vc", "cpu", "memory", "gpu", "image", "max_run"]
    for key, label in shown:
        assert unescape(label) == definition[key].label


def test_good_values_make_the_user_options() -> None:
    assert form.options(data()) == {
        "vc": "default",
        "cpu": 2,
        "memoryMB": 2048,
        "gpu": 0,
        "image": "python:3.11",
        "maxRunTimeMinutes": 90,
    }
    assert form.options(data(max_run="0"))["maxRunTimeMinutes"] is None
    assert form.options(data(max_run="", cpu="3.0"))["cpu"] == 3


@pytest.mark.parametrize(
    ("field", "value", "path"),
    [
        ("memory", "50", "taskRoles[0].memoryMB"),
        ("cpu", "many", "taskRoles[0].cpuNumber"),
        ("gpu", "-1", "taskRoles[0].gpuNumber"),
        ("image", "", "image"),
        ("max_run", "-5", "extras.maxRunTimeMinutes"),
    ],
)
def test_a_refused_value_is_told_beside_its_field_in_the_job_rules_own_words(field: str, value: str, path: str) -> None:
    with pytest.raises(form.FormError) as refused:
        form.options(data(**{field: value}))
    assert set(refused.value.problems) == {field}
    doc: dict[str, Any] = {
        "jobName": "j",
        "image": GOOD["image"],
        "taskRoles": [
            {"name": "server", "taskNumber": 1, "cpuNumber": 2, "memoryMB": 2048, "gpuNumber": 0, "command": "x"}
        ],
    }
    typed = form._number(value)
    if field == "image":
        doc["image"] = value
    elif field == "max_run":
        doc["extras"] = {"maxRunTimeMinutes": typed}
    else:
        doc["taskRoles"][0][{"cpu": "cpuNumber", "memory": "memoryMB", "gpu": "gpuNumber"}[field]] = typed
    with pytest.raises(JobValidationError) as same:
        protocol_load.job_from_text(json.dumps(doc))
    assert [p.path for p in same.value.problems] == [path]
    assert refused.value.problems[field] == [p.message for p in same.value.problems]
    html = form.render(["default"], "", form.Rendered(refused.value.values, refused.value.problems))
    block = fields(html)[field]
    assert (
        "is-invalid" in block
        and unescape(re.findall(r'pai-error">([^<]*)<', block)[0]) == same.value.problems[0].message
    )
    assert f'value="{value}"' in block or value == ""  # what was typed is shown again, not the default
    assert all("pai-error" not in b for k, b in fields(html).items() if k != field)


def test_the_rest_apis_user_options_are_checked_the_same_way() -> None:
    opts = form.server_options({"cpu": 3, "memoryMB": 1024, "vc": "default"}, {"image": "img:1"})
    assert (opts.cpu, opts.memory_mb, opts.gpu, opts.image, opts.max_run_minutes) == (3, 1024, 0, "img:1", None)
    with pytest.raises(form.FormError) as refused:
        form.server_options({"memoryMB": 10})
    assert refused.value.problems == {"memory": ["10 is below the minimum 100"]}


def test_nothing_from_a_user_or_the_cluster_reaches_the_page_unescaped() -> None:
    shown = form.Rendered({**GOOD, "image": EVIL, "vc": EVIL}, {"cpu": [EVIL], "": [EVIL]})
    html = form.render(["default", EVIL], "", shown)
    assert "<img" not in html and "onerror=alert(1)>" not in html
    assert html.count("&lt;img src=x onerror=alert(1)&gt;") == 5  # a vc option's value and text, the image, 2 problems
    assert f'value="{EVIL.replace(chr(34), "&quot;").replace("<", "&lt;").replace(">", "&gt;")}"' in html


def test_without_the_clusters_list_the_virtual_cluster_is_a_text_box_saying_why() -> None:
    html = form.render(None, "the cluster does not answer <now>", form.Rendered(form.DEFAULTS, {}))
    block = fields(html)["vc"]
    assert '<input class="form-control" id="pai-vc" name="vc" type="text"' in block
    assert "could not be fetched (the cluster does not answer &lt;now&gt;)" in block
