"""How long a stream will take at its rate limit, said once before a long one.

A first extract of a large workspace at ``600/min`` takes minutes (a list
page per 100 conversations, and a detail request per conversation); without
a word it looks hung. After the first page of a list stream, the run
estimates the stream's requests and, when the rate limit alone makes them
last longer than :data:`ANNOUNCE_SECONDS`, says so in one line (on stderr,
never in ``--json`` output; decision D-EXTRACT-ESTIMATE)::

    conversations: about 4 min at 600/min for ~2,100 requests (~2,000 conversations
    listed, estimated from the first page's update times, each with its detail)

The record count is the service's total when it gives one (``X-Total-Count``,
``Content-Range``, a body total; see ``_paging``), else extrapolated from the
first page: a listing ordered by update time from oldest to newest covers the
span from its first record to now at the first page's pace. A listing in
another order, or without update times, gives no estimate (nothing is said).
The duration counts the rate limit only (the client's pace, burst included),
not the service's answer times: it is a lower bound, said as "about".
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

__all__ = ["ANNOUNCE_SECONDS", "Estimate", "estimate_records", "estimate_stream", "say_duration"]

#: A stream expected to last at least this long (at its rate limit) is announced.
ANNOUNCE_SECONDS = 30.0


@dataclass(frozen=True)
class Estimate:
    """A stream's expected records, requests and seconds at its rate limit."""

    records: int
    requests: int
    seconds: float
    #: Where the record count comes from: the total's source, or the extrapolation.
    basis: str
    #: Detail requests per listed record (1.0 on a first extract with details).
    detail_share: float

    def line(self, stream: str, rate_limit: str) -> str:
        """The one line said before the stream (see the module docstring)."""
        what = f"~{self.records:,} {stream} listed, {self.basis}"
        if self.detail_share >= 0.995:
            what += ", each with its detail"
        elif self.detail_share > 0:
            what += f", {self.detail_share:.0%} of them detailed"
        return (
            f"{stream}: {say_duration(self.seconds)} at {rate_limit} for "
            f"~{self.requests:,} requests ({what})"
        )


def say_duration(seconds: float) -> str:
    """``about 40 s``, ``about 4 min``, ``about 1 h 20 min``."""
    if seconds < 90:
        return f"about {max(1, round(seconds))} s"
    minutes = round(seconds / 60)
    if minutes < 60:
        return f"about {minutes} min"
    hours, rest = divmod(minutes, 60)
    return f"about {hours} h {rest} min" if rest else f"about {hours} h"


def estimate_records(
    served: int,
    has_next: bool,
    total: int | None,
    total_source: str,
    updated: list[datetime],
    until: datetime,
) -> tuple[int, str] | None:
    """How many records the whole listing holds, and how that is known; None when the
    first page cannot say.

    ``served``: the first page's records; ``total``: the service's own count (from
    ``total_source``); ``updated``: the first page's update times in listing order;
    ``until``: the end of what is listed (the run's start, or a backfill's end).
    """
    if total is not None and total >= served:
        return total, f"as {total_source} says" if total_source else "as the service says"
    if not has_next:
        return served, "all in the first page"
    if len(updated) < 2 or updated != sorted(updated):
        return None
    covered = (updated[-1] - updated[0]).total_seconds()
    ahead = (until - updated[0]).total_seconds()
    if covered <= 0 or ahead <= covered:
        return None
    count = math.ceil(served * ahead / covered)
    return count, "estimated from the first page's update times"


def estimate_stream(
    records: int,
    basis: str,
    *,
    page_records: int,
    detail_share: float,
    seconds_for: Callable[[int], float | None],
) -> Estimate | None:
    """The stream's requests (list pages of ``page_records``, and a detail for
    ``detail_share`` of the records) and how long the rate limit makes them last
    (``seconds_for``: the limiter's answer; None without a rate limit, no estimate)."""
    pages = max(1, math.ceil(records / max(1, page_records)))
    requests = pages + round(records * detail_share)
    seconds = seconds_for(requests)
    if seconds is None:
        return None
    return Estimate(records, requests, seconds, basis, detail_share)
