"""Write a workspace history as a webhook archive: one delivery a line, as received.

Lines come in delivery order (a little after each event happened), and a share
of them are delivered again as a retry would be (the same body, signature and
idempotency key, a later attempt number), because a real archive has them.
"""

from __future__ import annotations

import gzip
import heapq
import random
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import IO

import orjson

from convo_analytics.contract import (
    DELIVERY_HEADER,
    EVENT_HEADER,
    IDEMPOTENCY_HEADER,
    SIGNATURE_HEADER,
    TIMESTAMP_HEADER,
)
from convo_analytics.sandbox._model import Event, iso
from convo_analytics.sandbox._workspace import Workspace
from convo_analytics.webhooks import append_signature, archive_line, sign


def _events_in_order(workspaces: Iterable[Workspace]) -> Iterator[Event]:
    """All events by time, holding only conversations that are still producing events."""
    streams = []
    for ws in workspaces:
        convs = sorted(ws.conversations.records.values(), key=lambda c: c.created_at)
        streams.append(_workspace_events(ws, convs))
    yield from heapq.merge(*streams, key=lambda e: (e.at, e.key))


def _workspace_events(ws: Workspace, convs: list) -> Iterator[Event]:  # type: ignore[type-arg]
    pending: list[tuple[int, str, Event]] = []
    for conv in convs:
        while pending and pending[0][0] < conv.created_at:
            yield heapq.heappop(pending)[2]
        for event in ws.events.history(conv):
            heapq.heappush(pending, (event.at, event.key, event))
    while pending:
        yield heapq.heappop(pending)[2]


def write_history_archive(
    path: Path,
    workspaces: Iterable[Workspace],
    secret: str,
    seed: int = 0,
    retry_rate: float = 0.01,
) -> dict[str, int]:
    """Write the archive (gzip when the name ends in .gz); return counts by outcome."""
    rng = random.Random(f"archive:{seed}")
    counts = {"events": 0, "lines": 0, "retries": 0}
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".partial")
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(tmp, "wb") as raw:
        out: IO[bytes] = raw  # type: ignore[assignment]
        for event in _events_in_order(workspaces):
            unsigned = orjson.dumps(event.envelope())
            signature = sign(secret, unsigned)
            body = append_signature(unsigned, signature)
            headers = {
                "content-type": "application/json",
                SIGNATURE_HEADER: signature,
                IDEMPOTENCY_HEADER: event.key,
                EVENT_HEADER: event.type,
                TIMESTAMP_HEADER: iso(event.at),
                DELIVERY_HEADER: f"dlv_{rng.getrandbits(64):016x}",
                "X-Convo-Attempt": "1",
            }
            received = event.at + rng.randint(20, 900)
            out.write(archive_line(body, headers, iso(received)))
            counts["events"] += 1
            counts["lines"] += 1
            if rng.random() < retry_rate:
                retry = {**headers, "X-Convo-Attempt": "2"}
                out.write(archive_line(body, retry, iso(received + 2000 + rng.randint(0, 500))))
                counts["lines"] += 1
                counts["retries"] += 1
    tmp.replace(path)
    return counts
