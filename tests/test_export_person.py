"""`convo export person` (issue 30, an access request; D-ERASURE), as a user runs it: a
real sandbox over HTTP on 127.0.0.1, the CLI in subprocesses, real DuckDB files, a
signed webhook archive.

A person injected into the sandbox (their own conversations, with text nobody else
typed, one line with their email address, which makes a lead) is extracted, ingested
from the archive and transformed. Their export holds every record of theirs (their
conversations, their texts, their lead, the events and marts about them) and nothing of
anyone else's (another user's texts; the same externalUserId in another workspace); the
audit trail gains one `export.person` record naming them by a keyed hash only; after
`convo erase` their export is empty and says they were erased and are suppressed.
"""

from __future__ import annotations

import json
import shutil
import stat
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
from erasure_support import inject as _inject

PERSON = "u-access-me-6620"
EMAIL = "Zq.Kelp6620@Example.com"
#: What the person typed: nobody else in the sandbox types these.
TEXTS = ("my parcel zq-6620-kelp never came", f"send the zq-6620-kelp quote to {EMAIL}")
#: What the person of the same id in globex typed (another person: another workspace).
GLOBEX_TEXTS = ("globex order qx-6620-fern, write to qx6620@globex.example",)
#: Someone else of acme.
OTHER = "u-not-me-3051"
OTHER_TEXTS = ("where is my order wq-3051-moss",)


@dataclass
class Prepared:
    folder: Path
    conversations: list[str]

    @property
    def db(self) -> Path:
        return self.folder / "data" / "warehouse.duckdb"

    @property
    def audit(self) -> Path:
        return self.folder / "data" / "audit" / "audit.jsonl"


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Prepared]:
    """A data folder after extract, ingest and transform (copied per test)."""
    sandbox = Sandbox(make_settings(conversations=100, days=10))
    with ServerThread(create_app(sandbox)) as server:
        running = RunningSandbox(sandbox, server)
        folder = tmp_path_factory.mktemp("access-template")
        ids = _inject(running, PERSON, TEXTS)
        _inject(running, OTHER, OTHER_TEXTS)
        _inject(running, PERSON, GLOBEX_TEXTS, GLOBEX_KEY)  # another person, same id
        archive = folder / "archive" / "history.jsonl.gz"
        acme = [w for w in sandbox.workspaces.values() if w.name == "acme"]
        write_history_archive(archive, acme, SECRET, seed=3)
        # acme stores personal data as received (what is held is handed back); globex
        # masks it (only the findings' keyed hashes are held)
        scrub = {"acme": "off", "globex": "mask"}
        (folder / "convo.toml").write_text(config_text(running.url, scrub))
        setup_command(folder, "extract")
        setup_command(folder, "webhooks", "ingest", "-w", "acme", str(archive))
        setup_command(folder, "transform")
        yield Prepared(folder, ids)


@pytest.fixture
def prepared(template: Prepared, tmp_path: Path) -> Prepared:
    folder = tmp_path / "project"
    shutil.copytree(template.folder, folder)
    return Prepared(folder, template.conversations)


def _audit_records(prepared: Prepared) -> list[dict[str, Any]]:
    if not prepared.audit.exists():
        return []
    return [json.loads(line) for line in prepared.audit.read_text().splitlines() if line]


def _texts(doc: dict[str, Any]) -> str:
    return json.dumps(doc, ensure_ascii=False)


