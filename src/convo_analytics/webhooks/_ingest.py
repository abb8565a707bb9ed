"""``convo webhooks ingest``: webhook archives into the warehouse, every line accounted for.

An input line ends in exactly one place: loaded (a new event), recognised as a
duplicate (a retry or replay of an event already stored), or quarantined with
its file, line number and reason. Two line shapes are read: a delivery as the
receiver archives it (headers and raw body, decision D-ARCHIVE-FORMAT) and a
bare event body carrying its ``signature`` field (a service's export of its
delivery log). Files may be plain or gzip JSON lines; they are never modified.

Python does per line only what must be exact: read the raw body, verify the
HMAC, hash the signed bytes. The file is read in large blocks, and the common
line (the member append_signature writes, headers repeating it, the first
secret) is decided by a shortcut that reaches the general verifier's answer
with a fraction of its work. The event bodies then go to DuckDB in chunks of
more than a row group, where they are validated, deduplicated and typed in
SQL, on a thread of their own while Python reads the next chunk.
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import hmac
import queue
import secrets as _secrets
import threading
import time
import zlib
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson
import pyarrow as pa

from convo_analytics.webhooks._signature import SIGNATURE_PREFIX, appended_signature
from convo_analytics.webhooks._verify import SIGNATURE_HEADERS, Verifier

CHUNK_LINES = 131_072
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

    def __init__(self, source: str) -> None:
        self.source = source
        self.staged: dict[str, list[Any]] = {name: [] for name in _STAGE_COLUMNS}
        self.quarantined: dict[str, list[Any]] = {name: [] for name in _QUARANTINE_COLUMNS}
        self.lines = 0

    def reject(self, line_no: int, reason: str, detail: str, raw: bytes) -> None:
        excerpt = raw[:EXCERPT].decode("utf-8", "backslashreplace")
        for name, value in zip(
            _QUARANTINE_COLUMNS, (self.source, line_no, reason, detail, excerpt), strict=True
        ):
            self.quarantined[name].append(value)

    def tables(self, first_ord: int) -> tuple[pa.Table, pa.Table]:
        """The staged rows (numbered from ``first_ord``) and the quarantined ones, as Arrow."""
        from convo_analytics.warehouse._events import QUARANTINE_SCHEMA, STAGE_SCHEMA

        n = len(self.staged["body"])
        self.staged["ord"] = list(range(first_ord, first_ord + n))
        self.staged["source_file"] = [self.source] * n
        arrays = []
        for column in STAGE_SCHEMA:  # each list is let go once converted: less at the peak
            arrays.append(pa.array(self.staged.pop(column.name), column.type))
        staged = pa.Table.from_arrays(arrays, schema=STAGE_SCHEMA)
        return staged, pa.table(self.quarantined, schema=QUARANTINE_SCHEMA)


#: The staged columns built line by line (ord and source_file are filled per chunk).
_STAGE_COLUMNS = (
    "source_line", "body", "idempotency_key", "content_hash", "signature_reading",
    "signature_source", "secret_index", "delivery_id", "attempt", "received_at",
)  # fmt: skip
_QUARANTINE_COLUMNS = ("source_file", "source_line", "reason", "detail", "excerpt")
#: How much a read of the file asks for at a time (uncompressed, for a gzip file).
BLOCK = 1 << 22


def _blocks(path: Path) -> Iterator[tuple[list[bytes], str | None]]:
    """The file's complete lines (without their newline) a block at a time, then its end.

    The last item has no lines but says how the file ended: None when it ended cleanly,
    else what is wrong with the gzip stream (the line it broke off, if any, is dropped).
    An unterminated last line comes, with ``UNTERMINATED``, just before that.
    """
    with path.open("rb") as probe:
        head = probe.read(2)
    # by its magic; a .gz cut down to the magic's first byte is a truncated gzip too
    gzipped = head == b"\x1f\x8b" or (head == b"\x1f" and path.name.endswith(".gz"))
    pending = b""
    try:
        with gzip.open(path, "rb") if gzipped else path.open("rb") as stream:
            read = stream.read1 if isinstance(stream, gzip.GzipFile) else stream.read
            while block := read(BLOCK):
                lines = (pending + block).split(b"\n") if pending else block.split(b"\n")
                pending = lines.pop()
                yield lines, None
    except (EOFError, gzip.BadGzipFile, zlib.error) as exc:
        yield [], f"the gzip stream ends early or is damaged ({exc})"
        return
    if pending:
        yield [pending], UNTERMINATED
    yield [], None


UNTERMINATED = "unterminated"


def _header_int(value: str | None) -> int | None:
    try:
        return int(value) if value is not None else None
    except ValueError:
        return None


class Ingester:
    """Turns a file's lines into chunks: verified deliveries staged, the others quarantined."""

    def __init__(self, secrets: Sequence[bytes], chunk_lines: int = CHUNK_LINES) -> None:
        self.verifier = Verifier(secrets)
        self.chunk_lines = chunk_lines

    def read_file(self, path: Path, source: str) -> Iterator[_Chunk]:
        chunk = _Chunk(source)
        line_no = 0
        for lines, end in _blocks(path):
            if end is not None and end != UNTERMINATED:
                chunk.lines += 1
                chunk.reject(line_no + 1, "truncated_gzip", end, b"")
            newline = b"" if end == UNTERMINATED else b"\n"
            for line in lines:
                line_no += 1
                chunk.lines += 1
                self._line(chunk, line_no, line, newline)
                if chunk.lines >= self.chunk_lines:
                    yield chunk
                    chunk = _Chunk(source)
        if chunk.lines:
            yield chunk

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
        if "headers" in record and ("body" in record or "bodyBase64" in record):
            raw_headers = record.get("headers")
            if isinstance(raw_headers, dict):
                headers = {str(k).lower(): str(v) for k, v in raw_headers.items()}
            try:
                if "body" in record:
                    body = str(record["body"]).encode("utf-8")
                else:
                    body = base64.b64decode(record["bodyBase64"], validate=True)
            except (ValueError, TypeError):
                chunk.reject(line_no, "malformed_json", "bodyBase64 is not base64", text + newline)
                return
            received_at = record.get("receivedAt")
        elif "event" in record:
            body, parsed = line, record
        else:
            chunk.reject(
                line_no,
                "not_an_event",
                "neither an archived delivery nor an event body",
                text + newline,
            )
            return
        if (fast := self._common_case(body, headers)) is not None:
            signed, source = fast
            self._stage(chunk, line_no, body, headers, received_at, signed, "stripped", source, 0)
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

    def _common_case(self, body: bytes, headers: dict[str, str]) -> tuple[bytes, str] | None:
        """(signed bytes, signature source) when the line is what the service sends and the
        first secret verifies it, decided as :meth:`Verifier.verify` would decide it.

        The case: the body ends with the member as append_signature writes it, and every
        signature header present repeats that member's value. Then every claim is written
        in the body, so the raw reading cannot match (see Verifier._match), and the
        stripped reading under the first secret is the first one tried: when it matches,
        the first claim in order (the first header present, else the field) verified.
        Anything else (None) takes the general path.
        """
        appended = appended_signature(body)
        if appended is None:
            return None
        stripped, value = appended
        digest = value[len(SIGNATURE_PREFIX) :]
        if not digest.isalnum():
            return None
        claimed = value.decode()
        source = None
        for name in SIGNATURE_HEADERS:
            header = headers.get(name)
            if header is not None:
                if header != claimed:
                    return None
                source = source or name
        if not hmac.compare_digest(self.verifier.digest(0, stripped), digest.decode()):
            return None
        return stripped, source or "field"

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
        staged["attempt"].append(_header_int(headers.get("x-convo-attempt")))
        staged["received_at"].append(str(received_at) if received_at is not None else None)


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
            self.queue.put((staged, rejected, chunk.lines))
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
