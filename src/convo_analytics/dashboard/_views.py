"""A view as a URL: the global filters and a slice of conversations in the query string.

Pure functions, no Streamlit: the entry script and the pages read the query
string through :func:`filters_from_params` and :func:`slice_from_params`, and
write it back with :func:`filters_to_params` and :func:`slice_to_params`, so
that any view (page, date range, time zone, channels, the slice a chart click
opened, a search, the chosen conversation) can be bookmarked or sent, and
opening the URL restores it. A URL is user input: a value that does not
parse, names nothing in the data or lies outside it is dropped or clamped
(:func:`filters_from_url`, :func:`slice_from_url`, :func:`page_from_url`),
never an error, and each such change comes back as a note the page shows
(decision D-VIEW-URL); a value quoted in a note goes through
``_text.plain`` (decision D-DASH-TEXT).

Query parameters: ``from``, ``to`` (YYYY-MM-DD), ``tz``, ``channel``
(repeated), ``workspace`` (its id; a name is accepted too) and ``topic``
(repeated: a topic's number in the chosen workspace, or ``workspace:number``)
for every page; on Conversations ``day``, ``basis``, ``locale``, ``intent``,
``source``, ``status`` (repeated), ``escalated``, ``flagged``, ``flag``,
``tier``, ``band``, ``below``, ``step``, ``q``, ``page`` and ``conversation``;
on Explore ``notebook``; on Compare its own (``_compare_views``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields, replace
from datetime import UTC, date, datetime, timedelta
from typing import Any, Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from convo_analytics.dashboard._format import is_enum, name_text
from convo_analytics.dashboard._queries import STATUSES, Filters, TopicChoice, topic_key
from convo_analytics.dashboard._text import plain
from convo_analytics.transform import STEPS

__all__ = [
    "DEFAULT_DAYS",
    "MAX_ID",
    "MAX_SEARCH",
    "Drill",
    "Known",
    "Slice",
    "conversation_from_url",
    "default_filters",
    "drill_from_selection",
    "filters_from_params",
    "filters_from_url",
    "filters_to_params",
    "page_from_url",
    "slice_from_params",
    "slice_from_url",
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
        """The slice in words, one chip per condition (for the page to show, as Markdown:
        the values, which a URL may carry, are quoted with ``_text.plain``)."""
        out = []
        if self.day:
            what = "started" if self.basis == "started" else f"with {self.basis}"
            out.append(f"{what} on {self.day}")
        for name in ("locale", "intent", "source", "flag", "tier", "step"):
            value = getattr(self, name)
            if value is not None:  # names the service gives in words, others as text
                shown = name_text(value) if is_enum(name) else plain(value)
                out.append(f"{name}: {shown}")
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


#: How long a search (``q``) may be; a longer one is cut.
MAX_SEARCH = 200
#: How long a conversation id (``conversation``) may be; a longer one names none.
MAX_ID = 200
#: The default range: the last this many days with data.
DEFAULT_DAYS = 30
#: A page number has at most this many digits (more: past any last page).
_PAGE_DIGITS = 9
_DIGITS = re.compile(r"[0-9]+")


def _one(params: Params, name: str) -> str | None:
    values = params.get(name) or ()
    value = values[-1] if values else None
    return value.strip() if isinstance(value, str) and value.strip() else None


def _day(text: str | None) -> date | None:
    try:
        return date.fromisoformat(text) if text and len(text) <= 32 else None
    except ValueError:
        return None


def _bool(text: str | None) -> bool | None:
    return {"yes": True, "true": True, "no": False, "false": False}.get((text or "").lower())


def _float(text: str | None, low: float, high: float) -> float | None:
    try:
        value = float(text) if text and len(text) <= 32 else None
    except ValueError:
        return None
    return value if value is not None and low <= value <= high else None


def _zone(text: str | None) -> str | None:
    if not text or len(text) > 64:
        return None
    try:
        ZoneInfo(text)
    except (ZoneInfoNotFoundError, ValueError, OSError):
        return None
    return text


def _said(name: str, value: str) -> str:
    """How a note quotes what the URL said: ``?name=value`` (the value as text)."""
    return f"?{name}={plain(value)}"


def filters_from_params(params: Params, default: Filters) -> Filters:
    """The global filters a URL names, each falling back to ``default`` when absent or bad."""
    first = _day(_one(params, "from")) or default.first
    last = _day(_one(params, "to")) or default.last
    if last < first:
        first, last = default.first, default.last
    return Filters(first, last, _zone(_one(params, "tz")) or default.tz, _channels(params),
                   _one(params, "workspace") or default.workspace)  # fmt: skip


def _channels(params: Params) -> tuple[str, ...]:
    return tuple(
        dict.fromkeys(
            part.strip()
            for value in params.get("channel") or ()
            for part in value.split(",")
            if part.strip()
        )
    )


@dataclass(frozen=True, slots=True)
class Known:
    """What a URL's filters are checked against: the data's first and last day, its
    channels, its workspaces (id -> name), the time zones the dashboard offers and its
    topics: each topic's key (``workspace:number``, a merged topic's too) -> the topic it
    counts under."""

    first_day: date
    last_day: date
    channels: tuple[str, ...] = ()
    workspaces: Mapping[str, str] | None = None
    zones: tuple[str, ...] = ("UTC",)
    topics: Mapping[str, TopicChoice] | None = None


def default_filters(first_day: date, last_day: date) -> Filters:
    """The view without a URL: the last ``DEFAULT_DAYS`` days with data."""
    return Filters(max(first_day, last_day - timedelta(days=DEFAULT_DAYS - 1)), last_day)


def _url_day(params: Params, name: str, known: Known, notes: list[str]) -> date | None:
    """The day ``?name=`` gives, clamped to the data's days (None: absent or not a day)."""
    text = _one(params, name)
    if text is None:
        return None
    day = _day(text)
    if day is None:
        notes.append(f"{_said(name, text)} is not a date (YYYY-MM-DD): ignored.")
        return None
    shown = "showing from" if name == "from" else "showing up to"
    if day < known.first_day:
        notes.append(f"{_said(name, text)} is before the first day with data "
                     f"({known.first_day}): {shown} {known.first_day}.")  # fmt: skip
        return known.first_day
    if day > known.last_day:
        notes.append(f"{_said(name, text)} is after the last day with data "
                     f"({known.last_day}): {shown} {known.last_day}.")  # fmt: skip
        return known.last_day
    return day


