"""The one HTTP client of an extraction: auth, TLS rule, origins, pacing, retries, counting.

Every request of a run goes through :meth:`ServiceClient.get`, so the rate
limiter sees all of them and the run's counts (requests, retries, 429s) are
complete. The API key goes only to the base URL's origin (and the origins the
user lists); a next link or detail URL elsewhere fails its stream with
nothing sent. Before the service has ever answered, a run-wide budget bounds
how long connection failures are retried, so an unreachable service fails the
run in seconds. Errors name the endpoint and never the API key.
"""

from __future__ import annotations

import random
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import httpx
import orjson

from convo_analytics._net import is_loopback_host
from convo_analytics.auth import ApiKeyCredentials, AuthExpired, Credentials
from convo_analytics.errors import UserError
from convo_analytics.extract._limiter import AdaptiveLimiter
from convo_analytics.extract._retry import RETRY_STATUSES, RetryPolicy, parse_retry_after
from convo_analytics.extract._secrets import check_base_url, origin_of, shown_url

__all__ = ["ExtractError", "OriginRefused", "RequestStats", "ServiceClient", "Unreachable"]
__all__ += ["check_base_url", "is_loopback"]


class ExtractError(Exception):
    """An extraction failed in a way a re-run may fix (the service, the network)."""


class Unreachable(ExtractError):
    """Nothing answered at the base URL within the run's budget: every stream fails."""


class OriginRefused(ExtractError):
    """A next link or detail URL pointed at an origin the key does not belong to."""


@dataclass(slots=True)
class RequestStats:
    """Counts for one stream."""

    requests: int = 0
    retries: int = 0
    rate_limited: int = 0
    server_errors: int = 0
    transport_errors: int = 0
    statuses: dict[int, int] = field(default_factory=dict)


def is_loopback(url: str) -> bool:
    return is_loopback_host(urlsplit(url).hostname or "")


@dataclass
class Reach:
    """Whether the service has answered yet, and since when this run has been trying."""

    budget_seconds: float
    answered: bool = False
    first_try: float | None = None

    def exhausted(self) -> bool:
        if self.answered or self.first_try is None:
            return False
        return time.monotonic() - self.first_try >= self.budget_seconds

    def left(self) -> float:
        if self.answered or self.first_try is None:
            return float("inf")
        return max(0.0, self.budget_seconds - (time.monotonic() - self.first_try))


def _error_message(response: httpx.Response) -> str:
    try:
        body = orjson.loads(response.content)
    except orjson.JSONDecodeError:
        return response.text[:200]
    if isinstance(body, dict):
        error = body.get("error")
        if isinstance(error, dict) and "message" in error:
            return str(error["message"])[:300]
        if isinstance(error, str):
            return error[:300]
        if "message" in body:
            return str(body["message"])[:300]
    return response.text[:200]


