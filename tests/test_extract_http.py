"""The extract HTTP client's rules: TLS, retries, Retry-After, the client-side limiter."""

from __future__ import annotations

import asyncio
import random
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime

import httpx
import pytest

from convo_analytics.contract import RateLimitPolicy
from convo_analytics.extract._http import (
    ExtractError,
    RequestStats,
    ServiceClient,
    Unreachable,
    check_base_url,
)
from convo_analytics.extract._limiter import AdaptiveLimiter
from convo_analytics.extract._retry import RetryPolicy, parse_retry_after

KEY = "sk_live_never_print_me_123"


class FakeTime:
    """A clock and a sleep that advance together, so limiter tests take no real time."""

    def __init__(self) -> None:
        self.now = 0.0
        self.sleeps: list[float] = []

    def clock(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


def test_tls_is_required_except_on_loopback() -> None:
    assert check_base_url("https://api.example.com/") == "https://api.example.com"
    assert check_base_url("http://127.0.0.1:8787") == "http://127.0.0.1:8787"
    assert check_base_url("http://localhost:1") == "http://localhost:1"
    assert check_base_url("http://[::1]:80") == "http://[::1]:80"
    for bad in ("http://api.example.com", "http://10.0.0.5", "ftp://x", "nothing"):
        with pytest.raises(ValueError):
            check_base_url(bad)


def test_retry_after_in_seconds_as_a_date_zero_or_absent() -> None:
    now = datetime(2026, 11, 21, 12, 0, tzinfo=UTC)
    assert parse_retry_after("7", now) == 7
    assert parse_retry_after("1.5", now) == 1.5
    later = format_datetime(now + timedelta(seconds=30), usegmt=True)
    assert parse_retry_after(later, now) == pytest.approx(30)
    assert parse_retry_after(format_datetime(now - timedelta(hours=1), usegmt=True), now) == 0
    assert parse_retry_after("0", now) == 0
    assert parse_retry_after(None, now) is None
    assert parse_retry_after("soon", now) is None


def test_backoff_grows_never_reaches_zero_and_is_capped() -> None:
    policy = RetryPolicy(base_seconds=0.5, max_backoff_seconds=8)
    rng = random.Random(1)
    for attempt in range(1, 12):
        wait = policy.wait(attempt, None, rng)
        ceiling = min(8.0, 0.5 * 2 ** (attempt - 1))
        assert ceiling / 2 <= wait <= ceiling
    assert policy.wait(1, 0.0, rng) >= 0.25  # Retry-After: 0 means backoff, never a tight loop
    assert 12 <= policy.wait(1, 12.0, rng) <= 12.25
    assert policy.wait(1, 10_000.0, rng) <= policy.max_retry_after_seconds + 0.25


def _client(handler: httpx.MockTransport, time_: FakeTime, attempts: int = 4) -> ServiceClient:
    limiter = AdaptiveLimiter(None, clock=time_.clock, sleep=time_.sleep)
    return ServiceClient(
        "https://svc.example",
        KEY,
        limiter=limiter,
        retry=RetryPolicy(max_attempts=attempts),
        transport=handler,
        seed=3,
    )


def test_transient_failures_are_retried_until_success() -> None:
    answers = iter([
        httpx.Response(503), httpx.Response(429, headers={"retry-after": "3"}),
        httpx.Response(200, content=b"not json"), httpx.Response(200, json={"ok": True}),
    ])  # fmt: skip
    calls: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        calls.append(request)
        return next(answers)

    time_ = FakeTime()
    stats = RequestStats()
    client = _client(httpx.MockTransport(handler), time_, attempts=5)
    _, data = asyncio.run(client.get("/v1/leads", None, stats, "/v1/leads"))
    assert data == {"ok": True}
    assert stats.requests == 4 and stats.retries == 3 and stats.rate_limited == 1
    assert calls[0].headers["authorization"] == f"Bearer {KEY}"
    assert any(3 <= s <= 3.25 for s in time_.sleeps), "the Retry-After of the 429 was honoured"


def test_connection_errors_are_retried_and_the_final_error_names_the_endpoint() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("connection refused", request=request)

    stats = RequestStats()
    client = _client(httpx.MockTransport(handler), FakeTime(), attempts=3)
    with pytest.raises(Unreachable) as never:
        asyncio.run(client.get("/v1/conversations", None, stats, "/v1/conversations"))
    assert "cannot reach the service" in str(never.value) and "3 attempts" in str(never.value)
    assert KEY not in str(never.value)
    assert stats.requests == 3 and stats.transport_errors == 3

    answered: list[int] = []

    def flaky(request: httpx.Request) -> httpx.Response:
        if not answered:
            answered.append(1)
            return httpx.Response(200, json={"data": []})
        raise httpx.ConnectError("connection refused", request=request)

    stats = RequestStats()
    client = _client(httpx.MockTransport(flaky), FakeTime(), attempts=3)
    asyncio.run(client.get("/v1/leads", None, stats, "/v1/leads"))
    with pytest.raises(ExtractError) as caught:
        asyncio.run(client.get("/v1/conversations", None, stats, "/v1/conversations"))
    message = str(caught.value)
    assert not isinstance(caught.value, Unreachable), "the service answered once: retries"
    assert "/v1/conversations" in message and "3 attempts" in message
    assert KEY not in message


def test_client_errors_fail_at_once_without_the_key() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(401, json={"error": {"message": "invalid API key"}})

    stats = RequestStats()
    client = _client(httpx.MockTransport(handler), FakeTime())
    with pytest.raises(ExtractError) as caught:
        asyncio.run(client.get("/v1/leads", None, stats, "/v1/leads"))
    assert stats.requests == 1
    assert "401" in str(caught.value) and KEY not in str(caught.value)


def test_a_missing_detail_can_be_allowed() -> None:
    client = _client(httpx.MockTransport(lambda r: httpx.Response(404)), FakeTime())
    _, data = asyncio.run(client.get("/v1/x/1", None, RequestStats(), "/v1/x/{id}", missing=(404,)))
    assert data is None


@pytest.mark.parametrize("spec", ["600/min", "100/min"])
def test_the_limiter_paces_at_the_target_without_exceeding_the_server_bucket(spec: str) -> None:
    """Simulated: the client's requests against the server's own token bucket."""
    from convo_analytics.sandbox._ratelimit import TokenBucket

    policy = RateLimitPolicy.parse(spec)
    assert policy is not None
    time_ = FakeTime()
    limiter = AdaptiveLimiter(policy, clock=time_.clock, sleep=time_.sleep)
    server = TokenBucket(policy, time_.clock)
    allowed = rejected = 0

    async def drive() -> None:
        nonlocal allowed, rejected
        while time_.now < 600:  # ten simulated minutes
            await limiter.acquire()
            ok, wait, _ = server.take()
            if ok:
                allowed += 1
                limiter.on_success()
            else:
                rejected += 1
                limiter.on_rate_limited(wait)

    asyncio.run(drive())
    rate = allowed / time_.now
    assert rate >= 0.95 * policy.per_second
    assert rejected <= 0.01 * (allowed + rejected)


def test_a_429_pauses_and_slows_the_limiter_then_it_recovers() -> None:
    policy = RateLimitPolicy.parse("600/min")
    time_ = FakeTime()
    limiter = AdaptiveLimiter(policy, clock=time_.clock, sleep=time_.sleep)
    target = limiter.rate
    limiter.on_rate_limited(5.0)
    assert limiter.rate < target
    before = time_.now
    asyncio.run(limiter.acquire())
    assert time_.now - before >= 5.0
    for _ in range(200):
        limiter.on_success()
    assert limiter.rate == pytest.approx(target)
