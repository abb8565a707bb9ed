"""Client-side pacing: stay under the service's rate limit instead of collecting 429s.

A token bucket sized from the interface's statement in force (decision
D-RATE-LIMIT), with a safety margin so that clock skew and network jitter do
not push a request over the server's own bucket. A 429 pauses every request
until its Retry-After has passed and cuts the rate (multiplicative decrease);
each success then wins back a little of it (additive increase), up to the
target. Shared by all concurrent requests of a run.

Configured as unlimited (or above the service's real limit), the client
learns: the first 429 sets the pace to 70 % of the rate that was succeeding
just before it; from then on each success raises the rate by 3 % and each
429 cuts it by 30 %, as TCP's congestion control does.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
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
        self._learning = False
        self._recent: deque[float] = deque(maxlen=256)

    @property
    def unlimited(self) -> bool:
        return self.policy is None and not self._learning

    async def acquire(self) -> None:
        """Wait until a request may be sent."""
        if self.unlimited and self._paused_until <= self._clock():
            return
        async with self._lock:
            now = self._clock()
            if self._paused_until > now:
                await self._pause(self._paused_until - now)
                now = self._clock()
                self._stamp = now
                self._tokens = min(self._tokens, 1.0)
            if self.unlimited:
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

    def seconds_for(self, requests: int) -> float | None:
        """How long ``requests`` more requests take at the pace this limiter keeps, its
        burst spent first (the service's answer times not counted); None when it keeps
        none (no rate limit configured)."""
        if self.policy is None:
            return None
        return max(0.0, requests - self.capacity) / self.target

    async def wait(self, seconds: float) -> None:
        """Sleep on the limiter's clock (retries back off through it, so tests can fake time)."""
        await self._sleep(seconds)

    async def _pause(self, seconds: float) -> None:
        self.waited_seconds += seconds
        await self._sleep(seconds)

    def on_success(self) -> None:
        if self._learning:
            self.rate *= 1.03
        elif self.rate < self.target:
            self.rate = min(self.target, self.rate + self.target * 0.02)
        elif self.policy is None:
            self._recent.append(self._clock())

    def _observed_rate(self) -> float:
        """Successful requests per second over (at most) the last two seconds."""
        now = self._clock()
        recent = [t for t in self._recent if now - t <= 2.0]
        if len(recent) < 2:
            return 1.0
        return len(recent) / max(0.05, now - recent[0])

    def on_rate_limited(self, retry_after: float | None) -> None:
        """A 429 arrived: pause everyone and slow down."""
        now = self._clock()
        pause = retry_after if retry_after and retry_after > 0 else 1.0
        self._paused_until = max(self._paused_until, now + pause)
        if self.policy is None and not self._learning:
            self._learning = True
            self.rate = max(1.0, 0.7 * self._observed_rate())
            self.target = float("inf")
            self.capacity = 1.0
        elif self.policy is not None:
            self.rate = max(self.target * 0.1, self.rate * 0.7)
        else:
            self.rate = max(0.5, self.rate * 0.7)
        self._tokens = 0.0
