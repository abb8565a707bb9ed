"""Evaluating monitors over the warehouse: every complete window not yet judged, in order.

A run (the nightly ``monitors`` step, right after the transform) reads each
monitor's slice of the daily cube once, in the monitor's time zone, splits it
into series (one per workspace, and per value of ``group_by``), and judges each
series' windows after its last judged one (back to ``monitoring.lookback_days``)
oldest first, carrying the episode state from the stored rows. The rows are
written to ``monitor_evaluations`` in one transaction; the alerts and resolve
notices they call for are recorded for delivery afterwards
(:func:`pending_notices`), so a kill between the two delivers on the re-run, with
the same idempotency key (decision D-MONITORS).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, date, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import duckdb
import orjson
import polars as pl

from convo_analytics.compare import percentile
from convo_analytics.config import MonitorSpec
from convo_analytics.monitors._catalogue import MetricSpec
from convo_analytics.monitors._definition import Monitor
from convo_analytics.monitors._explain import breakdown, examples, focus, links
from convo_analytics.monitors._judge import (
    CALIBRATION,
    Figures,
    advance,
    baseline_windows,
    bounds,
    breach_of,
    dispersion,
    last_complete_window,
    previous_windows,
    residual,
    windows_to_judge,
)
from convo_analytics.notify import notification_key
from convo_analytics.transform import (
    LATENCY_QUANTILES,
    MEDIANS,
    TIER,
    Cube,
    load_cube,
    metrics_table,
)
from convo_analytics.warehouse import MONITOR_EVALUATIONS, transaction

__all__ = ["EvaluationConfig", "EvaluationResult", "evaluate", "store_rows"]

_COLUMNS = tuple(c.name for c in MONITOR_EVALUATIONS.columns)


@dataclass(frozen=True, slots=True)
class EvaluationConfig:
    """How far back to judge, and where alert links point."""

    lookback_days: int = 90
    dashboard_url: str = "http://127.0.0.1:8501"
    run_id: str | None = None


@dataclass(slots=True)
class EvaluationResult:
    """The rows a run judged (in the table's column names) and what they amount to."""

    rows: list[dict[str, Any]] = field(default_factory=list)
    unknown_workspaces: dict[str, list[str]] = field(default_factory=dict)

    def counts(self) -> dict[str, Any]:
        transitions = [r for r in self.rows if r["notification_key"]]
        return {
            "windows": len(self.rows),
            "judged": sum(1 for r in self.rows if r["judged"]),
            "alerts": sum(1 for r in transitions if r["state"] == "alerting"),
            "resolved": sum(1 for r in transitions if r["state"] == "resolved"),
            "alerting": len({(r["monitor"], r["workspace_id"], r["series"])
                             for r in self._latest() if r["state"] == "alerting"}),
        }  # fmt: skip

    def _latest(self) -> list[dict[str, Any]]:
        latest: dict[tuple[str, str, str], dict[str, Any]] = {}
        for row in self.rows:
            latest[(row["monitor"], row["workspace_id"], row["series"])] = row
        return list(latest.values())


def _workspace_ids(con: duckdb.DuckDBPyConnection) -> dict[str, str]:
    """Each configured name and id -> the workspace's id."""
    try:
        rows = con.execute("SELECT name, workspace_id FROM workspaces").fetchall()
    except duckdb.CatalogException:
        rows = []
    out = {str(ws): str(ws) for _, ws in rows if ws is not None}
    out.update({str(name): str(ws) for name, ws in rows if ws is not None})
    return out


def _last_judged(
    con: duckdb.DuckDBPyConnection, monitor: Monitor
) -> dict[tuple[str, str], tuple[date, str, date | None]]:
    """Per series: its last judged window's start, state and episode."""
    rows = con.execute(
        "SELECT workspace_id, series, window_start, state, episode_start FROM ("
        " SELECT *, row_number() OVER (PARTITION BY workspace_id, series"
        "  ORDER BY window_start DESC) AS n FROM monitor_evaluations"
        " WHERE monitor = ? AND definition_version = ?) WHERE n = 1",
        [monitor.name, monitor.version],
    ).fetchall()
    return {(ws, series): (start, state, episode) for ws, series, start, state, episode in rows}


def _topic_values(
    con: duckdb.DuckDBPyConnection, workspace_id: str, ids: Sequence[str]
) -> list[str]:
    """The topic dimension's values of the topics ``ids`` and those merged into them."""
    numbers = [int(i) for i in ids if i.strip().isdigit()]
    if not numbers:
        return list(ids)
    rows = con.execute(
        "SELECT topic FROM mart_topics WHERE workspace_id = ? AND effective_topic_id IN "
        f"({', '.join('?' * len(numbers))})",
        [workspace_id, *numbers],
    ).fetchall()
    return sorted({str(r[0]) for r in rows} | {str(n) for n in numbers})


def _topic_labels(con: duckdb.DuckDBPyConnection, workspace_id: str) -> dict[str, str]:
    try:
        rows = con.execute(
            "SELECT topic, effective_label FROM mart_topics WHERE workspace_id = ?", [workspace_id]
        ).fetchall()
    except duckdb.CatalogException:
        return {}
    return {str(t): str(label) for t, label in rows if label is not None}


def _of_workspace(cube: Cube, workspace_id: str) -> Cube:
    keep = pl.col("workspace_id").fill_null("") == workspace_id
    frames = {name: getattr(cube, name).filter(keep) for name in cube.frames}
    return replace(cube, **frames, daily_percentiles=None)


def _number(value: Any) -> float | None:
    if value is None:
        return None
    number = float(value)
    return number if math.isfinite(number) else None


#: The confidence of the percentile interval whose half width is one standard error.
_ONE_SE = 0.6827


class _Series:
    """One series' figures per window, computed once and kept (a window may be judged and
    serve as baseline for later ones)."""

    def __init__(self, cube: Cube, metric: MetricSpec, window: str) -> None:
        self.cube, self.metric, self.window = cube, metric, window
        self.known: dict[date, dict[str, Any]] = {}
        self.figured: dict[date, Figures] = {}
        self.first = date.max

    def starting(self, first: date) -> None:
        """The series' first day with data (no window before it is a residual)."""
        self.first = first

    def load_days(self, first: date, last: date) -> None:
        if self.window == "day":
            for row in metrics_table(self.cube, first, last).iter_rows(named=True):
                self.known[row["date"]] = row

    def _variance(self, w: tuple[date, date]) -> float | None:
        """A percentile's variance from the window's histogram (None: unbounded)."""
        name = self.metric.name
        if name in LATENCY_QUANTILES:
            rows = self.cube.latency.filter(pl.col("date").is_between(*w))
            q, value, weight = LATENCY_QUANTILES[name], "latency_ms", "responses"
        else:
            rows = self.cube.durations.filter(
                pl.col("date").is_between(*w) & (pl.col("measure") == MEDIANS[name])
            )
            q, value, weight = 0.5, "value", "conversations"
        summed = rows.group_by(value).agg(pl.col(weight).sum())
        histogram = dict(zip(summed[value].to_list(), summed[weight].to_list(), strict=True))
        if not histogram:
            return None
        interval = percentile(histogram, q, _ONE_SE)
        low, high = interval.low, interval.high
        if low is None or high is None or not (math.isfinite(low) and math.isfinite(high)):
            return None
        return ((high - low) / 2) ** 2

    def dispersion(self, w: tuple[date, date], spec: MonitorSpec) -> float | None:
        """The series' dispersion from the residuals of the windows before ``w``."""
        found = []
        for u in previous_windows(w[0], spec.window, CALIBRATION[spec.window]):
            if u[0] < self.first:
                break
            history = [self.figures(b) for b in baseline_windows(u[0], spec)]
            r = residual(spec, self.metric, self.figures(u), history, self.trailing(u, spec))
            if r is not None:
                found.append(r)
        return dispersion(found)

    def trailing(self, w: tuple[date, date], spec: MonitorSpec) -> list[tuple[int, Figures]]:
        """(weekday, figures) of the days a same-weekday day window's centre is pooled
        with: the ``7 * weeks`` days before it (none for other monitors)."""
        if spec.window != "day" or spec.baseline != "same_weekday":
            return []
        days = previous_windows(w[0], "day", 7 * spec.weeks)
        return [(d[0].weekday(), self.figures(d)) for d in days if d[0] >= self.first]

    def figures(self, w: tuple[date, date]) -> Figures:
        """The window's value, sample (conversations), denominator and variance."""
        if w[0] in self.figured:
            return self.figured[w[0]]
        row = self.known.get(w[0])
        if row is None:
            (row,) = metrics_table(self.cube.between(*w), w[0], w[1], by_day=False).to_dicts()
        sample = int(row.get("conversations") or 0)
        den_name = self.metric.denominator
        denominator = float(row.get(den_name) or 0) if den_name else float(sample)
        variance = self._variance(w) if self.metric.kind == "percentile" else None
        found = Figures(_number(row.get(self.metric.name)), sample, denominator, variance)
        self.figured[w[0]] = found
        return found


def _series_cubes(
    con: duckdb.DuckDBPyConnection, monitor: Monitor, cube: Cube, workspace_id: str
) -> list[tuple[str, Cube]]:
    wcube = _of_workspace(cube, workspace_id)
    topics = monitor.spec.filters.topic
    if topics:
        wcube = wcube.sliced({"topic": _topic_values(con, workspace_id, topics)})
    dim = monitor.spec.group_by
    if dim is None:
        return [("", wcube)]
    keys = wcube.conversations.select("slice_key").unique()
    values = wcube.slices.join(keys, on="slice_key", how="semi")[dim].drop_nulls().unique()
    return [(str(v), wcube.sliced({dim: [str(v)]})) for v in sorted(values.to_list())]


def _dimension_filters(monitor: Monitor) -> dict[str, list[str]]:
    f = monitor.spec.filters
    out = {dim: list(getattr(f, dim)) for dim in ("channel", "locale", "source", "intent")}
    if f.tier:
        out[TIER] = list(f.tier)
    return {k: v for k, v in out.items() if v}


def evaluate(
    con: duckdb.DuckDBPyConnection,
    monitors: Sequence[Monitor],
    config: EvaluationConfig,
    *,
    now: datetime | None = None,
    stored_state: bool = True,
) -> EvaluationResult:
    """Judge every monitor's windows not yet judged (``stored_state=False``: all of the
    lookback, from a clean state, as ``convo monitors test`` does). Reads only."""
    now = now or datetime.now(UTC)
    result = EvaluationResult()
    ids = _workspace_ids(con)
    for monitor in monitors:
        if monitor.spec.enabled:
            _evaluate_one(con, monitor, config, now, ids, result, stored_state)
    return result


def _evaluate_one(
    con: duckdb.DuckDBPyConnection,
    monitor: Monitor,
    config: EvaluationConfig,
    now: datetime,
    ids: Mapping[str, str],
    result: EvaluationResult,
    stored_state: bool,
) -> None:
    spec, metric = monitor.spec, monitor.metric
    today = now.astimezone(ZoneInfo(monitor.timezone)).date()
    delay = spec.delay_days if spec.delay_days is not None else metric.settle_days
    settled = today - timedelta(days=delay)  # windows that ended before it are judged
    _, last = last_complete_window(today, spec.window)
    span = 7 * spec.weeks if spec.baseline == "same_weekday" else spec.windows * (
        1 if spec.window == "day" else 7)  # fmt: skip
    calibration = CALIBRATION[spec.window] * (1 if spec.window == "day" else 7) + span
    first = today - timedelta(days=config.lookback_days + span + calibration + 7)
    cube = load_cube(con, monitor.timezone, first=first, last=last,
                     filters=_dimension_filters(monitor))  # fmt: skip
    present = sorted(set(cube.conversations["workspace_id"].fill_null("").unique().to_list()))
    wanted = spec.filters.workspace
    if wanted:
        resolved = {ids.get(w, w) for w in wanted}
        unknown = sorted(w for w in wanted if ids.get(w, w) not in present)
        if unknown:
            result.unknown_workspaces[monitor.name] = unknown
        present = [w for w in present if w in resolved]
    judged_before = _last_judged(con, monitor) if stored_state else {}
    evaluated_at = now
    for workspace_id in present:
        labels = {"topic": _topic_labels(con, workspace_id)}
        for series, scube in _series_cubes(con, monitor, cube, workspace_id):
            days = scube.conversations["date"]
            if days.is_empty():
                continue
            after, state, episode = judged_before.get((workspace_id, series), (None, None, None))
            windows = windows_to_judge(days.min(), after, settled, spec.window,  # type: ignore[arg-type]
                                       config.lookback_days)  # fmt: skip
            if not windows:
                continue
            figures = _Series(scube, metric, spec.window)
            figures.starting(days.min())  # type: ignore[arg-type]
            figures.load_days(windows[0][0] - timedelta(days=span + calibration + 7), last)
            for w in windows:
                now_figures = figures.figures(w)
                value, sample = now_figures.value, now_figures.sample
                base = baseline_windows(w[0], spec)
                history = [figures.figures(b) for b in base]
                b = bounds(spec, metric, now_figures, history, figures.dispersion(w, spec),
                           figures.trailing(w, spec))  # fmt: skip
                reason = b.reason
                if value is None:
                    reason = "no value (nothing to divide by)"
                elif sample < spec.min_sample:
                    reason = f"sample {sample} under min_sample {spec.min_sample}"
                judged = not reason
                crossed = breach_of(value, b) if judged and value is not None else ""
                step = advance(state, episode, judged, bool(crossed), w[0])
                explanation = None
                if step.transition == "alert":
                    used = [bw for bw, f in zip(base, history, strict=True)
                            if f.value is not None and f.sample >= spec.min_sample]  # fmt: skip
                    explanation = _explain(con, monitor, scube, workspace_id, series, w, used,
                                           labels, config, rising=bool(
                                               b.upper is not None and value is not None
                                               and value > b.upper))  # fmt: skip
                key = None
                if step.transition is not None:
                    key = notice_key(
                        monitor, workspace_id, series, step.episode_start, step.transition
                    )
                result.rows.append({
                    "monitor": monitor.name, "definition_version": monitor.version,
                    "workspace_id": workspace_id, "series": series,
                    "window_start": w[0], "window_end": w[1], "window_kind": spec.window,
                    "timezone": monitor.timezone, "metric": spec.metric, "value": value,
                    "baseline": b.baseline, "lower_bound": b.lower, "upper_bound": b.upper,
                    "sample": sample, "baseline_windows": b.used, "judged": judged,
                    "breach": bool(crossed), "reason": crossed or reason,
                    "state": step.state, "episode_start": step.episode_start,
                    "severity": spec.severity,
                    "explanation": explanation,
                    "notification_key": key, "notified_at": None,
                    "evaluated_at": evaluated_at, "run_id": config.run_id,
                })  # fmt: skip
                state, episode = step.state, step.episode_start


def notice_key(
    monitor: Monitor, workspace_id: str, series: str, episode: date | None, transition: str
) -> str:
    """The idempotency key of an episode's alert or resolve notice: the same for the same
    monitor version, series and episode however often it is built."""
    subject = "\x1f".join((monitor.name, monitor.version, workspace_id, series, str(episode)))
    kind = "monitor.alerting" if transition == "alert" else "monitor.resolved"
    return notification_key("monitor", subject, kind)


def _explain(
    con: duckdb.DuckDBPyConnection,
    monitor: Monitor,
    cube: Cube,
    workspace_id: str,
    series: str,
    window: tuple[date, date],
    baseline: Sequence[tuple[date, date]],
    labels: Mapping[str, Mapping[str, str]],
    config: EvaluationConfig,
    rising: bool,
) -> dict[str, Any]:
    """The alert's explanation: the breakdown, the slice that moved, examples and links."""
    spec, metric = monitor.spec, monitor.metric
    if not baseline and spec.condition == "threshold":  # explain against the usual weeks
        baseline = [window_of_back(window, i) for i in range(1, 5)]
    split = breakdown(cube, metric, window, baseline, labels)
    dims = ("channel", "locale", "source", "intent", "topic")
    where = {dim: list(getattr(spec.filters, dim)) for dim in dims if getattr(spec.filters, dim)}
    if spec.group_by:
        where[spec.group_by] = [series]
    moved = focus(split, where)
    narrowed = {**where, **{dim: [value] for dim, value in moved.items()}}
    found = examples(con, metric, workspace_id, window, monitor.timezone, narrowed, rising)
    return {
        "breakdown": split,
        "slice": moved,
        "examples": found,
        "links": links(config.dashboard_url, workspace_id, window, monitor.timezone, narrowed,
                       metric, [e["conversation_id"] for e in found]),
    }  # fmt: skip


def window_of_back(window: tuple[date, date], weeks: int) -> tuple[date, date]:
    delta = timedelta(days=7 * weeks)
    return window[0] - delta, window[1] - delta


def store_rows(con: duckdb.DuckDBPyConnection, rows: Sequence[Mapping[str, Any]]) -> int:
    """Write judged rows (one transaction; a row already there for its key is kept)."""
    if not rows:
        return 0
    frame = pl.DataFrame(
        [{**r, "explanation": None if r["explanation"] is None
          else orjson.dumps(r["explanation"]).decode()} for r in rows],
        schema_overrides={"value": pl.Float64, "baseline": pl.Float64, "lower_bound": pl.Float64,
                          "upper_bound": pl.Float64, "explanation": pl.String, "reason": pl.String,
                          "notification_key": pl.String, "run_id": pl.String,
                          "notified_at": pl.Datetime("us", "UTC"),
                          "episode_start": pl.Date},
    ).select(_COLUMNS)  # fmt: skip
    with transaction(con):
        con.register("_judged", frame)
        try:
            con.execute(
                f"INSERT INTO monitor_evaluations SELECT {', '.join(_COLUMNS)} FROM _judged j "
                "WHERE NOT EXISTS (SELECT 1 FROM monitor_evaluations m WHERE m.monitor = "
                "j.monitor AND m.definition_version = j.definition_version AND m.workspace_id "
                "= j.workspace_id AND m.series = j.series AND m.window_start = j.window_start)"
            )
        finally:
            con.unregister("_judged")
    return len(rows)
