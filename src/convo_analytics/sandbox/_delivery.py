"""Webhook registration and signed deliveries with retries, and the delivery log.

Each event is delivered to every endpoint of its workspace that subscribes to
its type, as a set-B envelope whose body bytes are fixed at the first attempt:
a retry sends the very same bytes, signature and idempotency key. A delivery
fails when the receiver does not answer 2xx within the acknowledgement window
(10 s); it is retried on the configured schedule (2 s, 8 s, 32 s by default,
or exponential backoff for up to 24 hours), and every attempt is logged.
"""

from __future__ import annotations

import asyncio
import re
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import httpx
import orjson

from convo_analytics._net import is_loopback_host
from convo_analytics.contract import (
    DELIVERY_HEADER,
    EVENT_HEADER,
    IDEMPOTENCY_HEADER,
    SIGNATURE_HEADER,
    TIMESTAMP_HEADER,
)
from convo_analytics.sandbox._model import Event, iso
from convo_analytics.webhooks import append_signature, sign

ACK_TIMEOUT_SECONDS = 10.0
DAY_SECONDS = 86_400.0


def parse_retry_schedule(spec: str) -> tuple[float, ...]:
    """``2,8,32`` (waits before each retry) or ``exponential[:HOURS h]`` (2 s x4, up to 24 h)."""
    text = spec.strip().lower()
    m = re.fullmatch(r"exponential(?::(\d+(?:\.\d+)?)h)?", text)
    if m:
        horizon = float(m.group(1) or 24) * 3600
        waits: list[float] = []
        wait = 2.0
        while sum(waits) + wait <= horizon:
            waits.append(wait)
            wait = min(wait * 4, 3600.0)
        return tuple(waits)
    try:
        waits = [float(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise ValueError(
            f"retry schedule {spec!r} is not understood; use e.g. 2,8,32 or exponential:24h"
        ) from None
    if any(w < 0 for w in waits):
        raise ValueError("retry waits must not be negative")
    return tuple(waits)


def check_webhook_url(url: str) -> None:
    """HTTPS anywhere; plain HTTP only to a loopback address (decision D-WEBHOOK-URL)."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError("url must be an absolute http(s) URL")
    if parts.scheme == "http" and not is_loopback_host(parts.hostname):
        raise ValueError("url must use https (plain http is accepted for loopback only)")


@dataclass(slots=True)
class Endpoint:
    id: str
    workspace_id: str
    url: str
    events: tuple[str, ...]
    secret: str
    description: str | None
    created_at: int
    active: bool = True

    def wants(self, event_type: str) -> bool:
        return self.active and ("*" in self.events or event_type in self.events)

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "workspaceId": self.workspace_id,
            "url": self.url,
            "events": list(self.events),
            "description": self.description,
            "createdAt": iso(self.created_at),
            "active": self.active,
        }


@dataclass(slots=True)
class _Delivery:
    id: str
    endpoint: Endpoint
    event: Event
    body: bytes
    headers: dict[str, str]
    attempt: int = 0
    first_at: float = 0.0


@dataclass
class Dispatcher:
    """Delivers events to registered endpoints from the server's event loop."""

    schedule: tuple[float, ...] = (2.0, 8.0, 32.0)
    ack_timeout: float = ACK_TIMEOUT_SECONDS
    signing: str = "stripped"  # or "raw": the header signs the whole raw body
    concurrency: int = 16
    clock: Callable[[], float] = time.time
    endpoints: dict[str, Endpoint] = field(default_factory=dict)
    log: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    _loop: asyncio.AbstractEventLoop | None = None
    _client: httpx.AsyncClient | None = None
    _semaphore: asyncio.Semaphore | None = None
    _tasks: set[asyncio.Task[None]] = field(default_factory=set)
    _handles: set[asyncio.TimerHandle] = field(default_factory=set)

    async def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._semaphore = asyncio.Semaphore(self.concurrency)
        self._client = httpx.AsyncClient(follow_redirects=False, trust_env=False)

    async def stop(self) -> None:
        for handle in self._handles:
            handle.cancel()
        for task in list(self._tasks):
            task.cancel()
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)
        if self._client is not None:
            await self._client.aclose()
        self._loop = None

    def register(
        self,
        workspace_id: str,
        url: str,
        events: list[str],
        secret: str | None,
        description: str | None,
    ) -> Endpoint:
        check_webhook_url(url)
        endpoint = Endpoint(
            id=f"wh_{secrets.token_hex(8)}",
            workspace_id=workspace_id,
            url=url,
            events=tuple(dict.fromkeys(events or ["*"])),
            secret=secret or f"whsec_{secrets.token_urlsafe(24)}",
            description=description,
            created_at=int(self.clock() * 1000),
        )
        self.endpoints[endpoint.id] = endpoint
        return endpoint

    def endpoints_of(self, workspace_id: str) -> list[Endpoint]:
        return [e for e in self.endpoints.values() if e.workspace_id == workspace_id]

    def sink_for(self, workspace_id: str) -> Callable[[list[Event]], None]:
        """The event sink a workspace publishes to; safe to call from any thread."""

        def sink(events: list[Event]) -> None:
            loop = self._loop
            if loop is None:
                return
            for endpoint in self.endpoints_of(workspace_id):
                for event in events:
                    if endpoint.wants(event.type):
                        delivery = self._prepare(endpoint, event)
                        loop.call_soon_threadsafe(self._schedule, delivery, 0.0)

        return sink

    def _prepare(self, endpoint: Endpoint, event: Event) -> _Delivery:
        unsigned = orjson.dumps(event.envelope())
        signature = sign(endpoint.secret, unsigned)
        body = append_signature(unsigned, signature)
        header_sig = sign(endpoint.secret, body) if self.signing == "raw" else signature
        headers = {
            "Content-Type": "application/json",
            "User-Agent": "ConvoAssistant-Webhooks/1.0 (sandbox)",
            SIGNATURE_HEADER: header_sig,
            IDEMPOTENCY_HEADER: event.key,
            EVENT_HEADER: event.type,
            TIMESTAMP_HEADER: iso(event.at),
        }
        delivery_id = f"dlv_{secrets.token_hex(8)}"
        headers[DELIVERY_HEADER] = delivery_id
        return _Delivery(delivery_id, endpoint, event, body, headers, first_at=self.clock())

    def _schedule(self, delivery: _Delivery, delay: float) -> None:
        assert self._loop is not None
        handle: asyncio.TimerHandle | None = None

        def fire() -> None:
            if handle is not None:
                self._handles.discard(handle)
            task = asyncio.ensure_future(self._attempt(delivery))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

        handle = self._loop.call_later(delay, fire)
        self._handles.add(handle)

    async def _attempt(self, delivery: _Delivery) -> None:
        assert self._client is not None and self._semaphore is not None
        delivery.attempt += 1
        started = self.clock()
        status: int | None = None
        error: str | None = None
        async with self._semaphore:
            try:
                response = await self._client.post(
                    delivery.endpoint.url,
                    content=delivery.body,
                    headers={**delivery.headers, "X-Convo-Attempt": str(delivery.attempt)},
                    timeout=self.ack_timeout,
                )
                status = response.status_code
                if not 200 <= status < 300:
                    error = f"receiver answered {status}"
            except httpx.TimeoutException:
                error = f"no answer within {self.ack_timeout:g} s"
            except httpx.HTTPError as exc:
                error = f"{type(exc).__name__}: {exc}"[:300]
        finished = self.clock()
        retry_in = None if error is None else self._next_wait(delivery.attempt)
        outcome = (
            "succeeded" if error is None else ("retrying" if retry_in is not None else "failed")
        )
        self.log.setdefault(delivery.endpoint.id, []).append(
            {
                "id": f"{delivery.id}-{delivery.attempt}",
                "webhookId": delivery.endpoint.id,
                "eventType": delivery.event.type,
                "idempotencyKey": delivery.event.key,
                "conversationId": delivery.event.conversation_id,
                "attempt": delivery.attempt,
                "attemptedAt": iso(int(started * 1000)),
                "statusCode": status,
                "error": error,
                "durationMs": round((finished - started) * 1000, 2),
                "outcome": outcome,
                "nextAttemptAt": (
                    iso(int((finished + retry_in) * 1000)) if retry_in is not None else None
                ),
                "payload": delivery.body.decode("utf-8"),
            }
        )
        if retry_in is not None:
            self._schedule(delivery, retry_in)

    def _next_wait(self, attempts_made: int) -> float | None:
        if attempts_made - 1 < len(self.schedule):
            return self.schedule[attempts_made - 1]
        return None

    def pending(self) -> int:
        """Deliveries waiting for a retry or in flight."""
        return len(self._handles) + len(self._tasks)
