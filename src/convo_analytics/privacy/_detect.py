"""All the detectors at once, and the precheck that makes most messages free.

Most chat messages hold no personal data, and every built-in kind needs a digit or an
``@`` (an IPv6 address written without any decimal digit needs ``::``): a text with
none of them is skipped by one regular expression search, and each detector runs only
on texts with its own sign (``@`` for emails, a seven-digit run for phones). Extra
patterns run on every text (their shapes are the user's).

What the scrubber wrote itself (``[email]``, ``[phone:1a2b3c4d5e6f]``) is never found
again: the built-in detectors see placeholders blanked out (the hex digits of a hash
would send every such text through the phone matcher), and spans that touch one are
dropped (an extra pattern as wide as ``\\w+`` would find its words), so scrubbing
scrubbed text changes nothing.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from convo_analytics.privacy._card import find_cards, normalise_card
from convo_analytics.privacy._email import find_emails, normalise_email
from convo_analytics.privacy._extra import ExtraPattern
from convo_analytics.privacy._iban import find_ibans, normalise_iban
from convo_analytics.privacy._ip import find_ips, normalise_ip
from convo_analytics.privacy._phone import PhoneFinder, normalise_phone
from convo_analytics.privacy._spans import BUILTIN_KINDS, Span, resolve

__all__ = ["HASH_DIGITS", "Detector"]

#: Hex digits of a keyed hash in a placeholder.
HASH_DIGITS = 12
_SIGN = re.compile(r"[\d@]|::")
#: What a placeholder reads as to the detectors: no letter, digit, separator or space.
_BLANK = "\x00"
_DIGIT = re.compile(r"\d")


def _blanked(text: str, taken: list[tuple[int, int]]) -> str:
    """``text`` with the ``taken`` spans blanked: the detectors see no digit of a hash."""
    if not taken:
        return text
    parts, last = [], 0
    for b, e in taken:
        parts += [text[last:b], _BLANK * (e - b)]
        last = e
    parts.append(text[last:])
    return "".join(parts)


class Detector:
    """Finds personal data in text: the built-in kinds, and ``extras``; national phone
    numbers are read in ``region`` (ISO 3166-1 alpha-2; "" for none)."""

    def __init__(self, region: str = "US", extras: Sequence[ExtraPattern] = ()) -> None:
        self.region = region
        self.extras = tuple(extras)
        self._phones = PhoneFinder(region)
        names = "|".join(re.escape(k) for k in (*BUILTIN_KINDS, *(e.name for e in extras)))
        self._placeholder = re.compile(rf"\[(?:{names})(?::[0-9a-f]{{{HASH_DIGITS}}})?\]")

    @property
    def kinds(self) -> tuple[str, ...]:
        return (*BUILTIN_KINDS, *(e.name for e in self.extras))

    def find(self, text: str) -> list[Span]:
        """The personal data in ``text``: non-overlapping spans in text order."""
        taken = [m.span() for m in self._placeholder.finditer(text)] if "[" in text else []
        scan = _blanked(text, taken)
        spans: list[Span] = []
        if _SIGN.search(scan) is not None:
            if "@" in scan:
                spans += find_emails(scan)
            spans += find_ips(scan)
            if _DIGIT.search(scan) is not None:
                spans += find_cards(scan)
                spans += find_ibans(scan)
                spans += self._phones.find(scan, [(s.start, s.end) for s in spans])
        for extra in self.extras:
            spans += extra.find(text)
        if taken:
            spans = [s for s in spans if not any(s.start <= e and b <= s.end for b, e in taken)]
        return resolve(spans)

    def normalise(self, kind: str, value: str) -> str:
        """``value`` in the form the detector hashes it in (an address given to an
        erasure, say); ``ValueError`` when it is not of ``kind``."""
        if kind == "email":
            return normalise_email(value)
        if kind == "phone":
            return normalise_phone(value, self.region)
        if kind == "card":
            return normalise_card(value)
        if kind == "iban":
            return normalise_iban(value)
        if kind == "ip":
            return normalise_ip(value)
        if kind in self.kinds:
            return value
        raise ValueError(f"unknown kind {kind!r}")
