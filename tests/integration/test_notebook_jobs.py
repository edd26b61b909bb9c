"""Notebooks as jobs against a real daemon (process runtime, papermill from the task tools) and a real ``jupyter
server``: ``pai run-notebook -p`` and the Lab's ``POST pai/api/notebook-jobs`` run a notebook with its
``parameters`` cell overridden; the executed notebook is readable through ``pai/api/jobs/{id}/notebook`` while
the job runs (a cell waits on a gate file the test opens) and after; other users' jobs and non-notebook jobs are
404; a task without papermill fails with the reason in its log."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pai_jupyter.protocol.notebookjob import EXIT_NO_PAPERMILL
from tests.helpers.daemon import reachable, v1
from tests.helpers.jupyter_fixture import write_notebook
from tests.helpers.notebook import Env, gated_notebook, papermill_servers

pytestmark = pytest.mark.slow
GATE_OUTPUT = r">through the gate\s*</pre>"  # the cell's output (its source says it too, quoted)


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    tmp: Path = tmp_path_factory.mktemp("nbjobs")
    with papermill_servers(tmp) as (s, gates):
        api = s.daemon()
        bob = api.new_user("bob")
        jupyter = s.jupyter()
        yield Env(api, bob, jupyter, tmp / "jupyter" / "root", gates)


def _outputs(nb: dict[str, Any]) -> str:
    texts = [o.get("text", "") for c in nb["cells"] if c["cell_type"] == "code" for o in c.get("outputs", [])]
    return "".join(t if isinstance(t, str) else "".join(t) for t in texts)  # nbformat: a string or its lines


def _executed(env: Env, job: str, want: str, state: str) -> dict[str, Any]:
    """Poll the route until the executed notebook's outputs hold ``want`` while the job is in ``state``."""
    from tests.polling import wait_for

    http = env.jupyter.http()
    seen: list[Any] = []

    def ready() -> dict[str, Any] | None:
        r = http.get(f"pai/api/jobs/{job}/notebook")
        seen[:] = [r.status_code, r.text[-800:]]
        if r.status_code != 200:
            return None
        body: dict[str, Any] = r.json()
        return body if body["notebook"] and want in _outputs(body["notebook"]) and body["state"] == state else None

    return wait_for(ready, 90, lambda: f"{want!r} in {job}'s executed notebook ({state}); last: {seen}")


def test_run_notebook_is_readable_while_it_runs_and_after(env: Env) -> None:
    folder = env.root / "exp"
    gated_notebook(folder / "train.ipynb")
    gate = env.gates / "cli"
    params = ["-p", "lr", "0.5", "-p", "epochs", "3", "-p", "gate", str(gate)]
    pai = [sys.executable, "-m", "pai_jupyter.cli"]
    cli = subprocess.run(
        [*pai, "run-notebook", str(folder / "train.ipynb"), *params, "--name", "nb-cli"],
        capture_output=True,
        text=True,
        env={**os.environ, "PAI_JUPYTER_HOME": str(env.api.home)},
        timeout=60,
    )
    assert cli.returncode == 0, cli.stderr
    job = cli.stdout.strip()
    assert job.endswith("~nb-cli")
    running = _executed(env, job, "lr 0.5 epochs 3 int", "RUNNING")  # papermill's -p types: 3 stays an int
    assert "through the gate" not in _outputs(running["notebook"])
    assert running["parameters"] == {"lr": 0.5, "epochs": 3, "gate": str(gate)}
    assert running["name"] == "train.executed.ipynb"
    tags = [c["metadata"].get("tags", []) for c in running["notebook"]["cells"]]
    assert ["injected-parameters"] in tags  # papermill's own injection after the parameters cell
    page = env.jupyter.http().get(f"pai/api/jobs/{job}/notebook?format=html")
    assert page.status_code == 200, page.text
    assert page.headers["Content-Security-Policy"].startswith("sandbox")
    assert page.headers["Content-Type"].startswith("text/html")  # a page, not JSON
    assert "lr 0.5 epochs 3 int" in page.text and not re.search(GATE_OUTPUT, page.text)
    gate.touch()
    env.api.wait(job, timeout=90)
    assert env.api.detail(job)["jobStatus"]["state"] == "SUCCEEDED"
    done = _executed(env, job, "through the gate", "SUCCEEDED")
    assert "lr 0.5 epochs 3 int" in _outputs(done["notebook"])
    page = env.jupyter.http().get(f"pai/api/jobs/{job}/notebook?format=html")
    assert re.search(GATE_OUTPUT, page.text)
    # the source notebook is untouched: the executed copy is the job's
    assert "injected-parameters" not in (folder / "train.ipynb").read_text()


