"""Which workspace id an extraction's rows are keyed by (decision D-WORKSPACE-ID).

Every row of the warehouse carries its workspace, and every key includes
it, so that workspaces whose ids collide (per-workspace counters) stay
apart. The id is the service's own id of the workspace where it can be
known, so that the same workspace reads the same whether it is configured
as one of many or (an older configuration) alone: configured
(``workspace_id`` in its ``[[workspaces]]`` table) > the id stored for
its name by an earlier run (the ``workspaces`` table) > for the one
workspace of a flat configuration, the single workspace the warehouse holds
> the ``workspaceId`` its first records carry > its name. An id, once bound to a
name, is never reassigned, and no two names share one (``warehouse/_bindings.py``):
a conflict is an error naming both, before any row is written.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import duckdb

from convo_analytics.warehouse._bindings import (
    IMPLICIT_NAME,
    WorkspaceConflict,
    bind_workspace,
    bound_workspaces,
    check_binding,
)

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
        self._bound = bound_workspaces(con)
        #: A flat configuration's binding that this configured workspace may take over.
        self._takeover = () if implicit or name == IMPLICIT_NAME else (IMPLICIT_NAME,)
        if configured:
            self.origin = "configured"
            self._check(configured)
            return
        if name in self._bound:
            self.id, self.origin = self._bound[name]
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
                        self._check(str(value))
                        self.id, self.origin = str(value), "learned"
                        return self.id
            self._check(self.name)
            self.id, self.origin = self.name, "name"
        return self.id

    def _check(self, workspace_id: str) -> None:
        problem = check_binding(self._bound, self.name, workspace_id, takeover=self._takeover)
        if problem is not None:
            raise WorkspaceConflict(problem)

    def record(self, con: duckdb.DuckDBPyConnection, run_id: str) -> None:
        """Store the name's id (in the caller's transaction), once per run."""
        if self.id is None or self._recorded:
            return
        bind_workspace(
            con, self.name, self.id, self.origin, self.base_url, run_id, takeover=self._takeover
        )
        self._recorded = True
