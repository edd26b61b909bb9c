"""The notebook form's job fields come from the one form definition (protocol/formspec.py JOB_FIELDS) by kind and
path, as the Lab's do: a field added there is drawn, written to and read from the v1 document with nothing else."""

from __future__ import annotations

import json

import pytest

from pai_jupyter.protocol import formspec
from pai_jupyter.protocol.formspec import FormField

NOTE = FormField("note", "extras.note", "Note", "备注", "text", "", optional=True)
PRIORITY = FormField("priority", "jobPriority", "Priority", "优先级", "number", 0, pro=True, optional=True)


@pytest.fixture
def added(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(formspec, "JOB_FIELDS", (*formspec.JOB_FIELDS, NOTE, PRIORITY))


def test_an_added_field_is_drawn_written_and_read(added: None) -> None:
    from pai_jupyter.notebook.form import JobForm

    form = JobForm()
    note, priority = form.job_fields["note"], form.job_fields["priority"]
    assert note.box in form.children and priority.box in form.pro_box.children  # basic and pro by the definition
    assert note.widget.description == "Note" and "备注" in note.widget.tooltip
    doc = json.loads(form.to_json())
    assert "note" not in doc.get("extras", {}) and "jobPriority" not in doc  # optional: left out while unset
    note.value, priority.value = "  nightly run ", 3
    doc = json.loads(form.to_json())
    assert doc["extras"]["note"] == "nightly run" and doc["jobPriority"] == 3

    again = JobForm(doc)
    assert again.job_fields["note"].value == "nightly run" and again.job_fields["priority"].value == 3
    assert again.pro.value  # a pro field set turns pro mode on


def test_the_known_fields_keep_their_document() -> None:
    from pai_jupyter.notebook.form import JobForm

    doc = {
        "jobName": "j",
        "image": "img",
        "virtualCluster": "vc1",
        "gpuType": "a100",
        "retryCount": 2,
        "jobEnvs": {"A": "1"},
        "dataDir": "/kept",
        "extras": {"maxRunTimeMinutes": 30, "storages": [{"name": "s", "mountPath": "/mnt"}], "other": 1},
        "taskRoles": [{"name": "main", "command": "echo", "taskNumber": 1}],
    }
    out = json.loads(JobForm(doc).to_json())
    assert {k: out[k] for k in doc if k not in ("extras", "taskRoles")} == {
        k: v for k, v in doc.items() if k not in ("extras", "taskRoles")
    }
    assert out["extras"] == doc["extras"]
    form = JobForm(doc)
    form.job_fields["env"].value = "A=1\nbad line"
    assert [p for p, _ in form.to_v1()[1]] == ["jobEnvs"]  # the bad line, at the field's path
