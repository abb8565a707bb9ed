"""The Compare page's figures and the period deltas' intervals, as data (issue 28).

Pure queries and polars, no Streamlit. A *side* is a date range of the published
snapshot's daily cube (:func:`_queries.cube_of`, so the sidebar's workspace,
channels and topics narrow it as on every page), optionally narrowed to one value of
a dimension: a channel, locale, source, intent, topic or model tier. Its counts are
the cube's columns summed over its days (:func:`side_counts`): the very sums
``transform.metrics_table`` turns into the tiles' rates, so a side's resolution rate
on this page is the Overview's for the same range. The latency histogram is the
cube's ``latency`` frame summed per millisecond, and the split by topic, for the
adjustment for topic mix, sums the same columns per workspace and topic (the marts'
``topic`` dimension: each conversation's own topic id, a stratum per workspace,
conversations without a topic one more).

:func:`compare_sides` hands two sides to ``compare.compare`` and returns rows ready
to show; :func:`period_deltas` gives the Overview's tiles their change's interval.

A model tier is a response's, not a conversation's (``Cube.sliced``): comparing two
tiers compares their response figures only (low-confidence share, latency
percentiles); the conversation figures and guardrail triggers, which the marts do not
split by tier, are shown as not applicable (decision D-COMPARE-PAGE).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import date
from typing import Any

import duckdb
import polars as pl

from convo_analytics.compare import (
    MIN_CONVERSATIONS,
    Comparison,
    Interval,
    SideCounts,
    compare,
    poisson_rate_difference,
)
from convo_analytics.dashboard._format import MISSING, with_interval
from convo_analytics.dashboard._queries import KPIS, Filters, TopicChoice, cube_of, in_topics
from convo_analytics.transform import DIMENSIONS, TIER, UNKNOWN_TOPIC, Cube, metrics_table

__all__ = [
    "COMPARED",
    "LEVEL",
    "SLICE_DIMENSIONS",
    "CompareResult",
    "Side",
    "compare_sides",
    "comparison_table",
    "kpis",
    "period_deltas",
    "rows_of",
    "side_counts",
    "side_counts_of",
    "slice_values",
    "verdict",
]

#: The level of every interval the dashboard shows.
LEVEL = 0.95
#: The dimensions a side can be a value of (the cube's, and the responses' model tier).
SLICE_DIMENSIONS: tuple[str, ...] = (*DIMENSIONS, TIER)
#: ``compare.KPIS`` as the dashboard shows them: name -> (label, format kind, the
#: metric of ``transform.metrics_table`` it equals, whether a tier comparison has it).
COMPARED: dict[str, tuple[str, str, str, bool]] = {
    "resolution_rate": ("Resolution rate", "percent", "resolutionRate", False),
    "escalation_rate": ("Escalation rate", "percent", "escalationRate", False),
    "containment_rate": ("Containment rate", "percent", "containmentRate", False),
    "csat": ("CSAT", "percent", "csat", False),
    "low_confidence_share": ("Low-confidence share", "percent", "lowConfidenceShare", True),
    "guardrail_triggers_per_1000_responses": (
        "Guardrail triggers / 1,000 responses",
        "number",
        "guardrailTriggersPer1000Responses",
        False,
    ),
    "latency_p50_ms": ("p50 latency", "ms", "latencyP50Ms", True),
    "latency_p90_ms": ("p90 latency", "ms", "latencyP90Ms", True),
    "latency_p95_ms": ("p95 latency", "ms", "latencyP95Ms", True),
}
#: Verdicts on a difference, as the table words them.
REAL, NOISE, TOO_FEW, NOT_APPLICABLE, NO_DATA = (
    "difference real",
    "could be noise",
    "too few",
    "not applicable",
    "no data",
)

_CONVERSATION_COUNTS = (
    "conversations",
    "resolved",
    "escalated_conversations",
    "contained_conversations",
    "feedback_count",
    "positive_feedback",
)
_RESPONSE_COUNTS = ("assistant_responses", "low_confidence_responses")
_STRATUM = ("workspace_id", "topic")


@dataclass(frozen=True, slots=True)
class Side:
    """One side of a comparison: the days ``first``..``last`` (in the filters' zone), and,
    for a comparison of slices, one value of ``dimension`` (``SLICE_DIMENSIONS``); a topic
    is named by its key (``workspace:number``) and counted by ``topic`` (its own marts
    value and those merged into it)."""

    first: date
    last: date
    dimension: str | None = None
    value: str | None = None
    topic: TopicChoice | None = None

    @property
    def tiered(self) -> bool:
        return self.dimension == TIER


def _narrowed(cube: Cube, side: Side) -> Cube:
    """The cube's rows of the side's slice (its days are cut by the sums)."""
    if side.dimension is None:
        return cube
    if side.dimension == "topic":
        return in_topics(cube, (side.topic,) if side.topic is not None else ())
    if side.dimension not in SLICE_DIMENSIONS:
        raise ValueError(f"unknown dimension {side.dimension!r}; one of {SLICE_DIMENSIONS}")
    return cube.sliced({side.dimension: [side.value or ""]})


def _per_stratum(
    frame: pl.DataFrame, slices: pl.DataFrame, first: date, last: date, columns: tuple[str, ...]
) -> pl.DataFrame:
    """``columns`` of one of the cube's frames summed over the days per workspace and topic."""
    rows = frame.filter(pl.col("date").is_between(first, last))
    summed = rows.group_by("workspace_id", "slice_key").agg(pl.col(c).sum() for c in columns)
    return (
        summed.join(slices.select("slice_key", "topic"), on="slice_key", how="left")
        .with_columns(pl.col("topic").fill_null(UNKNOWN_TOPIC))
        .group_by(*_STRATUM)
        .agg(pl.col(c).sum() for c in columns)
    )


def _counts(row: dict[str, Any], tiered: bool) -> dict[str, int]:
    out = {c: int(row.get(c) or 0) for c in (*_CONVERSATION_COUNTS, *_RESPONSE_COUNTS)}
    out["guardrail_triggers"] = int(row.get("triggers") or 0)
    if tiered:  # a conversation has no tier, nor (in the marts) a guardrail trigger
        out.update(dict.fromkeys(_CONVERSATION_COUNTS, 0), guardrail_triggers=0)
    return out


def _side(
    counts: dict[str, int],
    latency: dict[float, int] | None = None,
    by_topic: dict[str, SideCounts] | None = None,
) -> SideCounts:
    return SideCounts(
        conversations=counts["conversations"],
        resolved=counts["resolved"],
        escalated_conversations=counts["escalated_conversations"],
        contained_conversations=counts["contained_conversations"],
        feedback_count=counts["feedback_count"],
        positive_feedback=counts["positive_feedback"],
        assistant_responses=counts["assistant_responses"],
        low_confidence_responses=counts["low_confidence_responses"],
        guardrail_triggers=counts["guardrail_triggers"],
        latency=latency or {},
        by_topic=by_topic or {},
    )


def side_counts_of(cube: Cube, side: Side, *, by_topic: bool = True) -> SideCounts:
    """The side's counts from a cube holding its days: sums of the cube's conversations
    (by start day), messages (assistant responses, low-confidence ones), guardrails
    (triggers) and latency (responses per millisecond) over the side's days and slice;
    with ``by_topic``, the same split per workspace and topic (keys ``workspace:topic``).
    A tier's side has no conversation counts nor guardrail triggers (zeros)."""
    cube = _narrowed(cube, side)
    first, last = side.first, side.last
    parts = [
        _per_stratum(cube.conversations, cube.slices, first, last, _CONVERSATION_COUNTS),
        _per_stratum(cube.messages, cube.slices, first, last, _RESPONSE_COUNTS),
        _per_stratum(cube.guardrails, cube.slices, first, last, ("triggers",)),
    ]
    strata = parts[0]
    for part in parts[1:]:
        strata = strata.join(part, on=list(_STRATUM), how="full", coalesce=True, nulls_equal=True)
    rows = strata.to_dicts()
    totals = {c: sum(_counts(r, side.tiered)[c] for r in rows) for c in _counts({}, False)}
    latency = (
        cube.latency.filter(pl.col("date").is_between(first, last))
        .group_by("latency_ms")
        .agg(pl.col("responses").sum())
        .filter(pl.col("responses") > 0)
    )
    histogram = {
        float(ms): int(n) for ms, n in latency.select("latency_ms", "responses").iter_rows()
    }
    split: dict[str, SideCounts] = {}
    if by_topic:
        for row in rows:
            key = f"{row['workspace_id'] or ''}:{row['topic']}"
            split[key] = _side(_counts(row, side.tiered))
    return _side(totals, histogram, split)


def _cube_for(con: duckdb.DuckDBPyConnection, f: Filters, *sides: Side) -> Cube:
    """One cube holding every side's days, narrowed by the global filters."""
    first = min(s.first for s in sides)
    last = max(s.last for s in sides)
    return cube_of(con, replace(f, first=first, last=last))


def side_counts(
    con: duckdb.DuckDBPyConnection, f: Filters, side: Side, *, by_topic: bool = True
) -> SideCounts:
    """The side's counts (:func:`side_counts_of`) from the snapshot, under the global
    filters ``f`` (its workspace, channels and topics; its days are the side's)."""
    return side_counts_of(_cube_for(con, f, side), side, by_topic=by_topic)


def slice_values(con: duckdb.DuckDBPyConnection, f: Filters, dimension: str) -> list[str]:
    """The values of ``dimension`` the filters' range has, most conversations (a tier:
    responses) first. A topic's values are the marts' (each workspace's own ids): the
    page offers the sidebar's topics instead, named as analysts named them."""
    if dimension not in SLICE_DIMENSIONS:
        raise ValueError(f"unknown dimension {dimension!r}; one of {SLICE_DIMENSIONS}")
    cube = cube_of(con, f)
    if dimension == TIER:
        frame, weight = cube.messages.filter(pl.col(TIER).is_not_null()), "assistant_responses"
    else:
        frame, weight = cube.with_dimensions("conversations"), "conversations"
    frame = frame.filter(pl.col("date").is_between(f.first, f.last))
    ranked = (
        frame.group_by(dimension)
        .agg(pl.col(weight).sum())
        .filter(pl.col(weight) > 0)
        .sort([weight, dimension], descending=[True, False])
    )
    return [str(v) for v in ranked[dimension].to_list() if v is not None]


@dataclass(frozen=True, slots=True)
class CompareResult:
    """What the Compare page shows: one row per KPI (``rows``, raw values: each figure,
    its interval's bounds, the verdict), and about each side its sample (conversations,
    or for tiers responses) and whether it is under the minimum; ``adjusted``: whether
    the sides were split by topic (some conversation has a topic), so the topic-adjusted
    column has figures."""

    rows: pl.DataFrame
    a_sample: int
    b_sample: int
    a_small: bool
    b_small: bool
    #: What a side's sample counts: "conversations", or for model tiers "responses".
    sample_unit: str
    adjusted: bool
    minimum: int = MIN_CONVERSATIONS
    level: float = LEVEL


_ROW_SCHEMA: dict[str, Any] = {
    "kpi": pl.String,
    "label": pl.String,
    "kind": pl.String,
    "applicable": pl.Boolean,
    **{
        f"{part}{suffix}": pl.Float64
        for part in ("a", "b", "difference", "adjusted")
        for suffix in ("", "_low", "_high")
    },
    "verdict": pl.String,
    "adjusted_verdict": pl.String,
    "small_sample": pl.Boolean,
}


def verdict(interval: Interval | None, small: bool) -> str:
    """Whether a difference is real, could be noise, rests on too few, or has no data."""
    if interval is None or not interval.defined:
        return NO_DATA
    if small:
        return TOO_FEW
    return REAL if interval.excludes(0.0) else NOISE


def _bounds(name: str, interval: Interval | None) -> dict[str, float | None]:
    if interval is None:
        return {name: None, f"{name}_low": None, f"{name}_high": None}
    return {name: interval.estimate, f"{name}_low": interval.low, f"{name}_high": interval.high}


def _topics_told(*sides: SideCounts) -> bool:
    """Whether any side's conversations (or responses) have a topic (not all unknown)."""
    return any(
        not key.endswith(f":{UNKNOWN_TOPIC}")
        and (counts.conversations or counts.assistant_responses)
        for side in sides
        for key, counts in side.by_topic.items()
    )


def rows_of(result: Comparison, tiered: bool) -> pl.DataFrame:
    """A comparison's rows as the page's table holds them (raw values)."""
    rows = []
    for row in result.kpis:
        label, kind, _metric, for_tiers = COMPARED[row.kpi.name]
        applicable = for_tiers or not tiered
        small = row.small_sample and applicable
        rows.append({
            "kpi": row.kpi.name, "label": label, "kind": kind, "applicable": applicable,
            **_bounds("a", row.a if applicable else None),
            **_bounds("b", row.b if applicable else None),
            **_bounds("difference", row.difference if applicable else None),
            **_bounds("adjusted", row.adjusted if applicable else None),
            "verdict": verdict(row.difference, small) if applicable else NOT_APPLICABLE,
            "adjusted_verdict": (verdict(row.adjusted, small or row.adjusted.small_sample)
                                 if applicable
                                 and row.adjusted is not None and row.adjusted.defined
                                 else None),
            "small_sample": small,
        })  # fmt: skip
    return pl.DataFrame(rows, schema=_ROW_SCHEMA, orient="row")


def compare_sides(con: duckdb.DuckDBPyConnection, f: Filters, a: Side, b: Side) -> CompareResult:
    """Every KPI of side A and side B and B's difference from A (``compare.compare``),
    under the global filters ``f``: each figure with its 95 % interval, the difference
    raw and adjusted for topic mix (when conversations have topics), a verdict, and the
    small-sample flags. Two model tiers are compared on their responses only (the
    minimum is then of responses)."""
    cube = _cube_for(con, f, a, b)
    counts_a, counts_b = side_counts_of(cube, a), side_counts_of(cube, b)
    # two topics share no topic to standardise on: nothing to adjust
    adjusted = _topics_told(counts_a, counts_b) and "topic" not in (a.dimension, b.dimension)
    if not adjusted:
        counts_a, counts_b = replace(counts_a, by_topic={}), replace(counts_b, by_topic={})
    tiered = a.tiered or b.tiered
    if tiered:
        result = compare(counts_a, counts_b, LEVEL, min_conversations=0)
        sample_a, sample_b = counts_a.assistant_responses, counts_b.assistant_responses
    else:
        result = compare(counts_a, counts_b, LEVEL)
        sample_a, sample_b = counts_a.conversations, counts_b.conversations
    return CompareResult(
        rows_of(result, tiered),
        sample_a,
        sample_b,
        sample_a < MIN_CONVERSATIONS,
        sample_b < MIN_CONVERSATIONS,
        "responses" if tiered else "conversations",
        adjusted,
    )


#: The Compare table's columns: (its heading, the rows' column it shows, signed).
_SHOWN = (("A", "a", False), ("B", "b", False), ("Difference (B − A)", "difference", True),
          ("Adjusted for topic mix", "adjusted", True))  # fmt: skip


def comparison_table(rows: pl.DataFrame) -> pl.DataFrame:
    """:class:`CompareResult`'s rows as the page's table shows them, as text written as the
    tiles write figures: each side's figure with its interval (``65.4% (61.2% to 70.1%)``),
    the differences with theirs (``+2.1 pts (-0.4 to +4.6 pts)``), the verdicts, and
    "too few" beside a figure resting on fewer than the minimum."""
    out: dict[str, list[str]] = {"KPI": []}
    for heading, _, _ in _SHOWN:
        out[heading] = []
    out["Verdict"], out["After topic mix"] = [], []
    for row in rows.iter_rows(named=True):
        out["KPI"].append(row["label"])
        for heading, part, signed in _SHOWN:
            if not row["applicable"]:
                out[heading].append(NOT_APPLICABLE)
                continue
            out[heading].append(
                with_interval(
                    row[part], row[f"{part}_low"], row[f"{part}_high"], row["kind"], signed=signed
                )
            )
        out["Verdict"].append(row["verdict"])
        out["After topic mix"].append(row["adjusted_verdict"] or MISSING)
    return pl.DataFrame(out, schema=dict.fromkeys(out, pl.String))


#: The Overview's tiles that are counts over the period (conversations, leads qualified):
#: their change is the difference of two Poisson counts over periods of the same length.
_COUNT_TILES = ("conversations", "leadsQualified")


def period_deltas(cube: Cube, now: Side, before: Side) -> dict[str, tuple[Interval, bool]]:
    """The change of each KPI the compare package covers from ``before`` to ``now`` (two
    sides of a cube holding both), with its 95 % interval and whether a side is under the
    minimum sample, by ``transform.metrics_table``'s metric name: the rates' and the
    latency percentiles' from ``compare.compare``."""
    result = compare(
        side_counts_of(cube, before, by_topic=False),
        side_counts_of(cube, now, by_topic=False),
        LEVEL,
    )
    return {COMPARED[row.kpi.name][2]: (row.difference, row.small_sample) for row in result.kpis}


def kpis(con: duckdb.DuckDBPyConnection, f: Filters) -> list[dict[str, Any]]:
    """Each of the Overview's KPIs (``_queries.KPIS``) for the range and for the previous
    period of the same length, and the change's 95 % interval: ``low`` and ``high`` (None
    for a KPI without one), ``noise`` (the interval holds 0: the change could be noise;
    None: no interval) and ``small`` (a side under the minimum sample). One cube holds
    both periods; the values are ``transform.metrics_table``'s, as everywhere."""
    before = f.previous()
    cube = cube_of(con, replace(f, first=before.first))
    (now,) = metrics_table(cube, f.first, f.last, by_day=False).to_dicts()
    (then,) = metrics_table(cube, before.first, before.last, by_day=False).to_dicts()
    deltas: dict[str, tuple[Interval | None, bool]] = dict(
        period_deltas(cube, Side(f.first, f.last), Side(before.first, before.last))
    )
    for metric in _COUNT_TILES:
        counted = poisson_rate_difference(int(now[metric]), 1, int(then[metric]), 1, LEVEL, 1.0)
        deltas[metric] = (counted, False)
    tiles = []
    for label, metric, fmt in KPIS:
        interval, small = deltas.get(metric, (None, False))
        shown = interval if interval is not None and interval.defined else None
        tiles.append({
            "label": label, "metric": metric, "format": fmt, "value": now[metric],
            "previous": then[metric],
            "low": shown.low if shown is not None else None,
            "high": shown.high if shown is not None else None,
            "noise": (not shown.excludes(0.0)) if shown is not None else None,
            "small": small,
        })  # fmt: skip
    return tiles
