"""Webhook signatures: the published test vector, tampering, and the signed-bytes reading."""

from __future__ import annotations

import orjson
from hypothesis import given
from hypothesis import strategies as st

from convo_analytics.webhooks import append_signature, sign, strip_signature, verify

GITHUB_SECRET = "It's a Secret to Everybody"
GITHUB_PAYLOAD = b"Hello, World!"
GITHUB_SIGNATURE = "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"


def test_githubs_published_vector_verifies() -> None:
    assert sign(GITHUB_SECRET, GITHUB_PAYLOAD) == GITHUB_SIGNATURE
    assert verify(GITHUB_SECRET, GITHUB_PAYLOAD, GITHUB_SIGNATURE)


def test_one_changed_byte_does_not_verify() -> None:
    for i in range(len(GITHUB_PAYLOAD)):
        tampered = bytearray(GITHUB_PAYLOAD)
        tampered[i] ^= 0x01
        assert not verify(GITHUB_SECRET, bytes(tampered), GITHUB_SIGNATURE)
    assert not verify(GITHUB_SECRET + "x", GITHUB_PAYLOAD, GITHUB_SIGNATURE)
    assert not verify(GITHUB_SECRET, GITHUB_PAYLOAD, GITHUB_SIGNATURE.upper())


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | st.text(max_size=20),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=12,
)


@given(
    st.dictionaries(
        st.text(max_size=10).filter(lambda k: k != "signature"), json_values, max_size=6
    ),
    st.text(min_size=1, max_size=40),
)
def test_stripping_the_signature_member_gives_back_the_signed_bytes(
    envelope: dict[str, object], secret: str
) -> None:
    unsigned = orjson.dumps(envelope)
    signature = sign(secret, unsigned)
    body = append_signature(unsigned, signature)
    parsed = orjson.loads(body)
    assert parsed["signature"] == signature
    assert {k: v for k, v in parsed.items() if k != "signature"} == envelope
    assert strip_signature(body) == unsigned
    assert verify(secret, unsigned, signature)
