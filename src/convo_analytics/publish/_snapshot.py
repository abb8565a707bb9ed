"""Published snapshots: what readers (the dashboard, `convo serve`) read while runs write.

DuckDB lets one process write a database file or many processes read it,
never both. So readers never open the warehouse itself: a run publishes a
byte copy of it (made right after a checkpoint, while the run holds the
warehouse, so the copy is consistent) under ``data/published/``, and then
swaps the ``CURRENT`` pointer to it with an atomic rename. ``CURRENT`` records
the snapshot's size and SHA-256 (and those of the older snapshots kept), so a
reader can check a file before using it (``_reader.py``). A run never writes
to a published file, only adds new ones and removes those beyond the
retention (a reader that still has one open keeps reading it: removing a file
on Linux leaves open handles working).

A publish leaves nothing behind when it fails: its own partial files are
removed at once, whatever the failure (a full disk, a failed ``prepare``, an
interrupt), and partial files of a killed publish are removed when the next
one starts (the published folder's lock, ``publish.lock``, which every
publisher holds, makes sure no other publish into the folder is under way).
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import duckdb
import orjson

from convo_analytics.errors import UserError
from convo_analytics.publish._pointer import (
    MAX_PREVIOUS,
    POINTER,
    PREFIX,
    SUFFIX,
    Pointer,
    SnapshotEntry,
    snapshot_file,
)
from convo_analytics.publish._snapshot_value import Snapshot

log = logging.getLogger(__name__)

PARTIAL = ".partial"
#: A testing knob: the publish folder behaves as if it sat on a filesystem of this many
#: bytes (free = this minus the bytes of the files in the folder), so that the full-disk
#: test runs where it cannot mount a small filesystem (see docs/decisions.md, D-PUBLISH-SPACE).
SPACE_LIMIT_ENV = "CONVO_PUBLISH_SPACE_LIMIT"
_CHUNK = 1 << 20


class PublishFailed(UserError):
    """The snapshot could not be written (no space, a write error); nothing was left behind."""


def space_needed(warehouse_bytes: int) -> int:
    """Free bytes a publish asks for: the copy, and room for ``prepare`` to change it."""
    return warehouse_bytes + warehouse_bytes // 50 + 4 * _CHUNK


def free_space(folder: Path) -> int:
    """Bytes that can still be written in ``folder`` (honouring SPACE_LIMIT_ENV)."""
    free = shutil.disk_usage(folder).free
    limit = os.environ.get(SPACE_LIMIT_ENV)
    if limit:
        try:
            size = int(limit)
        except ValueError:
            raise UserError(f"{SPACE_LIMIT_ENV}={limit!r} is not a number of bytes") from None
        used = sum(p.lstat().st_size for p in folder.iterdir() if p.is_file())
        free = min(free, max(0, size - used))
    return free


def publish_snapshot(
    con: duckdb.DuckDBPyConnection,
    db_path: Path,
    published_dir: Path,
    keep: int = 3,
    prepare: Callable[[duckdb.DuckDBPyConnection], None] | None = None,
) -> Snapshot:
    """Copy the warehouse ``con`` has open (for writing) into a new snapshot and point at it.

    The caller holds the warehouse (and the writers' locks: the warehouse's and the
    published folder's), so nothing else writes during the copy. ``prepare`` may
    change the copy (and only the copy) before readers see it. Raises PublishFailed,
    with every file it wrote removed and ``CURRENT`` as it was, when the copy cannot
    be made.
    """
    if keep < 1:
        raise UserError("keep at least one published snapshot (--keep 1 or more)")
    con.execute("CHECKPOINT")
    published_dir.mkdir(parents=True, exist_ok=True)
    remove_stale_partials(published_dir)
    needed, free = space_needed(db_path.stat().st_size), free_space(published_dir)
    if free < needed:
        raise PublishFailed(
            f"not enough space in {published_dir} to publish: about {_mb(needed)} needed, "
            f"{_mb(free)} free. The published snapshot stays as it was; free some space there "
            "(or lower publish.keep) and publish again"
        )
    now = datetime.now(UTC)
    snapshot_id = now.strftime("%Y%m%dT%H%M%S%fZ")
    target = published_dir / snapshot_file(snapshot_id)
    written = [target.with_name(target.name + PARTIAL), published_dir / (POINTER + PARTIAL)]
    try:
        entry = _write_copy(db_path, target, snapshot_id, now, prepare)
        written.append(target)
        previous = _still_kept(_previous_entries(published_dir), published_dir, keep, target)
        _write_pointer(published_dir, Pointer(**entry.model_dump(), previous=previous))
    except BaseException as exc:  # whatever stopped it, nothing it wrote stays behind
        for path in (*written, *_wal_of(written)):
            path.unlink(missing_ok=True)
        if isinstance(exc, OSError | duckdb.Error):  # a full disk shows as either
            raise PublishFailed(
                f"publishing to {published_dir} failed: {_reason(exc)}. The published snapshot "
                "stays as it was and nothing was left behind; fix that and publish again"
            ) from None
        raise
    _fsync_folder(published_dir)  # the renames survive a power cut
    _prune(published_dir, keep, target)
    return Snapshot(target, snapshot_id, entry.publishedAt)


def remove_stale_partials(published_dir: Path) -> list[Path]:
    """Remove what a killed publish left (its partial snapshot, WAL and pointer)."""
    stale = [
        *published_dir.glob(f"{PREFIX}*{SUFFIX}{PARTIAL}*"),
        published_dir / (POINTER + PARTIAL),
    ]
    removed = [p for p in stale if p.is_file() or p.is_symlink()]
    for path in removed:
        path.unlink(missing_ok=True)
    if removed:
        log.warning("removed %d partial file(s) a killed publish left in %s: %s", len(removed),
                    published_dir, ", ".join(p.name for p in removed))  # fmt: skip
    return removed


def _write_copy(
    db_path: Path,
    target: Path,
    snapshot_id: str,
    now: datetime,
    prepare: Callable[[duckdb.DuckDBPyConnection], None] | None,
) -> SnapshotEntry:
    """The copy as ``<target>.partial``, prepared, hashed, fsynced and renamed to ``target``."""
    partial = target.with_name(target.name + PARTIAL)
    shutil.copyfile(db_path, partial)
    if prepare is not None:
        copy = duckdb.connect(str(partial))
        try:
            prepare(copy)
            copy.execute("CHECKPOINT")
        finally:
            copy.close()
    digest = hashlib.sha256()
    with partial.open("rb") as f:
        while chunk := f.read(_CHUNK):
            digest.update(chunk)
        os.fsync(f.fileno())
    size = partial.stat().st_size
    partial.replace(target)
    published_at = now.isoformat(timespec="seconds").replace("+00:00", "Z")
    return SnapshotEntry(file=target.name, snapshotId=snapshot_id, publishedAt=published_at,
                         size=size, sha256=digest.hexdigest())  # fmt: skip


def _write_pointer(published_dir: Path, pointer: Pointer) -> None:
    """Replace ``CURRENT`` atomically: readers see the old pointer or the new one, whole."""
    tmp = published_dir / (POINTER + PARTIAL)
    tmp.write_bytes(orjson.dumps(pointer.model_dump()))
    with tmp.open("rb") as f:
        os.fsync(f.fileno())
    tmp.replace(published_dir / POINTER)


def _fsync_folder(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _previous_entries(published_dir: Path) -> list[SnapshotEntry]:
    """The snapshots the current pointer names (none when it is missing or malformed)."""
    try:
        raw = (published_dir / POINTER).read_bytes()
        return Pointer.model_validate_json(raw).entries()
    except (OSError, ValueError):
        return []


def _still_kept(
    entries: list[SnapshotEntry], published_dir: Path, keep: int, newest: Path
) -> list[SnapshotEntry]:
    """The entries whose files survive the pruning that follows, newest first."""
    kept = {p.name for p in _snapshots(published_dir)[:keep]} - {newest.name}
    return [e for e in entries if e.file in kept][: min(keep - 1, MAX_PREVIOUS)]


def _snapshots(published_dir: Path) -> list[Path]:
    return sorted(published_dir.glob(f"{PREFIX}*{SUFFIX}"), reverse=True)


def _prune(published_dir: Path, keep: int, current: Path) -> None:
    """Remove snapshots beyond the newest ``keep`` (never the current one)."""
    for old in _snapshots(published_dir)[keep:]:
        if old != current:
            old.unlink(missing_ok=True)
            old.with_name(old.name + ".wal").unlink(missing_ok=True)


def _wal_of(paths: list[Path]) -> list[Path]:
    return [p.with_name(p.name + ".wal") for p in paths]


def _reason(exc: BaseException) -> str:
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror.lower()
    return " ".join(str(exc).split())[:300]


def _mb(n: int) -> str:
    return f"{n / 1_000_000:,.1f} MB"
