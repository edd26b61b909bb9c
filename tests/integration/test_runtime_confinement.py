"""What keeps a process-runtime task in its place (issue 20): the shim (root, on a shared machine) writes through no
link planted in the task's directory."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from pai_jupyter.cluster.runtime import taskdir
from pai_jupyter.cluster.runtime.base import TaskStartError

from .conftest import reachable
from .conftest_runtime import make_spec, read, wait
from .test_runtime_process import SHIMS, Runtimes

PASSWD = "root:x:0:0:root:/root:/bin/bash\n"
NOBODY = (65534, 65534)


@pytest.fixture
def target(tmp_path: Path) -> Path:
    """A file the task's account may not write (as /etc/passwd): what a planted link points at."""
    path = tmp_path / "passwd"
    path.write_text(PASSWD)
    path.chmod(0o644)
    return path


def _untouched(path: Path) -> None:
    st = path.stat()
    assert path.read_text() == PASSWD and (st.st_uid, st.st_gid) == (os.geteuid(), os.getegid())


@pytest.fixture(params=["c", "c-warm"])
def c_runtimes(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Runtimes]:
    warm = request.param == "c-warm"
    r = Runtimes(SHIMS["c"](), warm=1 if warm else 0, warm_dir=tmp_path / "warm" if warm else None)
    yield r
    r.cleanup()


@pytest.mark.parametrize("as_account", [False, True])
def test_the_shim_writes_through_no_symlink_planted_in_the_task_dir(
    c_runtimes: Runtimes, tmp_path: Path, target: Path, as_account: bool
) -> None:
    """Audit item 1: ``stderr`` and ``runtime`` are made when first written, so a task that could write its
    directory planted them as links to /etc/passwd: the root shim appended to it and chowned it to the task."""
    if as_account and os.geteuid() != 0:
        pytest.skip("running a task as another account needs root")
    rt = c_runtimes.make()
    td = tmp_path / "td"
    planted = [taskdir.STDERR, taskdir.RUNTIME_LOG]  # the shim makes them when it first writes to them
    if rt.warm is not None:  # planted in the warm directory that becomes the task's (its other files are made)
        where = rt.warm._ready[0].directory
    else:
        where = td
        td.mkdir()
        planted.append(taskdir.EXIT_CODE)
    for name in planted:
        (where / name).symlink_to(target)
    if as_account:
        reachable(td)
    spec = make_spec(td, "echo out; echo err >&2", image="some/image:1", run_as=NOBODY if as_account else None)
    result = wait(rt, rt.start(spec), td)
    assert result.exit_code == 0
    _untouched(target)
    assert read(td, taskdir.ALL) == "out\nerr\n"  # the task's stderr still reaches its combined log
    assert (td / taskdir.STDERR).is_symlink() and (td / taskdir.RUNTIME_LOG).is_symlink()  # refused, left be
    assert taskdir.exit_code(td) == 0 and not (td / taskdir.EXIT_CODE).is_symlink()  # made new
    for name in (taskdir.STDOUT, taskdir.ALL, taskdir.EXIT_CODE):  # the shim's files stay the shim's account's
        assert (td / name).stat().st_uid == os.geteuid()


def test_the_shim_refuses_a_hard_link_planted_as_its_log(tmp_path: Path, target: Path) -> None:
    """A hard link to a file the task cannot write, in place of a log the shim appends to: the task fails to
    start rather than the shim writing into that file."""
    r = Runtimes(SHIMS["c"]())
    try:
        td = tmp_path / "td"
        td.mkdir()
        os.link(target, td / taskdir.ALL)
        try:
            rt = r.make()
            result = wait(rt, rt.start(make_spec(td, "echo out")), td)
        except TaskStartError:
            pass
        else:
            assert result.exit_code != 0
        _untouched(target)
    finally:
        r.cleanup()
