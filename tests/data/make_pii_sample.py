"""Writes tests/data/pii_sample.jsonl: chat messages labelled with the personal data in them.

The truth comes from how each message is built, never from the scrubber: a message is
made of pieces, and a piece that is an email, a phone number, a payment card, an IBAN or
an IP address records its own span and kind as it is appended. The values are made here
by their own rules (card check digits by the Luhn sum, IBAN check digits by ISO 13616's
mod-97, phone numbers from each country's written forms), independently of
``convo_analytics.privacy``. Near misses (Luhn-invalid cards, IBANs with a wrong check
digit, version strings, dates, times, order and tracking numbers, prices, MAC addresses)
are pieces with no kind: finding one is a false positive.

A message written with a national phone number carries the region it is read in
(``region``, the scrubber's ``privacy.default_region``); the others say "US".

    .venv/bin/python tests/data/make_pii_sample.py      # rewrites the file (seed 30)

tests/test_privacy_scrub.py checks that the file is what this script writes.
"""

from __future__ import annotations

import json
import random
import string
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

OUT = Path(__file__).resolve().parent / "pii_sample.jsonl"
SEED = 30

#: A piece of a message: its text and, for personal data, its kind.
Piece = tuple[str, str | None]


@dataclass
class Message:
    #: The region its national phone numbers are read in (None: none yet; "US" when none).
    region: str | None = None
    parts: list[Piece] = field(default_factory=list)
    tags: list[str] = field(default_factory=list)

    def add(self, text: str, kind: str | None = None, tag: str = "") -> Message:
        self.parts.append((text, kind))
        if tag:
            self.tags.append(tag)
        return self

    def row(self, number: int) -> dict[str, object]:
        text, spans = "", []
        for piece, kind in self.parts:
            if kind is not None:
                spans.append({"start": len(text), "end": len(text) + len(piece), "kind": kind})
            text += piece
        return {"id": number, "region": self.region or "US", "text": text, "spans": spans,
                "tags": self.tags}  # fmt: skip


# -- values -------------------------------------------------------------------------

FIRST = ["ann", "bob", "chen", "dmitri", "eva", "farah", "giorgio", "hana", "ines", "jamal",
         "kofi", "lena", "marta", "noah", "olga", "priya", "quentin", "rosa", "sven",
         "tomas"]  # fmt: skip
LAST = ["lee", "smith", "wang", "ivanov", "novak", "haddad", "rossi", "sato", "garcia",
        "okafor", "mensah", "berg", "kowalski", "miller", "petrova", "nair", "dubois"]  # fmt: skip
DOMAINS = ["example.com", "example.org", "mail.example.co.uk", "dept.example.edu",
           "example.io", "sub.mail.example.net", "example.de", "firma-example.de"]  # fmt: skip


def email(rng: random.Random) -> tuple[str, str]:
    first, last, domain = rng.choice(FIRST), rng.choice(LAST), rng.choice(DOMAINS)
    style = rng.randrange(8)
    local = {
        0: f"{first}.{last}",
        1: f"{first}+{rng.choice(['orders', 'news', 'shop', 'x1'])}",
        2: f"{first}_{last}{rng.randint(1, 99)}",
        3: f"{first[0]}{last}",
        4: f"{first}.{last}-{rng.randint(2, 9)}",
        5: f"{first}",
        6: f"{first}.{last}",
        7: f"{last}.{first}{rng.randint(70, 99)}",
    }[style]
    value = f"{local}@{domain}"
    if style == 6:
        value = value.upper()
    elif rng.random() < 0.15:
        value = value[0].upper() + value[1:]
    styles = ["dot", "plus", "underscore", "initial", "dash", "short", "upper", "digits"]
    return value, f"email:{styles[style]}"


def _digits(rng: random.Random, n: int) -> str:
    return "".join(rng.choice(string.digits) for _ in range(n))


