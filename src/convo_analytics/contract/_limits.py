"""The interface's request-rate limits as a token-bucket policy (decision D-RATE-LIMIT).

Statement 1: 600 requests per minute per workspace key, bursts up to twice
that rate "for short windows" (we take 10 s: a bucket of 100 requests refilled
at 10/s lets a client run at 20/s for 10 s). Statement 2: 100 requests per
minute per workspace, no burst stated (a bucket of 2). Decision D-RATE-LIMIT.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

_SPEC = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*/\s*(s|sec|second|m|min|minute|h|hour)\s*$")
_UNIT_SECONDS = {
    "s": 1,
    "sec": 1,
    "second": 1,
    "m": 60,
    "min": 60,
    "minute": 60,
    "h": 3600,
    "hour": 3600,
}
BURST_WINDOW_SECONDS = 10.0


@dataclass(frozen=True, slots=True)
class RateLimitPolicy:
    per_second: float
    capacity: float
    scope: str  # "key" or "workspace"
    label: str

    @property
    def per_minute(self) -> float:
        return self.per_second * 60

    @classmethod
    def parse(cls, spec: str) -> RateLimitPolicy | None:
        """Parse ``600/min``, ``100/min``, ``none`` or ``RATE[,burst=N][,scope=key|workspace]``."""
        text = spec.strip().lower()
        if text in ("none", "off", "unlimited", ""):
            return None
        head, *options = [part.strip() for part in text.split(",")]
        m = _SPEC.match(head)
        if not m:
            raise ValueError(
                f"rate limit {spec!r} is not understood; use e.g. 600/min, 100/min or none"
            )
        per_second = float(m.group(1)) / _UNIT_SECONDS[m.group(2)]
        if per_second <= 0:
            raise ValueError(f"rate limit {spec!r} must be positive")
        if head.replace(" ", "") in ("100/min", "100/minute"):
            scope, capacity = "workspace", max(1.0, math.ceil(per_second))
        else:
            scope, capacity = "key", per_second * BURST_WINDOW_SECONDS
        for option in options:
            name, _, value = option.partition("=")
            if name == "burst":
                capacity = float(value)
            elif name == "scope" and value in ("key", "workspace"):
                scope = value
            else:
                raise ValueError(f"rate limit option {option!r} is not understood")
        return cls(per_second, max(1.0, capacity), scope, spec.strip())
