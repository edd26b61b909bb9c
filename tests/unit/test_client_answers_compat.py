"""A client answer is a model now; code written when answers were dicts (``client.info()["capacity"]``, ``.get``)
keeps working with a DeprecationWarning that names the attribute to read."""

from __future__ import annotations

import pytest

from pai_jupyter.client.models import JobEvent, ServerInfo


def test_a_wire_name_still_reads_with_a_warning_naming_the_attribute() -> None:
    info = ServerInfo.model_validate({"capacity": {"cpu": 4}, "runtime": "process", "newField": 1})
    with pytest.warns(DeprecationWarning, match=r"ServerInfo\['capacity'\] is deprecated: read \.capacity"):
        assert info["capacity"] == info.capacity == {"cpu": 4}
    with pytest.warns(DeprecationWarning):
        assert info["newField"] == 1  # a field the model does not declare is kept, and read the same way
    with pytest.warns(DeprecationWarning):
        assert info.get("runtime") == info.runtime
    assert info.get("nothing", "default") == "default"
    with pytest.raises(KeyError):
        info["nothing"]


def test_an_aliased_field_reads_by_its_wire_name() -> None:
    fields = JobEvent.model_fields
    name, alias = next((n, f.alias) for n, f in fields.items() if f.alias and f.alias != n)
    event = JobEvent.model_validate({alias: "x"} if name != "time" else {alias: None})
    with pytest.warns(DeprecationWarning, match=rf"read \.{name}"):
        assert event[alias] == getattr(event, name)