class ServiceClient:
    def __init__(
        self,
        base_url: str,
        credentials: str | Credentials,
        *,
        limiter: AdaptiveLimiter,
        retry: RetryPolicy | None = None,
        connect_timeout: float = 10.0,
        read_timeout: float = 30.0,
        max_connections: int = 32,
        transport: httpx.AsyncBaseTransport | None = None,
        seed: int | None = None,
        allowed_origins: Iterable[str] = (),
        reach_budget_seconds: float = 5.0,
    ) -> None:
        self.base_url = check_base_url(base_url)
        self.credentials = (
            ApiKeyCredentials(credentials) if isinstance(credentials, str) else credentials
        )
        self.origins = {origin_of(self.base_url), *(origin_of(o) for o in allowed_origins)}
        self.reach = Reach(reach_budget_seconds)
        self.limiter = limiter
        self.retry = retry or RetryPolicy()
        self._rng = random.Random(seed)
        self._client = httpx.AsyncClient(
            base_url=self.base_url,
            headers={
                "Accept": "application/json",
                "User-Agent": "convo-analytics-extract",
            },
            timeout=httpx.Timeout(read_timeout, connect=connect_timeout),
            limits=httpx.Limits(
                max_connections=max_connections, max_keepalive_connections=max_connections
            ),
            transport=transport,
            trust_env=False,
            follow_redirects=False,
        )

    async def aclose(self) -> None:
        await self._client.aclose()

    async def get(
        self,
        url: str,
        params: dict[str, str] | None,
        stats: RequestStats,
        endpoint: str,
        *,
        missing: tuple[int, ...] = (),
        parse: bool = True,
    ) -> tuple[httpx.Response, Any]:
        """GET and parse JSON, retrying what is worth retrying; raises ExtractError.

        A status in ``missing`` (404: a record gone; 404, 405, 501: no such endpoint)
        answers ``(response, None)`` instead of failing. ``parse=False`` answers a
        success with its body unparsed (bytes: the summary may come as CSV).
        """
        self._check_target(url)
        last_problem = "no attempt made"
        refused: str | None = None  # an Authorization a 401 refused (OAuth: refresh once)
        for attempt in range(1, self.retry.max_attempts + 1):
            await self.limiter.acquire()
            stats.requests += 1
            retry_after: float | None = None
            if self.reach.first_try is None:
                self.reach.first_try = time.monotonic()
            try:
                header = await self.credentials.authorization(stale=refused)
            except (AuthExpired, UserError) as exc:  # a lost grant, a refused endpoint
                raise ExtractError(str(exc)) from None
            try:
                response = await self._client.get(
                    url, params=params, headers={"Authorization": header}
                )
            except httpx.TransportError as exc:
                stats.transport_errors += 1
                last_problem = f"{type(exc).__name__}: {exc}".rstrip(": ")
                if self.reach.exhausted():
                    raise self._unreachable(last_problem, attempt) from None
            else:
                self.reach.answered = True
                status = response.status_code
                stats.statuses[status] = stats.statuses.get(status, 0) + 1
                if 200 <= status < 300 and not parse:
                    self.limiter.on_success()
                    return response, response.content
                if 200 <= status < 300:
                    try:
                        data = orjson.loads(response.content)
                    except orjson.JSONDecodeError:
                        last_problem = f"answer {status} is not JSON"
                    else:
                        self.limiter.on_success()
                        return response, data
                elif status in missing:
                    self.limiter.on_success()
                    return response, None
                elif status == 401 and self.credentials.refreshable and refused is None:
                    refused = header  # the token may have expired early: refresh, once
                    last_problem = "answered 401 (the access token was refused)"
                    continue
                elif status in RETRY_STATUSES:
                    retry_after = parse_retry_after(response.headers.get("retry-after"))
                    if status == 429:
                        stats.rate_limited += 1
                        self.limiter.on_rate_limited(retry_after)
                    else:
                        stats.server_errors += status >= 500
                    last_problem = f"answered {status}: {_error_message(response)}"
                else:
                    raise ExtractError(
                        f"GET {endpoint} answered {status}: {_error_message(response)}"
                        + (" (check the API key)" if status in (401, 403) else "")
                    )
            if attempt == self.retry.max_attempts:
                break
            stats.retries += 1
            wait = min(self.retry.wait(attempt, retry_after, self._rng), self.reach.left())
            await self.limiter.wait(wait)
        if not self.reach.answered:
            raise self._unreachable(last_problem, self.retry.max_attempts)
        raise ExtractError(
            f"GET {endpoint} failed after {self.retry.max_attempts} attempts; last: {last_problem}"
        )

    def _check_target(self, url: str) -> None:
        """Refuse, before sending anything, a URL off the key's origins or plain http afar."""
        if not url.startswith(("http://", "https://")):
            return  # a path: the base URL's origin
        origin = origin_of(url)
        if origin not in self.origins:
            raise OriginRefused(
                f"the service sent a link to another origin ({origin}); nothing was sent there "
                "(the API key belongs to the base URL's origin); if that origin belongs to "
                "the service, add it to extract.allowed_origins"
            )
        if url.startswith("http://") and not is_loopback(url):
            raise OriginRefused(f"{shown_url(url)!r} is plain http; the service requires TLS")

    def _unreachable(self, problem: str, attempts: int) -> Unreachable:
        waited = time.monotonic() - (self.reach.first_try or time.monotonic())
        return Unreachable(
            f"cannot reach the service at {self.base_url} ({problem}; {attempts} attempts in "
            f"{waited:.0f} s); check the base URL and the network"
        )
