"""``convo webhooks ingest``: webhook archives into the warehouse, every line accounted for.

An input line ends in exactly one place: loaded (a new event), recognised as a
duplicate (a retry or replay of an event already stored), or quarantined with
its file, line number and reason. Two line shapes are read: a delivery as the
receiver archives it (headers and raw body, decision D-ARCHIVE-FORMAT) and a
bare event body carrying its ``signature`` field (a service's export of its
delivery log). Files may be plain or gzip JSON lines; they are never modified.

Python does per line only what must be exact: read the raw body, verify the
HMAC, hash the signed bytes. The event bodies then go to DuckDB in chunks,
where they are validated, deduplicated and typed in SQL.
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import secrets as _secrets
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

from convo_analytics.webhooks._verify import verify_delivery

CHUNK_LINES = 50_000
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

    def __init__(self) -> None:
        self.staged: dict[str, list[Any]] = {name: [] for name in _STAGE_COLUMNS}
        self.quarantined: dict[str, list[Any]] = {name: [] for name in _QUARANTINE_COLUMNS}
        self.lines = 0

    def stage(self, **row: Any) -> None:
        for name, column in self.staged.items():
            column.append(row.get(name))

    def reject(self, source: str, line_no: int, reason: str, detail: str, raw: bytes) -> None:
        excerpt = raw[:EXCERPT].decode("utf-8", "backslashreplace")
        for name, value in zip(
            _QUARANTINE_COLUMNS, (source, line_no, reason, detail, excerpt), strict=True
        ):
            self.quarantined[name].append(value)


_STAGE_COLUMNS = (
    "ord", "source_file", "source_line", "body", "idempotency_key", "content_hash",
    "signature_reading", "signature_source", "secret_index", "delivery_id", "attempt",
    "received_at",
)  # fmt: skip
_QUARANTINE_COLUMNS = ("source_file", "source_line", "reason", "detail", "excerpt")


def _lines(path: Path) -> Iterator[tuple[int, bytes | None, str | None]]:
    """(line number, raw line, problem) for each line; a broken gzip ends with a problem."""
    with path.open("rb") as probe:
        gzipped = probe.read(2) == b"\x1f\x8b"
    line_no = 0
    try:
        with gzip.open(path, "rb") if gzipped else path.open("rb") as lines:
            for line_no, raw in enumerate(lines, start=1):
                yield line_no, raw, None
    except (EOFError, gzip.BadGzipFile, zlib.error) as exc:
        yield line_no + 1, None, f"the gzip stream ends early or is damaged ({exc})"


def _header_int(value: str | None) -> int | None:
    try:
        return int(value) if value is not None else None
    except ValueError:
        return None


class Ingester:
    def __init__(self, secrets: Sequence[bytes]) -> None:
        self.secrets = list(secrets)
        self.ord = 0

    def read_file(self, path: Path, source: str) -> Iterator[_Chunk]:
        chunk = _Chunk()
        for line_no, raw, problem in _lines(path):
            chunk.lines += 1
            if raw is None:
                chunk.reject(source, line_no, "truncated_gzip", problem or "", b"")
            else:
                self._line(chunk, source, line_no, raw)
            if chunk.lines >= CHUNK_LINES:
                yield chunk
                chunk = _Chunk()
        if chunk.lines:
            yield chunk

    def _line(self, chunk: _Chunk, source: str, line_no: int, raw: bytes) -> None:
        line = raw.rstrip(b"\r\n")
        if not line.strip():
            chunk.reject(source, line_no, "empty_line", "the line is blank", raw)
            return
        try:
            record = orjson.loads(line)
        except orjson.JSONDecodeError as exc:
            try:
                line.decode("utf-8")
            except UnicodeDecodeError:
                chunk.reject(source, line_no, "bad_encoding", "the line is not UTF-8", raw)
                return
            chunk.reject(source, line_no, "malformed_json", str(exc)[:200], raw)
            return
        if not isinstance(record, dict):
            chunk.reject(source, line_no, "not_an_event", "the line is not a JSON object", raw)
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
                chunk.reject(source, line_no, "malformed_json", "bodyBase64 is not base64", raw)
                return
            received_at = record.get("receivedAt")
        elif "event" in record:
            body, parsed = line, record
        else:
            chunk.reject(
                source,
                line_no,
                "not_an_event",
                "neither an archived delivery nor an event body",
                raw,
            )
            return
        check = verify_delivery(body, headers, self.secrets, parsed)
        if not check.ok:
            reason = check.reason or "bad_signature"
            detail = (
                "no signature in the headers or the body"
                if reason == "unsigned"
                else "no configured secret verifies the signature"
            )
            chunk.reject(source, line_no, reason, detail, raw)
            return
        signed = check.stripped or body
        self.ord += 1
        chunk.stage(
            ord=self.ord, source_file=source, source_line=line_no, body=body,
            idempotency_key=headers.get("idempotency-key") or None,
            content_hash=hashlib.sha256(signed).hexdigest(),
            signature_reading=check.reading, signature_source=check.signature_source,
            secret_index=check.secret_index, delivery_id=headers.get("x-convo-delivery"),
            attempt=_header_int(headers.get("x-convo-attempt")),
            received_at=str(received_at) if received_at is not None else None,
        )  # fmt: skip


def ingest(
    paths: Sequence[Path],
    secrets: Sequence[bytes],
    db_path: Path,
) -> IngestResult:
    """Ingest archives into the warehouse at ``db_path``; see the module docstring."""
    from convo_analytics.warehouse import open_warehouse, transaction
    from convo_analytics.warehouse._events import (
        QUARANTINE_SCHEMA,
        STAGE_SCHEMA,
        load_events,
        quarantine,
    )

    started = time.monotonic()
    run_id = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ-") + _secrets.token_hex(3)
    result = IngestResult(run_id)
    con = open_warehouse(db_path)
    # Chunks are small and independent: bound DuckDB's buffer pool so that a
    # 2,000,000-event archive ingests in well under a gigabyte.
    con.execute("SET memory_limit = '384MB'")
    con.execute("SET preserve_insertion_order = false")
    ingester = Ingester(secrets)
    began = datetime.now(UTC)
    _record(con, result, began, "running")
    try:
        for path in paths:
            result.files += 1
            source = str(path.resolve())
            for chunk in ingester.read_file(path, source):
                now = datetime.now(UTC)
                with transaction(con):
                    stage = pa.table(chunk.staged, schema=STAGE_SCHEMA)
                    counts = load_events(con, stage, run_id, now)
                    rejected = pa.table(chunk.quarantined, schema=QUARANTINE_SCHEMA)
                    quarantine(con, rejected, run_id, now)
                result.read += chunk.lines
                result.loaded += counts.loaded
                result.duplicates += counts.duplicates
                result.quarantined.update(counts.quarantined)
                result.quarantined.update(chunk.quarantined["reason"])
                result.readings.update(counts.readings)
                result.types.update(counts.types)
        result.seconds = time.monotonic() - started
        _record(con, result, began, "ok")
    except BaseException as exc:
        result.seconds = time.monotonic() - started
        _record(con, result, began, "failed", f"{type(exc).__name__}: {exc}")
        raise
    finally:
        con.close()
    return result


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
