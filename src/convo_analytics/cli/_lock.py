"""The one way a CLI command takes the writers' locks (see pipeline/_lock.py)."""

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
    settings: Settings, command: str, run_id: str | None = None, *, publishes: bool = False
) -> Iterator[WriterLock]:
    """Hold the warehouse's writers' lock (``<warehouse>.lock``, or ``run.lock_file``) and,
    when the command ``publishes`` a snapshot, the published folder's, for the block; or
    exit 75 naming the holder. Yields the warehouse's lock.

    A writer that finds a lock taken waits up to ``run.lock_wait_seconds``
    (0: not at all), then stops with exit status 75 (EX_TEMPFAIL) and one line
    saying which command holds it, without touching the warehouse. A lock file
    that cannot be made (a read-only folder) is a user error (exit 2).
    """
    from convo_analytics.pipeline import LOCKED_EXIT, WarehouseLocked, acquire_writer_locks

    try:
        locks = acquire_writer_locks(settings, command, run_id, publishes=publishes)
    except WarehouseLocked as exc:
        sys.stderr.write(f"{command}: {exc}\n")
        sys.stderr.flush()
        raise typer.Exit(LOCKED_EXIT) from None
    try:
        yield locks[0]
    finally:
        for lock in reversed(locks):
            lock.release()
