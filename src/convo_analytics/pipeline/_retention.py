"""Archive retention: received webhook files older than N days go, once loaded.

A file is only removed when the warehouse holds events from it (or it is the
receiver's compressed copy of a plain file that does, read to its end). A file
whose every line was quarantined (a rotated secret nobody configured yet, say)
is kept, and so is a file with an open quarantine row whose line the
quarantine could not keep (over the size limit, or where a gzip stream broke
off): the file is what a replay needs for those.
"""

from __future__ import annotations

import time
from pathlib import Path

import duckdb

SECONDS_PER_DAY = 86_400


def prune_archives(con: duckdb.DuckDBPyConnection, archive_dir: Path, days: int) -> dict[str, int]:
    """Remove ingested archive files older than ``days`` days; 0 keeps everything."""
    if days <= 0 or not archive_dir.is_dir():
        return {"removed": 0, "kept": 0}
    read = {str(r[0]) for r in con.execute("SELECT DISTINCT source_file FROM events").fetchall()}
    read |= {
        str(r[0])
        for r in con.execute(
            "SELECT path FROM ingest_files WHERE complete AND continues IN "
            "(SELECT DISTINCT source_file FROM events)"
        ).fetchall()
    }
    read -= {
        str(r[0])
        for r in con.execute(
            "SELECT DISTINCT source_file FROM quarantine WHERE resolved_at IS NULL AND line IS NULL"
        ).fetchall()
    }
    cutoff = time.time() - days * SECONDS_PER_DAY
    removed = kept = 0
    for path in sorted(archive_dir.rglob("*.jsonl*")):
        if not path.is_file() or path.stat().st_mtime >= cutoff:
            continue
        if str(path) in read or str(path.resolve()) in read:
            path.unlink()
            removed += 1
        else:
            kept += 1
    return {"removed": removed, "kept": kept}
