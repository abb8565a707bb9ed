"""Keeping credentials out of every text an extraction records, and out of other origins.

An error text can carry a credential in ways no one writes on purpose: an
HTTP library quoting an illegal header (``b'Bearer sk-...\\nkey2'``), a URL
with user info, an echo in a service's error body. Every error and warning
of a run passes through one :class:`Redactor` before it is printed, logged
or stored, and the checks below refuse, before any request, what would put
a credential on the wire where it does not belong.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from urllib.parse import quote, urlsplit

from convo_analytics._net import is_loopback_host, origin_of
from convo_analytics.config import masked_url

__all__ = ["MASK", "Redactor", "check_base_url", "check_header_value", "origin_of", "shown_url"]

MASK = "***"
#: A secret's fragments this long or longer are masked too (a key split by a newline, say).
_FRAGMENT = 6


class Redactor:
    """Replaces every written form of the given secrets with ``***``."""

    def __init__(self, secrets: Iterable[str]) -> None:
        forms: set[str] = set()
        for secret in secrets:
            if not secret:
                continue
            for text in (secret, *re.split(r"[^\x21-\x7e]+", secret)):
                if len(text) < _FRAGMENT and text != secret:
                    continue
                forms |= {
                    text,
                    repr(text)[1:-1],
                    json.dumps(text)[1:-1],
                    json.dumps(text, ensure_ascii=False)[1:-1],
                    quote(text, safe=""),
                    repr(text.encode())[2:-1],
                }
        self._forms = sorted((f for f in forms if f), key=len, reverse=True)

    def __call__(self, text: str) -> str:
        for form in self._forms:
            if form in text:
                text = text.replace(form, MASK)
        return text


def check_header_value(value: str, what: str) -> None:
    """Raise ValueError when ``value`` cannot be sent in an HTTP header as it is.

    Only visible ASCII is accepted: a newline, a control or a non-ASCII
    character (often pasted along with a key) would make the HTTP library
    fail with the header, key included, in its message.
    """
    for i, char in enumerate(value):
        if not 0x21 <= ord(char) <= 0x7E:
            kind = (
                "a space"
                if char == " "
                else (
                    "a control character (a newline?)"
                    if ord(char) < 0x20 or ord(char) == 0x7F
                    else "a non-ASCII character"
                )
            )
            raise ValueError(
                f"{what} holds {kind} at position {i + 1}, which cannot be sent in an HTTP "
                "header; copy the value again without it"
            )


def shown_url(url: str) -> str:
    """The URL with its user info and every query value masked, fit for a message."""
    return masked_url(url)


def check_base_url(url: str) -> str:
    """The base URL without a trailing slash; raises ValueError naming what is wrong.

    Plain http only to loopback; no user info (credentials travel in the
    Authorization header, never in a URL that errors and logs repeat).
    """
    shown = shown_url(url)
    if "://" not in url:
        raise ValueError(
            f"{shown!r} has no scheme; write https://{shown} (or http:// for loopback)"
        )
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"{shown!r} is not an absolute http(s) URL")
    if "@" in parts.netloc:
        raise ValueError(
            f"{shown!r} carries user info; remove it (the API key goes in CONVO_API_KEY)"
        )
    try:
        parts.port  # noqa: B018 - a bad port raises here
    except ValueError:
        port = parts.netloc.rsplit(":", 1)[-1]
        raise ValueError(f"{shown!r} has the port {port!r}; a port is 1 to 65535") from None
    if parts.scheme == "http" and not is_loopback_host(parts.hostname):
        raise ValueError(
            f"{shown!r} uses plain http; the service requires TLS (https://), "
            "plain http is accepted only for loopback addresses"
        )
    if parts.query or parts.fragment:
        raise ValueError(f"{shown!r} has a query or fragment; give the base URL only")
    return url.rstrip("/")
