"""The sidebar's profile switch (``pai_jupyter/server/lab_profiles.py``) with two real daemons on loopback:
the Jupyter user's profiles are listed without tokens, switching makes the job routes show the other
daemon's jobs, unknown names are 404, anonymous and forged writes are refused."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from pai_jupyter.client.profiles import Profile, upsert_profile
from tests.helpers.browser import opened, pai_sidebar
from tests.helpers.daemon import Api, v1
from tests.helpers.jupyter_fixture import JupyterServer, lab_settings_file
from tests.helpers.servers import servers

pytestmark = pytest.mark.slow


@dataclass
class Env:
    a: Api
    b: Api
    jupyter: JupyterServer
    settings: Path  # the file of the extension's Lab user settings


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    tmp: Path = tmp_path_factory.mktemp("lab-profiles")
    home_a, home_b = tmp / "home-a", tmp / "home-b"
    with servers(tmp) as s:
        a = s.daemon(home_a)
        b = s.daemon(home_b)
        user = b.http.get("/api/v2/info").json()["user"]
        upsert_profile(Profile(name="other", url=b.url, username=user, token=b.token), home_a)
        a.submit_ok(v1("only-on-a", "true"))
        b.submit_ok(v1("only-on-b", "true"))
        jupyter = s.jupyter(home=home_a, lab=True)
        yield Env(a, b, jupyter, lab_settings_file(tmp / "jupyter"))


def _names(http: object) -> tuple[str, set[str]]:
    body = http.get("pai/api/jobs").json()  # type: ignore[attr-defined]
    return body["profile"], {j["name"] for j in body["jobs"]}


def test_profiles_are_listed_without_tokens_and_switch_the_job_routes(env: Env) -> None:
    http = env.jupyter.http()
    r = http.get("pai/api/profiles")
    assert r.status_code == 200, r.text
    listed = {p["name"]: p for p in r.json()["profiles"]}
    assert r.json()["current"] == "local" and listed["local"]["current"] and listed["local"]["default"]
    assert listed["other"]["url"] == env.b.url and not listed["other"]["current"]
    assert env.b.token not in r.text and env.a.token not in r.text and "token" not in r.text
    assert _names(http) == ("local", {"only-on-a"})
    r = http.put("pai/api/profiles/current", json={"name": "other"})
    assert r.status_code == 200 and r.json()["current"] == "other", r.text
    assert env.b.token not in r.text
    profile, names = _names(http)
    assert profile == "other" and names == {"only-on-b"}
    user = env.b.http.get("/api/v2/info").json()["user"]
    d = http.get(f"pai/api/jobs/{user}~only-on-b")
    assert d.status_code == 200 and d.json()["name"] == "only-on-b"
    assert http.get("pai/api/profiles").json()["current"] == "other"
    assert http.put("pai/api/profiles/current", json={"name": "nope"}).status_code == 404
    assert http.put("pai/api/profiles/current", json={}).status_code == 400
    assert _names(http)[0] == "other"  # a refused switch changes nothing
    assert http.put("pai/api/profiles/current", json={"name": "local"}).status_code == 200
    assert _names(http) == ("local", {"only-on-a"})


def test_anonymous_and_forged_switches_are_refused(env: Env) -> None:
    anon = env.jupyter.http(None)
    assert anon.get("pai/api/profiles").status_code == 403
    assert anon.put("pai/api/profiles/current", json={"name": "other"}).status_code == 403
    cookie = env.jupyter.http(None)
    assert cookie.get("api/status", params={"token": env.jupyter.token}).status_code == 200
    assert cookie.put("pai/api/profiles/current", json={"name": "other"}).status_code == 403  # no _xsrf
    assert env.jupyter.http().get("pai/api/profiles").json()["current"] == "local"


def test_the_sidebar_switches_profile_and_shows_the_other_daemons_job(env: Env, browser: Any) -> None:
    with opened(browser, viewport=(1400, 900)) as w:
        page = w.page
        panel = pai_sidebar(page, env.jupyter, "profiles")
        panel.locator(".pai-JobRow-name", has_text="only-on-a").wait_for(timeout=60_000)
        select = panel.get_by_label("Cluster profile to show")
        select.wait_for(timeout=30_000)
        options = select.locator("option").all_inner_texts()
        assert "local" in " ".join(options) and f"other ({env.b.url})" in options
        assert env.b.token not in page.content()
        select.select_option("other")
        panel.locator(".pai-JobRow-name", has_text="only-on-b").wait_for(timeout=60_000)
        assert panel.locator(".pai-JobRow-name", has_text="only-on-a").count() == 0
        assert panel.locator(".pai-JobsPanel-profile").inner_text().startswith("other")
        select.select_option("local")  # leave the server as the other tests expect it
        panel.locator(".pai-JobRow-name", has_text="only-on-a").wait_for(timeout=60_000)
    assert not w.dialogs, w.dialogs


def test_the_settings_default_profile_is_honoured_when_lab_opens(env: Env, browser: Any) -> None:
    import json

    env.settings.parent.mkdir(parents=True, exist_ok=True)
    env.settings.write_text(json.dumps({"defaultProfile": "other"}))
    try:
        with opened(browser) as w:
            panel = pai_sidebar(w.page, env.jupyter, "default-profile")
            panel.locator(".pai-JobRow-name", has_text="only-on-b").wait_for(timeout=60_000)
            assert env.jupyter.http().get("pai/api/profiles").json()["current"] == "other"
    finally:
        env.settings.unlink()
        env.jupyter.http().put("pai/api/profiles/current", json={"name": "local"})
