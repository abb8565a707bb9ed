"""What a reader gets: a checked snapshot to open, or why nothing usable is published.

Kept apart from the readers that find one (``_reader.py``: the pointer and its
checks; ``_lake_copy.py``: a copy of the lake) so that both return the same value
without importing each other.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import duckdb

from convo_analytics.errors import UserError

__all__ = ["UNREADABLE", "Snapshot", "SnapshotUnreadable", "connect_snapshot", "one_line"]

#: What every reader shows when nothing usable is published (the dashboard, `convo serve`).
UNREADABLE = "the published snapshot is unreadable: run `convo publish`"


def one_line(exc: BaseException) -> str:
    """An error's message on one line, at most 300 characters."""
    return " ".join(str(exc).split())[:300]


class SnapshotUnreadable(UserError):
    """``CURRENT`` is malformed, or no snapshot it names passes the checks."""

    def __init__(self, reason: str) -> None:
        super().__init__(f"{UNREADABLE} ({reason})")
        self.reason = reason


@dataclass(frozen=True, slots=True)
class Snapshot:
    """A published copy of the warehouse, checked and ready to open read-only."""

    path: Path
    snapshot_id: str
    published_at: str
    #: Why newer snapshots were passed over (they are damaged), or None for the newest.
    passed_over: str | None = None
    #: A copy of the lake: the publishes it leaves out because they did not finish (one
    #: line: which workspaces, and what is shown of them instead), or None.
    unfinished: str | None = None

    def connect(self) -> duckdb.DuckDBPyConnection:
        return connect_snapshot(self.path)


def connect_snapshot(path: Path) -> duckdb.DuckDBPyConnection:
    """Open a checked snapshot read-only; SnapshotUnreadable when DuckDB cannot."""
    try:
        con = duckdb.connect(str(path), read_only=True)
        con.execute("SET TimeZone = 'UTC'")
    except duckdb.Error as exc:
        raise SnapshotUnreadable(f"{path.name}: DuckDB cannot open it: {one_line(exc)}") from None
    return con
