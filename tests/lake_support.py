"""Warehouses of several workspaces for the lake's tests, and comparing the lake with them.

Conversations are made by the incremental tests' ``World`` and loaded the way
`convo extract` loads them (list pages and details through ``warehouse._load``,
one transaction per batch, each workspace's records under its own id), then the
real transform builds the marts.
"""

from __future__ import annotations

import io
import logging
import os
import random
import subprocess
import sys
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import duckdb
import orjson
import pytest

from convo_analytics.lake import LAKE_TABLES, LakeConfig, read_lake
from convo_analytics.transform import TransformConfig, run_transform
from convo_analytics.warehouse import WHOLE_BODY, RecordPaths, open_warehouse, transaction
from convo_analytics.warehouse import _load as load
from convo_analytics.warehouse._marts import DAILY_MARTS
from incremental_support import Conversation, World

TRANSFORM = TransformConfig(timezones=("UTC", "Asia/Kolkata"), reconcile=False)


def lake_config(folder: Path, catalog_uri: str | None = None) -> LakeConfig:
    """A lake in ``folder`` (files) with a SQLite catalog there, or the given catalog."""
    return LakeConfig(
        catalog_uri or f"sqlite:///{folder / 'catalog.db'}", f"file://{folder / 'files'}"
    )


def load_workspace(
    con: duckdb.DuckDBPyConnection, conversations: list[Conversation], workspace: str, run_id: str
) -> None:
    """One batch of a workspace's conversations stream: list page and details, one
    transaction (as `convo extract --workspace` loads it)."""
    now = datetime.now(UTC)
    page = {"data": [c.listed() for c in conversations]}
    try:
        with transaction(con):
            paths = RecordPaths("data", "id", "updatedAt")
            load.stage_records(con, "listed", [orjson.dumps(page)], paths, workspace=workspace)
            load.insert_raw(con, "raw_conversations", "listed", run_id, now)
            bodies = [orjson.dumps(c.detail()) for c in conversations]
            whole = RecordPaths(WHOLE_BODY, "id", "updatedAt")
            load.stage_details(con, "detailed", bodies, whole, workspace=workspace)
            load.insert_raw(con, "raw_conversation_details", "detailed", run_id, now)
            load.merge_conversations(con, "listed", "detailed", run_id, now, workspace=workspace)
    finally:
        load.unstage(con, "listed", "detailed")


class WorkspaceWorld(World):
    """A World whose conversations are all one workspace's, their ids (and their messages')
    carrying the workspace, as a service's ids unique across workspaces would."""

    def __init__(self, workspace: str) -> None:
        super().__init__()
        self.workspace = workspace
        self.prefix = f"{workspace}_"
        self.made = 0

    def in_workspace(self, workspace: str) -> list[Conversation]:
        # every conversation, whatever workspace a draw named: each draw's id is a new one
        return list(self.conversations.values())

    def new_conversations(self, rng: random.Random) -> list[Conversation]:
        made = super().new_conversations(rng)
        for c in made:
            del self.conversations[c.key]
            old, c.id = c.id, f"{self.prefix}c{self.made:03d}"
            self.made += 1
            c.workspace = self.workspace
            for message in c.messages:
                message["id"] = message["id"].replace(old, c.id, 1)
            self.conversations[c.key] = c
        return made


class Warehouse:
    """A warehouse file of several workspaces, each its own World, grown a batch at a time."""

    def __init__(self, path: Path, workspaces: Sequence[str], seed: int = 1) -> None:
        self.path = path
        self.worlds = {ws: WorkspaceWorld(ws) for ws in workspaces}
        self.seed = seed
        self.batches = 0

    def grow(self, workspaces: Sequence[str] | None = None, batches: int = 1) -> None:
        """New conversations (and changes to old ones) in ``workspaces``, then a transform."""
        con = open_warehouse(self.path)
        try:
            for ws in workspaces or list(self.worlds):
                world = self.worlds[ws]
                for _ in range(batches):
                    self.batches += 1
                    rng = random.Random(self.seed * 1000 + self.batches)
                    made = world.new_conversations(rng)
                    if self.batches > len(self.worlds):
                        made += world.change(rng)
                    load_workspace(con, made, ws, f"{ws}-{world.run_id()}")
            assert run_transform(con, TRANSFORM).status == "ok"
        finally:
            con.close()


