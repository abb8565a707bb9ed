"""Loading fetched pages into the warehouse: raw versions, typed merges, bookmarks.

Response bodies go to DuckDB as they came (one Arrow string column); DuckDB
splits them into records and types the columns in SQL, which is many times
faster than re-serialising records in Python. Each call runs in the caller's
transaction: a page's raw rows, typed rows and the bookmark commit together
or not at all, so a run killed at any point leaves a consistent warehouse
and a re-run resumes from the last committed page.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import duckdb
import orjson
import pyarrow as pa

from convo_analytics.warehouse._tables import (
    CONVERSATION_ESCALATIONS,
    CONVERSATION_GUARDRAIL_EVENTS,
    CONVERSATIONS,
    LEADS,
    MESSAGES,
    SERVICE_SUMMARIES,
    Column,
    Table,
)


@dataclass(frozen=True, slots=True)
class RecordPaths:
    """Where a stream's records and key fields sit in a response (detected or configured).

    ``envelope`` is the key holding the list of records, None when the body is a
    bare list, and ``WHOLE_BODY`` when the body is one record (a detail).
    """

    envelope: str | None
    id: str
    updated: str | None
    created: str | None = None


WHOLE_BODY = "$"


@dataclass(slots=True)
class PageCounts:
    records: int = 0
    new: int = 0
    changed: int = 0
    unchanged: int = 0
    details: int = 0


def _q(name: str) -> str:
    """A JSON path component, quoted."""
    return '"' + name.replace('"', '\\"') + '"'


def _path(dotted: str) -> str:
    return "$." + ".".join(_q(part) for part in dotted.split("."))


def _ts(expr: str) -> str:
    """Text or epoch seconds/milliseconds to TIMESTAMPTZ; NULL when unreadable."""
    return (
        f"COALESCE(TRY_CAST({expr} AS TIMESTAMPTZ), "
        f"CASE WHEN TRY_CAST({expr} AS DOUBLE) > 1e11 THEN to_timestamp(TRY_CAST({expr} AS DOUBLE)"
        f" / 1000) ELSE to_timestamp(TRY_CAST({expr} AS DOUBLE)) END)"
    )


def _json_type(col: Column) -> str | list[str]:
    kind = col.type.split()[0]
    if kind == "VARCHAR[]":
        return ["VARCHAR"]
    if kind in ("TIMESTAMPTZ", "VARCHAR"):
        return "VARCHAR"
    return kind


def _structure(columns: Sequence[Column]) -> dict[str, Any]:
    """The from_json structure that parses every sourced column in one pass."""
    root: dict[str, Any] = {}
    for col in columns:
        if col.source is None:
            continue
        parts = col.source.removeprefix("$.").split(".")
        node = root
        for part in parts[:-1]:
            node = node.setdefault(part, {})
            if not isinstance(node, dict):  # under a whole-JSON column: read with ->>
                break
        else:
            kind = _json_type(col)
            if kind == "JSON" or parts[-1] not in node:  # a whole-JSON parent wins
                node[parts[-1]] = kind
    return root


def _access(col: Column, struct: str, structure: dict[str, Any]) -> str:
    """The column's value in the parsed struct; fields inside a JSON-typed member via ->>."""
    assert col.source is not None
    parts = col.source[2:].split(".")
    value = struct
    node: Any = structure
    for i, part in enumerate(parts):
        if not isinstance(node, dict):
            value = f"({value}->>'{_path('.'.join(parts[i:]))}')"
            break
        value += '."' + part.replace('"', '""') + '"'
        node = node.get(part)
    return _ts(value) if col.type.startswith("TIMESTAMPTZ") else value


