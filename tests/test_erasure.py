"""`convo erase` (issue 30, D-ERASURE), as a user runs it: a real sandbox over HTTP on
127.0.0.1, the CLI in subprocesses, real DuckDB files, a signed webhook archive.

A person injected into the sandbox (their own conversations, with text nobody else
typed) is extracted, ingested from the archive, transformed and published; after
`convo erase` no file under the data folder (the warehouse and the published snapshots,
read as their rows' text and as bytes) holds their identifier or their messages'
text; the marts equal a full rebuild's; a full re-extract and a re-ingest of the
archive leave them out; another workspace's rows are untouched; a dry run changes
nothing; a kill -9 at any moment and a re-run reach the same end.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb
import pytest

from conftest import GLOBEX_KEY, RunningSandbox, make_settings
from convo_analytics._serving import ServerThread
from convo_analytics.sandbox import Sandbox, create_app, write_history_archive
from erasure_support import SECRET, config_text, convo, ok, setup_command
from erasure_support import env_of as _env
from erasure_support import inject as _inject
from test_privacy_load import files_holding

PERSON = "u-erase-me-7781"
#: What the person typed: nobody else in the sandbox types these.
TEXTS = ("my parcel zq-7781-kelp never came", "call me about the zq-7781-kelp refund")
#: What the person of the same id in globex typed (another person: another workspace).
GLOBEX_TEXTS = ("globex order qx-5521-fern",)
#: Someone else, with the same words in another workspace-free conversation: stays.
OTHER = "u-keep-me-4410"


@dataclass
class Prepared:
    folder: Path
    archive: Path
    running: RunningSandbox
    conversations: list[str]

    @property
    def db(self) -> Path:
        return self.folder / "data" / "warehouse.duckdb"


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Prepared]:
    """A data folder after extract, ingest, transform and publish (copied per test)."""
    sandbox = Sandbox(make_settings(conversations=120, days=10))
    with ServerThread(create_app(sandbox)) as server:
        running = RunningSandbox(sandbox, server)
        folder = tmp_path_factory.mktemp("erase-template")
        ids = _inject(running, PERSON, TEXTS)
        _inject(running, OTHER, ("an ordinary question about opening hours",))
        _inject(running, PERSON, GLOBEX_TEXTS, GLOBEX_KEY)  # another person, same id
        archive = folder / "archive" / "history.jsonl.gz"
        acme = [w for w in sandbox.workspaces.values() if w.name == "acme"]
        write_history_archive(archive, acme, SECRET, seed=3)
        (folder / "convo.toml").write_text(config_text(running.url))
        setup_command(folder, "extract")
        # as if received: a copy in acme's archive folder, which the erasure rewrites
        received = folder / "data" / "webhooks" / "workspaces" / "acme"
        received.mkdir(parents=True)
        shutil.copyfile(archive, received / "deliveries-2026-11-01.jsonl.gz")
        setup_command(folder, "webhooks", "ingest", "-w", "acme", str(received))
        setup_command(folder, "transform")
        setup_command(folder, "publish")
        yield Prepared(folder, archive, running, ids)


@pytest.fixture
def prepared(template: Prepared, tmp_path: Path) -> Prepared:
    folder = tmp_path / "project"
    shutil.copytree(template.folder, folder)
    text = (folder / "convo.toml").read_text()
    (folder / "convo.toml").write_text(text)
    return Prepared(folder, folder / "archive" / "history.jsonl.gz", template.running,
                    template.conversations)  # fmt: skip


def _rows(db: Path, sql: str, params: list[Any] | None = None) -> list[tuple[Any, ...]]:
    con = duckdb.connect(str(db), read_only=True)
    try:
        return con.execute(sql, params or []).fetchall()
    finally:
        con.close()


def _marts(db: Path) -> dict[str, list[str]]:
    """Every mart's rows as sorted text (run ids and build times left out)."""
    skip = {"transform_run_id", "built_at", "updated_at", "computed_at"}
    con = duckdb.connect(str(db), read_only=True)
    try:
        tables = [r[0] for r in con.execute(
            "SELECT table_name FROM duckdb_tables() WHERE table_name LIKE 'mart_%' "
            "OR table_name IN ('knowledge_gaps', 'conversation_topics', 'topics')"
        ).fetchall()]  # fmt: skip
        out = {}
        for table in tables:
            cols = [
                c for (c,) in con.execute(
                    "SELECT column_name FROM information_schema.columns WHERE table_name = ?",
                    [table],
                ).fetchall() if c not in skip
            ]  # fmt: skip
            quoted = ", ".join(f'"{c}"' for c in cols)
            rows = con.execute(f"SELECT {quoted} FROM {table}").fetchall()
            out[table] = sorted(repr(r) for r in rows)
        return out
    finally:
        con.close()