def phone(rng: random.Random) -> tuple[str, str | None, str]:
    """A phone number as people write it: (text, the region a national number is read in,
    None for an international one, tag)."""
    d = lambda n: _digits(rng, n)  # noqa: E731
    area = rng.choice(["202", "212", "305", "312", "415", "617", "702", "713", "206", "303"])
    exchange = rng.choice(["555", str(rng.randint(201, 989))])
    line = f"01{d(2)}" if exchange == "555" else d(4)
    forms: list[tuple[str, str | None, str]] = [
        (f"({area}) {exchange}-{line}", "US", "us-national-paren"),
        (f"{area}-{exchange}-{line}", "US", "us-national-dash"),
        (f"{area}.{exchange}.{line}", "US", "us-national-dot"),
        (f"+1 {area} {exchange} {line}", None, "us-intl-space"),
        (f"+1-{area}-{exchange}-{line}", None, "us-intl-dash"),
        (f"+1 ({area}) {exchange}-{line}", None, "us-intl-paren"),
        (f"+44 20 7946 0{d(3)}", None, "gb-intl-london"),
        (f"+44 (0)20 7946 0{d(3)}", None, "gb-intl-trunk"),
        (f"0044 20 7946 0{d(3)}", None, "gb-00-prefix"),
        (f"020 7946 0{d(3)}", "GB", "gb-national-london"),
        (f"+44 7{rng.choice('5789')}{d(2)} {d(6)}", None, "gb-intl-mobile"),
        (f"07{rng.choice('5789')}{d(2)} {d(6)}", "GB", "gb-national-mobile"),
        (f"+49 30 {d(4)} {d(4)}", None, "de-intl-berlin"),
        (f"+49 (0)30 {d(8)}", None, "de-intl-trunk"),
        (f"030 {d(8)}", "DE", "de-national-berlin"),
        (f"+49 151 {d(8)}", None, "de-intl-mobile"),
        (f"0151 {d(4)} {d(4)}", "DE", "de-national-mobile"),
        (f"0049 151 {d(8)}", None, "de-00-prefix"),
        (f"+33 1 {d(2)} {d(2)} {d(2)} {d(2)}", None, "fr-intl-paris"),
        (f"+33 6 {d(2)} {d(2)} {d(2)} {d(2)}", None, "fr-intl-mobile"),
        (f"06 {d(2)} {d(2)} {d(2)} {d(2)}", "FR", "fr-national-mobile"),
        (f"01 {d(2)} {d(2)} {d(2)} {d(2)}", "FR", "fr-national-paris"),
        (f"+91 98{d(3)} {d(5)}", None, "in-intl-mobile"),
        (f"+91-9{d(4)}-{d(5)}", None, "in-intl-dash"),
        (f"+81 3-{rng.randint(1, 9)}{d(3)}-{d(4)}", None, "jp-intl-tokyo"),
        (f"03-{rng.randint(1, 9)}{d(3)}-{d(4)}", "JP", "jp-national-tokyo"),
        (f"090-{rng.randint(1, 9)}{d(3)}-{d(4)}", "JP", "jp-national-mobile"),
        (f"+55 11 9{d(4)}-{d(4)}", None, "br-intl-mobile"),
        (f"(11) 9{d(4)}-{d(4)}", "BR", "br-national-mobile"),
        (f"+61 2 9{d(3)} {d(4)}", None, "au-intl-sydney"),
        (f"(02) 9{d(3)} {d(4)}", "AU", "au-national-sydney"),
        (f"04{d(2)} {d(3)} {d(3)}", "AU", "au-national-mobile"),
        (f"+61 4{d(2)} {d(3)} {d(3)}", None, "au-intl-mobile"),
        (f"+34 6{d(2)} {d(2)} {d(2)} {d(2)}", None, "es-intl-mobile"),
        (f"+31 20 {d(3)} {d(4)}", None, "nl-intl-amsterdam"),
        (f"06 {rng.randint(1, 5)}{d(7)}", "NL", "nl-national-mobile"),
    ]
    return rng.choice(forms)


