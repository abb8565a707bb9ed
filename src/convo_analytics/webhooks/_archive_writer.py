"""Durable, append-only daily archive files with group commit.

The receiver may acknowledge a delivery only once its line is on disk, so
every append waits for an ``fsync``. One fsync per delivery would cap
throughput at the disk's flush rate; instead appends are queued and a single
writer task writes everything pending in one ``write`` and one ``fsync``, then
wakes every waiter of that batch (group commit). Lines therefore never
interleave, and the cost of a flush is shared by all concurrent deliveries.

Files are ``{prefix}-YYYY-MM-DD.jsonl``, one per UTC day of receipt. When the
first line of a new day is written, the previous day's file is closed and
gzip-compressed off the event loop: ``*.jsonl.gz.partial`` is written and
fsynced, renamed to ``*.jsonl.gz``, and only then is the plain file removed, so
a crash at any point leaves a complete copy. At start, past days' plain files
left by a crash are compressed the same way; today's is appended to. A line is
never rewritten; a line torn by a crash mid-write (never acknowledged) is
closed with a newline before appending, so that it cannot corrupt the next one.
"""

from __future__ import annotations

import asyncio
import fcntl
import gzip
import logging
import os
import re
from collections.abc import Callable
from datetime import UTC, date, datetime
from pathlib import Path
from types import TracebackType

__all__ = ["ArchiveError", "ArchiveWriter", "utc_now"]

log = logging.getLogger(__name__)
_CHUNK = 1 << 20


def utc_now() -> datetime:
    return datetime.now(UTC)


class ArchiveError(RuntimeError):
    """A line could not be made durable; the delivery must not be acknowledged."""