def _records_sql(paths: RecordPaths, source: str) -> str:
    """SQL selecting payload, id, updated_at and hash of every record in ``source``(body)."""
    if paths.envelope == WHOLE_BODY:
        records = "body::JSON"
    elif paths.envelope is None:
        records = "unnest(from_json(body, '[\"JSON\"]'))"
    else:
        structure = orjson.dumps({paths.envelope: ["JSON"]}).decode().replace("'", "''")
        key = '"' + paths.envelope.replace('"', '""') + '"'
        records = f"unnest(from_json(body, '{structure}').{key})"
    updated = f"r->>'{_path(paths.updated)}'" if paths.updated else "NULL"
    created = f"r->>'{_path(paths.created)}'" if paths.created else "NULL"
    return (
        f"SELECT payload, id, {_ts('updated_text')} AS updated_at, "
        f"{_ts('created_text')} AS created_at, payload_hash FROM ("
        f"SELECT r AS payload, r->>'{_path(paths.id)}' AS id, {updated} AS updated_text, "
        f"{created} AS created_text, md5(r::VARCHAR) AS payload_hash "
        f"FROM (SELECT {records} AS r FROM {source}))"
    )


def _bodies(con: duckdb.DuckDBPyConnection, name: str, bodies: Sequence[bytes]) -> None:
    """Expose response bodies to SQL as ``name(body VARCHAR)``.

    They travel as Arrow binary (building an Arrow string array from large
    Python strings is slow) and DuckDB decodes them, checking the UTF-8.
    """
    con.register(f"{name}_bin", pa.table({"raw": pa.array(bodies, pa.binary())}))
    con.execute(f"CREATE OR REPLACE TEMP VIEW {name} AS SELECT decode(raw) AS body FROM {name}_bin")


def _typed_select(table: Table, record: str, computed: dict[str, str]) -> str:
    """Typed columns from a JSON record: parsed once into a struct ``_s``, then picked."""
    structure = _structure(table.columns)
    exprs = []
    for col in table.columns:
        if col.name in computed:
            exprs.append(f"{computed[col.name]} AS {col.name}")
        elif col.source is not None:
            exprs.append(f"{_access(col, '_s', structure)} AS {col.name}")
        else:
            exprs.append(f"NULL AS {col.name}")
    return ", ".join(exprs)


def _parsed(table: Table, record: str) -> str:
    """The struct expression ``_typed_select`` reads from (add it to the inner SELECT)."""
    structure = orjson.dumps(_structure(table.columns)).decode().replace("'", "''")
    return f"json_transform({record}, '{structure}') AS _s"


def _key_times(table: Table) -> dict[str, str]:
    """Created and updated times from the fields detected (or configured) for the stream.

    They were parsed while staging, so a service that names them differently
    still fills these columns; the contract's field is the fallback for created.
    """
    created = next(c for c in table.columns if c.name == "created_at")
    return {
        "created_at": (
            f"COALESCE(staged_created_at, {_access(created, '_s', _structure(table.columns))})"
        ),
        "updated_at": "staged_updated_at",
    }


def _upsert(table: Table, keep: tuple[str, ...], condition: str) -> str:
    sets = ", ".join(
        f"{c.name} = excluded.{c.name}"
        for c in table.columns
        if c.name not in table.key and c.name not in keep
    )
    return f"ON CONFLICT ({', '.join(table.key)}) DO UPDATE SET {sets} WHERE {condition}"


def _drop_bodies(con: duckdb.DuckDBPyConnection, name: str) -> None:
    con.execute(f"DROP VIEW IF EXISTS {name}")
    con.unregister(f"{name}_bin")


def stage_records(
    con: duckdb.DuckDBPyConnection, stage: str, bodies: Sequence[bytes], paths: RecordPaths
) -> None:
    """Split response bodies into the temporary table ``stage`` (payload, id, updated_at, hash)."""
    _bodies(con, f"{stage}_bodies", bodies)
    con.execute(f"CREATE OR REPLACE TEMP TABLE {stage} AS {_records_sql(paths, f'{stage}_bodies')}")
    _drop_bodies(con, f"{stage}_bodies")


