"""When and how long to wait before trying a request again.

Connection errors, timeouts, 5xx and 429 are retried with exponential
backoff and jitter; a ``Retry-After`` header (seconds or an HTTP date) is
honoured when it asks for a real wait. ``Retry-After: 0`` or no header falls
back to the backoff, so a struggling service never sees a tight loop.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime

RETRY_STATUSES = frozenset({408, 425, 429, 500, 502, 503, 504})


def parse_retry_after(value: str | None, now: datetime | None = None) -> float | None:
    """Seconds to wait as the header says, or None when absent or unreadable."""
    if value is None or not value.strip():
        return None
    text = value.strip()
    try:
        return max(0.0, float(text))
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - (now or datetime.now(UTC))).total_seconds())


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    max_attempts: int = 8
    base_seconds: float = 0.5
    max_backoff_seconds: float = 30.0
    max_retry_after_seconds: float = 300.0

    def backoff(self, attempt: int, rng: random.Random) -> float:
        """Equal-jitter exponential backoff for the ``attempt``-th retry (1-based): never 0."""
        ceiling = min(self.max_backoff_seconds, self.base_seconds * 2.0 ** (attempt - 1))
        return ceiling / 2 + rng.uniform(0, ceiling / 2)

    def wait(self, attempt: int, retry_after: float | None, rng: random.Random) -> float:
        """How long to wait before retry number ``attempt``."""
        if retry_after is not None and retry_after > 0:
            return min(self.max_retry_after_seconds, retry_after) + rng.uniform(0, 0.25)
        return self.backoff(attempt, rng)