def _workspace_of(names: Mapping[str, str], wanted: str) -> str | None:
    """The workspace id a URL names by id or by name (None: no such workspace)."""
    if wanted in names:
        return wanted
    return next((ws for ws, name in names.items() if name == wanted), None)


def filters_from_url(params: Params, known: Known) -> tuple[Filters, list[str]]:
    """The global filters a URL names, checked against the data, and a note (Markdown, its
    quoted values as text) for each value that was dropped or changed.

    Days outside the data are clamped to its first or last day; a value that is not
    a day is ignored; a range whose start is after its end is the default range. A
    channel the data does not hold is dropped, as are a workspace it does not hold
    (all workspaces), a time zone the dashboard does not offer (UTC) and a topic that is
    not one of the chosen workspace's; a topic merged into another reads as that one.
    """
    notes: list[str] = []
    default = default_filters(known.first_day, known.last_day)
    first = _url_day(params, "from", known, notes)
    last = _url_day(params, "to", known, notes)
    if first is not None and last is not None and first > last:
        notes.append(f"{_said('from', _one(params, 'from') or '')} is after "
                     f"{_said('to', _one(params, 'to') or '')}: showing {default.first} to "
                     f"{default.last} instead.")  # fmt: skip
        first, last = default.first, default.last
    elif last is None:
        first, last = first or default.first, default.last
    elif first is None:  # an end alone: the default length of range up to it
        first = max(known.first_day, last - timedelta(days=DEFAULT_DAYS - 1))
    assert first is not None
    tz = "UTC"
    wanted_tz = _one(params, "tz")
    if wanted_tz is not None:
        if wanted_tz in known.zones:
            tz = wanted_tz
        else:
            notes.append(f"{_said('tz', wanted_tz)} is not one of the dashboard's time zones: "
                         "showing UTC.")  # fmt: skip
    wanted_channels = _channels(params)
    channels = tuple(c for c in wanted_channels if c in known.channels)
    for unknown in (c for c in wanted_channels if c not in known.channels):
        rest = "ignored" if channels else "showing all channels"
        notes.append(f"{_said('channel', unknown)}: the data has no such channel; {rest}.")
    workspace = None
    wanted_ws = _one(params, "workspace")
    if wanted_ws is not None:
        workspace = _workspace_of(known.workspaces or {}, wanted_ws)
        if workspace is None:
            notes.append(f"{_said('workspace', wanted_ws)}: the data has no such workspace; "
                         "showing all workspaces.")  # fmt: skip
    topics: dict[str, TopicChoice] = {}
    for text in dict.fromkeys(v.strip() for v in params.get("topic") or () if v.strip()):
        choice = _topic_of(text, workspace, known, notes)
        if choice is not None:
            topics.setdefault(choice.key, choice)
    return Filters(first, last, tz, channels, workspace, tuple(topics.values())), notes