def table_rows(
    con: duckdb.DuckDBPyConnection, table: str, workspaces: Sequence[str]
) -> list[tuple]:
    """A lake table's rows of the workspaces as the warehouse-shaped table holds them, sorted."""
    marks = ", ".join("?" * len(workspaces))
    if table == "mart_slices":  # the slices the workspaces' daily marts use
        used = " UNION ".join(
            f"SELECT slice_key FROM {t.name} WHERE workspace_id IN ({marks})"
            for t in DAILY_MARTS.values()
        )
        return con.execute(
            f"SELECT * FROM {table} WHERE slice_key IN ({used}) ORDER BY ALL",
            list(workspaces) * len(DAILY_MARTS),
        ).fetchall()
    if table == "transform_runs":
        return con.execute(
            "SELECT timezones, low_confidence_threshold, definition_version FROM transform_runs "
            "WHERE status = 'ok' ORDER BY finished_at DESC LIMIT 1"
        ).fetchall()
    return con.execute(
        f"SELECT * FROM {table} WHERE workspace_id IN ({marks}) ORDER BY ALL", list(workspaces)
    ).fetchall()


def warehouse_rows(path: Path, workspaces: Sequence[str]) -> dict[str, list[tuple]]:
    con = duckdb.connect(str(path), read_only=True)
    try:
        return {t.name: table_rows(con, t.name, workspaces) for t in LAKE_TABLES}
    finally:
        con.close()


def lake_rows(config: LakeConfig, workspaces: Sequence[str]) -> dict[str, list[tuple]]:
    con = read_lake(config)
    try:
        return {t.name: table_rows(con, t.name, workspaces) for t in LAKE_TABLES}
    finally:
        con.close()


def current_lake_rows(config: LakeConfig, workspaces: Sequence[str]) -> dict[str, list[tuple]]:
    """Like :func:`lake_rows`, but every table read at its current snapshot: what an engine
    that does not pin reads."""
    from convo_analytics.lake._publish import plain_schema
    from convo_analytics.lake._read import _load
    from convo_analytics.warehouse import ensure_schema

    con = duckdb.connect()
    try:
        con.execute("SET TimeZone = 'UTC'")
        ensure_schema(con)
        catalog = config.open_catalog()
        held = {name for _, name in catalog.list_tables(config.namespace)}
        for spec in (t for t in LAKE_TABLES if t.name in held):
            data = catalog.load_table((config.namespace, spec.name)).scan().to_arrow()
            _load(con, spec, data.cast(plain_schema(data.schema)))
        return {t.name: table_rows(con, t.name, workspaces) for t in LAKE_TABLES}
    finally:
        con.close()


def current_rows(config: LakeConfig, table: str, workspaces: Sequence[str]) -> list[dict]:
    """The table's rows of the workspaces in its current Iceberg snapshot, as an engine that
    does not pin sees them (readers of ours read the pinned snapshots instead)."""
    from pyiceberg.expressions import In

    loaded = config.open_catalog().load_table((config.namespace, table))
    scan = loaded.scan(row_filter=In(term="workspace_id", literals=list(workspaces)))
    return scan.to_arrow().to_pylist()


def assert_lake_equals(
    config: LakeConfig, warehouse: Path, workspaces: Sequence[str], read: Any = lake_rows
) -> None:
    """Every lake table holds exactly the warehouse's rows of the workspaces, as readers see
    it (``read``: or as :func:`current_lake_rows` does)."""
    ours, theirs = read(config, workspaces), warehouse_rows(warehouse, workspaces)
    for name, expected in theirs.items():
        assert ours[name] == expected, (
            f"{name}: lake {len(ours[name])} rows, warehouse {len(expected)}"
        )
    assert theirs["mart_conversations"], "the comparison saw no rows"


