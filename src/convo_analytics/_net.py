"""Network address rules shared by the client, the receiver and the sandbox."""

from __future__ import annotations

import ipaddress
import re
from urllib.parse import urlsplit

__all__ = ["insecure_url", "is_loopback_host", "origin_of"]

#: Characters no URL we send a credential to may hold: parsers disagree on them
#: (``http://127.0.0.1\@evil.example/`` is 127.0.0.1 to a browser, evil.example to urllib).
_AMBIGUOUS = re.compile(r"[\\\s\x00-\x1f\x7f]")


def is_loopback_host(host: str) -> bool:
    """Whether ``host`` (a name or an address) is this machine's loopback.

    Plain HTTP is accepted only to such hosts; everything else needs TLS.
    """
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def origin_of(url: str) -> str:
    """``scheme://host:port`` of an absolute URL, default ports written out."""
    parts = urlsplit(url)
    try:
        port = parts.port
    except ValueError:
        port = None
    port = port or {"http": 80, "https": 443}.get(parts.scheme)
    host = (parts.hostname or "").lower()
    if ":" in host:
        host = f"[{host}]"
    return f"{parts.scheme}://{host}:{port}"


def insecure_url(url: str) -> str | None:
    """Why a credential may not be sent to ``url`` (None: it may, as far as the URL goes).

    The rule of every client that sends a secret (the extractor's key, the OAuth
    client's code, tokens and client secret): an absolute ``https://`` URL, plain
    ``http://`` only to loopback, no user info, nothing parsers read differently.
    The answer never quotes the URL (its query may hold anything).
    """
    if _AMBIGUOUS.search(url):
        return "holds a backslash, a space or a control character"
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - a bad port raises here
    except ValueError:
        return "is not a well-formed URL (a bad port or address)"
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return "is not an absolute http(s) URL"
    if "@" in parts.netloc:
        return "carries user info (credentials never travel in a URL)"
    if parts.scheme == "http" and not is_loopback_host(parts.hostname):
        return "uses plain http; TLS (https://) is required, plain http only to loopback"
    return None
