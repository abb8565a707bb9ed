"""The one HTTP client of an extraction: auth, TLS rule, pacing, retries, counting.

Every request of a run goes through :meth:`ServiceClient.get`, so the rate
limiter sees all of them and the run's counts (requests, retries, 429s) are
complete. Errors name the endpoint and never the API key.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import httpx
import orjson

from convo_analytics._net import is_loopback_host
from convo_analytics.extract._limiter import AdaptiveLimiter
from convo_analytics.extract._retry import RETRY_STATUSES, RetryPolicy, parse_retry_after


class ExtractError(Exception):
    """An extraction failed in a way a re-run may fix (the service, the network)."""


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


def check_base_url(url: str) -> str:
    """The base URL without a trailing slash; plain http only for loopback (raises ValueError)."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"{url!r} is not an absolute http(s) URL")
    if parts.scheme == "http" and not is_loopback(url):
        raise ValueError(
            f"{url!r} uses plain http; the service requires TLS (https://), "
            "plain http is accepted only for loopback addresses"
        )
    return url.rstrip("/")


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
        api_key: str,
        *,
        limiter: AdaptiveLimiter,
        retry: RetryPolicy | None = None,
        connect_timeout: float = 10.0,
        read_timeout: float = 30.0,
        max_connections: int = 32,
        transport: httpx.AsyncBaseTransport | None = None,
        seed: int | None = None,
    ) -> None:
        self.base_url = check_base_url(base_url)
        self.limiter = limiter
        self.retry = retry or RetryPolicy()
        self._rng = random.Random(seed)
        self._client = httpx.AsyncClient(
            base_url=self.base_url,
            headers={
                "Authorization": f"Bearer {api_key}",
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
        missing_ok: bool = False,
    ) -> tuple[httpx.Response, Any]:
        """GET and parse JSON, retrying what is worth retrying; raises ExtractError.

        With ``missing_ok`` a 404 answers ``(response, None)`` instead of failing.
        """
        last_problem = "no attempt made"
        for attempt in range(1, self.retry.max_attempts + 1):
            await self.limiter.acquire()
            stats.requests += 1
            retry_after: float | None = None
            try:
                response = await self._client.get(url, params=params)
            except httpx.TransportError as exc:
                stats.transport_errors += 1
                last_problem = f"{type(exc).__name__}: {exc}".rstrip(": ")
            else:
                status = response.status_code
                stats.statuses[status] = stats.statuses.get(status, 0) + 1
                if 200 <= status < 300:
                    try:
                        data = orjson.loads(response.content)
                    except orjson.JSONDecodeError:
                        last_problem = f"answer {status} is not JSON"
                    else:
                        self.limiter.on_success()
                        return response, data
                elif status == 404 and missing_ok:
                    self.limiter.on_success()
                    return response, None
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
            await self.limiter.wait(self.retry.wait(attempt, retry_after, self._rng))
        raise ExtractError(
            f"GET {endpoint} failed after {self.retry.max_attempts} attempts; last: {last_problem}"
        )
