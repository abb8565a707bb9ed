"""Why a metric moved: its change split over slices, example conversations, and links.

The change is taken as a count against what the baseline expected (decision
D-MONITORS). For a count metric, a slice's expected count is its mean over the
baseline windows; for a proportion or a rate, the slice's baseline rate (its
counts summed over the baseline windows) times its denominator in the judged
window, so a slice that only grew in volume is not blamed for a rate's move. A
slice's *excess* is its count minus its expected count, and its *share* the
excess over the sum of every slice's excess of that dimension: "channel web
accounts for 86 % of +48 escalated conversations". Each dimension of the marts
(channel, locale, source, intent, topic, and the model tier for response figures)
is split on its own. Percentiles and means do not split into counts; their
explanation is the examples and the links.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import date
from typing import Any
from urllib.parse import urlencode

import duckdb
import polars as pl

from convo_analytics.monitors._catalogue import COUNTS_OF, MetricSpec
from convo_analytics.transform import DIMENSIONS, TIER, Cube

__all__ = ["breakdown", "examples", "links"]

#: Slices listed per dimension (largest excess in the change's direction first).
TOP_SLICES = 5
#: Example conversations an alert carries.
EXAMPLES = 3


def _in(frame: pl.DataFrame, days: Sequence[tuple[date, date]]) -> pl.DataFrame:
    keep = pl.any_horizontal(pl.col("date").is_between(a, b) for a, b in days)
    return frame.filter(keep)


def _per_value(
    joined: pl.DataFrame, column: str, dim: str, days: Sequence[tuple[date, date]]
) -> pl.DataFrame:
    rows = _in(joined, days)
    return rows.group_by(pl.col(dim).cast(pl.String).fill_null("unknown").alias("value")).agg(
        pl.col(column).sum().cast(pl.Float64).alias("n")
    )


def _dimensions(metric: MetricSpec) -> tuple[str, ...]:
    den_frame = COUNTS_OF[metric.denominator][0] if metric.denominator else metric.frame
    tiered = metric.frame in ("messages", "latency") and den_frame in ("messages", "latency")
    return (*DIMENSIONS, TIER) if tiered else DIMENSIONS


def breakdown(
    cube: Cube,
    metric: MetricSpec,
    window: tuple[date, date],
    baseline: Sequence[tuple[date, date]],
    labels: Mapping[str, Mapping[str, str]] | None = None,
) -> dict[str, Any]:
    """The change of ``metric`` in ``window`` against ``baseline`` split over each
    dimension: per dimension, the total excess and its top slices (value, label, count,
    expected, excess, share); ``{}`` when the metric does not split into counts."""
    if not metric.decomposable or not baseline or metric.frame is None or metric.column is None:
        return {}
    out: dict[str, Any] = {}
    # each frame joined to its slices' dimensions once, for every dimension's split
    joined: dict[str, pl.DataFrame] = {}

    def rows_of(frame: str) -> pl.DataFrame:
        if frame not in joined:
            joined[frame] = cube.with_dimensions(frame)
        return joined[frame]

    for dim in _dimensions(metric):
        now = _per_value(rows_of(metric.frame), metric.column, dim, [window])
        base = _per_value(rows_of(metric.frame), metric.column, dim, baseline)
        table = now.join(base, on="value", how="full", coalesce=True, suffix="_base").fill_null(0.0)
        if metric.kind == "count":
            table = table.with_columns(expected=pl.col("n_base") / len(baseline))
        else:
            assert metric.denominator is not None
            den_frame, den_column = COUNTS_OF[metric.denominator]
            den_now = _per_value(rows_of(den_frame), den_column, dim, [window])
            den_base = _per_value(rows_of(den_frame), den_column, dim, baseline)
            table = (
                table.join(den_now.rename({"n": "d"}), on="value", how="full", coalesce=True)
                .join(den_base.rename({"n": "d_base"}), on="value", how="full", coalesce=True)
                .fill_null(0.0)
            )
            overall = float(table["n_base"].sum()) / max(float(table["d_base"].sum()), 1.0)
            rate = (
                pl.when(pl.col("d_base") > 0)
                .then(pl.col("n_base") / pl.col("d_base"))
                .otherwise(pl.lit(overall))
            )
            table = table.with_columns(expected=rate * pl.col("d"))
        table = table.with_columns(excess=pl.col("n") - pl.col("expected"))
        total = float(table["excess"].sum())
        if total == 0.0:
            continue
        sign = 1.0 if total > 0 else -1.0
        top = table.sort(pl.col("excess") * sign, descending=True).head(TOP_SLICES)
        named = (labels or {}).get(dim, {})
        out[dim] = {
            "excess": round(total, 3),
            "slices": [
                {
                    "value": row["value"],
                    "label": named.get(row["value"], row["value"]),
                    "count": round(row["n"], 3),
                    "expected": round(row["expected"], 3),
                    "excess": round(row["excess"], 3),
                    "share": round(row["excess"] / total, 4),
                }
                for row in top.iter_rows(named=True)
            ],
        }
    return out


#: Conversations an example is drawn from, per numerator count: the facts that make it.
_PREDICATES = {
    "escalatedConversations": "escalated",
    "escalations": "escalated",
    "resolved": "status = 'resolved'",
    "abandoned": "status = 'abandoned'",
    "open": "status = 'open'",
    "containedConversations": "contained",
    "leadsQualified": "qualified_at IS NOT NULL",
    "positiveFeedback": "positive_feedback",
    "feedbackCount": "feedback_rating IS NOT NULL",
    "guardrailTriggers": "guardrail_triggers > 0",
    "engagedConversations": "engaged",
}
#: The marts' dimensions an example must share with the slices that moved most.
_CONVERSATION_DIMENSIONS = ("channel", "locale", "source", "intent", "topic")


def focus(explained: Mapping[str, Any], filters: Mapping[str, Sequence[str]]) -> dict[str, str]:
    """The slice that moved: per conversation dimension, the top slice's value where it
    holds at least half of the change (the monitor's own filters win)."""
    out: dict[str, str] = {}
    for dim in _CONVERSATION_DIMENSIONS:
        slices = (explained.get(dim) or {}).get("slices") or []
        several = len(slices) > 1  # one value takes all of any change: it says nothing
        if dim not in filters and several and slices[0]["share"] >= 0.5:
            out[dim] = str(slices[0]["value"])
    return out


def examples(
    con: duckdb.DuckDBPyConnection,
    metric: MetricSpec,
    workspace_id: str,
    window: tuple[date, date],
    tz: str,
    where: Mapping[str, Sequence[str]],
    rising: bool,
) -> list[dict[str, Any]]:
    """Up to three conversations of ``window`` in the slice ``where`` (dimension -> values)
    that show the change: for a rise, conversations that count in the metric's numerator;
    for a fall, in its denominator but not its numerator. Ids and facts only, no text."""
    sql = [
        "SELECT conversation_id, started_at, channel, intent, topic, status, escalated",
        "FROM mart_conversations WHERE coalesce(workspace_id, '') = ?",
        "AND CAST(timezone(?, started_at) AS DATE) BETWEEN ? AND ?",
    ]
    params: list[Any] = [workspace_id, tz, window[0], window[1]]
    for dim, values in where.items():
        if dim in _CONVERSATION_DIMENSIONS and values:
            sql.append(f"AND {dim} IN ({', '.join('?' * len(values))})")
            params += list(values)
    predicate = _PREDICATES.get(metric.numerator or "")
    if predicate is not None:
        sql.append(
            f"AND coalesce({predicate}, false)"
            if rising
            else f"AND NOT coalesce({predicate}, false)"
        )
    sql.append("ORDER BY hash(conversation_id), conversation_id LIMIT ?")
    params.append(EXAMPLES)
    rows = con.execute(" ".join(sql), params).fetchall()
    names = ("conversation_id", "started_at", "channel", "intent", "topic", "status", "escalated")
    return [
        {
            k: (v.isoformat() if hasattr(v, "isoformat") else v)
            for k, v in zip(names, r, strict=True)
        }
        for r in rows
    ]


def links(
    base_url: str,
    workspace_id: str,
    window: tuple[date, date],
    tz: str,
    where: Mapping[str, Sequence[str]],
    metric: MetricSpec,
    conversation_ids: Sequence[str] = (),
) -> dict[str, Any]:
    """Dashboard URLs of the window and slice (the query parameters of D-VIEW-URL): the
    Overview, the Conversations page, and each example conversation."""
    base = base_url.rstrip("/")
    common: list[tuple[str, str]] = [
        ("from", window[0].isoformat()), ("to", window[1].isoformat()), ("tz", tz),
    ]  # fmt: skip
    if workspace_id:
        common.append(("workspace", workspace_id))
    common += [("channel", v) for v in where.get("channel", ())]
    common += [("topic", f"{workspace_id}:{v}") for v in where.get("topic", ()) if v.isdigit()]
    narrow: list[tuple[str, str]] = []
    for dim in ("locale", "intent", "source"):
        values = list(where.get(dim, ()))
        if len(values) == 1:
            narrow.append((dim, values[0]))
    if metric.numerator in ("escalatedConversations", "escalations"):
        narrow.append(("escalated", "yes"))
    if window[0] == window[1]:
        narrow.append(("day", window[0].isoformat()))
    conversations = f"{base}/conversations?{urlencode(common + narrow)}"
    return {
        "overview": f"{base}/?{urlencode(common)}",
        "conversations": conversations,
        "examples": {
            cid: f"{conversations}&{urlencode([('conversation', cid)])}" for cid in conversation_ids
        },
    }
