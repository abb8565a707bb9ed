"""Which workspaces a warehouse holds, by name and id, and which of them a reader asked for.

Readers (the exports, `convo serve`, the nightly run's exports step) name a
workspace the way users do: by its ``[[workspaces]]`` name or by the
service's id of it. The ``workspaces`` table records each name's id
(decision D-WORKSPACE-ID); a workspace whose rows carry an id no name
records (a warehouse upgraded from one workspace, a configured
``workspace_id``) is named by the config, else by its id.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

import duckdb

from convo_analytics.config import WorkspaceConfig
from convo_analytics.errors import UserError

__all__ = [
    "ALL_WORKSPACES",
    "WarehouseWorkspace",
    "file_label",
    "find_workspace",
    "summary_scope",
    "warehouse_workspaces",
]

#: The ``workspaceId`` of a summary of every workspace rolled up (D-EXPORT-WORKSPACE).
ALL_WORKSPACES = "*"


@dataclass(frozen=True, slots=True)
class WarehouseWorkspace:
    """A workspace the warehouse holds: its name and the id its rows are keyed by."""

    name: str
    workspace_id: str


def file_label(workspaces: Sequence[WarehouseWorkspace]) -> str:
    """The workspaces' names for a file name: ``a+b``, any character a path could take
    otherwise (an id learned from the service's records) replaced by ``-``."""
    return "+".join(re.sub(r"[^A-Za-z0-9_.-]|^\.", "-", w.name) for w in workspaces)


def _has_table(con: duckdb.DuckDBPyConnection, table: str) -> bool:
    return bool(
        con.execute(
            "SELECT count(*) FROM information_schema.tables "
            "WHERE table_schema = current_schema() AND table_name = ?",
            [table],
        ).fetchall()[0][0]
    )


def warehouse_workspaces(
    con: duckdb.DuckDBPyConnection, configured: Sequence[WorkspaceConfig] = ()
) -> list[WarehouseWorkspace]:
    """Every workspace extracted into the warehouse (recorded, or holding conversations),
    in name order; ``configured`` names the ids no ``workspaces`` row names."""
    named: dict[str, str] = {}
    if _has_table(con, "workspaces"):
        for name, ws_id in con.execute(
            "SELECT name, workspace_id FROM workspaces ORDER BY name"
        ).fetchall():
            named.setdefault(str(ws_id), str(name))
    held = [
        str(r[0])
        for r in con.execute(
            "SELECT DISTINCT workspace_id FROM conversations WHERE workspace_id IS NOT NULL"
        ).fetchall()
    ]
    by_config = {w.workspace_id: w.name for w in configured if w.workspace_id}
    for ws_id in held:
        if ws_id not in named:
            named[ws_id] = by_config.get(ws_id, ws_id)
    return sorted(
        (WarehouseWorkspace(name, ws_id) for ws_id, name in named.items()),
        key=lambda w: (w.name, w.workspace_id),
    )


def _names(known: Sequence[WarehouseWorkspace]) -> str:
    return ", ".join(w.name for w in known) or "none"


def find_workspace(
    known: Sequence[WarehouseWorkspace],
    wanted: str,
    configured: Sequence[WorkspaceConfig] = (),
    flag: str = "--workspace",
) -> WarehouseWorkspace:
    """The workspace ``wanted`` names (a name first, else an id); a UserError naming it and
    the known ones otherwise."""
    for match in (
        [w for w in known if w.name == wanted],
        [w for w in known if w.workspace_id == wanted],
    ):
        if match:
            return match[0]
    if any(w.name == wanted for w in configured):
        raise UserError(
            f"{flag} {wanted!r}: configured, but nothing of it is in this warehouse yet; "
            f"run 'convo extract --workspace {wanted}' (it holds: {_names(known)})"
        )
    raise UserError(f"{flag} {wanted!r}: no such workspace here; it holds: {_names(known)}")


def summary_scope(
    known: Sequence[WarehouseWorkspace],
    wanted: Sequence[str] = (),
    all_workspaces: bool = False,
    configured: Sequence[WorkspaceConfig] = (),
) -> tuple[list[WarehouseWorkspace], bool]:
    """The workspaces a reader asked for, and whether that is every row of the warehouse.

    Without names or ``all_workspaces``, a warehouse of one workspace (or none)
    is read whole, as before workspaces existed; one of several is a UserError
    naming them and both flags.
    """
    if wanted and all_workspaces:
        raise UserError("give --workspace NAME or --all-workspaces, not both")
    if all_workspaces:
        return list(known), True
    if wanted:
        chosen = [find_workspace(known, name, configured) for name in wanted]
        return list(dict.fromkeys(chosen)), False
    if len(known) > 1:
        raise UserError(
            f"the warehouse holds {len(known)} workspaces ({_names(known)}): pass "
            "--workspace NAME for one, or --all-workspaces for all of them together"
        )
    return list(known), True
