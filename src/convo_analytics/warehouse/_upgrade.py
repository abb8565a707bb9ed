"""Upgrading an older warehouse's typed tables from the raw payloads it holds."""

from __future__ import annotations

import duckdb

from convo_analytics.warehouse._load import _replace_children
from convo_analytics.warehouse._shape import DEFAULT_SHAPE
from convo_analytics.warehouse._sql import _ident, _quoted_structure
from convo_analytics.warehouse._tables import EVENT_KEYS, event_workspace
from convo_analytics.warehouse._transaction import transaction


def backfill_detail_children(con: duckdb.DuckDBPyConnection) -> None:
    """Fill the detail escalation and guardrail tables from the details already stored.

    A warehouse made before those tables existed holds the details raw; without
    this, the escalations and incidents of conversations that do not change
    again would come from nowhere (events older than a detail are left to it).
    """
    structure = DEFAULT_SHAPE.detail_structure
    con.execute(
        f"""CREATE OR REPLACE TEMP TABLE upgrade_details AS
            SELECT *, row_number() OVER () AS rn FROM (
                SELECT r.workspace_id, r.id,
                       json_transform(r.payload, '{_quoted_structure(structure)}') AS _p
                FROM raw_conversation_details r JOIN conversations c
                  ON c.workspace_id = r.workspace_id AND c.id = r.id
                 AND c.detail_updated_at = r.updated_at
                QUALIFY row_number() OVER (PARTITION BY r.workspace_id, r.id
                                           ORDER BY r.fetched_at DESC) = 1)"""
    )
    workspaces = [w for (w,) in con.execute(
        "SELECT DISTINCT workspace_id FROM upgrade_details").fetchall()]  # fmt: skip
    children = DEFAULT_SHAPE.children[1:]  # the transcripts were stored all along
    keys = {child: key for key, child in DEFAULT_SHAPE.detail_lists.items()}
    for _, child in children:  # flat, as stage_records stages them
        con.execute(
            f"""CREATE OR REPLACE TEMP TABLE upgrade_details_{child} AS
                SELECT rn AS drow, unnest(range(len(m)))::INTEGER AS position, unnest(m) AS _s
                FROM (SELECT rn, COALESCE(_p.{_ident(keys[child])}, []) AS m
                      FROM upgrade_details)"""
        )
    with transaction(con):
        for workspace in workspaces:
            con.execute(
                "CREATE OR REPLACE TEMP TABLE applied_details AS SELECT id, rn AS drow, "
                "false AS held FROM upgrade_details WHERE workspace_id = ?",
                [workspace],
            )
            for table, child in children:
                _replace_children(con, "upgrade_details", "upgrade", table, child, False, workspace)
    for _, child in children:
        con.execute(f"DROP TABLE upgrade_details_{child}")
    con.execute("DROP TABLE upgrade_details")
    con.execute("DROP TABLE IF EXISTS applied_details")


def backfill_canonical_keys(con: duckdb.DuckDBPyConnection) -> None:
    """Add each stored event's canonical content hash to ``event_keys`` (schema 4).

    Before schema 4 an event was known by the hash of its signed bytes; it is now known
    by that of its canonical form, so that a replay serialised another way is
    recognised. Without this, a file read again after the upgrade would load its events
    a second time (its lines' new keys unknown).
    """
    import orjson
    import pyarrow as pa

    from convo_analytics.webhooks._body import content_hash

    reader = con.cursor()
    batches = reader.sql(
        f"SELECT event_id, payload, {event_workspace()} FROM events"
    ).to_arrow_reader(50_000)
    with transaction(con):
        for batch in batches or ():
            ids = batch.column(0).to_pylist()
            keys = [content_hash(orjson.loads(text)) for text in batch.column(1).to_pylist()]
            workspaces = batch.column(2).to_pylist()
            con.register(
                "upgrade_keys",
                pa.table({"workspace_id": workspaces, "key": keys, "event_id": ids}),
            )
            con.execute(
                """INSERT INTO event_keys
                   SELECT workspace_id, key, any_value(event_id) FROM upgrade_keys
                   ANTI JOIN event_keys USING (workspace_id, key) GROUP BY ALL"""
            )
            con.unregister("upgrade_keys")
    reader.close()


def refill_event_tables(con: duckdb.DuckDBPyConnection) -> None:
    """Fill the per-kind event tables again from the stored events (schema 6).

    Before schema 6 a subject was its id alone: of two workspaces' events of one id only
    the first arrival's row was made (and an escalation or conversation lifecycle merged
    both workspaces' events). The events themselves were all stored, so the rows are
    made again from them, in their order of arrival (run, file, line): the first-arrival
    tables keep their rows and gain the subjects they missed; the merged ones are made
    anew. One transaction: killed half-way, the upgrade runs again on the next open.
    """
    from convo_analytics.warehouse._events import fan_out, stage_stored_events

    with transaction(con):
        for table in ("escalations", "conversation_lifecycle"):
            con.execute(f"DELETE FROM {table}")
        stage_stored_events(con)
        fan_out(con)
        for table in ("ev_chunk", "ev_chunk_dups"):
            con.execute(f"DROP TABLE {table}")


def rekey_event_keys(con: duckdb.DuckDBPyConnection, *, compression: bool) -> None:
    """Key ``event_keys`` by workspace (schema 7), each key under its event's workspace.

    Before schema 7 a key was known across workspaces, so one workspace's key could make
    another's event a duplicate. Each stored key belongs to the event it names; a key whose
    event is in several workspaces (one id, two workspaces) is kept under each. Runs before
    ``upgrade_tables`` (which cannot fill a column from another table); one transaction.
    """
    columns = [
        name
        for (name,) in con.execute(
            "SELECT column_name FROM information_schema.columns "
            "WHERE table_schema = current_schema() AND table_name = 'event_keys'"
        ).fetchall()
    ]
    if not columns or "workspace_id" in columns:
        return
    with transaction(con):
        con.execute("ALTER TABLE event_keys RENAME TO event_keys__before_upgrade")
        con.execute(EVENT_KEYS.ddl(compression=compression))
        con.execute(
            f"""INSERT INTO event_keys
                SELECT DISTINCT COALESCE(e.workspace_id, 'default'), k.key, k.event_id
                FROM event_keys__before_upgrade k
                LEFT JOIN (SELECT DISTINCT event_id, {event_workspace()} AS workspace_id
                           FROM events) e USING (event_id)"""
        )
        con.execute("DROP TABLE event_keys__before_upgrade")
