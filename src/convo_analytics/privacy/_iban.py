"""IBANs (international bank account numbers) in free text.

An IBAN is a country code, two check digits and the country's account number, of the
length that country's IBANs have (ISO 13616's registry, below), and its mod-97 sum
(ISO 7064) is 1. It may be written in the printed groups of four, with single spaces
(or dashes) between, or in one piece, in either case. Its end must be the end of a
word: ``DE89370400440532013000XYZ`` is no IBAN. The registry's lengths and the
checksum together leave about one chance in a hundred million per candidate of a
random string passing.
"""

from __future__ import annotations

import re

from convo_analytics.privacy._spans import Span

__all__ = ["IBAN_LENGTHS", "find_ibans", "iban_ok", "normalise_iban"]

#: ISO 13616 registry: a country's IBAN length.
IBAN_LENGTHS: dict[str, int] = {
    "AD": 24, "AE": 23, "AL": 28, "AT": 20, "AZ": 28, "BA": 20, "BE": 16, "BG": 22,
    "BH": 22, "BI": 27, "BR": 29, "BY": 28, "CH": 21, "CR": 22, "CY": 28, "CZ": 24,
    "DE": 22, "DJ": 27, "DK": 18, "DO": 28, "EE": 20, "EG": 29, "ES": 24, "FI": 18,
    "FK": 18, "FO": 18, "FR": 27, "GB": 22, "GE": 22, "GI": 23, "GL": 18, "GR": 27,
    "GT": 28, "HR": 21, "HU": 28, "IE": 22, "IL": 23, "IQ": 23, "IS": 26, "IT": 27,
    "JO": 30, "KW": 30, "KZ": 20, "LB": 28, "LC": 32, "LI": 21, "LT": 20, "LU": 20,
    "LV": 21, "LY": 25, "MC": 27, "MD": 24, "ME": 22, "MK": 19, "MN": 20, "MR": 27,
    "MT": 31, "MU": 30, "NI": 28, "NL": 18, "NO": 15, "OM": 23, "PK": 24, "PL": 28,
    "PS": 29, "PT": 25, "QA": 29, "RO": 24, "RS": 22, "RU": 33, "SA": 24, "SC": 31,
    "SD": 18, "SE": 24, "SI": 19, "SK": 24, "SM": 27, "SO": 23, "ST": 25, "SV": 28,
    "TL": 23, "TN": 24, "TR": 26, "UA": 29, "VA": 22, "VG": 24, "XK": 20, "YE": 30,
}  # fmt: skip

#: Where an IBAN may start: a country code and two digits, not inside a word.
_HEAD = re.compile(r"(?<![A-Za-z0-9])[A-Za-z]{2}[0-9]{2}")


def iban_ok(compact: str) -> bool:
    """Whether an IBAN without separators, in upper case, has its country's length and
    passes the mod-97 check."""
    if IBAN_LENGTHS.get(compact[:2]) != len(compact) or not compact.isalnum():
        return False
    moved = compact[4:] + compact[:4]
    remainder = 0
    for ch in moved:
        value = int(ch, 36)  # 0-9, then A=10 ... Z=35
        remainder = (remainder * (100 if value > 9 else 10) + value) % 97
    return remainder == 1


def find_ibans(text: str) -> list[Span]:
    """Every IBAN in ``text``."""
    spans: list[Span] = []
    for head in _HEAD.finditer(text):
        country = head.group()[:2].upper()
        length = IBAN_LENGTHS.get(country)
        if length is None:
            continue
        chars, pos, end = [head.group().upper()], head.end(), len(text)
        needed = length - 4
        while needed and pos < end:
            ch = text[pos]
            if ch.isascii() and ch.isalnum():
                chars.append(ch.upper())
                needed -= 1
                pos += 1
            elif (
                ch in " -" and pos + 1 < end and text[pos + 1].isascii() and text[pos + 1].isalnum()
            ):
                pos += 1  # one separator between characters
            else:
                break
        if needed or (pos < end and text[pos].isalnum()):
            continue
        compact = "".join(chars)
        if iban_ok(compact):
            spans.append(Span(head.start(), pos, "iban", compact))
    return spans


def normalise_iban(value: str) -> str:
    """The form an IBAN is hashed in: no separators, upper case."""
    return re.sub(r"[\s-]", "", value).upper()
