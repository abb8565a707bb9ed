"""How the dashboard writes a figure, in one place: tables, tiles, chart axes and tooltips,
download labels (decision D-TABLE-FORMAT).

Pure polars, no Streamlit. A column's *kind* comes from its name (an explicit
entry, else its suffix) and type: rates and shares are percentages, ``*_ms`` and
``*_seconds`` are durations, whole numbers are counts. Each kind has one
precision wherever it is shown:

- percent: one decimal (``70.5%``) in a tile, a table, a tooltip and a
  caption; an axis trims the zero of round ticks (``70%``);
- count: whole, with thousands separators (``5,025``);
- duration: in the unit that suits the column's median (ms, s, min or h), a
  whole number of ms or one decimal of the larger units; its label does not
  repeat a unit (``Latency``, never ``Latency ms`` over seconds), and its axis
  is in the same unit as its table;
- ratio (confidence): two decimals; score: whole; other numbers: one decimal;
- days: ``2026-11-15`` in tables and tooltips, ``Nov 15`` on a time axis.

Values the service or the transform name (funnel steps, guardrail flags,
channels, statuses) get human labels (``contact_captured`` -> ``Contact
captured``, ``pii.email`` -> ``PII: email``); anything else from the data is
shown as it is. :func:`for_display` turns a query's frame into the frame a
table shows plus each column's label and format; ``_session.show_table`` hands
them to ``st.dataframe``. Downloads carry the raw values.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

import polars as pl

from convo_analytics.dashboard._text import plain

__all__ = [
    "DisplayColumn",
    "Shown",
    "axis_format",
    "change_text",
    "delta_text",
    "download_label",
    "duration_unit",
    "enum_label",
    "for_display",
    "human_duration",
    "interval_text",
    "is_enum",
    "kind_of",
    "label_of",
    "level_text",
    "metric_kind",
    "name_text",
    "showing",
    "tooltip_format",
    "value_text",
    "with_interval",
]

Kind = Literal["count", "number", "ratio", "score", "percent", "ms", "seconds", "datetime",
               "date", "text", "bool", "enum"]  # fmt: skip

#: Labels that the generic rule (words of the name, capitalised) would get wrong or long.
LABELS = {
    "conversation_id": "Conversation",
    "external_user_id": "End user",
    "lead_id": "Lead",
    "incident_id": "Incident",
    "message_id": "Message",
    "user_messages": "User messages",
    "assistant_responses": "Responses",
    "escalated_conversations": "Escalated",
    "leads_qualified": "Leads qualified",
    "avg_confidence": "Avg confidence",
    "lead_score": "Lead score",
    "qualified_at": "Qualified",
    "started_at": "Started",
    "triggered_at": "Triggered",
    "escalated_at": "Escalated",
    "first_at": "First",
    "last_at": "Last",
    "last_seen": "Last seen",
    "last_success": "Last success",
    "committed_at": "Committed",
    "finished_at": "Finished",
    "high_water_mark": "Bookmark",
    "feedback_rating": "Rating",
    "first_response_ms": "First response",
    "resolution_seconds": "Time to resolve",
    "median_seconds_from_previous": "Median time from previous step",
    "step_conversion": "Step conversion",
    "conversion_from_start": "Conversion from start",
    "per_1000_responses": "Per 1,000 responses",
    "guardrail_triggers": "Guardrail triggers",
    "excerpt": "Excerpt (redacted)",
    "contact_fields": "Contact details given",
    "first_user_message": "First user message",
    "model_tier": "Model tier",
    "csat": "CSAT",
    "guardrailTriggersPer1000Responses": "Guardrail triggers / 1,000 responses",
    "avgLatencyMs": "Avg response latency",
    "guardrailTriggers": "Guardrail incidents",
    "leadsQualified": "Leads qualified",
    "latencyP50Ms": "Latency p50",
    "latencyP90Ms": "Latency p90",
    "latencyP95Ms": "Latency p95",
    "latencyP99Ms": "Latency p99",
    "reason_code": "Reason",
    "timezone": "Zone",
    "topic_id": "Topic #",
    "previous_conversations": "Previous period",
    "change": "Change",
    "change_low": "Change, 95 % CI from",
    "change_high": "Change, 95 % CI to",
    "merged_topics": "Merged into it",
    "pending": "Changed since the last transform",
    "lowConfidenceShare": "Low-confidence share",
}
#: Kinds the suffix rules would not find.
KINDS: dict[str, Kind] = {
    "csat": "percent",
    "conversion_from_start": "percent",
    "median_seconds_from_previous": "seconds",
    "share": "percent",
    "change": "percent",
    "change_low": "percent",
    "change_high": "percent",
    "avg_confidence": "ratio",
    "avgConfidence": "ratio",
    "confidence": "ratio",
    "band": "ratio",
    "lead_score": "score",
    "score": "score",
    "avgRating": "number",
    "feedback_rating": "count",
}
#: Text columns whose values are names the service or the transform gives (a step, a
#: flag, a status): shown with :func:`enum_label`.
ENUMS = frozenset({"step", "flag", "status", "channel", "intent", "model_tier", "role",
                   "severity", "action", "origin", "priority", "reason_code", "reason",
                   "metric", "mode", "outcome", "tier"})  # fmt: skip
#: A column with more distinct values than this is shown as it is (not a list of names).
MAX_ENUM_VALUES = 100
#: Human labels of values the generic rule would get wrong.
VALUE_LABELS = {
    "pii.email": "PII: email",
    "pii.card": "PII: card number",
    "pii.phone": "PII: phone number",
    "whatsapp": "WhatsApp",
    "sms": "SMS",
    "csat": "CSAT",
    "handed_off": "Handed off",
    "contact_captured": "Contact captured",
}
#: Words kept in capitals by the generic rule.
_ACRONYMS = {"pii": "PII", "sms": "SMS", "csat": "CSAT", "api": "API", "id": "ID", "url": "URL",
             "crm": "CRM", "faq": "FAQ", "p50": "p50", "p90": "p90", "p95": "p95",
             "p99": "p99"}  # fmt: skip
#: A name a program gave (lower case words joined by "_", "-" or "."): labelled by the
#: generic rule. Anything else (a person's words, a locale such as en-US) is kept.
_IDENTIFIER = re.compile(r"[a-z][a-z0-9]*(?:[._-][a-z0-9]+)*")
_CAMEL = re.compile(r"[a-z]+(?:[A-Z0-9][a-z0-9]*)+")
_PERCENT = re.compile(r"(_rate|Rate|_share|Share|conversion|_conversion)$")
_MS = re.compile(r"(_ms|Ms)$")
_SECONDS = re.compile(r"(_seconds|Seconds)$")
#: Units a duration column can be shown in: (name, seconds per unit, printf format).
UNITS = (("ms", 0.001, "%,.0f ms"), ("s", 1.0, "%,.1f s"), ("min", 60.0, "%,.1f min"),
         ("h", 3600.0, "%,.1f h"))  # fmt: skip
MISSING = "–"
#: Decimals of a percentage, everywhere.
PERCENT_DECIMALS = 1


@dataclass(frozen=True, slots=True)
class DisplayColumn:
    """How one column is shown: its label, its kind, a Streamlit format string, and the
    text of one value (a dash when missing) for tables that show text over raw values."""

    label: str
    kind: Kind
    format: str | None = None
    #: True when the values are shown as text already (their format applied).
    as_text: bool = False
    #: A column of names (kind "enum"): each value and its human label.
    options: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True, slots=True)
class Shown:
    """The frame a table shows (values scaled, lists joined) and how each column reads."""

    frame: pl.DataFrame
    columns: dict[str, DisplayColumn]


def label_of(name: str) -> str:
    """A human label for a column name (``escalated_conversations`` -> ``Escalated``); a
    duration's unit is left to its values (``latency_ms`` -> ``Latency``)."""
    if name in LABELS:
        return LABELS[name]
    bare = _SECONDS.sub("", _MS.sub("", name)) or name
    words = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", " ", bare).replace("_", " ").split()
    text = " ".join(words).lower()
    return text[:1].upper() + text[1:]


