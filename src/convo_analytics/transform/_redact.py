"""Redacting personal data from excerpts before a reviewer or an export sees them.

Over-redacting is the safe failure: any run of 13-19 digits (spaces or dashes
between) is taken for a card number and any run of 8 or more digits for a
phone number, whether or not the service's guardrail flagged it.
"""

from __future__ import annotations

import re

import polars as pl

#: (pattern, replacement), applied in this order: cards before phones, since a
#: card number also looks like a long phone number.
RULES: tuple[tuple[str, str], ...] = (
    # an email, also one an excerpt cut short on either side of the @
    (r"[\w.+-]+@[\w.-]*|@[\w-]+(?:\.[\w-]+)+", "[EMAIL]"),
    (r"\b(?:\d[ -]?){12,18}\d\b", "[CARD]"),
    (r"\+?\(?(?:\d[ ()./-]{0,2}){7,}\d", "[PHONE]"),
)
_COMPILED = tuple((re.compile(p), r) for p, r in RULES)


def redact_expr(column: str) -> pl.Expr:
    """The column with emails, card and phone numbers replaced by placeholders."""
    expr = pl.col(column)
    for pattern, replacement in RULES:
        expr = expr.str.replace_all(pattern, replacement)
    return expr


def redact(text: str) -> str:
    """The same redaction for one string (used where there is no frame)."""
    for pattern, replacement in _COMPILED:
        text = pattern.sub(replacement, text)
    return text