def luhn_digit(body: str) -> str:
    """The check digit that makes ``body`` + digit pass the Luhn sum."""
    total = 0
    for i, ch in enumerate(reversed(body)):
        n = int(ch)
        if i % 2 == 0:  # doubled: these sit at odd positions once the check digit is added
            n = n * 2 - 9 if n > 4 else n * 2
        total += n
    return str((10 - total % 10) % 10)


#: (brand, prefixes, length, grouping)
BRANDS = [
    ("visa", ["4"], 16, (4, 4, 4, 4)),
    ("visa13", ["4"], 13, (4, 4, 5)),
    ("mastercard", ["51", "52", "53", "54", "55"], 16, (4, 4, 4, 4)),
    ("mastercard2", ["2221", "2300", "2500", "2720"], 16, (4, 4, 4, 4)),
    ("amex", ["34", "37"], 15, (4, 6, 5)),
    ("discover", ["6011", "65"], 16, (4, 4, 4, 4)),
    ("jcb", ["3528", "3566", "3589"], 16, (4, 4, 4, 4)),
    ("diners", ["36", "38"], 14, (4, 6, 4)),
    ("unionpay", ["62"], 16, (4, 4, 4, 4)),
    ("unionpay19", ["62"], 19, (4, 4, 4, 4, 3)),
]


def card(rng: random.Random, valid: bool = True) -> tuple[str, str]:
    brand, prefixes, length, groups = rng.choice(BRANDS)
    prefix = rng.choice(prefixes)
    body = prefix + _digits(rng, length - 1 - len(prefix))
    check = luhn_digit(body)
    if not valid:
        check = str((int(check) + rng.randint(1, 9)) % 10)
    number = body + check
    sep = rng.choice([" ", " ", "-", ""])
    out, pos = [], 0
    for g in groups:
        out.append(number[pos : pos + g])
        pos += g
    style = {" ": "spaces", "-": "dashes", "": "plain"}[sep]
    return sep.join(out), f"card:{brand}:{style}" + ("" if valid else ":luhn-invalid")


#: country: (length, BBAN maker)
IBAN_FORMATS: dict[str, tuple[int, Callable[[random.Random], str]]] = {
    "DE": (22, lambda r: _digits(r, 18)),
    "GB": (
        22,
        lambda r: (
            "".join(r.choice("ABCDEFGHIJKLMNOPQRSTUVWXYZ") for _ in range(4)) + _digits(r, 14)
        ),
    ),
    "FR": (27, lambda r: _digits(r, 10) + _alnum(r, 11) + _digits(r, 2)),
    "ES": (24, lambda r: _digits(r, 20)),
    "IT": (27, lambda r: r.choice(string.ascii_uppercase) + _digits(r, 10) + _alnum(r, 12)),
    "NL": (18, lambda r: "".join(r.choice(["ABNA", "INGB", "RABO", "TRIO"])) + _digits(r, 10)),
    "BE": (16, lambda r: _digits(r, 12)),
    "CH": (21, lambda r: _digits(r, 5) + _alnum(r, 12)),
    "AT": (20, lambda r: _digits(r, 16)),
    "PL": (28, lambda r: _digits(r, 24)),
    "SE": (24, lambda r: _digits(r, 20)),
    "IE": (22, lambda r: "".join(r.choice(["AIBK", "BOFI"])) + _digits(r, 14)),
    "NO": (15, lambda r: _digits(r, 11)),
    "PT": (25, lambda r: _digits(r, 21)),
}


def _alnum(rng: random.Random, n: int) -> str:
    return "".join(rng.choice(string.digits + string.ascii_uppercase) for _ in range(n))


def iban_check(country: str, bban: str) -> str:
    """ISO 13616 check digits: the number with them set to 00 moved round, letters as
    10..35, 98 minus its remainder modulo 97."""
    moved = bban + country + "00"
    number = "".join(str(int(ch, 36)) for ch in moved)
    return f"{98 - int(number) % 97:02d}"


