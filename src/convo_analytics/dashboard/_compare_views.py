"""The Compare page's choices as a URL: which two sides, in the query string.

Pure functions, no Streamlit, like ``_views`` for the global filters: the page reads
its choices from the URL when a session opens it and writes them back on every run,
so a comparison can be bookmarked or sent. Parameters: ``compare`` (``periods`` or
``slices``); for two periods ``a_from``, ``a_to``, ``b_from``, ``b_to``
(YYYY-MM-DD); for two slices ``dimension`` (channel, locale, source, intent, topic,
model_tier), ``side_a`` and ``side_b`` (its values; a topic as
``workspace:number``). A value that does not parse, or a day outside the data, is
dropped with a note (Markdown, its quoted value as text: decision D-VIEW-URL); a
slice value the data lacks is the page's to check, since only it knows the values.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import date
from typing import Literal

from convo_analytics.dashboard._compare import SLICE_DIMENSIONS
from convo_analytics.dashboard._text import plain

__all__ = ["COMPARE_PARAMS", "MODES", "CompareChoice", "compare_from_url", "compare_to_params"]

Mode = Literal["periods", "slices"]
MODES: tuple[Mode, ...] = ("periods", "slices")
#: The query parameters the Compare page owns.
COMPARE_PARAMS = ("compare", "a_from", "a_to", "b_from", "b_to", "dimension", "side_a",
                  "side_b")  # fmt: skip
#: How long a slice value in a URL may be (a longer one names nothing).
MAX_VALUE = 200


@dataclass(frozen=True, slots=True)
class CompareChoice:
    """What the page compares: two periods (``a``, ``b``: first and last day; None: the
    default) or two values of ``dimension`` over the sidebar's range."""

    mode: Mode = "periods"
    a: tuple[date, date] | None = None
    b: tuple[date, date] | None = None
    dimension: str | None = None
    side_a: str | None = None
    side_b: str | None = None


def _one(params: Mapping[str, Sequence[str]], name: str) -> str | None:
    values = params.get(name) or ()
    value = values[-1] if values else None
    return value.strip() if isinstance(value, str) and value.strip() else None


def _said(name: str, value: str) -> str:
    return f"?{name}={plain(value)}"


def _range(
    params: Mapping[str, Sequence[str]], side: str, span: tuple[date, date], notes: list[str]
) -> tuple[date, date] | None:
    """The period ``?<side>_from=`` and ``?<side>_to=`` name (None: absent or not usable)."""
    texts = {end: _one(params, f"{side}_{end}") for end in ("from", "to")}
    if not any(texts.values()):
        return None
    days: dict[str, date] = {}
    for end, text in texts.items():
        name = f"{side}_{end}"
        if text is None:
            notes.append(f"?{name}= is missing: period {side.upper()} is the default.")
            return None
        try:
            days[end] = date.fromisoformat(text) if len(text) <= 32 else date.min
        except ValueError:
            days[end] = date.min
        if days[end] == date.min:
            notes.append(f"{_said(name, text)} is not a date (YYYY-MM-DD): period "
                         f"{side.upper()} is the default.")  # fmt: skip
            return None
        if not span[0] <= days[end] <= span[1]:
            notes.append(f"{_said(name, text)} is outside the data ({span[0]} to {span[1]}): "
                         f"period {side.upper()} is the default.")  # fmt: skip
            return None
    if days["from"] > days["to"]:
        notes.append(f"?{side}_from= is after ?{side}_to=: period {side.upper()} is the default.")
        return None
    return days["from"], days["to"]


def compare_from_url(
    params: Mapping[str, Sequence[str]], span: tuple[date, date]
) -> tuple[CompareChoice, list[str]]:
    """The comparison a URL names (``span``: the data's first and last day), and a note
    for each value that was dropped."""
    notes: list[str] = []
    mode_text = _one(params, "compare")
    mode: Mode = "periods"
    if mode_text is not None:
        if mode_text in MODES:
            mode = "slices" if mode_text == "slices" else "periods"
        else:
            notes.append(f"{_said('compare', mode_text)} is not periods or slices: comparing "
                         "two periods.")  # fmt: skip
    dimension = _one(params, "dimension")
    if dimension is not None and dimension not in SLICE_DIMENSIONS:
        notes.append(f"{_said('dimension', dimension)} is not one of "
                     f"{', '.join(SLICE_DIMENSIONS)}: ignored.")  # fmt: skip
        dimension = None
    sides = {}
    for name in ("side_a", "side_b"):
        value = _one(params, name)
        if value is not None and len(value) > MAX_VALUE:
            notes.append(f"?{name}= is longer than {MAX_VALUE} characters: ignored.")
            value = None
        sides[name] = value
    choice = CompareChoice(
        mode,
        _range(params, "a", span, notes),
        _range(params, "b", span, notes),
        dimension,
        sides["side_a"],
        sides["side_b"],
    )
    return choice, notes


def compare_to_params(choice: CompareChoice) -> dict[str, str | list[str]]:
    """The query parameters of a comparison (the other mode's left out)."""
    out: dict[str, str | list[str]] = {"compare": choice.mode}
    if choice.mode == "periods":
        for side, days in (("a", choice.a), ("b", choice.b)):
            if days is not None:
                out[f"{side}_from"], out[f"{side}_to"] = days[0].isoformat(), days[1].isoformat()
        return out
    if choice.dimension is not None:
        out["dimension"] = choice.dimension
    for name in ("side_a", "side_b"):
        value = getattr(choice, name)
        if value is not None:
            out[name] = value
    return out
