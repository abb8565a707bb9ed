"""Archive retention: received webhook files older than their days go, once loaded.

A workspace's files (``webhooks.archive_dir/workspaces/NAME/``) follow its own
``retention_archive_days``; the flat endpoint's files (everything else under the
folder) follow ``[retention]``. Age is the file's modification time (the receiver's
file of a day is written that day, and compressed when it ends).

A file is only removed when the warehouse holds events from it (or it is the
receiver's compressed copy of a plain file that does, read to its end). A file
whose every line was quarantined (a rotated secret nobody configured yet, say)
is kept, and so is a file with an open quarantine row whose line the
quarantine could not keep (over the size limit, or where a gzip stream broke
off): the file is what a replay needs for those.

What goes is written to ``retention_log`` (names and sizes) before the first file is
unlinked, so that a run killed half-way still has its removals listed by the next
run's manifest (D-RETENTION).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import duckdb

from convo_analytics.pipeline._retention_config import Days

__all__ = ["SECONDS_PER_DAY", "ArchiveGroup", "archive_groups", "read_files", "remove_files"]

SECONDS_PER_DAY = 86_400
#: The folder of the workspaces' own endpoints under ``webhooks.archive_dir``.
WORKSPACES_FOLDER = "workspaces"


@dataclass(slots=True)
class ArchiveGroup:
    """One endpoint's files past their days: a workspace's folder, or the flat one ('')."""

    folder: str
    days: int
    cutoff: float | None
    #: (name relative to the archive folder, size in bytes) of the files to remove.
    removed: list[tuple[str, int]] = field(default_factory=list)
    #: Files past their days that the warehouse has not read (or must keep for a replay).
    kept_unread: int = 0

    def as_json(self) -> dict[str, Any]:
        return {
            "days": self.days,
            "files": [{"name": name, "bytes": size} for name, size in self.removed],
            "count": len(self.removed),
            "bytes": sum(size for _, size in self.removed),
            "kept_unread": self.kept_unread,
        }


def read_files(con: duckdb.DuckDBPyConnection) -> set[str]:
    """The archive files the warehouse has read (as their paths were given to the ingest),
    less those a replay still needs."""
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
    return read


def _folder_of(path: Path, root: Path) -> str:
    parts = path.relative_to(root).parts
    return parts[1] if len(parts) >= 3 and parts[0] == WORKSPACES_FOLDER else ""


def archive_groups(
    archive_dir: Path, days_of: Callable[[str], Days], read: set[str], now: float
) -> list[ArchiveGroup]:
    """Per endpoint folder, the files past its days that the warehouse has read; the
    folders with nothing to remove and nothing kept are left out."""
    groups: dict[str, ArchiveGroup] = {}
    if not archive_dir.is_dir():
        return []
    for path in sorted(archive_dir.rglob("*.jsonl*")):
        if not path.is_file():
            continue
        folder = _folder_of(path, archive_dir)
        group = groups.get(folder)
        if group is None:
            days = days_of(folder).archive
            cutoff = now - days * SECONDS_PER_DAY if days > 0 else None
            group = groups[folder] = ArchiveGroup(folder, days, cutoff)
        if group.cutoff is None:
            continue
        stat = path.stat()
        if stat.st_mtime >= group.cutoff:
            continue
        if str(path) in read or str(path.resolve()) in read:
            group.removed.append((path.relative_to(archive_dir).as_posix(), stat.st_size))
        else:
            group.kept_unread += 1
    return [g for g in groups.values() if g.removed or g.kept_unread]


def remove_files(archive_dir: Path, names: list[tuple[str, int]]) -> None:
    """Unlink the files (a file already gone is not an error: a re-run's)."""
    for name, _ in names:
        (archive_dir / name).unlink(missing_ok=True)
