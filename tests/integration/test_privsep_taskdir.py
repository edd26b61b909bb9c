"""The task directory on a shared machine (docs/security.md): root never follows a path a task can write.

The audit's attacks, as a platform user other than the cluster's owner on a root daemon: the task plants symlinks
to the daemon's ``runtime.json`` (the admin token) and to a root-owned decoy where the daemon reads its logs, its
exit status and handle, its service files, and where it writes service requests and markers; then asks the daemon
to serve and write them. Before the split the task owned its directory and each plant worked (a ``runtime`` log
served the admin token; a service request overwrote and chowned the decoy). Also, on every daemon: a task's PATH
is not the workbench's venv, and a log location's token does not read a job re-created under the same name.
"""

from __future__ import annotations

import json
import os
import sys
from functools import partial
from pathlib import Path

import pytest

from pai_jupyter.cluster import control
from tests.helpers.daemon import Api, account_of, docker_or_skip, kill_leftovers, start_daemon, v1
from tests.helpers.jobdocs import v2_doc, v2_role
from tests.helpers.privsep import DECOY_TEXT, plant_job, root_only, served_everything
from tests.polling import wait_for

PLANTS = (
    "runtime",
    "stderr",
    "stdout",
    "all",
    "exit_code",
    "handle.json",
    "command.sh",
    "service-tensorboard.request",
    "service-tensorboard.stopped",
    "planted",
)


def _attack(runtime_json: Path, decoy: Path) -> str:
    lines = [
        "echo uid=$(id -u)",
        f'for f in {" ".join(PLANTS)}; do ln -sf {runtime_json} "$PAI_TASK_DIR/$f" 2>/dev/null '
        '&& echo "PLANTED-$f" || echo "DENIED-$f"; done',
        'mv "$PAI_TASK_DIR" "$PAI_TASK_DIR.moved" 2>/dev/null && echo MOVED || echo DENIED-move',
        'mv "$PAI_TASK_DIR/.." "$PAI_TASK_DIR/../../moved" 2>/dev/null && echo MOVED-job || echo DENIED-move-job',
        # run/ is the task's own: what it plants there the daemon reads without following
        f'ln -sf {runtime_json} "$PAI_TASK_DIR/run/service-tensorboard.missing" && echo RUN-LINK',
        f'ln -sf {decoy} "$PAI_TASK_DIR/run/service-tensorboard.log"',
        "echo ready",
        "sleep 60",
    ]
    return "\n".join(lines)


def _wait_for_line(api: Api, job: str, line: str) -> str:
    def seen() -> str | None:
        out = api.log(job, name="stdout")
        return out if line in out else None

    return wait_for(seen, 30, lambda: f"{job} to print {line!r}")


@root_only
def test_a_task_cannot_make_root_follow_its_links_on_the_process_runtime(tmp_path: Path) -> None:
    home = tmp_path / "pai-home"
    decoy = tmp_path / "decoy"
    decoy.write_text(DECOY_TEXT)
    os.chmod(decoy, 0o644)
    try:
        admin = start_daemon(home)
        bob = admin.new_user("pvbob")
        job = bob.submit_ok(plant_job("plant", _attack(home / "local" / "runtime.json", decoy)))
        out = _wait_for_line(bob, job, "ready")
        account = account_of(home, "pvbob")
        assert f"uid={account.pw_uid}" in out and account.pw_uid != 0, out
        for name in PLANTS:
            assert f"DENIED-{name}" in out, out
        assert "DENIED-move" in out and "DENIED-move-job" in out and "RUN-LINK" in out, out
        served = served_everything(bob, job)
        assert admin.token not in served
        assert decoy.read_text() == DECOY_TEXT and decoy.stat().st_uid == 0
        task_dir = next((home / "local" / "jobs" / f"{job}").glob("a0.main-0.t0"))
        request = task_dir / "service-tensorboard.request"
        st = request.lstat()
        assert (st.st_uid, st.st_gid, st.st_mode & 0o777) == (0, account.pw_gid, 0o640)
        assert request.read_text().startswith("start ")
        for name in ("stdout", "all", "exit_code", "handle.json", "command.sh"):
            st = (task_dir / name).lstat()
            assert st.st_uid == 0 and st.st_mode & 0o077 == 0, name  # root's, private: the task writes via pipes
        assert bob.stop(job).status_code == 202
        assert bob.wait(job)["jobStatus"]["state"] == "STOPPED"
    finally:
        control.stop(home)
        kill_leftovers(home)


