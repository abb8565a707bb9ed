"""Loading fetched pages into the warehouse: raw versions, typed merges, bookmarks.

Response bodies go to DuckDB as they came (one Arrow string column); DuckDB
splits them into records and types the columns in SQL, which is many times
faster than re-serialising records in Python. Each call runs in the caller's
transaction: a page's raw rows, typed rows and the bookmark commit together
or not at all, so a run killed at any point leaves a consistent warehouse
and a re-run resumes from the last committed page.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

import duckdb
import numpy as np
import orjson
import pyarrow as pa

from convo_analytics.warehouse._arrow import (
    as_json,
    chunked,
    flattened,
    member_type,
    rechunked,
    without,
)
from convo_analytics.warehouse._shape import DEFAULT_SHAPE, DETAIL_LISTS, LoadShape
from convo_analytics.warehouse._sql import (
    _access,
    _ident,
    _path,
    _quoted_structure,
    _structure,
    _ts,
    sql_literal,
)
from convo_analytics.warehouse._tables import (
    CONVERSATIONS,
    LEADS,
    SERVICE_SUMMARIES,
    Table,
)

# Re-exported for the event loader, which builds its statements from the same pieces.
__all__ = ["_access", "_ident", "_quoted_structure", "_structure", "_ts"]
__all__ += ["DETAIL_STRUCTURE", "WHOLE_BODY", "PageCounts", "RecordPaths", "classify"]
__all__ += ["insert_raw", "merge_conversations", "merge_leads", "merge_summary"]
__all__ += ["record_structure", "stage_details", "stage_records", "unstage"]


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


def _records_sql(
    paths: RecordPaths, source: str, parse: dict[str, Any] | None = None, *, payload: bool = True
) -> str:
    """SQL selecting payload, id, updated_at, created_at and hash of every record in ``source``.

    The key fields come from one parse of each record (a list of JSON paths);
    ``parse``, when given, adds the record parsed into that structure as ``_p``,
    and supplies the key fields too when they are top-level text fields of it.
    A whole body stays text: ``body::JSON`` inlined into each of its uses
    (payload, hash, parse) validated the body once per use.
    """
    if paths.envelope == WHOLE_BODY:
        records = "body"
    elif paths.envelope is None:
        records = "unnest(from_json(body, '[\"JSON\"]'))"
    else:
        # a key path (``data.items``): the structure nests, and so does the access
        steps = paths.envelope.split(".")
        structure: Any = ["JSON"]
        for step in reversed(steps):
            structure = {step: structure}
        access = ".".join(_ident(step) for step in steps)
        records = f"unnest(from_json(body, '{_quoted_structure(structure)}').{access})"
    # A whole body is validated by its parse (json_transform rejects malformed JSON);
    # unparsed, it is cast. Staged as text, it is marked JSON again in Arrow (``as_json``);
    # without ``payload`` the caller has the records' text already (whole bodies).
    text = "r" if paths.envelope == WHOLE_BODY and parse else "r::JSON"
    selected = f"{text} AS payload, " if payload else ""
    wanted = [p for p in (paths.id, paths.updated, paths.created) if p]
    if parse and all(parse.get(p) == "VARCHAR" for p in wanted):
        # the key fields are top-level text fields of the structure: read them from its parse
        keyed = f"json_transform(r, '{_quoted_structure(parse)}') AS _p"

        def field(dotted: str | None) -> str:
            return f"_p.{_ident(dotted)}" if dotted else "NULL"

    else:
        keys = ", ".join("'" + _path(p).replace("'", "''") + "'" for p in wanted)
        keyed = f"json_extract_string(r, [{keys}]) AS k"
        if parse:
            keyed += f", json_transform(r, '{_quoted_structure(parse)}') AS _p"

        def field(dotted: str | None) -> str:
            return f"k[{wanted.index(dotted) + 1}]" if dotted else "NULL"

    # One projection over the parse: split over two, the key fields' expressions were
    # inlined into the next and the parse computed once per use.
    return (
        f"SELECT {selected}{field(paths.id)} AS id, "
        f"{_ts(field(paths.updated))} AS updated_at, {_ts(field(paths.created))} AS created_at, "
        f"md5(r::VARCHAR) AS payload_hash{', _p' if parse else ''} "
        f"FROM (SELECT r, {keyed} FROM (SELECT {records} AS r FROM {source}))"
    )


def _bodies(con: duckdb.DuckDBPyConnection, name: str, bodies: Sequence[bytes]) -> pa.Array:
    """Expose response bodies to SQL as ``name(body VARCHAR)``; returns them in Arrow.

    They travel as Arrow binary (building an Arrow string array from large
    Python strings is slow) and DuckDB decodes them, checking the UTF-8.
    """
    array = pa.array(bodies, pa.binary())
    con.register(f"{name}_bin", chunked(array))
    con.execute(f"CREATE OR REPLACE TEMP VIEW {name} AS SELECT decode(raw) AS body FROM {name}_bin")
    return array


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
    return f"json_transform({record}, '{_quoted_structure(_structure(table.columns))}') AS _s"


def _key_times(table: Table) -> dict[str, str]:
    """Created and updated times from the fields detected (or configured) for the stream.

    They were parsed while staging, so a service that names them differently
    still fills these columns; the contract's field is the fallback for created.
    """
    created = next(c for c in table.columns if c.name == "created_at")
    own = _access(created, "_s", _structure(table.columns)) if created.source else "NULL"
    return {"created_at": f"COALESCE(staged_created_at, {own})", "updated_at": "staged_updated_at"}


def _merge(table: Table, source: str, keep: tuple[str, ...], condition: str) -> str:
    """MERGE the rows of ``source`` (one per key, columns named as the table's) into ``table``.

    ``condition`` (a matched row is updated only when it holds) reads the new
    row as ``excluded``, as in ``_upsert``. DuckDB runs ``INSERT ... ON CONFLICT``
    as a merge that first groups the new rows by every column (the parsed
    record included); this statement does not, for the same result when the
    keys are distinct.
    """
    on = " AND ".join(f"{table.name}.{k} = excluded.{k}" for k in table.key)
    sets = _assignments(table, keep)
    values = ", ".join(f"excluded.{c.name}" for c in table.columns)
    return (
        f"MERGE INTO {table.name} USING ({source}) AS excluded ON {on} "
        f"WHEN MATCHED AND ({condition}) THEN UPDATE SET {sets} "
        f"WHEN NOT MATCHED THEN INSERT VALUES ({values})"
    )


def _assignments(table: Table, keep: tuple[str, ...]) -> str:
    """SET list taking every column but the key and ``keep`` from the new row."""
    return ", ".join(
        f"{c.name} = excluded.{c.name}"
        for c in table.columns
        if c.name not in table.key and c.name not in keep
    )


def _upsert(table: Table, keep: tuple[str, ...], condition: str) -> str:
    sets = _assignments(table, keep)
    return f"ON CONFLICT ({', '.join(table.key)}) DO UPDATE SET {sets} WHERE {condition}"


def _drop_bodies(con: duckdb.DuckDBPyConnection, name: str) -> None:
    con.execute(f"DROP VIEW IF EXISTS {name}")
    con.unregister(f"{name}_bin")


def stage_records(
    con: duckdb.DuckDBPyConnection,
    stage: str,
    bodies: Sequence[bytes],
    paths: RecordPaths,
    parse: dict[str, Any] | None = None,
    lists: Mapping[str, str] | None = None,
    workspace: str = "default",
) -> None:
    """Split response bodies into the staged table ``stage`` (workspace_id, payload, id,
    updated_at, hash, rn); every record belongs to ``workspace``.

    With ``parse``, each record is also parsed into that structure (column ``_p``),
    and each member of it named in ``lists`` (a list of structures) is staged flat
    as ``{stage}_{lists[member]}`` (``drow``, the record's ``rn``; ``position``; the
    item ``_s``), left out of ``_p``.

    The staged records are Arrow tables registered under those names, in small
    record batches, not temporary tables: materialising the parsed details into
    a temporary table cost more than parsing them, and a temporary table smaller
    than a row group (122,880 rows) is scanned by one thread in every statement
    after. Arrow scans read a column whole, nested lists included, so a
    transcript kept inside ``_p`` was converted again by every statement that
    read any of ``_p``. ``rn`` numbers the records in the order the bodies hold
    them (Arrow scans have no ``rowid``). The bodies stay exposed as
    ``{stage}_bodies`` (for ``record_structure``). ``unstage`` lets go of all.
    """
    raw = _bodies(con, f"{stage}_bodies", bodies)
    # A parsed whole body (a detail) is its record's payload: handed over as it came,
    # UTF-8 and JSON checked by the query, not copied back out of DuckDB.
    whole = paths.envelope == WHOLE_BODY and parse is not None
    sql = _records_sql(paths, f"{stage}_bodies", parse, payload=not whole)
    staged = con.sql(sql).to_arrow_table()
    if whole:
        assert staged.num_rows == len(raw)
        staged = staged.append_column("payload", raw.view(pa.string()))
    staged = as_json(staged, "payload").append_column(
        "rn", pa.array(np.arange(staged.num_rows, dtype=np.int64))
    )
    staged = staged.append_column(
        "workspace_id", pa.repeat(pa.scalar(workspace, pa.string()), staged.num_rows)
    )
    parsed_type = staged.schema.field("_p").type if parse else None
    members = [m for m in (lists or {}) if parsed_type and member_type(parsed_type, m)]
    for member in members:
        flat = flattened(staged.column("_p"), member)
        con.register(f"{stage}_{(lists or {})[member]}", rechunked(flat, items=True))
    if members:
        i = staged.schema.get_field_index("_p")
        staged = staged.set_column(i, "_p", without(staged.column(i), members))
    con.register(stage, rechunked(staged))


def stage_details(
    con: duckdb.DuckDBPyConnection,
    stage: str,
    bodies: Sequence[bytes],
    paths: RecordPaths,
    shape: LoadShape = DEFAULT_SHAPE,
    workspace: str = "default",
) -> None:
    """Stage conversation details (whole bodies), parsed as ``shape`` says, lists flat."""
    whole = RecordPaths(WHOLE_BODY, paths.id, paths.updated, paths.created)
    stage_records(con, stage, bodies, whole, shape.detail_structure, shape.detail_lists, workspace)


def unstage(con: duckdb.DuckDBPyConnection, *stages: str) -> None:
    """Let go of staged tables and their bodies (their Arrow memory) after the commit."""
    for stage in stages:
        _drop_bodies(con, f"{stage}_bodies")
        con.unregister(stage)
        for child in DETAIL_LISTS:
            con.unregister(f"{stage}_{child}")


#: A sandbox-shaped detail's parse (see ``LoadShape.detail_structure``).
DETAIL_STRUCTURE = DEFAULT_SHAPE.detail_structure


def insert_raw(
    con: duckdb.DuckDBPyConnection, raw_table: str, stage: str, run_id: str, fetched: datetime
) -> None:
    """Store the staged versions not stored yet (the raw tables have no index, see Table).

    A version repeated within the batch is taken once, and one already in the
    table is left out by an anti-join on ``(id, payload_hash)``.
    """
    con.execute(
        f"""INSERT INTO {raw_table}
            SELECT s.workspace_id, s.id, s.payload_hash, s.updated_at, s.payload, ?, ?
            FROM {stage} s {_absent_from(raw_table, "s")}
            WHERE s.rn IN (SELECT min(rn) FROM {stage} WHERE id IS NOT NULL
                           GROUP BY workspace_id, id, payload_hash)""",
        [fetched, run_id],
    )


def _absent_from(raw_table: str, alias: str) -> str:
    """The anti-join that keeps a raw table's ``(id, payload_hash)`` unique without an index."""
    return (
        f"ANTI JOIN {raw_table} r ON r.workspace_id = {alias}.workspace_id "
        f"AND r.id = {alias}.id AND r.payload_hash = {alias}.payload_hash"
    )


def classify(con: duckdb.DuckDBPyConnection, stage: str, typed: str) -> PageCounts:
    """Counts of the staged records that are new, newer than ours, or the same."""
    row = con.execute(
        f"""SELECT count(*),
                   count(*) FILTER (WHERE t.id IS NULL),
                   count(*) FILTER (WHERE t.id IS NOT NULL AND s.updated_at > t.updated_at)
            FROM (SELECT DISTINCT ON (workspace_id, id) workspace_id, id, updated_at FROM {stage}
                  ORDER BY workspace_id, id, updated_at DESC) s
            LEFT JOIN {typed} t USING (workspace_id, id)"""
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
    shape: LoadShape = DEFAULT_SHAPE,
    workspace: str = "default",
) -> None:
    """Upsert the newest version of each of ``workspace``'s conversations; a detail beats its
    listed version (the staged records are all the workspace's).

    ``details`` must be staged with ``shape.detail_structure`` and its lists: the
    detail's parse is reused; only listed versions without a detail are parsed here.
    """
    conversations = shape.table(CONVERSATIONS.name)
    listed_parse = f"json_transform(l.payload, '{_quoted_structure(shape.conversation_structure)}')"
    if details:
        # The newest version of each id is chosen on keys and row numbers, then joined
        # back: sorting the parsed details (transcripts included) costs more than the merge.
        join = f"LEFT JOIN {details} d USING (id)"
        rows = f"JOIN {listed} l ON l.rn = v.lrow LEFT JOIN {details} d ON d.rn = v.drow"
        parsed = f"CASE WHEN d.id IS NULL THEN {listed_parse} ELSE d._p END"
        detail_updated, detail_created = "d.updated_at", "d.created_at"
        _note_prior_details(con, details, workspace)
    else:
        join, rows, parsed = "", f"JOIN {listed} l ON l.rn = v.lrow", listed_parse
        detail_updated = detail_created = "NULL::TIMESTAMPTZ"
    drow = "d.rn" if details else "NULL"
    select = _typed_select(
        conversations,
        "r",
        {
            "id": "id",
            "workspace_id": sql_literal(workspace),
            "detail_updated_at": "detail_updated_at",
            "first_run_id": "?",
            "last_run_id": "?",
            "loaded_at": "?",
            **_key_times(conversations),
        },
    )
    newer = (
        "conversations.updated_at IS NULL OR excluded.updated_at > conversations.updated_at "
        "OR (excluded.updated_at = conversations.updated_at AND "
        "excluded.detail_updated_at IS NOT NULL AND conversations.detail_updated_at IS NULL)"
    )
    source = f"""SELECT {select} FROM (
                SELECT v.id, {parsed} AS _s, {detail_updated} AS detail_updated_at,
                       COALESCE({detail_updated}, l.updated_at) AS staged_updated_at,
                       COALESCE({detail_created}, l.created_at) AS staged_created_at
                FROM (SELECT DISTINCT ON (l.id) l.id, l.rn AS lrow, {drow} AS drow
                      FROM {listed} l {join} WHERE l.id IS NOT NULL
                      ORDER BY l.id, l.updated_at DESC, {detail_updated} DESC NULLS LAST) v
                {rows})"""
    con.execute(_merge(conversations, source, ("first_run_id",), newer), [run_id, run_id, loaded])
    if details:
        _replace_detail_children(con, details, run_id, shape, workspace)


def _note_prior_details(con: duckdb.DuckDBPyConnection, details: str, workspace: str) -> None:
    """Before the merge: which detailed conversations we held already, and from which detail."""
    con.execute(
        f"""CREATE OR REPLACE TEMP TABLE prior_details AS
            SELECT c.id, c.detail_updated_at FROM conversations c
            WHERE c.workspace_id = {sql_literal(workspace)}
              AND c.id IN (SELECT id FROM {details})"""
    )


def _replace_detail_children(
    con: duckdb.DuckDBPyConnection,
    details: str,
    run_id: str,
    shape: LoadShape,
    workspace: str = "default",
) -> None:
    """Swap in the transcripts (and handoffs, guardrail events) of the details now current.

    Only a detail that changed is written: a detail we already held (same
    updatedAt, a re-fetch) keeps its rows, and only conversations we held
    before can have rows to delete (a first load deletes nothing).
    """
    con.execute(
        f"""CREATE OR REPLACE TEMP TABLE applied_details AS
            SELECT DISTINCT ON (d.id) d.id, d.rn AS drow, p.id IS NOT NULL AS held
            FROM {details} d
            JOIN conversations c
              ON c.workspace_id = {sql_literal(workspace)} AND c.id = d.id
             AND c.detail_updated_at IS NOT DISTINCT FROM d.updated_at
            LEFT JOIN prior_details p ON p.id = d.id
            WHERE p.detail_updated_at IS DISTINCT FROM d.updated_at"""
    )
    row = con.execute("SELECT count(*) FILTER (WHERE held) FROM applied_details").fetchone()
    held = row is not None and bool(row[0])
    # A child table the details have no list for still loses the rows of a changed detail.
    staged = dict((child, table) for table, child in shape.children)
    for child in DETAIL_LISTS:
        table = staged.get(child) or shape.table(child)
        _replace_children(
            con, details, run_id, table, child if child in staged else None, held, workspace
        )


def _replace_children(
    con: duckdb.DuckDBPyConnection,
    details: str,
    run_id: str,
    table: Table,
    staged: str | None,
    held: bool,
    workspace: str = "default",
) -> None:
    """Replace the rows of ``table`` for the applied details with the items staged as
    ``{details}_{staged}`` (None: the details hold no such list, only deletes)."""
    if held:
        con.execute(
            f"DELETE FROM {table.name} WHERE workspace_id = {sql_literal(workspace)} AND "
            "conversation_id IN (SELECT id FROM applied_details WHERE held)"
        )
    if staged is None:
        return
    # An item without an id (a service that numbers none) is keyed by its place.
    id_col = next(c for c in table.columns if c.name == "id")
    own_id = _access(id_col, "_s", _structure(table.columns)) if id_col.source else "NULL"
    item_id = f"COALESCE({own_id}, conversation_id || '#' || position)"
    select = _typed_select(
        table,
        "m",
        {
            "id": "_id",
            "workspace_id": sql_literal(workspace),
            "conversation_id": "conversation_id",
            "position": "position",
            "run_id": "?",
        },
    )
    items = (
        f"SELECT *, {item_id} AS _id FROM (SELECT a.id AS conversation_id, m.position, m._s "
        f"FROM {details}_{staged} m JOIN applied_details a ON a.drow = m.drow "
        "WHERE m._s IS NOT NULL)"
    )
    # An id repeated within the batch is stored once, where it comes first; the window
    # that picks it is only paid for when the cheap count finds such a repeat.
    row = con.execute(f"SELECT count(_id) - count(DISTINCT _id) FROM ({items})").fetchall()
    first = (
        "QUALIFY row_number() OVER (PARTITION BY _id ORDER BY conversation_id, position) = 1"
        if row and row[0][0]
        else ""
    )
    con.execute(
        f"""INSERT INTO {table.name} SELECT n.* FROM (
                SELECT {select} FROM ({items}) {first}
            ) n ANTI JOIN {table.name} m ON m.workspace_id = n.workspace_id AND m.id = n.id""",
        [run_id],
    )


def merge_leads(
    con: duckdb.DuckDBPyConnection,
    stage: str,
    run_id: str,
    loaded: datetime,
    shape: LoadShape = DEFAULT_SHAPE,
    workspace: str = "default",
) -> None:
    leads = shape.table(LEADS.name)
    select = _typed_select(
        leads,
        "r",
        {
            "id": "id",
            "workspace_id": sql_literal(workspace),
            "first_run_id": "?",
            "last_run_id": "?",
            "loaded_at": "?",
            **_key_times(leads),
        },
    )
    source = f"""SELECT {select} FROM (
                SELECT *, {_parsed(leads, "r")} FROM (
                    SELECT DISTINCT ON (id) id, payload AS r, updated_at AS staged_updated_at,
                           created_at AS staged_created_at FROM {stage}
                    WHERE id IS NOT NULL ORDER BY id, updated_at DESC))"""
    newer = "leads.updated_at IS NULL OR excluded.updated_at >= leads.updated_at"
    con.execute(_merge(LEADS, source, ("first_run_id",), newer), [run_id, run_id, loaded])


def merge_summary(
    con: duckdb.DuckDBPyConnection,
    body: bytes,
    run_id: str,
    fetched: datetime,
    workspace: str | None = None,
    *,
    records: str = "daily",
    shape: LoadShape = DEFAULT_SHAPE,
    timezone: str | None = None,
    raw_id: str | None = None,
) -> tuple[str, int]:
    """Store one summary answer raw and its daily rows typed; returns (raw id, typed days).

    ``workspace`` is the workspace the summary was asked for (default: the one the
    answer names, else ``default``); ``records`` the key path of the daily rows
    (``""``: the body is their list); ``shape`` where each metric and the day are in
    a row (``[extract.fields] service_summaries.*``); ``timezone`` the zone asked
    for, when the answer does not name one. A row whose day cannot be read is left
    out, and a typed day is one with at least one metric."""
    _bodies(con, "summary_body", [body])
    named = sql_literal(workspace) if workspace else "COALESCE(s->>'$.workspaceId', 'default')"
    zone = f"COALESCE(s->>'$.timezone', {sql_literal(timezone or 'UTC')})"
    table = shape.table(SERVICE_SUMMARIES.name)
    # the day is read as text and cut to a date: ``2026-11-12``, ``2026-11-12T00:00:00Z``
    day = next(c for c in table.columns if c.name == "date")
    text_day = replace(day, type="VARCHAR")
    parsing = replace(
        table, columns=tuple(text_day if c.name == "date" else c for c in table.columns)
    )
    day_of = (
        f"TRY_CAST(left({_access(text_day, '_s', _structure(parsing.columns))}, 10) AS DATE)"
        if day.source
        else "NULL::DATE"
    )
    select = _typed_select(
        parsing,
        "d",
        {
            "date": day_of,
            "workspace_id": named,
            "timezone": zone,
            "low_confidence_threshold": "TRY_CAST(s->>'$.lowConfidenceThreshold' AS DOUBLE)",
            "fetched_at": "?",
            "run_id": "?",
        },
    )
    rows = f"s->'{_path(records)}'" if records else "s"
    ident = sql_literal(raw_id) if raw_id else (
        f"concat_ws('|', s->>'$.workspaceId', s->>'$.from', s->>'$.to', {zone})"
    )  # fmt: skip
    con.execute(
        f"""INSERT INTO raw_service_summaries
            SELECT n.* FROM (SELECT {named} AS workspace_id, {ident} AS id,
                                    md5(s::VARCHAR) AS payload_hash, NULL, s, ?, ?
                             FROM (SELECT body::JSON AS s FROM summary_body)) n
            {_absent_from("raw_service_summaries", "n")}""",
        [fetched, run_id],
    )
    metrics = [
        c.name
        for c in SERVICE_SUMMARIES.columns
        if c.source is not None and c.name != "date" and c.type.split()[0] != "JSON"
    ]
    con.execute(
        f"""CREATE OR REPLACE TEMP TABLE summary_days AS
            SELECT {select} FROM (
                SELECT *, {_parsed(parsing, "d")} FROM (
                    SELECT s, unnest(CASE WHEN json_type({rows}) = 'ARRAY'
                                          THEN ({rows})::JSON[] ELSE [] END) AS d
                    FROM (SELECT body::JSON AS s FROM summary_body)))""",
        [fetched, run_id],
    )
    con.execute(
        f"""INSERT INTO service_summaries
            SELECT * FROM summary_days WHERE date IS NOT NULL
            QUALIFY row_number() OVER (PARTITION BY workspace_id, timezone, date) = 1
            {_upsert(SERVICE_SUMMARIES, (), "true")}"""
    )
    typed = con.execute(
        "SELECT count(DISTINCT date) FROM summary_days WHERE date IS NOT NULL AND "
        f"({' OR '.join(f'{m} IS NOT NULL' for m in metrics)})"
    ).fetchall()
    ident_row = con.execute(
        f"SELECT {ident} FROM (SELECT body::JSON AS s FROM summary_body)"
    ).fetchall()
    con.execute("DROP TABLE summary_days")
    _drop_bodies(con, "summary_body")
    return str(ident_row[0][0]), int(typed[0][0])


def record_structure(
    con: duckdb.DuckDBPyConnection, stage: str, paths: RecordPaths
) -> list[dict[str, Any]]:
    """The structure of each list page's records (for drift reports), one per page.

    DuckDB merges a page's records into one structure while parsing its body
    (``json_structure`` of the page, pages in parallel); the schema tracker merges
    the pages'. Per record over the staged table, this cost five times as much.
    The pages are the bodies staged as ``stage`` (kept until ``unstage``).
    """
    rows = con.execute(f"SELECT json_structure(body) FROM {stage}_bodies").fetchall()
    found = []
    for (text,) in rows:
        value = orjson.loads(text) if text is not None else None
        if paths.envelope is not None and paths.envelope != WHOLE_BODY:
            for step in paths.envelope.split("."):
                value = value.get(step) if isinstance(value, dict) else None
        if isinstance(value, list) and value and isinstance(value[0], dict):
            found.append(value[0])  # an array's structure: its elements' merged
    return found
