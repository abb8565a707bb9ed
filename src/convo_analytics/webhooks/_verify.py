"""Verifying a delivery's signature under every reading a real service could use.

The interface says the signature is an HMAC-SHA256 "of the payload text" and
also travels in the payload's ``signature`` field, without saying which bytes
are signed (decision D-SIGNED-BYTES). We accept, in this order:

``raw``
    the raw body exactly as received (GitHub-style; a header signature);
``stripped``
    the raw body with its ``signature`` member cut out textually (what the
    sandbox signs: the body serialised before the member was appended);
``canonical``
    the parsed body without ``signature``, re-serialised compactly with sorted
    keys (a service that signs a canonical form).

Several secrets may be valid at once while a secret is rotated. Comparisons
are constant-time. The result records which reading and which secret
verified, so an archive's provenance can be audited.
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from convo_analytics.webhooks._signature import (
    SIGNATURE_PREFIX,
    appended_signature,
    strip_signature,
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
#: The value of a trailing ``signature`` member, found without parsing the body.
_FIELD = re.compile(rb'"signature"\s*:\s*"([^"\\]*)"\s*}\s*$')


@dataclass(frozen=True, slots=True)
class Verification:
    ok: bool
    reading: str | None = None  # raw, stripped or canonical
    secret_index: int | None = None  # which of the configured secrets verified
    reason: str | None = None  # unsigned or bad_signature, when not ok
    signature_source: str | None = None  # the header name, or "field"
    stripped: bytes | None = None  # the body without its signature member, when it has one


def _well_formed(where: str, value: str) -> tuple[str, str] | None:
    value = value.strip()
    if value.startswith(SIGNATURE_PREFIX) and len(value) == len(SIGNATURE_PREFIX) + 64:
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
        candidates: list[tuple[str, bytes]],
        claims: list[tuple[str, str]],
        stripped: bytes | None,
    ) -> Verification | None:
        raw = candidates[0][1]
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
                        return Verification(True, reading, index, None, where, stripped)
        return None

    def verify(self, body: bytes, headers: Mapping[str, str], parsed: Any = None) -> Verification:
        """See :func:`verify_delivery`."""
        claims = _header_claims(headers)
        textual: list[tuple[str, bytes]] = [("raw", body)]
        appended = appended_signature(body)
        if appended is not None:
            stripped: bytes | None = appended[0]
            field_value: bytes | None = appended[1]
        else:
            stripped = strip_signature(body)
            found_field = (
                _FIELD.search(body, max(0, len(body) - 200)) if stripped is not None else None
            )
            field_value = found_field.group(1) if found_field else None
        if stripped is not None:
            textual.append(("stripped", stripped))
            if field_value is not None and (claim := _well_formed("field", field_value.decode())):
                claims.append(claim)
        if claims and (found := self._match(textual, claims, stripped)):
            return found
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
        candidates = textual
        if isinstance(parsed, dict) and "signature" in parsed:
            rest = {k: v for k, v in parsed.items() if k != "signature"}
            candidates = [*textual, ("canonical", orjson.dumps(rest, option=orjson.OPT_SORT_KEYS))]
        found = self._match(candidates, claims, stripped)
        return found or Verification(False, reason="bad_signature")


@functools.lru_cache(maxsize=16)
def _verifier(secrets: tuple[bytes, ...]) -> Verifier:
    return Verifier(secrets)


def verify_delivery(
    body: bytes,
    headers: Mapping[str, str],
    secrets: Sequence[bytes],
    parsed: Any = None,
) -> Verification:
    """Check a delivery (headers in lower case; ``parsed`` the body's JSON if already parsed).

    The common cases (a header or field signature over the raw or stripped
    bytes) are decided without parsing the body; the body is parsed only to
    find a field signature or to try the canonical reading.
    """
    return _verifier(tuple(secrets)).verify(body, headers, parsed)


def secret_keys(secrets: Sequence[str]) -> list[bytes]:
    """Configured secrets as HMAC keys, in order (the first is the current one)."""
    return [s.encode("utf-8") for s in secrets if s]
