"""JobForm: the user guide's submit form (6.1.2) — basic and pro mode, Edit JSON, Import, Export — as ipywidgets.

The form's state is a v1 JSON document, the format of the user guide's "Edit JSON" window: the fields write it, the
JSON editor and Import read it, and the protocol validates it, so every problem's field path
(``taskRoles[0].memoryMB``) finds the widget it is about and is shown right under it.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import ipywidgets as W

from ..protocol import formspec
from ..protocol.formspec import plugin_fields, refusal_path, vc_field
from .display import download_html, error_html, esc, pre_html, problems_html
from .formdoc import DocumentFields
from .formfields import ChoiceField, Field, RoleFields, icon_html, locate, profile_names, spec_field

if TYPE_CHECKING:
    from ..client import Client


def auto() -> W.Layout:
    """A button as wide as its label ("Confirm and submit" is not cut to "Confirm and sub...")."""
    return W.Layout(width="auto", min_width="fit-content")


def _json_error(exc: ValueError) -> Exception:
    """A JSON syntax error as a problem (not a YAML one, which the text is not meant to be)."""
    from ..protocol import JobValidationError
    from ..protocol.errors import Problem

    where = f" at line {exc.lineno}, column {exc.colno}" if isinstance(exc, json.JSONDecodeError) else ""
    msg = exc.msg if isinstance(exc, json.JSONDecodeError) else str(exc)
    return JobValidationError([Problem("", f"not valid JSON: {msg}{where}")])


class JobForm(DocumentFields, W.VBox):
    """Build, check and submit a job. ``client_factory(profile_name)`` makes the client (default: ``Client``)."""

    def __init__(self, job: Any = None, *, client_factory: Callable[[str], Client] | None = None, **kw: Any):
        super().__init__(**kw)
        self._client_factory = client_factory
        self._base: dict[str, Any] = {}  # keys of an imported document the form has no field for (kept as is)
        self._syncing = False
        self._clients: dict[str, Client] = {}
        self._asked_vcs = False  # asked once the form is shown (see _repr_mimebundle_)
        self.job_id: str | None = None
        self.problems: list[tuple[str, str]] = []
        names, default = profile_names()
        # the fields, labels, order and modes of the one form definition the Lab's form draws too
        spec = {f.key: spec_field(f) for f in formspec.JOB_FIELDS}
        self.name, self.gpu_type, self.image = spec["name"], spec["gpu_type"], spec["image"]
        vc = spec["vc"]
        assert isinstance(vc, ChoiceField)  # the cluster's answer fills it (refresh_vcs)
        self.vc = vc
        self.max_run, self.retry, self.env, self.storages = (
            spec["max_run"],
            spec["retry"],
            spec["env"],
            spec["storages"],
        )
        self.profile = Field(W.Dropdown(options=names, value=default), "Cluster profile", "集群 — where to submit")
        self.plugins = self._plugin_fields()
        self.job_fields = {**spec, "plugins": self.plugins}
        self.roles: list[RoleFields] = []
        self.tabs = W.Tab()
        self.add_role_button = W.Button(description="Add task role", icon="plus", layout=auto())
        self.remove_role_button = W.Button(description="Remove task role", icon="minus", layout=auto())
        self.pro = W.Checkbox(description="Pro mode", value=False, indent=False, layout=auto())
        self.edit_json = W.ToggleButton(description="Edit JSON", icon="code", layout=auto())
        self.json = W.Textarea(rows=18, layout=W.Layout(width="100%", display="none"), continuous_update=False)
        self.json_error = W.HTML("")
        self.upload = W.FileUpload(accept=".json,.yaml,.yml", multiple=False, description="Import", layout=auto())
        self.imported = W.HTML("")
        self.export_button = W.Button(description="Export", icon="download", layout=auto())
        self.export_link = W.HTML("")
        self.submit_button = W.Button(description="Submit", button_style="primary", icon="paper-plane", layout=auto())
        self.general = W.HTML("")
        self.confirm_summary = W.HTML("")
        self.confirm_button = W.Button(description="Confirm and submit", button_style="success", layout=auto())
        self.cancel_button = W.Button(description="Cancel", layout=auto())
        self.confirm_box = W.VBox(
            [self.confirm_summary, W.HBox([self.confirm_button, self.cancel_button])], layout=W.Layout(display="none")
        )
        self.result = W.HTML("")
        self.pro_box = W.VBox(
            [
                *(spec[f.key].box for f in formspec.JOB_FIELDS if f.pro),
                W.HBox([self.add_role_button, self.remove_role_button]),
            ]
        )
        basic = [spec[f.key].box for f in formspec.JOB_FIELDS if not f.pro]
        self.children = [
            W.HTML("<b>Basic settings</b>"),
            basic[0],
            self.profile.box,
            *basic[1:],
            self.plugins.box,
            W.HTML("<b>Task roles</b>"),
            self.tabs,
            self.pro_box,
            self.general,
            W.HBox(
                [self.pro, self.edit_json, self.upload, self.export_button, self.submit_button, self.imported],
                layout=W.Layout(flex_flow="row wrap", align_items="center", grid_gap="4px"),
            ),
            self.json,
            self.json_error,
            self.export_link,
            self.confirm_box,
            self.result,
        ]
        self._wire()
        self.add_role()
        if job is not None:
            self.load(job)
        self._show_pro()
        self.validate()

    def _plugin_fields(self) -> Field:
        """A switch per service of the catalogue that has one, with its icon, and the plugin parameters beside it
        (protocol/formspec.py ``plugin_fields``): ``switches`` and ``params`` by key."""
        self.switches: dict[str, W.Checkbox] = {}
        self.params: dict[str, W.Text] = {}
        self.plugin_params: dict[str, tuple[str, str]] = {}
        row: list[W.Widget] = []
        for pf in plugin_fields():
            if pf.kind == "switch":
                tip = " — ".join(t for t in (pf.label_zh, pf.help) if t)
                self.switches[pf.key] = W.Checkbox(description=pf.label, tooltip=tip, indent=False)
                row += [*([W.HTML(icon_html(pf.icon))] if pf.icon else []), self.switches[pf.key]]
            else:
                plugin, _, name = pf.path.partition(".parameters.")
                self.plugin_params[pf.key] = (plugin, name)
                self.params[pf.key] = W.Text(
                    placeholder=f"{pf.label}: {pf.placeholder}", layout=W.Layout(width="320px")
                )
                row.append(self.params[pf.key])
        return Field(W.HBox(row, layout=W.Layout(align_items="center")), "Runtime plugins")

    def _wire(self) -> None:
        """What each field, switch and button does."""
        for f in self.job_fields.values():
            if f is not self.plugins:
                f.observe(self._changed)
        self.profile.observe(lambda _: self.ask_vcs())
        for w in (*self.switches.values(), *self.params.values()):
            w.observe(self._changed, names="value")
        self.pro.observe(lambda _: self._show_pro(), names="value")
        self.edit_json.observe(self._toggle_json, names="value")
        self.json.observe(self._json_edited, names="value")
        self.upload.observe(self._imported, names="value")
        self.add_role_button.on_click(lambda _: self.add_role())
        self.remove_role_button.on_click(lambda _: self.remove_role())
        self.export_button.on_click(lambda _: self.export())
        self.submit_button.on_click(lambda _: self.submit())
        self.confirm_button.on_click(lambda _: self.confirm())
        self.cancel_button.on_click(lambda _: self._hide_confirm())

    # ---- the virtual clusters: the chosen profile's answer --------------------------------------------------------
    def _repr_mimebundle_(self, **kwargs: Any) -> Any:
        """Shown: the virtual clusters are asked for now (a form never shown asks the cluster nothing)."""
        if not self._asked_vcs:
            self.ask_vcs()
        return super()._repr_mimebundle_(**kwargs)

    def ask_vcs(self) -> threading.Thread:
        """``refresh_vcs`` off the kernel's thread: a slow cluster (or the local one starting) holds no cell."""
        self._asked_vcs = True
        thread = threading.Thread(target=self.refresh_vcs, name="pai-form-vcs", daemon=True)
        thread.start()
        return thread

    def refresh_vcs(self) -> None:
        """The virtual cluster field as the chosen profile's cluster answers: a select of the virtual clusters the
        user may submit to (``default`` picked), or the text box with a note saying why there is no list."""
        profile = self.profile.value
        try:
            vcs, why = self._client(profile).virtual_clusters(), ""
        except Exception as exc:  # whatever went wrong (a broken profile too) is the note; the form stays usable
            vcs, why = None, str(exc) or type(exc).__name__
        if self.profile.value == profile:  # not an answer for a profile chosen before
            self.vc.offer(vc_field(vcs, why))

    def _client(self, profile: str) -> Any:
        """The profile's client, one each (made by ``client_factory``, default ``Client``)."""
        from ..client import Client

        if profile not in self._clients:
            self._clients[profile] = (self._client_factory or Client)(profile)
        return self._clients[profile]

    # ---- roles and modes -----------------------------------------------------------------------------------------
    def add_role(self, name: str | None = None) -> RoleFields:
        taken = {r.name.value for r in self.roles}
        name = name or next(n for n in ("main", *(f"worker{i}" for i in range(1, 1000))) if n not in taken)
        role = RoleFields(name)
        role.observe(self._changed)
        self.roles.append(role)
        self._retab()
        self._changed()
        return role

    def remove_role(self) -> None:
        if len(self.roles) > 1:
            self.roles.pop(self.tabs.selected_index or len(self.roles) - 1)
            self._retab()
            self._changed()

    def _retab(self) -> None:
        boxes = [r.box for r in self.roles]
        if list(self.tabs.children) != boxes:  # unchanged children keep their drawn views (see DocumentFields)
            self.tabs.children = boxes
        for i, r in enumerate(self.roles):
            self.tabs.set_title(i, r.name.value or f"role {i}")
            r.set_pro(self.pro.value)

    def _show_pro(self) -> None:
        self.pro_box.layout.display = "" if self.pro.value else "none"
        for r in self.roles:
            r.set_pro(self.pro.value)

    # ---- the document ----------------------------------------------------------------------------------------
    def load(self, job: Any) -> None:
        """Fill the form from a Job, v1 JSON / v2 YAML text, or a v1 dict (v2 is converted to v1, as OpenPAI's
        submit page does); problems the document has are shown beside the fields."""
        from ..protocol import Job
        from ..protocol.v1 import job_to_form_v1

        if isinstance(job, Job):
            doc = job_to_form_v1(job)
        elif isinstance(job, dict):
            doc = job_to_form_v1(Job.from_dict(job)) if "protocolVersion" in job else job
        else:
            try:
                parsed = json.loads(job)
            except ValueError as exc:
                if str(job).lstrip().startswith("{"):  # meant as JSON (Edit JSON, a .json file): say what is wrong
                    raise _json_error(exc) from None
                parsed = None
            if (
                isinstance(parsed, dict)
                and "protocolVersion" not in parsed
                and "taskRoles" in parsed
                and not isinstance(parsed.get("taskRoles"), dict)
            ):
                doc = parsed  # v1 JSON
            else:
                doc = job_to_form_v1(Job.from_text(job))  # v2: raises JobValidationError / ConversionError with paths
        self._syncing = True
        try:
            self._fill(doc)
        finally:
            self._syncing = False
        self._changed(from_document=doc)

    # ---- validation --------------------------------------------------------------------------------------------
    def validate(self, doc: dict[str, Any] | None = None) -> list[tuple[str, str]]:
        """Check the document with the protocol and put each problem beside its field; returns (path, message)."""
        from ..protocol import Job, JobValidationError

        mine, bad = self.to_v1()
        problems = list(bad)
        try:
            Job.from_dict(doc if doc is not None else mine)
        except JobValidationError as exc:
            problems += [(p.path, p.message) for p in exc.problems]
        self.show_problems(problems)
        return problems

    def show_problems(self, problems: list[tuple[str, str]]) -> None:
        self.problems = problems
        per: dict[tuple[int | None, str], list[str]] = {}
        general = []
        for path, message in problems:
            index, key = locate(path)
            if key is None or (index is not None and index >= len(self.roles)):
                general.append((path, message))
            else:
                per.setdefault((index, key), []).append(message)
        for key, f in self.job_fields.items():
            f.set_error(per.get((None, key), []))
        for i, r in enumerate(self.roles):
            for key, f in r.fields.items():
                f.set_error(per.get((i, key), []))
        self.general.value = problems_html([{"path": p, "message": m} for p, m in general]) if general else ""

    # ---- sync with the JSON editor, import, export -----------------------------------------------------------
    def _changed(self, change: Any = None, from_document: dict[str, Any] | None = None) -> None:
        if self._syncing:
            return
        for i, r in enumerate(self.roles):
            self.tabs.set_title(i, r.name.value or f"role {i}")
        if from_document is None and self.edit_json.value:
            self._syncing = True
            try:
                self.json.value = self.to_json()
            finally:
                self._syncing = False
        self.validate(from_document)

    def _toggle_json(self, change: Any) -> None:
        self.json.layout.display = "" if self.edit_json.value else "none"
        if self.edit_json.value:
            self._syncing = True
            try:
                self.json.value = self.to_json()
            finally:
                self._syncing = False

    def _json_edited(self, change: Any) -> None:
        if not self._syncing:
            self._load_reporting(self.json.value)

    def _load_reporting(self, source: str) -> bool:
        from ..protocol import JobValidationError

        try:
            self.load(source)
        except JobValidationError as exc:
            self.json_error.value = problems_html(exc.problems, "cannot load this document")
            return False
        self.json_error.value = ""
        return True

    def _imported(self, change: Any) -> None:
        files = self.upload.value
        if not files:
            return
        item = files[0]
        content = item["content"] if isinstance(item, dict) else item.content
        try:
            source = bytes(content).decode("utf-8")
        except UnicodeDecodeError:
            self.json_error.value = error_html("the imported file is not UTF-8 text")
            return
        name = item["name"] if isinstance(item, dict) else item.name
        if self._load_reporting(source):
            self.imported.value = f"<small>imported <code>{esc(name)}</code></small>"
            if self.edit_json.value:
                self._toggle_json(None)
        # forget the file here (importing the same file again fires again) but not in the browser, where the
        # button goes on saying "Import (1)" rather than "(0)" after a good import
        with self.upload._lock_property(value=[]):
            self.upload.value = ()

    def export(self) -> str:
        """A download link for the job as v1 JSON (the browser saves it); returns the JSON too."""
        data = self.to_json()
        name = f"{self.name.value or 'job'}.json"
        self.export_link.value = download_html(name, data, "application/json", f"download {name}")
        return data

    # ---- submit ----------------------------------------------------------------------------------------------
    def submit(self) -> bool:
        """Check, then show the confirmation summary (the user guide: a confirm window before the job is sent)."""
        from ..protocol import Job

        if self.validate():
            self.result.value = error_html(f"fix the {len(self.problems)} problem(s) shown above first")
            return False
        job = Job.from_dict(self.to_v1()[0])
        self.confirm_summary.value = f"<b>Submit to profile {esc(self.profile.value)}?</b>" + pre_html(job.summary())
        self.confirm_box.layout.display = ""
        return True

    def _hide_confirm(self) -> None:
        self.confirm_box.layout.display = "none"

    def confirm(self) -> str | None:
        """Send the job; shows and returns its id, or shows the server's problems beside the fields."""
        from ..client import JobConflict, PaiError

        self._hide_confirm()
        try:
            client = self._client(self.profile.value)
            from pathlib import Path

            from ..common.origin import gather, kernel_notebook

            origin = gather("form", notebook=kernel_notebook(), code=Path.cwd())
            self.job_id = client.submit(self.to_json(), origin=origin)
        except PaiError as exc:
            problems = [(p.get("path", ""), p.get("message", "")) for p in getattr(exc, "problems", [])]
            if not problems:  # a refusal without a path: beside the field it is about where there is one
                path = "jobName" if isinstance(exc, JobConflict) else refusal_path(str(exc))
                problems = [(path, str(exc))] if path else []
            if problems:
                self.show_problems(problems)
            self.result.value = error_html(f"not submitted: {exc}")
            return None
        from ..protocol.containerpaths import submit_notes

        notes = "".join(
            f"<div style='color:#8a6d00'>note: <code>{esc(p)}</code>: {esc(m)}</div>"
            for p, m in submit_notes(client, self.to_json())
        )
        self.result.value = f"submitted <code>{esc(self.job_id)}</code>{notes}"
        return self.job_id
