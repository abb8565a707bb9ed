"""``convo webhooks ingest``: webhook archives into the warehouse, every line accounted for.

An input line ends in exactly one place: loaded (a new event), recognised as a
duplicate (a retry or replay of an event already stored), or quarantined with
its file, line number and reason. Two line shapes are read: a delivery as the
receiver archives it (headers and raw body, decision D-ARCHIVE-FORMAT) and a
bare event body carrying its ``signature`` field (a service's export of its
delivery log). Files may be plain or gzip JSON lines; they are never modified.

Python does per line only what must be exact: verify the HMAC and hash the
signed bytes. The file is read in large blocks whose common lines DuckDB takes
apart in bulk (``_lines``); the other lines take the general path here, line
by line. The event bodies then go to DuckDB in chunks of more than a row
group, where they are validated, deduplicated and typed in SQL, on a thread of
their own while Python reads the next chunk.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import hmac
import queue
import secrets as _secrets
import threading
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import pyarrow as pa

from convo_analytics.webhooks._lines import UNTERMINATED, Block, read_blocks
from convo_analytics.webhooks._signature import MEMBER_HEAD, MEMBER_LEN, SIGNATURE_PREFIX
from convo_analytics.webhooks._verify import SIGNATURE_HEADERS, Verifier

CHUNK_LINES = 245_760
EXCERPT = 2000


@dataclass
class IngestResult:
    run_id: str
    files: int = 0
    read: int = 0
    loaded: int = 0
    duplicates: int = 0
    quarantined: Counter[str] = field(default_factory=Counter)
    readings: Counter[str] = field(default_factory=Counter)
    types: Counter[str] = field(default_factory=Counter)
    seconds: float = 0.0

    def to_json(self) -> dict[str, Any]:
        return {
            "runId": self.run_id,
            "files": self.files,
            "read": self.read,
            "loaded": self.loaded,
            "duplicates": self.duplicates,
            "quarantined": dict(sorted(self.quarantined.items())),
            "signatureReadings": dict(sorted(self.readings.items())),
            "eventTypes": dict(sorted(self.types.items())),
            "durationSeconds": round(self.seconds, 3),
        }


class _Chunk:
    """Columns of verified lines and rows of quarantined ones, built up line by line."""

    def __init__(self, source: str, first_line_no: int) -> None:
        self.source = source
        self.first_line_no = first_line_no  # the file's line number of the chunk's first line
        self.staged: dict[str, list[Any]] = {name: [] for name in _STAGE_COLUMNS}
        self.batches: list[pa.RecordBatch] = []  # staged rows already converted, in order
        self.quarantined: dict[str, list[Any]] = {name: [] for name in _QUARANTINE_COLUMNS}
        self.count = 0  # input lines, counting a damaged gzip's end as one

    def reject(self, line_no: int, reason: str, detail: str, raw: bytes) -> None:
        excerpt = raw[:EXCERPT].decode("utf-8", "backslashreplace")
        for name, value in zip(
            _QUARANTINE_COLUMNS, (self.source, line_no, reason, detail, excerpt), strict=True
        ):
            self.quarantined[name].append(value)

    def flush(self) -> None:
        """Convert the rows staged so far to Arrow (a block at a time: the Python objects
        of a whole chunk would be several times its Arrow size at the peak)."""
        staged = self.staged
        if not staged["body"]:
            return
        schema = _staged_schema()
        self.batches.append(
            pa.record_batch([pa.array(staged[c.name], c.type) for c in schema], schema=schema)
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
            "source_file": pa.repeat(pa.scalar(self.source, pa.string()), n),
        }
        staged = pa.Table.from_arrays(
            [extra[c.name] if c.name in extra else rows.column(c.name) for c in STAGE_SCHEMA],
            schema=STAGE_SCHEMA,
        )
        self.batches = []
        return staged, pa.table(self.quarantined, schema=QUARANTINE_SCHEMA)


#: The staged columns built line by line (ord and source_file are filled per chunk).
_STAGE_COLUMNS = (
    "source_line", "body", "idempotency_key", "content_hash", "signature_reading",
    "signature_source", "secret_index", "delivery_id", "attempt", "received_at",
)  # fmt: skip
_QUARANTINE_COLUMNS = ("source_file", "source_line", "reason", "detail", "excerpt")


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
    """Turns a file's lines into chunks: verified deliveries staged, the others quarantined."""

    #: Decide the common line by the shortcut (False: every line by the general path).
    shortcut = True

    def __init__(self, secrets: Sequence[bytes], chunk_lines: int = CHUNK_LINES) -> None:
        self.verifier = Verifier(secrets)
        self.chunk_lines = chunk_lines
        self.pads = self.verifier.pads(0) if secrets else None

    def read_file(self, path: Path, source: str) -> Iterator[_Chunk]:
        chunk = _Chunk(source, 1)
        for block, end in read_blocks(path):
            if block is not None:
                self._block(chunk, block)
                chunk.flush()
            elif end is not None and end != UNTERMINATED:
                chunk.reject(chunk.first_line_no + chunk.count, "truncated_gzip", end, b"")
                chunk.count += 1
            if chunk.count >= self.chunk_lines:
                yield chunk
                chunk = _Chunk(source, chunk.first_line_no + chunk.count)
        if chunk.count:
            yield chunk

    def _block(self, chunk: _Chunk, block: Block) -> None:
        """A block's lines: the common line by the shortcut, every other one by _line.

        The common line is what the service sends: a JSON object, either a delivery as
        the receiver archives it (a headers object with lower-case names and a string
        body) or a bare event body, whose body ends with the ``signature`` member as
        append_signature writes it, with every signature header present repeating that
        member, and whose body without the member the first secret verifies. Then every
        claim is written in the body, so the raw reading cannot match (Verifier._match),
        and the stripped reading under the first secret is the first one tried: the
        shortcut reaches the general verifier's decision (the first header present, else
        the field) at a fraction of its cost. Anything else takes the general path.
        """
        offsets, data, terminated = block.offsets, block.data, block.terminated
        view = memoryview(data)
        first = chunk.first_line_no + chunk.count
        chunk.count += len(block)
        if self.pads is None or not self.shortcut:
            for i in range(len(block)):
                text, newline = block.line(i)
                self._line(chunk, first + i, text, newline)
            return
        staged = chunk.staged
        add_line, add_body = staged["source_line"].append, staged["body"].append
        add_key, add_hash = staged["idempotency_key"].append, staged["content_hash"].append
        add_reading = staged["signature_reading"].append
        add_source = staged["signature_source"].append
        add_secret = staged["secret_index"].append
        add_delivery, add_attempt = staged["delivery_id"].append, staged["attempt"].append
        add_received = staged["received_at"].append
        inner, outer = self.pads
        inner_copy, outer_copy, sha256, same = inner.copy, outer.copy, hashlib.sha256, _same
        loads, head, member, value_len, brace = orjson.loads, MEMBER_HEAD, MEMBER_LEN, _VALUE, b"}"
        text_of, names, first_name = _text, _SIGNATURE_NAMES, SIGNATURE_HEADERS[0]
        cut = 1 if terminated else 0
        for i in range(len(block)):
            start, end = offsets[i], offsets[i + 1] - cut
            try:
                record = loads(view[start:end])
                body_text = record.get("body")
            except (orjson.JSONDecodeError, AttributeError):
                record = None
            source = "field"
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
            elif (
                body_text is None
                and record.get("bodyBase64") is None
                and (record.get("event") is not None)
            ):
                headers, received = _NO_HEADERS, None
                body = data[start:end].rstrip(b"\r")
            else:
                record = None
            if record is not None and body[-member:-_DIGEST] == head and body[-2:] == b'"}':
                signed = memoryview(body)[:-member]
                mac = inner_copy()
                mac.update(signed)
                mac.update(brace)
                out = outer_copy()
                out.update(mac.digest())
                if same(out.hexdigest().encode(), body[-_DIGEST:-2]):
                    content = sha256(signed)
                    content.update(brace)
                    add_line(first + i)
                    add_body(body)
                    add_key(text_of(headers.get("idempotency-key")) or None)
                    add_hash(content.hexdigest())
                    add_reading("stripped")
                    add_source(source)
                    add_secret(0)
                    add_delivery(text_of(headers.get("x-convo-delivery")))
                    add_attempt(text_of(headers.get("x-convo-attempt")))
                    add_received(received)
                    continue
            text, newline = block.line(i)
            self._line(chunk, first + i, text, newline)

    def _line(self, chunk: _Chunk, line_no: int, text: bytes, newline: bytes) -> None:
        """One line (``text`` without its newline): staged when verified, else quarantined."""
        line = text.rstrip(b"\r")
        if not line.strip():
            chunk.reject(line_no, "empty_line", "the line is blank", text + newline)
            return
        try:
            record = orjson.loads(line)
        except orjson.JSONDecodeError as exc:
            try:
                line.decode("utf-8")
            except UnicodeDecodeError:
                chunk.reject(line_no, "bad_encoding", "the line is not UTF-8", text + newline)
                return
            chunk.reject(line_no, "malformed_json", str(exc)[:200], text + newline)
            return
        if not isinstance(record, dict):
            chunk.reject(line_no, "not_an_event", "the line is not a JSON object", text + newline)
            return
        headers: dict[str, str] = {}
        received_at = None
        parsed: Any = None
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
                chunk.reject(line_no, "malformed_json", "bodyBase64 is not base64", text + newline)
                return
            received_at = _text(record.get("receivedAt"))
        elif record.get("event") is not None:
            body, parsed = line, record
        else:
            chunk.reject(
                line_no,
                "not_an_event",
                "neither an archived delivery nor an event body",
                text + newline,
            )
            return
        check = self.verifier.verify(body, headers, parsed)
        if not check.ok:
            reason = check.reason or "bad_signature"
            detail = (
                "no signature in the headers or the body"
                if reason == "unsigned"
                else "no configured secret verifies the signature"
            )
            chunk.reject(line_no, reason, detail, text + newline)
            return
        signed = check.stripped or body
        self._stage(
            chunk, line_no, body, headers, received_at, signed,
            check.reading, check.signature_source, check.secret_index,
        )  # fmt: skip

    @staticmethod
    def _stage(
        chunk: _Chunk,
        line_no: int,
        body: bytes,
        headers: dict[str, str],
        received_at: Any,
        signed: bytes,
        reading: str | None,
        source: str | None,
        secret_index: int | None,
    ) -> None:
        staged = chunk.staged
        staged["source_line"].append(line_no)
        staged["body"].append(body)
        staged["idempotency_key"].append(headers.get("idempotency-key") or None)
        staged["content_hash"].append(hashlib.sha256(signed).hexdigest())
        staged["signature_reading"].append(reading)
        staged["signature_source"].append(source)
        staged["secret_index"].append(secret_index)
        staged["delivery_id"].append(headers.get("x-convo-delivery"))
        staged["attempt"].append(headers.get("x-convo-attempt"))
        staged["received_at"].append(received_at)


