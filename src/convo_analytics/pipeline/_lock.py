"""One run at a time: an exclusive lock on a file, released by the kernel when the holder dies.

A run killed with SIGKILL leaves its lock file behind but not its lock: the
kernel drops a process's ``flock`` when the process ends, so the next run
takes the lock at once and reports that the previous holder is gone (the
file still names it). No stale-lock heuristics (pid checks, ages) are needed.
"""

from __future__ import annotations

import fcntl
import os
import socket
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType

import orjson

from convo_analytics.errors import UserError

#: Exit status of a run that found another one running (EX_TEMPFAIL: try again later).
LOCKED_EXIT = 75


class RunLocked(UserError):
    """Another run holds the lock."""


class RunLock:
    def __init__(self, path: Path) -> None:
        self.path = path
        self._fd: int | None = None
        #: What the lock file said when we took it (a previous, ended holder), if anything.
        self.previous: dict[str, object] | None = None

    def acquire(self, run_id: str) -> RunLock:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _read(fd)
            os.close(fd)
            who = (
                f"run {holder.get('runId')} (pid {holder.get('pid')} on {holder.get('host')}, "
                f"since {holder.get('startedAt')})"
                if holder
                else "another run"
            )
            raise RunLocked(
                f"{who} holds {self.path}; runs never overlap, so this one stops. "
                "Try again when it has finished"
            ) from None
        self.previous = _read(fd) or None
        os.ftruncate(fd, 0)
        os.pwrite(
            fd,
            orjson.dumps(
                {"runId": run_id, "pid": os.getpid(), "host": socket.gethostname(),
                 "startedAt": datetime.now(UTC).isoformat(timespec="seconds")}
            ),
            0,
        )  # fmt: skip
        os.fsync(fd)
        self._fd = fd
        return self

    def release(self) -> None:
        if self._fd is not None:
            os.ftruncate(self._fd, 0)
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None

    def __enter__(self) -> RunLock:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.release()


def _read(fd: int) -> dict[str, object]:
    data = os.pread(fd, 4096, 0)
    try:
        value = orjson.loads(data) if data else {}
    except orjson.JSONDecodeError:
        return {}
    return value if isinstance(value, dict) else {}
