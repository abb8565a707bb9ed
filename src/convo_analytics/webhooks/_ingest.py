"""Turning an archive file's lines into chunks: verified events staged, the others quarantined.

An input line ends in exactly one place: loaded (a new event), recognised as a
duplicate (a retry or replay of an event already stored), or quarantined with
its file, line number and reason. Two line shapes are read: a delivery as the
receiver archives it (headers and raw body, decision D-ARCHIVE-FORMAT) and a
bare event body carrying its ``signature`` field (a service's export of its
delivery log). Files may be plain or gzip JSON lines; they are never modified.
A line the receiver scrubbed and sealed is trusted on its local seal, and an event of an
older archive is scrubbed once verified, before it is staged (``_scrub``,
D-PRIVACY-SCRUB-AT-LOAD).

Python does per line only what must be exact: read the body strictly
(D-ONE-READING), verify the HMAC, check the event's time and hash its
canonical form. The common line is decided inline by a shortcut; every other
line takes the general path here, line by line. The run itself (files in
order, the loader thread, ``ingest_runs``) is in ``_run.py``.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import hmac
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, NamedTuple

import numpy as np
import orjson
import pyarrow as pa

from convo_analytics.webhooks._body import (
    NON_FINITE,
    content_hash,
    read_body,
    received_reference,
    stamp,
    timestamp_problem,
)
from convo_analytics.webhooks._files import Plan, finish_state, next_state
from convo_analytics.webhooks._lines import (
    EXCERPT,
    HUGE_LINE,
    MAX_LINE,
    TAIL,
    ArchiveReader,
    Block,
    LongLine,
)
from convo_analytics.webhooks._scrub import MAC_FIELD, SCRUB_FIELD, DeliveryScrubber
from convo_analytics.webhooks._signature import MEMBER_HEAD, MEMBER_LEN, SIGNATURE_PREFIX
from convo_analytics.webhooks._verify import SIGNATURE_HEADERS, Verification, Verifier
from convo_analytics.webhooks._workspace import EndpointWorkspace, WorkspaceScope

#: The quarantine reason of a sealed line whose local seal fails (D-PRIVACY-SCRUB-AT-LOAD).
BAD_LOCAL_MAC = "bad_local_mac"
CHUNK_LINES = 245_760
#: A chunk is handed over before its lines pass this many bytes (a chunk of the usual
#: lines of about 700 bytes is 170 MB) ...
CHUNK_BYTES = 256 << 20
#: ... or before its lines over LARGE_LINE pass this many: DuckDB's memory for a chunk
#: grows with its long strings far more than with short ones (measured at the 256 MB limit
#: the ingest sets: 100 MiB of 10 KB bodies load, of 25 KB bodies do not; two 6 MiB bodies
#: do not), and a line over HUGE_LINE goes alone (D-LINE-LIMIT).
LARGE_BUDGET = 8 << 20


@dataclass(frozen=True, slots=True)
class IngestOptions:
    """The ingest's limits (settings ``webhooks.*``; docs/configuration.md)."""

    max_line_bytes: int = MAX_LINE
    max_future_seconds: float = 86_400.0
    settle_seconds: float = 600.0
    alarm_share: float = 0.5
    full: bool = False
    chunk_lines: int = CHUNK_LINES
    chunk_bytes: int = CHUNK_BYTES

    @property
    def max_future(self) -> timedelta:
        return timedelta(seconds=self.max_future_seconds)


