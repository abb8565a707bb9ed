"""A workspace's secret writes only that workspace's data (issue 24, D-WEBHOOK-WORKSPACE).

Over real HTTP, a receiver serving two workspaces refuses a body naming the other
workspace or a workspace id that is not text, and a body signed with the other's
secret; nothing of them reaches an archive the ingest reads. The same lines put in
the archive folders by hand are quarantined by the ingest with their reasons;
replay verifies each line with the secrets of the workspace it came from, from
[[workspaces]], without --secret. Keys are per workspace, so another workspace's
idempotency key sent first does not make this one's event a duplicate.
"""

from __future__ import annotations

import json
import logging
import subprocess
import sys
from pathlib import Path
from typing import Any

import duckdb
import httpx
import orjson
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from convo_analytics._serving import ServerThread
from convo_analytics.webhooks import EndpointWorkspace, IngestOptions, WorkspaceScope, ingest
from convo_analytics.webhooks._receiver import ReceiverSettings, create_receiver_app
from webhook_support import delivery, event, rows, signed_body

ACME = b"whsec_acme_isolation_0001"
GLOBEX = b"whsec_globex_isolation_02"
ACME_ID, GLOBEX_ID = "ws_acme", "ws_globex"
#: Workspace ids that are not text, each refused wherever it stands.
NOT_TEXT: list[Any] = [42, None, ["ws_acme"], {"id": "ws_acme"}, True, "", 4.5]


def acme_event(n: int, **fields: Any) -> dict[str, Any]:
    return {**event(n), "workspaceId": ACME_ID, **fields}


def globex_event(n: int, **fields: Any) -> dict[str, Any]:
    return {**event(n), "workspaceId": GLOBEX_ID, **fields}


def _post(url: str, body: bytes, key: str) -> httpx.Response:
    signature = orjson.loads(body)["signature"]
    return httpx.post(url, content=body, timeout=10, headers={
        "content-type": "application/json", "x-convo-signature": signature,
        "idempotency-key": key})  # fmt: skip


def _archived(folder: Path) -> list[dict[str, Any]]:
    """Every line of the accepted archives under ``folder`` (the quarantine left out)."""
    out = []
    for path in sorted(folder.rglob("*.jsonl")):
        if "quarantine" not in path.parts:
            out += [orjson.loads(line) for line in path.read_bytes().splitlines()]
    return out


def _config(tmp_path: Path, archive: Path, *, acme_id: str | None = None) -> Path:
    acme_line = f'workspace_id = "{acme_id}"\n' if acme_id else ""
    path = tmp_path / "convo.toml"
    path.write_text(f"""
[webhooks]
archive_dir = "{archive}"

[warehouse]
path = "{tmp_path / "w.duckdb"}"

[[workspaces]]
name = "acme"
{acme_line}webhook_secrets_env = "ACME_HOOKS"

[[workspaces]]
name = "globex"
webhook_secrets_env = "GLOBEX_HOOKS"
""")
    return path


def _convo(tmp_path: Path, *args: str, env: dict[str, str] | None = None) -> Any:
    base = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "ACME_HOOKS": ACME.decode(),
            "GLOBEX_HOOKS": GLOBEX.decode(),
            "CONVO_CONFIG": str(tmp_path / "convo.toml")}  # fmt: skip
    return subprocess.run(
        [sys.executable, "-m", "convo_analytics.cli", *args],
        cwd=tmp_path, env={**base, **(env or {})}, capture_output=True, text=True, timeout=120,
    )  # fmt: skip


def _receiver(archive: Path, **extra: Any) -> ReceiverSettings:
    return ReceiverSettings(
        archive_dir=archive, secrets=[],
        workspaces={"acme": [ACME.decode()], "globex": [GLOBEX.decode()]}, **extra,
    )  # fmt: skip


