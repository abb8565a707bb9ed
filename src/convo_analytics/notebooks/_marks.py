"""Which cells of a notebook were stopped by a limit, kept beside the notebook.

Saved notebooks run when they are opened, so a cell that ran out of time or
memory would run again, and be stopped again, for everyone who opens the
notebook's link. A stopped cell is therefore marked, and a marked cell is not
run on open: it shows the line that stopped it and a Run button. The mark is
keyed by the cell's SQL, so editing the cell lifts it (its new SQL has no
mark); running it by hand lifts it when it finishes and renews it when it is
stopped again (decision D-EXPLORE-EXECUTOR).

Marks live in ``<folder>/<name>.stopped.json`` beside ``<name>.sql`` (the
saved notebooks' folder, also for a starter notebook, whose folder is part of
the repository): a JSON object of ``{cell key: {"line", "reason", "at"}}``.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import threading
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from convo_analytics.notebooks._format import notebook_name

__all__ = ["StopMark", "cell_key", "clear_mark", "load_marks", "mark_stopped", "marks_path"]

_LOCK = threading.Lock()  # read-modify-write of a marks file, within the app


@dataclass(frozen=True, slots=True)
class StopMark:
    """Why a cell was stopped (its one line, and time, memory, disk or crash) and when."""

    line: str
    reason: str
    at: str


def cell_key(sql: str) -> str:
    """A cell's key: its SQL's hash (spacing at its ends and a closing ``;`` ignored)."""
    text = sql.strip().rstrip(";").strip()
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:32]


def marks_path(folder: Path, name: str) -> Path:
    if notebook_name(name) is None:
        raise ValueError(f"{name!r} is not a notebook name")
    return folder / f"{name}.stopped.json"


def load_marks(folder: Path, name: str) -> dict[str, StopMark]:
    """The notebook's stopped cells by key (none when the file is missing or unreadable)."""
    path = marks_path(folder, name)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict):
        return {}
    out: dict[str, StopMark] = {}
    for key, mark in data.items():
        if isinstance(mark, dict):
            out[str(key)] = StopMark(
                str(mark.get("line", "")), str(mark.get("reason", "")), str(mark.get("at", ""))
            )
    return out


def _write(folder: Path, name: str, marks: dict[str, StopMark]) -> None:
    path = marks_path(folder, name)
    if not marks:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
        return
    folder.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f".{path.name}.partial")
    body = {k: {"line": m.line, "reason": m.reason, "at": m.at} for k, m in marks.items()}
    partial.write_text(json.dumps(body, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    os.replace(partial, path)


def mark_stopped(folder: Path, name: str, sql: str, line: str, reason: str) -> None:
    """Mark the cell of ``sql`` as stopped by a limit (it is not run on open any more)."""
    with _LOCK:
        marks = load_marks(folder, name)
        at = datetime.now(UTC).isoformat(timespec="seconds")
        marks[cell_key(sql)] = StopMark(line, reason, at)
        _write(folder, name, marks)


def clear_mark(folder: Path, name: str, sql: str) -> None:
    """Lift the cell's mark (it finished when run by hand)."""
    with _LOCK:
        marks = load_marks(folder, name)
        if marks.pop(cell_key(sql), None) is not None:
            _write(folder, name, marks)