def convo_here(cwd: Path, env: Mapping[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    """`convo ARGS` run in this process as ``python -m convo_analytics.cli ARGS`` runs in
    ``cwd`` with the environment ``env`` (its settings and HOME; the CONVO_* variables of
    this process dropped): the exit status and both outputs. A process start costs seconds
    of imports; the command's code is the same.

    What such a process would print beside the command's own output is on stderr too: log
    records of WARNING and above (a reader's or publish's command sets up no logging, so
    Python's last-resort handler prints them) and the warnings Python's default filters show.
    No catalog is reused from an earlier call (a process opens its own).
    """
    from convo_analytics.cli import main
    from convo_analytics.publish import _lake_copy

    out, err = io.BytesIO(), io.StringIO()
    stdout = io.TextIOWrapper(out, encoding="utf-8")
    last_resort = logging.StreamHandler(err)  # its format is the message alone, as Python's
    last_resort.setLevel(logging.WARNING)
    root = logging.getLogger()
    with pytest.MonkeyPatch.context() as patch, warnings.catch_warnings(record=True) as shown:
        warnings.resetwarnings()
        warnings.simplefilter("default")  # once per place, as a process shows them...
        for hidden in (DeprecationWarning, PendingDeprecationWarning, ImportWarning,
                       ResourceWarning):  # fmt: skip
            warnings.simplefilter("ignore", hidden)  # ...but for those it hides by default
        for name in [k for k in os.environ if k.startswith("CONVO_")]:
            patch.delenv(name)
        for name, value in env.items():
            if name != "PATH":
                patch.setenv(name, value)
        patch.chdir(cwd)
        patch.setattr(_lake_copy, "_catalogs", {})
        patch.setattr(sys, "stdout", stdout)
        patch.setattr(sys, "stderr", err)
        root.addHandler(last_resort)
        try:
            code = main(list(args))
        finally:
            root.removeHandler(last_resort)
            stdout.flush()
        for w in shown:
            err.write(warnings.formatwarning(w.message, w.category, w.filename, w.lineno, w.line))
    return subprocess.CompletedProcess(["convo", *args], code, out.getvalue().decode(),
                                       err.getvalue())  # fmt: skip


def warehouse_sql(db: Path, sql: str, params: list[Any] | None = None) -> list[tuple[Any, ...]]:
    """Run ``sql`` on the warehouse file (read-write, UTC) and fetch its rows."""
    con = duckdb.connect(str(db))
    try:
        con.execute("SET TimeZone = 'UTC'")
        return con.execute(sql, params or []).fetchall()
    finally:
        con.close()


@contextmanager
def by_day_layout(cut: Callable[[str], bool] = lambda name: True) -> Iterator[None]:
    """While in the block, lake tables (those ``cut`` names) are made as the previous
    release made them: partitioned by workspace and ``day(...)``, and never moved to
    months (D-LAKE-MONTHS); for the migration test and the bench's anchor."""
    from convo_analytics.lake import _commit

    made, evolve = _commit.ensure_table, _commit._by_month

    def by_day(catalog: Any, identifier: Any, day_column: Any, schema: Any, *key: Any) -> Any:
        from pyiceberg.catalog import Catalog as _Catalog
        from pyiceberg.partitioning import PartitionField, PartitionSpec
        from pyiceberg.schema import assign_fresh_schema_ids
        from pyiceberg.transforms import DayTransform, IdentityTransform

        if day_column is None or not cut(identifier[1]):
            return made(catalog, identifier, day_column, schema, *key)
        iceberg = assign_fresh_schema_ids(_Catalog._convert_schema_if_needed(schema))
        spec = PartitionSpec(
            PartitionField(iceberg.find_field("workspace_id").field_id, 1000,
                           IdentityTransform(), "workspace_id"),
            PartitionField(iceberg.find_field(day_column).field_id, 1001, DayTransform(),
                           f"{day_column}_day"),
        )  # fmt: skip
        return catalog.create_table_if_not_exists(
            identifier, schema=iceberg, partition_spec=spec, properties=_commit.TABLE_PROPERTIES
        )

    _commit.ensure_table = by_day  # type: ignore[assignment]
    _commit._by_month = lambda txn, column: None  # type: ignore[assignment]
    try:
        yield
    finally:
        _commit.ensure_table = made  # type: ignore[assignment]
        _commit._by_month = evolve  # type: ignore[assignment]
