"""The `pai` command in a subprocess: exit codes, tables, json output, profiles."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pai_jupyter.cluster import control
from tests.helpers.cli import pai
from tests.helpers.daemon import Api, docker_or_skip, kill_leftovers, start_daemon, v1


def test_submit_wait_status_logs_and_exit_codes(daemon: Api, tmp_path: Path) -> None:
    good = tmp_path / "good.json"
    good.write_text(v1("cli-ok", "echo from cli; echo warn >&2"))
    bad = tmp_path / "bad.json"
    bad.write_text(v1("cli-bad", "exit 4"))
    r = pai("submit", str(good), "--wait", home=daemon.home)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip().endswith("~cli-ok") and "SUCCEEDED" in r.stderr
    r = pai("submit", str(bad), "--wait", home=daemon.home)
    assert r.returncode == 1 and "FAILED, exit code 4" in r.stderr
    r = pai("status", "cli-bad", home=daemon.home)
    assert r.returncode == 0 and "FAILED" in r.stdout and "ROLE" in r.stdout
    r = pai("logs", "cli-ok", "--stream", "stdout", home=daemon.home)
    assert "from cli" in r.stdout and "warn" not in r.stdout
    r = pai("jobs", "-o", "json", home=daemon.home)
    assert sorted(j["name"] for j in json.loads(r.stdout)) == ["cli-bad", "cli-ok"]
    r = pai("jobs", "--state", "FAILED", home=daemon.home)
    assert "cli-bad" in r.stdout and "cli-ok" not in r.stdout
    r = pai("submit", str(good), home=daemon.home)
    assert r.returncode == 2 and "already exists" in r.stderr
    r = pai("status", "missing", home=daemon.home)
    assert r.returncode == 2 and "not found" in r.stderr


def test_an_image_the_process_runtime_does_not_use_is_said_in_events_and_the_runtime_log(daemon: Api) -> None:
    """A mistyped image was accepted silently on the process runtime: its notice was only in the task's runtime
    log, which ``pai logs --stream`` refused to name."""
    job = json.loads(v1("typo-image", "echo ran"))
    job["image"] = "pytroch/pytorch:latest"
    name = daemon.submit_ok(json.dumps(job))
    daemon.wait(name)
    events = daemon.http.get(f"/api/v2/jobs/{name}/events").json()["data"]
    warned = [e for e in events if e["reason"] == "ImageNotUsed"]
    assert len(warned) == 1 and warned[0]["type"] == "Warning", events
    assert "pytroch/pytorch:latest is recorded but not used: the process runtime" in warned[0]["message"]
    for follow in ([], ["-f"]):
        r = pai("logs", "typo-image", "--stream", "runtime", *follow, home=daemon.home)
        assert r.returncode == 0, r.stderr
        assert "the image 'pytroch/pytorch:latest' was not used" in r.stdout, r.stdout


def test_follow_params_name_and_invalid_input(daemon: Api, tmp_path: Path) -> None:
    job = tmp_path / "job.yaml"
    job.write_text(
        "protocolVersion: 2\nname: tmpl\ntype: job\nparameters: {who: nobody}\n"
        "prerequisites: [{name: i, type: dockerimage, uri: busybox}]\n"
        "taskRoles: {main: {dockerImage: i, resourcePerInstance: {cpu: 1, memoryMB: 128, gpu: 0},\n"
        "  commands: ['echo hello <% $parameters.who %> $n']}}\n"
    )
    r = pai(
        "submit", str(job), "--follow", "--param", "who=world", "--param", "n=3", "--name", "renamed", home=daemon.home
    )
    assert r.returncode == 0, r.stderr
    assert "hello world 3" in r.stdout and r.stdout.splitlines()[0].endswith("~renamed")
    r = pai("submit", "-", home=daemon.home, stdin='{"jobName": "x", "image": "i", "taskRoles": []}')
    assert r.returncode == 2 and "taskRoles: must have at least 1 item" in r.stderr
    r = pai("submit", str(job), "--param", "novalue", home=daemon.home)
    assert r.returncode == 2


def test_stop_clone_delete(daemon: Api, tmp_path: Path) -> None:
    job = tmp_path / "sleep.json"
    job.write_text(v1("sleeper", "sleep 60"))
    assert pai("submit", str(job), home=daemon.home).returncode == 0
    daemon.wait(f"{daemon.http.get('/api/v2/info').json()['user']}~sleeper", ("RUNNING",))
    assert pai("stop", "sleeper", home=daemon.home).returncode == 0
    short = tmp_path / "short.json"  # --wait polls until the job ends: one that ends soon, not the sleeper's 60 s
    short.write_text(v1("sleeper2", "sleep 1"))
    r = pai("submit", str(short), "--wait", home=daemon.home)
    assert r.returncode == 0, r.stderr
    r = pai("clone", "sleeper", "--name", "copy", home=daemon.home)
    assert r.returncode == 0 and r.stdout.strip().endswith("~copy")
    pai("stop", "copy", home=daemon.home)
    r = pai("delete", "sleeper", home=daemon.home)
    assert r.returncode == 0
    assert pai("status", "sleeper", home=daemon.home).returncode == 2


def test_unavailable_server_exits_3(tmp_path: Path) -> None:
    home = tmp_path / "h"
    assert pai("profile", "add", "dead", "http://127.0.0.1:9", "--username", "u", home=home).returncode == 0
    (tmp_path / "tok").write_text("x")
    pai(
        "profile",
        "add",
        "dead",
        "http://127.0.0.1:9",
        "--username",
        "u",
        "--token-file",
        str(tmp_path / "tok"),
        home=home,
    )
    r = pai("jobs", "--profile", "dead", home=home)
    assert r.returncode == 3 and "http://127.0.0.1:9" in r.stderr


def test_profiles_switch_between_two_clusters_and_never_print_tokens(tmp_path: Path) -> None:
    home_a, home_b = tmp_path / "a", tmp_path / "b"
    b = start_daemon(home_b)
    try:
        r = b.http.post("/api/v2/local/users", json={"name": "carol", "password": "s3cret-pw"})
        token = r.json()["token"]
        b.as_user(token).submit_ok(v1("on-b", "true"))
        # home_a's default is its own local cluster; profile "b" points at the other daemon
        assert pai("profile", "add", "b", b.url, "--username", "carol", home=home_a).returncode == 0
        r = pai("jobs", "--profile", "b", home=home_a)
        assert r.returncode == 3 and "pai profile login b" in r.stderr
        r = pai("profile", "login", "b", "--password-stdin", home=home_a, stdin="s3cret-pw\n")
        assert r.returncode == 0, r.stderr
        r = pai("jobs", "--profile", "b", "-o", "json", home=home_a)
        assert [j["name"] for j in json.loads(r.stdout)] == ["on-b"]
        assert pai("profile", "use", "b", home=home_a).returncode == 0
        r = pai("jobs", home=home_a)
        assert "carol~on-b" in r.stdout
        listing = pai("profile", "list", home=home_a).stdout
        assert "b" in listing and "set" in listing
        files = (home_a / "clusters.yaml").read_text()
        all_output = listing + pai("profile", "list", "-o", "json", home=home_a).stdout
        assert token not in all_output
        assert oct((home_a / "clusters.yaml").stat().st_mode)[-3:] == "600" and "token" in files
        r = pai("profile", "login", "b", "--password-stdin", home=home_a, stdin="wrong\n")
        assert r.returncode == 3
        assert pai("profile", "remove", "local", home=home_a).returncode == 2
        assert pai("profile", "remove", "b", home=home_a).returncode == 0
    finally:
        control.stop(home_b)
        control.stop(home_a)
        kill_leftovers(home_b)


def test_priority_moves_a_waiting_job_and_changes_its_class(daemon: Api, tmp_path: Path) -> None:
    user = daemon.http.get("/api/v2/info").json()["user"]
    blocker = json.loads(v1("blocker", "sleep 60", cpuNumber=8))
    blocker["extras"] = {"hivedScheduler": {"jobPriorityClass": "crit"}}  # (a prod job preempts no crit job)
    blocker = daemon.submit_ok(json.dumps(blocker))
    daemon.wait(blocker, ("RUNNING",))
    first, second = daemon.submit_ok(v1("first", "true")), daemon.submit_ok(v1("second", "true"))
    r = pai("priority", "second", "--position", "0", home=daemon.home)
    assert r.returncode == 0 and r.stdout.strip() == f"{user}~second: priority default, 0 jobs ahead of it", r
    r = pai("priority", "first", "--class", "prod", home=daemon.home)
    assert r.stdout.strip() == f"{user}~first: priority prod, 0 jobs ahead of it", r
    assert daemon.detail(first)["jobPriority"] == "prod"
    r = pai("priority", "second", "--position", "0", home=daemon.home)
    assert r.stdout.strip() == f"{user}~second: priority default, 1 job ahead of it", r  # behind the prod job
    assert pai("priority", "second", home=daemon.home).returncode == 2
    for job in (blocker, first, second):
        daemon.stop(job)


def test_unknown_commands_suggest_and_aliases_resolve_and_help_is_not_cut(tmp_path: Path) -> None:
    """`pai list` said only "No such command"; --help cut the descriptions with "..."."""
    r = pai("list", "--help", home=tmp_path)
    assert r.returncode == 0 and "List jobs" in r.stdout, r.stderr
    r = pai("lsit", home=tmp_path)
    assert r.returncode == 2 and "Did you mean: jobs" in r.stderr, r.stderr
    r = pai("cluster", "strat", home=tmp_path)
    assert r.returncode == 2 and "Did you mean: start" in r.stderr, r.stderr
    r = pai("frobnicate", home=tmp_path)
    assert "The commands: clone, cluster" in r.stderr and "`pai --help`" in r.stderr, r.stderr
    r = pai("--help", home=tmp_path)
    commands = r.stdout.split("Commands:")[1]
    assert "..." not in commands and "loopback port" in commands, r.stdout


def test_cluster_start_keeps_its_runtime_and_a_stopped_cluster_stays_stopped(tmp_path: Path) -> None:
    """An auto-start (Lab's poll) used the automatic runtime, undid `pai cluster stop`, and a second
    `pai cluster start --runtime process` printed the running daemon's runtime as if it had been started."""
    from pai_jupyter import Client
    from pai_jupyter.client.errors import ServerUnavailable

    home = tmp_path / "h"
    try:
        r = pai("cluster", "start", "--runtime", "process", home=home)
        assert r.returncode == 0 and "started" in r.stdout and "runtime process" in r.stdout, r.stderr
        first = control.running(home)
        assert first is not None
        r = pai("cluster", "start", "--runtime", "docker", "--cpus", "1", home=home)
        assert r.returncode == 0 and "already running" in r.stdout and "started" not in r.stdout, r.stdout
        assert "ignored --runtime docker, --cpus 1" in r.stderr, r.stderr
        r = pai("cluster", "start", "--runtime", "process", "--quiet", home=home)
        assert r.returncode == 0 and r.stdout == r.stderr == "", r
        control.stop(home)  # gone without `pai cluster stop` (a reboot, a crash): a client starts it again
        with Client(home=home) as client:
            client.list_jobs()
        again = control.running(home)
        assert again is not None and again["pid"] != first["pid"] and again["runtime"].startswith("process")
        cmdline = Path(f"/proc/{again['pid']}/cmdline").read_bytes().split(b"\0")
        assert cmdline[cmdline.index(b"--runtime") + 1] == b"process"
        r = pai("cluster", "stop", home=home)
        assert r.returncode == 0 and "stopped" in r.stdout
        with Client(home=home) as client:  # what the sidebar's poll does: it must not start it again
            try:
                client.list_jobs()
                raise AssertionError("a client started the cluster the user stopped")
            except ServerUnavailable as exc:
                assert "pai cluster start" in str(exc) and "pai cluster stop" in str(exc)
        assert control.running(home) is None
        r = pai("jobs", home=home)
        assert r.returncode == 3 and "pai cluster start" in r.stderr
        r = pai("cluster", "start", home=home)
        assert r.returncode == 0 and "started" in r.stdout
    finally:
        control.stop(home)
        kill_leftovers(home)


@pytest.mark.docker
def test_auto_takes_docker_only_where_the_images_are_and_says_why(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An engine that answered but could not pull was picked by `make lab`, and `make demo` then failed on "image
    not found". The images auto checks are PAI_JUPYTER_AUTO_IMAGES here (the examples' by default): a local one
    (pai-test/busybox, .ci/run's) and one no registry has."""
    docker_or_skip()
    home = tmp_path / "h"
    try:
        monkeypatch.setenv("PAI_JUPYTER_AUTO_IMAGES", "pai-test/busybox:latest pai-test/not-an-image:0")
        r = pai("cluster", "start", home=home)
        assert r.returncode == 0 and "(runtime process" in r.stdout, r.stdout + r.stderr
        said = (
            "the Docker engine answers but lacks pai-test/not-an-image:0 and cannot pull it (pai-test/not-an-image:0: "
        )
        assert said in r.stdout and "pai cluster start --runtime docker" in r.stdout, r.stdout
        r = pai("cluster", "status", home=home)
        assert "  chosen:   the Docker engine answers but lacks pai-test/not-an-image:0" in r.stdout, r.stdout
        control.stop(home)
        monkeypatch.setenv("PAI_JUPYTER_AUTO_IMAGES", "pai-test/busybox:latest")
        r = pai("cluster", "start", home=home)
        assert r.returncode == 0 and "(runtime docker" in r.stdout, r.stdout + r.stderr
        assert "runtime docker: the Docker engine answers and has, or can pull, the examples' images" in r.stdout
        control.stop(home)
        r = pai("cluster", "start", "--runtime", "process", home=home)
        assert "runtime process: asked for (--runtime process)" in r.stdout, r.stdout
    finally:
        control.stop(home)
        kill_leftovers(home)
