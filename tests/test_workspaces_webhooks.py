"""Webhook deliveries of several workspaces (issue 17): one receiver endpoint per workspace,
each verified with its own secrets and archived apart; ingest verifies each workspace's
archive with that workspace's secrets, so a delivery signed with another's is quarantined."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import httpx
import orjson

from convo_analytics._serving import ServerThread
from convo_analytics.webhooks._receiver import ReceiverSettings, create_receiver_app
from webhook_support import delivery, event, rows, signed_body

ACME = b"whsec_acme_secret_0000001"
GLOBEX = b"whsec_globex_secret_000002"


def _post(url: str, body: bytes) -> httpx.Response:
    signature = orjson.loads(body)["signature"]
    return httpx.post(url, content=body, timeout=10, headers={
        "content-type": "application/json", "x-convo-signature": signature,
        "idempotency-key": f"evt_{hash(body)}"})  # fmt: skip


def test_each_workspace_endpoint_verifies_with_its_own_secrets(tmp_path: Path) -> None:
    settings = ReceiverSettings(
        archive_dir=tmp_path, secrets=[],
        workspaces={"acme": [ACME.decode()], "globex": [GLOBEX.decode()]},
        workspace_ids={"acme": "ws_t"},
    )  # fmt: skip
    with ServerThread(create_receiver_app(settings)) as server:
        ok = _post(f"{server.url}/webhooks/acme", signed_body(event(1), ACME))
        wrong = _post(f"{server.url}/webhooks/acme", signed_body(event(2), GLOBEX))
        globex_event = dict(event(3), workspaceId="ws_globex")
        other = _post(f"{server.url}/webhooks/globex", signed_body(globex_event, GLOBEX))
        claimed = dict(event(4), workspaceId="ws_globex")
        mismatch = _post(f"{server.url}/webhooks/acme", signed_body(claimed, ACME))
        unknown = _post(f"{server.url}/webhooks/initech", signed_body(event(5), ACME))
    assert ok.status_code == 200 and other.status_code == 200
    assert wrong.status_code == 401, "another workspace's secret does not verify here"
    assert mismatch.status_code == 400 and mismatch.json()["error"]["code"] == "workspace_mismatch"
    assert unknown.status_code == 404
    acme = list((tmp_path / "workspaces" / "acme").glob("*.jsonl"))
    globex = list((tmp_path / "workspaces" / "globex").glob("*.jsonl"))
    assert len(acme) == 1 and len(acme[0].read_text().splitlines()) == 1
    assert orjson.loads(acme[0].read_text())["workspace"] == "acme"
    assert len(globex) == 1
    quarantined = [
        orjson.loads(line) for f in (tmp_path / "quarantine").glob("*.jsonl")
        for line in f.read_text().splitlines()
    ]  # fmt: skip
    reasons = sorted((q["workspace"], q["reason"]) for q in quarantined)
    assert reasons == [("acme", "bad_signature"), ("acme", "workspace_mismatch")]


def test_ingest_verifies_each_workspace_archive_with_its_secrets(tmp_path: Path) -> None:
    archive = tmp_path / "archive"
    for name, secret, offset in (("acme", ACME, 0), ("globex", GLOBEX, 100)):
        folder = archive / "workspaces" / name
        folder.mkdir(parents=True)
        own = {"workspaceId": f"ws_{name}"}
        lines = [delivery(dict(event(offset + n), **own), secret=secret) for n in range(3)]
        if name == "acme":  # one line signed with the other workspace's secret
            lines.append(delivery(dict(event(offset + 9), **own), secret=GLOBEX))
        (folder / "webhooks-2026-10-21.jsonl").write_bytes(b"".join(lines))
    (tmp_path / "convo.toml").write_text(f"""
[webhooks]
archive_dir = "{archive}"

[[workspaces]]
name = "acme"
webhook_secrets_env = "ACME_HOOKS"

[[workspaces]]
name = "globex"
webhook_secrets_env = "GLOBEX_HOOKS"
""")
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "ACME_HOOKS": ACME.decode(),
           "GLOBEX_HOOKS": GLOBEX.decode()}  # fmt: skip
    db = tmp_path / "w.duckdb"
    done = subprocess.run(
        [sys.executable, "-m", "convo_analytics.cli", "webhooks", "ingest", str(archive),
         "--db", str(db), "--json"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    counts = json.loads(done.stdout)["workspaces"]
    assert counts["acme"]["loaded"] == 3 and counts["acme"]["quarantined"] == {"bad_signature": 1}
    assert counts["globex"]["loaded"] == 3
    assert rows(db, "SELECT count(*) FROM events") == [(6,)]
    assert ACME.decode() not in done.stdout + done.stderr
