"""How JobForm's fields map to and from its document: v1 JSON, the format of the user guide's "Edit JSON" window.

Keys the form has no field for (``dataDir``, other ``extras``, ...) are kept from the last document loaded, so
Import -> Edit -> Submit loses nothing the form does not show.
"""

from __future__ import annotations

import json
from typing import Any

from .formfields import PLUGIN_KEY, RoleFields, parse_pairs


class DocumentFields:
    """Mixin for JobForm: ``to_v1`` builds the document from the fields, ``_fill`` sets the fields from one."""

    _base: dict[str, Any]
    roles: list[RoleFields]
    name: Any  # the form's field widgets (see JobForm.__init__)
    image: Any
    vc: Any
    retry: Any
    gpu_type: Any
    env: Any
    storages: Any
    tensorboard: Any
    max_run: Any
    tb_logdir: Any
    ssh: Any
    jupyter: Any
    desktop: Any
    pro: Any
    _changed: Any  # JobForm's methods
    _retab: Any

    def to_v1(self) -> tuple[dict[str, Any], list[tuple[str, str]]]:
        """The v1 JSON the fields say, and problems of fields that could not be read (bad ``KEY=value`` lines)."""
        bad: list[tuple[str, str]] = []
        doc = {k: v for k, v in self._base.items() if k not in ("gpuType", "jobEnvs", "extras")}
        doc.update(
            {
                "jobName": self.name.value,
                "image": self.image.value,
                "virtualCluster": self.vc.value or "default",
                "retryCount": self.retry.value,
            }
        )
        if self.gpu_type.value.strip():
            doc["gpuType"] = self.gpu_type.value.strip()
        envs, wrong = parse_pairs(self.env.value, "=", "KEY=value")
        bad += [("jobEnvs", w) for w in wrong]
        if envs:
            doc["jobEnvs"] = dict(envs)
        mounts, wrong = parse_pairs(self.storages.value, ":", "name:/mount/path")
        bad += [("extras.storages", w) for w in wrong]
        extras = {
            k: v
            for k, v in (self._base.get("extras") or {}).items()
            if k not in ("storages", PLUGIN_KEY, "maxRunTimeMinutes")
        }
        if self.max_run.value:  # the user guide's "work duration"
            minutes = float(self.max_run.value)
            extras["maxRunTimeMinutes"] = int(minutes) if minutes.is_integer() else minutes
        if mounts:
            extras["storages"] = [{"name": n, "mountPath": p} for n, p in mounts]
        switches = {"tensorboard": self.tensorboard, "jupyter": self.jupyter, "ssh": self.ssh, "desktop": self.desktop}
        loaded = [p for p in (self._base.get("extras") or {}).get(PLUGIN_KEY) or [] if isinstance(p, dict)]
        plugins = [p for p in loaded if p.get("plugin") not in switches]  # others (git, cmd, ...): kept as loaded
        for name, box in switches.items():
            if not box.value:
                continue
            entry = {**next((p for p in loaded if p.get("plugin") == name), {}), "plugin": name}
            if name == "tensorboard":
                params = {k: v for k, v in (entry.get("parameters") or {}).items() if k != "logdir"}
                if logdir := self.tb_logdir.value.strip():
                    params["logdir"] = logdir
                entry.pop("parameters", None)
                if params:
                    entry["parameters"] = params
            plugins.append(entry)
        if plugins:
            extras[PLUGIN_KEY] = plugins
        if extras:
            doc["extras"] = extras
        doc["taskRoles"] = []
        for i, r in enumerate(self.roles):
            role, role_bad = r.to_v1()
            doc["taskRoles"].append(role)
            bad += [(f"taskRoles[{i}].portList", m) for m in role_bad.get("ports", [])]
        return doc, bad

    def to_json(self) -> str:
        return json.dumps(self.to_v1()[0], indent=2, ensure_ascii=False)

    def _fill(self, doc: dict[str, Any]) -> None:
        self._base = dict(doc)
        for field, key, default in (
            (self.name, "jobName", ""),
            (self.image, "image", ""),
            (self.vc, "virtualCluster", "default"),
            (self.gpu_type, "gpuType", ""),
        ):
            value = doc.get(key, default)
            field.value = value if isinstance(value, str) else ""
        retry = doc.get("retryCount", 0)
        self.retry.value = retry if isinstance(retry, int) and not isinstance(retry, bool) else 0
        envs = doc.get("jobEnvs") or {}
        self.env.value = "\n".join(f"{k}={v}" for k, v in envs.items()) if isinstance(envs, dict) else ""
        extras = doc.get("extras")
        extras = extras if isinstance(extras, dict) else {}
        mounts = extras.get("storages") or []
        self.storages.value = (
            "\n".join(f"{m.get('name')}:{m.get('mountPath', '')}" for m in mounts if isinstance(m, dict))
            if isinstance(mounts, list)
            else ""
        )
        minutes = extras.get("maxRunTimeMinutes")
        self.max_run.value = minutes if isinstance(minutes, (int, float)) and not isinstance(minutes, bool) else 0
        plugins = {p.get("plugin"): p for p in extras.get(PLUGIN_KEY) or [] if isinstance(p, dict)}
        for name in ("tensorboard", "jupyter", "ssh", "desktop"):
            getattr(self, name).value = name in plugins
        logdir = ((plugins.get("tensorboard") or {}).get("parameters") or {}).get("logdir")
        self.tb_logdir.value = logdir if isinstance(logdir, str) else ""
        roles = [r for r in doc.get("taskRoles") or [] if isinstance(r, dict)] or [{}]
        # the role widgets already shown are filled again, not replaced: a tab whose selected child is replaced
        # stays blank in the browser until clicked (ipywidgets draws the new child after the selection)
        for old in self.roles[len(roles) :]:
            old.close()
        added = [RoleFields() for _ in range(len(roles) - len(self.roles))]
        for fields in added:
            fields.observe(self._changed)
        self.roles = self.roles[: len(roles)] + added
        for fields, role in zip(self.roles, roles, strict=True):
            fields.from_v1(role)
        self._retab()
        if len(roles) > 1 or envs or mounts or self.retry.value or any(r.instances.value != 1 for r in self.roles):
            self.pro.value = True