def _fsync_dir(directory: Path) -> None:
    """Make a file's creation, rename or removal itself durable."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _same_content(gz: Path, plain: Path) -> bool:
    try:
        with gzip.open(gz, "rb") as a, plain.open("rb") as b:
            while True:
                x, y = a.read(_CHUNK), b.read(_CHUNK)
                if x != y:
                    return False
                if not x:
                    return True
    except (OSError, EOFError, gzip.BadGzipFile):
        return False


def compress_file(plain: Path) -> Path:
    """Gzip ``plain`` next to itself, durably, then remove it; the compressed path.

    If a compressed file of that name already exists with the same content (a
    crash between the rename and the removal), the plain file is just removed;
    if its content differs, a free name ``*.N.jsonl.gz`` is used instead, so
    that nothing is ever overwritten.
    """
    stem = plain.name.removesuffix(".jsonl")
    target = plain.with_name(f"{stem}.jsonl.gz")
    n = 0
    while target.exists():
        if _same_content(target, plain):
            plain.unlink()
            _fsync_dir(plain.parent)
            return target
        n += 1
        target = plain.with_name(f"{stem}.{n}.jsonl.gz")
    partial = target.with_name(target.name + ".partial")
    lock = os.open(plain, os.O_RDONLY)  # an erasure rewriting it waits, or is waited for
    try:
        fcntl.flock(lock, fcntl.LOCK_EX)
        _gzip_into(plain, partial)
        os.replace(partial, target)
        _fsync_dir(plain.parent)
        plain.unlink()
    finally:
        os.close(lock)
    _fsync_dir(plain.parent)
    return target


def _gzip_into(plain: Path, partial: Path) -> None:
    with plain.open("rb") as src, partial.open("wb") as raw:
        with gzip.GzipFile(
            filename=plain.name, mode="wb", fileobj=raw, compresslevel=6, mtime=0
        ) as z:
            while chunk := src.read(_CHUNK):
                z.write(chunk)
        raw.flush()
        os.fsync(raw.fileno())


_Pending = tuple[date, bytes, asyncio.Future[None]]


class ArchiveWriter:
    """``async with ArchiveWriter(dir, "deliveries") as w: await w.append(line, day)``.

    ``append`` returns once the line is written and fsynced (or raises
    :class:`ArchiveError`). Use it from one event loop; the clock decides
    which days are past at start.
    """

    def __init__(
        self, directory: Path, prefix: str, clock: Callable[[], datetime] = utc_now
    ) -> None:
        if not re.fullmatch(r"[A-Za-z0-9_.]+", prefix):
            raise ValueError(f"archive prefix {prefix!r}: use letters, digits, '_' or '.'")
        self.directory = directory
        self.prefix = prefix
        self._clock = clock
        self._pattern = re.compile(rf"{re.escape(prefix)}-(\d{{4}}-\d{{2}}-\d{{2}})\.jsonl")
        self._pending: list[_Pending] = []
        self._wakeup = asyncio.Event()
        self._closing = False
        self._task: asyncio.Task[None] | None = None
        self._compressions: set[asyncio.Task[None]] = set()
        self._fd: int | None = None
        self._day: date | None = None

    def path_for(self, day: date) -> Path:
        return self.directory / f"{self.prefix}-{day.isoformat()}.jsonl"

    # -- life cycle -------------------------------------------------------------

    async def start(self) -> None:
        """Create the directory, compress past days' leftovers, start the writer task."""
        if self._task is not None:
            raise RuntimeError("the archive writer is already started")
        today = self._clock().astimezone(UTC).date()
        leftovers = await asyncio.to_thread(self._prepare_directory, today)
        for path in leftovers:
            self._compress_later(path)
        self._task = asyncio.create_task(self._run(), name=f"archive-writer:{self.prefix}")

    def _prepare_directory(self, today: date) -> list[Path]:
        self.directory.mkdir(parents=True, exist_ok=True)
        for partial in self.directory.glob(f"{self.prefix}-*.jsonl.gz.partial"):
            # A compression that did not finish; its plain file is still there.
            partial.unlink()
        past = []
        for path in sorted(self.directory.glob(f"{self.prefix}-*.jsonl")):
            m = self._pattern.fullmatch(path.name)
            if m and date.fromisoformat(m.group(1)) < today:
                past.append(path)
        return past

    async def close(self) -> None:
        """Write what is pending, stop the writer, finish compressions, close the file."""
        self._closing = True
        self._wakeup.set()
        if self._task is not None:
            await self._task
            self._task = None
        if self._compressions:
            await asyncio.gather(*self._compressions, return_exceptions=True)
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    async def __aenter__(self) -> ArchiveWriter:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    # -- appending --------------------------------------------------------------

    async def append(self, line: bytes, day: date) -> None:
        """Append one complete line (ending in a newline) to ``day``'s file, durably.

        A line for a day already rotated out (a delivery stamped just before
        midnight, written just after) goes to the current file instead, since
        the past file is compressed and never reopened.
        """
        if not line.endswith(b"\n") or b"\n" in line[:-1]:
            raise ValueError("an archive line must be one line ending in a newline")
        if self._task is None or self._closing:
            raise ArchiveError("the archive writer is not running")
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._pending.append((day, line, future))
        self._wakeup.set()
        await future

    async def _run(self) -> None:
        while True:
            if not self._pending:
                if self._closing:
                    return
                self._wakeup.clear()
                await self._wakeup.wait()
                continue
            batch, self._pending = self._pending, []
            error: BaseException | None = None
            try:
                await self._commit(batch)
            except Exception as exc:
                log.error("archive %s: write failed: %s", self.directory, exc)
                error = exc
            for _, _, future in batch:
                if future.done():
                    continue
                if error is None:
                    future.set_result(None)
                else:
                    future.set_exception(ArchiveError(f"could not archive the delivery: {error}"))

    async def _commit(self, batch: list[_Pending]) -> None:
        groups: list[tuple[date, list[bytes]]] = []
        current = self._day
        for day, line, _ in batch:
            if current is None or day > current:
                current = day
            if groups and groups[-1][0] == current:
                groups[-1][1].append(line)
            else:
                groups.append((current, [line]))
        for day, lines in groups:
            rotated = await asyncio.to_thread(self._write, day, b"".join(lines))
            if rotated is not None:
                self._compress_later(rotated)

    def _write(self, day: date, data: bytes) -> Path | None:
        """Write and fsync (in a worker thread); the previous day's path if it rotated."""
        rotated = None
        if self._day != day or self._fd is None:
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None
            if self._day is not None and self._day != day:
                rotated = self.path_for(self._day)
            self._fd = self._open(self.path_for(day))
            self._day = day
        try:
            self._hold(self.path_for(day))
            try:
                view = memoryview(data)
                while view:
                    written = os.write(self._fd, view)
                    view = view[written:]
                os.fsync(self._fd)
            finally:
                if self._fd is not None:
                    fcntl.flock(self._fd, fcntl.LOCK_UN)
        except OSError:
            # Reopen next time, so that a line torn by this failure is closed first.
            os.close(self._fd)
            self._fd = None
            raise
        return rotated

    def _hold(self, path: Path) -> None:
        """Take the file's lock, reopening it first if an erasure replaced it meanwhile
        (``_archive_erase``: it rewrites a file under the same lock): the lines go to the
        file of that name, never to one no longer in the folder."""
        for _ in range(100):  # each turn means another rewrite in between: bounded
            assert self._fd is not None
            fcntl.flock(self._fd, fcntl.LOCK_EX)
            try:
                same = os.stat(path).st_ino == os.fstat(self._fd).st_ino
            except FileNotFoundError:
                same = False
            if same:
                return
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None
            self._fd = self._open(path)
        raise ArchiveError(f"archive {path} kept being replaced while a line was written")

    def _open(self, path: Path) -> int:
        existed = path.exists()
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o640)
        try:
            size = os.fstat(fd).st_size
            if size:
                with path.open("rb") as f:
                    f.seek(size - 1)
                    torn = f.read(1) != b"\n"
                if torn:
                    log.warning("archive %s: closing a line torn by an earlier crash", path)
                    os.write(fd, b"\n")
            if not existed:
                _fsync_dir(path.parent)
        except BaseException:
            os.close(fd)
            raise
        return fd

    # -- compression ------------------------------------------------------------

    def _compress_later(self, path: Path) -> None:
        task = asyncio.create_task(self._compress(path), name=f"archive-compress:{path.name}")
        self._compressions.add(task)
        task.add_done_callback(self._compressions.discard)

    async def _compress(self, path: Path) -> None:
        try:
            await asyncio.to_thread(compress_file, path)
        except FileNotFoundError:
            pass  # already compressed
        except OSError as exc:
            # The plain file stays; the next start tries again.
            log.error("archive %s: compression failed: %s", path, exc)
