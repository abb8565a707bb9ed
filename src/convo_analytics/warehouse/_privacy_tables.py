"""Where scrubbed personal data is remembered by its keyed hash (issue 30,
D-PRIVACY-SCRUB-AT-LOAD).

Extract and the webhook ingest scrub every record before it is written (the
``privacy`` package): the stored text says ``[email]``, no longer which address.
What was found is kept here instead, by kind and keyed hash (never the value), beside
the record it was found in, so that ``convo erase --email`` can hash the address it is
given with the same workspace key and find the person's records.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

import duckdb
import pyarrow as pa

from convo_analytics.warehouse._tables import Column, Table, workspace_column

__all__ = ["PRIVACY_FINDINGS", "PRIVACY_TABLES", "FindingRow", "record_findings"]

PRIVACY_FINDINGS = Table(
    "privacy_findings",
    (
        workspace_column("'default'"),
        Column(
            "source",
            "VARCHAR NOT NULL",
            doc="where the record was stored: conversations, leads, summary (extract) or "
            "events (webhook ingest)",
        ),
        Column(
            "record_id",
            "VARCHAR NOT NULL",
            doc="the record's id as stored (a conversation's id for its detail and "
            "transcript; an event's id); '' for a finding outside any record",
        ),
        Column("kind", "VARCHAR NOT NULL", doc="email, phone, card, iban, ip, or an extra pattern"),
        Column(
            "keyed_hash",
            "VARCHAR NOT NULL",
            doc="HMAC-SHA256 of the value under the workspace's key, 12 hex digits "
            "(Scrubber.keyed_hash)",
        ),
        Column("first_run_id", "VARCHAR", doc="the extract or ingest run that first found it"),
        Column("found_at", "TIMESTAMPTZ", doc="when it was first found"),
    ),
    ("workspace_id", "source", "record_id", "kind", "keyed_hash"),
    "Personal data scrubbed from a stored record, by kind and keyed hash (never the value): "
    "how an erasure by email finds a person whose stored text is masked.",
)

PRIVACY_TABLES = (PRIVACY_FINDINGS,)

#: (record id or None, kind, keyed hash)
FindingRow = tuple[str | None, str, str]


def record_findings(
    con: duckdb.DuckDBPyConnection,
    workspace: str,
    source: str,
    rows: Sequence[FindingRow],
    run_id: str,
    at: datetime,
) -> None:
    """Add ``rows`` found in ``source``'s records (in the caller's transaction); a finding
    already held is kept as first found."""
    if not rows:
        return
    table = pa.table(
        {
            "record_id": pa.array([r[0] or "" for r in rows], pa.string()),
            "kind": pa.array([r[1] for r in rows], pa.string()),
            "keyed_hash": pa.array([r[2] for r in rows], pa.string()),
        }
    )
    con.register("privacy_found", table)
    try:
        con.execute(
            """INSERT INTO privacy_findings
               SELECT DISTINCT ?, ?, record_id, kind, keyed_hash, ?, ?::TIMESTAMPTZ
               FROM privacy_found ON CONFLICT DO NOTHING""",
            [workspace, source, run_id, at],
        )
    finally:
        con.unregister("privacy_found")
