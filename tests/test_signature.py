"""Webhook signatures: the published test vector, tampering, and the signed-bytes reading."""

from __future__ import annotations

import hashlib
import hmac

import orjson
from hypothesis import given
from hypothesis import strategies as st

from convo_analytics.webhooks import (
    SIGNATURE_PREFIX,
    append_signature,
    sign,
    strip_signature,
    verify,
    verify_delivery,
)
from convo_analytics.webhooks._signature import _strip_any_member, appended_signature
from convo_analytics.webhooks._verify import _FIELD, Verifier

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


@given(st.binary(max_size=64) | st.binary(min_size=65, max_size=200), st.binary(max_size=2000))
def test_the_verifiers_precomputed_pads_give_hmac_sha256(key: bytes, payload: bytes) -> None:
    # Keys longer than a SHA-256 block (64 bytes) are hashed first, as HMAC prescribes.
    verifier = Verifier([b"other", key])
    assert verifier.digest(1, payload) == hmac.new(key, payload, hashlib.sha256).hexdigest()


@given(
    st.dictionaries(st.text(max_size=8).filter(lambda k: k != "signature"), json_values),
    st.sampled_from(["", "", " ", "\n", "x"]),
    st.integers(62, 66).flatmap(
        lambda n: st.text(alphabet='0123456789abcdef"\\ G', min_size=n, max_size=n)
    ),
)
def test_the_appended_member_shortcut_agrees_with_the_general_strip(
    envelope: dict[str, object], trailer: str, value: str
) -> None:
    for body in (
        append_signature(orjson.dumps(envelope), SIGNATURE_PREFIX + value) + trailer.encode(),
        append_signature(orjson.dumps(envelope), sign("k", b"x")) + trailer.encode(),
    ):
        shortcut = appended_signature(body)
        if shortcut is not None:
            assert shortcut[0] == _strip_any_member(body)
            field = _FIELD.search(body, max(0, len(body) - 200))
            assert field is not None and shortcut[1] == field.group(1)
        assert strip_signature(body) == _strip_any_member(body)


def test_a_header_over_the_raw_body_wins_over_the_field_over_the_stripped_one() -> None:
    unsigned = orjson.dumps({"event": "x", "n": 1})
    body = append_signature(unsigned, sign("s", unsigned))
    headers = {"x-hub-signature-256": sign("s", body)}
    check = verify_delivery(body, headers, [b"s"])
    assert (check.reading, check.signature_source) == ("raw", "x-hub-signature-256")
    check = verify_delivery(body, {}, [b"s"])
    assert (check.reading, check.signature_source) == ("stripped", "field")