class _Chunk:
    """Columns of verified lines and rows of quarantined ones, built up line by line."""

    def __init__(self, source: str, first_line_no: int) -> None:
        self.source = source
        self.first_line_no = first_line_no  # the file's line number of the chunk's first line
        self.staged: dict[str, list[Any]] = {name: [] for name in _STAGE_COLUMNS}
        self.batches: list[pa.RecordBatch] = []  # staged rows already converted, in order
        self.quarantined: dict[str, list[Any]] = {name: [] for name in _QUARANTINE_COLUMNS}
        self.count = 0  # input lines, counting a damaged gzip's end as one
        self.bytes = 0  # bytes of the lines read into it
        self.large = 0  # of which in lines over LARGE_LINE
        self.huge = False  # it holds a line over HUGE_LINE (then alone)
        self.state: Any = None  # the file's ingest_files row once this chunk is stored
        self.final = False  # the file's last chunk (its state is the file's after this read)
        #: (name, id): the workspace id a line of this chunk bound, recorded with it.
        self.binding: tuple[str, str] | None = None
        #: The workspace a quarantined line was read for (its endpoint's name), if any.
        self.workspace: str | None = None
        #: Personal data scrubbed from its events: (workspace id, event id, kind, hash).
        self.found: list[tuple[str | None, str, str, str]] = []
        #: Scrubs a quarantined line's text before it is kept (scrubbing on); None: kept
        #: as it came (D-PRIVACY-SCRUB-AT-LOAD).
        self.scrub_text: Callable[[bytes], bytes] | None = None

    def reject(
        self, line_no: int, reason: str, detail: str, raw: bytes, offset: int | None,
        whole: bool = True,
    ) -> None:  # fmt: skip
        """Quarantine a line; ``whole``: keep the whole line for a replay (not a long one).
        With scrubbing on, the line, its excerpt and the detail are kept scrubbed: the
        original never reaches the warehouse (such a line is no longer one its signature
        verifies; the archive file it came from is what a replay then needs)."""
        if self.scrub_text is not None:
            raw = self.scrub_text(raw)
            detail = self.scrub_text(detail.encode("utf-8")).decode("utf-8", "replace")
        excerpt = raw[:EXCERPT].decode("utf-8", "backslashreplace")
        values = (
            self.source, line_no, reason, detail, excerpt, offset, raw if whole else None,
            self.workspace,
        )  # fmt: skip
        for name, value in zip(_QUARANTINE_COLUMNS, values, strict=True):
            self.quarantined[name].append(value)

    def flush(self) -> None:
        """Convert the rows staged so far to Arrow (a block at a time: the Python objects
        of a whole chunk would be several times its Arrow size at the peak)."""
        staged = self.staged
        if not staged["body"]:
            return
        schema = _staged_schema()
        self.batches.append(
            pa.record_batch(
                [pa.array(staged[c.name], c.type, memory_pool=_pool()) for c in schema],
                schema=schema,
            )
        )
        for values in staged.values():
            values.clear()

    def tables(self, first_ord: int) -> tuple[pa.Table, pa.Table]:
        """The staged rows (numbered from ``first_ord``) and the quarantined ones, as Arrow."""
        from convo_analytics.warehouse._events import QUARANTINE_SCHEMA, STAGE_SCHEMA

        self.flush()
        rows = pa.Table.from_batches(self.batches, schema=_staged_schema())
        n = rows.num_rows
        extra = {
            "ord": pa.array(np.arange(first_ord, first_ord + n, dtype=np.int64)),
            "source_file": pa.repeat(pa.scalar(self.source, pa.string()), n, memory_pool=_pool()),
        }
        staged = pa.Table.from_arrays(
            [extra[c.name] if c.name in extra else rows.column(c.name) for c in STAGE_SCHEMA],
            schema=STAGE_SCHEMA,
        )
        self.batches = []
        return staged, pa.table(self.quarantined, schema=QUARANTINE_SCHEMA)


#: The staged columns built line by line (ord and source_file are filled per chunk).
_STAGE_COLUMNS = (
    "source_line", "source_offset", "body", "idempotency_key", "content_hash",
    "signature_reading", "signature_source", "secret_index", "delivery_id", "attempt",
    "received_at", "workspace_id",
)  # fmt: skip
_QUARANTINE_COLUMNS = (
    "source_file", "source_line", "reason", "detail", "excerpt", "line_offset", "line",
    "workspace",
)  # fmt: skip


@functools.cache
def _pool() -> pa.MemoryPool:
    """The allocator of a chunk's Arrow columns: the C library's (D-INGEST-MEMORY).

    A chunk is built on the reading thread and freed on the loader thread; pyarrow's
    default (mimalloc) kept such memory in the reading thread's heap, so a run's peak held
    about 170 MiB more (927 to 948 MiB against 755 to 771, on 737,280 lines), and building
    the columns cost more CPU.
    """
    return pa.system_memory_pool()


