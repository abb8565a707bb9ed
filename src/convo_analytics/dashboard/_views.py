"""A view as a URL: the global filters and a slice of conversations in the query string.

Pure functions, no Streamlit: the entry script and the pages read the query
string through :func:`filters_from_params` and :func:`slice_from_params`, and
write it back with :func:`filters_to_params` and :func:`slice_to_params`, so
that any view (page, date range, time zone, channels, the slice a chart click
opened, a search, the chosen conversation) can be bookmarked or sent, and
opening the URL restores it. Values that do not parse are ignored (the
default is used), never an error: a URL is user input.

Query parameters: ``from``, ``to`` (YYYY-MM-DD), ``tz``, ``channel``
(repeated) and ``workspace`` (its id; a name is accepted too) for every
page; on Conversations ``day``, ``basis``, ``locale``, ``intent``,
``source``, ``status`` (repeated), ``escalated``, ``flagged``, ``flag``,
``tier``, ``band``, ``below``, ``step``, ``q``, ``page`` and ``conversation``;
on Explore ``notebook``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields, replace
from datetime import UTC, date, datetime
from typing import Any, Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from convo_analytics.dashboard._queries import STATUSES, Filters
from convo_analytics.transform import STEPS

__all__ = [
    "Drill",
    "Slice",
    "drill_from_selection",
    "filters_from_params",
    "filters_to_params",
    "slice_from_params",
    "slice_to_params",
]

Params = Mapping[str, Sequence[str]]
#: What a slice's ``day`` is the day of: the conversation's start, or the responses,
#: incidents or feedback a chart counted.
Basis = Literal["started", "responses", "incidents", "feedback"]
BASES: tuple[Basis, ...] = ("started", "responses", "incidents", "feedback")
STEP_NAMES = tuple(step for step, _ in STEPS)


@dataclass(frozen=True, slots=True)
class Slice:
    """Which conversations the Conversations page lists, beyond the global filters."""

    day: date | None = None
    basis: Basis = "started"
    locale: str | None = None
    intent: str | None = None
    source: str | None = None
    statuses: tuple[str, ...] = ()
    escalated: bool | None = None
    flagged: bool | None = None
    #: A guardrail flag: conversations with an incident of it (on ``day``, if given).
    flag: str | None = None
    #: A model tier: conversations with a response of it.
    tier: str | None = None
    #: A confidence band's lower bound (tenths): conversations with a response in it.
    band: float | None = None
    #: Conversations with a response whose confidence is below this.
    below: float | None = None
    #: A lead funnel step the conversation reached.
    step: str | None = None
    search: str = ""

    def chips(self) -> list[str]:
        """The slice in words, one chip per condition (for the page to show)."""
        out = []
        if self.day:
            what = "started" if self.basis == "started" else f"with {self.basis}"
            out.append(f"{what} on {self.day}")
        for name in ("locale", "intent", "source", "flag", "tier", "step"):
            value = getattr(self, name)
            if value is not None:
                out.append(f"{name}: {value}")
        if self.band is not None:
            out.append(f"a response with confidence {self.band:.1f}–{self.band + 0.1:.1f}")
        if self.below is not None:
            out.append(f"a response with confidence below {self.below:g}")
        return out

    @property
    def drilled(self) -> bool:
        """Whether a chart's click (or a URL) narrowed the list beyond the page's widgets."""
        widgets = {"statuses", "escalated", "flagged", "search", "basis"}
        return any(
            getattr(self, f.name) not in (None, (), "")
            for f in fields(self)
            if f.name not in widgets
        )

    def without_drill(self) -> Slice:
        return Slice(statuses=self.statuses, escalated=self.escalated, flagged=self.flagged,
                     search=self.search)  # fmt: skip


def _one(params: Params, name: str) -> str | None:
    values = params.get(name) or ()
    value = values[-1] if values else None
    return value.strip() if isinstance(value, str) and value.strip() else None


def _day(text: str | None) -> date | None:
    try:
        return date.fromisoformat(text) if text else None
    except ValueError:
        return None


def _bool(text: str | None) -> bool | None:
    return {"yes": True, "true": True, "no": False, "false": False}.get((text or "").lower())


def _float(text: str | None, low: float, high: float) -> float | None:
    try:
        value = float(text) if text else None
    except ValueError:
        return None
    return value if value is not None and low <= value <= high else None


def _zone(text: str | None) -> str | None:
    if not text:
        return None
    try:
        ZoneInfo(text)
    except (ZoneInfoNotFoundError, ValueError):
        return None
    return text


def filters_from_params(params: Params, default: Filters) -> Filters:
    """The global filters a URL names, each falling back to ``default`` when absent or bad."""
    first = _day(_one(params, "from")) or default.first
    last = _day(_one(params, "to")) or default.last
    if last < first:
        first, last = default.first, default.last
    channels = tuple(
        dict.fromkeys(
            part.strip()
            for value in params.get("channel") or ()
            for part in value.split(",")
            if part.strip()
        )
    )
    return Filters(first, last, _zone(_one(params, "tz")) or default.tz, channels,
                   _one(params, "workspace") or default.workspace)  # fmt: skip


def filters_to_params(f: Filters) -> dict[str, str | list[str]]:
    out: dict[str, str | list[str]] = {
        "from": f.first.isoformat(), "to": f.last.isoformat(), "tz": f.tz,
    }  # fmt: skip
    if f.channels:
        out["channel"] = list(f.channels)
    if f.workspace is not None:
        out["workspace"] = f.workspace
    return out


#: The query parameters a slice owns (cleared when the slice is).
SLICE_PARAMS = ("day", "basis", "locale", "intent", "source", "status", "escalated", "flagged",
                "flag", "tier", "band", "below", "step", "q")  # fmt: skip


def slice_from_params(params: Params) -> Slice:
    basis = _one(params, "basis")
    step = _one(params, "step")
    statuses = tuple(s for v in params.get("status") or () for s in v.split(",")
                     if s in STATUSES)  # fmt: skip
    return Slice(
        day=_day(_one(params, "day")),
        basis=basis if basis in BASES else "started",
        locale=_one(params, "locale"),
        intent=_one(params, "intent"),
        source=_one(params, "source"),
        statuses=tuple(dict.fromkeys(statuses)),
        escalated=_bool(_one(params, "escalated")),
        flagged=_bool(_one(params, "flagged")),
        flag=_one(params, "flag"),
        tier=_one(params, "tier"),
        band=_float(_one(params, "band"), 0.0, 0.9),
        below=_float(_one(params, "below"), 0.0, 1.0),
        step=step if step in STEP_NAMES else None,
        search=(_one(params, "q") or "")[:200],
    )


def slice_to_params(s: Slice) -> dict[str, str | list[str]]:
    out: dict[str, str | list[str]] = {}
    if s.day:
        out["day"] = s.day.isoformat()
        if s.basis != "started":
            out["basis"] = s.basis
    for name in ("locale", "intent", "source", "flag", "tier", "step"):
        value = getattr(s, name)
        if value is not None:
            out[name] = str(value)
    if s.statuses:
        out["status"] = list(s.statuses)
    for name in ("escalated", "flagged"):
        value = getattr(s, name)
        if value is not None:
            out[name] = "yes" if value else "no"
    if s.band is not None:
        out["band"] = f"{s.band:.1f}"
    if s.below is not None:
        out["below"] = f"{s.below:g}"
    if s.search:
        out["q"] = s.search
    return out


def _as_day(value: Any) -> date | None:
    """A chart's date value: Vega hands temporal fields over as epoch milliseconds."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return datetime.fromtimestamp(value / 1000, UTC).date()
    if isinstance(value, str):
        return _day(value[:10])
    return None


