"""The warehouse writers' lock: one writing command at a time, released when its holder dies.

Every command that writes the warehouse (`convo extract`, `convo webhooks
ingest`, `convo transform`, `convo publish`, `convo run`) takes this lock
before it opens the warehouse, and `convo run` holds it across all its steps,
so a manual command can never slip in between two steps of the nightly run.
Readers (the dashboard, `convo serve`, the exports) never take it.

The lock belongs to the warehouse file, not to the folder a command runs in
(D-WRITER-LOCK): by default it is ``<warehouse>.lock`` beside the warehouse's
real path (symlinks resolved), so two warehouses never block each other and
one warehouse's writers always do, wherever they were started;
``run.lock_file`` names another file instead. A snapshot publish also takes
the published folder's own lock (``publish.lock`` inside ``publish.dir``):
two warehouses publishing into one folder would otherwise remove each
other's partial files.

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
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType

import orjson

from convo_analytics.config import Settings
from convo_analytics.errors import LOCKED_EXIT, UserError, WarehouseLocked

log = logging.getLogger(__name__)

__all__ = [
    "LOCKED_EXIT",
    "LockUnavailable",
    "WarehouseLocked",
    "WriterLock",
    "acquire_writer_locks",
    "lock_beside",
    "publish_lock",
    "warehouse_lock",
    "warehouse_writer",
]

#: How often a waiting writer tries the lock again.
_RETRY_SECONDS = 0.1
#: The published folder's lock file, inside ``publish.dir`` (its publisher writes there anyway).
PUBLISH_LOCK = "publish.lock"
#: What a lock guards, as its messages name it.
WAREHOUSE_LOCK_NAME = "the warehouse writers' lock"
PUBLISH_LOCK_NAME = "the published folder's lock"


class LockUnavailable(UserError):
    """The lock file cannot be created or opened (a read-only folder, a file in the way)."""


class WriterLock:
    """The lock file at ``path``; :meth:`acquire` takes it, :meth:`release` lets go.

    ``name`` is what the lock guards, as messages say it; ``fix`` says what to do when
    the lock file cannot be made (which setting to change).
    """

    def __init__(
        self,
        path: Path,
        *,
        name: str = WAREHOUSE_LOCK_NAME,
        fix: str = "set run.lock_file to a file in a folder this user can write",
    ) -> None:
        self.path = path
        self.name = name
        self.fix = fix
        self._fd: int | None = None
        #: The run this holder is (``convo run``'s run id), when it is a run.
        self.run_id: str | None = None
        #: What the lock file said when we took it (a previous, ended holder), if anything.
        self.previous: dict[str, object] | None = None

    def acquire(
        self, command: str, run_id: str | None = None, wait_seconds: float = 0.0
    ) -> WriterLock:
        """Take the lock for ``command``, waiting up to ``wait_seconds`` for another holder.

        Raises WarehouseLocked naming the holder (command, pid, host, start), and
        LockUnavailable when the lock file cannot be made (saying ``fix``).
        """
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        except OSError as exc:
            why = exc.strerror or str(exc)
            if isinstance(exc, FileExistsError | NotADirectoryError):
                why = "a file stands where its folder should be"
            raise LockUnavailable(
                f"cannot make {self.name} {self.path}: {why}; {self.fix}"
            ) from None
        try:
            _take(fd, self.path, self.name, command, wait_seconds)
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


def _take(fd: int, path: Path, name: str, command: str, wait_seconds: float) -> None:
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
        f"{describe_holder(_read(fd))} holds {name} {path}; one writer "
        f"at a time, so {command} stops"
        + (f" after waiting {wait_seconds:g} s" if wait_seconds > 0 else "")
        + ". Try again when it has finished, or set run.lock_wait_seconds to wait for it",
        command,
    )


def lock_beside(store: Path) -> Path:
    """``<store>.lock`` beside the store's real path: absolute, symlinks resolved.

    ``./w.duckdb`` from one folder, ``/srv/w.duckdb`` from another and a symlink to
    it all name one lock; a store that does not exist yet has its lock where it will be.
    """
    real = Path(os.path.realpath(store))
    return real.with_name(real.name + ".lock")


def warehouse_lock(settings: Settings) -> WriterLock:
    """The warehouse's writers' lock: ``run.lock_file`` when set, else ``<warehouse>.lock``."""
    explicit = settings.get_path("run.lock_file")
    if explicit is not None:
        return WriterLock(explicit, fix="point run.lock_file at a file in a folder this "
                          "user can write")  # fmt: skip
    return WriterLock(
        lock_beside(settings.require_path("warehouse.path")),
        fix="writers make it beside the warehouse; make that folder writable, or set "
        "run.lock_file (CONVO_RUN_LOCK_FILE) to a lock file elsewhere",
    )


def publish_lock(settings: Settings) -> WriterLock:
    """The published folder's lock, ``publish.lock`` inside ``publish.dir`` (its real path)."""
    folder = Path(os.path.realpath(settings.require_path("publish.dir")))
    return WriterLock(folder / PUBLISH_LOCK, name=PUBLISH_LOCK_NAME,
                      fix="publish.dir must name a folder this user can write")  # fmt: skip


def acquire_writer_locks(
    settings: Settings,
    command: str,
    run_id: str | None = None,
    *,
    publishes: bool = False,
) -> list[WriterLock]:
    """Take every lock ``command`` needs, in one order: the warehouse's, then (when it
    ``publishes`` a snapshot) the published folder's; the first one is the warehouse's.

    All are taken before anything is written, and always in this order, so two writers
    never wait for each other in a circle. Each waits up to ``run.lock_wait_seconds``.
    Raises WarehouseLocked or LockUnavailable with every lock it took let go again.
    """
    wanted = [warehouse_lock(settings)] + ([publish_lock(settings)] if publishes else [])
    wait = settings.get_float("run.lock_wait_seconds")
    taken: list[WriterLock] = []
    try:
        for lock in wanted:
            taken.append(lock.acquire(command, run_id, wait))
    except BaseException:
        for lock in reversed(taken):
            lock.release()
        raise
    return taken


@contextmanager
def warehouse_writer(
    settings: Settings, command: str, run_id: str | None = None, *, publishes: bool = False
) -> Iterator[WriterLock]:
    """Hold the warehouse's writers' lock (``<warehouse>.lock``, or ``run.lock_file``) and,
    when ``command`` ``publishes`` a snapshot, the published folder's, for the block;
    yields the warehouse's lock. The one way a writing command takes its locks.

    A writer that finds a lock taken waits up to ``run.lock_wait_seconds`` (0: not at
    all), then raises WarehouseLocked naming the holder, without touching the warehouse
    (the CLI says ``<command>: <message>`` and exits 75); a lock file that cannot be made
    (a read-only folder) raises LockUnavailable, a user error (exit 2).
    """
    locks = acquire_writer_locks(settings, command, run_id, publishes=publishes)
    try:
        yield locks[0]
    finally:
        for lock in reversed(locks):
            lock.release()


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
