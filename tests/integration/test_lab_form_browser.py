"""The Lab submit form in a real browser: Edit JSON is a two-way view of the one document Submit
sends, the runtime plugins have switches in basic mode, and a refusal of the cluster (a virtual cluster that
does not exist, more CPUs than it has, a job name taken) lands where the status line says, in its words."""

# ruff: noqa: F811 (the fixtures imported above are parameters by the same names)
from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.lab import SECOND_VC, Env, env, lab_page  # noqa: F401  (fixtures, asked for by name)

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]
PLUGINS = "com.microsoft.pai.runtimeplugin"
ROLE = {"name": "main", "taskNumber": 1, "cpuNumber": 1, "gpuNumber": 0, "memoryMB": 256, "command": "true"}


def new_form(lab_page: Any) -> Any:
    lab_page.locator("#pai-jobs-panel").get_by_role("button", name="New PAI job").click()
    form = lab_page.locator(".pai-Form").last
    form.get_by_label("Job name", exact=True).wait_for(timeout=30_000)
    return form


def config(env: Env, job: str) -> dict[str, Any]:
    return dict(json.loads(env.api.http.get(f"/api/v2/jobs/{job}/config").text))


def test_edit_json_is_what_submit_sends(env: Env, lab_page: Any) -> None:
    form = new_form(lab_page)
    form.get_by_label("Pro mode").check()
    form.get_by_role("button", name="Edit JSON").click()
    box = form.get_by_label("Job JSON")
    doc = json.loads(box.input_value())
    assert doc["jobName"] == "my-job"
    form.get_by_label("Image", exact=True).fill("pai-test/busybox:latest")  # a field edit shows in the JSON
    doc = json.loads(box.input_value())
    assert doc["image"] == "pai-test/busybox:latest"
    doc["jobName"] = "lab-json-job"
    doc["taskRoles"][0].update(memoryMB=256, command="echo from-the-json")
    doc["extras"] = {PLUGINS: [{"plugin": "ssh"}]}
    box.fill(json.dumps(doc, indent=2))  # the JSON edit shows in the fields at once
    assert form.get_by_label("Job name", exact=True).input_value() == "lab-json-job"
    assert form.get_by_label("Memory (MB)", exact=True).input_value() == "256"
    assert form.get_by_label("SSH").is_checked()
    form.get_by_role("button", name="Validate").click()
    form.locator(".pai-Form-result", has_text="Valid.").wait_for(timeout=30_000)
    form.get_by_role("button", name="Submit").click()  # one click: what the JSON says is sent
    form.locator(".pai-Form-result", has_text="Submitted root~lab-json-job").wait_for(timeout=30_000)
    sent = config(env, "root~lab-json-job")
    assert sent["extras"][PLUGINS] == [{"plugin": "ssh"}], sent
    assert env.api.wait("root~lab-json-job", timeout=60)["jobStatus"]["state"] == "SUCCEEDED"
    form.get_by_role("button", name="Edit JSON").click()  # closed: the JSON is not shown
    assert box.is_hidden()


def test_plugin_switches_in_basic_mode(env: Env, lab_page: Any) -> None:
    form = new_form(lab_page)
    assert not form.get_by_label("Pro mode").is_checked()
    form.get_by_label("Job name", exact=True).fill("lab-switch-job")
    form.get_by_label("Image", exact=True).fill("pai-test/busybox:latest")
    form.get_by_label("Command", exact=True).fill("echo switched")
    form.get_by_label("TensorBoard", exact=True).check()
    form.get_by_label("TensorBoard logdir").fill("/tmp/tb")
    form.get_by_label("Jupyter", exact=True).check()
    form.get_by_role("button", name="Submit").click()
    form.locator(".pai-Form-result", has_text="Submitted root~lab-switch-job").wait_for(timeout=30_000)
    plugins = config(env, "root~lab-switch-job")["extras"][PLUGINS]
    assert plugins == [{"plugin": "tensorboard", "parameters": {"logdir": "/tmp/tb"}}, {"plugin": "jupyter"}]


def test_the_virtual_cluster_is_a_choice_of_the_users_and_the_job_lands_in_the_one_picked(
    env: Env, lab_page: Any
) -> None:
    """The form offers the virtual clusters the cluster names for the user (the env's cluster.yaml adds one beside
    default), default picked; the job submitted with the other one runs in it."""
    form = new_form(lab_page)
    vc = form.get_by_label("Virtual cluster", exact=True)
    assert vc.evaluate("e => e.tagName") == "SELECT"
    assert vc.evaluate("e => [...e.options].map(o => o.value)") == ["default", SECOND_VC]
    assert vc.input_value() == "default"
    assert form.locator(".pai-Field-note").count() == 0
    form.get_by_label("Job name", exact=True).fill("lab-second-vc")
    form.get_by_label("Image", exact=True).fill("pai-test/busybox:latest")
    form.get_by_label("Command", exact=True).fill("echo in the second one")
    vc.select_option(SECOND_VC)
    form.get_by_role("button", name="Submit").click()
    form.locator(".pai-Form-result", has_text="Submitted root~lab-second-vc").wait_for(timeout=30_000)
    assert config(env, "root~lab-second-vc")["virtualCluster"] == SECOND_VC
    listed = env.api.http.get("/api/v2/jobs", params={"vc": SECOND_VC}).json()
    assert [(j["name"], j["virtualCluster"]) for j in listed] == [("lab-second-vc", SECOND_VC)]


def field_error(form: Any, label: str) -> Any:
    return form.locator(".pai-Field").filter(has=form.page.get_by_label(label, exact=True)).locator(".pai-Field-error")