def insert_raw(
    con: duckdb.DuckDBPyConnection, raw_table: str, stage: str, run_id: str, fetched: datetime
) -> None:
    con.execute(
        f"INSERT INTO {raw_table} SELECT id, payload_hash, updated_at, payload, ?, ? "
        f"FROM {stage} WHERE id IS NOT NULL ON CONFLICT DO NOTHING",
        [fetched, run_id],
    )


def classify(con: duckdb.DuckDBPyConnection, stage: str, typed: str) -> PageCounts:
    """Counts of the staged records that are new, newer than ours, or the same."""
    row = con.execute(
        f"""SELECT count(*),
                   count(*) FILTER (WHERE t.id IS NULL),
                   count(*) FILTER (WHERE t.id IS NOT NULL AND s.updated_at > t.updated_at)
            FROM (SELECT DISTINCT ON (id) * FROM {stage} ORDER BY id, updated_at DESC) s
            LEFT JOIN {typed} t USING (id)"""
    ).fetchone()
    assert row is not None
    total, new, changed = (int(v) for v in row)
    return PageCounts(records=total, new=new, changed=changed, unchanged=total - new - changed)


def merge_conversations(
    con: duckdb.DuckDBPyConnection,
    listed: str,
    details: str | None,
    run_id: str,
    loaded: datetime,
) -> None:
    """Upsert the newest version of each conversation; a detail beats its listed version."""
    join = f"LEFT JOIN {details} d USING (id)" if details else ""
    detail_payload = "d.payload" if details else "NULL::JSON"
    detail_updated = "d.updated_at" if details else "NULL::TIMESTAMPTZ"
    detail_created = "d.created_at" if details else "NULL::TIMESTAMPTZ"
    select = _typed_select(
        CONVERSATIONS,
        "r",
        {
            "id": "id",
            "detail_updated_at": "detail_updated_at",
            "first_run_id": "?",
            "last_run_id": "?",
            "loaded_at": "?",
            **_key_times(CONVERSATIONS),
        },
    )
    newer = (
        "conversations.updated_at IS NULL OR excluded.updated_at > conversations.updated_at "
        "OR (excluded.updated_at = conversations.updated_at AND "
        "excluded.detail_updated_at IS NOT NULL AND conversations.detail_updated_at IS NULL)"
    )
    con.execute(
        f"""INSERT INTO conversations
            SELECT {select} FROM (
                SELECT *, {_parsed(CONVERSATIONS, "r")} FROM (
                    SELECT DISTINCT ON (l.id) l.id, COALESCE({detail_payload}, l.payload) AS r,
                           {detail_updated} AS detail_updated_at,
                           COALESCE({detail_updated}, l.updated_at) AS staged_updated_at,
                           COALESCE({detail_created}, l.created_at) AS staged_created_at
                    FROM {listed} l {join} WHERE l.id IS NOT NULL
                    ORDER BY l.id, l.updated_at DESC))
            {_upsert(CONVERSATIONS, ("first_run_id",), newer)}""",
        [run_id, run_id, loaded],
    )
    if details:
        _replace_detail_children(con, details, run_id)


#: Collections nested in a conversation detail, each kept in its own typed table.
DETAIL_CHILDREN = (
    (MESSAGES, "$.messages"),
    (CONVERSATION_ESCALATIONS, "$.escalations"),
    (CONVERSATION_GUARDRAIL_EVENTS, "$.guardrailEvents"),
)


def _replace_detail_children(con: duckdb.DuckDBPyConnection, details: str, run_id: str) -> None:
    """Swap in the transcripts (and handoffs, guardrail events) of the details now current."""
    applied = (
        f"SELECT d.id, d.payload FROM {details} d JOIN conversations c "
        "ON c.id = d.id AND c.detail_updated_at IS NOT DISTINCT FROM d.updated_at"
    )
    for table, path in DETAIL_CHILDREN:
        con.execute(
            f"DELETE FROM {table.name} WHERE conversation_id IN (SELECT id FROM ({applied}))"
        )
        select = _typed_select(
            table,
            "m",
            {"conversation_id": "conversation_id", "position": "position", "run_id": "?"},
        )
        con.execute(
            f"""INSERT INTO {table.name} SELECT {select} FROM (
                    SELECT *, {_parsed(table, "m")} FROM (
                        SELECT id AS conversation_id, unnest(items) AS m,
                               unnest(range(len(items))) AS position
                        FROM (SELECT a.id, COALESCE((a.payload->'{path}')::JSON[], []) AS items
                              FROM ({applied}) a)))
                WHERE _s.id IS NOT NULL
                ON CONFLICT (id) DO NOTHING""",
            [run_id],
        )


