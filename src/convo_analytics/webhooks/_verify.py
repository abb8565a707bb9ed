"""Verifying a delivery's signature under every reading a real service could use.

The interface says the signature is an HMAC-SHA256 "of the payload text" and
also travels in the payload's ``signature`` field, without saying which bytes
are signed (decision D-SIGNED-BYTES). We accept, in this order:

``raw``
    the raw body exactly as received (GitHub-style; a header signature);
``stripped``
    the raw body with its ``signature`` member cut out of the text, wherever it
    stands and with the white space of the sender's style
    (:func:`~convo_analytics.webhooks._signature.unsigned_texts`): what a sender
    signs when it serialises the event and then writes the member in;
``canonical``
    the parsed body without ``signature``, serialised again as a sender's JSON
    library would (compact, Python's default ``", "`` and ``": "``, sorted keys,
    with and without ``ensure_ascii``).

Several secrets may be valid at once while a secret is rotated. Comparisons
are constant-time. The result records which reading and which secret
verified, so an archive's provenance can be audited.
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import json
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from convo_analytics.webhooks._signature import (
    SIGNATURE_PREFIX,
    appended_signature,
    signature_members,
    unsigned_texts,
)

#: Headers a signature may arrive in, ours first (names compared in lower case).
SIGNATURE_HEADERS = (
    "x-convo-signature",
    "x-signature",
    "x-signature-256",
    "x-hub-signature-256",
    "webhook-signature",
)
READINGS = ("raw", "stripped", "canonical")


@dataclass(frozen=True, slots=True)
class Verification:
    ok: bool
    reading: str | None = None  # raw, stripped or canonical
    secret_index: int | None = None  # which of the configured secrets verified
    reason: str | None = None  # unsigned or bad_signature, when not ok
    signature_source: str | None = None  # the header name, or "field"
    stripped: bytes | None = None  # the body without its signature member (what verified)


_HEX = re.compile(r"[0-9a-fA-F]{64}")


def _well_formed(where: str, value: str) -> tuple[str, str] | None:
    value = value.strip()
    if value.startswith(SIGNATURE_PREFIX) and _HEX.fullmatch(value, len(SIGNATURE_PREFIX)):
        return where, value[len(SIGNATURE_PREFIX) :]
    return None


def _header_claims(headers: Mapping[str, str]) -> list[tuple[str, str]]:
    claims = []
    for name in SIGNATURE_HEADERS:
        value = headers.get(name)
        if value and (claim := _well_formed(name, value)):
            claims.append(claim)
    return claims


class Verifier:
    """:func:`verify_delivery` for fixed secrets, with each key's HMAC pads hashed once.

    HMAC(k, m) = H(k ^ opad || H(k ^ ipad || m)): the two keyed prefixes are hashed
    here, so that a signature costs two hash copies instead of a new HMAC object.
    """

    def __init__(self, secrets: Sequence[bytes]) -> None:
        self.secrets = list(secrets)
        self._pads = []
        for key in self.secrets:
            block = (hashlib.sha256(key).digest() if len(key) > 64 else key).ljust(64, b"\0")
            self._pads.append(
                (
                    hashlib.sha256(bytes(b ^ 0x36 for b in block)),
                    hashlib.sha256(bytes(b ^ 0x5C for b in block)),
                )
            )

    def pads(self, index: int) -> tuple[Any, Any]:
        """Secret ``index``'s inner and outer hashes, keyed (copy them before use)."""
        return self._pads[index]

    def digest(self, index: int, payload: bytes) -> str:
        """The lowercase hex HMAC-SHA256 of ``payload`` under secret ``index``."""
        inner, outer = self._pads[index]
        inner = inner.copy()
        inner.update(payload)
        outer = outer.copy()
        outer.update(inner.digest())
        return outer.hexdigest()

    def _match(
        self,
        raw: bytes,
        candidates: Sequence[tuple[str, bytes]],
        claims: list[tuple[str, str]],
        stripped: bytes | None,
    ) -> Verification | None:
        # A claim written inside the raw body cannot be that body's HMAC (it would be a
        # fixed point of HMAC-SHA256): those comparisons are skipped, the others kept in order.
        raw_claims = [claim for claim in claims if claim[1].encode() not in raw]
        for index in range(len(self.secrets)):
            for reading, payload in candidates:
                usable = raw_claims if reading == "raw" else claims
                if not usable:
                    continue
                expected = self.digest(index, payload)
                for where, digest in usable:
                    if hmac.compare_digest(expected, digest):
                        signed = payload if reading == "stripped" else stripped
                        return Verification(True, reading, index, None, where, signed)
        return None

    def verify(
        self,
        body: bytes,
        headers: Mapping[str, str],
        parsed: Any = None,
        *,
        canonical: bool = True,
    ) -> Verification:
        """See :func:`verify_delivery`; ``canonical=False`` when the body's parse cannot be
        trusted to mean one thing (repeated keys: D-ONE-READING), so it is not re-serialised."""
        claims = _header_claims(headers)
        appended = appended_signature(body)
        if appended is not None:
            texts = [appended[0]]
            values = [appended[1].decode("utf-8", "replace")]
        else:
            members = signature_members(body)
            texts = unsigned_texts(body, members)
            values = [member.value for member in members]
        for value in values:
            if (claim := _well_formed("field", value)) and claim not in claims:
                claims.append(claim)
        stripped = texts[0] if texts else None
        textual = [("raw", body), *(("stripped", text) for text in texts)]
        if claims and (found := self._match(body, textual, claims, stripped)):
            return found
        if not canonical:
            return Verification(False, reason="bad_signature" if claims else "unsigned")
        if parsed is None:
            try:
                parsed = orjson.loads(body)
            except orjson.JSONDecodeError:
                parsed = None
        if isinstance(parsed, dict) and isinstance(parsed.get("signature"), str):
            claim = _well_formed("field", parsed["signature"])
            if claim and claim not in claims:
                claims.append(claim)
        if not claims:
            return Verification(False, reason="unsigned")
        if isinstance(parsed, dict) and "signature" in parsed:
            rest = {k: v for k, v in parsed.items() if k != "signature"}
            forms = [("canonical", text) for text in dict.fromkeys(canonical_forms(rest))]
            if found := self._match(body, forms, claims, stripped):
                return found
        return Verification(False, reason="bad_signature")