def test_lab_submits_a_notebook_and_only_its_owner_reads_it(env: Env) -> None:
    gated_notebook(env.root / "lab" / "train.ipynb")
    http = env.jupyter.http()
    r = http.post("pai/api/notebook-jobs", json={"path": "lab/train.ipynb", "parameters": {"lr": 2, "epochs": 1}})
    assert r.status_code == 202, r.text
    job = r.json()["id"]
    _executed(env, job, "lr 2 epochs 1 int", "SUCCEEDED")
    assert http.post("pai/api/notebook-jobs", json={"path": "../outside.ipynb"}).status_code == 404
    assert http.post("pai/api/notebook-jobs", json={"path": "lab/nothing.ipynb"}).status_code == 404
    assert env.jupyter.http(None).get(f"pai/api/jobs/{job}/notebook").status_code == 403
    plain = env.api.submit_ok(v1("nb-plain", "true"))
    assert http.get(f"pai/api/jobs/{plain}/notebook").status_code == 404  # not a notebook job
    bobs = env.bob.submit_ok(v1("bob-plain", "true"))
    assert http.get(f"pai/api/jobs/{bobs}/notebook").status_code == 404  # someone else's job


def test_a_task_without_papermill_says_so_in_its_log(env: Env) -> None:
    """Clear error where the image (here: the host without the task tools on PATH) has no papermill."""
    from pai_jupyter.protocol.notebookjob import notebook_job

    gated_notebook(env.root / "bare" / "train.ipynb")
    job = notebook_job("train.ipynb", str(env.root / "bare"), name="nb-bare")
    command = job.task_roles[0].commands[0].replace("${PAI_SERVICE_BIN:-/nonexistent}", "/nonexistent")
    role = job.task_roles[0].model_copy(update={"commands": [command]})
    job_id = env.api.submit_ok(job.model_copy(update={"task_roles": [role]}).to_yaml())
    detail = env.api.wait(job_id, timeout=60)
    assert detail["jobStatus"]["state"] == "FAILED"
    assert detail["jobStatus"]["appExitCode"] == EXIT_NO_PAPERMILL
    assert "papermill is not installed in this task" in env.api.log(job_id)


def test_estimator_takes_a_notebook_as_its_entry_point(env: Env, monkeypatch: pytest.MonkeyPatch) -> None:
    from pai_jupyter.sdk.estimator import Estimator

    monkeypatch.setenv("PAI_JUPYTER_HOME", str(env.api.home))
    gated_notebook(env.root / "est" / "train.ipynb")
    est = Estimator(entry_point=str(env.root / "est" / "train.ipynb"), hyperparameters={"lr": 0.25, "epochs": 4})
    est.fit(logs=False)
    assert est.job is not None
    done = _executed(env, est.job, "lr 0.25 epochs 4 int", "SUCCEEDED")
    assert done["parameters"] == {"lr": 0.25, "epochs": 4}
    assert (Path(est.tensorboard()) / "train.executed.ipynb").is_file()
    with pytest.raises(ValueError, match="not both"):
        Estimator("python3 x.py", entry_point=str(env.root / "est" / "train.ipynb"))


