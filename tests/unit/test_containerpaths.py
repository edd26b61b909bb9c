"""The platform's container paths (/userhome, /gdata): where a job names them, and the quote-aware /userhome ->
$PAI_USER_HOME rewrite (checked by running the rewritten shell)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from pai_jupyter.protocol import Job, containerpaths


@pytest.mark.parametrize(
    "command",
    [
        "cd /userhome; pwd",
        "cd /userhome/ && pwd",
        'cd "/userhome/sub" && pwd',
        "python3 -c 'import os; os.chdir(\"/userhome/sub\"); print(os.getcwd())'",
        "python3 -c \"import os; os.chdir('/userhome'); print(os.getcwd())\"",
        "d=/userhome/sub; cd $d && pwd",
    ],
)
def test_rewritten_commands_reach_the_home_through_the_variable(command: str, tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    script, changed = containerpaths.rewrite(command)
    assert changed and "/userhome" not in script
    out = subprocess.run(
        ["sh", "-c", script],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "PAI_USER_HOME": str(tmp_path)},
    ).stdout
    assert out.strip() in (str(tmp_path), str(tmp_path / "sub"))


@pytest.mark.parametrize("command", ["ls /foo/userhome", "ls /userhomes", "echo '\\/userhome'x", "ls ~/userhome"])
def test_other_paths_are_left_alone(command: str) -> None:
    assert containerpaths.rewrite(command) == (command, False)


def test_notes_name_the_field_and_what_to_use_instead() -> None:
    job = Job.from_text(
        '{"jobName": "j", "image": "busybox", "dataDir": "/gdata/imagenet-1000", "taskRoles": '
        '[{"name": "main", "taskNumber": 1, "cpuNumber": 1, "memoryMB": 512, "gpuNumber": 0, '
        '"command": "cd /userhome; python train.py --data /gdata/imagenet-1000"}]}'
    )
    notes = dict(containerpaths.notes(job))
    assert "$PAI_USER_HOME" in notes["taskRoles.main.commands[0]"]
    assert any("/gdata" in m and "data prerequisite" in m for p, m in containerpaths.notes(job) if "prerequisites" in p)