def merge_leads(con: duckdb.DuckDBPyConnection, stage: str, run_id: str, loaded: datetime) -> None:
    select = _typed_select(
        LEADS,
        "r",
        {
            "id": "id",
            "first_run_id": "?",
            "last_run_id": "?",
            "loaded_at": "?",
            **_key_times(LEADS),
        },
    )
    con.execute(
        f"""INSERT INTO leads SELECT {select} FROM (
                SELECT *, {_parsed(LEADS, "r")} FROM (
                    SELECT DISTINCT ON (id) id, payload AS r, updated_at AS staged_updated_at,
                           created_at AS staged_created_at FROM {stage}
                    WHERE id IS NOT NULL ORDER BY id, updated_at DESC))
            {
            _upsert(
                LEADS,
                ("first_run_id",),
                "leads.updated_at IS NULL OR excluded.updated_at >= leads.updated_at",
            )
        }""",
        [run_id, run_id, loaded],
    )


def merge_summary(
    con: duckdb.DuckDBPyConnection, body: bytes, run_id: str, fetched: datetime
) -> tuple[str, int]:
    """Store one summary answer raw and its daily rows typed; returns (raw id, days)."""
    _bodies(con, "summary_body", [body])
    select = _typed_select(
        SERVICE_SUMMARIES,
        "d",
        {
            "workspace_id": "s->>'$.workspaceId'",
            "timezone": "COALESCE(s->>'$.timezone', 'UTC')",
            "low_confidence_threshold": "TRY_CAST(s->>'$.lowConfidenceThreshold' AS DOUBLE)",
            "fetched_at": "?",
            "run_id": "?",
        },
    )
    raw_id = (
        "concat_ws('|', s->>'$.workspaceId', s->>'$.from', s->>'$.to', "
        "COALESCE(s->>'$.timezone', 'UTC'))"
    )
    con.execute(
        f"""INSERT INTO raw_service_summaries
            SELECT {raw_id}, md5(s::VARCHAR), NULL, s, ?, ?
            FROM (SELECT body::JSON AS s FROM summary_body) ON CONFLICT DO NOTHING""",
        [fetched, run_id],
    )
    con.execute(
        f"""INSERT INTO service_summaries SELECT {select} FROM (
                SELECT *, {_parsed(SERVICE_SUMMARIES, "d")} FROM (
                    SELECT s, unnest(COALESCE((s->'$.daily')::JSON[], [])) AS d
                    FROM (SELECT body::JSON AS s FROM summary_body)))
            {_upsert(SERVICE_SUMMARIES, (), "true")}""",
        [fetched, run_id],
    )
    row = con.execute(
        f"SELECT {raw_id}, len(COALESCE((s->'$.daily')::JSON[], [])) "
        "FROM (SELECT body::JSON AS s FROM summary_body)"
    ).fetchone()
    _drop_bodies(con, "summary_body")
    assert row is not None
    return str(row[0]), int(row[1])


def record_structure(con: duckdb.DuckDBPyConnection, stage: str) -> dict[str, Any]:
    """The merged structure of the staged records' top-level fields (for drift reports)."""
    import orjson

    row = con.execute(f"SELECT json_group_structure(payload) FROM {stage}").fetchone()
    if row is None or row[0] is None:
        return {}
    value = orjson.loads(row[0])
    return value if isinstance(value, dict) else {}
