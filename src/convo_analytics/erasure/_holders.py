"""Where the warehouse holds a person's rows: one list, read by the erasure (what it
deletes) and the access request (what it hands out), so a table added here is both
erased and exported (D-ERASURE).

Each holder is a table and the columns naming the person's records in it. The marts
are holders too, marked ``derived``: the erasure does not delete from them (their
conversations go to ``transform_pending`` and the incremental transform takes their
facts out of every mart and daily figure); the access request hands their rows out.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import duckdb

from convo_analytics.erasure._person import Found

__all__ = ["HOLDERS", "Holder", "IdSet", "present", "where"]

#: Which of the person's ids a column holds: "conversations", "leads", "events", "all"
#: (any of them).
IdSet = Literal["conversations", "leads", "events", "all"]


@dataclass(frozen=True, slots=True)
class Holder:
    """A table holding rows of a person, and the columns naming them."""

    table: str
    #: (column, which of the person's ids it holds); a row is theirs when any matches.
    columns: tuple[tuple[str, IdSet], ...]
    #: Rebuilt from the others by the transform (a mart): not deleted by the erasure.
    derived: bool = False
    #: The columns an access request orders the rows by first (then every column).
    order: tuple[str, ...] = ()


_CONV: tuple[tuple[str, IdSet], ...] = (("conversation_id", "conversations"),)

#: Every table holding rows of a person, in the order an access request lists them.
HOLDERS: tuple[Holder, ...] = (
    Holder("conversations", (("id", "conversations"),), order=("created_at", "id")),
    Holder("raw_conversations", (("id", "conversations"),), order=("id",)),
    Holder("raw_conversation_details", (("id", "conversations"),), order=("id",)),
    Holder("messages", _CONV, order=("conversation_id", "position", "created_at")),
    Holder("conversation_escalations", _CONV, order=("conversation_id", "position")),
    Holder("conversation_guardrail_events", _CONV, order=("conversation_id", "position")),
    Holder("leads", (("id", "leads"), *_CONV), order=("created_at", "id")),
    Holder("raw_leads", (("id", "leads"),), order=("id",)),
    Holder("lead_qualifications", (("lead_id", "leads"), *_CONV), order=("qualified_at",)),
    Holder("events", (("event_id", "events"),), order=("occurred_at", "event_id")),
    Holder("event_keys", (("event_id", "events"),), order=("event_id",)),
    Holder("conversation_lifecycle", _CONV, order=("started_at",)),
    Holder("escalations", _CONV, order=("escalated_at",)),
    Holder("feedback", _CONV, order=("given_at",)),
    Holder("guardrail_events", _CONV, order=("triggered_at",)),
    Holder("message_traces", _CONV, order=("responded_at",)),
    Holder("conversation_topics", _CONV, order=("conversation_id",)),
    Holder("knowledge_gaps", _CONV, order=("answered_at",)),
    Holder("removed_texts", _CONV, order=("conversation_id",)),
    Holder("privacy_findings", (("record_id", "all"),), order=("source", "record_id", "kind")),
    Holder("mart_conversations", _CONV, derived=True, order=("started_at",)),
    Holder("mart_conversation_footprints", _CONV, derived=True, order=("conversation_id",)),
    Holder("mart_escalations", _CONV, derived=True, order=("escalated_at",)),
    Holder("mart_guardrail_incidents", _CONV, derived=True, order=("triggered_at",)),
)


def where(holder: Holder, found: Found) -> tuple[str, list[object]]:
    """The condition selecting the person's rows of ``holder`` (after the workspace id,
    the first parameter), and its other parameters."""
    ids = {
        "conversations": sorted(found.conversations),
        "leads": sorted(found.leads),
        "events": sorted(found.events),
        "all": sorted(found.conversations | found.leads | found.events),
    }
    parts: list[str] = []
    params: list[object] = []
    for column, which in holder.columns:
        parts.append(f"{column} IN (SELECT unnest(?::VARCHAR[]))")
        params.append(ids[which])
    return "workspace_id = ? AND (" + " OR ".join(parts) + ")", params


def present(con: duckdb.DuckDBPyConnection) -> set[str]:
    """The tables the warehouse has (one older than a table lacks it)."""
    rows = con.execute(
        "SELECT table_name FROM duckdb_tables() WHERE database_name = current_database() "
        "AND schema_name = current_schema()"
    ).fetchall()
    return {str(r[0]) for r in rows}