@pytest.mark.docker
def test_a_container_cannot_make_root_follow_its_links(tmp_path: Path) -> None:
    """On Docker the container (root inside) sees its control part read-only; what it plants in ``run/``,
    where its shim writes the logs, the daemon reads without following."""
    docker_or_skip()
    home = tmp_path / "pai-home"
    decoy = tmp_path / "decoy"
    decoy.write_text(DECOY_TEXT)
    try:
        admin = start_daemon(home, runtime="docker")
        runtime_json = home / "local" / "runtime.json"
        script = "\n".join(
            [
                f'for f in {" ".join(PLANTS)}; do ln -sf {runtime_json} "$PAI_TASK_DIR/$f" 2>/dev/null '
                '&& echo "PLANTED-$f" || echo "DENIED-$f"; done',
                "echo ready",
                # the logs and exit status are in run/: replace them all with links to the admin token
                f'for f in stderr runtime planted; do ln -sf {runtime_json} "$PAI_TASK_DIR/run/$f"; done',
                f'ln -sf {decoy} "$PAI_TASK_DIR/run/service-tensorboard.log"',
                "sleep 60",
            ]
        )
        job = admin.submit_ok(plant_job("plant", script))
        out = _wait_for_line(admin, job, "ready")
        for name in PLANTS:
            assert f"DENIED-{name}" in out, out
        td = next((home / "local" / "jobs" / job).glob("a0.main-0.t0"))
        wait_for(lambda: (td / "run" / "runtime").is_symlink() or None, 20, lambda: "the container's links")
        served = served_everything(admin, job)
        assert admin.token not in served
        assert decoy.read_text() == DECOY_TEXT
        assert admin.stop(job).status_code == 202
        assert admin.wait(job)["jobStatus"]["state"] == "STOPPED"
    finally:
        control.stop(home)
        kill_leftovers(home)


def test_a_failed_containers_linked_logs_are_not_quoted_in_its_diagnosis(tmp_path: Path) -> None:
    """A failure without a reason quotes the log's last line (core/ending.py): on Docker the logs are in ``run/``,
    the container's; links it puts there to the admin token are not followed into the job's diagnostics."""
    docker_or_skip()
    home = tmp_path / "pai-home"
    try:
        admin = start_daemon(home, runtime="docker")
        runtime_json = home / "local" / "runtime.json"
        role = v2_role(
            resourcePerInstance={"cpu": 1, "memoryMB": 256, "gpu": 0},
            commands=[f'for f in stderr all; do ln -sf {runtime_json} "$PAI_TASK_DIR/run/$f"; done', "exit 1"],
        )
        doc = v2_doc({"main": role}, name="linked-logs")
        doc["prerequisites"] = [{"name": "img", "type": "dockerimage", "uri": "pai-test/busybox"}]
        job = admin.submit_ok(json.dumps(doc))
        status = admin.wait(job, timeout=60)["jobStatus"]
        assert status["state"] == "FAILED" and status["appExitCode"] == 1, status
        td = next((home / "local" / "jobs" / job).glob("a0.main-0.t0"))
        assert (td / "run" / "stderr").is_symlink() and (td / "run" / "all").is_symlink()
        assert admin.token not in status["appExitDiagnostics"] and "url" not in status["appExitDiagnostics"]
        assert status["appExitDiagnostics"] == "main[0] failed (exit code 1)", status
    finally:
        control.stop(home)
        kill_leftovers(home)


