"""Secrets kept out of URL settings: found and refused, and every URL masked when shown.

A URL is repeated everywhere: in ``convo config show``, in error lines, in
logs and in the run record. A password in it (``user:pw@``,
``?password=``, ``?sslpassword=``, a libpq ``dsn=...password=...``, an
``?access_token=``) would travel with it, so a URL setting that holds one is
refused when the settings are read, with the setting, where it was written
and where the password goes instead (decision D-URL-SECRETS). What a URL
may keep (``?sslmode=require``) is still shown with every query value and
any user info replaced by ``***``: a value we did not recognise as a secret
may be one.

Two readings of a URL matter: a web client's (``urllib``: the user info ends
at the first ``/``, ``?`` or ``#``) and SQLAlchemy's for a database URL (the
password runs to the first ``@``, slashes and all). A database URL is read
the second way, so that what is checked is what the driver would receive.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import parse_qsl

from convo_analytics.config._secret import MASK

__all__ = ["masked_url", "url_secret"]

_SCHEME = re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.\-]*)://(?P<rest>.*)", re.S)
_WEB = frozenset({"http", "https", "ws", "wss"})
#: SQLAlchemy's reading of the user info of a database URL (sqlalchemy.engine.url._parse_url).
_DB_USERINFO = re.compile(r"(?P<user>[^:/]*)(?::(?P<password>[^@]*))?@", re.S)
#: ``user:pa/ss@host``: no web client reads it so, but its password must not be shown.
_WEB_PASSWORD = re.compile(r"[^:/?#@]*:(?![0-9]*(?:[/?#]|$))[^@]*@", re.S)
#: Query keys that name a secret, compared lowercased without ``_`` and ``-``.
_SECRET_KEYS = frozenset({"pwd", "key", "sig", "credentials"})
_SECRET_SUFFIXES = ("password", "passwd", "passphrase", "secret", "token", "apikey", "signature")
#: A libpq ``key=value`` connection string (``dsn=``, ``options=``) naming a password.
_LIBPQ_PASSWORD = re.compile(r"(?:^|[\s;&])\s*(?:ssl)?(?:password|passwd|pwd)\s*=", re.I)
_SAFE_KEY = re.compile(r"[A-Za-z0-9_.\-]{1,40}")


@dataclass(frozen=True)
class _Parts:
    scheme: str
    userinfo: str | None  # what precedes the host's "@", None without one
    location: str  # host, port and path
    query: str | None
    fragment: str | None


def _split(url: str) -> _Parts | None:
    """The parts of ``scheme://...``; None for text without a scheme (a path, say)."""
    m = _SCHEME.fullmatch(url)
    if m is None:
        return None
    scheme, rest = m.group("scheme").lower(), m.group("rest")
    userinfo: str | None = None
    base = scheme.split("+", 1)[0]
    if base in _WEB:
        end = min((i for i in (rest.find(c) for c in "/?#") if i >= 0), default=len(rest))
        if "@" in rest[:end]:
            userinfo, _, after = rest[:end].rpartition("@")
            rest = after + rest[end:]
        elif (found := _WEB_PASSWORD.match(rest)) is not None:
            userinfo = found.group(0)[:-1]  # user:pass/word@host: a password with a slash
            rest = rest[found.end() :]
    else:
        found = _DB_USERINFO.match(rest)
        if found is not None:
            userinfo = found.group(0)[:-1]
            rest = rest[found.end() :]
    fragment: str | None = None
    if base in _WEB and "#" in rest:
        rest, _, fragment = rest.partition("#")
    query: str | None = None
    if "?" in rest:
        rest, _, query = rest.partition("?")
    return _Parts(scheme, userinfo, rest, query, fragment)


def _secret_key(key: str) -> bool:
    norm = key.lower().replace("_", "").replace("-", "")
    return norm in _SECRET_KEYS or norm.endswith(_SECRET_SUFFIXES)


def _named(key: str) -> str:
    return f"the query parameter {key!r}" if _SAFE_KEY.fullmatch(key) else "a query parameter"


def url_secret(url: str) -> str | None:
    """Where ``url`` holds a secret (``"a password in its user info"``), or None.

    Says where, never what: the answer is fit for an error line.
    """
    parts = _split(url)
    if parts is None:
        return None
    if parts.userinfo is not None:
        if ":" in parts.userinfo:
            return "a password in its user info (user:password@)"
        if parts.scheme.split("+", 1)[0] in _WEB:
            return "user info (user@), which web clients send as credentials"
    for key, value in parse_qsl(parts.query or "", keep_blank_values=True):
        if _secret_key(key):
            return f"a secret in {_named(key)}"
        if _LIBPQ_PASSWORD.search(value):
            return f"a password= inside {_named(key)} (a libpq connection string)"
        if "://" in value and (inner := url_secret(value)) is not None:
            return f"{inner}, in the URL inside {_named(key)}"
    if parts.fragment and any(_secret_key(k) for k, _ in parse_qsl(parts.fragment)):
        return "a secret in its fragment"
    return None


def _mask_query(query: str) -> str:
    items = []
    for item in query.split("&"):
        if not item:
            continue
        key, eq, _ = item.partition("=")
        items.append(f"{key}={MASK}" if eq and _SAFE_KEY.fullmatch(key) else MASK)
    return "&".join(items)


def masked_url(url: str) -> str:
    """``url`` as messages and ``convo config show`` print it: every query value, the
    fragment and the user info (a database URL keeps its user name) are ``***``."""
    parts = _split(url)
    if parts is None:  # no scheme: a host or a path, perhaps with a query or user info
        head, q, query = url.partition("?")
        if "@" in head.split("/", 1)[0]:
            head = f"{MASK}@{head.split('@', 1)[1]}"
        return head + (f"?{_mask_query(query)}" if q else "")
    shown = f"{parts.scheme}://"
    if parts.userinfo is not None:
        user, colon, _ = parts.userinfo.partition(":")
        web = parts.scheme.split("+", 1)[0] in _WEB
        shown += f"{MASK}@" if web else (f"{user}:{MASK}@" if colon else f"{user}@")
    shown += parts.location
    if parts.query is not None:
        shown += f"?{_mask_query(parts.query)}"
    if parts.fragment is not None:
        shown += f"#{MASK}"
    return shown