def canonical_forms(event: dict[str, Any]) -> Iterator[bytes]:
    """The event serialised as common JSON libraries write it: compact with sorted keys
    (orjson, then Python's), compact in its own order, Python's default separators, each
    with non-ASCII text as it is and escaped (``ensure_ascii``)."""
    yield orjson.dumps(event, option=orjson.OPT_SORT_KEYS)
    yield orjson.dumps(event)
    for sort_keys in (True, False):
        for separators in ((",", ":"), (", ", ": ")):
            for ascii_only in (False, True):
                text = json.dumps(
                    event, separators=separators, sort_keys=sort_keys, ensure_ascii=ascii_only
                )
                yield text.encode("utf-8")


@functools.lru_cache(maxsize=16)
def _verifier(secrets: tuple[bytes, ...]) -> Verifier:
    return Verifier(secrets)


def verify_delivery(
    body: bytes,
    headers: Mapping[str, str],
    secrets: Sequence[bytes],
    parsed: Any = None,
    *,
    canonical: bool = True,
) -> Verification:
    """Check a delivery (headers in lower case; ``parsed`` the body's JSON if already parsed).

    The common cases (a header or field signature over the raw or stripped
    bytes) are decided without parsing the body; the body is parsed only to
    find a field signature or to try the canonical readings.
    """
    return _verifier(tuple(secrets)).verify(body, headers, parsed, canonical=canonical)


def secret_keys(secrets: Sequence[str]) -> list[bytes]:
    """Configured secrets as HMAC keys, in order (the first is the current one)."""
    return [s.encode("utf-8") for s in secrets if s]