def test_the_export_holds_every_record_of_the_person_and_nothing_of_anyone_else(
    prepared: Prepared,
) -> None:
    from convo_analytics.erasure import HOLDERS

    _quarantine_and_topics(prepared.db)
    before = _audit_records(prepared)
    done = convo(prepared.folder, "export", "person", "-w", "acme", "--external-user-id", PERSON)
    doc = json.loads(ok(done))
    assert done.stderr == ""
    tables = doc["tables"]
    assert doc["workspace"]["name"] == "acme" and doc["workspace"]["id"]
    assert doc["person"]["identifierKind"] == "external_user_id"
    # every table the erasure deletes from (and the marts) is exported, in the list's order
    assert list(tables)[: len(HOLDERS)] == [h.table for h in HOLDERS]
    assert sorted(c["id"] for c in tables["conversations"]) == sorted(prepared.conversations)
    assert {c["external_user_id"] for c in tables["conversations"]} == {PERSON}
    assert all(c["created_at"].endswith("Z") for c in tables["conversations"])
    said = [m["text"] for m in tables["messages"] if m["role"] == "user"]
    assert said.count(TEXTS[0]) == 2  # in both of their conversations
    assert said.count(TEXTS[1]) == 2
    assert {m["conversation_id"] for m in tables["messages"]} == set(prepared.conversations)
    assert any(m["role"] == "assistant" for m in tables["messages"])
    assert [(m["conversation_id"], m["position"]) for m in tables["messages"]] == sorted(
        (m["conversation_id"], m["position"]) for m in tables["messages"]
    )
    # typing an address made a lead in each conversation; the events and marts follow
    assert {lead["conversation_id"] for lead in tables["leads"]} == set(prepared.conversations)
    assert tables["events"] and all(isinstance(e["payload"], dict) for e in tables["events"])
    assert {m["conversation_id"] for m in tables["mart_conversations"]} == set(
        prepared.conversations
    )
    # acme's quarantined line naming them, not globex's, nor one of no workspace (with two
    # workspaces it may be anyone's); their text among a topic's examples
    assert [q["source_file"] for q in tables["quarantine"]] == ["acme.jsonl"]
    assert PERSON in tables["quarantine"][0]["line"]
    assert tables["topic_examples"] == [
        {"table": "topics", "topic_id": 7, "label": "parcels", "examples": [TEXTS[0]]}
    ]
    assert doc["records"] == sum(len(rows) for rows in tables.values())
    assert doc["found"]["conversations"] == 2
    assert doc["suppressed"]["listed"] is False and doc["erasures"] == []
    # nothing of anyone else: another user of acme, the same id in globex
    text = _texts(doc)
    for foreign in (*OTHER_TEXTS, "qx-6620-fern", OTHER):
        assert foreign not in text
    [(globex,)] = _rows(prepared.db, "SELECT workspace_id FROM workspaces WHERE name = 'globex'")
    assert globex not in text
    # one audit record, naming the person by a keyed hash only
    after = _audit_records(prepared)
    added = after[len(before) :]
    assert [r["action"] for r in added] == ["export.person"]
    [record] = added
    assert record["rows"] == doc["records"] and record["workspace"] == "acme"
    assert len(record["subjects"]) == 1 and len(record["subjects"][0]) == 64
    assert PERSON not in prepared.audit.read_text()


def test_by_email_to_a_file_holds_their_lead_and_its_conversation(prepared: Prepared) -> None:
    out = prepared.folder / "requests" / "answer.json"
    done = convo(prepared.folder, "export", "person", "-w", "acme", "--email", EMAIL.lower(),
                 "--out", str(out))  # fmt: skip
    assert ok(done) == ""
    assert stat.S_IMODE(out.stat().st_mode) == 0o600
    assert not out.with_name(out.name + ".partial").exists()
    doc = json.loads(out.read_text())
    tables = doc["tables"]
    assert doc["person"]["identifierKind"] == "email"
    assert {lead["email"] for lead in tables["leads"]} == {EMAIL}  # as typed
    assert {lead["conversation_id"] for lead in tables["leads"]} == set(prepared.conversations)
    assert tables["lead_qualifications"] or tables["raw_leads"]
    # the conversations the address was found in, their texts; nobody else's
    assert {c["id"] for c in tables["conversations"]} == set(prepared.conversations)
    assert TEXTS[0] in _texts(doc)
    for foreign in (*OTHER_TEXTS, "qx-6620-fern"):
        assert foreign not in _texts(doc)
    [record] = [r for r in _audit_records(prepared) if r["action"] == "export.person"]
    assert record["rows"] == doc["records"] > 0
    audit = prepared.audit.read_text().lower()
    assert EMAIL.lower() not in audit and "answer.json" not in audit


