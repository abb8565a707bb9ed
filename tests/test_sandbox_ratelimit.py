"""Rate limits: the token bucket under either statement of the interface."""

from __future__ import annotations

from email.utils import parsedate_to_datetime

import httpx
import pytest

from conftest import ACME_KEY, ACME_KEY_2, RunningSandbox
from convo_analytics.sandbox import RateLimitPolicy
from convo_analytics.sandbox._ratelimit import RateLimiter


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _drain(limiter: RateLimiter, ws: str, key: str, attempts: int) -> int:
    allowed = 0
    for _ in range(attempts):
        verdict = limiter.take(ws, key)
        assert verdict is not None
        allowed += verdict[0]
    return allowed


def test_600_per_minute_allows_bursts_at_twice_the_rate_for_ten_seconds() -> None:
    clock = FakeClock()
    limiter = RateLimiter(RateLimitPolicy.parse("600/min"), clock)
    allowed = 0
    for _ in range(10 * 20):  # 20 requests a second for 10 s
        allowed += _drain(limiter, "ws", "k", 1)
        clock.now += 0.05
    assert allowed >= 195
    assert _drain(limiter, "ws", "k", 50) <= 2  # the burst allowance is spent
    clock.now += 60
    # after a quiet minute the sustained rate holds: 600 over the next minute, not more
    allowed = 0
    for _ in range(1200):
        allowed += _drain(limiter, "ws", "k", 1)
        clock.now += 0.05
    assert 600 <= allowed <= 600 + 100 + 1


def test_600_per_minute_is_per_key_and_100_per_minute_is_per_workspace() -> None:
    clock = FakeClock()
    per_key = RateLimiter(RateLimitPolicy.parse("600/min"), clock)
    assert _drain(per_key, "ws", "k1", 500) == 100
    assert _drain(per_key, "ws", "k2", 500) == 100
    per_ws = RateLimiter(RateLimitPolicy.parse("100/min"), clock)
    first = _drain(per_ws, "ws", "k1", 10)
    assert first == 2
    assert _drain(per_ws, "ws", "k2", 10) == 0  # the second key shares the workspace bucket
    clock.now += 60
    allowed = 0
    for _ in range(600):
        allowed += _drain(per_ws, "ws", "k1", 1)
        clock.now += 0.1
    assert 99 <= allowed <= 103


@pytest.mark.parametrize("spec", ["fast", "0/min", "600/min,burst=x", "600/min,colour=red"])
def test_bad_rate_limit_specs_are_rejected(spec: str) -> None:
    with pytest.raises(ValueError):
        RateLimitPolicy.parse(spec)


def test_burst_over_the_limit_gets_429_with_retry_after(start_sandbox) -> None:  # type: ignore[no-untyped-def]
    running: RunningSandbox = start_sandbox(rate_limit="60/min,burst=5", conversations=20)
    with running.client(ACME_KEY) as c:
        statuses = [c.get("/v1/leads", params={"limit": 1}) for _ in range(12)]
    codes = [r.status_code for r in statuses]
    assert codes[:5] == [200] * 5
    limited = [r for r in statuses if r.status_code == 429]
    assert len(limited) >= 6
    for r in limited:
        assert int(r.headers["retry-after"]) >= 1
        assert r.json()["error"]["code"] == "rate_limited"
        assert r.headers["x-ratelimit-limit"] == "60"
    # another key of the same workspace has its own bucket under a per-key policy
    with running.client(ACME_KEY_2) as other:
        assert other.get("/v1/leads", params={"limit": 1}).status_code == 200


def test_retry_after_can_be_an_http_date(start_sandbox) -> None:  # type: ignore[no-untyped-def]
    running: RunningSandbox = start_sandbox(
        rate_limit="60/min,burst=1", conversations=10, retry_after_format="http-date"
    )
    with running.client() as c:
        c.get("/v1/leads")
        r = c.get("/v1/leads")
    assert r.status_code == 429
    assert parsedate_to_datetime(r.headers["retry-after"]).tzinfo is not None


def test_the_limit_can_be_changed_while_serving(start_sandbox) -> None:  # type: ignore[no-untyped-def]
    running: RunningSandbox = start_sandbox(conversations=10)
    with running.client() as c:
        assert all(c.get("/v1/leads").status_code == 200 for _ in range(30))
        running.admin("/_sandbox/rate-limit", {"rateLimit": "100/min"}, method="PUT")
        codes = [c.get("/v1/leads").status_code for _ in range(5)]
    assert codes.count(429) >= 2
    r = httpx.put(
        running.url + "/_sandbox/rate-limit",
        json={"rateLimit": "none"},
        headers={"Authorization": f"Bearer {ACME_KEY}"},
    )
    assert r.status_code == 401  # a workspace key is not the admin token