def iban(rng: random.Random, valid: bool = True) -> tuple[str, str]:
    country = rng.choice(sorted(IBAN_FORMATS))
    length, make = IBAN_FORMATS[country]
    bban = make(rng)
    assert len(bban) == length - 4, country
    check = iban_check(country, bban)
    if not valid:
        check = f"{(int(check) + rng.randint(1, 50)) % 100:02d}"
        if check == iban_check(country, bban):
            check = f"{(int(check) + 1) % 100:02d}"
    compact = country + check + bban
    style = rng.choice(["spaced", "spaced", "compact", "lower"])
    if style == "spaced":
        text = " ".join(compact[i : i + 4] for i in range(0, len(compact), 4))
    elif style == "lower":
        text = compact.lower()
    else:
        text = compact
    return text, f"iban:{country}:{style}" + ("" if valid else ":bad-check")


def ipv4(rng: random.Random) -> tuple[str, str]:
    style = rng.randrange(5)
    value = {
        0: f"203.0.113.{rng.randint(1, 254)}",
        1: f"198.51.100.{rng.randint(1, 254)}",
        2: f"192.168.{rng.randint(0, 9)}.{rng.randint(2, 254)}",
        3: f"10.{rng.randint(0, 255)}.{rng.randint(0, 255)}.{rng.randint(1, 254)}",
        4: f"{rng.randint(11, 223)}.{rng.randint(0, 255)}.{rng.randint(0, 255)}."
        f"{rng.randint(1, 254)}",
    }[style]
    return value, "ip:v4"


def ipv6(rng: random.Random) -> tuple[str, str]:
    h = lambda: f"{rng.randint(1, 0xFFFF):x}"  # noqa: E731
    style = rng.randrange(6)
    value = {
        0: f"2001:db8::{h()}",
        1: f"2001:0db8:{rng.randint(0, 0xFFFF):04x}:0000:0000:{h()}:{h()}:{h()}",
        2: f"fe80::{h()}:{h()}:{h()}:{h()}",
        3: "::1",
        4: f"::ffff:192.0.2.{rng.randint(1, 254)}",
        5: f"2001:db8:{h()}:{h()}::{h()}".upper(),
    }[style]
    return (
        value,
        f"ip:v6:{['compressed', 'full', 'link-local', 'loopback', 'mapped', 'upper'][style]}",
    )


# -- near misses ----------------------------------------------------------------------


