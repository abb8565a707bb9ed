"""How the dashboard shows a table: human column labels, and numbers formatted by kind.

Pure polars, no Streamlit: :func:`for_display` turns a query's frame into the
frame a table shows plus a description of each column (label, kind, format),
which ``_session.show_table`` hands to ``st.dataframe`` as its column
configuration. The download beside a table always carries the raw frame.

Kinds come from the column's name (an explicit entry, else its suffix) and
type: rates and shares are percentages, ``*_ms`` and ``*_seconds`` are
durations shown in the unit that suits the column's values (ms, s, min or h),
timestamps are cut to the minute in the chosen time zone, lists are joined,
and a missing text is a dash.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

import polars as pl

__all__ = ["DisplayColumn", "Shown", "for_display", "human_duration", "label_of"]

Kind = Literal["count", "number", "ratio", "score", "percent", "ms", "seconds", "datetime",
               "date", "text", "bool"]  # fmt: skip

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
}
#: Kinds the suffix rules would not find.
KINDS: dict[str, Kind] = {
    "csat": "percent",
    "conversion_from_start": "percent",
    "median_seconds_from_previous": "seconds",
    "share": "percent",
    "avg_confidence": "ratio",
    "avgConfidence": "ratio",
    "confidence": "ratio",
    "band": "ratio",
    "lead_score": "score",
    "score": "score",
    "avgRating": "number",
    "feedback_rating": "count",
}
_PERCENT = re.compile(r"(_rate|Rate|_share|Share|conversion|_conversion)$")
_MS = re.compile(r"(_ms|Ms)$")
_SECONDS = re.compile(r"(_seconds|Seconds)$")
#: Units a duration column can be shown in: (name, seconds per unit, printf format).
UNITS = (("ms", 0.001, "%,.0f ms"), ("s", 1.0, "%,.1f s"), ("min", 60.0, "%,.1f min"),
         ("h", 3600.0, "%,.1f h"))  # fmt: skip
MISSING = "–"


@dataclass(frozen=True, slots=True)
class DisplayColumn:
    """How one column is shown: its label, its kind, a Streamlit format string, and the
    text of one value (a dash when missing) for tables that show text over raw values."""

    label: str
    kind: Kind
    format: str | None = None
    #: True when the values are shown as text already (their format applied).
    as_text: bool = False


@dataclass(frozen=True, slots=True)
class Shown:
    """The frame a table shows (values scaled, lists joined) and how each column reads."""

    frame: pl.DataFrame
    columns: dict[str, DisplayColumn]


def label_of(name: str) -> str:
    """A human label for a column name (``escalated_conversations`` -> ``Escalated``)."""
    if name in LABELS:
        return LABELS[name]
    words = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", " ", name).replace("_", " ").split()
    text = " ".join(words).lower()
    return text[:1].upper() + text[1:]


def _kind(name: str, dtype: pl.DataType) -> Kind:
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
        return "–"
    unit, size, _ = duration_unit(pl.Series([seconds]))
    return f"{seconds / size:,.{0 if unit == 'ms' else 1}f} {unit}"


_FORMATS: dict[str, str] = {"count": "localized", "number": "%,.1f", "ratio": "%.2f",
                            "score": "%.0f", "percent": "percent"}  # fmt: skip


def _texts(kind: Kind, unit: str) -> Callable[[Any], str]:
    """How one value of a column of ``kind`` reads (``unit`` for durations)."""

    def text(value: Any) -> str:
        if value is None or (isinstance(value, float) and value != value):
            return MISSING
        if kind == "count":
            return f"{value:,.0f}"
        if kind == "percent":  # as Streamlit's "percent" format: up to two decimals
            return f"{value * 100:,.2f}".rstrip("0").rstrip(".") + "%"
        if kind == "ratio":
            return f"{value:.2f}"
        if kind == "score":
            return f"{value:.0f}"
        if kind == "number":
            return f"{value:,.1f}"
        if kind in ("ms", "seconds"):
            return f"{value:,.{0 if unit == 'ms' else 1}f} {unit}"
        if kind == "bool":
            return "yes" if value else "no"
        return str(value)

    return text


def for_display(frame: pl.DataFrame, tz: str | None = None, *, relabel: bool = True) -> Shown:
    """The frame as a table shows it, and each column's label and format.

    Numbers keep their values (a table sorts them as numbers) with a format for
    Streamlit, unless the column has missing values: Streamlit shows those as
    "None" whatever the format, so such a column is shown as text, a dash where
    a value is missing. Times are shown as text to the minute (which sorts as
    time does). ``relabel=False`` keeps the names as they are (an analyst's own
    aliases in Explore) and only formats the values.
    """
    out: list[pl.Expr] = []
    columns: dict[str, DisplayColumn] = {}
    for name, dtype in frame.schema.items():
        kind = _kind(name, dtype)
        label = label_of(name) if relabel else name
        col = pl.col(name)
        fmt: str | None = _FORMATS.get(kind)
        as_text = False
        if kind in ("ms", "seconds"):
            seconds = frame[name].cast(pl.Float64) / (1000.0 if kind == "ms" else 1.0)
            unit, size, fmt = duration_unit(seconds)
            col = col.cast(pl.Float64) / ((1000.0 if kind == "ms" else 1.0) * size)
        if kind in ("count", "number", "ratio", "score", "percent", "ms", "seconds", "bool"):
            if frame[name].null_count():
                text = _texts(kind, unit if kind in ("ms", "seconds") else "")
                col = col.map_elements(text, return_dtype=pl.String).fill_null(MISSING)
                as_text = True
        elif kind in ("datetime", "date"):
            dt = dtype if isinstance(dtype, pl.Datetime) else None
            if tz and dt is not None and dt.time_zone is not None:
                col = col.dt.convert_time_zone(tz)
                label = f"{label} ({tz})" if relabel and tz != "UTC" else label
            pattern = "%Y-%m-%d %H:%M" if kind == "datetime" else "%Y-%m-%d"
            col = col.dt.strftime(pattern).fill_null(MISSING)
            as_text = True
        elif isinstance(dtype, pl.List):
            col = col.cast(pl.List(pl.String)).list.join(", ").fill_null(MISSING)
        elif dtype == pl.String:
            col = col.fill_null(MISSING)
        out.append(col.alias(name))
        columns[name] = DisplayColumn(label, kind, fmt, as_text)
    return Shown(frame.select(out) if out else frame, columns)