def ingest(
    paths: Sequence[Path],
    secrets: Sequence[bytes],
    db_path: Path,
) -> IngestResult:
    """Ingest archives into the warehouse at ``db_path``; see the module docstring.

    Reading and verifying (Python, one core) and loading (DuckDB) overlap: a loader
    thread stores one chunk while the next is read, at most one chunk waiting between.
    """
    from convo_analytics.warehouse import open_warehouse

    started = time.monotonic()
    run_id = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ-") + _secrets.token_hex(3)
    result = IngestResult(run_id)
    con = open_warehouse(db_path)
    # Chunks are independent: bound DuckDB's buffer pool so that a 2,000,000-event
    # archive ingests in well under a gigabyte.
    con.execute("SET memory_limit = '256MB'")
    con.execute("SET preserve_insertion_order = false")
    # A checkpoint rewrites the tables' key indexes: at the default threshold (16 MB of
    # write-ahead log) that happened after almost every chunk and took most of the time.
    # Chunks of more than a row group are written to the database file directly, so
    # the log stays small; the checkpoint runs once, when the ingest closes the file.
    con.execute("SET checkpoint_threshold = '256MB'")
    ingester = Ingester(secrets)
    began = datetime.now(UTC)
    _record(con, result, began, "running")
    loader = _Loader(con, run_id, result)
    try:
        try:
            for path in paths:
                result.files += 1
                source = str(path.resolve())
                for chunk in ingester.read_file(path, source):
                    loader.put(chunk)
        finally:
            loader.close()
        result.seconds = time.monotonic() - started
        _record(con, result, began, "ok")
    except BaseException as exc:
        result.seconds = time.monotonic() - started
        _record(con, result, began, "failed", f"{type(exc).__name__}: {exc}")
        raise
    finally:
        con.close()
    return result