def is_enum(name: str) -> bool:
    """Whether a text column's values are names to show with :func:`enum_label`."""
    return name in ENUMS


def enum_label(value: object) -> str:
    """A name the service or the transform gives, in words (``contact_captured`` ->
    ``Contact captured``, ``pii.email`` -> ``PII: email``); any other value as it is."""
    if value is None:
        return MISSING
    text = str(value)
    if text in VALUE_LABELS:
        return VALUE_LABELS[text]
    if _CAMEL.fullmatch(text):  # a metric's name (resolutionRate): its column label
        return label_of(text)
    if not _IDENTIFIER.fullmatch(text):
        return text
    head, _, rest = text.partition(".")

    def words(part: str) -> str:
        return " ".join(_ACRONYMS.get(w, w) for w in re.split(r"[._-]", part) if w)

    said = f"{words(head)}: {words(rest)}" if rest else words(head)
    return said[:1].upper() + said[1:]


def name_text(value: object) -> str:
    """A name from the data (a status, a tier, a flag) for one of our Markdown sentences:
    in words when it is a program's name (the words are letters, digits and ": ", which
    Markdown leaves alone), else as text (``_text.plain``); a dash when missing."""
    if value is None:
        return MISSING
    text = str(value)
    named = _IDENTIFIER.fullmatch(text) or _CAMEL.fullmatch(text)
    return enum_label(text) if named else plain(text)