def _person_count(db: Path) -> int:
    """The person's acme conversations and messages."""
    [(n,)] = _rows(
        db,
        "SELECT (SELECT count(*) FROM conversations WHERE external_user_id = ? AND workspace_id "
        "= (SELECT workspace_id FROM workspaces WHERE name = 'acme')) "
        "+ (SELECT count(*) FROM messages WHERE contains(text, 'zq-7781-kelp'))",
        [PERSON],
    )
    return int(n)


def _acme_rows_naming(db: Path, value: str) -> int:
    """Rows of acme, in any table with a workspace, any of whose columns holds ``value``."""
    con = duckdb.connect(str(db), read_only=True)
    try:
        [(acme,)] = con.execute(
            "SELECT workspace_id FROM workspaces WHERE name = 'acme'"
        ).fetchall()
        tables = [r[0] for r in con.execute(
            "SELECT DISTINCT table_name FROM information_schema.columns "
            "WHERE column_name = 'workspace_id'"
        ).fetchall()]  # fmt: skip
        return sum(
            int(con.execute(f"SELECT count(*) FROM {t} r WHERE workspace_id = ? "
                            "AND contains(CAST(r AS VARCHAR), ?)", [acme, value]).fetchone()[0])
            for t in tables
        )  # fmt: skip
    finally:
        con.close()


def test_the_person_leaves_every_file_of_the_data_folder_and_stays_out(prepared: Prepared) -> None:
    folder, db = prepared.folder, prepared.db
    assert _person_count(db) == 2 + 2 * len(TEXTS)  # they are there to begin with
    others_before = _rows(db, "SELECT count(*) FROM conversations WHERE external_user_id = ?",
                          [OTHER])  # fmt: skip
    # (their id stays: globex has a person of the same id, see the test below)
    values = {*TEXTS, *prepared.conversations}
    assert files_holding(folder / "data", values), "the person was not stored anywhere"
    cert = json.loads(ok(convo(folder, "erase", "-w", "acme", "--external-user-id", PERSON,
                               "--json")))  # fmt: skip
    assert cert["status"] == "complete" and cert["found"]["conversations"] == 2
    assert PERSON not in json.dumps(cert) and len(cert["subject"]) == 64
    stores = cert["stores"]
    assert {"warehouse", "marts", "suppression list", "published snapshots"} <= set(stores)
    assert stores["warehouse"]["tables"]["conversations"] == 2
    assert stores["warehouse"]["tables"]["messages"] >= 2 * len(TEXTS)
    snapshot = folder / "data" / "published" / stores["published snapshots"]["published"]
    digest = hashlib.sha256(snapshot.read_bytes()).hexdigest()
    assert stores["published snapshots"]["sha256"] == digest
    # the snapshot is the rewritten file, as it was before the certificate's own row
    assert stores["warehouse"]["rewritten"]["sha256"] == digest
    assert stores["published snapshots"]["removed"], "the older snapshot held the person"
    [rewritten] = stores["webhook archives"]["files"]
    assert rewritten["path"].endswith("workspaces/acme/deliveries-2026-11-01.jsonl.gz")
    assert rewritten["lines"] > 0
    assert rewritten["sha256"] == hashlib.sha256(Path(rewritten["path"]).read_bytes()).hexdigest()
    # no file under the data folder holds an id of theirs or what they typed, and no row of
    # acme their identifier
    assert files_holding(folder / "data", values) == {}
    assert _acme_rows_naming(db, PERSON) == 0
    assert _rows(db, "SELECT count(*) FROM conversations WHERE external_user_id = ?",
                 [OTHER]) == others_before  # fmt: skip
    [(logged,)] = _rows(db, "SELECT count(*) FROM erasure_log WHERE status = 'complete'")
    assert logged == 1
    # the marts are what a full rebuild of what is left gives
    full = folder / "full.duckdb"
    shutil.copyfile(db, full)
    ok(convo(folder, "transform", "--full", "--db", str(full)))
    assert _marts(db) == _marts(full)
    full.unlink()
    # a full re-extract and a re-ingest of the original archive leave them out
    extracted = json.loads(ok(convo(folder, "extract", "--full-refresh", "--json")))
    streams = extracted["workspaces"]["acme"]["streams"]
    assert streams["conversations"]["suppressed"] == 2, streams["conversations"]
    ingested = json.loads(ok(convo(folder, "webhooks", "ingest", "--full", "--json",
                                   "-w", "acme", str(prepared.archive))))  # fmt: skip
    assert ingested["suppressed"] > 0
    ok(convo(folder, "transform"))
    ok(convo(folder, "publish"))
    assert _person_count(db) == 0
    assert files_holding(folder / "data", values) == {}
    # the audit trail has the erasure, naming the person only by a keyed hash
    audit = (folder / "data" / "audit" / "audit.jsonl").read_text()
    assert '"erasure"' in audit and PERSON not in audit


