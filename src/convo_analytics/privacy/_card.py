"""Payment card numbers in free text.

A card number is 13 to 19 digits, written plain or in groups split by single spaces or
dashes, whose Luhn sum checks, and which starts with a known issuer range at a length
that range issues (Visa 4, Mastercard 51-55 and 2221-2720, American Express 34 and
37, Discover, JCB, Diners Club, UnionPay, Maestro, Mir). The Luhn sum alone lets
one in ten random digit runs through (order, tracking and reference numbers are
such runs); the issuer ranges cut that to the few that start like a card.

A run of digit groups longer than a card (a card followed by its security code or
expiry, ``4111 1111 1111 1111 123``) is also tried cut after a group from its start,
longest first; never from its middle, so a card is not found inside a longer number.
A run right after ``+`` is a phone number's, not a card's.
"""

from __future__ import annotations

import re

from convo_analytics.privacy._spans import Span

__all__ = ["find_cards", "luhn_ok", "normalise_card"]

#: Digits in groups split by one space or dash; not inside a word, a decimal, or a longer
#: run of groups (an account number's tail).
_RUN = re.compile(r"(?<![0-9A-Za-z.,])(?<![0-9][ -])[0-9]+(?:[ -][0-9]+)*(?![0-9]|[.,][0-9])")
_GROUP = re.compile(r"[0-9]+")
#: Thirteen digits in a row, give or take separators: the least a card number has.
_LONG_ENOUGH = re.compile(r"[0-9](?:[ -]?[0-9]){12}")

#: (lowest prefix, highest prefix, lengths issued): prefixes compared as integers of the
#: same number of digits.
_RANGES: tuple[tuple[str, str, frozenset[int]], ...] = (
    ("4", "4", frozenset({13, 16, 19})),  # Visa
    ("51", "55", frozenset({16})),  # Mastercard
    ("2221", "2720", frozenset({16})),  # Mastercard 2-series
    ("34", "34", frozenset({15})),  # American Express
    ("37", "37", frozenset({15})),
    ("6011", "6011", frozenset(range(16, 20))),  # Discover
    ("644", "649", frozenset(range(16, 20))),
    ("65", "65", frozenset(range(16, 20))),
    ("3528", "3589", frozenset(range(16, 20))),  # JCB
    ("300", "305", frozenset(range(14, 20))),  # Diners Club
    ("3095", "3095", frozenset(range(14, 20))),
    ("36", "36", frozenset(range(14, 20))),
    ("38", "39", frozenset(range(14, 20))),
    ("62", "62", frozenset(range(16, 20))),  # UnionPay
    ("50", "50", frozenset(range(13, 20))),  # Maestro
    ("56", "58", frozenset(range(13, 20))),
    ("63", "63", frozenset(range(13, 20))),
    ("67", "67", frozenset(range(13, 20))),
    ("2200", "2204", frozenset(range(16, 20))),  # Mir
)


def luhn_ok(digits: str) -> bool:
    """Whether ``digits`` pass the Luhn (mod 10) check."""
    total = 0
    for i, ch in enumerate(reversed(digits)):
        n = ord(ch) - 48
        if i % 2:
            n = n * 2 - 9 if n > 4 else n * 2
        total += n
    return total % 10 == 0


def _issued(digits: str) -> bool:
    for low, high, lengths in _RANGES:
        if len(digits) in lengths and low <= digits[: len(low)] <= high:
            return True
    return False


def _is_card(digits: str) -> bool:
    return 13 <= len(digits) <= 19 and _issued(digits) and luhn_ok(digits)


def find_cards(text: str) -> list[Span]:
    """Every payment card number in ``text``."""
    spans: list[Span] = []
    if _LONG_ENOUGH.search(text) is None:
        return spans
    for run in _RUN.finditer(text):
        start = run.start()
        if start > 0 and text[start - 1] == "+":
            continue
        run_text = run.group()
        groups = [(m.start(), m.end()) for m in _GROUP.finditer(run_text)]
        digits = 0
        cuts = []  # (digits so far, end of that group in the run)
        for g_start, g_end in groups:
            digits += g_end - g_start
            cuts.append((digits, g_end))
            if digits > 19:
                break
        for count, end in reversed(cuts):
            prefix = run_text[:end]
            if not 13 <= count <= 19 or (" " in prefix and "-" in prefix):
                continue  # "4111 1111-1111 1111": not one number
            number = prefix.replace(" ", "").replace("-", "")
            if _is_card(number):
                spans.append(Span(start, start + end, "card", number))
                break
    return spans


def normalise_card(value: str) -> str:
    """The form a card number is hashed in: its digits."""
    return re.sub(r"[^0-9]", "", value)
