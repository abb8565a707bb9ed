"""The warehouse writers' lock: one writing command at a time, released when its holder dies.

Every command that writes the warehouse (`convo extract`, `convo webhooks
ingest`, `convo transform`, `convo publish`, `convo run`) takes this lock
before it opens the warehouse, and `convo run` holds it across all its steps,
so a manual command can never slip in between two steps of the nightly run.
Readers (the dashboard, `convo serve`, the exports) never take it.

It is an exclusive ``flock`` on a file. A holder killed with SIGKILL leaves
its lock file behind but not its lock: the kernel drops a process's ``flock``
when the process ends, so the next writer takes the lock at once and can
report that the previous holder is gone (the file still names it). No
stale-lock heuristics (pid checks, ages) are needed.
"""

from __future__ import annotations

import fcntl
import logging
import os
import socket
import time
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType

import orjson

from convo_analytics.errors import UserError

log = logging.getLogger(__name__)

#: Exit status of a writer that found another one holding the lock (EX_TEMPFAIL: try later).
LOCKED_EXIT = 75
#: How often a waiting writer tries the lock again.
_RETRY_SECONDS = 0.1


class WarehouseLocked(UserError):
    """Another writer holds the lock (and did not let go within the wait allowed)."""


class WriterLock:
    """The lock file at ``path``; :meth:`acquire` takes it, :meth:`release` lets go."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fd: int | None = None
        #: The run this holder is (``convo run``'s run id), when it is a run.
        self.run_id: str | None = None
        #: What the lock file said when we took it (a previous, ended holder), if anything.
        self.previous: dict[str, object] | None = None

    def acquire(
        self, command: str, run_id: str | None = None, wait_seconds: float = 0.0
    ) -> WriterLock:
        """Take the lock for ``command``, waiting up to ``wait_seconds`` for another holder.

        Raises WarehouseLocked naming the holder (command, pid, host, start).
        """
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            _take(fd, self.path, command, wait_seconds)
        except BaseException:
            os.close(fd)
            raise
        self.previous = _read(fd) or None
        self.run_id = run_id
        holder = {"command": command, "runId": run_id, "pid": os.getpid(),
                  "host": socket.gethostname(),
                  "startedAt": datetime.now(UTC).isoformat(timespec="seconds")}  # fmt: skip
        os.ftruncate(fd, 0)
        os.pwrite(fd, orjson.dumps(holder), 0)
        os.fsync(fd)
        self._fd = fd
        return self

    def release(self) -> None:
        if self._fd is not None:
            os.ftruncate(self._fd, 0)
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None

    def __enter__(self) -> WriterLock:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.release()


def _take(fd: int, path: Path, command: str, wait_seconds: float) -> None:
    """flock ``fd``, trying again until ``wait_seconds`` have passed (a bounded wait)."""
    deadline = time.monotonic() + max(0.0, wait_seconds)
    waiting = False
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            if not waiting:
                waiting = True
                log.warning("%s: waiting up to %.0f s for %s to finish", command,
                            wait_seconds, describe_holder(_read(fd)))  # fmt: skip
            time.sleep(min(_RETRY_SECONDS, left))
    raise WarehouseLocked(
        f"{describe_holder(_read(fd))} holds the warehouse writers' lock {path}; one writer "
        f"at a time, so {command} stops"
        + (f" after waiting {wait_seconds:g} s" if wait_seconds > 0 else "")
        + ". Try again when it has finished, or set run.lock_wait_seconds to wait for it"
    )


def describe_holder(holder: dict[str, object]) -> str:
    """E.g. ``convo run (run 2026..., pid 412 on host, since 2026-11-21T02:15:00+00:00)``."""
    if not holder:
        return "another writer"
    command = str(holder.get("command") or "convo run")  # lock files of older releases: runs
    run = f"run {holder['runId']}, " if holder.get("runId") else ""
    return (
        f"{command} ({run}pid {holder.get('pid')} on {holder.get('host')}, "
        f"since {holder.get('startedAt')})"
    )


def _read(fd: int) -> dict[str, object]:
    data = os.pread(fd, 4096, 0)
    try:
        value = orjson.loads(data) if data else {}
    except orjson.JSONDecodeError:
        return {}
    return value if isinstance(value, dict) else {}
