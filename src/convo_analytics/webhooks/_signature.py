"""HMAC-SHA256 signatures in the interface's form: ``sha256=`` + lowercase hex.

The interface does not say which bytes are signed. The sandbox signs the body
*without* its ``signature`` member: it serialises the envelope, signs those
exact bytes, then appends ``,"signature":"sha256=..."`` as the last member.
Removing that member from the raw body therefore gives back the signed bytes
exactly (see :func:`strip_signature`). Decision D-SIGNED-BYTES.
"""

from __future__ import annotations

import hashlib
import hmac
import re

SIGNATURE_PREFIX = "sha256="
_TRAILING_MEMBER = re.compile(rb'(?:,\s*|(?<=\{)\s*)"signature"\s*:\s*"[^"\\]*"\s*}\s*$')


def _key(secret: str | bytes) -> bytes:
    return secret.encode("utf-8") if isinstance(secret, str) else secret


def sign(secret: str | bytes, payload: bytes) -> str:
    return SIGNATURE_PREFIX + hmac.new(_key(secret), payload, hashlib.sha256).hexdigest()


def verify(secret: str | bytes, payload: bytes, signature: str) -> bool:
    """Constant-time check of ``signature`` against ``payload``."""
    expected = sign(secret, payload)
    return hmac.compare_digest(expected.encode("ascii"), signature.strip().encode("utf-8"))


def append_signature(unsigned_body: bytes, signature: str) -> bytes:
    """Add the signature as the last member of a serialised JSON object."""
    body = unsigned_body.rstrip()
    if not body.endswith(b"}"):
        raise ValueError("the body is not a serialised JSON object")
    inner = body[:-1].rstrip()
    separator = b"" if inner.endswith(b"{") else b","
    return inner + separator + b'"signature":"' + signature.encode("ascii") + b'"}'


#: A signature member is short: look for it only in the body's last bytes.
_TAIL = 200
#: The member as append_signature writes it, ``,"signature":"sha256=<64 hex>"}``, which ends
#: almost every body: recognised by its fixed length before any regular expression runs.
MEMBER_HEAD = b',"signature":"' + SIGNATURE_PREFIX.encode("ascii")
MEMBER_LEN = len(MEMBER_HEAD) + 64 + 2


def appended_signature(body: bytes) -> tuple[bytes, bytes] | None:
    """(the body without it, the member's value) when the body ends with the member exactly
    as :func:`append_signature` writes it; None otherwise (then use the general functions).

    Where it answers, the stripped body is what :func:`strip_signature` returns: the value
    holds no quote, so no earlier ``"signature"`` can start the trailing member.
    """
    tail = body[-MEMBER_LEN:]
    if len(tail) != MEMBER_LEN or not (tail.startswith(MEMBER_HEAD) and tail.endswith(b'"}')):
        return None
    value = tail[len(MEMBER_HEAD) - len(SIGNATURE_PREFIX) : -2]
    if b'"' in value or b"\\" in value:
        return None
    return body[:-MEMBER_LEN] + b"}", value


def strip_signature(body: bytes) -> bytes | None:
    """The raw body with a trailing ``signature`` member removed, or None if there is none."""
    if (appended := appended_signature(body)) is not None:
        return appended[0]
    return _strip_any_member(body)


def _strip_any_member(body: bytes) -> bytes | None:
    """:func:`strip_signature` for any spelling of the member (white space, other values)."""
    start = max(0, body.rfind(b'"signature"', max(0, len(body) - _TAIL)) - 1)
    if start < 0 or b'"signature"' not in body[start:]:
        return None
    start = max(0, start - 16)  # room for the comma and white space before the member
    m = _TRAILING_MEMBER.search(body, start)
    if m is None:
        return None
    return body[: m.start()] + b"}"
