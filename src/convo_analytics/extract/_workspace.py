"""Which workspace id an extraction's rows are keyed by (decision D-WORKSPACE-ID).

Every row of the warehouse carries its workspace, and every key includes
it, so that workspaces whose ids collide (per-workspace counters) stay
apart. The id is the service's own id of the workspace where it can be
known, so that the same workspace reads the same whether it is configured
as one of many or (an older configuration) alone: configured
(``workspace_id`` in its ``[[workspaces]]`` table) > the id stored for
its name by an earlier run (the ``workspaces`` table) > for the one
workspace of a flat configuration, the single workspace the warehouse holds
> the ``workspaceId`` its first records carry > its name.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import Any

import duckdb

__all__ = ["WorkspaceIdentity"]

#: Fields in which records name their workspace.
_FIELDS = ("workspaceId", "workspace_id", "workspace")


class WorkspaceIdentity:
    """The workspace id of one extraction: resolved, learned or defaulted, then recorded."""

    def __init__(
        self,
        con: duckdb.DuckDBPyConnection,
        name: str,
        *,
        configured: str | None,
        implicit: bool,
        base_url: str,
    ) -> None:
        self.name = name
        self.base_url = base_url
        self.origin = ""
        self.id: str | None = configured
        self._recorded = False
        if configured:
            self.origin = "configured"
            return
        rows = con.execute(
            "SELECT workspace_id, id_origin FROM workspaces WHERE name = ?", [name]
        ).fetchall()
        if rows:
            self.id, self.origin = str(rows[0][0]), str(rows[0][1] or "stored")
            self._recorded = True
            return
        if implicit:
            held = con.execute("SELECT DISTINCT workspace_id FROM conversations LIMIT 2").fetchall()
            if len(held) == 1:
                self.id, self.origin = str(held[0][0]), "warehouse"

    @property
    def resolved(self) -> bool:
        return self.id is not None

    def learn(self, records: Iterable[Mapping[str, Any]]) -> str:
        """Settle the id from the first records (their workspace field), else the name."""
        if self.id is None:
            for record in records:
                for key in _FIELDS:
                    value = record.get(key) if isinstance(record, Mapping) else None
                    if isinstance(value, str | int) and not isinstance(value, bool) and value:
                        self.id, self.origin = str(value), "learned"
                        return self.id
            self.id, self.origin = self.name, "name"
        return self.id

    def record(self, con: duckdb.DuckDBPyConnection, run_id: str) -> None:
        """Store the name's id (in the caller's transaction), once per run."""
        if self.id is None or self._recorded:
            return
        con.execute(
            """INSERT INTO workspaces VALUES (?, ?, ?, ?, ?, ?, ?)
               ON CONFLICT (name) DO UPDATE SET last_run_id = excluded.last_run_id,
                   updated_at = excluded.updated_at, base_url = excluded.base_url""",
            [self.name, self.id, self.origin, self.base_url, run_id, run_id, datetime.now(UTC)],
        )
        self._recorded = True
