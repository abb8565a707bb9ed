"""`convo audit verify`: whether the log is the chain it was, and where it is not.

The records are read in order and each is checked on its own (its hash is that of its
content: an edit that did not recompute it shows here) and against the one before it
(its seq follows, its prev is that record's hash: a removed, inserted or reordered
record shows here, and so does an edit whose hash was recomputed, at the record after
it). Then each recorded head (``SEQ:HASH`` of a run, of `convo audit head`, of
``--head``) must be a record of the log: a head beyond its end means the log was cut
short, a head whose hash differs means the chain was rewritten up to there.

What this cannot see: someone able to write the log AND every place a head was
recorded can rewrite both consistently. Heads kept elsewhere (a run's ``--json`` in a
scheduler's log, ``convo audit head`` sent off the machine, ``--head``) make that hard.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from convo_analytics.audit._chain import GENESIS, Head, record_hash, shape_problem
from convo_analytics.audit._log import AuditLog
from convo_analytics.errors import UserError

__all__ = [
    "KnownHead",
    "Manifest",
    "Problem",
    "Verification",
    "read_manifest",
    "recorded_heads",
    "verify",
]


@dataclass(frozen=True, slots=True)
class KnownHead:
    """A head recorded somewhere, and where (``recorded by run RUN at WHEN``)."""

    head: Head
    source: str


@dataclass(frozen=True, slots=True)
class Manifest:
    """An export's manifest sealed into the chain: its file, its bytes' SHA-256 and the
    place it names (``audit.seq``, ``audit.prev``)."""

    path: Path
    sha256: str
    seq: int
    prev: str


def read_manifest(path: Path) -> Manifest:
    """The manifest at ``path`` as :func:`verify` checks it (a UserError naming the file
    when it cannot be read or names no place in the chain)."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise UserError(
            f"--manifest {path}: cannot be read ({exc.strerror}); name an export's *.manifest.json"
        ) from None
    try:
        place = orjson.loads(data)["audit"]
        seq, prev = int(place["seq"]), str(place["prev"])
    except (orjson.JSONDecodeError, KeyError, TypeError, ValueError):
        raise UserError(
            f"--manifest {path}: not a manifest sealed into the audit log (no audit.seq and "
            "audit.prev); name a *.manifest.json written while audit.enabled was on"
        ) from None
    return Manifest(path, hashlib.sha256(data).hexdigest(), seq, prev)


@dataclass(frozen=True, slots=True)
class Problem:
    """The log differs from the chain here: at ``line`` (of the file), record ``seq``."""

    kind: str
    line: int | None
    seq: int | None
    message: str

    def as_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "line": self.line, "seq": self.seq, "message": self.message}


@dataclass(slots=True)
class Verification:
    """What ``verify`` found: the records read, the head, the problems (first one first)."""

    path: Path
    records: int = 0
    head: Head = field(default_factory=lambda: Head(0, GENESIS))
    problems: list[Problem] = field(default_factory=list)
    heads_checked: int = 0
    notes: list[str] = field(default_factory=list)
    #: Each record's hash by seq, for the seqs asked (an export's range, the heads).
    hashes: dict[int, str] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not self.problems

    @property
    def first(self) -> Problem | None:
        return self.problems[0] if self.problems else None

    def line(self) -> str:
        """One line: whole (how many records, the head, heads checked), or the first bad
        record."""
        if self.first is not None:
            more = len(self.problems) - 1
            tail = f" ({more} more problem{'s' if more > 1 else ''} after it)" if more else ""
            return f"audit log {self.path}: {self.first.message}{tail}"
        checked = f"; {self.heads_checked} recorded heads match" if self.heads_checked else ""
        return (
            f"audit log {self.path}: the chain is whole: {self.records} records, "
            f"head {self.head}{checked}"
        )

    def as_json(self) -> dict[str, Any]:
        return {
            "file": str(self.path),
            "ok": self.ok,
            "records": self.records,
            "head": {"seq": self.head.seq, "hash": self.head.hash},
            "headsChecked": self.heads_checked,
            "problems": [p.as_json() for p in self.problems],
            "notes": self.notes,
        }


def verify(
    log: AuditLog,
    heads: Sequence[KnownHead] = (),
    *,
    keep: Iterable[int] = (),
    manifests: Sequence[Manifest] = (),
) -> Verification:
    """Check the chain of ``log``, that it reaches every head of ``heads`` and that each of
    ``manifests`` is the one its record holds; the hashes of the records ``keep`` names
    (and of the heads') are kept in ``hashes``."""
    result = Verification(log.path)
    wanted = {h.head.seq for h in heads} | set(keep)
    sealed = {m.seq for m in manifests}
    held: dict[int, dict[str, Any]] = {}
    lines_of: dict[int, int] = {}
    seq, prev = 0, GENESIS
    with log.lines() as lines:
        for number, raw, whole in lines:
            problem, record = _check(number, raw, whole, seq, prev)
            if problem is not None:
                result.problems.append(problem)
                break
            assert record is not None
            seq, prev = record["seq"], record["hash"]
            result.records += 1
            if seq in wanted:
                result.hashes[seq] = prev
                lines_of[seq] = number
            if seq in sealed:
                held[seq] = record
    result.head = Head(seq, prev)
    for manifest in manifests:
        problem = _sealed(manifest, held.get(manifest.seq), bool(result.problems))
        if problem is not None:
            result.problems.append(problem)
    broken = any(p.kind != "torn" for p in result.problems)
    for known in sorted(heads, key=lambda h: h.head.seq):
        problem = _against(known, result, lines_of, broken)
        if problem is not None:
            result.problems.append(problem)
        elif known.head.seq <= seq:
            result.heads_checked += 1
    result.problems.sort(key=lambda p: (p.seq if p.seq is not None else 0, p.line or 0))
    return result


