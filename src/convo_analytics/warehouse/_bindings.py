"""Which workspace id each configured workspace name is bound to, and that no two share one.

The ``workspaces`` table records, per configured name, the id every row of that
workspace is keyed by (decision D-WORKSPACE-ID). An id is bound on first sight
(configured, or learned from the service's records or from a workspace's own
webhook events) and never reassigned: a name whose records later say another id,
or an id that another name already holds, is a conflict, an error naming both.
Without this, a workspace whose id is learned could learn another workspace's id
and write its rows into that workspace (decision D-WEBHOOK-WORKSPACE).

The one exception is the implicit workspace of a flat configuration
(``default``): when such a warehouse is later configured with ``[[workspaces]]``,
the extraction of the workspace whose records carry that id takes the binding
over (renames it), since it was that same, single tenant all along.
"""

from __future__ import annotations

from collections.abc import Collection
from datetime import UTC, datetime

import duckdb

from convo_analytics.errors import UserError

__all__ = ["WorkspaceConflict", "bind_workspace", "bound_workspaces", "check_binding"]

#: The name of a flat configuration's one workspace (config.DEFAULT_WORKSPACE; repeated here
#: because the warehouse sits below the config package).
IMPLICIT_NAME = "default"


class WorkspaceConflict(UserError):
    """A workspace id that would be bound to a second name, or a name to a second id."""


def bound_workspaces(con: duckdb.DuckDBPyConnection) -> dict[str, tuple[str, str]]:
    """Every bound name: its id and where the id came from (configured, learned, ...)."""
    rows = con.execute("SELECT name, workspace_id, id_origin FROM workspaces").fetchall()
    return {str(name): (str(wid), str(origin or "stored")) for name, wid, origin in rows}


def check_binding(
    bound: dict[str, tuple[str, str]],
    name: str,
    workspace_id: str,
    *,
    takeover: Collection[str] = (),
) -> str | None:
    """Why ``name`` cannot be bound to ``workspace_id`` (one line naming both), or None.

    ``takeover``: names whose binding of this id may pass to ``name`` (the implicit
    ``default`` of a flat configuration that is no longer configured).
    """
    have = bound.get(name)
    if have is not None and have[0] != workspace_id:
        owner = next((o for o, (wid, _) in bound.items() if wid == workspace_id), None)
        whose = f", which is workspace {owner!r}'s" if owner else ""
        return (
            f"workspace {name!r} is bound to id {have[0]!r} ({have[1]}) in this warehouse, "
            f"not {workspace_id!r}{whose}: an id is never reassigned; set workspace_id = "
            f"{have[0]!r} in its [[workspaces]] table (or use another warehouse)"
        )
    for other, (wid, origin) in bound.items():
        if other != name and wid == workspace_id and other not in takeover:
            return (
                f"workspace id {workspace_id!r} is bound to workspace {other!r} ({origin}) in "
                f"this warehouse, so workspace {name!r} cannot take it: give {name!r} its own "
                f"workspace_id in its [[workspaces]] table, or check which workspace its key "
                "or secret belongs to"
            )
    return None


def bind_workspace(
    con: duckdb.DuckDBPyConnection,
    name: str,
    workspace_id: str,
    origin: str,
    base_url: str | None,
    run_id: str,
    *,
    takeover: Collection[str] = (),
) -> None:
    """Record ``name`` → ``workspace_id`` (in the caller's transaction), or raise
    WorkspaceConflict; a binding that exists is only touched (its last run)."""
    bound = bound_workspaces(con)
    problem = check_binding(bound, name, workspace_id, takeover=takeover)
    if problem is not None:
        raise WorkspaceConflict(problem)
    for other in takeover:
        if other != name and bound.get(other, ("",))[0] == workspace_id:
            con.execute("DELETE FROM workspaces WHERE name = ?", [other])
    con.execute(
        """INSERT INTO workspaces VALUES (?, ?, ?, ?, ?, ?, ?)
           ON CONFLICT (name) DO UPDATE SET last_run_id = excluded.last_run_id,
               updated_at = excluded.updated_at,
               base_url = COALESCE(excluded.base_url, workspaces.base_url)""",
        [name, workspace_id, origin, base_url, run_id, run_id, datetime.now(UTC)],
    )
