"""Guardrail detection on message text: personal data, prompt injection, blocked terms.

The history generator runs generated user messages through the same detector
the live assistant uses, so flags in the history are the ones a live message
with the same text would raise.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_EMAIL = re.compile(r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+")
_PHONE = re.compile(r"(?<![\w+])\+?\d[\d ()-]{7,}\d(?!\w)")
_CARD = re.compile(r"(?<!\d)(?:\d[ -]?){12,18}\d(?!\d)")
_INJECTION = re.compile(
    r"ignore (?:all |your )?(?:previous|prior) instructions|system prompt|"
    r"you are now (?:dan|in developer mode)|disregard (?:the|your) rules|"
    r"ignoriere alle vorherigen anweisungen",
    re.IGNORECASE,
)
DEFAULT_BLOCKED_TERMS = ("idiot", "stupid bot", "scam", "lawsuit")


@dataclass(frozen=True, slots=True)
class Finding:
    flag: str
    rule: str
    category: str | None
    severity: str | None
    action: str
    span: tuple[int, int]


def _luhn_ok(digits: str) -> bool:
    total = 0
    for i, ch in enumerate(reversed(digits)):
        d = int(ch)
        if i % 2 == 1:
            d = d * 2 - 9 if d > 4 else d * 2
        total += d
    return total % 10 == 0


def detect(text: str, blocked_terms: tuple[str, ...] = DEFAULT_BLOCKED_TERMS) -> list[Finding]:
    """Every guardrail the text trips, in the order they appear."""
    found: list[Finding] = []
    card_spans: list[tuple[int, int]] = []
    for m in _CARD.finditer(text):
        digits = re.sub(r"\D", "", m.group())
        if 13 <= len(digits) <= 19 and _luhn_ok(digits):
            card_spans.append(m.span())
            found.append(
                Finding("pii.card", "pii-card-number", "privacy", "high", "redacted", m.span())
            )
    for m in _EMAIL.finditer(text):
        found.append(Finding("pii.email", "pii-email", "privacy", "medium", "logged", m.span()))
    for m in _PHONE.finditer(text):
        if any(s <= m.start() < e for s, e in card_spans):
            continue
        if len(re.sub(r"\D", "", m.group())) >= 8:
            found.append(Finding("pii.phone", "pii-phone", "privacy", "medium", "logged", m.span()))
    for m in _INJECTION.finditer(text):
        found.append(
            Finding("prompt_injection", "injection-phrase", "security", "high", "blocked", m.span())
        )
    lowered = text.lower()
    for term in blocked_terms:
        at = lowered.find(term)
        if at >= 0:
            found.append(
                Finding(
                    "blocked_term", f"wordlist:{term}", None, None, "warned", (at, at + len(term))
                )
            )
    found.sort(key=lambda f: f.span[0])
    return found


def excerpt(text: str, span: tuple[int, int], width: int = 60) -> str:
    """The text around a finding, as the service would log it (unredacted)."""
    start = max(0, span[0] - width // 2)
    end = min(len(text), span[1] + width // 2)
    return ("…" if start else "") + text[start:end] + ("…" if end < len(text) else "")
