"""Webhook signatures: the published test vector, tampering, and the signed-bytes reading."""

from __future__ import annotations

import hashlib
import hmac
import json
from typing import Any

import orjson
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from convo_analytics.webhooks import (
    SIGNATURE_PREFIX,
    append_signature,
    sign,
    strip_signature,
    verify,
    verify_delivery,
)
from convo_analytics.webhooks._signature import (
    appended_signature,
    signature_members,
    unsigned_texts,
)
from convo_analytics.webhooks._verify import Verifier

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
            assert shortcut[0] == unsigned_texts(body)[0]
            [member] = signature_members(body)
            assert member.last and shortcut[1].decode() == member.value
        assert strip_signature(body) == (unsigned_texts(body) or [None])[0]


# -- the property: a signature made as the interface says verifies, whatever the text's style --

_WS = st.text(alphabet=" \t\n\r", max_size=2)
events = st.dictionaries(
    st.text(max_size=8).filter(lambda k: k != "signature"),
    json_values | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=12),
    max_size=6,
)


@st.composite
def styles(draw: st.DrawFn) -> dict[str, Any]:
    """How a sender's JSON library may write an event: separators with any white space,
    indented or not, keys sorted or not, non-ASCII escaped or not, ``/`` escaped or not."""
    return {
        "separators": (draw(_WS) + "," + draw(_WS), draw(_WS) + ":" + draw(_WS)),
        "indent": draw(st.none() | st.integers(0, 3)),
        "sort_keys": draw(st.booleans()),
        "ensure_ascii": draw(st.booleans()),
        "slashes": draw(st.booleans()),
    }


def _write(value: dict[str, Any], style: dict[str, Any]) -> bytes:
    options = {k: v for k, v in style.items() if k != "slashes"}
    text = json.dumps(value, **options)
    return (text.replace("/", "\\/") if style["slashes"] else text).encode("utf-8")


def _signed_as_the_interface_says(
    event: dict[str, Any], style: dict[str, Any], position: int, secret: str
) -> bytes:
    """The HMAC of the payload text without its signature member, then the member added
    (at ``position`` among the members, in the same style)."""
    signature = sign(secret, _write(event, style))
    items = list(event.items())
    at = position % (len(items) + 1)
    return _write(dict([*items[:at], ("signature", signature), *items[at:]]), style)


def _event_of(body: bytes) -> Any:
    try:
        parsed = orjson.loads(body)
    except orjson.JSONDecodeError:
        return None
    return (
        {k: v for k, v in parsed.items() if k != "signature"} if isinstance(parsed, dict) else None
    )


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    event=events,
    style=styles(),
    position=st.integers(0, 10),
    secret=st.text(min_size=1, max_size=30),
    flip=st.tuples(st.integers(0, 1 << 20), st.integers(1, 255)),
)
def test_any_member_order_white_space_and_escaping_verifies_and_a_changed_byte_does_not(
    event: dict[str, Any], style: dict[str, Any], position: int, secret: str,
    flip: tuple[int, int],
) -> None:  # fmt: skip
    body = _signed_as_the_interface_says(event, style, position, secret)
    check = verify_delivery(body, {}, [b"another-secret", secret.encode()])
    assert check.ok and check.reading in ("stripped", "canonical") and check.secret_index == 1
    assert check.signature_source == "field"
    changed = bytearray(body)
    at = flip[0] % len(changed)
    changed[at] ^= flip[1]
    tampered = verify_delivery(bytes(changed), {}, [secret.encode()])
    # A changed byte verifies only where it changes nothing that was signed: white space a
    # canonical reading does not see, or the white space cut out with the member itself.
    assert not tampered.ok or _event_of(bytes(changed)) == event


def test_every_changed_byte_of_a_sandbox_body_fails() -> None:
    event = {
        "event": "message.responded",
        "timestamp": "2026-11-18T10:00:00.000Z",
        "workspaceId": "ws_1",
        "conversationId": "conv_1",
        "data": {"text": "né / 1"},
    }
    unsigned = orjson.dumps(event)
    body = append_signature(unsigned, sign("s", unsigned))
    assert verify_delivery(body, {}, [b"s"]).ok
    for at in range(len(body)):
        for mask in (0x01, 0x20, 0x80):
            changed = bytearray(body)
            changed[at] ^= mask
            assert not verify_delivery(bytes(changed), {}, [b"s"]).ok, (at, mask)


def test_the_member_is_found_only_at_the_top_level_and_in_any_spelling() -> None:
    nested = b'{"data": {"signature": "sha256=00"}, "signature" : "sha256=11" }'
    [member] = signature_members(nested)
    assert member.value == "sha256=11" and member.last and not member.first
    assert unsigned_texts(nested)[0] == b'{"data": {"signature": "sha256=00"} }'
    escaped = b'{"\\u0073ignature":"sha256=22","a":1}'
    assert [m.value for m in signature_members(escaped)] == ["sha256=22"]
    assert unsigned_texts(escaped)[0] == b'{"a":1}'
    assert signature_members(b'[{"signature": "x"}]') == []
    assert signature_members(b'{"signature": null}') == []
    assert unsigned_texts(b'{ "signature": "x" }') == [b"{}", b"{  }"]


def test_a_header_over_the_raw_body_wins_over_the_field_over_the_stripped_one() -> None:
    unsigned = orjson.dumps({"event": "x", "n": 1})
    body = append_signature(unsigned, sign("s", unsigned))
    headers = {"x-hub-signature-256": sign("s", body)}
    check = verify_delivery(body, headers, [b"s"])
    assert (check.reading, check.signature_source) == ("raw", "x-hub-signature-256")
    check = verify_delivery(body, {}, [b"s"])
    assert (check.reading, check.signature_source) == ("stripped", "field")
