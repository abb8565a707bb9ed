"""HMAC-SHA256 signatures in the interface's form: ``sha256=`` + lowercase hex.

The interface does not say which bytes are signed. The sandbox signs the body
*without* its ``signature`` member: it serialises the envelope, signs those
exact bytes, then appends ``,"signature":"sha256=..."`` as the last member.
Other senders put the member first or in the middle, or write the JSON with
other white space; removing the member from the raw text (with one of the
commas around it) gives back what they signed (:func:`unsigned_texts`).
Decision D-SIGNED-BYTES.
"""

from __future__ import annotations

import hashlib
import hmac
import re
from dataclasses import dataclass

import orjson

SIGNATURE_PREFIX = "sha256="
#: JSON's white space (RFC 8259: space, tab, line feed, carriage return).
_WS = b" \t\n\r"
#: The tokens that decide a JSON text's structure: strings and the six structural bytes
#: (numbers and literals need no token to find where a top-level member starts and ends).
_TOKEN = re.compile(rb'"(?:[^"\\]|\\.)*"|[{}\[\],:]', re.S)


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


#: The member as append_signature writes it, ``,"signature":"sha256=<64 hex>"}``, which ends
#: almost every body: recognised by its fixed length before anything else runs.
MEMBER_HEAD = b',"signature":"' + SIGNATURE_PREFIX.encode("ascii")
MEMBER_LEN = len(MEMBER_HEAD) + 64 + 2


def appended_signature(body: bytes) -> tuple[bytes, bytes] | None:
    """(the body without it, the member's value) when the body ends with the member exactly
    as :func:`append_signature` writes it; None otherwise (then use :func:`signature_members`).

    Where it answers, the stripped body is the first of :func:`unsigned_texts`: the value
    holds no quote or backslash, so the tail cannot be the inside of a string or of a
    nested object (which would end ``"}}`` or ``"}]``), and no white space stands before
    the comma (which a sender's style would have written before the member too).
    """
    tail = body[-MEMBER_LEN:]
    if len(tail) != MEMBER_LEN or not (tail.startswith(MEMBER_HEAD) and tail.endswith(b'"}')):
        return None
    if body[-MEMBER_LEN - 1 : -MEMBER_LEN] in (b" ", b"\t", b"\n", b"\r"):
        return None
    value = tail[len(MEMBER_HEAD) - len(SIGNATURE_PREFIX) : -2]
    if b'"' in value or b"\\" in value:
        return None
    return body[:-MEMBER_LEN] + b"}", value


@dataclass(frozen=True, slots=True)
class Member:
    """Where a top-level ``signature`` member with a string value stands in a body.

    Offsets into the body: ``key`` where its key starts, ``value_end`` where its value
    ends; ``before`` where the previous member's value ends (or just after ``{``) and
    ``after`` where the next member's key starts (or where ``}`` stands).
    """

    key: int
    value_end: int
    before: int
    after: int
    first: bool
    last: bool
    value: str  # the member's value, unescaped


def _is_signature_key(token: bytes) -> bool:
    if token == b'"signature"':
        return True
    if b"\\" not in token:
        return False
    try:
        return bool(orjson.loads(token) == "signature")  # an escaped spelling of the name
    except orjson.JSONDecodeError:
        return False


def _is_pair(body: bytes, key: tuple[int, bool, int], value_start: int) -> bool:
    """Only white space and the colon between a member's key and its string value."""
    return body[key[2] : value_start].strip(_WS) == b":"


def signature_members(body: bytes) -> list[Member]:
    """The top-level ``signature`` members of a JSON object's text whose value is a string.

    Read from the text itself (strings and structural bytes), so that the member can be
    cut out without re-serialising anything. Nested members are not the signature.
    """
    if b"ignature" not in body and b"\\u" not in body:
        return []
    depth = 0
    open_at = -1
    expect_key = False
    key_token: tuple[int, bool, int] | None = None  # the key's start, is it ours, its end
    last_comma: int | None = None
    spans: list[tuple[int, int, int | None, str]] = []  # key, value end, comma before, value
    state = ""  # what follows at depth 1: "key", "colon", "value"
    for m in _TOKEN.finditer(body):
        token = m.group()
        c = token[:1]
        if c == b'"':
            if depth != 1:
                continue
            if expect_key:
                key_token = (m.start(), _is_signature_key(token), m.end())
                expect_key, state = False, "colon"
            elif state == "value":
                if key_token is not None and key_token[1] and _is_pair(body, key_token, m.start()):
                    try:
                        value = orjson.loads(token)
                    except orjson.JSONDecodeError:
                        value = None
                    if isinstance(value, str):
                        spans.append((key_token[0], m.end(), last_comma, value))
                state = ""
            continue
        if c in b"{[":
            depth += 1
            if depth == 1:
                if c != b"{":
                    return []
                open_at, expect_key = m.start(), True
            elif depth == 2 and state == "value":
                state = ""
        elif c in b"}]":
            depth -= 1
            if depth == 0:
                close_at = m.start()
                break
        elif depth == 1 and c == b",":
            last_comma, expect_key, state = m.start(), True, ""
        elif depth == 1 and c == b":" and state == "colon":
            state = "value"
    else:
        return []
    found = []
    for key, value_end, comma_before, value in spans:
        first = comma_before is None or comma_before < open_at
        before = open_at + 1 if first else len(body[:comma_before].rstrip(_WS))
        rest = body[value_end:close_at]
        stripped = rest.lstrip(_WS)
        last = not stripped.startswith(b",")
        after = close_at if last else close_at - len(stripped[1:].lstrip(_WS))
        found.append(Member(key, value_end, before, after, first, last, value))
    return found


def unsigned_texts(body: bytes, members: list[Member] | None = None) -> list[bytes]:
    """The texts a sender may have signed: the body with its ``signature`` member removed.

    A sender serialises the event, signs it, and writes the member in with one comma and
    the white space of its style, before the next member or after the previous one: so
    the member goes with the separator after it (when it is not last) or with the one
    before it (when it is not first), or, for a first or last member, with all the white
    space up to the brace. Every distinct reading is returned, the likeliest first.
    """
    out: list[bytes] = []
    for member in signature_members(body) if members is None else members:
        cuts = []
        if not member.last:
            cuts.append((member.key, member.after))
        if not member.first:
            cuts.append((member.before, member.value_end))
        if member.first:
            cuts.append((member.before, member.after))
        if member.last:
            cuts.append((member.before if not member.first else member.key, member.value_end))
            cuts.append((member.before, member.after))
        commas = 0 if member.first and member.last else 1
        for start, end in cuts:
            # what goes with the member: its one comma and white space, nothing else
            gap = body[start : member.key] + body[member.value_end : end]
            if gap.count(b",") != commas or gap.strip(_WS + b",") != b"":
                continue
            text = body[:start] + body[end:]
            if text not in out:
                out.append(text)
    return out


def strip_signature(body: bytes) -> bytes | None:
    """The raw body with its ``signature`` member removed (the likeliest reading), or None."""
    if (appended := appended_signature(body)) is not None:
        return appended[0]
    texts = unsigned_texts(body)
    return texts[0] if texts else None
