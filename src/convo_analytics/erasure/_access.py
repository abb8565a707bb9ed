"""``convo export person``: everything the warehouse holds about one person, as one JSON
document (an access request, issue 30; D-ERASURE, "Access requests").

The person is found as the erasure finds them (:func:`find_person`), and their rows
are read from the tables the erasure deletes from (the same list, ``HOLDERS``, marts
included): a table added to that list is exported too. Beside the rows: the quarantined
lines naming them, their texts among the topics' examples, whether they are on the
suppression list and the erasures of them (``erasure_log``, by their subject hash).

It reads the warehouse file, read-only, and takes no lock: the current state, newer than
any published snapshot (a snapshot may lag a run behind, and holds nothing the warehouse
does not). DuckDB does not open a file while another process writes it; that is the
reader's one-line error (``WarehouseBusy``, exit 2: run again when the writer is done).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from decimal import Decimal
from typing import Any

import duckdb
import orjson

from convo_analytics.config import Settings
from convo_analytics.erasure._erase import resolve_workspace
from convo_analytics.erasure._holders import HOLDERS, Holder, present, where
from convo_analytics.erasure._person import (
    Found,
    IdentifierKind,
    PersonRequest,
    find_person,
    subject_hash,
)
from convo_analytics.erasure._warehouse import quarantined_rowids, user_texts
from convo_analytics.errors import UserError
from convo_analytics.privacy import PrivacyConfig, privacy_config

__all__ = ["PersonExport", "export_person", "person_export"]

#: What finding a person reads: a warehouse without one of these predates the erasure.
_NEEDED = frozenset(
    {"workspaces", "conversations", "conversation_lifecycle", "mart_conversations", "leads",
     "lead_qualifications", "privacy_findings", "events", "messages", "erasure_log",
     "erasure_suppressions"}
)  # fmt: skip


@dataclass(frozen=True)
class PersonExport:
    """An access request's answer: the JSON document, and how many records it holds."""

    document: dict[str, Any]
    records: int

    def nothing_held(self) -> bool:
        return self.records == 0

    def notice(self) -> str:
        """One line for stderr when nothing is held (never naming the person)."""
        doc = self.document
        kind = doc["person"]["identifierKind"].replace("_", " ")
        line = f"nothing is held about this person in workspace {doc['workspace']['name']} "
        line += f"(no record found by their {kind})"
        done = [e for e in doc["erasures"] if e["status"] == "complete"]
        if done:
            line += f"; erased on {done[-1]['loggedAt'][:10]} (erasure {done[-1]['erasureId']})"
        if doc["suppressed"]["listed"]:
            line += "; on the suppression list: extract and ingest leave them out"
        return line


def export_person(settings: Settings, workspace: str, kind: str, value: str) -> PersonExport:
    """Everything the warehouse (``warehouse.path``) holds about the person ``kind``
    ``value`` of ``workspace`` (a name or an id)."""
    from convo_analytics.warehouse import open_warehouse

    if kind not in ("external_user_id", "email"):
        raise ValueError(kind)
    if not value.strip():
        raise UserError(f"--{kind.replace('_', '-')}: give the person's identifier (it is empty)")
    db_path = settings.require_path("warehouse.path")
    con = open_warehouse(db_path, read_only=True)
    try:
        missing = sorted(_NEEDED - present(con))
        if missing:
            raise UserError(
                f"warehouse {db_path} predates this release (it has no {', '.join(missing)}); "
                "run 'convo transform' once to bring it up to date, then export again"
            )
        ws_id, ws_name = resolve_workspace(con, workspace)
        request = PersonRequest(ws_id, ws_name, _kind(kind), value)
        return person_export(con, request, privacy_config(settings, ws_id))
    finally:
        con.close()


def _kind(kind: str) -> IdentifierKind:
    return "email" if kind == "email" else "external_user_id"


def person_export(
    con: duckdb.DuckDBPyConnection, request: PersonRequest, privacy: PrivacyConfig
) -> PersonExport:
    """The document of everything ``con``'s warehouse holds about the person."""
    ws = request.workspace_id
    found = find_person(con, request, privacy)
    tables = present(con)
    records: dict[str, list[dict[str, Any]]] = {}
    for holder in HOLDERS:
        if holder.table in tables:
            records[holder.table] = _holder_rows(con, holder, ws, found)
    if "quarantine" in tables:
        # a line of no workspace (the flat endpoint's) may be anyone's: handed out only
        # when the warehouse holds one workspace (the erasure removes it either way)
        (n,) = con.execute("SELECT count(*) FROM workspaces").fetchall()[0]
        names = {ws, request.workspace_name}
        rowids = quarantined_rowids(con, found, names, unbound=int(n) <= 1)
        records["quarantine"] = _quarantine_rows(con, rowids)
    records["topic_examples"] = _topic_examples(con, ws, user_texts(con, ws, found), tables)
    subject = subject_hash(request, privacy)
    listed = con.execute(
        "SELECT erasure_id, added_at FROM erasure_suppressions WHERE workspace_id = ? "
        "AND kind = ? AND subject_hash = ? ORDER BY added_at, erasure_id",
        [ws, request.kind, subject],
    ).fetchall()
    erasures = con.execute(
        "SELECT erasure_id, step, status, logged_at, certificate FROM erasure_log "
        "WHERE workspace_id = ? AND subject_hash = ? ORDER BY logged_at, erasure_id, step",
        [ws, subject],
    ).fetchall()
    held = sum(len(rows) for rows in records.values())
    document: dict[str, Any] = {
        "workspace": {"name": request.workspace_name, "id": ws},
        "person": {
            "identifierKind": request.kind,
            "identifier": request.value,
            "subject": subject,
        },
        "generatedAt": _iso(datetime.now(UTC)),
        "found": {
            "conversations": len(found.conversations),
            "leads": len(found.leads),
            "events": len(found.events),
        },
        "records": held,
        "suppressed": {
            "listed": bool(listed),
            "since": _iso(listed[0][1]) if listed else None,
            "erasureIds": sorted({str(r[0]) for r in listed}),
        },
        "erasures": [
            {
                "erasureId": str(erasure_id),
                "step": int(step),
                "status": str(status),
                "loggedAt": _iso(logged_at),
                "certificate": orjson.loads(certificate) if certificate else None,
            }
            for erasure_id, step, status, logged_at, certificate in erasures
        ],
        "tables": records,
    }
    return PersonExport(document, held)


