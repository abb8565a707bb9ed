"""The personal-data scrubber (issue 30, first slice): what it finds, how it replaces it,
the keyed hash and its key, payloads, extra patterns.

Quality is measured on tests/data/pii_sample.jsonl, a labelled sample written by
tests/data/make_pii_sample.py (the truth comes from how each message is built, not from
the detectors): precision and recall of each kind must be at least 0.95. The bench
(tests/bench/bench_privacy.py) prints the same figures beside an anchor's.
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from convo_analytics.config import ConfigError, Secret, load_settings
from convo_analytics.errors import UserError
from convo_analytics.privacy import (
    Detector,
    PrivacyConfig,
    Scrubber,
    parse_extra_patterns,
    privacy_config,
)
from privacy_support import KINDS, Row, Score, load_sample, score

ROOT = Path(__file__).resolve().parents[1]
KEY = Secret("k" * 32)
#: Values of each kind written several ways (for the keyed hash's normal form).
SAME = {
    "email": ["Ann.Lee@Example.com", "ann.lee@example.com", "ANN.LEE@EXAMPLE.COM"],
    "phone": ["+44 20 7946 0958", "+44 (0)20 7946 0958", "0044 20 7946 0958", "+442079460958"],
    "card": ["4111 1111 1111 1111", "4111-1111-1111-1111", "4111111111111111"],
    "iban": ["DE89 3704 0044 0532 0130 00", "DE89370400440532013000", "de89370400440532013000"],
    "ip": ["2001:db8::1", "2001:0DB8:0000:0000:0000:0000:0000:0001"],
}


def _scrubber(mode: str = "mask", workspace: str = "ws_acme", key: Secret = KEY,
              region: str = "US", extras: tuple[str, ...] = ()) -> Scrubber:  # fmt: skip
    config = PrivacyConfig(mode=mode, default_region=region,  # type: ignore[arg-type]
                           extra_patterns=parse_extra_patterns(extras), key=key)  # fmt: skip
    return Scrubber.from_config(config, workspace)


# -- the sample and the figures -------------------------------------------------------


def test_the_sample_is_what_its_script_writes() -> None:
    """The committed file is the generator's output (seed 30), with enough of each kind
    in several formats, and messages without personal data (plain and near misses)."""
    sys.path.insert(0, str(ROOT / "tests" / "data"))
    import make_pii_sample

    sample = ROOT / "tests" / "data" / "pii_sample.jsonl"
    assert sample.read_text(encoding="utf-8") == make_pii_sample.render()
    rows = load_sample()
    assert len(rows) >= 300
    assert sum(1 for r in rows if not r.spans) >= 200
    formats: dict[str, set[str]] = {k: set() for k in KINDS}
    for row in rows:
        for tag in row.tags:
            kind = tag.split(":", 1)[0]
            if kind in formats:
                formats[kind].add(tag.split(":", 1)[1])
    assert all(len(f) >= 5 for f in formats.values()), formats
    near = {t for r in rows for t in r.tags if t.startswith("near:")}
    assert len(near) >= 20


@pytest.fixture(scope="module")
def sample_score() -> Score:
    detectors: dict[str, Detector] = {}

    def detect(row: Row) -> list[tuple[int, int, str]]:
        d = detectors.setdefault(row.region, Detector(row.region))
        return [(s.start, s.end, s.kind) for s in d.find(row.text)]

    return score(load_sample(), detect)


@pytest.mark.parametrize("kind", KINDS)
def test_precision_and_recall_per_kind_on_the_sample(kind: str, sample_score: Score) -> None:
    got = sample_score
    precision, recall = got.precision(kind), got.recall(kind)
    errors = [e for e in got.misses + got.false_positives if f" {kind} " in e]
    assert got.true[kind] >= 50
    assert precision >= 0.95 and recall >= 0.95, (precision, recall, errors)


# -- what is found, and what is not ----------------------------------------------------


@pytest.mark.parametrize(
    ("text", "kind", "value"),
    [
        ("mail ann+shop@mail.example.co.uk.", "email", "ann+shop@mail.example.co.uk"),
        ("<BOB_99@EXAMPLE.ORG>", "email", "BOB_99@EXAMPLE.ORG"),
        ("mailto:eva@example.de please", "email", "eva@example.de"),
        ("call +1-202-555-0143 now", "phone", "+1-202-555-0143"),
        ("call (202) 555-0143 now", "phone", "(202) 555-0143"),
        ("call 0044 20 7946 0958 now", "phone", "0044 20 7946 0958"),
        ("call +44 (0)20 7946 0952 (ref 12) now", "phone", "+44 (0)20 7946 0952"),
        ("call me on +33 279 5923567", "phone", "+33 279 5923567"),  # the sandbox's: too long
        ("card 4111 1111 1111 1111 08/27 123", "card", "4111 1111 1111 1111"),
        ("amex 3782-822463-10005.", "card", "3782-822463-10005"),
        ("iban GB82 WEST 1234 5698 7654 32 thanks", "iban", "GB82 WEST 1234 5698 7654 32"),
        ("from 192.168.1.20:8080", "ip", "192.168.1.20"),
        ("from [fe80::1ff:fe23:4567:890a]", "ip", "fe80::1ff:fe23:4567:890a"),
    ],
)
def test_each_kind_is_found_as_written(text: str, kind: str, value: str) -> None:
    (span,) = Detector("US").find(text)
    assert (span.kind, text[span.start : span.end]) == (kind, value)


@pytest.mark.parametrize(
    "text",
    [
        "update to v1.2.3 or version 2.7.18.1 (build 10.0.19045.2965)",
        "on 2024-05-01 at 12:30:45, or 01.05.2024, 05/01/2024",
        "order #10023456, ORD-2024-872743, order number 4152345678",
        "tracking 1Z999AA10123456784 and 9400 1000 0000 0000 0000 00",
        "total $1,299.99 or 49,90 EUR; 15% off; 3 x 250g",
        "mac 00:1A:2B:3C:4D:5E, ratio 16:9, oid 1.3.6.1.4.1",
        "card 4111 1111 1111 1112 (Luhn fails), 9111 1111 1111 1111 (no issuer)",
        "IBAN DE88 3704 0044 0532 0130 00 (wrong check digits)",
        "not addresses: @handle, me@home, 300.1.2.3, std::vector",
        "score +1500000 points, up +12.5% (+2024-05-01)",
    ],
)
def test_near_misses_are_left_alone(text: str) -> None:
    assert Detector("US").find(text) == []


def test_a_card_number_is_not_also_a_phone_number() -> None:
    """The longest span wins: the card, not a phone number inside it."""
    spans = Detector("US").find("pay with 5555 5555 5555 4444 please")
    assert [(s.kind, s.start, s.end) for s in spans] == [("card", 9, 28)]


def test_the_default_region_reads_national_numbers() -> None:
    text = "ring 020 7946 0958 or +1 202 555 0143"
    assert [s.kind for s in Detector("GB").find(text)] == ["phone", "phone"]
    assert [s.value for s in Detector("").find(text)] == ["+12025550143"]  # none: + only
    with pytest.raises(UserError, match=r"privacy\.default_region 'XX'"):
        privacy_config(load_settings(None, {"privacy.default_region": "XX"}, {}))


def test_every_contact_detail_the_sandbox_writes_is_found() -> None:
    """The sandbox's leads type their email and phone number into the chat (its phone
    numbers are random, some a digit too long for their country): none is left."""
    from convo_analytics.sandbox._generate import HistorySpec, generate_history
    from convo_analytics.sandbox._model import EventFactory

    spec = HistorySpec("ws_acme", seed=3, conversations=600, days=30, until_ms=1_795_000_000_000)
    scrubber = _scrubber("mask")
    written = left = 0
    for conversation in generate_history(spec, EventFactory(app_base="https://app.example")):
        lead = conversation.lead
        values = [v for v in (lead.email, lead.phone) if v] if lead else []
        for message in conversation.messages:
            here = [v for v in values if v in message.text]
            written += len(here)
            left += sum(v in scrubber.scrub(message.text).text for v in here)
    assert written >= 50 and left == 0, (written, left)


# -- mask, hash, off -------------------------------------------------------------------

TEXT = "I'm ann@example.com, +44 20 7946 0958, card 4111 1111 1111 1111, from 10.0.0.7"


def test_mask_replaces_each_finding_by_its_kind_and_keeps_its_keyed_hash() -> None:
    scrubber = _scrubber("mask")
    got = scrubber.scrub(TEXT)
    assert got.text == "I'm [email], [phone], card [card], from [ip]"
    assert [f.kind for f in got.findings] == ["email", "phone", "card", "ip"]
    assert got.findings[0].hash == scrubber.keyed_hash("email", "Ann@Example.com")
    assert all(len(f.hash) == 12 and int(f.hash, 16) >= 0 for f in got.findings)
    shown = repr(got)
    assert "ann@example.com" not in shown and "7946" not in shown and "4111" not in shown


def test_hash_replaces_each_finding_by_its_keyed_hash() -> None:
    scrubber = _scrubber("hash")
    got = scrubber.scrub(TEXT)
    hashes = [f.hash for f in got.findings]
    assert got.text == (
        f"I'm [email:{hashes[0]}], [phone:{hashes[1]}], card [card:{hashes[2]}], "
        f"from [ip:{hashes[3]}]"
    )


def test_off_leaves_the_text_and_makes_no_key(tmp_path: Path) -> None:
    settings = load_settings(
        None,
        {"privacy.scrub": "off", "privacy.generated_key_file": tmp_path / "k"},
        {},
    )
    got = Scrubber.of(settings, "ws_acme")
    assert got.scrub(TEXT).text == TEXT and got.scrub(TEXT).findings == ()
    assert got.scrub_payload({"a": TEXT}).value == {"a": TEXT}
    assert not (tmp_path / "k").exists()


@pytest.mark.parametrize("kind", sorted(SAME))
def test_one_value_written_several_ways_hashes_the_same(kind: str) -> None:
    scrubber = _scrubber("hash")
    found = {scrubber.scrub(f"x {v} y").findings for v in SAME[kind]}
    assert len(found) == 1 and len(next(iter(found))) == 1, found
    assert {scrubber.keyed_hash(kind, v) for v in SAME[kind]} == {next(iter(found))[0].hash}


def test_the_keyed_hash_differs_per_workspace_and_per_key() -> None:
    def digest(scrubber: Scrubber) -> str:
        return scrubber.scrub("ann@example.com").findings[0].hash

    acme = digest(_scrubber("hash", "ws_acme"))
    assert acme == digest(_scrubber("mask", "ws_acme"))  # the mode does not change it
    assert acme != digest(_scrubber("hash", "ws_globex"))
    assert acme != digest(_scrubber("hash", "ws_acme", key=Secret("another key, 32 chars long")))
    assert acme != _scrubber("hash").keyed_hash("phone", "+12025550143")


# -- the key ---------------------------------------------------------------------------


def test_a_key_is_generated_once_into_a_0600_file(tmp_path: Path) -> None:
    key_file = tmp_path / "app-state" / "privacy.key"
    settings = load_settings(None, {"privacy.generated_key_file": key_file}, {})
    first = Scrubber.of(settings, "ws_acme").keyed_hash("email", "ann@example.com")
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    content = key_file.read_text()
    assert Scrubber.of(settings, "ws_acme").keyed_hash("email", "ann@example.com") == first
    assert key_file.read_text() == content
    # the file's content as privacy.key gives the same hashes
    moved = load_settings(None, {}, {"CONVO_PRIVACY_KEY": content.strip()})
    assert Scrubber.of(moved, "ws_acme").keyed_hash("email", "ann@example.com") == first
    assert sorted(p.name for p in key_file.parent.iterdir()) == ["privacy.key"]


def test_a_short_key_or_a_damaged_key_file_is_refused(tmp_path: Path) -> None:
    short = load_settings(None, {}, {"CONVO_PRIVACY_KEY": "tooshort"})
    with pytest.raises(UserError, match="CONVO_PRIVACY_KEY") as caught:
        Scrubber.of(short, "ws_acme")
    assert "tooshort" not in str(caught.value)
    (tmp_path / "privacy.key").write_text("\n")
    damaged = load_settings(None, {"privacy.generated_key_file": tmp_path / "privacy.key"}, {})
    with pytest.raises(UserError, match="empty or cut short"):
        Scrubber.of(damaged, "ws_acme")


# -- settings and the workspace's own mode ---------------------------------------------


def test_a_workspace_table_overrides_the_mode(tmp_path: Path) -> None:
    config = tmp_path / "convo.toml"
    config.write_text(
        '[privacy]\nscrub = "mask"\n'
        '[[workspaces]]\nname = "acme"\nworkspace_id = "ws_acme"\nprivacy_scrub = "hash"\n'
        '[[workspaces]]\nname = "globex"\nprivacy_scrub = "off"\n'
        '[[workspaces]]\nname = "initech"\n'
    )
    settings = load_settings(config, {}, {"CONVO_PRIVACY_KEY": "k" * 32})
    assert privacy_config(settings, "ws_acme").mode == "hash"
    assert privacy_config(settings, "globex").mode == "off"
    assert privacy_config(settings, "initech").mode == "mask"
    assert privacy_config(settings).mode == "mask"


def test_bad_privacy_settings_are_refused_when_loaded() -> None:
    with pytest.raises(ConfigError, match="must be off, mask or hash"):
        load_settings(None, {}, {"CONVO_PRIVACY_SCRUB": "redact"})
    with pytest.raises(ConfigError, match="NAME=REGEX"):
        load_settings(None, {}, {"CONVO_PRIVACY_EXTRA_PATTERNS": "no equals sign"})


# -- payloads ---------------------------------------------------------------------------


def test_every_string_of_a_payload_tree_is_scrubbed_and_nothing_else() -> None:
    payload = {
        "id": "c_1",
        "ann@example.com": "key untouched",
        "messages": [
            {"text": "mail ann@example.com", "position": 1},
            {"text": "call +1 202 555 0143", "score": 4111111111111111, "ok": True},
        ],
        "lead": {"contact": ("10.0.0.7", None)},
    }
    got = _scrubber("hash").scrub_payload(payload)
    (email, phone, ip) = got.findings
    assert got.value == {
        "id": "c_1",
        "ann@example.com": "key untouched",
        "messages": [
            {"text": f"mail [email:{email.hash}]", "position": 1},
            {"text": f"call [phone:{phone.hash}]", "score": 4111111111111111, "ok": True},
        ],
        "lead": {"contact": [f"[ip:{ip.hash}]", None]},
    }
    assert list(got.value) == list(payload)  # key order kept
    assert payload["messages"][0]["text"] == "mail ann@example.com"  # a copy, not in place


def test_a_deep_payload_does_not_overflow_the_stack() -> None:
    deep: object = "ann@example.com"
    for _ in range(5000):
        deep = [deep]
    got = _scrubber().scrub_payload(deep)
    value = got.value
    for _ in range(5000):
        value = value[0]
    assert value == "[email]" and [f.kind for f in got.findings] == ["email"]


# -- extra patterns ---------------------------------------------------------------------


def test_extra_patterns_are_masked_by_name() -> None:
    scrubber = _scrubber(
        "mask", extras=("customer_no=CN-[0-9]{6}", "ssn=[0-9]{3}-[0-9]{2}-[0-9]{4}")
    )
    got = scrubber.scrub("I am CN-004512, ssn 078-05-1120, ann@example.com")
    assert got.text == "I am [customer_no], ssn [ssn], [email]"
    far = "x " * 6000 + "CN-123456"
    assert scrubber.scrub(far).text.endswith("[customer_no]")  # past the first window
    hashed = _scrubber("hash", extras=("customer_no=CN-[0-9]{6}",)).scrub("CN-004512")
    assert hashed.text == f"[customer_no:{hashed.findings[0].hash}]"


@pytest.mark.parametrize(
    ("entry", "says"),
    [
        ("nested=(a+)+b", "nests unbounded repetition"),
        ("words=(\\w+\\s?)*$", "nests unbounded repetition"),
        ("empty=x*", "matches empty text"),
        ("broken=[0-9", "not a valid regular expression"),
        ("Bad Name=x", "is not NAME=REGEX"),
        ("email=x", "is taken"),
    ],
)
def test_unsafe_or_malformed_extra_patterns_are_refused(entry: str, says: str) -> None:
    with pytest.raises(UserError, match=says):
        parse_extra_patterns([entry])


def test_bounded_nesting_is_accepted() -> None:
    (pattern,) = parse_extra_patterns(["ref=(?:[A-Z]{2}-?){1,3}[0-9]+"])
    assert pattern.name == "ref"


# -- never raises, idempotent -------------------------------------------------------------

_FRAGMENTS = [v for values in SAME.values() for v in values] + [
    "[email]", "[phone:0123456789ab]", "[cust]", "CN-123456", "v1.2.3", "2024-05-01",
    "12:30:45", "(0)", "+", "00", "::", "@", ".", "-", " ", "\n", "0", "9", "4111",
]  # fmt: skip
_TEXT = st.lists(
    st.one_of(
        st.sampled_from(_FRAGMENTS),
        st.text(alphabet="0123456789 +-().:@[]abcdefxyzABC/#_\u0660\uff10", max_size=12),
        st.text(max_size=6),
    ),
    max_size=12,
).map("".join)


@settings(max_examples=300, deadline=None)
@given(text=_TEXT, mode=st.sampled_from(["mask", "hash"]), region=st.sampled_from(["US", "GB", ""]))
def test_scrubbing_never_raises_and_finds_nothing_in_its_own_output(
    text: str, mode: str, region: str
) -> None:
    scrubber = _scrubber(mode, region=region, extras=("cust=CN-[0-9]{6}",))
    once = scrubber.scrub(text)
    twice = scrubber.scrub(once.text)
    assert twice.text == once.text and twice.findings == ()


def test_what_the_scrubber_wrote_is_never_found_again() -> None:
    """Placeholders are not read: a hash's hex digits are no number, their words no match
    of a wide extra pattern (else hash mode could replace its own output forever)."""
    detector = Detector("US", parse_extra_patterns(["digits=[0-9]{6}", "word=[a-z]{4,}"]))
    assert detector.find("see [email:123456abcdef], [phone:202555014312] and [word]") == []
    scrubber = _scrubber("hash", extras=("digits=[0-9]{6}",))
    once = scrubber.scrub("code 123456, call +1 202 555 0143")
    assert scrubber.scrub(once.text) == type(once)(once.text, ())


# -- no network -----------------------------------------------------------------------------


def test_the_package_downloads_nothing() -> None:
    """Imported and run with every socket refused: no HTTP client is imported, phone
    metadata comes from the wheel."""
    code = (
        "import socket, sys\n"
        "def refuse(*a, **k): raise SystemExit('network used')\n"
        "socket.socket.connect = refuse; socket.create_connection = refuse\n"
        "socket.getaddrinfo = refuse\n"
        "from convo_analytics.privacy import Detector\n"
        "found = Detector('JP').find('03-1234-5678 +81 90 1234 5678 +55 11 91234-5678')\n"
        "assert [s.kind for s in found] == ['phone'] * 3, found\n"
        "loaded = {m.split('.')[0] for m in sys.modules}\n"
        "assert not loaded & {'httpx', 'httpx2', 'requests', 'urllib3', 'aiohttp'}, loaded\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("CONVO_")}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=env, timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr
