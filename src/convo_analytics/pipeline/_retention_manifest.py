"""The retention manifest: one JSON file per run listing, per workspace and store, what
the run removed (D-RETENTION).

What a run removes is first written to ``retention_log`` (with the removal itself, or
before an archive file is unlinked); the manifest lists this run's removals (every
workspace, those with nothing removed too, so that a run that removed nothing says so)
and the ones an interrupted run logged but never listed. It is written whole (a
temporary file, synced, renamed), then joined to the audit trail by its SHA-256, then
its rows are marked listed: every removal is in at least one manifest, in two only when
a run is killed between writing its manifest and marking its rows.
"""

from __future__ import annotations

import hashlib
import os
from datetime import datetime
from pathlib import Path
from typing import Any

import duckdb
import orjson

__all__ = ["log_removal", "mark_listed", "unlisted", "write_manifest"]


def log_removal(
    con: duckdb.DuckDBPyConnection,
    run_id: str,
    workspace: str,
    store: str,
    workspace_id: str | None,
    removed: dict[str, Any],
) -> None:
    """Record what ``run_id`` removed from ``store`` of ``workspace`` (in the caller's
    transaction, the removal's own for the warehouse)."""
    con.execute(
        "INSERT OR REPLACE INTO retention_log VALUES (?, ?, ?, ?, ?, now(), NULL)",
        [run_id, workspace, store, workspace_id, orjson.dumps(removed).decode()],
    )


def unlisted(
    con: duckdb.DuckDBPyConnection, run_id: str, archive_dir: Path
) -> list[dict[str, Any]]:
    """What runs other than ``run_id`` removed and no manifest lists (a run killed before
    its manifest): an archive's files only where they are gone (a kill before the unlink
    left the others, which this run judges again)."""
    rows = con.execute(
        "SELECT run_id, workspace, store, workspace_id, removed, logged_at FROM retention_log "
        "WHERE manifest IS NULL AND run_id <> ? ORDER BY logged_at, run_id, workspace, store",
        [run_id],
    ).fetchall()
    out = []
    for run, workspace, store, workspace_id, removed, logged_at in rows:
        what = orjson.loads(removed) if removed else {}
        if store == "archive":
            files = [f for f in what.get("files", []) if not (archive_dir / f["name"]).exists()]
            if not files:
                continue
            what = {**what, "files": files, "count": len(files),
                    "bytes": sum(int(f["bytes"]) for f in files)}  # fmt: skip
        out.append({"run_id": run, "workspace": workspace, "store": store,
                    "workspace_id": workspace_id, "logged_at": _iso(logged_at),
                    "removed": what})  # fmt: skip
    return out


def _iso(moment: datetime | None) -> str | None:
    return None if moment is None else moment.isoformat().replace("+00:00", "Z")


def write_manifest(path: Path, body: dict[str, Any]) -> str:
    """Write the manifest whole (a temporary file beside it, synced, renamed, the folder
    synced); returns its SHA-256."""
    data = orjson.dumps(body, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS) + b"\n"
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".partial")
    with tmp.open("wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    fd = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    return hashlib.sha256(data).hexdigest()


def mark_listed(con: duckdb.DuckDBPyConnection, path: Path) -> None:
    """Record that the manifest at ``path`` lists every unlisted row: this run's, and the
    earlier ones it read (an earlier archive row with no file gone removed nothing). The
    run holds the writers' lock: no other run logs meanwhile."""
    con.execute("UPDATE retention_log SET manifest = ? WHERE manifest IS NULL", [str(path)])
