"""IPv4 and IPv6 addresses in free text.

Candidates are found by shape and kept only when the standard library's ``ipaddress``
accepts them, so ``300.1.2.3``, ``01.02.03.04`` (leading zeros, refused since Python
3.9.5), times (``12:30:45``), ratios (``16:9``) and MAC addresses
(``00:1A:2B:3C:4D:5E``, six groups without ``::``) are not addresses. An IPv4 shape
inside a longer dotted run (``1.3.6.1.4.1``, an SNMP OID) is not one either, and
neither is one written after ``v``, ``version``, ``build`` or ``release``: a
four-part version string such as ``version 2.7.18.1`` is a valid address by shape
alone. Three-part versions (``1.2.3``) and dotted dates (``01.05.2024``) never have
the shape. An address is hashed in its canonical form (IPv6 compressed, lower case).
"""

from __future__ import annotations

import ipaddress
import re

from convo_analytics.privacy._spans import Span

__all__ = ["find_ips", "normalise_ip"]

_V4 = re.compile(r"(?<![0-9.])[0-9]{1,3}(?:\.[0-9]{1,3}){3}(?![0-9]|\.[0-9])")
#: Hex groups and colons, optionally ending in a dotted IPv4 part;
#: not inside a word, a longer colon run or a dotted number.
_V6 = re.compile(
    r"(?<![\w:.])(?:[0-9A-Fa-f]{1,4}|:)(?::[0-9A-Fa-f]{0,4}){1,7}"
    r"(?:(?<=:)[0-9]{1,3}(?:\.[0-9]{1,3}){3})?(?![\w:]|\.[0-9])"
)
_VERSION_BEFORE = re.compile(
    r"(?:\b[vV]|\b(?:[Vv]ersion|[Vv]er\.?|[Bb]uild|[Rr]elease|[Ff]irmware)[\s:#]*)\Z"
)


def find_ips(text: str) -> list[Span]:
    """Every IPv4 and IPv6 address in ``text``."""
    spans: list[Span] = []
    if "." in text:
        for m in _V4.finditer(text):
            if _VERSION_BEFORE.search(text, max(0, m.start() - 12), m.start()):
                continue
            try:
                address = ipaddress.IPv4Address(m.group())
            except ValueError:
                continue
            spans.append(Span(m.start(), m.end(), "ip", str(address)))
    if ":" in text:
        for m in _V6.finditer(text):
            candidate = m.group()
            if not any(ch not in ":." for ch in candidate):
                continue  # "::" alone is punctuation in text, not an address
            try:
                address6 = ipaddress.IPv6Address(candidate)
            except ValueError:
                continue
            spans.append(Span(m.start(), m.end(), "ip", str(address6)))
    return spans


def normalise_ip(value: str) -> str:
    """The form an address is hashed in: ``ipaddress``'s canonical text."""
    return str(ipaddress.ip_address(value.strip()))
