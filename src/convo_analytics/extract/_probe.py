"""The requests of ``convo extract --check``: counted, bounded, and what they found.

Each stream's probes go through one :class:`Probe`, which stops the stream's
check after :data:`BUDGET` requests; a :class:`StreamCheck` collects the
findings, the TOML table they make (``spec``) and what needs a decision.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import httpx

from convo_analytics.extract._fields import FieldFinding
from convo_analytics.extract._http import ExtractError, RequestStats, ServiceClient
from convo_analytics.extract._shapes import find_records

__all__ = ["BUDGET", "CheckReport", "OutOfBudget", "Probe", "StreamCheck"]

#: At most this many requests per stream.
BUDGET = 80


class OutOfBudget(Exception):
    """The stream's check has made its BUDGET of requests."""


@dataclass
class StreamCheck:
    """What the check found for one stream; ``spec`` is the TOML table it would write."""

    name: str
    path: str
    status: str = "ok"  # ok, unavailable, failed
    spec: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    #: Lines that need the user's attention (a setting to add or check).
    todo: list[str] = field(default_factory=list)
    fields: dict[str, FieldFinding] = field(default_factory=dict)
    requests: int = 0
    error: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "path": self.path,
            "config": self.spec,
            "notes": self.notes,
            "todo": self.todo,
            "fields": {
                k: {
                    "path": f.path,
                    "origin": f.origin,
                    "share": round(f.share, 3),
                    "sampled": f.sampled,
                    "candidates": list(f.candidates),
                }
                for k, f in self.fields.items()
            },
            "requests": self.requests,
            "error": self.error,
        }


@dataclass
class CheckReport:
    base_url: str
    streams: dict[str, StreamCheck]

    @property
    def ok(self) -> bool:
        return all(s.status != "failed" for s in self.streams.values())

    def to_json(self) -> dict[str, Any]:
        return {
            "baseUrl": self.base_url,
            "status": "ok" if self.ok else "failed",
            "streams": {n: s.to_json() for n, s in self.streams.items()},
        }


class Probe:
    """The requests of one stream's check, counted and bounded."""

    def __init__(self, client: ServiceClient, check: StreamCheck) -> None:
        self.client, self.check = client, check
        self.stats = RequestStats()

    async def get(
        self, url: str, params: dict[str, str], missing: tuple[int, ...] = (), parse: bool = True
    ) -> tuple[httpx.Response, Any]:
        if self.stats.requests >= BUDGET:
            raise OutOfBudget
        try:
            return await self.client.get(
                url, params or None, self.stats, url, missing=missing, parse=parse
            )
        finally:
            self.check.requests = self.stats.requests

    async def page(
        self, url: str, params: dict[str, str], records_at: str | None
    ) -> tuple[httpx.Response, Any, list[dict[str, Any]], str | None] | None:
        """A list page, or None when the service refuses the parameters (4xx)."""
        try:
            response, data = await self.get(url, params)
        except ExtractError as exc:
            if " answered 4" in str(exc):
                return None
            raise
        records, envelope = find_records(data, records_at)
        return response, data, records, envelope