#: A topic number in a URL has at most this many digits.
_TOPIC_DIGITS = 9


def _topic_of(
    text: str, workspace: str | None, known: Known, notes: list[str]
) -> TopicChoice | None:
    """The topic ``?topic=text`` names (``number`` in the chosen workspace, or in the only
    workspace with topics; ``workspace:number``, the workspace by id or name), or None
    with a note saying why it was dropped."""
    topics = known.topics or {}
    named, colon, number = text.rpartition(":")
    if not _DIGITS.fullmatch(number) or len(number) > _TOPIC_DIGITS:
        notes.append(f"{_said('topic', text)} is not a topic (its number, or "
                     "workspace:number): ignored.")  # fmt: skip
        return None
    holders = sorted({c.workspace_id for c in topics.values()})
    if colon:
        ws = _workspace_of(known.workspaces or {}, named)
        ws = ws if ws is not None else named if named in holders else None
    else:
        ws = workspace if workspace is not None else holders[0] if len(holders) == 1 else None
        if ws is None:
            notes.append(f"{_said('topic', text)}: name its workspace too "
                         "(workspace:number): ignored.")  # fmt: skip
            return None
    if ws is None or (workspace is not None and ws != workspace):
        notes.append(f"{_said('topic', text)} is not a topic of the chosen workspace: ignored.")
        return None
    choice = topics.get(topic_key(ws, int(number)))
    if choice is None:
        notes.append(f"{_said('topic', text)}: the data has no such topic: ignored.")
        return None
    if choice.topic_id != int(number):
        notes.append(f"{_said('topic', text)}: topic {int(number)} is merged into topic "
                     f"{choice.topic_id}: showing that one.")  # fmt: skip
    return choice


def filters_to_params(f: Filters) -> dict[str, str | list[str]]:
    out: dict[str, str | list[str]] = {
        "from": f.first.isoformat(), "to": f.last.isoformat(), "tz": f.tz,
    }  # fmt: skip
    if f.channels:
        out["channel"] = list(f.channels)
    if f.workspace is not None:
        out["workspace"] = f.workspace
    if f.topics:  # a number in the chosen workspace, else workspace:number
        out["topic"] = [str(c.topic_id) if c.workspace_id == f.workspace else c.key
                        for c in f.topics]  # fmt: skip
    return out


#: The query parameters a slice owns (cleared when the slice is).
SLICE_PARAMS = ("day", "basis", "locale", "intent", "source", "status", "escalated", "flagged",
                "flag", "tier", "band", "below", "step", "q")  # fmt: skip


def slice_from_params(params: Params) -> Slice:
    return slice_from_url(params)[0]


