"""Reading what was published: the one way the dashboard and `convo serve` find a snapshot.

``CURRENT`` is not trusted: it is parsed against its schema (``_pointer.py``),
and the snapshot it names is opened relative to the publish folder, without
following links, and checked before anything uses it: a regular file, the
recorded size, DuckDB's file header and the recorded SHA-256. When the newest
snapshot fails a check, the previous good one the pointer lists is used, and
the caller is told so (``Snapshot.passed_over``); when none passes, or the
pointer itself is malformed, :class:`SnapshotUnreadable` says so in one line.

Checksums are verified once per file per process: a published file is never
written again, so a file with the same device, inode, size, modification and
change times as one already verified is the same bytes (any write changes the
change time, which no one can set back).
"""

from __future__ import annotations

import errno
import hashlib
import logging
import os
import stat
import threading
from collections import OrderedDict
from pathlib import Path

from pydantic import ValidationError

from convo_analytics.publish._pointer import MAX_POINTER_BYTES, POINTER, Pointer, SnapshotEntry
from convo_analytics.publish._snapshot_value import (
    Snapshot,
    SnapshotUnreadable,
)

log = logging.getLogger(__name__)

#: DuckDB's database files carry this magic after an 8-byte checksum.
_DUCKDB_MAGIC = (8, b"DUCK")
_CHUNK = 1 << 20


class _Damaged(Exception):
    """One snapshot failed a check (the message says which)."""


def current_snapshot(published_dir: Path) -> Snapshot | None:
    """The snapshot readers should use now, or None when nothing was published yet.

    Raises SnapshotUnreadable when ``CURRENT`` exists but cannot be used.

    With ``read.source = "lake"`` the snapshot is a local copy of the lake's current
    tables instead (``_lake_copy.py``), made under ``published_dir``.
    """
    from convo_analytics.publish._lake_copy import lake_snapshot, lake_source

    lake = lake_source()
    if lake is not None:
        return lake_snapshot(lake, published_dir)
    raw = _read_pointer(published_dir)
    if raw is None:
        return None
    try:
        pointer = Pointer.model_validate_json(raw)
    except ValidationError as exc:
        raise SnapshotUnreadable(f"{POINTER} is not a snapshot pointer: {_first(exc)}") from None
    problems: list[str] = []
    for entry in pointer.entries():
        try:
            path = _checked(published_dir, entry)
        except _Damaged as exc:
            problems.append(f"{entry.file} {exc}")
            continue
        passed_over = "; ".join(problems) or None
        if passed_over:
            log.warning("reading the previous snapshot %s: %s", entry.snapshotId, passed_over)
        return Snapshot(path, entry.snapshotId, entry.publishedAt, passed_over)
    raise SnapshotUnreadable("; ".join(problems))


def _read_pointer(published_dir: Path) -> bytes | None:
    try:
        fd = os.open(published_dir / POINTER, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK
                     | os.O_CLOEXEC)  # fmt: skip
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as exc:
        raise SnapshotUnreadable(f"{POINTER} cannot be opened: {_os_reason(exc)}") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise SnapshotUnreadable(f"{POINTER} is not a regular file")
        if info.st_size > MAX_POINTER_BYTES:
            raise SnapshotUnreadable(f"{POINTER} is {info.st_size} bytes, not a pointer")
        return os.pread(fd, MAX_POINTER_BYTES + 1, 0)
    finally:
        os.close(fd)


def _checked(published_dir: Path, entry: SnapshotEntry) -> Path:
    """The snapshot's path once it passed every check; _Damaged otherwise.

    The file is opened relative to the folder (its name is a plain one, by the
    pointer's schema) and never through a link, so nothing outside the
    folder is opened.
    """
    try:
        folder = os.open(published_dir, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError as exc:
        raise _Damaged(f"cannot be reached: {_os_reason(exc)}") from None
    try:
        fd = os.open(entry.file, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC,
                     dir_fd=folder)  # fmt: skip
    except OSError as exc:
        raise _Damaged(f"cannot be opened: {_os_reason(exc)}") from None
    finally:
        os.close(folder)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise _Damaged("is not a regular file")
        if info.st_size != entry.size:
            raise _Damaged(f"is {info.st_size} bytes where {entry.size} were published")
        offset, magic = _DUCKDB_MAGIC
        if os.pread(fd, offset + len(magic), 0)[offset:] != magic:
            raise _Damaged("is not a DuckDB database")
        _verify_checksum(fd, info, entry.sha256)
    finally:
        os.close(fd)
    return published_dir / entry.file


_verified: OrderedDict[tuple[int, int, int, int, int, str], None] = OrderedDict()
_verified_lock = threading.Lock()
_VERIFIED_MAX = 64


def _verify_checksum(fd: int, info: os.stat_result, sha256: str) -> None:
    key = (info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns, sha256)
    with _verified_lock:
        if key in _verified:
            _verified.move_to_end(key)
            return
    digest = hashlib.sha256()
    offset = 0
    while chunk := os.pread(fd, _CHUNK, offset):
        digest.update(chunk)
        offset += len(chunk)
    if digest.hexdigest() != sha256:
        raise _Damaged("does not match the SHA-256 recorded when it was published")
    with _verified_lock:
        _verified[key] = None
        while len(_verified) > _VERIFIED_MAX:
            _verified.popitem(last=False)


def _first(exc: ValidationError) -> str:
    error = exc.errors()[0]
    where = ".".join(str(p) for p in error["loc"]) or "the whole file"
    return f"{where}: {error['msg']}"


def _os_reason(exc: OSError) -> str:
    if exc.errno == errno.ELOOP:
        return "it is a link (a publish writes plain files only, and links are never followed)"
    return exc.strerror or type(exc).__name__
