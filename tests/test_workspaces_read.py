"""The read side of many workspaces (issue 17): each workspace's exported summary equals the
service's own summary of it; a workspace's figures do not move when another is added to
the warehouse or dropped from the config; the guardrail log and the nightly exports name
the workspace; `convo serve` tokens read their own workspaces only."""

from __future__ import annotations

import importlib.util
import io
import json
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import duckdb
import httpx
import orjson
import pytest

from convo_analytics._serving import ServerThread
from convo_analytics.cli import main
from convo_analytics.config import load_settings
from convo_analytics.pipeline import RunContext
from convo_analytics.sandbox._oauth import OAuthSettings
from convo_analytics.serve import create_serve_app
from transform_support import assert_same
from workspace_support import KEYS, convo, three_workspaces

ROOT = Path(__file__).parents[1]
RANGE = {"from": "2026-11-04", "to": "2026-11-18"}
IDS = {name: f"ws_{name}" for name in KEYS}


def _ok(done: Any) -> Any:
    assert done.returncode == 0, done.stderr[-3000:]
    return done


def cli(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """`convo ARGS` in this process (a reader's command: no logging set up, no thread left),
    run in ``cwd`` as a process would be; the exit status and both outputs."""
    out, err = io.BytesIO(), io.StringIO()
    stdout = io.TextIOWrapper(out, encoding="utf-8")
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(cwd)
        patch.setattr(sys, "stdout", stdout)
        patch.setattr(sys, "stderr", err)
        code = main(list(args))
        stdout.flush()
    return subprocess.CompletedProcess(args, code, out.getvalue().decode(), err.getvalue())


@pytest.fixture(scope="module")
def three(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """The three workspaces extracted into one warehouse and transformed (by the CLI)."""
    oauth = OAuthSettings(auto_approve=True, access_token_seconds=600)  # refresh is tested apart
    with three_workspaces(tmp_path_factory.mktemp("three"), oauth=oauth) as made:
        cwd, env = made["dir"], made["env"]
        made["db"] = db = cwd / "w.duckdb"
        _ok(convo(cwd, "extract", "--db", str(db), **env))
        done = _ok(convo(cwd, "transform", "--db", str(db), "--tz", "UTC", "--json"))
        made["transform"] = orjson.loads(done.stdout)
        yield made


def test_each_workspace_reconciles_with_its_own_service_summary(three: dict[str, Any]) -> None:
    """The transform compares each workspace's days with that workspace's summary only:
    three workspaces, no mismatch (comparing all three with one summary would show them)."""
    result = three["transform"]
    assert result["reconciled_days"] > 0
    assert result["mismatches"] == [], result["mismatches"][:5]
    reconciled = duckdb.connect(str(three["db"]), read_only=True)
    try:
        summaries = reconciled.execute(
            "SELECT count(DISTINCT workspace_id) FROM service_summaries"
        ).fetchall()[0][0]
    finally:
        reconciled.close()
    assert summaries == 3, "each workspace's own summary was extracted"


def _service_summary(made: dict[str, Any], name: str, tz: str = "UTC") -> dict[str, Any]:
    with made["sandbox"].client(KEYS[name]) as client:
        r = client.get("/v1/analytics/summary", params={**RANGE, "tz": tz})
    r.raise_for_status()
    body: dict[str, Any] = r.json()
    return body


def _export(made: dict[str, Any], *args: str, db: Path | None = None) -> dict[str, Any]:
    done = _ok(
        cli(made["dir"], "export", "summary", "--db", str(db or made["db"]),
              "--from", RANGE["from"], "--to", RANGE["to"], *args)
    )  # fmt: skip
    body: dict[str, Any] = json.loads(done.stdout)
    return body


def _same(ours: dict[str, Any], theirs: dict[str, Any]) -> None:
    ours, theirs = dict(ours), dict(theirs)
    del ours["generatedAt"], theirs["generatedAt"]
    assert_same(ours, theirs)


@pytest.mark.parametrize(
    ("name", "chosen_by", "tz"),
    [
        ("acme", "acme", "UTC"),  # an API key workspace, by name
        ("globex", "ws_globex", "UTC"),  # the OAuth code grant's, by id
        ("initech", "initech", "America/New_York"),  # client credentials; a zone not built
    ],
)
def test_each_workspace_export_equals_its_own_service_summary(
    three: dict[str, Any], name: str, chosen_by: str, tz: str
) -> None:
    theirs = _service_summary(three, name, tz)
    assert theirs["totals"]["conversations"] > 0
    ours = _export(three, "--workspace", chosen_by, "--tz", tz)
    assert ours["workspaceId"] == IDS[name]
    _same(ours, theirs)


def test_all_workspaces_roll_up_and_several_need_a_choice(three: dict[str, Any]) -> None:
    rolled = _export(three, "--all-workspaces", "--tz", "UTC")
    assert rolled["workspaceId"] == "*"
    totals = [_service_summary(three, name)["totals"] for name in KEYS]
    for count in ("conversations", "userMessages", "assistantResponses", "escalations"):
        if count in rolled["totals"]:
            assert rolled["totals"][count] == sum(t[count] for t in totals), count
    cwd, db = three["dir"], str(three["db"])
    neither = cli(cwd, "export", "summary", "--db", db, "--from", "2026-11-10", "--to",
                    "2026-11-11")  # fmt: skip
    assert neither.returncode == 2
    line = neither.stderr.strip()
    assert len(line.splitlines()) == 1, line
    for word in ("acme", "globex", "initech", "--workspace", "--all-workspaces"):
        assert word in line, (word, line)
    unknown = cli(cwd, "export", "summary", "--db", db, "--from", "2026-11-10", "--to",
                    "2026-11-11", "--workspace", "hooli")  # fmt: skip
    assert unknown.returncode == 2
    assert "'hooli'" in unknown.stderr and "acme, globex, initech" in unknown.stderr
    both = cli(cwd, "export", "summary", "--db", db, "--from", "2026-11-10", "--to",
                 "2026-11-11", "--workspace", "acme", "--all-workspaces")  # fmt: skip
    assert both.returncode == 2 and "not both" in both.stderr


def test_a_workspace_is_unchanged_when_another_is_added_or_dropped(
    three: dict[str, Any],
) -> None:
    """acme alone, then with globex added (extract + incremental transform), then with
    globex's [[workspaces]] entry removed from the config (its rows stay: nothing deletes
    data); acme's summary is the same throughout and equals the three-workspace one."""
    cwd, env = three["dir"], three["env"]
    db = cwd / "grown.duckdb"
    _ok(convo(cwd, "extract", "--db", str(db), "--workspace", "acme", **env))
    _ok(convo(cwd, "transform", "--db", str(db), "--tz", "UTC"))
    alone = _export(three, db=db)  # one workspace: no flag needed, as before
    assert alone["workspaceId"] == IDS["acme"]
    _same(alone, _export(three, "--workspace", "acme", db=db))
    _ok(convo(cwd, "extract", "--db", str(db), "--workspace", "globex", **env))
    _ok(convo(cwd, "transform", "--db", str(db), "--tz", "UTC"))
    _same(_export(three, "--workspace", "acme", db=db), alone)
    _same(_export(three, "--workspace", "acme"), alone)
    config = cwd / "convo.toml"
    text = config.read_text()
    try:
        start = text.index('[[workspaces]]\nname = "globex"')
        config.write_text(text[:start] + text[text.index("[[workspaces]]", start + 1) :])
        _same(_export(three, "--workspace", "acme", db=db), alone)
        kept = _export(three, "--workspace", "globex", db=db)  # still there, by the table
        _same(kept, _service_summary(three, "globex"))
    finally:
        config.write_text(text)


def test_the_guardrail_log_names_the_workspace_in_every_row_and_the_manifest(
    three: dict[str, Any],
) -> None:
    cwd, db = three["dir"], str(three["db"])
    args = ("export", "guardrails", "--db", db, "--from", RANGE["from"], "--to", RANGE["to"],
            "--tz", "UTC", "--json", "--out-dir", str(cwd / "out"))  # fmt: skip
    every = json.loads(_ok(cli(cwd, *args)).stdout)
    rows = [json.loads(line) for line in (cwd / "out" / every["files"][0]["path"]).open()]
    assert rows and every["rowCount"] == len(rows)
    assert {(r["workspace_id"], r["workspace_name"]) for r in rows} <= {(IDS[n], n) for n in KEYS}
    per = {w["name"]: w["rows"] for w in every["workspaces"]}
    assert set(per) == set(KEYS) and sum(per.values()) == len(rows)
    for name in KEYS:
        assert per[name] == sum(r["workspace_name"] == name for r in rows)
    two = json.loads(_ok(cli(cwd, *args, "--workspace", "acme", "-w", "ws_initech")).stdout)
    assert two["files"][0]["path"].startswith("guardrail-incidents_acme+initech_")
    assert {w["name"]: w["rows"] for w in two["workspaces"]} == {
        "acme": per["acme"],
        "initech": per["initech"],
    }
    assert two["parameters"]["workspaces"] == ["acme", "initech"]
    assert two["rowCount"] == per["acme"] + per["initech"]


GLOBAL = "serve_global_token_000000000000"
TOKENS = {
    "acme": ["tok_acme_1111111111111111"],
    "globex": ["tok_globex_22222222222222", "tok_two_3333333333333333"],
    "initech": ["tok_two_3333333333333333"],
}


def test_serve_tokens_read_only_their_workspaces(three: dict[str, Any]) -> None:
    app = create_serve_app(three["db"], GLOBAL, workspace_tokens=TOKENS)
    with ServerThread(app) as server:

        def get(token: str, **params: str) -> httpx.Response:
            return httpx.get(
                server.url + "/v1/analytics/summary",
                params={**RANGE, **params},
                headers={"Authorization": f"Bearer {token}"},
                timeout=60,
            )

        mine = get(TOKENS["acme"][0])  # the token's only workspace by default
        assert mine.status_code == 200, mine.text
        _same(mine.json(), _service_summary(three, "acme"))
        assert get(TOKENS["acme"][0], workspace="ws_acme").json()["workspaceId"] == "ws_acme"
        # another's workspace, by name or id, and one that does not exist: the same 404
        refused = [get(TOKENS["acme"][0], workspace=w) for w in ("globex", "ws_globex", "nope")]
        assert {r.status_code for r in refused} == {404}
        shapes = {r.json()["error"]["message"].replace(w, "W") for r, w in
                  zip(refused, ("globex", "ws_globex", "nope"), strict=True)}  # fmt: skip
        assert len(shapes) == 1, shapes
        assert all(r.json()["error"]["code"] == refused[0].json()["error"]["code"] for r in refused)
        several = get(TOKENS["initech"][0])  # a token of globex and initech names neither
        assert several.status_code == 400, several.text
        assert "acme" not in several.text
        _same(get(TOKENS["initech"][0], workspace="initech").json(),
              _service_summary(three, "initech"))  # fmt: skip
        for name in KEYS:  # the global token reads every workspace
            _same(get(GLOBAL, workspace=name).json(), _service_summary(three, name))
        assert get(GLOBAL).status_code == 400, "several workspaces, none named"
        assert get(GLOBAL, workspace="*").json()["workspaceId"] == "*"
        assert get(TOKENS["acme"][0], workspace="*").status_code == 404
        spec = httpx.get(server.url + "/openapi.json", timeout=30).json()
        route = spec["paths"]["/v1/analytics/summary"]["get"]
        assert "workspace" in {p["name"] for p in route["parameters"]}
        assert {"400", "404"} <= set(route["responses"])
        wrong = get("tok_acme_1111111111111112")
        assert wrong.status_code == 401
        for token in (GLOBAL, *TOKENS["acme"], *TOKENS["globex"]):
            assert all(token not in r.text for r in (wrong, several, *refused))


def test_serve_tokens_are_read_by_serve_alone(three: dict[str, Any]) -> None:
    """ACME_SERVE_TOKENS is named in convo.toml but not set: exports (above) and runs work
    without it, and `convo serve` says which variable to set, never a token."""
    cwd = three["dir"]
    with socket.socket() as sock:  # a free port, should it listen (it must not)
        sock.bind(("127.0.0.1", 0))
        port = str(sock.getsockname()[1])
    done = convo(cwd, "serve", "--db", str(three["db"]), "--port", port,
                 CONVO_SERVE_TOKEN=GLOBAL)  # fmt: skip
    assert done.returncode == 2
    assert "ACME_SERVE_TOKENS" in done.stderr and GLOBAL not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


def test_the_nightly_exports_step_writes_a_summary_per_workspace(three: dict[str, Any]) -> None:
    """pipelines/nightly.py's exports step over the three workspaces: one summary file per
    workspace, each the service's summary of it, and counts per workspace."""
    spec = importlib.util.spec_from_file_location("nightly", ROOT / "pipelines" / "nightly.py")
    assert spec is not None and spec.loader is not None
    nightly = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(nightly)
    cwd = three["dir"]
    out = cwd / "nightly-exports"
    settings = load_settings(
        cwd / "convo.toml",
        {
            "export.dir": out,
            "run.export_days": 700,
            "warehouse.path": three["db"],
            "audit.file": cwd / "audit.jsonl",
        },
        {},  # no credentials: the step reads names and ids only
    )
    counts = nightly.exports(RunContext(settings, "run-test", three["db"]))
    files = {p.name: json.loads(p.read_bytes()) for p in out.glob("summary_*.json")}
    assert counts["summaries"] == len(files) == 3
    for name in KEYS:
        (body,) = [b for f, b in files.items() if f.startswith(f"summary_{name}_")]
        assert body["workspaceId"] == IDS[name]
        with three["sandbox"].client(KEYS[name]) as client:
            theirs = client.get("/v1/analytics/summary", params={
                "from": body["from"], "to": body["to"], "tz": "UTC"}).json()  # fmt: skip
        _same(body, theirs)
        assert counts["conversations_per_workspace"][name] == theirs["totals"]["conversations"]
    (manifest,) = out.glob("guardrail-incidents_*.manifest.json")
    listed = json.loads(manifest.read_bytes())["workspaces"]
    assert counts["incidents_per_workspace"] == {w["name"]: w["rows"] for w in listed}
    assert sum(counts["incidents_per_workspace"].values()) == counts["incidents_exported"]
