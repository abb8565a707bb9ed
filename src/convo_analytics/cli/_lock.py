"""The one way a CLI command takes the warehouse writers' lock (see pipeline/_lock.py)."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

import typer

from convo_analytics.config import Settings

if TYPE_CHECKING:
    from convo_analytics.pipeline import WriterLock

__all__ = ["warehouse_writer"]


@contextmanager
def warehouse_writer(
    settings: Settings, command: str, run_id: str | None = None
) -> Iterator[WriterLock]:
    """Hold the writers' lock (``run.lock_file``) for the block, or exit 75 naming its holder.

    A writer that finds the lock taken waits up to ``run.lock_wait_seconds``
    (0: not at all), then stops with exit status 75 (EX_TEMPFAIL) and one line
    saying which command holds it, without touching the warehouse.
    """
    from convo_analytics.pipeline import LOCKED_EXIT, WarehouseLocked, WriterLock

    lock = WriterLock(settings.require_path("run.lock_file"))
    try:
        lock.acquire(command, run_id, settings.get_float("run.lock_wait_seconds"))
    except WarehouseLocked as exc:
        sys.stderr.write(f"{command}: {exc}\n")
        sys.stderr.flush()
        raise typer.Exit(LOCKED_EXIT) from None
    with lock:
        yield lock
