"""The labelled sample of personal data (tests/data/pii_sample.jsonl) and how a detector is
scored on it, shared by tests/test_privacy_scrub.py and tests/bench/bench_privacy.py.

A found span is right when it has the truth's kind and covers the truth's value and
nothing more of the text than punctuation and spaces: every letter and digit of the
value, and no letter or digit beside it (``(202) 555-0143`` with or without its
parenthesis; ``ann@example.com`` but not ``mailto:ann@example.com``). A found span that
is no truth's is a false positive of its kind; a truth no span matches, a miss.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

SAMPLE = Path(__file__).resolve().parent / "data" / "pii_sample.jsonl"
KINDS = ("email", "phone", "card", "iban", "ip")

#: (start, end, kind) spans a detector found in one text.
Found = list[tuple[int, int, str]]


@dataclass(frozen=True)
class Row:
    id: int
    region: str
    text: str
    spans: tuple[tuple[int, int, str], ...]
    tags: tuple[str, ...]


def load_sample(path: Path = SAMPLE) -> list[Row]:
    rows = []
    for line in path.read_text(encoding="utf-8").splitlines():
        raw = json.loads(line)
        spans = tuple((s["start"], s["end"], s["kind"]) for s in raw["spans"])
        rows.append(Row(raw["id"], raw["region"], raw["text"], spans, tuple(raw["tags"])))
    return rows


def _matches(text: str, truth: tuple[int, int, str], found: tuple[int, int, str]) -> bool:
    (t_start, t_end, t_kind), (f_start, f_end, f_kind) = truth, found
    if t_kind != f_kind or f_start >= t_end or f_end <= t_start:
        return False
    if any(ch.isalnum() for ch in text[t_start:t_end][: max(0, f_start - t_start)]):
        return False  # a leading part of the value left out
    if any(ch.isalnum() for ch in text[t_start:t_end][max(0, f_end - t_start) :]):
        return False  # a trailing part left out
    extra = text[f_start:t_start] + text[t_end:f_end]
    return not any(ch.isalnum() for ch in extra)


@dataclass
class Score:
    """Counts per kind, and the errors (for a report)."""

    true: Counter[str] = field(default_factory=Counter)
    found: Counter[str] = field(default_factory=Counter)
    right: Counter[str] = field(default_factory=Counter)
    misses: list[str] = field(default_factory=list)
    false_positives: list[str] = field(default_factory=list)

    def precision(self, kind: str) -> float:
        return self.right[kind] / self.found[kind] if self.found[kind] else 1.0

    def recall(self, kind: str) -> float:
        return self.right[kind] / self.true[kind] if self.true[kind] else 1.0


def score(
    rows: Iterable[Row], detect: Callable[[Row], Found], kinds: Iterable[str] = KINDS
) -> Score:
    """``detect``'s precision and recall per kind on ``rows``."""
    wanted = set(kinds)
    out = Score()
    for row in rows:
        found = [f for f in detect(row) if f[2] in wanted]
        truths = [t for t in row.spans if t[2] in wanted]
        used: set[int] = set()
        for truth in truths:
            out.true[truth[2]] += 1
            hit = next(
                (i for i, f in enumerate(found) if i not in used and _matches(row.text, truth, f)),
                None,
            )
            if hit is None:
                out.misses.append(
                    f"{row.id} {truth[2]} {row.text[truth[0] : truth[1]]!r} {row.tags}"
                )
            else:
                used.add(hit)
                out.right[truth[2]] += 1
        for i, f in enumerate(found):
            out.found[f[2]] += 1
            if i not in used:
                out.false_positives.append(
                    f"{row.id} {f[2]} {row.text[f[0] : f[1]]!r} in {row.text!r}"
                )
    return out
