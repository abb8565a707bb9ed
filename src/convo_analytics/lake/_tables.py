"""What the lake holds, described as data: each table, the warehouse table it copies, and
the column its months are cut by.

Every lake table is partitioned by ``identity(workspace_id)`` and, where the
table has a time, ``month(<its time column>)`` (decisions D-LAKE-PARTITIONS,
D-LAKE-MONTHS), so a worker replaces exactly its workspaces' partitions and a
reader of one workspace or a range of months opens only those files. The columns are the
warehouse table's, with the same names, types and meanings; two bookkeeping
tables add ``workspace_id`` in front because their warehouse rows belong to no
workspace (``mart_slices``, ``transform_runs``: see docs/warehouse.md, "The
lake").

Not published (decision D-LAKE-CONTENT): the raw payloads and the webhook
``events`` (the typed tables carry their facts), the load and ingest logs,
bookmarks and quarantine (one worker's operations, not shared facts), and the
transform's own bookkeeping (footprints, watermarks, state).
"""

from __future__ import annotations

from dataclasses import dataclass

import duckdb

from convo_analytics.warehouse._marts import DAILY_MARTS

__all__ = ["LAKE_TABLES", "LakeTable", "lake_key", "lake_table"]


@dataclass(frozen=True, slots=True)
class LakeTable:
    """One lake table: its name (the warehouse's), the column days are cut by, and how its
    rows are selected from a warehouse for a set of workspaces."""

    name: str
    #: A TIMESTAMPTZ or DATE column (partitioned by its month), or None (by workspace only).
    day_column: str | None
    #: 'rows': the table's rows of the workspaces; 'used_slices': the slices each workspace's
    #: daily marts use, once per workspace (mart_slices); 'latest_transform': the newest ok
    #: transform run, once per workspace (transform_runs).
    select: str = "rows"
    #: Read back, one row per value of this column (the warehouse table's key, which
    #: workers publishing on their own may each have used): the newest ``updated_at``'s.
    unique_by: str | None = None
    #: The key, given: for a source that cannot declare one (views over several shards,
    #: the batched publish of convo_analytics.pipeline._batch_publish). None: read from the
    #: warehouse table's primary key (:func:`lake_key`).
    key: tuple[str, ...] | None = None

    def query(self, workspaces_sql: str) -> str:
        """SELECT of this table's rows for the workspaces in ``workspaces_sql`` (a relation
        with one column, ``workspace_id``)."""
        if self.select == "used_slices":
            used = " UNION ".join(
                f"SELECT workspace_id, slice_key FROM {t.name}" for t in DAILY_MARTS.values()
            )
            return (
                f"SELECT u.workspace_id, t.* FROM {self.name} t JOIN ({used}) u USING (slice_key) "
                f"WHERE u.workspace_id IN (SELECT workspace_id FROM ({workspaces_sql}))"
            )
        if self.select == "latest_transform":
            return (
                "SELECT w.workspace_id, t.* REPLACE (CAST(t.mart_rows AS VARCHAR) AS mart_rows, "
                "CAST(t.reconciliation AS VARCHAR) AS reconciliation, "
                "CAST(t.partitions AS VARCHAR) AS partitions) "
                "FROM (SELECT * FROM transform_runs WHERE status = 'ok' "
                "ORDER BY finished_at DESC LIMIT 1) t "
                f"CROSS JOIN ({workspaces_sql}) w"
            )
        return (
            f"SELECT * FROM {self.name} WHERE workspace_id IN "
            f"(SELECT workspace_id FROM ({workspaces_sql}))"
        )


LAKE_TABLES: tuple[LakeTable, ...] = (
    # typed tables: what extract loaded (the API's view)
    LakeTable("conversations", "created_at"),
    LakeTable("messages", "created_at"),
    LakeTable("conversation_escalations", "created_at"),
    LakeTable("conversation_guardrail_events", "triggered_at"),
    LakeTable("leads", "created_at"),
    LakeTable("service_summaries", "date"),
    # typed tables: what the webhook ingest loaded (the events' view)
    LakeTable("message_traces", "responded_at"),
    LakeTable("guardrail_events", "triggered_at"),
    LakeTable("feedback", "given_at"),
    LakeTable("lead_qualifications", "qualified_at"),
    LakeTable("conversation_lifecycle", "started_at"),
    LakeTable("escalations", "escalated_at"),
    # the name each workspace is known by where it was read (names for readers and exports)
    LakeTable("workspaces", None, unique_by="name"),
    # marts
    LakeTable("mart_conversations", "started_at"),
    LakeTable("mart_escalations", "escalated_at"),
    LakeTable("mart_guardrail_incidents", "triggered_at"),
    LakeTable("mart_daily_conversations", "date"),
    LakeTable("mart_daily_messages", "date"),
    LakeTable("mart_daily_latency", "date"),
    LakeTable("mart_daily_guardrails", "date"),
    LakeTable("mart_daily_escalations", "date"),
    LakeTable("mart_daily_durations", "date"),
    LakeTable("mart_daily_percentiles", "date"),
    LakeTable("mart_slices", None, "used_slices"),
    # topics (issue 27): each workspace's topics as analysts see them, and each
    # conversation's topic (the discovery's own centroids stay in the warehouse)
    LakeTable("mart_topics", None),
    LakeTable("conversation_topics", None),
    # knowledge gaps (issue 27): the failing answers the report groups by topic
    LakeTable("knowledge_gaps", "answered_at"),
    LakeTable("transform_runs", None, "latest_transform"),
)
_BY_NAME = {t.name: t for t in LAKE_TABLES}


def lake_table(name: str) -> LakeTable:
    """The lake table called ``name``; KeyError naming the known ones otherwise."""
    try:
        return _BY_NAME[name]
    except KeyError:
        raise KeyError(f"{name!r} is not a lake table; one of {', '.join(_BY_NAME)}") from None


def lake_key(con: duckdb.DuckDBPyConnection, spec: LakeTable) -> tuple[str, ...]:
    """The lake table's key, declared as its Iceberg identifier fields: the warehouse
    table's primary key where it has one holding ``workspace_id`` (the lake holds many
    workspaces' rows: a key without the workspace is no key there); empty otherwise
    (``workspace_id`` is required all the same: D-LAKE-KEYS). A key the spec gives
    (``LakeTable.key``) wins: a view has no constraints to read it from."""
    if spec.key is not None:
        return spec.key
    if spec.select != "rows" or spec.unique_by is not None:
        return ()
    rows = con.execute(
        "SELECT constraint_column_names FROM duckdb_constraints() WHERE table_name = ? "
        "AND constraint_type = 'PRIMARY KEY' AND database_name = current_database() "
        "AND schema_name = current_schema()",
        [spec.name],
    ).fetchall()
    if not rows or "workspace_id" not in rows[0][0]:
        return ()
    return tuple(str(c) for c in rows[0][0])
