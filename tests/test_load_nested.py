"""Records with nested objects and lists load (issue 25), and a loader error fails one stream.

A JSON:API detail keeps its message fields under ``attributes`` (a struct in the
parsed item) and has transcripts of every length; staged as Arrow record batches, such
items were refused by DuckDB ("a struct or union below an offset"), and every run ended
in a traceback. A transcript may also sit at a key path. And whatever the loader cannot
store is a failed stream with one line, the other streams loaded.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import duckdb
import orjson

from convo_analytics.warehouse import RecordPaths, open_warehouse, transaction
from convo_analytics.warehouse import _load as load
from convo_analytics.warehouse._shape import LoadShape
from convo_analytics.warehouse._tables import LEADS
from foreign_more import serve
from foreign_services import ForeignDomain
from test_extract_check import KEY, run_json

CONVERSATIONS = 600  # several record batches of details


def _detail(i: int, messages_at: str) -> bytes:
    """Conversation ``c<i>`` with ``i % 4`` messages whose fields are nested two deep."""
    items = [
        {"id": f"m{i}-{j}", "type": "messages",
         "attributes": {"role": "user", "created": "2026-11-01T00:00:00Z",
                        "trace": {"latencyMs": 10 * i + j}}}
        for j in range(i % 4)
    ]  # fmt: skip
    body: dict[str, object] = {"id": f"c{i}", "attributes": {"updated": "2026-11-01T00:00:00Z"}}
    if messages_at == "included":
        body["included"] = items
    else:
        body["relationships"] = {"messages": {"data": items}} if i % 5 else None
    return orjson.dumps(body)


def _load(db: Path, messages_at: str) -> duckdb.DuckDBPyConnection:
    con = open_warehouse(db)
    shape = LoadShape(
        {"messages.role": "attributes.role", "messages.created_at": "attributes.created",
         "messages.latency_ms": "attributes.trace.latencyMs"},
        {"messages": messages_at},
    )  # fmt: skip
    listed = {"data": [{"id": f"c{i}", "attributes": {"updated": "2026-11-01T00:00:00Z"}}
                       for i in range(CONVERSATIONS)]}  # fmt: skip
    paths = RecordPaths("data", "id", "attributes.updated")
    details = [_detail(i, messages_at) for i in range(CONVERSATIONS)]
    with transaction(con):
        load.stage_records(con, "listed", [orjson.dumps(listed)], paths)
        load.stage_details(con, "detailed", details, paths, shape)
        load.merge_conversations(con, "listed", "detailed", "run", datetime.now(UTC), shape)
    load.unstage(con, "listed", "detailed")
    return con


def _check_messages(con: duckdb.DuckDBPyConnection, expected: int) -> None:
    rows = con.execute(
        "SELECT count(*), count(*) FILTER (WHERE role = 'user' AND created_at IS NOT NULL "
        "AND latency_ms = 10 * CAST(split_part(substr(id, 2), '-', 1) AS INT) "
        "+ CAST(split_part(id, '-', 2) AS INT) "
        "AND conversation_id = 'c' || split_part(substr(id, 2), '-', 1)) FROM messages"
    ).fetchall()
    assert rows == [(expected, expected)], "every item loaded, each with its own values"


def test_items_with_nested_fields_and_lists_of_every_length_load(tmp_path: Path) -> None:
    con = _load(tmp_path / "w.duckdb", "included")
    _check_messages(con, sum(i % 4 for i in range(CONVERSATIONS)))
    updated = con.execute("SELECT count(updated_at) FROM conversations").fetchall()
    assert updated == [(CONVERSATIONS,)], "the updated-at at a dotted key path"


def test_a_transcript_at_a_key_path_loads(tmp_path: Path) -> None:
    con = _load(tmp_path / "w.duckdb", "relationships.messages.data")
    _check_messages(con, sum(i % 4 for i in range(CONVERSATIONS) if i % 5))


def test_what_the_loader_cannot_store_fails_its_stream_with_one_line(tmp_path: Path) -> None:
    """A warehouse whose ``leads.status`` someone made an integer cannot take ``qualified``."""
    db = tmp_path / "w.duckdb"
    con = open_warehouse(db)
    con.execute("DROP TABLE leads")
    con.execute(LEADS.ddl(compression=True).replace("status VARCHAR", "status INTEGER"))
    con.close()
    with serve(ForeignDomain(), "ranges", KEY) as (server, _):
        result = run_json("extract", "--base-url", server.url, "--db", str(db), "--rate-limit",
                          "none", "--streams", "leads,summary", "--pagination",
                          "offset:offset_param=skip,limit_param=take", cwd=tmp_path)  # fmt: skip
    leads = result["streams"]["leads"]
    assert result["exit"] == 1 and leads["status"] == "failed"
    assert leads["error"].startswith("the warehouse could not load the leads answers (")
    assert "\n" not in leads["error"]
    assert result["streams"]["summary"]["status"] == "ok", "the other streams go on"
    assert "Traceback" not in result["stderr"]
    errors = [line for line in result["stderr"].splitlines() if " ERROR " in line]
    assert len(errors) == 1 and "could not load the leads answers" in errors[0]