def slice_from_url(
    params: Params, span: tuple[date, date] | None = None
) -> tuple[Slice, list[str]]:
    """The slice a URL names, and a note (Markdown, its quoted values as text) for each
    value that was dropped or cut: one that does not parse or is not offered, a day
    outside the data's ``span`` (first and last day, when given), a search longer
    than ``MAX_SEARCH``."""
    notes: list[str] = []

    def dropped(name: str, text: str, why: str) -> None:
        notes.append(f"{_said(name, text)} {why}: ignored.")

    day_text = _one(params, "day")
    day = _day(day_text)
    if day_text is not None and day is None:
        dropped("day", day_text, "is not a date (YYYY-MM-DD)")
    elif day is not None and span is not None and not span[0] <= day <= span[1]:
        dropped("day", day_text or "", f"is outside the data ({span[0]} to {span[1]})")
        day = None
    basis = _one(params, "basis")
    if basis is not None and basis not in BASES:
        dropped("basis", basis, f"is not one of {', '.join(BASES)}")
    statuses: list[str] = []
    for value in params.get("status") or ():
        for status in (s.strip() for s in value.split(",")):
            if status in STATUSES:
                statuses.append(status)
            elif status:
                dropped("status", status, f"is not a status ({', '.join(STATUSES)})")
    flags: dict[str, bool | None] = {}
    for name in ("escalated", "flagged"):
        text = _one(params, name)
        flags[name] = _bool(text)
        if text is not None and flags[name] is None:
            dropped(name, text, "is not yes or no")
    bounds: dict[str, float | None] = {}
    for name, low, high in (("band", 0.0, 0.9), ("below", 0.0, 1.0)):
        text = _one(params, name)
        bounds[name] = _float(text, low, high)
        if text is not None and bounds[name] is None:
            dropped(name, text, f"is not a number from {low:g} to {high:g}")
    step = _one(params, "step")
    if step is not None and step not in STEP_NAMES:
        dropped("step", step, "is not a funnel step")
    search = _one(params, "q") or ""
    if len(search) > MAX_SEARCH:
        notes.append(f"?q= is longer than {MAX_SEARCH} characters: searching for its first "
                     f"{MAX_SEARCH}.")  # fmt: skip
        search = search[:MAX_SEARCH]
    found = Slice(
        day=day,
        basis=next((b for b in BASES if b == basis), "started"),
        locale=_one(params, "locale"),
        intent=_one(params, "intent"),
        source=_one(params, "source"),
        statuses=tuple(dict.fromkeys(statuses)),
        escalated=flags["escalated"],
        flagged=flags["flagged"],
        flag=_one(params, "flag"),
        tier=_one(params, "tier"),
        band=bounds["band"],
        below=bounds["below"],
        step=step if step in STEP_NAMES else None,
        search=search,
    )
    return found, notes


def page_from_url(params: Params) -> tuple[int, list[str]]:
    """The page number ``?page=`` asks for (1 when absent or not a positive whole number,
    with a note); one past any last page stays large, for the page to clamp and say so."""
    text = _one(params, "page")
    if text is None:
        return 1, []
    digits = text.lstrip("0") if _DIGITS.fullmatch(text) else ""
    if not digits:
        return 1, [f"{_said('page', text)} is not a page number: showing page 1."]
    return int(digits) if len(digits) <= _PAGE_DIGITS else 10**_PAGE_DIGITS, []


def conversation_from_url(params: Params) -> tuple[str | None, list[str]]:
    """The conversation id ``?conversation=`` names (None: absent, or too long to be one)."""
    text = _one(params, "conversation")
    if text is not None and len(text) > MAX_ID:
        return None, [f"?conversation= is longer than {MAX_ID} characters, so it names no "
                      "conversation: ignored."]  # fmt: skip
    return text, []


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
    """Where a click on a chart leads: a slice of conversations, and the channels (or the
    topics, by key: ``workspace:number``) to show when the click picked one (channels and
    topics are global filters, so the view keeps them)."""

    slice: Slice
    channels: tuple[str, ...] | None = None
    topics: tuple[str, ...] | None = None


def drill_from_selection(picked: Mapping[str, Any], chart: str) -> Drill | None:
    """Where the mark a user clicked leads (``picked``: the selection's first entry), for
    the chart named ``chart``; None when nothing was picked."""
    if not picked:
        return None
    if chart == "breakdown" and "channel" in picked:
        return Drill(Slice(), (str(picked["channel"]),))
    if "topic_key" in picked:  # a topic's bar, or its line on a day
        if not picked["topic_key"]:  # conversations without a topic: no topic to keep
            return None
        day = _as_day(picked.get("date")) if chart == "topic_trend" else None
        return Drill(Slice(day=day), topics=(str(picked["topic_key"]),))
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