class _Loader:
    """Stores chunks in DuckDB on a thread of its own, each in one transaction, in order.

    DuckDB releases the GIL while it works, so the next chunk is read and verified
    meanwhile. An error in the thread is raised again in the caller at its next put or
    at close; close waits until every chunk handed over is committed (or failed).
    """

    def __init__(self, con: Any, run_id: str, result: IngestResult) -> None:
        self.con = con
        self.run_id = run_id
        self.result = result
        self.ord = 0
        self.error: BaseException | None = None
        self.queue: queue.Queue[tuple[pa.Table, pa.Table, int] | None] = queue.Queue()
        self.busy = False
        self.idle = threading.Condition()
        self.thread = threading.Thread(target=self._run, name="ingest-loader", daemon=True)
        self.thread.start()

    def put(self, chunk: _Chunk) -> None:
        staged, rejected = chunk.tables(self.ord + 1)
        self.ord += staged.num_rows
        self._wait()  # the previous chunk is stored: at most one in memory besides this one
        if self.thread.is_alive():
            self.queue.put((staged, rejected, chunk.count))
        self._raise()

    def _wait(self) -> None:
        with self.idle:
            while self.busy and self.thread.is_alive():
                self.idle.wait(0.5)
            self.busy = self.thread.is_alive()

    def close(self) -> None:
        if self.thread.is_alive():
            self.queue.put(None)
        self.thread.join()
        self._raise()

    def _raise(self) -> None:
        if self.error is not None:
            raise self.error

    def _run(self) -> None:
        from convo_analytics.warehouse import transaction
        from convo_analytics.warehouse._events import load_events, quarantine

        result = self.result
        try:
            while (item := self.queue.get()) is not None:
                staged, rejected, lines = item
                now = datetime.now(UTC)
                with transaction(self.con):
                    counts = load_events(self.con, staged, self.run_id, now)
                    quarantine(self.con, rejected, self.run_id, now)
                result.read += lines
                result.loaded += counts.loaded
                result.duplicates += counts.duplicates
                result.quarantined.update(counts.quarantined)
                result.quarantined.update(rejected.column("reason").to_pylist())
                result.readings.update(counts.readings)
                result.types.update(counts.types)
                with self.idle:
                    self.busy = False
                    self.idle.notify()
        except BaseException as exc:  # handed to the caller
            self.error = exc


def _record(
    con: Any, result: IngestResult, began: datetime, status: str, error: str | None = None
) -> None:
    con.execute(
        "INSERT OR REPLACE INTO ingest_runs VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        [
            result.run_id, began, None if status == "running" else datetime.now(UTC), status,
            result.files, result.read, result.loaded, result.duplicates,
            sum(result.quarantined.values()), orjson.dumps(result.quarantined).decode(),
            orjson.dumps(result.readings).decode(), round(result.seconds, 3), error,
        ],
    )  # fmt: skip
