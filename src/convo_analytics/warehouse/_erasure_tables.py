"""Where erasures are remembered (issue 30, D-ERASURE).

* ``erasure_suppressions``: whom an erasure removed, by salted subject hash
  (``privacy.SubjectHasher``, never the identifier), per workspace: extract and the
  webhook ingest read it before loading and drop what it names, so an erased person
  does not come back with the next extraction or a re-ingested archive.
* ``erasure_log``: one row per erasure step, appended, never updated: the certificate
  of each erasure (what was found where, counts, the hashes of the files rewritten).
* ``transform_pending``: conversations whose marts must be recomputed although no
  loaded row says so (an erasure removed their rows): the next incremental
  transform adds them to what changed, and empties it in the same transaction.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime

import duckdb

from convo_analytics.warehouse._tables import Column, Table, workspace_column

__all__ = [
    "ERASURE_LOG",
    "ERASURE_SUPPRESSIONS",
    "ERASURE_TABLES",
    "TRANSFORM_PENDING",
    "add_pending",
    "add_suppressions",
    "suppressed",
]

_TS = "TIMESTAMPTZ"

ERASURE_SUPPRESSIONS = Table(
    "erasure_suppressions",
    (
        workspace_column("'default'"),
        Column(
            "kind",
            "VARCHAR NOT NULL",
            doc="external_user_id, email, conversation or lead: what the hash is of",
        ),
        Column(
            "subject_hash",
            "VARCHAR NOT NULL",
            doc="HMAC-SHA256 of the identifier under the workspace's key (64 hex digits)",
        ),
        Column("erasure_id", "VARCHAR NOT NULL", doc="the erasure that added it"),
        Column("added_at", _TS, doc="when"),
    ),
    ("workspace_id", "kind", "subject_hash"),
    "Whom erasures removed, by salted hash: extract and ingest drop records naming them.",
)

ERASURE_LOG = Table(
    "erasure_log",
    (
        Column("erasure_id", "VARCHAR NOT NULL", doc="one erasure (its re-runs share it)"),
        Column("step", "INTEGER NOT NULL", doc="0, 1, ...: a re-run after a kill appends"),
        workspace_column("'default'"),
        Column("subject_hash", "VARCHAR NOT NULL", doc="the person, as their subject hash"),
        Column("status", "VARCHAR NOT NULL", doc="files, started or complete"),
        Column("logged_at", _TS, doc="when the row was written"),
        Column("certificate", "JSON", doc="the certificate as it stood (see docs/privacy.md)"),
    ),
    ("erasure_id", "step"),
    "Append-only record of each erasure: files, started, then complete with its certificate.",
)

TRANSFORM_PENDING = Table(
    "transform_pending",
    (
        workspace_column("'default'"),
        Column("conversation_id", "VARCHAR NOT NULL", doc="a conversation to recompute"),
        Column("reason", "VARCHAR", doc="why (e.g. erasure and its id)"),
    ),
    ("workspace_id", "conversation_id"),
    "Conversations the next incremental transform recomputes although no new row names them.",
)

ERASURE_TABLES = (ERASURE_SUPPRESSIONS, ERASURE_LOG, TRANSFORM_PENDING)


def suppressed(con: duckdb.DuckDBPyConnection, workspace_id: str) -> dict[str, frozenset[str]]:
    """The workspace's suppression list, by kind (empty when nobody was erased)."""
    found: dict[str, set[str]] = {}
    for kind, digest in con.execute(
        "SELECT kind, subject_hash FROM erasure_suppressions WHERE workspace_id = ?",
        [workspace_id],
    ).fetchall():
        found.setdefault(str(kind), set()).add(str(digest))
    return {kind: frozenset(hashes) for kind, hashes in found.items()}


def add_suppressions(
    con: duckdb.DuckDBPyConnection,
    workspace_id: str,
    hashes: Mapping[str, Iterable[str]],
    erasure_id: str,
    at: datetime,
) -> int:
    """Add subject hashes (by kind) to the list; one already there is kept. Returns how
    many rows were new."""
    rows = [(workspace_id, kind, h, erasure_id, at) for kind, hs in hashes.items() for h in hs]
    if not rows:
        return 0
    before = con.execute("SELECT count(*) FROM erasure_suppressions").fetchone()
    con.executemany(
        "INSERT INTO erasure_suppressions VALUES (?, ?, ?, ?, ?) ON CONFLICT DO NOTHING", rows
    )
    after = con.execute("SELECT count(*) FROM erasure_suppressions").fetchone()
    assert before is not None and after is not None
    return int(after[0]) - int(before[0])


def add_pending(
    con: duckdb.DuckDBPyConnection, workspace_id: str, conversation_ids: Iterable[str], reason: str
) -> None:
    """Ask the next incremental transform to recompute these conversations."""
    rows = [(workspace_id, cid, reason) for cid in conversation_ids]
    if rows:
        con.executemany(
            "INSERT INTO transform_pending VALUES (?, ?, ?) ON CONFLICT DO NOTHING", rows
        )
