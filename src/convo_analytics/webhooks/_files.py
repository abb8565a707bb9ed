"""Which archive files a run reads, and from where (decision D-INCREMENTAL-INGEST).

A file is remembered by its path, its size, the hash of its first bytes and of
its bytes before where the last run stopped (``ingest_files``). A run then
skips a file read to its end that has not changed, reads only the new lines of
one that grew, and reads again from the start, saying so, a file that changed
in place (its start, or the bytes before where the last read stopped, are not
what they were): its lines already stored come out as duplicates. A gzip file
that is the compressed copy of a plain file already read (the receiver
compresses each day's file when the day is over) continues where that one was
read to.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from convo_analytics.webhooks._lines import TAIL, is_gzip

#: How much of a file's start its identity hashes.
HEAD = 1 << 16

#: ingest_files' columns, in order.
STATE_COLUMNS = (
    "path", "size", "head_bytes", "head_hash", "tail_hash", "stream_offset", "lines",
    "stream_tail_hash", "complete", "ended_unterminated", "held_back", "continues",
    "first_run_id", "last_run_id", "read_at",
)  # fmt: skip


@dataclass(slots=True)
class FileState:
    """A row of ``ingest_files``: how far a file was read and what it looked like."""

    path: str
    size: int = 0
    head_bytes: int = 0
    head_hash: str = ""
    tail_hash: str | None = None
    stream_offset: int = 0
    lines: int = 0
    stream_tail_hash: str | None = None
    complete: bool = False
    ended_unterminated: bool = False
    held_back: int = 0
    continues: str | None = None
    first_run_id: str | None = None
    last_run_id: str | None = None
    read_at: datetime | None = None

    def row(self) -> list[Any]:
        return [getattr(self, name) for name in STATE_COLUMNS]


@dataclass(slots=True)
class Plan:
    """How to read one file this run."""

    path: Path
    source: str  # the path as stored (absolute)
    action: str  # new, resume, continue (a gzip copy of a plain file), skip, changed, full
    start: int = 0  # stream offset to read from
    first_line: int = 1
    state: FileState | None = None  # what the last read left (continue: the plain file's)
    why: str = ""

    @property
    def reads(self) -> bool:
        return self.action != "skip"


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _pread(path: Path, size: int, at: int) -> bytes:
    fd = os.open(path, os.O_RDONLY)
    try:
        return os.pread(fd, size, at)
    finally:
        os.close(fd)


def identity(path: Path, size: int) -> tuple[int, str, str]:
    """(head bytes, hash of the first bytes, hash of the TAIL bytes before ``size``)."""
    head_bytes = min(HEAD, size)
    low = max(0, size - TAIL)
    return head_bytes, _sha(_pread(path, head_bytes, 0)), _sha(_pread(path, size - low, low))


def load_states(con: Any, sources: Iterable[str]) -> dict[str, FileState]:
    wanted = list(dict.fromkeys(sources))
    if not wanted:
        return {}
    rows = con.execute(
        f"SELECT {', '.join(STATE_COLUMNS)} FROM ingest_files WHERE path IN (SELECT unnest(?))",
        [wanted],
    ).fetchall()
    return {row[0]: FileState(*row) for row in rows}


def with_siblings(sources: Iterable[str]) -> list[str]:
    """The sources, and the plain file each receiver's gzip copy may continue."""
    out = []
    for source in sources:
        out.append(source)
        if (sibling := _sibling(source)) is not None:
            out.append(sibling)
    return out


def _sibling(source: str) -> str | None:
    """The plain file a receiver's ``X.jsonl.gz`` was compressed from (``X.jsonl``)."""
    return source[: -len(".gz")] if source.endswith(".jsonl.gz") else None


def plan_files(
    paths: Sequence[Path], states: dict[str, FileState], *, full: bool = False
) -> list[Plan]:
    """A plan per file, in the order given (see the module docstring)."""
    plans = []
    for path in paths:
        source = str(path.resolve())
        state = states.get(source)
        if full:
            plans.append(Plan(path, source, "full", why="--full: read from the start"))
            continue
        if state is None:
            sibling = _sibling(source)
            plain = states.get(sibling) if sibling else None
            if plain is not None and plain.stream_offset and is_gzip(path):
                plans.append(
                    Plan(path, source, "continue", plain.stream_offset, plain.lines + 1, plain,
                         f"the compressed copy of {plain.path}, read on from its line "
                         f"{plain.lines + 1}")
                )  # fmt: skip
            else:
                plans.append(Plan(path, source, "new"))
            continue
        plans.append(_plan_known(path, source, state))
    return plans


def _plan_known(path: Path, source: str, state: FileState) -> Plan:
    size = path.stat().st_size
    changed = Plan(path, source, "changed")
    if size < state.head_bytes or _sha(_pread(path, state.head_bytes, 0)) != state.head_hash:
        changed.why = "its first bytes are not what they were"
        return changed
    gzipped = is_gzip(path)
    if not gzipped and size < state.stream_offset:
        changed.why = f"it is shorter ({size:,} bytes) than where the last read ended"
        return changed
    unchanged = (
        size == state.size
        and state.tail_hash is not None
        and (_sha(_pread(path, size - max(0, size - TAIL), max(0, size - TAIL))) == state.tail_hash)
    )
    if gzipped:
        if unchanged:
            return Plan(path, source, "skip", why="unchanged since it was read")
    elif state.stream_offset:
        low = max(0, state.stream_offset - TAIL)
        before = _pread(path, state.stream_offset - low, low)
        if _sha(before) != state.stream_tail_hash:
            changed.why = "the bytes before where the last read ended are not what they were"
            return changed
        if size == state.stream_offset:
            return Plan(path, source, "skip", why="read to its end")
    return Plan(
        path, source, "resume", state.stream_offset, state.lines + 1, state,
        f"read on from byte {state.stream_offset:,} (line {state.lines + 1})",
    )  # fmt: skip


def next_state(
    plan: Plan, run_id: str, now: datetime, *, offset: int, lines: int, tail: bytes,
    ended_unterminated: bool,
) -> FileState:  # fmt: skip
    """The state after reading a file up to stream ``offset`` (``lines`` lines in all)."""
    before = plan.state if plan.action in ("resume",) else None
    state = (
        dataclasses.replace(before)
        if before is not None
        else FileState(plan.source, first_run_id=run_id)
    )
    state.path = plan.source
    if not state.head_bytes:  # a first read: its start identifies the file from now on
        size = os.stat(plan.path).st_size
        state.head_bytes = min(HEAD, size)
        state.head_hash = _sha(_pread(plan.path, state.head_bytes, 0))
    if plan.action == "continue" and plan.state is not None:
        state.continues = plan.state.path
    state.stream_offset = offset
    state.lines = lines
    state.stream_tail_hash = _sha(tail)
    state.ended_unterminated = ended_unterminated
    state.last_run_id = run_id
    state.read_at = now
    return state


def finish_state(state: FileState, path: Path, *, complete: bool, held_back: int) -> FileState:
    """The state at the end of a file: its identity as it is now, read to where it was."""
    size = os.stat(path).st_size
    state.size = size
    state.head_bytes, state.head_hash, state.tail_hash = identity(path, size)
    state.complete = complete
    state.held_back = held_back
    return state