def test_after_erasure_the_export_is_empty_and_says_they_were_erased(prepared: Prepared) -> None:
    nobody = convo(prepared.folder, "export", "person", "-w", "acme", "--email",
                   "nobody-6620@nowhere.example")  # fmt: skip
    empty = json.loads(ok(nobody))
    assert empty["records"] == 0 and empty["erasures"] == []
    assert all(rows == [] for rows in empty["tables"].values())
    assert nobody.stderr.startswith("nothing is held about this person in workspace acme")
    assert "nobody-6620" not in nobody.stderr and "suppression" not in nobody.stderr
    ok(convo(prepared.folder, "erase", "-w", "acme", "--external-user-id", PERSON))
    done = convo(prepared.folder, "export", "person", "-w", "acme", "--external-user-id", PERSON)
    doc = json.loads(ok(done))
    assert doc["records"] == 0 and all(rows == [] for rows in doc["tables"].values())
    assert doc["suppressed"]["listed"] is True and doc["suppressed"]["since"]
    assert [e["status"] for e in doc["erasures"]] == ["files", "started", "complete"]
    assert doc["erasures"][-1]["certificate"]["subject"] == doc["person"]["subject"]
    line = done.stderr.strip()
    assert "\n" not in line and line.startswith("nothing is held about this person")
    assert "erased on" in line and "suppression list" in line and PERSON not in line
    # each export was recorded, with no rows for an empty one
    rows = [r["rows"] for r in _audit_records(prepared) if r["action"] == "export.person"]
    assert rows == [0, 0]
    # the other person of the same id, in globex, is still there
    globex = json.loads(ok(convo(prepared.folder, "export", "person", "-w", "globex",
                                 "--external-user-id", PERSON)))  # fmt: skip
    assert globex["found"]["conversations"] == 2 and "qx-6620-fern" in _texts(globex)
    # globex masks: the address is not held, only the findings' kind and keyed hash are
    findings = globex["tables"]["privacy_findings"]
    assert {f["kind"] for f in findings} == {"email"} and all(f["keyed_hash"] for f in findings)
    assert "qx6620@globex.example" not in _texts(globex)


def test_a_warehouse_another_process_writes_is_one_line(prepared: Prepared) -> None:
    writer = duckdb.connect(str(prepared.db))
    try:
        done = convo(prepared.folder, "export", "person", "-w", "acme", "--email", EMAIL)
    finally:
        writer.close()
    assert done.returncode == 2 and done.stdout == ""
    [line] = done.stderr.splitlines()
    assert "is in use by another process" in line and EMAIL not in line
    assert _audit_records(prepared) == []


def test_every_holder_names_columns_its_table_has(tmp_path: Path) -> None:
    """The list the erasure deletes from and the access request reads: each table, the
    columns naming the person and those ordering the rows exist in the schema; every
    table with a conversation_id column but the aggregates and the run bookkeeping is in it."""
    from convo_analytics.erasure import HOLDERS
    from convo_analytics.warehouse import open_warehouse

    con = open_warehouse(tmp_path / "w.duckdb")
    try:
        columns: dict[str, set[str]] = {}
        for table, column in con.execute(
            "SELECT table_name, column_name FROM information_schema.columns"
        ).fetchall():
            columns.setdefault(table, set()).add(column)
    finally:
        con.close()
    for holder in HOLDERS:
        named = {c for c, _ in holder.columns} | set(holder.order) | {"workspace_id"}
        assert named <= columns.get(holder.table, set()), holder
    by_conversation = {t for t, cols in columns.items() if "conversation_id" in cols}
    assert by_conversation - {h.table for h in HOLDERS} == {"transform_pending"}


def _quarantine_and_topics(db: Path) -> None:
    """Quarantined lines naming the person (of acme, of globex, of no workspace), and a
    topic of acme showing one of their texts (and someone else's) as examples."""
    con = duckdb.connect(str(db))
    try:
        line = json.dumps({"event": "conversation.created", "data": {"externalUserId": PERSON}})
        for n, workspace in enumerate(("acme", "globex", None)):
            con.execute(
                "INSERT INTO quarantine (source_file, source_line, reason, line, workspace, "
                "quarantined_at) VALUES (?, 1, 'bad_signature', ?, ?, now() + ?::INTEGER * "
                "INTERVAL 1 SECOND)",
                [f"{workspace or 'flat'}.jsonl", line.encode(), workspace, n],
            )
        con.execute(
            "INSERT INTO topics (workspace_id, topic_id, label, examples) VALUES "
            "((SELECT workspace_id FROM workspaces WHERE name = 'acme'), 7, 'parcels', "
            "[?, 'someone else asks about parcels'])",
            [TEXTS[0]],
        )
    finally:
        con.close()


def _rows(db: Path, sql: str, params: list[Any] | None = None) -> list[tuple[Any, ...]]:
    con = duckdb.connect(str(db), read_only=True)
    try:
        return con.execute(sql, params or []).fetchall()
    finally:
        con.close()