def kind_of(name: str, dtype: pl.DataType) -> Kind:
    """A column's kind, from its name and type."""
    if name in KINDS and dtype.is_numeric():
        return KINDS[name]
    if isinstance(dtype, pl.Datetime):
        return "datetime"
    if isinstance(dtype, pl.Date):
        return "date"
    if isinstance(dtype, pl.Boolean):
        return "bool"
    if dtype.is_numeric():
        if _PERCENT.search(name):
            return "percent"
        if _MS.search(name):
            return "ms"
        if _SECONDS.search(name):
            return "seconds"
        return "count" if dtype.is_integer() else "number"
    if dtype in (pl.String, pl.Categorical) and is_enum(name):
        return "enum"
    return "text"


def duration_unit(seconds: pl.Series) -> tuple[str, float, str]:
    """The unit that suits a duration column: its median value reads between 1 and 60
    (or below 1,000 ms); (unit, seconds per unit, format)."""
    median = seconds.drop_nulls().median()
    value = float(median) if isinstance(median, int | float) else 0.0
    if value < 1:
        return UNITS[0]
    if value < 60:
        return UNITS[1]
    if value < 3600:
        return UNITS[2]
    return UNITS[3]


def human_duration(seconds: float | None) -> str:
    """``13037.9`` -> ``3.6 h``: one duration in the unit that suits it."""
    if seconds is None:
        return MISSING
    unit, size, _ = duration_unit(pl.Series([abs(seconds)]))
    return f"{seconds / size:,.{0 if unit == 'ms' else 1}f} {unit}"


def value_text(value: Any, kind: str, unit: str | None = None) -> str:
    """One value as a tile, a caption or a text cell writes it (``unit``: a duration's,
    else the unit that suits the value). ``kind`` "ms" and "seconds" say what the value
    counts."""
    if value is None or (isinstance(value, float) and value != value):
        return MISSING
    if kind == "count":
        return f"{value:,.0f}"
    if kind == "percent":
        return f"{value * 100:,.{PERCENT_DECIMALS}f}%"
    if kind == "ratio":
        return f"{value:.2f}"
    if kind == "score":
        return f"{value:.0f}"
    if kind == "number":
        return f"{value:,.1f}"
    if kind in ("ms", "seconds"):
        seconds = float(value) / (1000.0 if kind == "ms" else 1.0)
        if unit is None:
            return human_duration(seconds)
        size = next(s for name, s, _ in UNITS if name == unit)
        return f"{seconds / size:,.{0 if unit == 'ms' else 1}f} {unit}"
    if kind == "bool":
        return "yes" if value else "no"
    if kind == "enum":
        return enum_label(value)
    return str(value)


def metric_kind(metric: str, value: Any = None) -> str:
    """The kind of a metric's figure, by the metric's name (``resolutionRate``: percent,
    ``latencyP95Ms``: ms); a whole figure of an unnamed kind is a count."""
    kind = kind_of(metric, pl.Float64())
    if kind == "number" and isinstance(value, int | float) and float(value).is_integer():
        return "count"
    return kind