@functools.cache
def _staged_schema() -> pa.Schema:
    """The columns built line by line, typed as the warehouse stages them (imported when
    first needed: the receiver imports this package and never loads DuckDB)."""
    from convo_analytics.warehouse._events import STAGE_SCHEMA

    return pa.schema([STAGE_SCHEMA.field(name) for name in _STAGE_COLUMNS])


#: Where the member append_signature writes sits, counted from the body's end: the
#: member (MEMBER_LEN bytes), its value (``sha256=`` and the digest), the digest alone;
#: each run ends before the closing ``"}``.
_VALUE = len(SIGNATURE_PREFIX) + 64 + 2
_DIGEST = 64 + 2


_SIGNATURE_NAMES = frozenset(SIGNATURE_HEADERS)
_NO_HEADERS: dict[str, Any] = {}
_same = hmac.compare_digest


def _text(value: Any) -> str | None:
    """A header or field value as text: strings as they are, other JSON values serialised."""
    if value is None or isinstance(value, str):
        return value
    return orjson.dumps(value).decode()


class Ingester:
    """Reads a file's lines into chunks: verified deliveries staged, the others quarantined."""

    #: Decide the common line by the shortcut (False: every line by the general path).
    shortcut = True

    def __init__(
        self,
        secrets: Sequence[bytes],
        now: datetime,
        options: IngestOptions | None = None,
        *,
        scope: WorkspaceScope | None = None,
        scrub: DeliveryScrubber | None = None,
    ) -> None:
        self.options = options or IngestOptions()
        #: Events scrubbed before they are staged, sealed lines checked (D-PRIVACY-SCRUB-AT-LOAD).
        self.scrub = scrub or DeliveryScrubber(None)
        self.verifier = Verifier(secrets)
        self.pads = self.verifier.pads(0) if secrets else None
        self.now = now
        self.now_text = stamp(now)
        #: Whose endpoint the lines came from: each event is stored under that workspace or
        #: quarantined (D-WEBHOOK-WORKSPACE).
        self.scope = scope or WorkspaceScope(EndpointWorkspace(None))

    def admit(
        self, chunk: _Chunk, event: dict[str, Any]
    ) -> tuple[str | None, tuple[str, str] | None]:
        """The workspace id ``event`` is stored under, or why not; a binding it made (the
        endpoint's id learned on first sight) goes with its chunk."""
        workspace, problem = self.scope.admit(event)
        if self.scope.learned is not None:
            name = self.scope.endpoint.name
            assert name is not None
            chunk.binding = (name, self.scope.learned)
            self.scope.learned = None
        return workspace, problem

    def read_file(self, plan: Plan, run_id: str) -> Iterator[_Chunk]:
        """The file's lines from where ``plan`` says, as chunks; the last one carries the
        file's state (ingest_files) after this read, and each earlier one the state at its
        end, so that a run killed between two chunks resumes exactly after the first."""
        reader = self._open(plan)
        with reader:
            first = plan.first_line
            chunk = self.new_chunk(plan.source, first)
            tail = b""  # the stream's last bytes read: the prefix's until a line is read
            lines = first - 1  # lines of the file read, up to the last one handed over
            # whether the last line read had no newline: until a line is read, as the last
            # read left it, unless the newline that ends that line has come since
            unterminated = bool(plan.start and plan.state and plan.state.ended_unterminated)
            end = plan.start
            for item in reader.items():
                if lines < first:  # the prefix is known (with a newline skipped) once reading
                    tail = reader.prefix_tail
                if chunk.count and self._full_before(chunk, item):
                    yield self._handed(chunk, plan, run_id, end, lines, tail, unterminated)
                    chunk = self.new_chunk(plan.source, chunk.first_line_no + chunk.count)
                line_no = chunk.first_line_no + chunk.count
                end = item.end
                if isinstance(item, Block):
                    chunk.large += item.large
                    chunk.huge = chunk.huge or item.large > HUGE_LINE
                    self._block(chunk, item)
                    chunk.flush()
                    data = item.data
                    tail = data[-TAIL:] if len(data) >= TAIL else (tail + data)[-TAIL:]
                    chunk.bytes += len(data)
                    lines += len(item)
                    unterminated = not item.terminated
                else:
                    limit = self.options.max_line_bytes
                    detail = f"the line is {item.size:,} bytes, over webhooks.max_line_bytes "
                    detail += f"({limit:,})"
                    chunk.reject(line_no, "too_large", detail, item.head, item.offset, False)
                    chunk.count += 1
                    tail = (tail + item.tail)[-TAIL:]
                    lines += 1
                    unterminated = not item.terminated
                if chunk.count >= self.options.chunk_lines:
                    yield self._handed(chunk, plan, run_id, end, lines, tail, unterminated)
                    chunk = self.new_chunk(plan.source, chunk.first_line_no + chunk.count)
            unterminated = unterminated and (lines >= first or reader.skip_newline)
            if lines < first:
                tail = reader.prefix_tail
            if reader.problem is not None:
                line_no = chunk.first_line_no + chunk.count
                chunk.reject(line_no, "truncated_gzip", reader.problem, b"", None, False)
                chunk.count += 1
            state = next_state(
                plan, run_id, self.now, offset=reader.position, lines=lines, tail=tail,
                ended_unterminated=unterminated,
            )  # fmt: skip
            complete = reader.problem is None and not reader.held_back
            chunk.state = finish_state(
                state, plan.path, complete=complete, held_back=reader.held_back
            )
            chunk.final = True
            yield chunk

    def new_chunk(self, source: str, first_line_no: int) -> _Chunk:
        chunk = _Chunk(source, first_line_no)
        chunk.workspace = self.scope.endpoint.name
        if self.scrub.active:
            owner = self.scope.endpoint.configured_id or self.scope.endpoint.name
            chunk.scrub_text = lambda raw: self.scrub.text(owner, raw)[0]
        return chunk

    def _handed(
        self, chunk: _Chunk, plan: Plan, run_id: str, end: int, lines: int, tail: bytes,
        unterminated: bool,
    ) -> _Chunk:  # fmt: skip
        """The chunk, with its file's state at its end (stream offset ``end``, ``lines`` read)."""
        chunk.state = next_state(
            plan, run_id, self.now, offset=end, lines=lines, tail=tail,
            ended_unterminated=unterminated,
        )  # fmt: skip
        return chunk

    def _full_before(self, chunk: _Chunk, item: Block | LongLine) -> bool:
        """Whether ``chunk`` goes to DuckDB before ``item``: it holds a huge line, or the item
        is one, or the item's long lines would pass LARGE_BUDGET, or its bytes CHUNK_BYTES."""
        if not isinstance(item, Block):
            return False
        return (
            chunk.huge
            or item.large > HUGE_LINE
            or chunk.large + item.large > LARGE_BUDGET
            or chunk.bytes + len(item.data) > self.options.chunk_bytes
        )

    def _open(self, plan: Plan) -> ArchiveReader:
        """A reader at the plan's start, the start checked against what the last read saw;
        where it does not match, the file is read from its beginning (plan says why)."""
        options = self.options
        if plan.start and plan.state is not None:
            state = plan.state
            reader = ArchiveReader(
                plan.path, start=plan.start, max_line=options.max_line_bytes,
                settle_seconds=options.settle_seconds, skip_newline=state.ended_unterminated,
            )  # fmt: skip
            continuing = plan.action == "continue"
            prefix = reader.prefix(state.head_bytes if continuing else 0)
            if (
                prefix is not None
                and prefix[1] == state.stream_tail_hash
                and (not continuing or prefix[0] == state.head_hash)
            ):
                return reader
            reader.close()
            plan.why = "the bytes before where the last read ended are not what they were"
            plan.action = "new" if continuing else "changed"
            plan.start, plan.first_line, plan.state = 0, 1, None
        return ArchiveReader(
            plan.path, max_line=options.max_line_bytes, settle_seconds=options.settle_seconds
        )

    def _block(self, chunk: _Chunk, block: Block) -> None:
        """A block's lines: the common line by the shortcut, every other one by read_line.

        The common line is what the service sends: a JSON object, either a delivery as
        the receiver archives it (a headers object with lower-case names and a string
        body) or a bare event body, whose body is compact JSON as orjson writes it (so
        it has no repeated key and no number that is not finite, D-ONE-READING) ending
        with the ``signature`` member as append_signature writes it, with every
        signature header present repeating that member, whose body without the member
        the first secret verifies, and whose timestamp, written as the sandbox writes
        it (``stamp``, which compares as text in time order), is not after the line's
        receipt, itself a stamp before now (or now, for a bare body). Then every claim is
        written in the body, so the raw reading cannot match (Verifier._match), and the stripped
        reading under the first secret is the first one tried: the shortcut reaches the
        general path's decision at a fraction of its cost. Anything else takes the
        general path.
        """
        offsets, data, terminated, base = block.offsets, block.data, block.terminated, block.start
        view = memoryview(data)
        first = chunk.first_line_no + chunk.count
        chunk.count += len(block)
        if self.pads is None or not self.shortcut:
            for i in range(len(block)):
                text, newline = block.line(i)
                self.read_line(chunk, first + i, text, newline, base + offsets[i])
            return
        staged = chunk.staged
        add_line, add_body = staged["source_line"].append, staged["body"].append
        add_offset = staged["source_offset"].append
        add_key, add_hash = staged["idempotency_key"].append, staged["content_hash"].append
        add_reading = staged["signature_reading"].append
        add_source = staged["signature_source"].append
        add_secret = staged["secret_index"].append
        add_delivery, add_attempt = staged["delivery_id"].append, staged["attempt"].append
        add_received = staged["received_at"].append
        add_workspace, admit = staged["workspace_id"].append, self.admit
        inner, outer = self.pads
        inner_copy, outer_copy, sha256, same = inner.copy, outer.copy, hashlib.sha256, _same
        loads, dumps, sort = orjson.loads, orjson.dumps, orjson.OPT_SORT_KEYS
        head, member, value_len, brace = MEMBER_HEAD, MEMBER_LEN, _VALUE, b"}"
        text_of, names, first_name = _text, _SIGNATURE_NAMES, SIGNATURE_HEADERS[0]
        now_text = self.now_text
        scrubbing, scrubbed = self.scrub.active, self._scrubbed
        cut = 1 if terminated else 0
        for i in range(len(block)):
            start, end = offsets[i], offsets[i + 1] - cut
            try:
                record = loads(view[start:end])
                body_text = record.get("body")
            except (orjson.JSONDecodeError, AttributeError):
                record = None
            source = "field"
            event: Any = None
            if record is None:
                pass
            elif type(body_text) is str and type(headers := record.get("headers")) is dict:
                body = body_text.encode()
                claimed = body[-value_len:-2].decode("utf-8", "replace")
                for name in headers:
                    if not name.islower() or (name in names and headers[name] != claimed):
                        record = None
                        break
                else:
                    if first_name in headers:
                        source = first_name
                    elif names.intersection(headers):
                        source = next(n for n in SIGNATURE_HEADERS if n in headers)
                    received = text_of(record.get("receivedAt"))
                    try:
                        event = loads(body_text)
                    except orjson.JSONDecodeError:
                        record = None
            elif (
                body_text is None
                and record.get("bodyBase64") is None
                and (record.get("event") is not None)
            ):
                headers, received = _NO_HEADERS, None
                body = data[start:end].rstrip(b"\r")
                event = record
            else:
                record = None
            # the time: a stamp not after its bound (any other form: the general path); a stamp
            # is 24 characters ending in Z (written out, not called: this is the hot loop)
            if (
                record is not None
                and type(event) is dict
                and body[-member:-_DIGEST] == head
                and body[-2:] == b'"}'
                and type(ts := event.get("timestamp")) is str
                and len(ts) == 24
                and ts[23] == "Z"
                and ts[10] == "T"
                and ts
                <= (
                    now_text
                    if received is None
                    else received
                    if type(received) is str
                    and len(received) == 24
                    and received[23] == "Z"
                    and received[10] == "T"
                    and received < now_text
                    else ""
                )
                and dumps(event) == body
            ):
                signed = memoryview(body)[:-member]
                mac = inner_copy()
                mac.update(signed)
                mac.update(brace)
                out = outer_copy()
                out.update(mac.digest())
                if same(out.hexdigest().encode(), body[-_DIGEST:-2]):
                    workspace, refused = admit(chunk, event)
                    if refused is not None:
                        text, newline = block.line(i)
                        why, detail = refused
                        chunk.reject(first + i, why, detail, text + newline, base + start)
                        continue
                    del event["signature"]
                    if scrubbing:
                        body, event = scrubbed(chunk, workspace, event)
                    add_line(first + i)
                    add_offset(base + start)
                    add_body(body)
                    add_key(text_of(headers.get("idempotency-key")) or None)
                    add_hash(sha256(dumps(event, option=sort)).hexdigest())
                    add_reading("stripped")
                    add_source(source)
                    add_secret(0)
                    add_delivery(text_of(headers.get("x-convo-delivery")))
                    add_attempt(text_of(headers.get("x-convo-attempt")))
                    add_received(received)
                    add_workspace(workspace)
                    continue
            text, newline = block.line(i)
            self.read_line(chunk, first + i, text, newline, base + start)

    def read_line(
        self, chunk: _Chunk, line_no: int, text: bytes, newline: bytes, offset: int | None
    ) -> None:
        """One line (``text`` without its newline): staged when verified, else quarantined."""
        raw = text + newline
        line = text.rstrip(b"\r")
        if not line.strip():
            chunk.reject(line_no, "empty_line", "the line is blank", raw, offset)
            return
        try:
            record = orjson.loads(line)
        except orjson.JSONDecodeError as exc:
            try:
                line.decode("utf-8")
            except UnicodeDecodeError:
                chunk.reject(line_no, "bad_encoding", "the line is not UTF-8", raw, offset)
                return
            # a bare event body with NaN or 1e400 in it is that, not just a broken line
            if (strict := read_body(line)).problem == NON_FINITE:
                chunk.reject(line_no, NON_FINITE, strict.detail, raw, offset)
                return
            chunk.reject(line_no, "malformed_json", str(exc)[:200], raw, offset)
            return
        if not isinstance(record, dict):
            chunk.reject(line_no, "not_an_event", "the line is not a JSON object", raw, offset)
            return
        if MAC_FIELD in record or SCRUB_FIELD in record:
            self._sealed_line(chunk, line_no, record, raw, offset)
            return
        headers: dict[str, str] = {}
        received_at = None
        # A member that is null counts as absent (as in the shortcut, _block).
        if record.get("headers") is not None and (
            record.get("body") is not None or record.get("bodyBase64") is not None
        ):
            raw_headers = record["headers"]
            if isinstance(raw_headers, dict):
                headers = {str(k).lower(): _text(v) for k, v in raw_headers.items()}  # type: ignore[misc]
            try:
                if record.get("body") is not None:
                    body = str(_text(record["body"])).encode("utf-8")
                else:
                    body = base64.b64decode(record["bodyBase64"], validate=True)
            except (ValueError, TypeError):
                chunk.reject(line_no, "malformed_json", "bodyBase64 is not base64", raw, offset)
                return
            received_at = _text(record.get("receivedAt"))
        elif record.get("event") is not None:
            body = line
        else:
            detail = "neither an archived delivery nor an event body"
            chunk.reject(line_no, "not_an_event", detail, raw, offset)
            return
        outcome = self.judge(body, headers, received_at)
        if outcome.reason is not None or outcome.event is None or outcome.check is None:
            chunk.reject(line_no, outcome.reason or "not_an_event", outcome.detail, raw, offset)
            return
        event, check = outcome.event, outcome.check
        workspace, refused = self.admit(chunk, event)
        if refused is not None:
            why, detail = refused
            chunk.reject(line_no, why, detail, raw, offset)
            return
        if self.scrub.active:
            body, event = self._scrubbed(chunk, workspace, event)
        staged = chunk.staged
        values = (
            line_no, offset, body, headers.get("idempotency-key") or None, content_hash(event),
            check.reading, check.signature_source, check.secret_index,
            headers.get("x-convo-delivery"), headers.get("x-convo-attempt"), received_at,
            workspace,
        )  # fmt: skip
        for name, value in zip(_STAGE_COLUMNS, values, strict=True):
            staged[name].append(value)

    def _scrubbed(
        self, chunk: _Chunk, workspace: str | None, event: dict[str, Any]
    ) -> tuple[bytes, dict[str, Any]]:
        """A verified event of an older archive (as received, signed by the service),
        scrubbed before it is staged: (its body, the event)."""
        clean, found = self.scrub.event(workspace, event)
        rid = _text(clean.get("id")) or ""
        chunk.found.extend((workspace, rid, f.kind, f.hash) for f in found)
        return orjson.dumps(clean), clean

    def _sealed_line(
        self, chunk: _Chunk, line_no: int, record: dict[str, Any], raw: bytes, offset: int | None
    ) -> None:
        """A line the receiver scrubbed and sealed: trusted on its local seal (the service's
        signature no longer fits its body), else quarantined as ``bad_local_mac``."""
        if not self.scrub.sealed(record):
            why = (
                "no privacy key to check it with"
                if not self.scrub.can_seal
                else "it was changed after it was archived, or sealed under another privacy key"
            )
            detail = f"the line's local seal ({MAC_FIELD}) does not verify: {why}"
            chunk.reject(line_no, BAD_LOCAL_MAC, detail, raw, offset)
            return
        text = record.get("body")
        read = read_body(text.encode("utf-8")) if isinstance(text, str) else None
        event = read.parsed if read is not None and read.problem is None else None
        if not isinstance(text, str) or not isinstance(event, dict) or event.get("event") is None:
            detail = "the sealed line's body is not a JSON event"
            chunk.reject(line_no, "not_an_event", detail, raw, offset)
            return
        received_at = _text(record.get("receivedAt"))
        reference = received_reference(received_at, self.now)
        if (late := timestamp_problem(event, reference, self.options.max_future)) is not None:
            chunk.reject(line_no, late[0], late[1], raw, offset)
            return
        workspace, refused = self.admit(chunk, event)
        if refused is not None:
            chunk.reject(line_no, refused[0], refused[1], raw, offset)
            return
        scrub = record.get(SCRUB_FIELD)
        found = scrub.get("findings") if isinstance(scrub, dict) else None
        rid = _text(event.get("id")) or ""
        for item in found if isinstance(found, list) else ():
            if isinstance(item, list) and len(item) == 2:
                chunk.found.append((workspace, rid, str(item[0]), str(item[1])))
        headers = record.get("headers")
        headers = headers if isinstance(headers, dict) else {}
        secret = record.get("secretIndex")
        values = (
            line_no, offset, text.encode("utf-8"), _text(headers.get("idempotency-key")) or None,
            content_hash(event), _text(record.get("verification")),
            _text(record.get("signatureSource")), secret if isinstance(secret, int) else None,
            _text(headers.get("x-convo-delivery")), _text(headers.get("x-convo-attempt")),
            received_at, workspace,
        )  # fmt: skip
        for name, value in zip(_STAGE_COLUMNS, values, strict=True):
            chunk.staged[name].append(value)

    def judge(self, body: bytes, headers: dict[str, str], received_at: str | None) -> Outcome:
        """Whether a body can be stored: the event and its Verification, or why not.

        In this order: the body read strictly (D-ONE-READING), the signature, that it is an
        event, its time (D-EVENT-TIME). The receiver asks the same questions.
        """
        read = read_body(body)
        if read.problem is not None:
            return Outcome(read.problem, read.detail)
        check = self.verifier.verify(body, headers, read.parsed)
        if not check.ok:
            if check.reason == "unsigned":
                return Outcome("unsigned", "no signature in the headers or the body")
            return Outcome("bad_signature", "no configured secret verifies the signature")
        event = read.parsed
        if not isinstance(event, dict) or event.get("event") is None:
            return Outcome("not_an_event", "the delivery body is not a JSON event")
        reference = received_reference(received_at, self.now)
        if (late := timestamp_problem(event, reference, self.options.max_future)) is not None:
            return Outcome(*late)
        return Outcome(None, "", event, check)


class Outcome(NamedTuple):
    """What :meth:`Ingester.judge` decided about a body."""

    reason: str | None
    detail: str
    event: dict[str, Any] | None = None
    check: Verification | None = None
