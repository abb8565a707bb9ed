"""The audit log file: records appended under a lock, fsynced, one JSON line each.

Dashboard sessions, `convo serve` workers and CLI commands append to one file from
several processes: each append takes an exclusive ``flock`` on ``<log>.lock``, reads
the last record (from the end of the file, so an append costs the same however long
the log is), writes the next one with a single ``write`` and fsyncs it. A reader takes
the same lock shared, so it never sees half a record.

A kill in the middle of a write can leave a last line without its end (a torn line).
It is not a record: ``convo audit verify`` reports it, and the next append removes it
(the file is truncated to its last whole record) and says so in its own record
(``detail.repaired``: the torn bytes' length, SHA-256 and text), so the repair is in
the chain itself. A last line that is a whole record missing only its newline (an
editor's save) is kept and completed instead.

``<log>.heads`` lists chain heads (``SEQ:HASH`` with when and by whom) recorded by
each ``convo run`` and ``convo audit head``: a log cut short after a head was
recorded no longer reaches it, which ``convo audit verify`` reports.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import orjson

from convo_analytics.audit._chain import (
    FIELDS,
    GENESIS,
    WHAT_MAX_CHARS,
    Head,
    check_action,
    cut,
    now_text,
    plain,
    record_hash,
    shape_problem,
)
from convo_analytics.errors import UserError

__all__ = ["AuditError", "AuditLog", "Line"]

_BLOCK = 1 << 16
#: Text of a torn line kept in the repairing record (its length and hash are kept whole).
_TORN_TEXT_CHARS = 4000
#: Subjects a record lists at most (``detail.subjects_total`` says how many there were).
_MAX_SUBJECTS = 1000


class AuditError(UserError):
    """The audit log cannot be written or read (its folder, permissions, a damaged last
    record): the audited action is refused rather than left unrecorded."""


Line = tuple[int, bytes, bool]
"""A line of the log: its number (from 1), its bytes without the newline, and whether it
ended with one."""


class AuditLog:
    """The append-only, hash-chained log at ``path`` (JSON lines), with ``<path>.lock``
    and ``<path>.heads`` beside it."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.lock_path = path.with_name(path.name + ".lock")
        self.heads_path = path.with_name(path.name + ".heads")

    def __repr__(self) -> str:
        return f"AuditLog({str(self.path)!r})"

    def check(self) -> None:
        """An AuditError now, making nothing, when the log could not be written: the file
        is a folder or read-only, or the folder it would be made in is a file or
        read-only. Commands check before they read, so a log they could not write
        stops them before they start."""
        if self.path.exists():
            if not self.path.is_file() or not os.access(self.path, os.W_OK):
                raise AuditError(
                    f"the audit log {self.path} is not a file this process may write; point "
                    "audit.file (CONVO_AUDIT_FILE) at one, or fix its permissions"
                )
            return
        folder = self.path.parent
        while not folder.exists() and folder != folder.parent:
            folder = folder.parent
        if not folder.is_dir():
            raise AuditError(
                f"the audit log {self.path} cannot be made: {folder} is not a folder; point "
                "audit.file (CONVO_AUDIT_FILE) elsewhere"
            )
        if not os.access(folder, os.W_OK | os.X_OK):
            raise AuditError(
                f"the audit log {self.path} cannot be made: the folder {folder} is read-only "
                "for this process; fix its permissions or point audit.file (CONVO_AUDIT_FILE) "
                "elsewhere"
            )

    # -- locking -----------------------------------------------------------------------

    @contextmanager
    def locked(self, *, shared: bool = False) -> Iterator[None]:
        """Hold the log's lock: exclusive to write (the lock file made with its folder),
        shared to read. A reader that cannot open the lock file (none was ever made: no
        writer has written; or it may only read the folder, as a reviewer may) reads
        without it."""
        fd: int | None = None
        if shared:
            for flags in (os.O_RDONLY, os.O_RDWR | os.O_CREAT):
                try:
                    fd = os.open(self.lock_path, flags, 0o600)
                    break
                except OSError:
                    continue
        else:
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                fd = os.open(self.lock_path, os.O_RDWR | os.O_CREAT, 0o600)
            except OSError as exc:
                raise self._error("cannot be locked", exc) from None
        if fd is None:
            yield
            return
        try:
            fcntl.flock(fd, fcntl.LOCK_SH if shared else fcntl.LOCK_EX)
            yield
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)

    def _error(self, what: str, exc: OSError) -> AuditError:
        reason = exc.strerror or type(exc).__name__
        return AuditError(
            f"the audit log {self.path} {what} ({reason}); fix the file's folder or "
            "permissions, or point audit.file (CONVO_AUDIT_FILE) elsewhere"
        )

    # -- appending ---------------------------------------------------------------------

    def append(
        self,
        fields: Mapping[str, Any],
        *,
        joining: Callable[[Head], Mapping[str, Any]] | None = None,
    ) -> dict[str, Any]:
        """Append one record of ``fields`` (who, action, what, rows, workspace, subjects,
        detail) and return it with its seq, prev and hash.

        ``joining`` is called under the lock with the head the record follows
        (``Head(seq_before, prev)``, so the record is ``seq_before + 1``), before the record
        is made; what it returns joins the record's ``detail``: a manifest written there can
        name its place in the chain, and the record the manifest's SHA-256.
        """
        with self.locked():
            try:
                fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
            except OSError as exc:
                raise self._error("cannot be opened for appending", exc) from None
            try:
                created = os.fstat(fd).st_size == 0
                head, repaired = self._tail(fd, repair=True)
                detail = dict(fields.get("detail") or {})
                if repaired:
                    detail["repaired"] = repaired
                if joining is not None:
                    detail.update(joining(head))
                record = _record(fields, head, detail)
                line = orjson.dumps(record) + b"\n"
                os.lseek(fd, 0, os.SEEK_END)
                os.write(fd, line)
                os.fsync(fd)
            except OSError as exc:
                raise self._error("cannot be written", exc) from None
            finally:
                os.close(fd)
            if created:
                _sync_folder(self.path.parent)
        return record

    def _tail(self, fd: int, *, repair: bool = False) -> tuple[Head, dict[str, Any] | None]:
        """The chain's head, from the file's last whole record. With ``repair``, a torn
        last line is cut off (and described, for the next record) or, when it is a whole
        record of the chain missing only its newline, completed."""
        size = os.fstat(fd).st_size
        end = _last_newline(fd, size) + 1  # where the whole lines end
        head = self._head_before(fd, end)
        if end == size:
            return head, None
        torn = os.pread(fd, size - end, end)
        if _continues(torn, head):
            if repair:
                os.pwrite(fd, b"\n", size)
                os.fsync(fd)
            record = orjson.loads(torn)
            return Head(record["seq"], record["hash"]), None
        if not repair:
            return head, None
        os.ftruncate(fd, end)
        os.fsync(fd)
        text = torn.decode("utf-8", "replace")
        return head, {
            "torn_line": {
                "bytes": len(torn),
                "sha256": hashlib.sha256(torn).hexdigest(),
                "text": cut(text, _TORN_TEXT_CHARS),
            }
        }

    def _head_before(self, fd: int, end: int) -> Head:
        """The head given by the whole line ending at ``end`` (none: the chain is empty)."""
        if end == 0:
            return Head(0, GENESIS)
        start = _last_newline(fd, end - 1) + 1
        raw = os.pread(fd, end - 1 - start, start)
        try:
            record = orjson.loads(raw)
        except orjson.JSONDecodeError:
            record = None
        problem = shape_problem(record)
        if problem is not None:
            raise AuditError(
                f"the audit log {self.path} ends with a damaged record ({problem}), so a new "
                "record cannot be chained to it: run 'convo audit verify' to see where, and "
                "restore the log from a copy"
            )
        assert isinstance(record, dict)
        return Head(int(record["seq"]), str(record["hash"]))

    # -- reading -----------------------------------------------------------------------

    def head(self) -> Head:
        """The chain's head now (a torn last line is not a record)."""
        if not self.path.exists():
            return Head(0, GENESIS)
        with self.locked(shared=True):
            try:
                fd = os.open(self.path, os.O_RDONLY)
            except FileNotFoundError:
                return Head(0, GENESIS)
            except OSError as exc:
                raise self._error("cannot be read", exc) from None
            try:
                return self._tail(fd)[0]
            finally:
                os.close(fd)

    @contextmanager
    def lines(self) -> Iterator[Iterator[Line]]:
        """Every line of the log, read under the shared lock (none when there is no log)."""
        with self.locked(shared=True):
            try:
                f = self.path.open("rb")
            except FileNotFoundError:
                yield iter(())
                return
            except OSError as exc:
                raise self._error("cannot be read", exc) from None
            with f:
                yield (
                    (number, raw.rstrip(b"\n"), raw.endswith(b"\n"))
                    for number, raw in enumerate(f, 1)
                )

    # -- heads -------------------------------------------------------------------------

    def record_head(self, by: str) -> Head:
        """The head now, also appended to ``<log>.heads`` (with when and ``by``)."""
        with self.locked():
            head = Head(0, GENESIS)
            if self.path.exists():
                try:
                    fd = os.open(self.path, os.O_RDONLY)
                except OSError as exc:
                    raise self._error("cannot be read", exc) from None
                try:
                    head = self._tail(fd)[0]
                finally:
                    os.close(fd)
            entry = {"seq": head.seq, "hash": head.hash, "when": now_text(), "by": cut(by)}
            try:
                fd = os.open(self.heads_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
                try:
                    os.write(fd, orjson.dumps(entry) + b"\n")
                    os.fsync(fd)
                finally:
                    os.close(fd)
            except OSError as exc:
                raise AuditError(
                    f"the audit log's heads {self.heads_path} cannot be written "
                    f"({exc.strerror or type(exc).__name__}); fix the folder's permissions"
                ) from None
        return head

    def heads(self) -> tuple[list[dict[str, Any]], int]:
        """The heads recorded in ``<log>.heads`` (each seq, hash, when, by), and how many of
        its lines are not a head (damaged)."""
        try:
            data = self.heads_path.read_bytes()
        except FileNotFoundError:
            return [], 0
        except OSError as exc:
            raise self._error("heads cannot be read", exc) from None
        found, bad = [], 0
        for raw in data.splitlines():
            if not raw.strip():
                continue
            try:
                entry = orjson.loads(raw)
                Head.parse(f"{entry['seq']}:{entry['hash']}")
            except (orjson.JSONDecodeError, KeyError, TypeError, ValueError):
                bad += 1
                continue
            found.append(entry)
        return found, bad


def _record(fields: Mapping[str, Any], head: Head, detail: dict[str, Any]) -> dict[str, Any]:
    """The next record: ``fields`` limited to what a record holds, chained to ``head``."""
    subjects = [str(s) for s in fields.get("subjects") or ()]
    if len(subjects) > _MAX_SUBJECTS:
        detail["subjects_total"] = len(subjects)
        subjects = subjects[:_MAX_SUBJECTS]
    rows = fields.get("rows")
    workspace = fields.get("workspace")
    record: dict[str, Any] = {
        "seq": head.seq + 1,
        "when": now_text(),
        "who": cut(str(fields.get("who") or "unknown")),
        "action": check_action(str(fields["action"])),
        "what": cut(str(fields.get("what") or ""), WHAT_MAX_CHARS),
        "rows": int(rows) if rows is not None else None,
        "workspace": cut(str(workspace)) if workspace is not None else None,
        "subjects": subjects,
        "detail": _limited(plain(detail)),
        "prev": head.hash,
    }
    assert list(record) == list(FIELDS[:-1])
    record["hash"] = record_hash(record)
    return record


def _limited(value: Any) -> Any:
    """A detail's texts cut to WHAT_MAX_CHARS (a torn line's text is cut before)."""
    if isinstance(value, str):
        return cut(value, WHAT_MAX_CHARS)
    if isinstance(value, dict):
        return {k: _limited(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_limited(v) for v in value]
    return value


def _continues(raw: bytes, head: Head) -> bool:
    """Whether ``raw`` is a whole record that follows ``head`` in the chain."""
    try:
        record = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return False
    return (
        shape_problem(record) is None
        and record["seq"] == head.seq + 1
        and record["prev"] == head.hash
        and record["hash"] == record_hash(record)
    )


def _last_newline(fd: int, before: int) -> int:
    """The offset of the last newline before offset ``before`` (-1: none)."""
    pos = before
    while pos > 0:
        step = min(_BLOCK, pos)
        pos -= step
        found = os.pread(fd, step, pos).rfind(b"\n")
        if found != -1:
            return pos + found
    return -1


def _sync_folder(folder: Path) -> None:
    """Make a new file's name durable (its folder's entry fsynced)."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