def change_text(change: float | None, kind: str) -> str:
    """A difference at its figure's precision, signed: points for a percentage
    (``+2.1 pts``), a duration in the unit that suits it (``-120 ms``); a dash when
    missing, ``+∞`` or ``-∞`` when unbounded."""
    if change is None or change != change:
        return MISSING
    if math.isinf(change):
        return "+∞" if change > 0 else "-∞"
    if kind == "percent":
        return f"{change * 100:+,.{PERCENT_DECIMALS}f} pts"
    if kind in ("ms", "seconds"):
        sign = "-" if change < 0 else "+"
        return sign + value_text(abs(change), kind)
    if kind == "count":
        return f"{change:+,.0f}"
    return f"{change:+,.1f}"


def _bound_text(bound: float | None, kind: str, signed: bool) -> str:
    """One bound of an interval: a value as the figure is written (signed: as a change,
    points without their unit, which the interval's end says)."""
    if bound is None or bound != bound:
        return MISSING
    if math.isinf(bound):
        return ("+∞" if bound > 0 else "-∞") if signed else "∞" if bound > 0 else "-∞"
    if not signed:
        return value_text(bound, kind)
    if kind == "percent":
        return f"{bound * 100:+,.{PERCENT_DECIMALS}f}"
    return change_text(bound, kind)


def interval_text(low: float | None, high: float | None, kind: str, *, signed: bool = False) -> str:
    """An interval as a tile writes its figure: ``61.2% to 70.1%``; a difference's
    (``signed``) ``-0.4 to +4.6 pts``, ``-30 ms to +250 ms``; a dash when undefined."""
    if low is None or high is None:
        return MISSING
    text = f"{_bound_text(low, kind, signed)} to {_bound_text(high, kind, signed)}"
    return f"{text} pts" if signed and kind == "percent" else text


def level_text(level: float) -> str:
    """``95 % CI``: how an interval's level is named."""
    return f"{level * 100:g} % CI"


def with_interval(
    value: float | None,
    low: float | None,
    high: float | None,
    kind: str,
    *,
    signed: bool = False,
    level: float | None = None,
) -> str:
    """A figure and its interval: ``65.4% (61.2% to 70.1%)``; a difference (``signed``)
    ``+2.1 pts (-0.4 to +4.6 pts)``; ``level`` names it (``95 % CI ...``). The figure
    alone when its interval is undefined; a dash when the figure is."""
    shown = change_text(value, kind) if signed else value_text(value, kind)
    if value is None or low is None or high is None:
        return shown
    said = f"{level_text(level)} " if level is not None else ""
    return f"{shown} ({said}{interval_text(low, high, kind, signed=signed)})"


def delta_text(
    now: float | None,
    before: float | None,
    kind: str,
    low: float | None = None,
    high: float | None = None,
    level: float = 0.95,
) -> str | None:
    """A tile's change against the previous period, at the tile's precision (None: no
    comparison): points for a percentage, a duration in the unit that suits it; with the
    change's interval when given (``+2.1 pts (95 % CI -0.4 to +4.6 pts)``)."""
    if now is None or before is None:
        return None
    change = now - before
    if low is None or high is None:
        return change_text(change, kind)
    return with_interval(change, low, high, kind, signed=True, level=level)


#: d3 formats (Vega-Lite) of each kind: (axis, tooltip). Durations are drawn in the unit
#: their table uses (``duration_unit``), so their formats are those of numbers.
_VEGA: dict[str, tuple[str, str]] = {
    "count": (",~f", ",.0f"),
    "percent": (f".{PERCENT_DECIMALS}~%", f".{PERCENT_DECIMALS}%"),
    "ratio": (".2~f", ".2f"),
    "score": (",~f", ".0f"),
    "number": (",~f", ",.1f"),
    "ms": (",~f", ",.0f"),
    "s": (",~f", ",.1f"),
    "min": (",~f", ",.1f"),
    "h": (",~f", ",.1f"),
}


def axis_format(kind: str) -> str:
    """The d3 format of an axis showing ``kind`` (a duration: its unit's name)."""
    return _VEGA.get(kind, _VEGA["number"])[0]


def tooltip_format(kind: str) -> str:
    """The d3 format of a tooltip value of ``kind``: the table's precision."""
    return _VEGA.get(kind, _VEGA["number"])[1]


#: A time axis's labels (one format for every tick, not Vega's mix of weekdays and
#: months) and a tooltip's day, as the tables write it.
DAY_AXIS = "%b %d"
DAY_TOOLTIP = "%Y-%m-%d"


