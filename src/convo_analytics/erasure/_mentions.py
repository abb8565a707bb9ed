"""What was told about a person: the alert deliveries and the monitors' explanations.

A monitor's alert names up to three example conversations (ids and facts, no text) and
links to them; it is stored in ``monitor_evaluations.explanation`` and, as sent, in the
delivery log (``notify.delivery_log``), which also keeps what is still to be sent. An
erasure takes the person out of both (D-ERASURE): an example that is theirs leaves the
list, and their ids elsewhere in the text and links become ``[erased]``. The alert's key
and its delivery state stay, so nothing is sent twice and nothing pending is lost.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import duckdb
import orjson

from convo_analytics.erasure._needles import DROP, Needles
from convo_analytics.notify import DeliveryLog

__all__ = ["erase_deliveries", "erase_explanations"]


def erase_deliveries(log: Path | None, needles: Needles) -> int:
    """The delivery log's notifications without the person; the lines changed."""
    if log is None or needles.empty() or not log.exists():
        return 0

    def change(row: dict[str, Any]) -> dict[str, Any] | None:
        notification = row.get("notification")
        if row.get("type") != "notification" or not isinstance(notification, dict):
            return None
        kept = needles.prune(notification)
        if kept is DROP:  # the notification itself is keyed by their id: keep its key only
            kept = {k: notification[k] for k in ("kind", "key", "source") if k in notification}
            kept.update(subject="[erased]", text="[erased]")
        return {**row, "notification": kept}

    return DeliveryLog(log).rewrite(change)


def erase_explanations(con: duckdb.DuckDBPyConnection, workspace_id: str, needles: Needles) -> int:
    """The workspace's monitor explanations without the person (inside the erasure's
    transaction); the rows changed."""
    if needles.empty():
        return 0
    exists = con.execute(
        "SELECT count(*) FROM duckdb_tables() WHERE table_name = 'monitor_evaluations' "
        "AND database_name = current_database() AND schema_name = current_schema()"
    ).fetchone()
    if not exists or not exists[0]:
        return 0
    rows = con.execute(
        "SELECT rowid, CAST(explanation AS VARCHAR) FROM monitor_evaluations "
        "WHERE workspace_id = ? AND explanation IS NOT NULL",
        [workspace_id],
    ).fetchall()
    changed = 0
    for rowid, text in rows:
        try:
            tree = orjson.loads(text)
        except orjson.JSONDecodeError:
            continue
        kept = needles.prune(tree)
        if kept == tree:
            continue
        value = None if kept is DROP else orjson.dumps(kept).decode()
        con.execute(
            "UPDATE monitor_evaluations SET explanation = ? WHERE rowid = ?", [value, rowid]
        )
        changed += 1
    return changed
