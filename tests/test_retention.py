"""The run's retention step (issue 30, D-RETENTION): per workspace, raw payloads, transcript
text and received archive files past their days removed, the marts as they were, each
run's removals listed in a manifest recorded in the audit trail.

One small warehouse of two workspaces, loaded by the real loaders and ingest and
transformed (topics and knowledge gaps included), its times explicit in the data: the
retention counts days back from a fixed ``NOW``. ``acme`` (ws_a) keeps transcripts 30
days, raw payloads 10 and archives 10; ``globex`` (ws_b) transcripts 60 days, raw payloads
for ever and archives 30; the flat endpoint's archive follows ``[retention]`` (90).
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import duckdb
import orjson
import polars as pl
import pytest

import convo_analytics.pipeline._retention as retention_module
from convo_analytics.audit import file_sha256
from convo_analytics.config import Settings, load_settings
from convo_analytics.lake._changes import fingerprints
from convo_analytics.lake._tables import lake_table
from convo_analytics.pipeline import RetentionResult, retention_config, run_retention
from convo_analytics.topics import TopicConfig
from convo_analytics.transform import TransformConfig, run_transform
from convo_analytics.transform._frames import read_frame
from convo_analytics.warehouse import WHOLE_BODY, RecordPaths, open_warehouse, transaction
from convo_analytics.warehouse import _load as load
from convo_analytics.warehouse._erasure_tables import add_pending
from convo_analytics.warehouse._marts import REBUILT_MARTS
from convo_analytics.webhooks import append_signature, ingest, sign
from incremental_support import FALLBACK, iso

SECRET = b"whsec_retention_tests_0123456789"
NOW = datetime(2026, 6, 1, 12, tzinfo=UTC)
DAY = timedelta(days=1)
#: How long before NOW each group of conversations ended (and was fetched).
AGES = {"old": 100, "mid": 45, "recent": 3}
#: First messages of three subjects, so that topics are discovered.
SUBJECTS = (
    ("my invoice shows a wrong amount", "I was charged twice on my card", "refund my payment"),
    ("where is my parcel", "the delivery has not arrived", "track my shipment please"),
    ("I cannot log in", "reset my password", "my account is locked"),
)
CONFIG = """
[warehouse]
path = "w.duckdb"
[webhooks]
archive_dir = "hooks"
[retention]
manifest_dir = "manifests"
[audit]
file = "audit/audit.jsonl"
[[workspaces]]
name = "acme"
workspace_id = "ws_a"
retention_raw_payload_days = 10
retention_transcript_days = 30
retention_archive_days = 10
[[workspaces]]
name = "globex"
workspace_id = "ws_b"
retention_transcript_days = 60
retention_archive_days = 30
"""
#: Archive files: (path under hooks/, age in days, whether it is ingested), and which go.
ARCHIVES = {
    "workspaces/acme/2026-05-12.jsonl": (20, True),  # acme: 10 days: goes
    "workspaces/acme/2026-05-27.jsonl": (5, True),  # stays
    "workspaces/acme/2026-05-10.jsonl": (22, False),  # never read: stays
    "workspaces/globex/2026-05-12.jsonl": (20, True),  # globex: 30 days: stays
    "workspaces/globex/2026-04-22.jsonl": (40, True),  # goes
    "2026-02-21.jsonl": (100, True),  # the flat endpoint: 90 days: goes
}
GONE = {"workspaces/acme/2026-05-12.jsonl", "workspaces/globex/2026-04-22.jsonl",
        "2026-02-21.jsonl"}  # fmt: skip


def _conversation(ws: str, age: str, n: int) -> dict[str, Any]:
    """A conversation of ``age``: a user message of its subject, an answer (a fallback
    every third one, with a high confidence: a knowledge gap by its words alone), another
    user message. Every other one names no locale of its own (its messages do)."""
    start = NOW - AGES[age] * DAY + timedelta(minutes=n)
    cid = f"{age}{n}"
    subject = SUBJECTS[n % 3][n // 3 % 3]
    locale = None if n % 2 else "en-US"
    messages = [
        {"id": f"{cid}_m0", "role": "user", "text": f"{subject} ({ws} {cid})",
         "createdAt": iso(start), "channel": "web", "locale": "en-US", "policyFlags": []},
        {"id": f"{cid}_m1", "role": "assistant", "text": FALLBACK if n % 3 == 0 else "done",
         "createdAt": iso(start + timedelta(seconds=5)), "channel": "web", "locale": "en-US",
         "latencyMs": 900 + n, "modelTier": "fast", "confidence": 0.9, "policyFlags": [],
         "knowledgeSource": "kb://faq"},
        {"id": f"{cid}_m2", "role": "user", "text": f"thanks, {subject}",
         "createdAt": iso(start + timedelta(seconds=30)), "channel": "web",
         "locale": "en-US", "policyFlags": []},
    ]  # fmt: skip
    end = start + timedelta(minutes=2)
    return {
        "id": cid, "workspaceId": ws, "externalUserId": f"u_{cid}", "channel": "web",
        "locale": locale, "intent": "support", "metadata": {}, "status": "resolved",
        "createdAt": iso(start), "updatedAt": iso(end), "endedAt": iso(end),
        "messageCount": 3, "escalated": False, "escalationCount": 0,
        "guardrailTriggerCount": 0, "leadId": None, "feedbackRating": 2 if n == 1 else None,
        "messages": messages, "escalations": [], "guardrailEvents": [],
        "feedback": None,
    }  # fmt: skip


def _load(con: duckdb.DuckDBPyConnection, ws: str, details: list[dict[str, Any]], run: str,
          fetched: datetime) -> None:  # fmt: skip
    """One extraction batch of ``ws``, received at ``fetched`` (as `convo extract` loads)."""
    listed = [{k: v for k, v in d.items() if k not in ("messages", "escalations",
              "guardrailEvents", "feedback")} for d in details]  # fmt: skip
    try:
        with transaction(con):
            load.stage_records(con, "listed", [orjson.dumps({"data": listed})],
                               RecordPaths("data", "id", "updatedAt"), workspace=ws)  # fmt: skip
            load.insert_raw(con, "raw_conversations", "listed", run, fetched)
            bodies = [orjson.dumps(d) for d in details]
            load.stage_details(con, "detailed", bodies, RecordPaths(WHOLE_BODY, "id", "updatedAt"),
                               workspace=ws)  # fmt: skip
            load.insert_raw(con, "raw_conversation_details", "detailed", run, fetched)
            load.merge_conversations(con, "listed", "detailed", run, fetched, workspace=ws)
    finally:
        load.unstage(con, "listed", "detailed")


def _event(kind: str, ws: str, cid: str, at: datetime, **data: Any) -> bytes:
    unsigned = orjson.dumps({"event": kind, "timestamp": iso(at), "workspaceId": ws,
                             "conversationId": cid, "data": data})  # fmt: skip
    return append_signature(unsigned, sign(SECRET, unsigned))


def _events(name: str) -> list[bytes]:
    """The events in each archive file: a message event whose data carries the answer's
    text (a service may), a late event that keeps an old acme conversation active."""
    if name == "workspaces/acme/2026-05-12.jsonl":
        return [
            _event("message.responded", "ws_a", "old1", NOW - 100 * DAY, messageId="old1_m1",
                   latencyMs=901, text="the answer, word for word"),
            _event("guardrail.triggered", "ws_a", "old2", NOW - 2 * DAY,
                   guardrailEventId="g1", messageId="old2_m1", flag="pii.email", rule="r",
                   action="logged", excerpt="[email]"),
        ]  # fmt: skip
    if name == "workspaces/acme/2026-05-27.jsonl":
        return [_event("message.responded", "ws_a", "recent1", NOW - 3 * DAY,
                       messageId="recent1_m1", latencyMs=901, text="a recent answer")]  # fmt: skip
    ws = "ws_a" if "acme" in name else "ws_b"
    return [_event("message.responded", ws, f"mid{len(name) % 5}", NOW - 45 * DAY,
                   messageId=f"x_{name}", latencyMs=5)]  # fmt: skip


def _build(folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "convo.toml").write_text(CONFIG)
    db = folder / "w.duckdb"
    con = open_warehouse(db)
    try:
        for ws in ("ws_a", "ws_b"):
            for age, days in AGES.items():
                details = [_conversation(ws, age, n) for n in range(6)]
                _load(con, ws, details, f"{ws}-{age}", NOW - days * DAY + timedelta(hours=1))
    finally:
        con.close()
    hooks = folder / "hooks"
    for name in ARCHIVES:
        path = hooks / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"\n".join(_events(name)) + b"\n")
    read = [hooks / name for name, (_, was_read) in ARCHIVES.items() if was_read]
    result = ingest(read, [SECRET], db)
    assert result.loaded and not result.quarantined, result.to_json()
    con = open_warehouse(db)
    try:
        run_transform(con, _transform())
    finally:
        con.close()
    for name, (age, _) in ARCHIVES.items():
        moment = (NOW - age * DAY).timestamp()
        os.utime(hooks / name, (moment, moment))


def _transform(**kw: Any) -> TransformConfig:
    return TransformConfig(timezones=("UTC",), topics=TopicConfig(min_conversations=5), **kw)


def _settings(folder: Path) -> Settings:
    return load_settings(folder / "convo.toml", {}, {})


@dataclass
class Retained:
    folder: Path
    before: dict[str, pl.DataFrame]
    result: RetentionResult

    @property
    def db(self) -> Path:
        return self.folder / "w.duckdb"


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("retention") / "template"
    _build(folder)
    return folder


def _copy(template: Path, folder: Path) -> Path:
    """A copy of a data folder (the archive files' times kept), its warehouse saying it read
    the copy's archive files."""
    shutil.copytree(template, folder, copy_function=shutil.copy2)
    con = duckdb.connect(str(folder / "w.duckdb"))
    try:
        for table, column in (("events", "source_file"), ("ingest_files", "path")):
            con.execute(f"UPDATE {table} SET {column} = replace({column}, ?, ?)",
                        [str(template), str(folder)])  # fmt: skip
    finally:
        con.close()
    return folder


#: Columns that hold the text retention removes (everything else must stay as it was).
TEXT_COLUMNS = {"conversation_topics": ("text",), "knowledge_gaps": ("question", "answer"),
                "mart_topics": ("examples",), "topics": ("examples",)}  # fmt: skip


def _marts(db: Path) -> dict[str, pl.DataFrame]:
    """Every mart (and the topics tables), without the text columns, in one order."""
    names = [t.name for t in REBUILT_MARTS] + ["knowledge_gaps", "conversation_topics",
                                              "mart_topics", "topics"]  # fmt: skip
    con = duckdb.connect(str(db), read_only=True)
    try:
        return {name: read_frame(con, _select(name)) for name in names}
    finally:
        con.close()


def _select(name: str) -> str:
    text = TEXT_COLUMNS.get(name)
    columns = f"* EXCLUDE ({', '.join(text)})" if text else "*"
    return f"SELECT {columns} FROM {name} ORDER BY ALL"


def _assert_same(after: dict[str, pl.DataFrame], before: dict[str, pl.DataFrame]) -> None:
    for name, frame in before.items():
        assert after[name].height == frame.height, name
        assert after[name].equals(frame), (name, after[name], frame)


@pytest.fixture(scope="module")
def retained(template: Path, tmp_path_factory: pytest.TempPathFactory) -> Retained:
    """The template after one retention."""
    folder = _copy(template, tmp_path_factory.mktemp("retained") / "data")
    before = _marts(folder / "w.duckdb")
    result = run_retention(_settings(folder), folder / "w.duckdb", "run-1", now=NOW)
    return Retained(folder, before, result)


def _rows(db: Path, sql: str) -> list[tuple[Any, ...]]:
    con = duckdb.connect(str(db), read_only=True)
    try:
        return con.execute(sql).fetchall()
    finally:
        con.close()


def test_each_workspace_loses_raw_rows_and_text_only_past_its_own_days(
    retained: Retained,
) -> None:
    db = retained.db
    # transcripts: acme 30 days (old and mid go, but old2 had an event 2 days ago), globex 60
    texts = dict(_rows(db, "SELECT workspace_id || '/' || conversation_id, "
                           "count(text) FROM messages GROUP BY ALL"))  # fmt: skip
    kept_text = {k for k, n in texts.items() if n == 3}
    assert {k for k, n in texts.items() if n == 0} == {
        *(f"ws_a/{age}{n}" for age in ("old", "mid") for n in range(6) if (age, n) != ("old", 2)),
        *(f"ws_b/old{n}" for n in range(6)),
    }
    assert kept_text == set(texts) - {k for k, n in texts.items() if n == 0}
    assert "ws_a/old2" in kept_text and "ws_b/mid0" in kept_text
    assert _rows(db, "SELECT count(*) FROM messages") == [(2 * 18 * 3,)]  # every row stays
    # the copies of the text: topic texts, knowledge-gap questions and answers
    topic_texts = dict(_rows(db, "SELECT workspace_id || '/' || conversation_id, text "
                                 "FROM conversation_topics"))  # fmt: skip
    assert {k for k, t in topic_texts.items() if t is None} == set(texts) - kept_text
    gaps = _rows(db, "SELECT workspace_id || '/' || conversation_id, question, answer "
                     "FROM knowledge_gaps")  # fmt: skip
    assert gaps and all((q is None) == (a is None) == (c not in kept_text) for c, q, a in gaps)
    # raw payloads: acme's fetched more than 10 days ago; globex keeps them (its raw
    # details hold transcripts, so those of conversations whose text went go too)
    raw = _rows(db, "SELECT workspace_id, id FROM raw_conversations ORDER BY ALL")
    assert raw == sorted([("ws_a", f"recent{n}") for n in range(6)]
                         + [("ws_b", f"{a}{n}") for a in AGES for n in range(6)])  # fmt: skip
    details = _rows(db, "SELECT workspace_id, id FROM raw_conversation_details ORDER BY ALL")
    assert details == sorted([("ws_a", f"recent{n}") for n in range(6)]
                             + [("ws_b", f"{a}{n}") for a in ("mid", "recent")
                                for n in range(6)])  # fmt: skip
    # a message event's data keeps what the warehouse reads, and loses the rest
    events = dict(_rows(db, "SELECT conversation_id, payload->>'$.data' FROM events "
                            "WHERE event_type = 'message.responded'"))  # fmt: skip
    assert orjson.loads(events["old1"]) == {"messageId": "old1_m1", "latencyMs": 901}
    assert orjson.loads(events["recent1"])["text"] == "a recent answer"


def test_the_marts_stay_as_they_were_and_so_do_later_transforms(
    retained: Retained, tmp_path: Path
) -> None:
    """Retention changes no figure, and neither does a later incremental transform that
    recomputes every conversation whose text went, nor a full rebuild."""
    _assert_same(_marts(retained.db), retained.before)
    folder = _copy(retained.folder, tmp_path / "data")
    con = open_warehouse(folder / "w.duckdb")
    try:
        with transaction(con):
            for ws in ("ws_a", "ws_b"):
                gone = [r[0] for r in con.execute(
                    "SELECT conversation_id FROM removed_texts WHERE workspace_id = ?", [ws]
                ).fetchall()]  # fmt: skip
                add_pending(con, ws, gone, "test")
        assert run_transform(con, _transform()).mode == "incremental"
    finally:
        con.close()
    _assert_same(_marts(folder / "w.duckdb"), retained.before)
    con = open_warehouse(folder / "w.duckdb")
    try:
        assert run_transform(con, _transform(full=True)).mode == "full"
    finally:
        con.close()
    _assert_same(_marts(folder / "w.duckdb"), retained.before)
    # a rediscovery cannot cluster what has no text: those conversations keep their topic
    topics = "SELECT conversation_id, topic_id FROM conversation_topics WHERE text IS NULL"
    placed = _rows(folder / "w.duckdb", topics)
    assert placed and all(topic is not None for _, topic in placed)
    con = open_warehouse(folder / "w.duckdb")
    try:
        config = _transform()
        config = TransformConfig(timezones=config.timezones, topics=TopicConfig(
            min_conversations=5, rediscover=("ws_a",)))  # fmt: skip
        run_transform(con, config)
    finally:
        con.close()
    assert dict(_rows(folder / "w.duckdb", topics)) == dict(placed)


def test_the_lake_finds_the_partitions_whose_text_went(retained: Retained, template: Path) -> None:
    """The next `convo publish --lake` republishes exactly the partitions retention
    changed: their fingerprints differ, the others' do not."""
    changed = set()
    for ws in ("ws_a", "ws_b"):
        days = retained.result.body["workspaces"]["acme" if ws == "ws_a" else "globex"]
        changed |= {(ws, d) for d in days["warehouse"]["lake_partitions"]["messages"]}
    spec = lake_table("messages")
    prints = []
    for db in (template / "w.duckdb", retained.db):
        con = duckdb.connect(str(db), read_only=True)
        try:
            prints.append(fingerprints(con, spec, ["ws_a", "ws_b"]))
        finally:
            con.close()
    before, after = prints
    assert set(before) == set(after)
    differ = {(ws, day.isoformat()) for (ws, day), fp in after.items() if before[(ws, day)] != fp}
    assert differ == changed and changed


def test_archive_files_go_by_their_workspace_s_days_once_read(retained: Retained) -> None:
    hooks = retained.folder / "hooks"
    assert {n for n in ARCHIVES if not (hooks / n).exists()} == GONE


def test_the_manifest_lists_exactly_what_went_and_the_audit_trail_holds_its_hash(
    retained: Retained, template: Path
) -> None:
    result = retained.result
    assert result.manifest == retained.folder / "manifests" / "run-1.json"
    body = orjson.loads(result.manifest.read_bytes())
    assert body == orjson.loads(orjson.dumps(result.body))
    files = {f["name"]: f["bytes"] for f in body["workspaces"]["acme"]["archive"]["files"]}
    files |= {f["name"]: f["bytes"] for f in body["workspaces"]["globex"]["archive"]["files"]}
    files |= {f["name"]: f["bytes"] for f in body["flat_endpoint_archive"]["files"]}
    assert files == {n: (template / "hooks" / n).stat().st_size for n in GONE}
    assert body["workspaces"]["acme"]["archive"]["kept_unread"] == 1
    # the counts are what left the warehouse, per workspace and table
    con = duckdb.connect(str(template / "w.duckdb"), read_only=True)
    try:
        for name, ws in (("acme", "ws_a"), ("globex", "ws_b")):
            listed = body["workspaces"][name]["warehouse"]
            for table, n in listed["raw_payload"].items():
                now = _rows(
                    retained.db, f"SELECT count(*) FROM {table} WHERE workspace_id = '{ws}'"
                )
                was = con.execute(f"SELECT count(*) FROM {table} WHERE workspace_id = ?",
                                  [ws]).fetchall()  # fmt: skip
                extra = listed["transcript"].get(table, 0)
                assert was[0][0] - now[0][0] == n + extra, (name, table)
            gone = _rows(retained.db, "SELECT count(*) FROM messages WHERE text IS NULL "
                                      f"AND workspace_id = '{ws}'")  # fmt: skip
            assert listed["transcript"]["messages"] == gone[0][0]
            assert listed["days"] == {"raw_payload": 10 if ws == "ws_a" else 0,
                                      "transcript": 30 if ws == "ws_a" else 60,
                                      "archive": 10 if ws == "ws_a" else 30}  # fmt: skip
    finally:
        con.close()
    assert body["workspaces"]["acme"]["warehouse"]["transcript"]["message_events"] == 1
    assert body["removed_anything"] and body["interrupted_runs"] == []
    records = [orjson.loads(line) for line in
               (retained.folder / "audit" / "audit.jsonl").read_bytes().splitlines()]  # fmt: skip
    (record,) = [r for r in records if r["action"] == "retention"]
    assert record["detail"]["manifestSha256"] == file_sha256(result.manifest) == result.sha256
    assert record["detail"]["manifest"] == str(result.manifest)


def test_a_second_run_removes_nothing_more_and_says_so(retained: Retained, tmp_path: Path) -> None:
    folder = _copy(retained.folder, tmp_path / "data")
    files = sorted(p.relative_to(folder) for p in (folder / "hooks").rglob("*"))
    again = run_retention(_settings(folder), folder / "w.duckdb", "run-2", now=NOW)
    assert not again.body["removed_anything"]
    assert again.body["totals"] == {"raw_rows": 0, "conversations": 0, "messages": 0,
                                    "archive_files": 0, "archive_bytes": 0,
                                    "archive_kept_unread": 1, "removed": 0}  # fmt: skip
    for listed in again.body["workspaces"].values():
        assert not any(listed["warehouse"]["raw_payload"].values())
        assert not any(listed["warehouse"]["transcript"].values())
    assert sorted(p.relative_to(folder) for p in (folder / "hooks").rglob("*")) == files
    assert again.counts()["manifest"] == str(folder / "manifests" / "run-2.json")


def test_a_run_killed_half_way_and_run_again_ends_the_same_and_lists_everything(
    template: Path, retained: Retained, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Killed in globex's transaction and after the first archive file was unlinked: acme's
    removal is committed and logged, globex's rolled back; the next run removes the rest,
    and its manifest lists what the killed run removed, under that run."""
    folder = _copy(template, tmp_path / "data")
    real_remove, real_files = retention_module.remove_in_workspace, retention_module.remove_files

    def dies_in_globex(con: Any, workspace_id: str, *args: Any) -> Any:
        done = real_remove(con, workspace_id, *args)
        if workspace_id == "ws_b":
            raise KeyboardInterrupt  # as a kill: the transaction never commits
        return done

    monkeypatch.setattr(retention_module, "remove_in_workspace", dies_in_globex)
    with pytest.raises(KeyboardInterrupt):
        run_retention(_settings(folder), folder / "w.duckdb", "killed", now=NOW)
    monkeypatch.setattr(retention_module, "remove_in_workspace", real_remove)

    def dies_after_one(archive_dir: Path, names: list[tuple[str, int]]) -> None:
        real_files(archive_dir, names[:1])
        raise KeyboardInterrupt

    monkeypatch.setattr(retention_module, "remove_files", dies_after_one)
    with pytest.raises(KeyboardInterrupt):
        run_retention(_settings(folder), folder / "w.duckdb", "killed-2", now=NOW)
    monkeypatch.setattr(retention_module, "remove_files", real_files)
    assert not (folder / "manifests").exists()
    again = run_retention(_settings(folder), folder / "w.duckdb", "again", now=NOW)
    _assert_same(_marts(folder / "w.duckdb"), retained.before)
    for sql in ("SELECT workspace_id, conversation_id, text FROM messages",
                "SELECT workspace_id, id, payload_hash FROM raw_conversation_details",
                "SELECT workspace_id, id, payload_hash FROM raw_conversations",
                "SELECT workspace_id, event_id, payload FROM events",
                "SELECT * EXCLUDE (removed_at, run_id) FROM removed_texts"):  # fmt: skip
        assert sorted(_rows(folder / "w.duckdb", sql)) == sorted(_rows(retained.db, sql)), sql
    hooks = folder / "hooks"
    assert {n for n in ARCHIVES if not (hooks / n).exists()} == GONE
    earlier = again.body["interrupted_runs"]
    assert {(e["run_id"], e["workspace"], e["store"]) for e in earlier} == {
        ("killed", "acme", "warehouse"),  # committed before the kill in globex's
        ("killed-2", "globex", "warehouse"),  # the second run did globex's
        ("killed-2", "", "archive"),  # and unlinked the flat endpoint's file
    }
    # between them, the manifests list each removal once: what one clean run removed
    listed = [f["name"] for e in earlier if e["store"] == "archive"
              for f in e["removed"]["files"]]  # fmt: skip
    listed += [f["name"] for w in again.body["workspaces"].values()
               for f in w.get("archive", {}).get("files", [])]  # fmt: skip
    listed += [f["name"] for f in (again.body["flat_endpoint_archive"] or {}).get("files", [])]
    assert sorted(listed) == sorted(GONE)
    clean = retained.result.body["workspaces"]
    for e in earlier:
        if e["store"] == "warehouse":
            for part in ("raw_payload", "transcript"):
                assert e["removed"][part] == clean[e["workspace"]]["warehouse"][part]
    for name, listed_now in again.body["workspaces"].items():
        warehouse = listed_now["warehouse"]
        assert not any(warehouse["transcript"].values()), name
        assert not any(warehouse["raw_payload"].values()), name


def test_each_workspace_s_days_and_the_deprecated_archive_setting(tmp_path: Path) -> None:
    (tmp_path / "convo.toml").write_text(CONFIG + "[run]\narchive_retention_days = 7\n")
    config = retention_config(_settings(tmp_path))
    assert (config.defaults.raw_payload, config.defaults.transcript) == (0, 0)
    assert config.defaults.archive == 7 and config.archive_days_from == "run.archive_retention_days"
    assert config.for_workspace("ws_a", None)[1].transcript == 30
    assert config.for_workspace("learned-id", "globex") == ("globex", config.for_archive("globex"))
    assert config.for_workspace("other", None) == (None, config.defaults)
    assert config.for_archive("") == config.defaults
    both = CONFIG.replace('manifest_dir = "manifests"', "archive_days = 3")
    (tmp_path / "convo.toml").write_text(both + "[run]\narchive_retention_days = 7\n")
    config = retention_config(_settings(tmp_path))
    assert config.defaults.archive == 3 and config.archive_days_from == "retention.archive_days"
