"""The dashboard's monitors: kept in the app's own state store, never in the warehouse.

A JSON-lines file (``monitoring.store_file``, by default
``data/app-state/monitors.jsonl``) that the dashboard and ``convo monitors
save|delete`` append to under a lock of their own; every run reads it with the
``[[monitors]]`` of convo.toml (the seam of wave 3: the dashboard writes only to
its own store, and the pipeline reads that store as configuration). Each line
is a whole monitor (``save``) or a removal (``delete``); the last line about a
name wins. A line a kill left half-written is skipped, and the next append
starts a fresh line. A stored table is checked by the same model as a
``[[monitors]]`` table, so a hand edit gone wrong is a clear error.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from convo_analytics._app_state import append_line, locked, read_lines
from convo_analytics.config import MonitorSpec, monitor_problems
from convo_analytics.errors import UserError

__all__ = ["delete_monitor", "read_stored", "save_monitor"]


def _lines(path: Path) -> list[dict[str, Any]]:
    try:
        rows = read_lines(path)
    except OSError as exc:
        raise UserError(
            f"monitoring.store_file {path}: cannot be read ({exc.strerror}); fix its "
            "permissions or point monitoring.store_file elsewhere"
        ) from None
    return [r for r in rows if isinstance(r, dict) and r.get("op") in ("save", "delete")]


def read_stored(path: Path) -> list[MonitorSpec]:
    """The store's monitors (the last line about each name wins; deleted ones gone), in
    the order they were first saved. A stored table the model refuses is a UserError."""
    latest: dict[str, dict[str, Any]] = {}
    for row in _lines(path):
        name = str(row.get("name") or "")
        latest.pop(name, None)  # keep first-saved order for names saved again
        latest[name] = row
    tables = [row.get("monitor") for row in latest.values() if row["op"] == "save"]
    specs, problems = monitor_problems(tables, origin=f"{path}: stored monitor")
    if problems:
        raise UserError(problems[0] + "; fix the line or delete the monitor and save it again")
    return specs


def _append(path: Path, row: dict[str, Any]) -> None:
    with locked(path):
        append_line(path, row)


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def save_monitor(path: Path, spec: MonitorSpec, by: str = "dashboard") -> None:
    """Store ``spec`` (a new monitor, or a new definition of a stored one's name)."""
    table = spec.model_dump(mode="json", exclude_defaults=True)
    table["name"], table["metric"] = spec.name, spec.metric
    _append(path, {"op": "save", "name": spec.name, "monitor": table, "by": by, "at": _now()})


def delete_monitor(path: Path, name: str, by: str = "dashboard") -> bool:
    """Remove the stored monitor ``name``; whether there was one (its evaluations stay)."""
    if name not in {s.name for s in read_stored(path)}:
        return False
    _append(path, {"op": "delete", "name": name, "by": by, "at": _now()})
    return True
