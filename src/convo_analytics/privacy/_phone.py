"""Phone numbers in free text, with Google's libphonenumber (the ``phonenumbers`` port).

Its metadata ships inside the wheel: nothing is downloaded, at import or later.

Which numbers count (decision D-PRIVACY-SCRUB). Each candidate is held to a rule by
how it was written:

* with ``+`` and a country code (``+44 20 7946 0958``, ``+1-202-555-0143``): a
  *possible* number (a plausible length for that country) is enough, and failing that
  a known country code with 9 to 15 digits in all (E.164 allows 15). Few things in chat
  start with ``+`` and a country code that are not phone numbers, and the numbers
  people mistype or make up (and the sandbox's random ones, ``+33 279 5923567``, a
  digit too long for France) are still their phone numbers to a reader;
* anything else, a national number read in ``privacy.default_region``
  (``(202) 555-0143``) or one with an international prefix instead of ``+``
  (``0044 20 7946 0958``, ``011 44 ...``): it must be a *valid* number (in a range
  allocated in that country), not be shaped like a date (``03.04.2025``,
  ``2021-08-20``; the library leaves only slashed dates out), and not follow a word
  that names another kind of number (``order``, ``invoice``, ``tracking``, ``case``,
  ``#``, ...): order, tracking and reference numbers are digit runs of the same lengths.

Two passes find the candidates. ``PhoneNumberMatcher`` (at ``Leniency.POSSIBLE``, the
rule above applied after) reads national numbers and most international ones; its
candidate grabs whatever digits and brackets follow, and when that fails it retries
inner parts without the country code, so it misses ``+44 (0)20 7946 0952 (ref 12)``.
So every ``+`` (and ``00`` before a country code, which the library reads only where
``00`` is the default region's international prefix) is also parsed directly, the
longest run of groups after it that makes a number. Overlapping finds keep the longest.

A number glued to a letter or digit (``ID12025550143``), or by a dash to a code
(``ORD-2024-872743``), a later group of a longer run of digit groups (a tracking
number), or an IPv4 address, is not one. Candidates are looked for only around runs of
seven or more digits, so a text without one costs a regular expression search, and
the matcher sees small windows of text (its own limit of tries per text is never
reached). A number is hashed in E.164 (``+442079460958``), so every way of writing
it joins.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import cache, lru_cache

import phonenumbers
from phonenumbers import Leniency, PhoneNumber, PhoneNumberFormat, PhoneNumberMatcher

from convo_analytics.privacy._spans import Span

__all__ = ["NO_REGION", "PhoneFinder", "normalise_phone", "supported_region"]

#: ``privacy.default_region = ""``: only numbers written with a country code are found.
NO_REGION = "ZZ"

#: Seven or more digits with at most three separators between two of them: where a
#: phone number may be. \d also matches other scripts' digits, which the library reads.
_HINT = re.compile(r"\d(?:[\s().\-/\u2010-\u2015\u00a0]{0,3}\d){6,}")
#: How much text beside a hint the matcher sees: a leading "+" or "(" and "00"; an
#: extension after the number ("ext. 1234").
_LEFT, _RIGHT = 6, 16
#: The start of an international number: "+", or "00" before a country code; not inside
#: a word or a longer number ("0025" is a group of "+44 20 7946 0025").
_INTERNATIONAL = re.compile(r"(?<![\w+])(?<![\d+][\s\-./()])(?:\+|00(?=[1-9]))")
#: What may follow it: digits, separators and brackets (bounded: E.164 has 15 digits).
_INTERNATIONAL_BODY = re.compile(r"[\d\s().\-/\u00a0]{6,40}")
_GROUP_END = re.compile(r"\d(?=[^\d]|\Z)")
#: Glued to a code before it ("ORD-2024-872743"), or a later group of a longer run of
#: digit groups ("9400 1122 3962 6042 4468 99").
_GLUED_BEFORE = re.compile(r"(?:[^\W_][\-/_.]|\d[\s\-.])\Z")
#: Glued to a code after it, or the start of a dotted number.
_GLUED_AFTER = re.compile(r"[\-/_][^\W_]|\.\d")
_IPV4 = re.compile(r"[(\[]?[0-9]{1,3}(?:\.[0-9]{1,3}){3}[)\]]?")
_DATE = re.compile(
    r"[(\[]?(?:[0-9]{1,2}[./-][0-9]{1,2}[./-][0-9]{2,4}|[0-9]{4}[./-][0-9]{1,2}[./-][0-9]{1,2})"
    r"[)\]]?"
)
#: Words after which a national-looking number is another kind of number.
_OTHER_NUMBER = re.compile(
    r"(?:\b(?:order|invoice|inv|ticket|tracking|track|case|ref|reference|confirmation|"
    r"booking|transaction|serial|sku|po|account|acct|customer|member|policy|claim|isbn|"
    r"receipt|shipment|parcel|package|id)\b\.?\s*(?:number|no\.?|num|nr\.?|id|#)?\s*[:#]?\s*"
    r"|#\s*)\Z",
    re.IGNORECASE,
)


@cache
def supported_region(region: str) -> bool:
    """Whether libphonenumber knows ``region`` (an ISO 3166-1 alpha-2 code)."""
    return region in phonenumbers.SUPPORTED_REGIONS


def _windows(text: str, taken: Sequence[tuple[int, int]] = ()) -> list[tuple[int, int]]:
    """Merged stretches of ``text`` around each hint that is not inside a ``taken`` span
    (a card number, an IBAN: found already, and longer than a phone number in them) and
    not a date."""
    out: list[tuple[int, int]] = []
    for m in _HINT.finditer(text):
        if any(b <= m.start() and m.end() <= e for b, e in taken):
            continue
        if _DATE.fullmatch(m.group()):
            continue  # a date alone (every timestamp of a JSON record): never a number
        start, end = max(0, m.start() - _LEFT), min(len(text), m.end() + _RIGHT)
        if out and start <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], end))
        else:
            out.append((start, end))
    return out


@lru_cache(maxsize=4096)
def _matches(window: str, region: str) -> tuple[tuple[int, int, PhoneNumber], ...]:
    """The matcher's finds in a window (cached: a scrubbed text is read again, and its
    windows that held no personal data are the same)."""
    return tuple(
        (m.start, m.end, m.number)
        for m in PhoneNumberMatcher(window, region, leniency=Leniency.POSSIBLE)
    )


class PhoneFinder:
    """Finds phone numbers, national ones read in ``region`` (:data:`NO_REGION`: none)."""

    def __init__(self, region: str) -> None:
        self.region = region or NO_REGION

    def find(self, text: str, taken: Sequence[tuple[int, int]] = ()) -> list[Span]:
        """Every phone number in ``text`` (overlapping ones possible: the caller resolves),
        not looked for where a ``taken`` span holds a whole run of digits."""
        spans: list[Span] = []
        windows = _windows(text, taken)
        for w_start, w_end in windows:
            for m_start, m_end, number in _matches(text[w_start:w_end], self.region):
                start = w_start + m_start
                plus = text.startswith("+", start) or text.startswith("(+", start)
                span = self._span(text, start, w_start + m_end, number, plus)
                if span is not None:
                    spans.append(span)
        if windows:
            for head in _INTERNATIONAL.finditer(text):
                if (span := self._international(text, head.start(), head.end())) is not None:
                    spans.append(span)
        return spans

    def _international(self, text: str, start: int, body_start: int) -> Span | None:
        """The longest run of groups after ``+`` (or ``00``) that is a valid number; after
        ``+``, else the longest possible one, else the longest a known country code and
        9 to 15 digits in all make (E.164 allows 15: ``+33 279 5923567`` has a digit too
        many for France, and is still a phone number to whoever reads it)."""
        body = _INTERNATIONAL_BODY.match(text, body_start)
        if body is None:
            return None
        ends = [m.end() for m in _GROUP_END.finditer(text, body_start, body.end())]
        plus = text[start] == "+"
        possible = shaped = None
        for end in reversed(ends[-8:]):
            if _DATE.fullmatch(text, body_start, end):
                continue  # "+2024-05-01"
            try:
                number = phonenumbers.parse("+" + text[body_start:end], None)
            except phonenumbers.NumberParseException:
                continue
            if phonenumbers.is_valid_number(number):
                return self._span(text, start, end, number, plus, checked=True)
            if not plus:
                continue
            if possible is None and phonenumbers.is_possible_number(number):
                possible = (end, number)
            digits = len(str(number.country_code)) + len(str(number.national_number))
            if shaped is None and len(str(number.national_number)) >= 7 and 9 <= digits <= 15:
                shaped = (end, number)
        if (found := possible or shaped) is not None:
            return self._span(text, start, found[0], found[1], plus, checked=True)
        return None

    def _span(
        self,
        text: str,
        start: int,
        end: int,
        number: PhoneNumber,
        plus: bool,
        *,
        checked: bool = False,
    ) -> Span | None:
        """The number at ``text[start:end]`` if it passes the rules of the module doc."""
        if text[start] in "([" and {"(": ")", "[": "]"}[text[start]] not in text[start:end]:
            start += 1  # the library reads a bracket before a number as the number's own
        if start > 0 and text[start - 1].isalnum():
            return None
        if (end < len(text) and text[end].isalnum()) or _GLUED_AFTER.match(text, end):
            return None
        if _IPV4.fullmatch(text, start, end):
            return None
        if not plus:
            if not checked and not phonenumbers.is_valid_number(number):
                return None
            if _GLUED_BEFORE.search(text, max(0, start - 2), start):
                return None
            if _DATE.fullmatch(text, start, end):
                return None
            if _OTHER_NUMBER.search(text, max(0, start - 32), start):
                return None
        value = phonenumbers.format_number(number, PhoneNumberFormat.E164)
        return Span(start, end, "phone", value)


def normalise_phone(value: str, region: str) -> str:
    """The form a number is hashed in (E.164), read as :class:`PhoneFinder` reads it;
    ``ValueError`` when it is no phone number."""
    text = value.strip()
    if text.startswith("00"):
        text = "+" + text[2:]
    try:
        number = phonenumbers.parse(text, region or NO_REGION)
    except phonenumbers.NumberParseException as exc:
        raise ValueError(f"not a phone number: {exc.error_type}") from None
    if not phonenumbers.is_possible_number(number):
        raise ValueError("not a phone number: impossible length")
    return phonenumbers.format_number(number, PhoneNumberFormat.E164)
