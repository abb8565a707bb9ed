"""Identifiers: reproducible from a seeded generator, opaque to clients."""

from __future__ import annotations

import hashlib
import random

_ALPHABET = "0123456789abcdefghjkmnpqrstvwxyz"  # Crockford base32, lower case


def new_id(prefix: str, rng: random.Random, length: int = 20) -> str:
    bits = rng.getrandbits(5 * length)
    chars = []
    for _ in range(length):
        chars.append(_ALPHABET[bits & 31])
        bits >>= 5
    return f"{prefix}_{''.join(chars)}"


def event_key(kind: str, subject: str) -> str:
    """The idempotency key of the event ``kind`` about ``subject``: stable across retries."""
    digest = hashlib.blake2b(f"{kind}\x00{subject}".encode(), digest_size=12).hexdigest()
    return f"evt_{digest}"
