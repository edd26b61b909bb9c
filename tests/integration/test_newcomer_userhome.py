"""LeinaoPAI's guide's ``cd /userhome`` on the process runtime reaches the user's persistent home (never a
silent success in a throwaway directory), and validate / submit say what /userhome and /gdata mean here."""

from __future__ import annotations

import json
from pathlib import Path

from pai_jupyter.client import Client
from tests.helpers.cli import pai
from tests.helpers.daemon import Api, v1

SEED = "cd /userhome; mkdir -p output; date > output/out.txt; pwd; echo finished"  # LeinaoPAI's guide's example


def test_seed_userhome_job_writes_into_the_persistent_home(daemon: Api) -> None:
    pai_ = Client()
    job = pai_.submit(v1("seedhome", SEED))
    assert daemon.wait(job)["jobStatus"]["state"] == "SUCCEEDED"
    home = daemon.home / "local" / "users" / job.split("~")[0] / "home"
    assert (home / "output" / "out.txt").read_text().strip()
    log = daemon.log(job)
    assert f"{home}\nfinished" in log
    assert "/userhome in the commands means $PAI_USER_HOME" in log
    # a program opening the path itself (single quotes in the command) also lands there once rewritten
    job = pai_.submit(v1("seedhome2", 'python3 -c \'print(open("/userhome/output/out.txt").read() != "")\''))
    assert daemon.wait(job)["jobStatus"]["state"] == "SUCCEEDED"
    assert "True" in daemon.log(job)


def test_validate_and_submit_say_what_to_use_instead(daemon: Api, tmp_path: Path) -> None:
    doc = json.loads(v1("seednote", SEED + "; ls /gdata/imagenet-1000 || true"))
    path = tmp_path / "seed.json"
    path.write_text(json.dumps(doc))
    r = pai("validate", str(path), home=daemon.home)
    assert r.returncode == 0, r.stderr
    assert "note: taskRoles.main.commands[0]: /userhome is your persistent home inside containers" in r.stdout
    assert "use $PAI_USER_HOME instead" in r.stdout and "/gdata (the platform's shared datasets)" in r.stdout
    r = pai("validate", "-o", "json", str(path), home=daemon.home)
    assert [n["path"] for n in json.loads(r.stdout)[0]["notes"]] == ["taskRoles.main.commands[0]"] * 2
    r = pai("submit", str(path), home=daemon.home)
    assert r.returncode == 0 and "pai: note: taskRoles.main.commands[0]: /userhome" in r.stderr


def test_pai_submit_magic_shows_the_note(daemon: Api) -> None:
    from IPython.core.interactiveshell import InteractiveShell
    from IPython.utils.capture import capture_output

    from pai_jupyter.notebook.magics import PaiMagics

    shell = InteractiveShell.instance()
    magics = PaiMagics(shell)
    shell.register_magics(magics)
    try:
        with capture_output() as c:
            shell.run_cell_magic("pai_submit", "", v1("seedmagic", SEED))
    finally:
        magics.close()
    text = "\n".join(o.data.get("text/plain", "") for o in c.outputs)
    assert "note: taskRoles.main.commands[0]: /userhome is your persistent home" in text


def test_the_form_notes_userhome_after_submitting(daemon: Api) -> None:
    from pai_jupyter.notebook import JobForm

    form = JobForm()
    form.name.value = "seedform"
    form.roles[0].command.value = SEED
    form.roles[0].memory.value = 256
    assert form.submit() and form.confirm() is not None
    assert "submitted" in form.result.value and "note: <code>taskRoles.main.commands[0]</code>" in form.result.value
