"""The public names of ``pai_jupyter`` and ``pai_jupyter.client``: what ``__all__`` lists and what each name is.

User code, notebooks and the docs import these; moving code between modules must leave every one of them where
it is and what it is (the defining module is deliberately not pinned). A name added or removed is a deliberate
change to the public API: update this test with it."""

from __future__ import annotations

import importlib
import inspect
import subprocess
import sys
from typing import Any

import pydantic
import pytest

import pai_jupyter
import pai_jupyter.client as client

TOP = [
    "__version__",
    "Job",
    "TaskRole",
    "Port",
    "JobValidationError",
    "Client",
    "AsyncClient",
    "Estimator",
    "Sweep",
    "report",
]

# the client's errors: name -> (the class it derives from, its CLI exit code)
ERRORS = {
    "PaiError": (Exception, 3),
    "BadRequest": (client.PaiError, 2),
    "InvalidJob": (client.PaiError, 2),
    "JobConflict": (client.PaiError, 2),
    "JobNotFound": (client.PaiError, 2),
    "NotSupported": (client.PaiError, 2),
    "RateLimited": (client.PaiError, 3),
    "ServerUnavailable": (client.PaiError, 3),
    "Unauthorized": (client.PaiError, 3),
    "WaitTimeout": (client.PaiError, 1),
}
MODELS = ["JobDetail", "JobSummary", "TaskStatus", "Usage", "UsageFigures"]
# each call's answer that is not one of those: a model too, public so a caller can name what it gets
ANSWER_MODELS = [
    "JobAttempt",
    "JobEvent",
    "JobMetrics",
    "LeaseRenewal",
    "MaxRunTimeChange",
    "PriorityChange",
    "Report",
    "ServerInfo",
    "ServiceAction",
    "SweepRecord",
    "TaskService",
    "Tracking",
    "WaitingQueue",
]
FUNCTIONS = {"get_profile": ["name", "home"], "load_profiles": ["home"]}
CLIENT_METHODS = {
    "add_tag",
    "attempts",
    "clone",
    "config",
    "delete",
    "delete_sweep",
    "detail",
    "events",
    "follow",
    "info",
    "job_id",
    "list_jobs",
    "login",
    "list_sweeps",
    "logs",
    "metrics",
    "put_sweep_state",
    "report",
    "reports",
    "reports_of",
    "service_action",
    "services",
    "stop",
    "submit",
    "sweep_state",
    "terminal_endpoint",
    "wait",
    "where",
}


def test_pai_jupyter_all_is_pinned_and_each_name_is_what_it_says() -> None:
    assert pai_jupyter.__all__ == TOP
    assert isinstance(pai_jupyter.__version__, str) and pai_jupyter.__version__.count(".") == 2
    for name in ("Job", "TaskRole", "Port"):
        assert issubclass(getattr(pai_jupyter, name), pydantic.BaseModel), name
    assert issubclass(pai_jupyter.JobValidationError, ValueError)
    assert pai_jupyter.Client is client.Client and pai_jupyter.AsyncClient is client.AsyncClient
    assert pai_jupyter.Job is importlib.import_module("pai_jupyter.protocol").Job
    assert (
        inspect.isclass(pai_jupyter.Estimator)
        and pai_jupyter.Estimator is importlib.import_module("pai_jupyter.sdk").Estimator
    )
    assert pai_jupyter.Sweep is importlib.import_module("pai_jupyter.sweep").Sweep
    assert pai_jupyter.report is importlib.import_module("pai_jupyter.sweep.reporting").report
    assert callable(pai_jupyter.load_ipython_extension) and callable(pai_jupyter.unload_ipython_extension)


def test_client_all_is_pinned_and_each_name_is_what_it_says() -> None:
    expected = {"FINAL_STATES", "AsyncClient", "Client", "JobList", "Profile", *ERRORS, *MODELS, *ANSWER_MODELS}
    expected |= set(FUNCTIONS)
    assert sorted(client.__all__) == sorted(expected) and len(client.__all__) == len(expected)
    assert frozenset({"SUCCEEDED", "FAILED", "STOPPED"}) == client.FINAL_STATES
    for name, (base, exit_code) in ERRORS.items():
        cls = getattr(client, name)
        assert inspect.isclass(cls) and issubclass(cls, base) and cls.exit_code == exit_code, name
    assert issubclass(client.WaitTimeout, TimeoutError)
    for name in [*MODELS, *ANSWER_MODELS]:
        assert issubclass(getattr(client, name), pydantic.BaseModel), name
    assert issubclass(client.JobList, list)
    assert inspect.isclass(client.Profile)
    for name, params in FUNCTIONS.items():
        assert list(inspect.signature(getattr(client, name)).parameters) == params, name


def test_client_and_async_client_offer_the_same_calls() -> None:
    def public(cls: type) -> set[str]:
        return {n for n in dir(cls) if not n.startswith("_")}

    assert public(client.Client) >= CLIENT_METHODS
    assert public(client.Client) - {"close"} == public(client.AsyncClient) - {"aclose"}
    for name in CLIENT_METHODS - {"follow", "job_id", "where"}:
        assert inspect.iscoroutinefunction(getattr(client.AsyncClient, name)), name


@pytest.mark.parametrize("module", [pai_jupyter, client])
def test_every_listed_name_resolves_and_others_raise_attribute_error(module: Any) -> None:
    for name in module.__all__:
        assert getattr(module, name) is not None
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        module.nope  # noqa: B018


def test_importing_the_packages_stays_lazy() -> None:
    """``import pai_jupyter`` / ``pai_jupyter.client`` must not import pydantic, httpx or the daemon."""
    code = (
        "import sys, pai_jupyter, pai_jupyter.client; "
        "print(sorted(m for m in ('pydantic', 'httpx', 'tornado', 'pai_jupyter.cluster') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.strip() == "[]", out.stdout


@pytest.mark.parametrize("cls_name", ["Client", "AsyncClient"])
def test_no_public_call_answers_a_bare_dict(cls_name: str) -> None:
    """Every answer is a model (or a list / a mapping of them, a str, an int): no call hands out ``dict[str, Any]``
    for its callers to read by key."""
    cls = getattr(client, cls_name)
    bare = []
    for name in sorted(n for n in dir(cls) if not n.startswith("_")):
        member = getattr(cls, name)
        if not callable(member):
            continue
        answer = str(inspect.signature(member).return_annotation)  # as written (the modules' annotations are text)
        if "dict[str, Any]" in answer:
            bare.append(f"{name} -> {answer}")
    assert not bare, "\n".join(bare)