def test_the_receiver_refuses_what_is_not_the_endpoints_workspace(tmp_path: Path) -> None:
    """No workspace id configured: each endpoint binds the id its first verified event
    names; a body naming the other's, an id that is not text, or the other's signature is
    refused, and nothing of it reaches an archive the ingest reads."""
    archive = tmp_path / "archive"
    with ServerThread(create_receiver_app(_receiver(archive))) as server:
        acme, globex = f"{server.url}/webhooks/acme", f"{server.url}/webhooks/globex"
        assert _post(globex, signed_body(globex_event(1), GLOBEX), "k-g1").status_code == 200
        assert _post(acme, signed_body(acme_event(2), ACME), "k-a2").status_code == 200
        refused = {
            "other workspace": _post(acme, signed_body(acme_event(3, workspaceId=GLOBEX_ID),
                                                       ACME), "k-a3"),
            "other tenantId": _post(acme, signed_body(acme_event(4, tenantId=GLOBEX_ID), ACME),
                                    "k-a4"),
            "data.tenantId": _post(acme, signed_body(
                {**acme_event(5), "data": {"tenantId": GLOBEX_ID}}, ACME), "k-a5"),
            "other secret": _post(acme, signed_body(acme_event(6), GLOBEX), "k-a6"),
        }  # fmt: skip
        for n, value in enumerate(NOT_TEXT):
            body = signed_body(acme_event(10 + n, workspaceId=value), ACME)
            refused[f"workspaceId={value!r}"] = _post(acme, body, f"k-x{n}")
        body = signed_body({**acme_event(30), "tenantId": 7}, ACME)
        refused["tenantId=7"] = _post(acme, body, "k-t7")
        # without a workspace field the event is the endpoint's
        bare = {k: v for k, v in acme_event(40).items() if k != "workspaceId"}
        assert _post(acme, signed_body(bare, ACME), "k-a40").status_code == 200
    codes = {name: (r.status_code, r.json()["error"]["code"]) for name, r in refused.items()}
    assert codes.pop("other secret") == (401, "invalid_signature")
    assert codes.pop("other workspace") == (400, "workspace_mismatch")
    assert codes.pop("other tenantId") == (400, "workspace_mismatch")
    assert codes.pop("data.tenantId") == (400, "workspace_mismatch")
    assert set(codes.values()) == {(400, "invalid_workspace")}, codes
    archived = _archived(archive)
    keys = sorted(line["headers"]["idempotency-key"] for line in archived)
    assert keys == ["k-a2", "k-a40", "k-g1"]
    assert json.loads((archive / "workspaces" / ".workspace-ids").read_text()) == {
        "acme": ACME_ID, "globex": GLOBEX_ID}  # fmt: skip


def test_a_bound_id_survives_a_restart_and_a_configured_one_needs_no_first_sight(
    tmp_path: Path,
) -> None:
    archive = tmp_path / "archive"
    with ServerThread(create_receiver_app(_receiver(archive))) as server:
        url = f"{server.url}/webhooks/globex"
        assert _post(url, signed_body(globex_event(1), GLOBEX), "g1").status_code == 200
    with ServerThread(create_receiver_app(_receiver(archive))) as server:
        # acme has never received anything: globex's id is still globex's
        body = signed_body(acme_event(2, workspaceId=GLOBEX_ID), ACME)
        got = _post(f"{server.url}/webhooks/acme", body, "a2")
    assert got.status_code == 400 and "globex" in got.json()["error"]["message"]
    fresh = tmp_path / "fresh"
    configured = _receiver(fresh, workspace_ids={"acme": ACME_ID})
    with ServerThread(create_receiver_app(configured)) as server:
        # the first event of acme's endpoint cannot bind another id than the configured one
        body = signed_body(acme_event(3, workspaceId="ws_initech"), ACME)
        first = _post(f"{server.url}/webhooks/acme", body, "a3")
    assert first.status_code == 400 and first.json()["error"]["code"] == "workspace_mismatch"
    assert _archived(fresh) == []