def _check(
    number: int, raw: bytes, whole: bool, seq: int, prev: str
) -> tuple[Problem | None, dict[str, Any] | None]:
    """The record of line ``number`` after record ``seq`` (hash ``prev``), or why not."""
    at = f"line {number}"
    try:
        record = orjson.loads(raw)
    except orjson.JSONDecodeError:
        record = None
    shape = shape_problem(record)
    if shape is not None or record is None:
        if not whole:
            return Problem("torn", number, seq + 1, (
                f"{at}: torn: the last line ({len(raw)} bytes) has no end, a write cut short "
                "by a kill, or an edit; it is not a record (the next append moves it into its "
                "own record's detail.repaired)"
            )), None  # fmt: skip
        return Problem("not-a-record", number, seq + 1, f"{at}: not a record ({shape})"), None
    at = f"line {number} (record {record['seq']})"
    if record["hash"] != record_hash(record):
        return Problem("edited", number, record["seq"],
                       f"{at}: edited: its hash does not match its content"), None  # fmt: skip
    if record["seq"] != seq + 1:
        if record["seq"] > seq + 1:
            gone = f"record {seq + 1}" + (f" to {record['seq'] - 1}" if record["seq"] > seq + 2
                                          else "")  # fmt: skip
            said = f"{gone} missing before it (removed, or records reordered)"
        else:
            said = f"it comes after record {seq} (records reordered, or one copied)"
        kind = "missing" if record["seq"] > seq + 1 else "reordered"
        return Problem(kind, number, record["seq"], f"{at}: out of sequence: {said}"), None
    if record["prev"] != prev:
        before = f"record {seq}'s hash" if seq else "the chain's start"
        return Problem("broken-link", number, record["seq"], (
            f"{at}: its prev is not {before}: the record before it was changed (its hash "
            "recomputed) or replaced"
        )), None  # fmt: skip
    return None, record


def _against(
    known: KnownHead, result: Verification, lines_of: dict[int, int], broken: bool
) -> Problem | None:
    """The problem ``known`` shows (the log cut short before it, or rewritten up to it);
    none for a head past a break in the chain (``broken``: that break is what to report)."""
    head, last = known.head, result.head.seq
    if head.seq == 0:
        return None
    if head.seq not in result.hashes:
        if broken:
            return None
        return Problem("truncated", None, last + 1, (
            f"truncated: the log ends at record {last}, but a head {known.source} is record "
            f"{head.seq}: record {last + 1} onwards is missing (the log was cut short)"
        ))  # fmt: skip
    if result.hashes[head.seq] != head.hash:
        return Problem("rewritten", lines_of.get(head.seq), head.seq, (
            f"line {lines_of.get(head.seq)} (record {head.seq}): not the record the head "
            f"{known.source} names (hash {head.hash[:16]}…): it, or a record before it, was "
            "rewritten"
        ))  # fmt: skip
    return None


def _sealed(manifest: Manifest, record: dict[str, Any] | None, broken: bool) -> Problem | None:
    """Whether the record at the manifest's place holds the manifest as it is now."""
    at = f"manifest {manifest.path}"
    if record is None:
        if broken:
            return None  # past a break in the chain: that break is what to report
        return Problem("manifest", None, manifest.seq, (
            f"{at}: names record {manifest.seq}, which the log does not hold"
        ))  # fmt: skip
    kept = (record.get("detail") or {}).get("manifest") or {}
    if record["prev"] != manifest.prev or not kept:
        return Problem("manifest", None, manifest.seq, (
            f"{at}: record {manifest.seq} is not its record (another export's, or the "
            "manifest was moved to another place in the chain)"
        ))  # fmt: skip
    if kept.get("sha256") != manifest.sha256:
        return Problem("manifest", None, manifest.seq, (
            f"{at}: changed since it was recorded: record {manifest.seq} holds SHA-256 "
            f"{str(kept.get('sha256'))[:16]}…, the file's is {manifest.sha256[:16]}…"
        ))  # fmt: skip
    return None


def recorded_heads(log: AuditLog, warehouse: Path | None) -> tuple[list[KnownHead], list[str]]:
    """The heads recorded in ``<log>.heads`` and by the runs of ``warehouse``
    (``pipeline_runs.audit_head``; a warehouse being written is skipped, with a note)."""
    notes: list[str] = []
    entries, bad = log.heads()
    heads = [
        KnownHead(Head(int(e["seq"]), str(e["hash"]).lower()),
                  f"recorded at {e.get('when', '?')} by {e.get('by', '?')}")
        for e in entries
    ]  # fmt: skip
    if bad:
        notes.append(f"{bad} lines of {log.heads_path} are not heads (damaged): not checked")
    if warehouse is not None and warehouse.exists():
        found, note = _run_heads(warehouse)
        heads += found
        if note:
            notes.append(note)
    return heads, notes


def _run_heads(warehouse: Path) -> tuple[list[KnownHead], str | None]:
    import duckdb

    try:
        con = duckdb.connect(str(warehouse), read_only=True)
    except duckdb.Error:
        return [], (
            f"the warehouse {warehouse} could not be read (a run writing it?): the heads its "
            "runs recorded were not checked"
        )
    try:
        rows = con.execute(
            "SELECT run_id, finished_at, audit_head FROM pipeline_runs "
            "WHERE audit_head IS NOT NULL ORDER BY started_at"
        ).fetchall()
    except duckdb.Error:
        return [], None  # a warehouse from before runs recorded heads
    finally:
        con.close()
    heads = []
    for run_id, finished, text in rows:
        try:
            heads.append(KnownHead(Head.parse(text), f"recorded by run {run_id} at {finished}"))
        except ValueError:
            continue
    return heads, None
