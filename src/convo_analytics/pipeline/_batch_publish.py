"""Publishing a batch of workspaces' shards into the lake in one publish (issue 31).

The nightly Dagster job runs ``orchestrator.batch_size`` workspaces per step and
publishes the ones whose night succeeded together: one ``publish_lake``, so one
commit per changed lake table (and one of the lake's record) for the whole batch,
where a publish per workspace made as many commits as workspaces (decision
D-SCALE-BATCH). ``publish_lake`` reads one DuckDB connection, so the batch's shards
are put behind one: an in-memory DuckDB with each shard ATTACHed ``READ_ONLY`` and
each of their tables a view in its main schema, ``UNION ALL BY NAME`` over the
shards that have it (DuckDB reads the shards' files, nothing is copied). Two lake
tables are not plain rows of a warehouse table: ``mart_slices`` (the slices each
workspace's marts use) and ``transform_runs`` (the newest transform of the
warehouse), both computed per shard as the lake computes them for one warehouse,
into a small table that carries the workspace. Views declare no primary key, so
each table's key is read from a shard and handed over (``LakeTable.key``).

A workspace whose shard cannot be read is left out and the others published; a
batch publish that fails is done again workspace by workspace, so one workspace's
fault never costs the others their publish: the result names who failed, for the
step to fail naming only them. A batch of one is published as before: its shard
opened as the connection.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import duckdb

from convo_analytics.config import Settings
from convo_analytics.pipeline._shards import shard_path
from convo_analytics.warehouse import sql_literal

__all__ = ["ShardsPublish", "publish_shards"]

log = logging.getLogger(__name__)


@dataclass
class ShardsPublish:
    """What publishing a batch did: the workspaces published, the ones that failed (with
    what they raised), and the publishes' figures added up."""

    published: list[str] = field(default_factory=list)
    failed: dict[str, Exception] = field(default_factory=dict)
    #: rows, tables_committed, partitions, seconds, commit_attempts (summed over the
    #: publishes: one, unless the batch's failed and its workspaces were published alone),
    #: publishes (how many ``publish_lake`` calls it took).
    counts: dict[str, Any] = field(default_factory=dict)

    def add(self, result: Any) -> None:
        """Add one ``LakePublishResult``'s figures to the counts."""
        figures = {
            "rows": result.rows,
            "tables_committed": sum(1 for t in result.tables if t.attempts),
            "partitions": sum(t.partitions for t in result.tables),
            "seconds": round(result.seconds, 3),
            "commit_attempts": sum(t.attempts for t in result.tables),
            "publishes": 1,
        }
        for key, value in figures.items():
            self.counts[key] = round(self.counts.get(key, 0) + value, 3)


def publish_shards(settings: Settings, names: Sequence[str]) -> ShardsPublish:
    """Publish the shards of workspaces ``names`` into the lake, in one publish when they
    can all be read, else the readable ones; a failed batch publish is done again one
    workspace at a time. Never raises for a workspace's fault: see ``failed``."""
    from convo_analytics.lake import LakeConfig

    config = LakeConfig.from_settings(settings)
    out = ShardsPublish()
    if len(names) == 1:
        _publish_alone(settings, config, names[0], out)
        return out
    con = duckdb.connect()
    try:
        con.execute("SET TimeZone = 'UTC'")
        attached = _attach(con, settings, names, out)
        if len(attached) == 1:
            con.close()
            _publish_alone(settings, config, next(iter(attached)), out)
            return out
        if not attached:
            return out
        try:
            from convo_analytics.lake import publish_lake

            tables = _batch_tables(con, attached)
            ids = [i for found in attached.values() for i in found[1]]
            out.add(publish_lake(con, config, ids, tables=tables))
            out.published.extend(attached)
            return out
        except Exception as exc:
            log.warning("lake: the batch publish of %s failed (%s); publishing them one "
                        "by one", ", ".join(attached), _one_line(exc))  # fmt: skip
    finally:
        con.close()
    for name in attached:
        _publish_alone(settings, config, name, out)
    return out