def test_the_signature_alarm_names_the_workspace_and_its_secrets(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    settings = _receiver(tmp_path, workspace_hints={"acme": "$ACME_HOOKS"})
    with caplog.at_level(logging.ERROR), ServerThread(create_receiver_app(settings)) as server:
        for n in range(3):
            _post(f"{server.url}/webhooks/acme", signed_body(acme_event(n), GLOBEX), f"k{n}")
    alarms = [r.getMessage() for r in caplog.records if "signature check" in r.getMessage()]
    assert len(alarms) == 1, alarms
    assert "/webhooks/acme" in alarms[0] and "workspace acme's 1 configured secret" in alarms[0]
    assert "$ACME_HOOKS" in alarms[0] and "CONVO_WEBHOOK_SECRET" not in alarms[0]
    assert ACME.decode() not in alarms[0] and GLOBEX.decode() not in alarms[0]


def test_another_workspaces_idempotency_key_sent_first_drops_nothing(tmp_path: Path) -> None:
    archive = tmp_path / "archive"
    _config(tmp_path, archive)
    with ServerThread(create_receiver_app(_receiver(archive))) as server:
        # globex (or whoever holds its secret) sends acme's next key first
        first = _post(f"{server.url}/webhooks/globex", signed_body(globex_event(1), GLOBEX),
                      "evt_shared_0001")  # fmt: skip
        real = _post(f"{server.url}/webhooks/acme", signed_body(acme_event(2), ACME),
                     "evt_shared_0001")  # fmt: skip
        again = _post(f"{server.url}/webhooks/acme", signed_body(acme_event(2), ACME),
                      "evt_shared_0001")  # fmt: skip
    assert first.status_code == real.status_code == again.status_code == 200
    done = _convo(tmp_path, "webhooks", "ingest", str(archive), "--json")
    assert done.returncode == 0, done.stderr
    counts = json.loads(done.stdout)["workspaces"]
    assert counts["acme"]["loaded"] == 1 and counts["acme"]["duplicates"] == 1
    assert counts["globex"]["loaded"] == 1
    db = tmp_path / "w.duckdb"
    stored = rows(db, "SELECT workspace_id, event_id FROM events ORDER BY 1")
    assert stored == [(ACME_ID, "evt_shared_0001"), (GLOBEX_ID, "evt_shared_0001")]
    assert rows(db, "SELECT DISTINCT workspace_id FROM event_keys ORDER BY 1") == [
        (ACME_ID,), (GLOBEX_ID,)]  # fmt: skip


def _hand_placed(archive: Path) -> None:
    """The lines the receiver refuses, written into acme's archive folder by hand."""
    folder = archive / "workspaces" / "acme"
    folder.mkdir(parents=True)
    lines = [delivery(acme_event(1), secret=ACME, key="a-ok")]  # binds acme to ws_acme
    lines.append(delivery(acme_event(2, workspaceId=GLOBEX_ID), secret=ACME, key="a-other"))
    for n, value in enumerate(NOT_TEXT):
        lines.append(delivery(acme_event(10 + n, workspaceId=value), secret=ACME, key=f"a-{n}"))
    lines.append(delivery(acme_event(3), secret=GLOBEX, key="a-globex-signed"))
    (folder / "deliveries-2026-10-21.jsonl").write_bytes(b"".join(lines))
    globex = archive / "workspaces" / "globex"
    globex.mkdir(parents=True)
    (globex / "deliveries-2026-10-21.jsonl").write_bytes(
        delivery(globex_event(50), secret=GLOBEX, key="g-ok")
    )


def test_hand_placed_lines_are_quarantined_by_ingest_with_their_reasons(tmp_path: Path) -> None:
    archive = tmp_path / "archive"
    _config(tmp_path, archive)
    _hand_placed(archive)
    done = _convo(tmp_path, "webhooks", "ingest", str(archive), "--json")
    assert done.returncode == 0, done.stderr
    db = tmp_path / "w.duckdb"
    assert rows(db, "SELECT workspace_id, event_id FROM events ORDER BY 1") == [
        (ACME_ID, "a-ok"), (GLOBEX_ID, "g-ok")]  # fmt: skip
    reasons = rows(db, "SELECT reason, workspace, count(*) FROM quarantine GROUP BY ALL "
                       "ORDER BY 1")  # fmt: skip
    assert reasons == [
        ("bad_signature", "acme", 1),
        ("invalid_workspace", "acme", len(NOT_TEXT)),
        ("workspace_mismatch", "acme", 1),
    ]
    assert rows(db, "SELECT name, workspace_id, id_origin FROM workspaces ORDER BY 1") == [
        ("acme", ACME_ID, "webhook"), ("globex", GLOBEX_ID, "webhook")]  # fmt: skip
    for secret in (ACME, GLOBEX):
        assert secret.decode() not in done.stdout + done.stderr


def test_replay_verifies_each_line_with_its_own_workspaces_secrets(tmp_path: Path) -> None:
    """acme's secret was rotated after its deliveries were signed: its lines wait in the
    quarantine; replay with [[workspaces]] (no --secret, no CONVO_WEBHOOK_SECRET) loads them
    with acme's new secrets, and leaves the line signed with globex's secret where it is."""
    archive = tmp_path / "archive"
    _config(tmp_path, archive)
    _hand_placed(archive)
    old = {"ACME_HOOKS": "whsec_not_yet_rotated_000"}
    done = _convo(tmp_path, "webhooks", "ingest", str(archive), "--json", env=old)
    assert done.returncode == 1, done.stderr  # the signature alarm: most of acme's lines fail
    assert "workspace acme's webhook secrets ($ACME_HOOKS)" in done.stderr
    db = tmp_path / "w.duckdb"
    assert rows(db, "SELECT count(*) FROM quarantine WHERE workspace = 'acme'") == [(10,)]
    replayed = _convo(tmp_path, "webhooks", "quarantine", "replay", "--json")
    assert replayed.returncode == 0, replayed.stderr
    result = json.loads(replayed.stdout)
    assert result["loaded"] == 1  # a-ok (the mismatched and invalid ones stay, as before)
    assert rows(db, "SELECT workspace_id, event_id FROM events ORDER BY 1, 2") == [
        (ACME_ID, "a-ok"), (GLOBEX_ID, "g-ok")]  # fmt: skip
    still = dict(rows(db, "SELECT reason, count(*) FROM quarantine WHERE resolved_at IS NULL "
                          "GROUP BY 1"))  # fmt: skip
    assert still == {"bad_signature": 1, "invalid_workspace": len(NOT_TEXT),
                     "workspace_mismatch": 1}  # fmt: skip


def test_replay_of_flat_rows_without_a_secret_is_one_line(tmp_path: Path) -> None:
    archive = tmp_path / "archive"
    _config(tmp_path, archive)
    flat = archive / "deliveries-2026-10-21.jsonl"
    flat.parent.mkdir(parents=True)
    flat.write_bytes(delivery(acme_event(1), secret=b"whsec_someone_else_0000"))
    db = tmp_path / "w.duckdb"
    ingest([flat], [b"whsec_flat_secret_000000"], db)
    done = _convo(tmp_path, "webhooks", "quarantine", "replay")
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and "flat endpoint" in done.stderr
    assert "CONVO_WEBHOOK_SECRET" in done.stderr and "Traceback" not in done.stderr
    # narrowed to a workspace with nothing open, it runs
    ok = _convo(tmp_path, "webhooks", "quarantine", "replay", "--workspace", "acme", "--json")
    assert ok.returncode == 0 and json.loads(ok.stdout)["read"] == 0, ok.stderr


def test_a_configured_id_the_warehouse_binds_to_another_name_is_refused(tmp_path: Path) -> None:
    archive = tmp_path / "archive"
    _config(tmp_path, archive)
    _hand_placed(archive)
    assert _convo(tmp_path, "webhooks", "ingest", str(archive)).returncode == 0
    _config(tmp_path, archive, acme_id=GLOBEX_ID)  # a typo: globex's id for acme
    (archive / "workspaces" / "acme" / "more.jsonl").write_bytes(
        delivery(acme_event(99, workspaceId=GLOBEX_ID), secret=ACME, key="more")
    )
    done = _convo(tmp_path, "webhooks", "ingest", str(archive))
    assert done.returncode == 2, done.stderr
    (line,) = done.stderr.splitlines()
    assert "'ws_globex'" in line and "'globex'" in line and "'acme'" in line
    assert rows(tmp_path / "w.duckdb", "SELECT count(*) FROM events WHERE event_id = 'more'") == [
        (0,)]  # fmt: skip


# -- the property: stored under the endpoint's workspace, or quarantined ---------------------

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=12) | st.sampled_from([ACME_ID, GLOBEX_ID, "", "ws_other"]),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner,
                                                                 max_size=3),
    max_leaves=6,
)  # fmt: skip
absent = st.just(...)


