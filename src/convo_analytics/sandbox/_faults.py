"""Fault injection: server errors, slow answers and dropped connections, for tests.

Only /v1 requests are affected; the settings can be changed while serving
(POST /_sandbox/faults), and draws come from a seeded generator so a test run
sees the same sequence of faults for the same sequence of requests.
"""

from __future__ import annotations

import asyncio
import logging
import random
from dataclasses import dataclass

import orjson
from starlette.types import ASGIApp, Receive, Scope, Send


@dataclass(slots=True)
class FaultSettings:
    error_rate: float = 0.0
    slow_rate: float = 0.0
    slow_seconds: float = 2.0
    drop_rate: float = 0.0

    def validate(self) -> None:
        for name in ("error_rate", "slow_rate", "drop_rate"):
            value = getattr(self, name)
            if not 0.0 <= value <= 1.0:
                raise ValueError(f"{name} must be between 0 and 1, not {value}")
        if not 0.0 <= self.slow_seconds <= 120:
            raise ValueError("slow_seconds must be between 0 and 120")


class InjectedDrop(ConnectionAbortedError):
    """Raised on purpose to make uvicorn drop the connection mid-answer."""


class _HideInjectedDrops(logging.Filter):
    """An injected drop is the sandbox working as asked, not an error worth a traceback."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not (record.exc_info and isinstance(record.exc_info[1], InjectedDrop))


class FaultInjector:
    def __init__(self, app: ASGIApp, settings: FaultSettings, seed: int = 0) -> None:
        logging.getLogger("uvicorn.error").addFilter(_HideInjectedDrops())
        self.app = app
        self.settings = settings
        self.rng = random.Random(seed)
        self.injected = {"error": 0, "slow": 0, "drop": 0}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        s = self.settings
        if scope["type"] != "http" or not scope["path"].startswith("/v1/"):
            await self.app(scope, receive, send)
            return
        if s.drop_rate and self.rng.random() < s.drop_rate:
            self.injected["drop"] += 1
            await send(
                {
                    "type": "http.response.start",
                    "status": 200,
                    "headers": [
                        (b"content-type", b"application/json"),
                        (b"content-length", b"4096"),
                    ],
                }
            )
            await send({"type": "http.response.body", "body": b'{"data": [', "more_body": True})
            raise InjectedDrop("sandbox fault injection: connection dropped")
        if s.error_rate and self.rng.random() < s.error_rate:
            self.injected["error"] += 1
            status = self.rng.choice((500, 502, 503))
            body = orjson.dumps(
                {
                    "error": {
                        "code": "injected_fault",
                        "requestId": "req_fault",
                        "message": f"injected {status} (sandbox fault)",
                    }
                }
            )
            await send(
                {
                    "type": "http.response.start",
                    "status": status,
                    "headers": [(b"content-type", b"application/json")],
                }
            )
            await send({"type": "http.response.body", "body": body})
            return
        if s.slow_rate and self.rng.random() < s.slow_rate:
            self.injected["slow"] += 1
            await asyncio.sleep(s.slow_seconds)
        await self.app(scope, receive, send)
