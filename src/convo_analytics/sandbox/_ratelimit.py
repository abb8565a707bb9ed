"""The sandbox's server-side token buckets, one per key or per workspace."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from convo_analytics.contract import RateLimitPolicy

__all__ = ["RateLimitPolicy", "RateLimiter", "TokenBucket"]


class TokenBucket:
    def __init__(self, policy: RateLimitPolicy, clock: Callable[[], float]) -> None:
        self.policy = policy
        self._clock = clock
        self._tokens = policy.capacity
        self._stamp = clock()

    def take(self) -> tuple[bool, float, float]:
        """Spend a token: (allowed, seconds until one is available, tokens left)."""
        now = self._clock()
        self._tokens = min(
            self.policy.capacity, self._tokens + (now - self._stamp) * self.policy.per_second
        )
        self._stamp = now
        if self._tokens >= 1:
            self._tokens -= 1
            return True, 0.0, self._tokens
        return False, (1 - self._tokens) / self.policy.per_second, self._tokens


class RateLimiter:
    """One bucket per key or per workspace, as the policy's scope says."""

    def __init__(
        self, policy: RateLimitPolicy | None, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._clock = clock
        self._buckets: dict[str, TokenBucket] = {}
        self._lock = threading.Lock()
        self.policy = policy

    def set_policy(self, policy: RateLimitPolicy | None) -> None:
        with self._lock:
            self.policy = policy
            self._buckets.clear()

    def take(self, workspace_id: str, key_id: str) -> tuple[bool, float, float] | None:
        """None when unlimited; else the bucket's verdict."""
        with self._lock:
            policy = self.policy
            if policy is None:
                return None
            scope = workspace_id if policy.scope == "workspace" else f"{workspace_id}/{key_id}"
            bucket = self._buckets.get(scope)
            if bucket is None:
                bucket = self._buckets[scope] = TokenBucket(policy, self._clock)
            return bucket.take()