def test_a_dry_run_lists_what_would_go_and_changes_nothing(prepared: Prepared) -> None:
    before = hashlib.sha256(prepared.db.read_bytes()).hexdigest()
    published = sorted(p.name for p in (prepared.folder / "data" / "published").iterdir())
    cert = json.loads(ok(convo(prepared.folder, "erase", "-w", "acme", "--external-user-id",
                               PERSON, "--dry-run", "--json")))  # fmt: skip
    assert cert["status"] == "dry-run"
    assert cert["stores"]["warehouse"]["tables"]["conversations"] == 2
    assert cert["stores"]["warehouse"]["tables"]["messages"] >= 2 * len(TEXTS)
    assert hashlib.sha256(prepared.db.read_bytes()).hexdigest() == before
    assert sorted(p.name for p in (prepared.folder / "data" / "published").iterdir()) == published
    assert _person_count(prepared.db) == 2 + 2 * len(TEXTS)


def test_an_unknown_person_erases_nothing_and_says_so(prepared: Prepared) -> None:
    shown = ok(convo(prepared.folder, "erase", "-w", "acme", "--email", "nobody@nowhere.example"))
    assert "0 conversations, 0 leads, 0 events" in shown
    assert _person_count(prepared.db) == 2 + 2 * len(TEXTS)


def test_a_person_of_another_workspace_is_not_touched(prepared: Prepared) -> None:
    """The same externalUserId in globex is another person: erasing them in globex leaves
    acme's rows, and acme's erasure leaves globex's."""
    db = prepared.db
    sql = "SELECT count(*) FROM conversations c JOIN workspaces w USING (workspace_id) " \
          "WHERE w.name = ? AND c.external_user_id = ?"  # fmt: skip
    assert _rows(db, sql, ["globex", PERSON]) == [(2,)]
    cert = json.loads(ok(convo(prepared.folder, "erase", "-w", "globex", "--external-user-id",
                               PERSON, "--json")))  # fmt: skip
    assert cert["found"]["conversations"] == 2
    assert _rows(db, sql, ["globex", PERSON]) == [(0,)]
    assert _person_count(db) == 2 + 2 * len(TEXTS)
    assert files_holding(prepared.folder / "data", set(GLOBEX_TEXTS)) == {}


