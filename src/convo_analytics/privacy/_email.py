"""Email addresses in free text.

Found from each ``@`` outwards rather than by one regular expression over the whole
text: the local part is read backwards (at most 64 characters, RFC 5321) and the
domain forwards (at most 255), so a long text costs one pass whatever it holds (a
pattern of the ``[\\w.]+@`` kind tries every start position again and is quadratic
on a long run of word characters). The domain needs a dot and a top-level label of
letters: ``name@localhost`` and ``user@home`` are not addresses; ``@handle`` has no
local part. Hashed in lower case, so ``Ann@Example.com`` and ``ann@example.com`` join.
"""

from __future__ import annotations

import re

from convo_analytics.privacy._spans import Span

__all__ = ["find_emails", "normalise_email"]

_LOCAL_MAX = 64
_DOMAIN_MAX = 255
#: Characters of a local part besides letters and digits (RFC 5322's atext and the dot).
_LOCAL_EXTRA = frozenset("._%+-!#$&'*/=?^`{|}~")
#: Labels of letters, digits and inner hyphens, then a top-level label of letters; not
#: followed by more of a name (a word character, a hyphen, or a dot and a letter).
_DOMAIN = re.compile(
    r"(?:[^\W_](?:[\w-]{0,61}[^\W_])?\.)+[^\W\d_]{2,63}(?![\w-]|\.[^\W_])", re.UNICODE
)


def _local_start(text: str, at: int) -> int:
    """Where the local part ending before ``text[at]`` (an ``@``) starts; ``at`` if none."""
    start = at
    floor = max(0, at - _LOCAL_MAX)
    while start > floor and (text[start - 1].isalnum() or text[start - 1] in _LOCAL_EXTRA):
        start -= 1
    while start < at and not (text[start].isalnum() or text[start] == "_"):
        start += 1  # it starts with a letter, digit or underscore, not "." or a quote
    return start


def find_emails(text: str) -> list[Span]:
    """Every email address in ``text``."""
    spans: list[Span] = []
    at = text.find("@")
    while at != -1:
        start = _local_start(text, at)
        if start < at and text[at - 1] != ".":
            match = _DOMAIN.match(text, at + 1, min(len(text), at + 1 + _DOMAIN_MAX))
            if match is not None:
                end = match.end()
                spans.append(Span(start, end, "email", normalise_email(text[start:end])))
                at = text.find("@", end)
                continue
        at = text.find("@", at + 1)
    return spans


def normalise_email(value: str) -> str:
    """The form an address is hashed in: trimmed, lower case."""
    return value.strip().lower()
