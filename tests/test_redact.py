"""Redaction of excerpts: personal data never survives, in Python and in polars alike."""

from __future__ import annotations

import re

import polars as pl
from hypothesis import given, settings
from hypothesis import strategies as st

from convo_analytics.transform import redact, redact_expr

words = st.text(alphabet="abcdefghij klmnopqrstuvwxyzäöüß,.!?", max_size=40)
emails = st.from_regex(r"[a-z][a-z0-9.+-]{0,10}@[a-z0-9-]{1,10}\.[a-z]{2,6}", fullmatch=True)
phones = st.from_regex(
    r"\+?[0-9]{2,3}[ -]?\(?[0-9]{2,4}\)?[ -]?[0-9]{3,4}[ -]?[0-9]{4}", fullmatch=True
)
cards = st.from_regex(r"[0-9]{4}([ -]?[0-9]{4}){3}", fullmatch=True)


@settings(max_examples=200, deadline=None)
@given(before=words, secret=st.one_of(emails, phones, cards), after=words, cut=st.integers(0, 6))
def test_no_personal_data_survives(before: str, secret: str, after: str, cut: int) -> None:
    # excerpts may be cut short through the middle of the secret, on either side
    for text in (
        f"{before} {secret} {after}",
        f"…{secret[cut:]} {after}",
        f"{before} {secret[: len(secret) - cut]}…",
    ):
        out = redact(text)
        assert "@" not in out or not re.search(r"\w@|@\w", out), out
        assert not re.search(r"(\d[ ()./-]{0,2}){8}", out), out
        assert pl.DataFrame({"e": [text]}).select(redact_expr("e"))["e"][0] == out


def test_short_numbers_stay_and_long_runs_go() -> None:
    """Over-redacting is the chosen failure: a date has eight digits, as a phone may."""
    text = "Order 12345 arrived on 2026-11-21 at 10:30, thanks!"
    assert redact(text) == "Order 12345 arrived on [PHONE] at 10:30, thanks!"
    assert redact("card ending 1111 expired") == "card ending 1111 expired"
    assert redact("IBAN DE89 3704 0044 0532 0130 00") == "IBAN DE89 [CARD]"