def test_a_task_gets_a_system_path_never_the_workbench_venv(daemon: Api) -> None:
    """Tasks run with their image's environment (the host's system on the process runtime): a task's ``pip``
    must not install into the workbench's own venv, whatever account it runs as."""
    job = daemon.submit_ok(v1("path", 'echo "PATH=$PATH"; command -v pai || echo NO-PAI'))
    assert daemon.wait(job)["jobStatus"]["state"] == "SUCCEEDED"
    out = daemon.log(job, name="stdout")
    venv_bin = os.path.dirname(sys.executable)
    path = next(line for line in out.splitlines() if line.startswith("PATH="))
    assert venv_bin not in path.split("=", 1)[1].split(":"), out
    assert "NO-PAI" in out, out


def test_a_log_token_does_not_read_a_job_recreated_under_the_same_name(daemon: Api) -> None:
    job = daemon.submit_ok(v1("again", "echo first-secret-log"))
    assert daemon.wait(job)["jobStatus"]["state"] == "SUCCEEDED"
    r = daemon.http.get(f"/api/v2/jobs/{job}/attempts/0/taskRoles/main/taskIndex/0/attempts/0/logs")
    uri = {loc["name"]: loc["uri"] for loc in r.json()["locations"]}["stdout"]
    tokenless = daemon.as_user("nobody-token").http
    assert "first-secret-log" in tokenless.get(uri).text  # the location's own token reads it, no header
    assert daemon.http.delete(f"/api/v2/jobs/{job}").status_code in (200, 202)
    wait_for(lambda: daemon.http.get(f"/api/v2/jobs/{job}").status_code == 404 or None, 20, lambda: "the delete")
    again = daemon.submit_ok(v1("again", "echo second-log"))
    assert daemon.wait(again)["jobStatus"]["state"] == "SUCCEEDED"
    r = tokenless.get(uri)
    assert r.status_code == 401 and "second-log" not in r.text, r.text


TASK_TOOLS = os.environ.get("PAI_TEST_TASK_TOOLS", "/opt/pai-task-tools")  # .ci/run makes it (tensorboard inside)


def _tensorboard_state(api: Api, job: str) -> dict[str, object] | None:
    r = api.http.get(f"/api/v2/local/jobs/{job}/services")
    assert r.status_code == 200, r.text
    found = [s for s in r.json() if s["name"] == "tensorboard"]
    return found[0] if found and found[0]["state"] in ("running", "unavailable") else None


@root_only
def test_another_users_tensorboard_runs_on_a_root_daemon(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A non-owner's TensorBoard starts: its output dir is its account's, and the services' Python is one every
    account can run (PAI_JUPYTER_TASK_TOOLS); without one, the service says why instead of failing silently."""
    if not Path(TASK_TOOLS, "bin", "tensorboard").exists():
        pytest.skip(f"no task tools at {TASK_TOOLS} (.ci/run makes a venv with tensorboard there)")
    script = 'test -w "$PAI_OUTPUT_LOGS" && echo OUTPUT-WRITABLE; echo ready; sleep 60'
    for tools in (None, TASK_TOOLS):
        home = tmp_path / f"home-{bool(tools)}"
        if tools:
            monkeypatch.setenv("PAI_JUPYTER_TASK_TOOLS", tools)
        try:
            admin = start_daemon(home)
            bob = admin.new_user("tbbob")
            job = bob.submit_ok(plant_job("board", script))
            assert "OUTPUT-WRITABLE" in _wait_for_line(bob, job, "ready")
            state = wait_for(partial(_tensorboard_state, bob, job), 60, lambda: "tensorboard to run or say why")
            if tools:
                assert state["state"] == "running", state
                import httpx

                r = httpx.get(
                    f"http://127.0.0.1:{state['port']}/", headers={"Authorization": f"token {state['token']}"}
                )
                assert r.status_code == 200 and "TensorBoard" in r.text
            elif "PAI_JUPYTER_TASK_TOOLS" in str(state.get("message")):
                assert state["state"] == "unavailable"  # the workbench's Python is private to root here
            else:
                assert state["state"] == "running", state  # a workbench every account can run
            assert bob.stop(job).status_code == 202
            bob.wait(job)
        finally:
            control.stop(home)
            kill_leftovers(home)