@dataclass(frozen=True, slots=True)
class Drill:
    """Where a click on a chart leads: a slice of conversations, and the channels to show
    when the click picked a channel (channels are a global filter, so the view keeps them)."""

    slice: Slice
    channels: tuple[str, ...] | None = None


def drill_from_selection(picked: Mapping[str, Any], chart: str) -> Drill | None:
    """Where the mark a user clicked leads (``picked``: the selection's first entry), for
    the chart named ``chart``; None when nothing was picked."""
    if not picked:
        return None
    if chart == "breakdown" and "channel" in picked:
        return Drill(Slice(), (str(picked["channel"]),))
    found = _slice_of(picked, chart)
    return Drill(found) if found is not None else None


def _slice_of(picked: Mapping[str, Any], chart: str) -> Slice | None:
    day = _as_day(picked.get("date"))
    base = Slice(day=day)
    if chart == "breakdown":
        if "locale" in picked:
            return replace(base, locale=str(picked["locale"]))
        if "intent" in picked:
            return replace(base, intent=str(picked["intent"]))
        if "source" in picked:
            return replace(base, source=str(picked["source"]))
        if "model_tier" in picked:
            return replace(base, tier=str(picked["model_tier"]))
    if chart == "funnel" and picked.get("step") in STEP_NAMES:
        return Slice(step=str(picked["step"]))
    if chart == "confidence" and day is not None:
        band = _float(str(picked.get("band")), 0.0, 0.9)
        return Slice(day=day, basis="responses", band=band)
    if chart == "low_confidence" and day is not None:
        return Slice(day=day, basis="responses", below=float(picked.get("below", 0.5)))
    if chart == "incidents" and day is not None:
        flag = picked.get("flag")
        return Slice(day=day, basis="incidents", flag=str(flag) if flag else None)
    if chart == "latency" and day is not None:
        return Slice(day=day, basis="responses")
    if chart == "feedback" and day is not None:
        return Slice(day=day, basis="feedback")
    if chart == "daily" and day is not None:
        return base
    return None