def near_miss(rng: random.Random) -> tuple[str, str]:
    """Text a careless detector takes for personal data, and its tag."""
    d = lambda n: _digits(rng, n)  # noqa: E731
    choice = rng.randrange(30)
    if choice == 0:
        return f"v{rng.randint(1, 9)}.{rng.randint(0, 20)}.{rng.randint(0, 30)}", "version-v"
    if choice == 1:
        return (f"version {rng.randint(1, 9)}.{rng.randint(0, 20)}.{rng.randint(0, 30)}."
                f"{rng.randint(0, 99)}"), "version-4part"  # fmt: skip
    if choice == 2:
        return (
            f"{rng.randint(2019, 2026)}-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}",
            "date-iso",
        )
    if choice == 3:
        return (
            f"{rng.randint(1, 12):02d}/{rng.randint(1, 28):02d}/{rng.randint(2019, 2026)}",
            "date-us",
        )
    if choice == 4:
        return (
            f"{rng.randint(1, 28):02d}.{rng.randint(1, 12):02d}.{rng.randint(2019, 2026)}",
            "date-dotted",
        )
    if choice == 5:
        return (
            f"{rng.randint(0, 23):02d}:{rng.randint(0, 59):02d}:{rng.randint(0, 59):02d}",
            "time-seconds",
        )
    if choice == 6:
        return f"{rng.randint(1, 12)}:{rng.randint(0, 59):02d}pm", "time-pm"
    if choice == 7:
        return f"order #{rng.randint(100000, 99999999)}", "order-hash"
    if choice == 8:
        return f"ORD-{rng.randint(2019, 2026)}-{d(6)}", "order-code"
    if choice == 9:
        return f"order number {rng.randint(10**9, 10**10 - 1)}", "order-10-digits"
    if choice == 10:
        return f"${rng.randint(1, 9)},{d(3)}.{d(2)}", "price-usd"
    if choice == 11:
        return f"{rng.randint(1, 999)},{d(2)} EUR", "price-eur"
    if choice == 12:
        return f"1Z{_alnum(rng, 6)}{d(10)}", "tracking-ups"
    if choice == 13:
        return f"9400 1{d(3)} {d(4)} {d(4)} {d(4)} {d(2)}", "tracking-usps"
    if choice == 14:
        return f"tracking {d(12)}", "tracking-fedex"
    if choice == 15:
        return f"{rng.randint(1, 99)}%", "percent"
    if choice == 16:
        mac = ":".join(f"{rng.randint(0, 255):02X}" for _ in range(6))
        return mac, "mac-address"
    if choice == 17:
        first, rest = rng.randint(256, 999), [rng.randint(0, 255) for _ in range(3)]
        return ".".join(map(str, [first, *rest])), "ipv4-out-of-range"
    if choice == 18:
        return ".".join(str(rng.randint(1, 9)) for _ in range(6)), "oid"
    if choice == 19:
        text, tag = card(rng, valid=False)
        return text, tag
    if choice == 20:
        text, tag = iban(rng, valid=False)
        return text, tag
    if choice == 21:
        return f"@{rng.choice(FIRST)}{rng.choice(LAST)}", "handle"
    if choice == 22:
        return f"{rng.choice(FIRST)}@{rng.choice(['home', 'work', 'localhost'])}", "email-no-tld"
    if choice == 23:
        return f"ISBN 978-{rng.randint(0, 9)}-{d(3)}-{d(5)}-{rng.randint(0, 9)}", "isbn"
    if choice == 24:
        return f"zip {d(5)}", "zip"
    if choice == 25:
        return f"{rng.randint(1000000000, 1999999999)}", "unix-time"
    if choice == 26:
        return f"{rng.randint(1, 9)}.{rng.randint(0, 9)}.{rng.randint(0, 9)}", "version-3part"
    if choice == 27:
        return f"case {d(8)}", "case-number"
    if choice == 28:
        return f"{rng.randint(2, 20)} x {rng.randint(50, 999)}g", "quantity"
    return f"INV-{d(6)}", "invoice"


# -- messages -------------------------------------------------------------------------

PLAIN = [
    "Hi, I can't log in to my account since this morning.",
    "What are your opening hours on weekends?",
    "The app keeps crashing when I open the settings page.",
    "Can I change the delivery address for my order?",
    "Thanks, that solved it!",
    "Is there a student discount?",
    "I want to cancel my subscription please.",
    "How do I export my data?",
    "The payment page says my card was declined.",
    "Do you ship to Canada?",
    "Could you explain the difference between the plans?",
    "I never received the confirmation email.",
    "Please escalate this to a human agent.",
    "My package arrived damaged, what now?",
    "Where can I find my invoices?",
    "Your assistant is not answering my question.",
    "Can I pay by bank transfer instead?",
    "I'd like to speak with someone about a refund.",
    "The password reset link has expired.",
    "How long does shipping usually take?",
    "Is my personal information safe with you?",
    "Hello? Anyone there?",
    "I forgot which email I signed up with.",
    "Ok great, thank you for the quick help.",
    "Why was I charged twice this month?",
]
OPENERS = ["", "Hi, ", "Hello! ", "Hey, ", "Good morning. ", "Sorry, one more thing: ", "ok so "]