@settings(max_examples=300, deadline=None)
@given(workspace=absent | json_values, tenant=absent | json_values, known=st.booleans())
@example(workspace=GLOBEX_ID, tenant=..., known=False)
@example(workspace=42, tenant=..., known=True)
@example(workspace=..., tenant=GLOBEX_ID, known=True)
def test_admit_never_stores_under_another_workspace(workspace: Any, tenant: Any,
                                                    known: bool) -> None:  # fmt: skip
    """For any JSON value of workspaceId (and tenantId), an event on acme's endpoint is
    stored under acme's id or refused; never under any other id."""
    body: dict[str, Any] = {k: v for k, v in acme_event(1).items() if k != "workspaceId"}
    if workspace is not ...:
        body["workspaceId"] = workspace
    if tenant is not ...:
        body["tenantId"] = tenant
    endpoint = EndpointWorkspace("acme", ACME_ID if known else None, {"globex": None})
    scope = WorkspaceScope(endpoint, {"globex": GLOBEX_ID})
    stored, refused = scope.admit(body)
    if refused is None:
        assert stored is not None
        assert stored == (ACME_ID if known else scope.workspace_id)
        assert stored not in (GLOBEX_ID, "globex")
        claims = [v for v in (workspace, tenant) if v is not ...]
        assert all(claim == stored for claim in claims)
    else:
        assert stored is None