def _columns(con: duckdb.DuckDBPyConnection, table: str) -> list[tuple[str, str]]:
    rows = con.execute(
        "SELECT column_name, data_type FROM information_schema.columns "
        "WHERE table_name = ? AND table_schema = current_schema() ORDER BY ordinal_position",
        [table],
    ).fetchall()
    return [(str(name), str(kind)) for name, kind in rows]


def _select(
    con: duckdb.DuckDBPyConnection, table: str, first: tuple[str, ...], cond: str, params: list[Any]
) -> list[dict[str, Any]]:
    """Rows of ``table`` matching ``cond`` as JSON values, ordered by ``first`` and then
    by every column (the same rows, the same order, every time)."""
    columns = _columns(con, table)
    names = [name for name, _ in columns]
    order = [*[c for c in first if c in names], *[c for c in names if c not in first]]
    listed = ", ".join(f'"{c}"' for c in names)
    ordered = ", ".join(f'"{c}"' for c in order)
    rows = con.execute(
        f"SELECT {listed} FROM {table} WHERE {cond} ORDER BY {ordered}", params
    ).fetchall()
    json_columns = {name for name, kind in columns if kind == "JSON"}
    return [
        {
            name: _parsed(value) if name in json_columns else _plain(value)
            for name, value in zip(names, row, strict=True)
        }
        for row in rows
    ]


def _holder_rows(
    con: duckdb.DuckDBPyConnection, holder: Holder, workspace_id: str, found: Found
) -> list[dict[str, Any]]:
    if found.empty():
        return []
    cond, params = where(holder, found)
    return _select(con, holder.table, holder.order, cond, [workspace_id, *params])


def _quarantine_rows(con: duckdb.DuckDBPyConnection, rowids: list[int]) -> list[dict[str, Any]]:
    """The quarantined lines naming the person (``line`` as text: undecodable bytes shown
    as U+FFFD)."""
    if not rowids:
        return []
    return _select(
        con, "quarantine", ("quarantined_at", "source_file", "source_line"),
        "rowid IN (SELECT unnest(?::BIGINT[]))", [rowids],
    )  # fmt: skip


def _topic_examples(
    con: duckdb.DuckDBPyConnection, workspace_id: str, texts: list[str], tables: set[str]
) -> list[dict[str, Any]]:
    """The topics (discovered and mart) that show one of the person's texts as an example,
    with those examples."""
    if not texts:
        return []
    out = []
    for table in ("topics", "mart_topics"):
        if table not in tables:
            continue
        rows = con.execute(
            f"SELECT topic_id, label, list_intersect(examples, ?) FROM {table} "
            "WHERE workspace_id = ? AND len(list_intersect(examples, ?)) > 0 "
            "ORDER BY topic_id, label",
            [texts, workspace_id, texts],
        ).fetchall()
        out += [
            {"table": table, "topic_id": int(topic), "label": label, "examples": sorted(ex)}
            for topic, label, ex in rows
        ]
    return out


def _parsed(value: Any) -> Any:
    """A JSON column's value as the JSON it holds."""
    if isinstance(value, str):
        try:
            return orjson.loads(value)
        except orjson.JSONDecodeError:
            return value
    return _plain(value)


def _iso(value: datetime) -> str:
    if value.tzinfo is None:
        return value.isoformat()
    return value.astimezone(UTC).isoformat().replace("+00:00", "Z")


def _plain(value: Any) -> Any:
    """A DuckDB value as JSON: times as ISO strings (UTC, ``Z``), bytes as UTF-8 text,
    lists and structs element by element."""
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, datetime):
        return _iso(value)
    if isinstance(value, date | time):
        return value.isoformat()
    if isinstance(value, timedelta):
        return value.total_seconds()
    if isinstance(value, Decimal):
        return float(value)
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value).decode("utf-8", errors="replace")
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, uuid.UUID):
        return str(value)
    return str(value)