def _pii(rng: random.Random, msg: Message, kind: str) -> None:
    """One piece of personal data of ``kind`` in a sentence, appended to ``msg``."""
    if kind == "email":
        value, tag = email(rng)
        before, after = rng.choice([
            ("my email is ", "."), ("you can write to ", " anytime"), ("contact: ", ""),
            ("(", ")"), ("<", ">"), ("send it to ", ", thanks"), ("mailto:", " please"),
            ("it's ", ". Thanks!"), ("email me at ", "."), ("", " is my address"),
        ])  # fmt: skip
        msg.add(before).add(value, "email", tag).add(after)
    elif kind == "phone":
        value, region, tag = phone(rng)
        while region is not None and msg.region not in (None, region):
            value, region, tag = phone(rng)  # one region a message
        msg.region = msg.region or region
        before, after = rng.choice([
            ("call me on ", ""), ("my number is ", "."), ("phone: ", ""), ("text ", " after 6"),
            ("reach me at ", " please"), ("you can call ", " tomorrow"), ("tel. ", "."),
            ("whatsapp ", ""), ("(", ")"), ("mobile ", ", office hours only"),
        ])  # fmt: skip
        msg.add(before).add(value, "phone", "phone:" + tag).add(after)
    elif kind == "card":
        value, tag = card(rng)
        before, after = rng.choice([
            ("my card ", " was charged twice"), ("card number ", "."), ("I paid with ", ""),
            ("the card ending... full number ", ", exp 08/27"), ("cc: ", ""),
            ("charge it to ", " please"),
            ("card ", f" {rng.randint(1, 12):02d}/{rng.randint(26, 31)} {_digits(rng, 3)}"),
        ])  # fmt: skip
        msg.add(before).add(value, "card", tag).add(after)
    elif kind == "iban":
        value, tag = iban(rng)
        before, after = rng.choice([
            ("please refund to ", "."), ("IBAN: ", ""), ("my iban is ", " (Sparkasse)"),
            ("transfer to ", ", reference invoice"), ("account ", " thanks"),
        ])  # fmt: skip
        msg.add(before).add(value, "iban", tag).add(after)
    else:
        value, tag = (ipv4 if rng.random() < 0.6 else ipv6)(rng)
        before, after = rng.choice([
            ("the login came from ", "."), ("my IP is ", ""), ("blocked address ", " again"),
            ("server at ", ":8443 is down"), ("whitelist ", " please"), ("[", "]"),
        ])  # fmt: skip
        if after.startswith(":") and ":" in value:
            after = " is down"  # an IPv6 address with a port is written in brackets
        msg.add(before).add(value, "ip", tag).add(after)


def build(rng: random.Random) -> list[Message]:
    messages: list[Message] = []
    for i in range(130):  # no personal data, no digits
        messages.append(Message().add(rng.choice(OPENERS) + PLAIN[i % len(PLAIN)], tag="plain"))
    for _ in range(150):  # near misses only
        msg = Message().add(rng.choice(OPENERS))
        for j in range(rng.randint(1, 2)):
            text, tag = near_miss(rng)
            msg.add(
                rng.choice(["see ", "about ", "re: ", "ref ", "", "for "]) if j == 0 else " and "
            )
            msg.add(text, None, "near:" + tag)
        msg.add(rng.choice([" - " + rng.choice(PLAIN), "?", ".", ""]))
        messages.append(msg)
    kinds = ["email"] * 90 + ["phone"] * 150 + ["card"] * 75 + ["iban"] * 65 + ["ip"] * 70
    rng.shuffle(kinds)
    while kinds:
        msg = Message().add(rng.choice(OPENERS))
        count = min(len(kinds), rng.choice([1, 1, 1, 2, 2, 3]))
        for j in range(count):
            if j:
                msg.add(rng.choice([" and ", ", also ", ". Also ", "; "]))
            _pii(rng, msg, kinds.pop())
            if rng.random() < 0.3:
                text, tag = near_miss(rng)
                opener = rng.choice([" (", " - re "])
                msg.add(opener).add(text, None, "near:" + tag).add(")" if opener == " (" else "")
        if rng.random() < 0.5:
            msg.add(" " + rng.choice(PLAIN))
        messages.append(msg)
    rng.shuffle(messages)
    return messages


def rows(seed: int = SEED) -> list[dict[str, object]]:
    return [m.row(i) for i, m in enumerate(build(random.Random(seed)))]


def render(seed: int = SEED) -> str:
    return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows(seed))


if __name__ == "__main__":
    OUT.write_text(render(), encoding="utf-8")
    print(f"wrote {OUT} ({len(rows())} messages)", file=sys.stderr)