def showing(first: int, shown: int, total: int, what: str = "rows") -> str:
    """The caption of a table that shows part of its rows: ``Showing 1-100 of 571 rows``
    (with an en dash); of one that shows them all, how many."""
    if total <= shown:
        return f"{total:,} {what}"
    last = first + shown - 1
    return f"Showing {first:,}–{last:,} of {total:,} {what}"


def download_label(total: int | None = None, what: str | None = None) -> str:
    """A download button's label: how many rows the file holds when the table shows part
    of them (``Download all 571 rows as CSV``), else what it holds."""
    if total is not None:
        return f"Download all {total:,} {what or 'rows'} as CSV"
    return f"Download {what} as CSV" if what else "Download as CSV"


_FORMATS: dict[str, str] = {"count": "localized", "number": "%,.1f", "ratio": "%.2f",
                            "score": "%.0f",
                            "percent": f"%,.{PERCENT_DECIMALS}f%%"}  # fmt: skip


def _texts(kind: Kind, unit: str) -> Callable[[Any], str]:
    """How one value of a column of ``kind`` reads (a duration's value already in ``unit``)."""
    if kind in ("ms", "seconds"):
        size = next(s for name, s, _ in UNITS if name == unit)
        return lambda value: value_text(value * size, "seconds", unit)
    return lambda value: value_text(value, kind)


def for_display(frame: pl.DataFrame, tz: str | None = None, *, relabel: bool = True) -> Shown:
    """The frame as a table shows it, and each column's label and format.

    Numbers keep their values (a table sorts them as numbers; a percentage is
    scaled to 0 to 100) with a format for Streamlit, unless the column has missing
    values: Streamlit shows those as "None" whatever the format, so such a column
    is shown as text, a dash where a value is missing. Times are shown as text to
    the minute (which sorts as time does). Names (steps, flags, statuses) keep
    their values and carry their labels (``DisplayColumn.options``).
    ``relabel=False`` keeps the names as they are (an analyst's own aliases in
    Explore) and only formats the values.
    """
    out: list[pl.Expr] = []
    columns: dict[str, DisplayColumn] = {}
    for name, dtype in frame.schema.items():
        kind = kind_of(name, dtype)
        if kind == "enum" and not relabel:  # an analyst's own columns: values as they are
            kind = "text"
        label = label_of(name) if relabel else name
        col = pl.col(name)
        fmt: str | None = _FORMATS.get(kind)
        as_text = False
        options: tuple[tuple[str, str], ...] = ()
        unit = ""
        if kind in ("ms", "seconds"):
            seconds = frame[name].cast(pl.Float64) / (1000.0 if kind == "ms" else 1.0)
            unit, size, fmt = duration_unit(seconds)
            col = col.cast(pl.Float64) / ((1000.0 if kind == "ms" else 1.0) * size)
        if kind in ("count", "number", "ratio", "score", "percent", "ms", "seconds", "bool"):
            if frame[name].null_count():
                col = col.map_elements(_texts(kind, unit), return_dtype=pl.String)
                col = col.fill_null(MISSING)
                as_text = True
            elif kind == "percent":
                col = col.cast(pl.Float64) * 100.0
        elif kind in ("datetime", "date"):
            dt = dtype if isinstance(dtype, pl.Datetime) else None
            if tz and dt is not None and dt.time_zone is not None:
                col = col.dt.convert_time_zone(tz)
                label = f"{label} ({tz})" if relabel and tz != "UTC" else label
            pattern = "%Y-%m-%d %H:%M" if kind == "datetime" else "%Y-%m-%d"
            col = col.dt.strftime(pattern).fill_null(MISSING)
            as_text = True
        elif kind == "enum":
            values = frame[name].cast(pl.String).drop_nulls().unique().sort().to_list()
            if len(values) <= MAX_ENUM_VALUES:
                missing = [(MISSING, MISSING)] if frame[name].null_count() else []
                options = (*((v, enum_label(v)) for v in values), *missing)
            else:
                kind = "text"
            col = col.cast(pl.String).fill_null(MISSING)
        elif isinstance(dtype, pl.List):
            col = col.cast(pl.List(pl.String)).list.join(", ").fill_null(MISSING)
        elif dtype == pl.String:
            col = col.fill_null(MISSING)
        out.append(col.alias(name))
        columns[name] = DisplayColumn(label, kind, fmt, as_text, options)
    return Shown(frame.select(out) if out else frame, columns)
