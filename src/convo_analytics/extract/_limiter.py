"""Client-side pacing: stay under the service's rate limit instead of collecting 429s.

A token bucket sized from the interface's statement in force (decision
D-RATE-LIMIT), with a safety margin so that clock skew and network jitter do
not push a request over the server's own bucket. A 429 pauses every request
until its Retry-After has passed and cuts the rate (multiplicative decrease);
each success then wins back a little of it (additive increase), up to the
target. Shared by all concurrent requests of a run.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable

from convo_analytics.contract import RateLimitPolicy

#: Fraction of the allowed rate the client aims for.
TARGET_SHARE = 0.97
#: Fraction of the server's burst allowance the client is willing to spend.
BURST_SHARE = 0.85


class AdaptiveLimiter:
    def __init__(
        self,
        policy: RateLimitPolicy | None,
        *,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self.policy = policy
        self._clock = clock
        self._sleep = sleep
        self._lock = asyncio.Lock()
        if policy is not None:
            self.target = policy.per_second * TARGET_SHARE
            self.capacity = max(1.0, policy.capacity * BURST_SHARE)
        else:
            self.target = float("inf")
            self.capacity = 1.0
        self.rate = self.target
        self._tokens = self.capacity
        self._stamp = clock()
        self._paused_until = 0.0
        self.waited_seconds = 0.0

    @property
    def unlimited(self) -> bool:
        return self.policy is None

    async def acquire(self) -> None:
        """Wait until a request may be sent."""
        if self.policy is None and self._paused_until <= self._clock():
            return
        async with self._lock:
            now = self._clock()
            if self._paused_until > now:
                await self._pause(self._paused_until - now)
                now = self._clock()
                self._stamp = now
                self._tokens = min(self._tokens, 1.0)
            if self.policy is None:
                return
            self._tokens = min(self.capacity, self._tokens + (now - self._stamp) * self.rate)
            self._stamp = now
            if self._tokens < 1.0:
                wait = (1.0 - self._tokens) / self.rate
                await self._pause(wait)
                self._tokens = 0.0
                self._stamp = self._clock()
            else:
                self._tokens -= 1.0

    async def _pause(self, seconds: float) -> None:
        self.waited_seconds += seconds
        await self._sleep(seconds)

    def on_success(self) -> None:
        if self.rate < self.target:
            self.rate = min(self.target, self.rate + self.target * 0.02)

    def on_rate_limited(self, retry_after: float | None) -> None:
        """A 429 arrived: pause everyone and slow down."""
        now = self._clock()
        pause = retry_after if retry_after and retry_after > 0 else 1.0
        self._paused_until = max(self._paused_until, now + pause)
        if self.policy is not None:
            self.rate = max(self.target * 0.1, self.rate * 0.7)
            self._tokens = 0.0
