"""What the run's retention step keeps of what it removed (issue 30, D-RETENTION).

* ``removed_texts``: the conversations whose message text retention removed, with what
  the transform still needs of that text to compute the same marts: the assistant
  answers that matched the fallback patterns (knowledge gaps) when their text went. A
  row holds for the transcript it was made of (``messages_run_id``): a newer detail
  replaces the messages, with their text, and the row no longer applies.
* ``retention_log``: what each run removed, per workspace and store, written with the
  removal (the warehouse's in its transaction; an archive's files before they are
  unlinked), until a manifest lists it: a run killed before its manifest leaves its
  rows for the next run's manifest.
"""

from __future__ import annotations

from convo_analytics.warehouse._tables import Column, Table, workspace_column

__all__ = ["REMOVED_TEXTS", "RETENTION_LOG", "RETENTION_TABLES", "texts_removed_sql"]

_TS = "TIMESTAMPTZ"

REMOVED_TEXTS = Table(
    "removed_texts",
    (
        workspace_column("'default'"),
        Column("conversation_id", "VARCHAR NOT NULL", doc="the conversation"),
        Column("removed_at", _TS, doc="when its text was removed"),
        Column("run_id", "VARCHAR", doc="the run whose retention step removed it"),
        Column("last_activity", _TS, doc="its last activity then (update, end or webhook event)"),
        Column(
            "messages_run_id",
            "VARCHAR",
            doc="messages.run_id of the transcript whose text went: the row applies while "
            "the messages are that transcript's",
        ),
        Column(
            "fallback_answers",
            "VARCHAR[]",
            doc="ids of its assistant answers that matched the fallback patterns when their "
            "text went (they stay knowledge gaps of reason fallback_pattern)",
        ),
    ),
    ("workspace_id", "conversation_id"),
    "Conversations whose message text retention removed, and what the marts still need of it.",
)

RETENTION_LOG = Table(
    "retention_log",
    (
        Column("run_id", "VARCHAR NOT NULL", doc="the run that removed it"),
        Column(
            "workspace",
            "VARCHAR NOT NULL",
            doc="the workspace's name ('' for the flat endpoint's archive files)",
        ),
        Column("store", "VARCHAR NOT NULL", doc="warehouse or archive"),
        Column("workspace_id", "VARCHAR", doc="its id in the warehouse, when known"),
        Column(
            "removed",
            "JSON",
            doc="warehouse: counts per table and what; archive: the files (name, bytes)",
        ),
        Column("logged_at", _TS, doc="when"),
        Column("manifest", "VARCHAR", doc="the manifest that lists it (NULL: none yet)"),
    ),
    ("run_id", "workspace", "store"),
    "What each retention removed, per workspace and store, until a manifest lists it.",
)

RETENTION_TABLES = (REMOVED_TEXTS, RETENTION_LOG)


def texts_removed_sql() -> str:
    """The conversations (``workspace_id, conversation_id, fallback_answers``) whose current
    transcript's text retention removed: their ``removed_texts`` row names the run that
    loaded the messages they hold now."""
    return (
        "SELECT r.workspace_id, r.conversation_id, r.fallback_answers "
        f"FROM {REMOVED_TEXTS.name} r SEMI JOIN messages m "
        "ON m.workspace_id = r.workspace_id AND m.conversation_id = r.conversation_id "
        "AND m.run_id = r.messages_run_id"
    )
