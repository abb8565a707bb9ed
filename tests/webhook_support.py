"""Helpers for webhook tests: events, bodies signed as a sender would, archive lines, runs."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import duckdb
import orjson

from convo_analytics.sandbox._model import iso
from convo_analytics.webhooks import IngestOptions, append_signature, archive_line, ingest, sign

SECRET = b"whsec_current_secret_123"
OLD_SECRET = b"whsec_previous_secret_456"
#: When the test deliveries were received; their events happen up to minutes later.
RECEIVED = iso(1_790_000_000_500)


def event(n: int, kind: str = "message.responded", **data: Any) -> dict[str, Any]:
    return {
        "event": kind,
        "timestamp": iso(1_790_000_000_000 + n * 1000),
        "workspaceId": "ws_t",
        "conversationId": f"conv_{n % 7}",
        "data": {"messageId": f"msg_{n}", "latencyMs": 100 + n, **data},
    }


def signed_body(envelope: dict[str, Any], secret: bytes = SECRET) -> bytes:
    """As the sandbox signs: compact, the member appended last."""
    unsigned = orjson.dumps(envelope)
    return append_signature(unsigned, sign(secret, unsigned))


def signed_like(
    envelope: dict[str, Any], secret: bytes = SECRET, position: int = 0, **style: Any
) -> bytes:
    """As another sender signs: its JSON library's style (``json.dumps`` options), the HMAC
    of the text without the member, then the member written in at ``position``."""
    signature = sign(secret, json.dumps(envelope, **style).encode())
    items = list(envelope.items())
    with_member = dict([*items[:position], ("signature", signature), *items[position:]])
    return json.dumps(with_member, **style).encode()


def delivery(
    envelope: dict[str, Any],
    attempt: int = 1,
    secret: bytes = SECRET,
    key: str | None = None,
    header_sig: bool = True,
    received: str = RECEIVED,
    body: bytes | None = None,
) -> bytes:
    """An archived delivery line (the body signed as the sandbox does, unless given)."""
    body = signed_body(envelope, secret) if body is None else body
    headers = {
        "idempotency-key": key or f"evt_{envelope['data']['messageId']}",
        "x-convo-attempt": str(attempt),
        "x-convo-event": envelope["event"],
    }
    if header_sig:
        headers["x-convo-signature"] = orjson.loads(body)["signature"]
    return archive_line(body, headers, received)


def run(
    tmp_path: Path,
    files: list[Path],
    *,
    secrets: tuple[bytes, ...] = (SECRET, OLD_SECRET),
    **options: Any,
) -> dict[str, Any]:
    """Ingest into tmp_path/w.duckdb; its --json counts."""
    opts = IngestOptions(**{"settle_seconds": 0, **options})
    return ingest(files, list(secrets), tmp_path / "w.duckdb", opts).to_json()


def rows(db: Path, sql: str, params: list[Any] | None = None) -> list[tuple[Any, ...]]:
    con = duckdb.connect(str(db), read_only=True)
    try:
        return con.execute(sql, params or []).fetchall()
    finally:
        con.close()


def table_digest(db: Path) -> str:
    """A hash of every event table's rows (run ids and times left out); one connection."""
    parts = []
    con = duckdb.connect(str(db), read_only=True)
    try:
        for table in (
            "events",
            "event_keys",
            "quarantine",
            "message_traces",
            "escalations",
            "lead_qualifications",
            "feedback",
            "guardrail_events",
            "conversation_lifecycle",
        ):
            cols = {
                "quarantine": "* EXCLUDE (ingest_run_id, quarantined_at, resolved_at, resolved_by)",
                "events": "* EXCLUDE (ingest_run_id)",
            }.get(table, "*")
            found = con.execute(f"SELECT {cols} FROM {table} ORDER BY ALL").fetchall()
            parts.append(f"{table}:{found!r}")
    finally:
        con.close()
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()


def _forged_with_prepended_keys() -> bytes:
    """The review's attack: a body signed in canonical form, forged keys prepended."""
    genuine = {**event(7, "guardrail.triggered"), "workspaceId": "ws_t"}
    signature = sign(SECRET, orjson.dumps(genuine, option=orjson.OPT_SORT_KEYS))
    text = orjson.dumps({**genuine, "signature": signature}).decode()
    forged = '{"conversationId":"conv_FORGED","workspaceId":"ws_evil",' + text[1:]
    return forged.encode()


def _text_with(e: dict[str, Any], old: str, new: str) -> bytes:
    body = signed_body(e).decode()
    assert old in body
    unsigned = body[: body.index(',"signature"')].replace(old, new) + "}"
    return (unsigned[:-1] + f',"signature":"{sign(SECRET, unsigned.encode())}"}}').encode()


def hostile_bodies() -> dict[str, tuple[bytes, str]]:
    """Signed bodies that must not load, and their reasons."""
    nested = event(10)
    nested["data"] = {"messageId": "msg_10", "latencyMs": 1}
    e = event(11)
    e["data"]["confidence"] = 0.25
    naive, future, far = event(12), event(13), event(14)
    naive["timestamp"] = "2026-09-21T14:13:20.000"
    future["timestamp"] = "2100-01-01T00:00:00Z"
    far["timestamp"] = "9999-12-31T23:59:59.999Z"
    return {
        "prepended": (_forged_with_prepended_keys(), "duplicate_keys"),
        "nested": (
            _text_with(nested, '"latencyMs":1', '"latencyMs":1,"latencyMs":2'),
            "duplicate_keys",
        ),
        "1e400": (_text_with(e, '"confidence":0.25', '"confidence":1e400'), "non_finite_number"),
        "NaN": (_text_with(e, '"confidence":0.25', '"confidence":NaN'), "non_finite_number"),
        "Infinity": (
            _text_with(e, '"confidence":0.25', '"confidence":-Infinity'),
            "non_finite_number",
        ),
        "naive": (signed_body(naive), "timestamp_without_offset"),
        "2100": (signed_body(future), "future_timestamp"),
        "9999": (signed_body(far), "future_timestamp"),
    }


# -- a minimal HTTP/1.1 client (httpx's async client costs more CPU than the receiver) -------


def http_request(path: str, body: bytes, headers: dict[str, str]) -> bytes:
    head = "".join(f"{name}: {value}\r\n" for name, value in headers.items())
    return (
        f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: {len(body)}\r\n{head}\r\n"
    ).encode("latin-1") + body


async def read_answer(reader: Any) -> int:
    """One HTTP/1.1 answer with a Content-Length (the receiver's always has one); its status."""
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.split(b"\r\n")
    length = 0
    for line in lines[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value)
    await reader.readexactly(length)
    return int(lines[0].split(b" ", 2)[1])


async def post_all(
    host: str, port: int, requests: list[bytes], workers: int, timeout: float = 60.0
) -> tuple[list[int], list[float]]:
    """Send every request over ``workers`` keep-alive connections; statuses and latencies."""
    import asyncio
    import time

    todo = iter(requests)
    statuses: list[int] = []
    latencies: list[float] = []

    async def worker() -> None:
        reader, writer = await asyncio.open_connection(host, port)
        try:
            for request in todo:
                sent = time.perf_counter()
                writer.write(request)
                await writer.drain()
                statuses.append(await read_answer(reader))
                latencies.append(time.perf_counter() - sent)
        finally:
            writer.close()

    await asyncio.wait_for(asyncio.gather(*(worker() for _ in range(workers))), timeout)
    return statuses, latencies
