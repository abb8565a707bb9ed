"""Each workspace's topics as analysts see them, and curations checked before they are kept.

``convo topics list`` and the dashboard show ``mart_topics`` with the store's
curations applied on top, so a rename made a minute ago shows before the next
transform writes it into the marts (applying the whole store again gives the
same names: the last rename of a topic wins whatever it started from). A new
curation is kept only when the topics it names exist in the workspace it names
(decision D-TOPICS-CURATION).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import duckdb

from convo_analytics.errors import UserError
from convo_analytics.topics._curations import (
    Curation,
    append_curation,
    apply_curations,
    checked,
    read_curations,
)

__all__ = ["curate", "resolve_workspace", "topic_catalog"]


def _rows(con: duckdb.DuckDBPyConnection, sql: str, params: list[Any]) -> list[dict[str, Any]]:
    cursor = con.execute(sql, params)
    names = [d[0] for d in cursor.description or ()]
    return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]


def resolve_workspace(con: duckdb.DuckDBPyConnection, given: str | None) -> str:
    """The workspace id ``given`` names (an id or a configured name); without one, the
    warehouse's only workspace with topics. A :class:`UserError` listing them otherwise."""
    ids = [r[0] for r in con.execute("SELECT DISTINCT workspace_id FROM mart_topics").fetchall()]
    names = dict(con.execute("SELECT name, workspace_id FROM workspaces").fetchall())
    if given is None:
        if len(ids) == 1:
            return str(ids[0])
        if not ids:
            raise UserError(
                "no workspace has topics yet: run `convo transform` once a workspace has "
                "topics.min_conversations conversations with a user message"
            )
        raise UserError(f"--workspace: name one of {', '.join(sorted(map(str, ids)))}")
    found = given if given in ids else names.get(given)
    if found is None or found not in ids:
        known = ", ".join(sorted(map(str, ids))) or "none yet"
        raise UserError(
            f"--workspace {given!r}: no topics for it (workspaces with topics: {known})"
        )
    return str(found)


def topic_catalog(
    con: duckdb.DuckDBPyConnection, workspace_id: str, curations_path: Path | None
) -> list[dict[str, Any]]:
    """The workspace's topics (``mart_topics`` rows) with the store's curations applied,
    largest first; ``pending`` says a row differs from what the last transform wrote."""
    rows = _rows(
        con,
        "SELECT * FROM mart_topics WHERE workspace_id = ? ORDER BY conversations DESC, topic_id",
        [workspace_id],
    )
    curations = read_curations(curations_path, workspace_id) if curations_path else []
    applied, _ = apply_curations(
        ((r["topic_id"], r["label"], bool(r["retired"]), r["split_from"]) for r in rows),
        curations,
    )
    out = []
    for r in rows:
        a = applied[r["topic_id"]]
        now = {
            "label": a.label,
            "effective_topic_id": a.effective_topic_id,
            "effective_label": a.effective_label,
            "pinned": a.pinned,
        }
        pending = any(r[k] != v for k, v in now.items())
        out.append({**r, **now, "pending": pending})
    return out


def curate(
    con: duckdb.DuckDBPyConnection, curations_path: Path | None, curation: Curation
) -> Curation:
    """Keep ``curation`` in the store once the topics it names are the workspace's."""
    if curations_path is None:
        raise UserError("topics.curations_file is not set: set it to keep topic curations")
    workspace = resolve_workspace(con, curation.workspace_id or None)
    curation = checked(replace(curation, workspace_id=workspace))
    known = {
        int(r[0]): bool(r[1])
        for r in con.execute(
            "SELECT topic_id, retired FROM mart_topics WHERE workspace_id = ?", [workspace]
        ).fetchall()
    }
    for topic in (curation.topic_id, curation.target_topic_id):
        if topic is not None and topic not in known:
            listing = "`convo topics list --workspace " + workspace + "`"
            raise UserError(f"topic {topic}: not a topic of {workspace} (see {listing})")
    if curation.action == "merge":
        if known.get(curation.target_topic_id or 0):
            raise UserError(
                f"merge: topic {curation.target_topic_id} is retired; pick a live topic"
            )
        rows = topic_catalog(con, workspace, None)
        _, ok = apply_curations(
            ((r["topic_id"], r["label"], bool(r["retired"]), r["split_from"]) for r in rows),
            [*read_curations(curations_path, workspace), replace(curation, sequence=-1)],
        )
        if not ok[-1]:
            raise UserError(
                f"merge: topic {curation.target_topic_id} is already merged into topic "
                f"{curation.topic_id} (directly or not); unmerge it first"
            )
    return append_curation(curations_path, replace(curation, workspace_id=workspace))