def _attack_job(name: str, output: str, swap: str, target: Path) -> str:
    """A job of the Estimator's layout (no host path: any user may submit it) that names its executed notebook
    ``output``, has a TensorBoard over its ``logs`` output, and whose command replaces ``swap`` (a directory its
    account owns, relative to the layout's ``ml/``) with a link to ``target``."""
    import json

    ml = '"${PAI_OUTPUT_LOGS%/output/logs/}"'
    # again until the link stays: the task's TensorBoard, starting beside the command, makes its logdir when it is
    # missing, and a directory made between the mv and the ln took the link inside it
    swapped = f"mv {ml}/{swap} {ml}/{swap}.away.$i && ln -s {target} {ml}/{swap}"
    stays = f"[ -L {ml}/{swap} ] && sleep 0.2 && [ -L {ml}/{swap} ]"
    command = f"for i in $(seq 50); do {swapped}; {stays} && break; done; {stays} && ls -la {ml}/output"
    doc = json.loads(v1(name, command))
    doc["extras"] = {
        "com.pai_jupyter.estimator": {},
        "com.pai_jupyter.notebook": {"notebook": "train.ipynb", "parameters": {}, "output": output},
        "com.microsoft.pai.runtimeplugin": [{"plugin": "tensorboard"}],
    }
    return json.dumps(doc)


def test_a_task_cannot_make_the_server_read_through_its_links(env: Env, tmp_path: Path) -> None:
    """``ml/`` is the task account's. Bob's task made ``ml/output/logs`` a link to the daemon's own directory and
    named its executed notebook ``runtime.json``: the Jupyter server (root, bob's profile) returned the daemon's
    admin token. Another made ``ml/output`` a link to a directory of root's holding a decoy notebook and event
    file: the server served both, and started TensorBoard over it as root. Each is refused now, and nothing of
    either target comes back."""
    from pai_jupyter.client.profiles import Profile, upsert_profile
    from tests.helpers.jupyter_fixture import task_url, write_events
    from tests.polling import wait_for

    if os.geteuid() != 0:
        pytest.skip("the attack is on a server running as root, against a task of another account")
    decoy = tmp_path / "decoy"
    (decoy / "logs").mkdir(parents=True)
    decoy.chmod(0o700)  # root's alone
    write_notebook(decoy / "logs" / "decoy.ipynb", "print('DECOY-NOTEBOOK')")
    write_events(decoy / "logs", run="decoy-run")
    reachable(env.api.home)  # (another pytest run as root on this machine makes /tmp/pytest-of-root 0700 again)
    token_job = env.bob.submit_ok(_attack_job("nb-link-logs", "runtime.json", "output/logs", env.api.home / "local"))
    decoy_job = env.bob.submit_ok(_attack_job("nb-link-output", "decoy.ipynb", "output", decoy))
    for job in (token_job, decoy_job):
        assert env.bob.wait(job, timeout=60)["jobStatus"]["state"] == "SUCCEEDED", env.bob.log(job)
    upsert_profile(Profile(name="bob", url=env.api.url, username="bob", token=env.bob.token), env.api.home)
    http = env.jupyter.http()
    assert http.put("pai/api/profiles/current", json={"name": "bob"}).status_code == 200
    try:
        for job in (token_job, decoy_job):
            for query in ("", "?format=html"):
                r = http.get(f"pai/api/jobs/{job}/notebook{query}")
                assert r.status_code == 404 and "link" in r.json()["message"], (job, r.status_code, r.text[:300])
                assert env.api.token not in r.text and "DECOY" not in r.text
        detail = http.get(f"pai/api/jobs/{decoy_job}").json()
        assert "tensorboardPage" not in detail["tasks"][0], detail["tasks"][0]  # no button for it
        runs = wait_for(
            lambda: r if (r := http.get(task_url(decoy_job, "tensorboard/data/runs"))).status_code != 503 else None,
            60,
            "the ended task's TensorBoard route to answer",
        )
        assert runs.status_code == 409 and "does not follow it" in runs.json()["message"], runs.text[:300]
        assert "decoy-run" not in runs.text
    finally:
        assert http.put("pai/api/profiles/current", json={"name": "local"}).status_code == 200
