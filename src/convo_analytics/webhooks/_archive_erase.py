"""A person's lines taken out of the receiver's archive files (issue 30, D-ERASURE).

The receiver's archive (``webhooks.archive_dir``: the flat endpoint's files at its top,
each ``[[workspaces]]`` endpoint's under ``workspaces/NAME/``, and each one's
``quarantine/``) is append-only for the receiver; an erasure is the one thing that
rewrites it. A file is rewritten whole: its lines read, those naming the person
dropped, the rest written to ``<file>.erasing``, fsynced and renamed over the file. A
sealed line carries its own seal (``localMac`` covers the line alone), so the lines
kept stay trusted; an unscrubbed line's signature is its own too.

Today's plain file may be open in a running receiver, appending. Both sides take an
exclusive ``flock`` on the file while they work: the receiver around each write
(``ArchiveWriter``), the eraser from before it reads until after the rename; and the
receiver, once it holds the lock, checks that its descriptor is still the file of that
name, and reopens it if an erasure replaced it. So no delivery written meanwhile is
lost, and none is written into the replaced file. Compression at the end of a day
takes the same lock.

Which lines are the person's: those that name someone on the workspace's suppression
list (``ErasedLines``): the line is read as JSON, and so is the delivery body it holds,
and each is checked as extract and ingest check a record (``names_suppressed``: its
``conversationId``, ``externalUserId``, ``email``, ``leadId`` hashed with the
workspace's key). The list, not the person's ids, is what is matched: a re-run after a
kill, when the warehouse no longer holds those ids, still finds the lines; and a line of
anyone erased before is dropped too. In the flat endpoint's files, which may hold
several workspaces' events, the event must also name the workspace (unless the flat
endpoint is the workspace itself, a configuration without ``[[workspaces]]``). A line
that is not JSON is kept (nothing in it can be matched to a person by hash).

The ingest remembers files by size and hashes of their head and tail: a rewritten file
reads as changed and is read again whole by the next ingest, its lines duplicates of
what is stored (or suppressed).
"""

from __future__ import annotations

import base64
import fcntl
import gzip
import hashlib
import os
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from convo_analytics.privacy import SubjectHasher, names_suppressed

__all__ = ["ArchiveRewrite", "ErasedLines", "erase_archive_lines", "locked_file"]

ERASING = ".erasing"
_CHUNK = 1 << 20


@dataclass(frozen=True, slots=True)
class ArchiveRewrite:
    """One archive file rewritten: its path, lines dropped, its new SHA-256."""

    path: str
    lines: int
    sha256: str


@contextmanager
def locked_file(path: Path) -> Iterator[int]:
    """An exclusive ``flock`` on the file now named ``path``, held for the block (taken
    again if the file was replaced while the lock was awaited); FileNotFoundError when
    it went meanwhile (compressed at the end of its day)."""
    for _ in range(100):
        fd = os.open(path, os.O_RDONLY)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            if os.stat(path).st_ino == os.fstat(fd).st_ino:
                yield fd
                return
        finally:
            os.close(fd)  # releases the lock
    raise OSError(f"{path} kept being replaced while waiting for its lock")


def _files(folder: Path) -> list[Path]:
    if not folder.is_dir():
        return []
    return sorted(
        p
        for p in folder.rglob("*")
        if p.is_file() and (p.name.endswith(".jsonl") or p.name.endswith(".jsonl.gz"))
    )


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _rewrite(path: Path, keep: Iterable[bytes], gzipped: bool) -> str:
    tmp = path.with_name(path.name + ERASING)
    digest = hashlib.sha256()
    with tmp.open("wb") as raw:
        if gzipped:
            with gzip.GzipFile(filename=path.name.removesuffix(".gz"), mode="wb", fileobj=raw,
                               compresslevel=6, mtime=0) as z:  # fmt: skip
                for line in keep:
                    z.write(line)
        else:
            for line in keep:
                raw.write(line)
        raw.flush()
        os.fsync(raw.fileno())
    with tmp.open("rb") as f:
        for block in iter(lambda: f.read(_CHUNK), b""):
            digest.update(block)
    os.replace(tmp, path)
    _fsync_dir(path.parent)
    return digest.hexdigest()


class ErasedLines:
    """Whether an archive line names someone on a workspace's suppression list."""

    def __init__(
        self,
        hasher: SubjectHasher,
        lists: Mapping[str, frozenset[str]],
        workspace_id: str,
        *,
        flat: bool,
    ) -> None:
        self.hasher = hasher
        self.lists = lists
        self.workspace_id = workspace_id
        self.flat = flat

    def __call__(self, line: bytes) -> bool:
        try:
            record = orjson.loads(line)
        except orjson.JSONDecodeError:
            return False
        if not isinstance(record, dict):
            return False
        trees: list[Any] = [record]
        body = record.get("body")
        if isinstance(body, str):
            trees.append(_parsed(body.encode("utf-8")))
        elif isinstance(record.get("bodyBase64"), str):
            with suppress(ValueError):
                trees.append(_parsed(base64.b64decode(record["bodyBase64"], validate=True)))
        if self.flat and not any(_names_workspace(t, self.workspace_id) for t in trees):
            return False
        return any(
            t is not None and names_suppressed(t, self.hasher, self.lists, None) for t in trees
        )


def _parsed(body: bytes) -> Any:
    try:
        return orjson.loads(body)
    except orjson.JSONDecodeError:
        return None


def _names_workspace(tree: Any, workspace_id: str) -> bool:
    if not isinstance(tree, dict):
        return False
    data = tree.get("data")
    named = {tree.get("workspaceId"), data.get("tenantId") if isinstance(data, dict) else None}
    return workspace_id in named


def _one_file(path: Path, gone: Callable[[bytes], bool]) -> ArchiveRewrite | None:
    try:
        return _one_locked(path, gone)
    except FileNotFoundError:  # compressed meanwhile: its .gz is read by a re-run
        return None


def _one_locked(path: Path, gone: Callable[[bytes], bool]) -> ArchiveRewrite | None:
    gzipped = path.name.endswith(".gz")
    with locked_file(path):
        if gzipped:
            with gzip.open(path, "rb") as f:
                data = f.read()
        else:
            data = path.read_bytes()
        lines = data.splitlines(keepends=True)
        keep = [line for line in lines if not gone(line)]
        dropped = len(lines) - len(keep)
        if not dropped:
            return None
        sha = _rewrite(path, keep, gzipped)
    return ArchiveRewrite(str(path), dropped, sha)


def erase_archive_lines(
    archive_dir: Path,
    workspace_name: str,
    workspace_id: str,
    hasher: SubjectHasher,
    lists: Mapping[str, frozenset[str]],
    *,
    flat_is_workspace: bool,
) -> list[ArchiveRewrite]:
    """Drop the lines naming anyone on the workspace's suppression list ``lists`` from its
    archive files (see the module); leftovers of a killed rewrite are removed first.
    Returns each file changed."""
    if not lists or not archive_dir.is_dir():
        return []
    for stale in archive_dir.rglob(f"*{ERASING}"):
        stale.unlink(missing_ok=True)
    changed = []
    own = ErasedLines(hasher, lists, workspace_id, flat=False)
    for path in _files(archive_dir / "workspaces" / workspace_name):
        if (done := _one_file(path, own)) is not None:
            changed.append(done)
    workspaces = archive_dir / "workspaces"
    flat = ErasedLines(hasher, lists, workspace_id, flat=not flat_is_workspace)
    for path in _files(archive_dir):
        if workspaces not in path.parents and (done := _one_file(path, flat)) is not None:
            changed.append(done)
    return changed
