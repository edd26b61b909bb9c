"""Every runtime runs a task's commands as OpenPAI's runtime does: one bash script under
``set -o errexit -o nounset -o pipefail``; an image without bash gets sh with the options it has, said in the
task's ``runtime`` log. The script with its secrets never touches the disk (on Slurm, whose nodes read it from the
job's shared directory: only in the task's env file, readable by root and the task's group alone)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from pai_jupyter.cluster.runtime.base import TaskExit
from tests.helpers.runtime import SLURM, make_runtime, make_spec, read, wait

# (script, succeeds?) -- each failing one would print "after" under plain sh
FAILING = ["false; echo after", "echo $PAI_NEVER_SET; echo after", "false | cat; echo after"]
BASHISMS = 'if [[ "a b" == a* ]]; then arr=(x "y z"); echo "${arr[1]} ${#arr[@]}"; fi'


ALL = ["process-c", "process-sh", "docker-bash", "docker-busybox", "toy"]  # toy: tests/toyruntime, a plug-in
WITH_BASH = ["process-c", "process-sh", "docker-bash", "toy", SLURM]


@pytest.fixture(params=ALL)
def runner(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[str, object]]:
    rt, extra = make_runtime(request.param, tmp_path, request)
    handles = []

    def run(td: Path, script: str, **over: object) -> TaskExit:
        td.mkdir(exist_ok=True)  # (Slurm: the job's directory is its parent, tmp_path)
        handle = rt.start(make_spec(td, script, **{**extra, **over}))
        handles.append(handle)
        return wait(rt, handle, td, timeout=60)

    yield request.param, run
    for h in handles:
        rt.remove(h)


def logs(kind: str, td: Path) -> Path:
    """Where the task's shim wrote its logs: the task directory, or its run/ in a container (runtime.logs_dir)."""
    return td / "run" if kind.startswith(("docker", "slurm")) else td


@pytest.mark.parametrize("runner", [*ALL, SLURM], indirect=True)
@pytest.mark.parametrize("script", FAILING)
def test_errexit_nounset_pipefail_fail_the_task(runner: tuple[str, object], tmp_path: Path, script: str) -> None:
    kind, run = runner
    result = run(tmp_path / "t", script)  # type: ignore[operator]
    assert result.exit_code != 0, f"{script!r} succeeded on {kind}"
    assert "after" not in read(logs(kind, tmp_path / "t"), "stdout")


@pytest.mark.parametrize("runner", WITH_BASH, indirect=True)
def test_bash_features_work_where_there_is_bash(runner: tuple[str, object], tmp_path: Path) -> None:
    kind, run = runner
    td = tmp_path / "t"
    result = run(td, BASHISMS)  # type: ignore[operator]
    assert result.exit_code == 0, read(logs(kind, td), "all")
    assert read(logs(kind, td), "stdout") == "y z 2\n"
    assert not (logs(kind, td) / "runtime").exists() or "no bash" not in read(logs(kind, td), "runtime")


@pytest.mark.parametrize("runner", ["docker-busybox"], indirect=True)
def test_an_image_without_bash_says_so(runner: tuple[str, object], tmp_path: Path) -> None:
    kind, run = runner
    result = run(tmp_path, "echo $0; false | cat; echo after")  # type: ignore[operator]
    assert result.exit_code != 0
    note = read(logs(kind, tmp_path), "runtime")
    assert "no bash here" in note and "errexit, nounset and pipefail" in note  # busybox ash has pipefail
    assert "after" not in read(logs(kind, tmp_path), "all")


@pytest.mark.parametrize("runner", [*ALL, SLURM], indirect=True)
def test_the_script_and_its_secrets_never_touch_the_disk(runner: tuple[str, object], tmp_path: Path) -> None:
    kind, run = runner
    secret = "s3cr3t-planted-7f1c"
    td = tmp_path / "t"
    result = run(
        td,
        f'test "{secret}" = "$(printf s3cr3t-planted-7f1c)"; echo ok',  # type: ignore[operator]
        shown_script='test "******" = "$(printf ******)"; echo ok',
    )
    assert result.exit_code == 0, read(logs(kind, td), "all")
    assert read(logs(kind, td), "stdout") == "ok\n"
    env_file = td / "slurm.env"  # Slurm's nodes read it from the shared job dir: root's, no other account's
    for path in tmp_path.rglob("*"):
        if path.is_file() and not (kind == "slurm" and path == env_file):
            assert secret.encode() not in path.read_bytes(), f"{path.name} holds the secret ({kind})"
    if kind == "slurm":
        assert env_file.stat().st_uid == 0 and env_file.stat().st_mode & 0o077 == 0
    assert "******" in read(td, "command.sh")