def _erase_killed_at(folder: Path, seconds: float) -> bool:
    """Start the erasure and SIGKILL it after ``seconds``; whether it was still running."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "convo_analytics.cli", "erase", "-w", "acme",
         "--external-user-id", PERSON],
        cwd=folder, env=_env(folder), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.02)
    running = proc.poll() is None
    if running:
        os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    return running


def test_a_kill_at_any_moment_and_a_rerun_reach_the_same_end(prepared: Prepared) -> None:
    """Reference: an erasure run through; then, from the same start, erasures killed at
    random moments (two, one after the other) and run again to their end."""
    reference = prepared.folder.parent / "reference"
    shutil.copytree(prepared.folder, reference)
    ok(convo(reference, "erase", "-w", "acme", "--external-user-id", PERSON))
    expected = _marts(reference / "data" / "warehouse.duckdb")
    rng = random.Random(int(os.environ.get("ERASE_KILL_SEED", "0")) or None)
    killed = [_erase_killed_at(prepared.folder, rng.uniform(1.0, 5.0)) for _ in range(2)]
    ok(convo(prepared.folder, "erase", "-w", "acme", "--external-user-id", PERSON))
    assert _person_count(prepared.db) == 0
    assert _marts(prepared.db) == expected, f"killed: {killed}"
    [(complete,)] = _rows(prepared.db, "SELECT count(DISTINCT erasure_id) FROM erasure_log "
                          "WHERE status = 'complete'")  # fmt: skip
    assert complete >= 1
    assert files_holding(prepared.folder / "data", set(TEXTS)) == {}
    assert _acme_rows_naming(prepared.db, PERSON) == 0


def test_a_workspace_run_as_a_shard_is_erased_there_too(prepared: Prepared) -> None:
    """Scale-out keeps a workspace's share in ``shards/NAME.duckdb`` beside the warehouse
    (here a copy of the warehouse, with its own published folder): both lose the person."""
    shard = prepared.db.parent / "shards" / "acme.duckdb"
    shard.parent.mkdir()
    shutil.copyfile(prepared.db, shard)
    (shard.parent / "published" / "acme").mkdir(parents=True)
    cert = json.loads(ok(convo(prepared.folder, "erase", "-w", "acme", "--external-user-id",
                               PERSON, "--json")))  # fmt: skip
    assert cert["found"]["conversations"] == 4  # two in each warehouse
    assert cert["stores"]["shard warehouse"]["tables"]["conversations"] == 2
    assert cert["stores"]["shard published snapshots"]["published"]
    assert _person_count(prepared.db) == 0 and _person_count(shard) == 0
    assert files_holding(prepared.db.parent, {*TEXTS, *prepared.conversations}) == {}


def _stage_copies(prepared: Prepared) -> dict[str, Path]:
    """What the person's rows become outside the warehouse: a guardrail export and a
    knowledge-gap export (unredacted, with manifests sealed into the audit chain), a
    notebook's report (HTML and CSV) listing messages, an access request written into
    the exports folder, and a monitor alert (recorded, not yet sent) naming one of their
    conversations as an example."""
    from convo_analytics.notify import Notification, NotifyConfig, record

    folder = prepared.folder
    exports = folder / "data" / "exports"
    from datetime import date, timedelta

    today = date.today()
    first, last = str(today - timedelta(days=400)), str(today + timedelta(days=300))
    ok(convo(folder, "export", "guardrails", "--from", first, "--to", last, "--format", "csv",
             "--no-redact"))  # fmt: skip
    ok(convo(folder, "export", "knowledge-gaps", "--from", first, "--to", last, "--no-redact",
             "--out", str(exports / "gaps.csv")))  # fmt: skip
    ok(convo(folder, "export", "person", "-w", "acme", "--external-user-id", PERSON,
             "--out", str(exports / "access-request.json")))  # fmt: skip
    notebooks = folder / "data" / "notebooks"
    notebooks.mkdir(parents=True, exist_ok=True)
    (notebooks / "every_message.sql").write_text(
        "-- Every message\n-- What was typed, per conversation.\n\n"
        "-- %% Messages\n-- chart: none\n"
        "SELECT conversation_id, text FROM messages ORDER BY conversation_id, position;\n"
    )
    report = folder / "data" / "reports" / "every_message" / "acme" / "2026-W48"
    ok(convo(folder, "notebook", "run", "every_message", "--workspace", "acme",
             "--out", str(report)))  # fmt: skip
    log = folder / "data" / "app-state" / "deliveries.jsonl"
    conv = prepared.conversations[0]
    alert = Notification.create(
        source="monitor", subject_id="m1:acme:2026-11-20", kind="monitor.alert",
        subject="Escalation rate rose in acme",
        text=f"Escalation rate 31% against 12% expected. Example: {conv} (web).",
        fields={"monitor": "m1"},
    )  # fmt: skip
    alert = Notification(**{**{s: getattr(alert, s) for s in alert.__slots__},
                            "details": {"examples": [{"conversation_id": conv, "channel": "web"},
                                                     {"conversation_id": "c-someone-else",
                                                      "channel": "web"}]}})  # fmt: skip
    config = NotifyConfig(channels=(_Channel(),), log_path=log)  # type: ignore[arg-type]
    assert record(config, alert) == 1
    return {"exports": exports, "report": report, "log": log}


class _Channel:
    name = "webhook"


def _csv_rows(path: Path) -> list[list[str]]:
    import csv

    with path.open(newline="") as f:
        return list(csv.reader(f))


def test_exports_reports_and_alerts_lose_the_person_and_are_sealed_again(
    prepared: Prepared,
) -> None:
    from convo_analytics.notify import read_deliveries

    staged = _stage_copies(prepared)
    folder, data = prepared.folder, prepared.folder / "data"
    values = {*TEXTS, *prepared.conversations, PERSON}
    held = files_holding(data / "exports", values) | files_holding(data / "reports", values)
    assert "access-request.json" in held and any(k.endswith(".html") for k in held), held
    assert any(k.endswith(".csv") and "every_message" in k for k in held), held
    csv_before = _csv_rows(next(staged["report"].glob("*.csv")))
    cert = json.loads(ok(convo(folder, "erase", "-w", "acme", "--external-user-id", PERSON,
                               "--json")))  # fmt: skip
    stores = cert["stores"]
    assert {"exports", "reports", "alert deliveries"} <= set(stores)
    removed = [f for f in stores["exports"]["files"] if f["action"] == "removed"]
    assert any(f["path"].endswith("access-request.json") for f in removed), stores["exports"]
    [report_csv] = [f for f in stores["reports"]["files"] if f["path"].endswith(".csv")]
    assert report_csv["action"] == "rewritten" and report_csv["rows"] >= 2 * len(TEXTS)
    assert stores["alert deliveries"]["lines"] == 1
    # nothing under the data folder names them, in any file
    assert files_holding(data, values - {PERSON}) == {}
    assert files_holding(data / "exports", {PERSON}) == {}
    assert files_holding(data / "reports", {PERSON}) == {}
    # the others' rows stay: the report's CSV lost exactly the person's rows
    after = _csv_rows(next(staged["report"].glob("*.csv")))
    assert len(after) == len(csv_before) - report_csv["rows"] and len(after) > 10
    theirs = set(prepared.conversations)
    assert [row for row in csv_before if row[0] not in theirs] == after
    # the alert is still there to be sent (same key), without their example
    [delivery] = read_deliveries(staged["log"])
    told = delivery.notification
    assert prepared.conversations[0] not in json.dumps(told.as_json())
    assert "[erased]" in told.text
    assert told.details["examples"] == [{"conversation_id": "c-someone-else", "channel": "web"}]
    # each rewritten export's manifest says its file as it is now, and the chain holds it
    for manifest in staged["exports"].glob("*.manifest.json"):
        doc = json.loads(manifest.read_text())
        for entry in doc["files"]:
            path = manifest.parent / entry["path"]
            assert entry["sha256"] == hashlib.sha256(path.read_bytes()).hexdigest(), manifest
        verified = convo(folder, "audit", "verify", "--manifest", str(manifest))
        assert verified.returncode == 0, verified.stdout + verified.stderr
    assert ok(convo(folder, "audit", "verify"))
    assert not list(data.rglob("*.convo-erasure-pending.json"))
