"""A finding's place in the text, and how overlapping findings are settled.

Each detector reports what it found as a :class:`Span`: where, which kind, and the
value in the one form its keyed hash is made of (an email in lower case, a phone
number in E.164, a card's digits, ...), so that the same value written two ways
hashes the same. Detectors run independently and may claim overlapping text (a
16-digit card number holds a phone-number-like run; an IPv6 address holds an IPv4
one): :func:`resolve` keeps the longest span, so a card number is never also a phone.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable
from dataclasses import dataclass

__all__ = ["BUILTIN_KINDS", "Span", "resolve"]

#: The built-in kinds, in the order that settles a tie between two spans of one length.
BUILTIN_KINDS = ("card", "iban", "email", "ip", "phone")
_RANK = {kind: i for i, kind in enumerate(BUILTIN_KINDS)}


@dataclass(frozen=True, slots=True)
class Span:
    """Personal data found at ``text[start:end]``: its kind and its normalised value
    (internal: a :class:`Span` holds the original value and never leaves the package)."""

    start: int
    end: int
    kind: str
    value: str

    @property
    def length(self) -> int:
        return self.end - self.start


def resolve(spans: Iterable[Span]) -> list[Span]:
    """Non-overlapping spans in text order: the longest wins, a tie goes to the kind
    listed first in :data:`BUILTIN_KINDS` (then the extra patterns), then the earliest."""
    ordered = sorted(spans, key=lambda s: (-s.length, _RANK.get(s.kind, len(_RANK)), s.start))
    starts: list[int] = []
    kept: list[Span] = []
    for span in ordered:
        i = bisect.bisect_left(starts, span.start)
        if i > 0 and kept[i - 1].end > span.start:
            continue  # overlaps the kept span before it
        if i < len(kept) and kept[i].start < span.end:
            continue  # overlaps the kept span after it
        starts.insert(i, span.start)
        kept.insert(i, span)
    return kept
