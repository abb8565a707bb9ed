"""The app's own state stores: JSON-lines files appended under a lock of their own.

Topic curations, the dashboard's monitors (and later notebooks' schedules) are kept
apart from the warehouse a run writes (the wave-3 seam: the dashboard writes only to
its own state store). Each store is an append-only file of JSON lines; writers take
an exclusive ``flock`` on ``<file>.lock``; a line a kill left half-written is
skipped by readers, and the next append starts a fresh line.
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import orjson

__all__ = ["append_line", "locked", "read_lines"]


@contextmanager
def locked(path: Path) -> Iterator[None]:
    """Hold the store's lock (``<path>.lock``, made with its folder when missing)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(f"{path}.lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)


def append_line(path: Path, row: dict[str, Any]) -> None:
    """Append ``row`` as one JSON line, durably (fsynced); the caller holds :func:`locked`.
    After a line a kill cut short, the new one starts on a line of its own."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        size = os.fstat(fd).st_size
        prefix = b""
        if size:
            with path.open("rb") as f:
                f.seek(size - 1)
                prefix = b"" if f.read(1) == b"\n" else b"\n"
        os.write(fd, prefix + orjson.dumps(row) + b"\n")
        os.fsync(fd)
    finally:
        os.close(fd)


def read_lines(path: Path) -> list[Any]:
    """Every line of the store that parses as JSON, in order (none without the file).
    Raises OSError when the file exists but cannot be read."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return []
    out = []
    for line in data.splitlines():
        if not line.strip():
            continue
        try:
            out.append(orjson.loads(line))
        except orjson.JSONDecodeError:
            continue  # a line a kill cut short
    return out