@settings(
    max_examples=25, deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)  # fmt: skip
@given(values=st.lists(absent | json_values, min_size=1, max_size=6))
def test_ingest_stores_each_line_under_the_folders_workspace_or_quarantines_it(
    tmp_path_factory: pytest.TempPathFactory, values: list[Any]
) -> None:
    """End to end through the ingest: lines with random workspaceId values in acme's folder
    (acme's id configured) are each loaded under ws_acme or quarantined; none is stored
    under any other workspace, and none is lost."""
    folder = tmp_path_factory.mktemp("prop")
    lines = []
    for n, value in enumerate(values):
        body = {k: v for k, v in acme_event(n).items() if k != "workspaceId"}
        if value is not ...:
            body["workspaceId"] = value
        lines.append(delivery(body, secret=ACME, key=f"k{n}"))
    path = folder / "workspaces" / "acme" / "d.jsonl"
    path.parent.mkdir(parents=True)
    path.write_bytes(b"".join(lines))
    db = folder / "w.duckdb"
    endpoint = EndpointWorkspace("acme", ACME_ID, {"globex": GLOBEX_ID})
    result = ingest([path], [ACME], db, endpoint=endpoint)
    assert result.loaded + result.duplicates + sum(result.quarantined.values()) == len(values)
    con = duckdb.connect(str(db), read_only=True)
    try:
        stored = con.execute("SELECT DISTINCT workspace_id FROM events").fetchall()
        tables = [t for (t,) in con.execute(
            "SELECT table_name FROM duckdb_columns() WHERE column_name = 'workspace_id' "
            "AND table_name IN ('message_traces', 'event_keys')").fetchall()]  # fmt: skip
        others = [
            con.execute(f"SELECT count(*) FROM {t} WHERE workspace_id <> ?", [ACME_ID]).fetchone()
            for t in tables
        ]
    finally:
        con.close()
    assert stored in ([], [(ACME_ID,)])
    assert all(n == (0,) for n in others)


def test_the_property_fails_without_the_endpoint_rule() -> None:
    """The flat endpoint (the all-workspaces secret) stores what the event names: the
    strict rule above is the endpoint's, not an accident of the helper."""
    scope = WorkspaceScope(EndpointWorkspace(None), {"globex": GLOBEX_ID})
    assert scope.admit(acme_event(1, workspaceId=GLOBEX_ID)) == (GLOBEX_ID, None)
    assert scope.admit(acme_event(1, workspaceId=42))[1] is not None