def _publish_alone(settings: Settings, config: Any, name: str, out: ShardsPublish) -> None:
    """The workspace's shard as the connection, as a publish of one workspace always was."""
    from convo_analytics.lake import publish_lake
    from convo_analytics.warehouse import open_warehouse

    try:
        con = open_warehouse(shard_path(settings, name), read_only=True)
        try:
            out.add(publish_lake(con, config, [name]))
        finally:
            con.close()
    except Exception as exc:
        log.error("lake: workspace %s not published: %s", name, _one_line(exc))
        out.failed[name] = exc
    else:
        out.published.append(name)


def _attach(
    con: duckdb.DuckDBPyConnection, settings: Settings, names: Sequence[str], out: ShardsPublish
) -> dict[str, tuple[str, list[str]]]:
    """ATTACH each workspace's shard READ_ONLY (as ``shard_N``): for each one attached, its
    alias and workspace ids; one that cannot be (no shard, unreadable, not holding the
    workspace) goes to ``out.failed``."""
    from convo_analytics.lake import resolve_workspaces
    from convo_analytics.warehouse import require_existing

    attached: dict[str, tuple[str, list[str]]] = {}
    for number, name in enumerate(names):
        alias = f"shard_{number}"
        path = shard_path(settings, name)
        try:
            require_existing(path)
            con.execute(f"ATTACH {sql_literal(str(path))} AS {alias} (READ_ONLY)")
            cur = con.cursor()
            try:
                cur.execute(f"USE {alias}")
                ids = resolve_workspaces(cur, [name])
            finally:
                cur.close()
        except Exception as exc:
            log.error("lake: workspace %s left out of its batch: %s", name, _one_line(exc))
            out.failed[name] = exc
            con.execute(f"DETACH DATABASE IF EXISTS {alias}")
            continue
        attached[name] = (alias, ids)
    return attached


def _batch_tables(
    con: duckdb.DuckDBPyConnection, attached: dict[str, tuple[str, list[str]]]
) -> list[Any]:
    """Make ``con``'s main schema look like one warehouse holding every attached shard,
    and return the lake tables to publish from it (each with its key given)."""
    from convo_analytics.lake import LAKE_TABLES, lake_key

    holders: dict[str, list[tuple[str, list[str]]]] = {}
    for alias, ids in attached.values():
        rows = con.execute(
            "SELECT table_name FROM duckdb_tables() WHERE database_name = ? "
            "AND schema_name = 'main' ORDER BY table_name",
            [alias],
        ).fetchall()
        for (table,) in rows:
            holders.setdefault(table, []).append((alias, ids))
    derived = {spec.name for spec in LAKE_TABLES if spec.select != "rows"}
    for table, shards in holders.items():
        if table not in derived:
            body = " UNION ALL BY NAME ".join(
                f'SELECT * FROM {alias}.main."{table}"' for alias, _ in shards
            )
            con.execute(f'CREATE VIEW memory.main."{table}" AS {body}')
    tables = []
    for spec in LAKE_TABLES:
        where = holders.get(spec.name, [])
        if not where:
            tables.append(spec)  # no shard has it: publish_lake skips it
        elif spec.name in derived:
            _derive(con, spec, where)
            tables.append(dataclasses.replace(spec, select="rows", key=()))
        else:
            cur = con.cursor()
            try:
                cur.execute(f"USE {where[0][0]}")
                key = lake_key(cur, spec)
            finally:
                cur.close()
            tables.append(dataclasses.replace(spec, key=key))
    return tables


def _derive(con: duckdb.DuckDBPyConnection, spec: Any, where: list[tuple[str, list[str]]]) -> None:
    """Table ``spec.name`` in memory: each shard's rows of it as the lake computes them for
    a warehouse (``spec.query``, run with the shard as the current database), which carry
    the workspace; so the batch publishes it as plain rows."""
    for number, (alias, ids) in enumerate(where):
        wanted = ", ".join(sql_literal(i) for i in ids)
        sql = spec.query(f"SELECT unnest([{wanted}]::VARCHAR[]) AS workspace_id")
        cur = con.cursor()
        try:
            cur.execute(f"USE {alias}")
            if number == 0:
                cur.execute(f'CREATE TABLE memory.main."{spec.name}" AS SELECT * FROM ({sql})')
            else:
                cur.execute(f'INSERT INTO memory.main."{spec.name}" BY NAME SELECT * FROM ({sql})')
        finally:
            cur.close()


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}"[:500]