def test_the_clusters_refusals_land_where_the_status_line_says(env: Env, lab_page: Any) -> None:
    form = new_form(lab_page)
    result, general = form.locator(".pai-Form-result"), form.locator(".pai-Form-general")
    form.get_by_label("Job name", exact=True).fill("lab-refused")
    form.get_by_label("Pro mode").check()  # a virtual cluster the select does not offer: through the JSON
    form.get_by_role("button", name="Edit JSON").click()
    box = form.get_by_label("Job JSON")
    box.fill(json.dumps({**json.loads(box.input_value()), "virtualCluster": "nowhere"}))
    assert form.get_by_label("Virtual cluster", exact=True).input_value() == "nowhere"  # shown as loaded
    form.get_by_role("button", name="Submit").click()
    result.filter(has_text="Not submitted").wait_for(timeout=30_000)
    assert result.inner_text() == "Not submitted: the cluster refused the job: see the marked fields above."
    assert "virtual cluster 'nowhere' does not exist" in field_error(form, "Virtual cluster").inner_text()
    assert general.inner_text() == ""
    form.get_by_label("Pro mode").uncheck()  # the fields drawn again keep the last check's problems
    assert "does not exist" in field_error(form, "Virtual cluster").inner_text()
    form.get_by_label("Virtual cluster", exact=True).select_option("default")
    form.get_by_label("CPUs", exact=True).fill("4096")
    form.get_by_role("button", name="Submit").click()
    result.filter(has_text="see below").wait_for(timeout=30_000)
    assert result.inner_text() == "Not submitted: the cluster refused the job: see below."
    assert re.search(r"a task needs .* but virtual cluster 'default' has", general.inner_text())
    # the status line comes first, then what it points to
    assert form.locator(".pai-Form-result + .pai-Form-general").count() == 1
    env.api.submit_ok(
        json.dumps(
            {
                "jobName": "lab-taken",
                "image": "pai-test/busybox:latest",
                "taskRoles": [ROLE],
            }
        )
    )
    form.get_by_label("CPUs", exact=True).fill("1")
    form.get_by_label("Job name", exact=True).fill("lab-taken")
    form.get_by_role("button", name="Submit").click()
    result.filter(has_text="marked fields").wait_for(timeout=30_000)
    assert "exists" in field_error(form, "Job name").inner_text()


def submit_refused(lab_page: Any, name: str) -> Any:
    """ "Submit as PAI job" on the file ``name`` from the file browser's menu; the dialog that says why not."""
    lab_page.locator(".jp-SideBar [data-id='filebrowser']").click()
    lab_page.locator(".jp-DirListing-item", has_text=name).click(button="right")
    lab_page.locator(".lm-Menu-itemLabel", has_text="Submit as PAI job").click()
    dialog = lab_page.locator(".jp-Dialog")
    dialog.wait_for(timeout=30_000)
    return dialog


def test_submit_as_pai_job_of_a_taken_name_says_not_submitted(env: Env, lab_page: Any) -> None:
    text = json.dumps(
        {
            "jobName": "lab-file-taken",
            "image": "pai-test/busybox:latest",
            "taskRoles": [ROLE],
        }
    )
    env.api.submit_ok(text)
    (env.root / "taken-job.json").write_text(text)
    dialog = submit_refused(lab_page, "taken-job.json")
    assert "taken-job.json was not submitted" in dialog.locator(".jp-Dialog-header").inner_text()
    assert "is not a valid job" not in dialog.inner_text()
    dialog.get_by_role("button", name="Ok").click()


def test_submit_as_pai_job_shows_each_problem_on_its_own_line_with_the_field_meant(env: Env, lab_page: Any) -> None:
    (env.root / "two-problems.yaml").write_text(
        "protocolVersion: 2\nname: two-problems\ntype: job\nprerequisites:\n"
        "  - {name: image, type: dockerimage, uri: python:3.11}\ntaskRoles:\n  main:\n    instances: 1\n"
        "    dockerImage: image\n    resourcePerInstance: {cpu: 1, memoryMB: 50, gpu: 0}\n"
        "    commands: [echo hi]\n    comand: echo typo\n"
    )
    dialog = submit_refused(lab_page, "two-problems.yaml")
    assert "two-problems.yaml is not a valid job" in dialog.locator(".jp-Dialog-header").inner_text()
    problems = dialog.locator(".pai-Problems li")
    assert problems.all_inner_texts() == [
        "taskRoles.main.resourcePerInstance.memoryMB: 50 is below the minimum 100",
        "taskRoles.main.comand: is not a known field (unknown keys are rejected, as OpenPAI does); "
        "did you mean 'commands'?",
    ]
    first, second = (p.bounding_box() for p in problems.all())
    assert second["y"] >= first["y"] + first["height"]  # one under the other, not run into one line
    dialog.get_by_role("button", name="Ok").click()


def test_import_reads_v2_yaml_as_the_notebook_form_does(env: Env, lab_page: Any) -> None:
    form = new_form(lab_page)
    with lab_page.expect_file_chooser() as chooser:
        form.get_by_role("button", name="Import").click()
    chooser.value.set_files(str(ROOT / "notebooks/jobs/quickstart.yaml"))
    form.locator(".pai-Form-result", has_text="Imported quickstart.yaml").wait_for(timeout=30_000)
    assert form.get_by_label("Pro mode").is_checked()  # two instances: a pro setting
    assert form.get_by_label("Task role name", exact=True).input_value() == "worker"
    assert form.get_by_label("Instances", exact=True).input_value() == "2"
    assert form.get_by_label("Environment", exact=True).input_value() == "greeting=hello from pai_jupyter"