def test_an_extract_cannot_learn_an_id_another_workspace_holds(
    start_sandbox: Any, tmp_path: Path
) -> None:
    """acme configured with a key of globex's (a mistake, or a hostile key): its records
    name ws_globex, which globex's extraction bound first. The extract stops for acme with
    one line naming both, and nothing of it is stored under globex's id."""
    from conftest import GLOBEX_KEY

    running = start_sandbox(conversations=10)
    (tmp_path / "convo.toml").write_text(f"""
[service]
rate_limit = "none"

[warehouse]
path = "{tmp_path / "w.duckdb"}"

[[workspaces]]
name = "globex"
base_url = "{running.url}"
auth = {{ type = "api_key", key_env = "GLOBEX_KEY" }}

[[workspaces]]
name = "acme"
base_url = "{running.url}"
auth = {{ type = "api_key", key_env = "GLOBEX_KEY" }}
""")
    env = {"GLOBEX_KEY": GLOBEX_KEY}
    first = _convo(tmp_path, "extract", "--workspace", "globex", env=env)
    assert first.returncode == 0, first.stderr
    db = tmp_path / "w.duckdb"
    before = rows(db, "SELECT workspace_id, count(*) FROM conversations GROUP BY 1")
    done = _convo(tmp_path, "extract", "--workspace", "acme", env=env)
    assert done.returncode == 2, done.stderr
    assert "'ws_globex'" in done.stderr and "'globex'" in done.stderr and "'acme'" in done.stderr
    assert "Traceback" not in done.stderr and GLOBEX_KEY not in done.stderr
    assert rows(db, "SELECT workspace_id, count(*) FROM conversations GROUP BY 1") == before
    assert rows(db, "SELECT name, workspace_id FROM workspaces") == [("globex", GLOBEX_ID)]


def test_keys_stored_before_schema_7_stay_known_in_their_workspace(tmp_path: Path) -> None:
    """A warehouse of schema 6 (keys without a workspace) upgrades in place: each key goes
    under its event's workspace, so reading the same archive again loads nothing twice."""
    from convo_analytics.warehouse import open_warehouse

    archive = tmp_path / "a.jsonl"
    from webhook_support import SECRET

    lines = [delivery(acme_event(n), key=f"k{n}") for n in range(3)]
    lines.append(delivery(globex_event(9), key="k9"))
    archive.write_bytes(b"".join(lines))
    db = tmp_path / "w.duckdb"
    assert ingest([archive], [SECRET], db).loaded == 4
    con = duckdb.connect(str(db))
    con.execute("CREATE TABLE old_keys AS SELECT key, event_id FROM event_keys")
    con.execute("DROP TABLE event_keys")
    con.execute("ALTER TABLE old_keys RENAME TO event_keys")
    con.execute("DELETE FROM schema_version")
    con.execute("INSERT INTO schema_version VALUES (6, now())")
    con.close()
    open_warehouse(db).close()
    keys = rows(db, "SELECT workspace_id, count(*) FROM event_keys GROUP BY 1 ORDER BY 1")
    assert keys == [(ACME_ID, 6), (GLOBEX_ID, 2)]  # an idempotency key and a hash each
    again = ingest([archive], [SECRET], db, endpoint=None)
    assert again.loaded == 0
    full = ingest([archive], [SECRET], db, IngestOptions(full=True))
    assert full.loaded == 0 and full.duplicates == 4


def test_the_nightly_step_loads_events_that_waited_for_their_workspaces_id(
    tmp_path: Path,
) -> None:
    """An event naming no workspace, in the folder of a workspace whose id is not known yet,
    waits in the quarantine (workspace_unknown); once the id is known (configured here, or
    learned by an extraction), the nightly ingest step loads it, under that id."""
    from convo_analytics.config import load_settings
    from convo_analytics.pipeline import RunContext, load_steps

    archive = tmp_path / "archive"
    folder = archive / "workspaces" / "acme"
    folder.mkdir(parents=True)
    bare = {k: v for k, v in acme_event(1).items() if k != "workspaceId"}
    (folder / "deliveries-2026-10-21.jsonl").write_bytes(delivery(bare, secret=ACME, key="b1"))
    steps = {s.name: s for s in load_steps(Path(__file__).parents[1] / "pipelines/nightly.py")}
    env = {"ACME_HOOKS": ACME.decode(), "GLOBEX_HOOKS": GLOBEX.decode()}
    db = tmp_path / "w.duckdb"

    def night(run_id: str) -> dict[str, Any]:
        settings = load_settings(tmp_path / "convo.toml", {}, env)
        result: dict[str, Any] = steps["webhook_ingest"].run(RunContext(settings, run_id, db))
        return result

    _config(tmp_path, archive)
    first = night("r1")
    assert first["quarantine_open"] == 1
    assert rows(db, "SELECT reason FROM quarantine") == [("workspace_unknown",)]
    _config(tmp_path, archive, acme_id=ACME_ID)
    second = night("r2")
    assert (second["loaded"], second["quarantine_open"]) == (1, 0)
    assert rows(db, "SELECT workspace_id, event_id FROM events") == [(ACME_ID, "b1")]
