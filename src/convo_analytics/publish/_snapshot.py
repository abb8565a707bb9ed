"""Published snapshots: what readers (the dashboard, `convo serve`) read while runs write.

DuckDB lets one process write a database file or many processes read it,
never both. So readers never open the warehouse itself: a run publishes a
byte copy of it (made right after a checkpoint, while the run holds the
warehouse, so the copy is consistent) under ``data/published/``, and then
swaps the ``CURRENT`` pointer to it with an atomic rename. A reader opens the
snapshot ``CURRENT`` names, read-only; a run never writes to a published
file, only adds new ones and removes those beyond the retention (a reader
that still has one open keeps reading it: removing a file on Linux leaves
open handles working).
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import duckdb
import orjson

from convo_analytics.errors import UserError

POINTER = "CURRENT"
PREFIX = "warehouse-"


@dataclass(frozen=True, slots=True)
class Snapshot:
    """A published copy of the warehouse."""

    path: Path
    snapshot_id: str
    published_at: str

    def connect(self) -> duckdb.DuckDBPyConnection:
        con = duckdb.connect(str(self.path), read_only=True)
        con.execute("SET TimeZone = 'UTC'")
        return con


def current_snapshot(published_dir: Path) -> Snapshot | None:
    """The snapshot readers should use now, or None when nothing was published yet."""
    pointer = published_dir / POINTER
    try:
        data = orjson.loads(pointer.read_bytes())
    except (FileNotFoundError, orjson.JSONDecodeError):
        return None
    path = published_dir / str(data.get("file", ""))
    if not path.is_file():
        return None
    return Snapshot(path, str(data["snapshotId"]), str(data["publishedAt"]))


def publish_snapshot(
    con: duckdb.DuckDBPyConnection,
    db_path: Path,
    published_dir: Path,
    keep: int = 3,
    prepare: Callable[[duckdb.DuckDBPyConnection], None] | None = None,
) -> Snapshot:
    """Copy the warehouse ``con`` has open (for writing) into a new snapshot and point at it.

    The caller holds the warehouse, so nothing else writes during the copy.
    ``prepare`` may change the copy (and only the copy) before readers see it.
    """
    if keep < 1:
        raise UserError("keep at least one published snapshot (--keep 1 or more)")
    con.execute("CHECKPOINT")
    published_dir.mkdir(parents=True, exist_ok=True)
    now = datetime.now(UTC)
    snapshot_id = now.strftime("%Y%m%dT%H%M%S%fZ")
    target = published_dir / f"{PREFIX}{snapshot_id}.duckdb"
    partial = target.with_name(target.name + ".partial")
    shutil.copyfile(db_path, partial)
    if prepare is not None:
        copy = duckdb.connect(str(partial))
        try:
            prepare(copy)
            copy.execute("CHECKPOINT")
        finally:
            copy.close()
    with partial.open("rb") as f:
        os.fsync(f.fileno())
    partial.replace(target)
    pointer = {
        "file": target.name,
        "snapshotId": snapshot_id,
        "publishedAt": now.isoformat(timespec="seconds").replace("+00:00", "Z"),
    }
    tmp = published_dir / (POINTER + ".partial")
    tmp.write_bytes(orjson.dumps(pointer))
    with tmp.open("rb") as f:
        os.fsync(f.fileno())
    tmp.replace(published_dir / POINTER)
    _prune(published_dir, keep, target)
    return Snapshot(target, snapshot_id, pointer["publishedAt"])


def _prune(published_dir: Path, keep: int, current: Path) -> None:
    """Remove snapshots beyond the newest ``keep`` (never the current one), and old partials."""
    snapshots = sorted(published_dir.glob(f"{PREFIX}*.duckdb"), reverse=True)
    for old in snapshots[keep:]:
        if old != current:
            old.unlink(missing_ok=True)
            old.with_name(old.name + ".wal").unlink(missing_ok=True)
    hour_ago = time.time() - 3600
    for partial in published_dir.glob("*.partial"):
        if partial.stat().st_mtime < hour_ago:
            partial.unlink(missing_ok=True)
