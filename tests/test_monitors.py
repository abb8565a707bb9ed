"""Monitors' rules on their own: bounds, windows, the episode state machine, the store.

The end-to-end checks over the sandbox (an injected incident found once, explained,
delivered, resolved; no false alarm on quiet days) are in test_monitors_incident.py.
"""

from __future__ import annotations

import math
import statistics
from datetime import date, timedelta
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from convo_analytics.config import MonitorSpec, monitor_problems
from convo_analytics.errors import UserError
from convo_analytics.monitors import (
    CATALOGUE,
    Monitor,
    advance,
    baseline_windows,
    bounds,
    delete_monitor,
    monitors_of,
    read_stored,
    save_monitor,
)
from convo_analytics.monitors._judge import Figures, window_of, windows_to_judge

ESCALATION = CATALOGUE["escalationRate"]


def test_baseline_bounds_are_a_prediction_interval_from_the_baseline_windows() -> None:
    spec = MonitorSpec(name="m", metric="escalationRate")
    history = [Figures(v, 200, 200.0) for v in (0.10, 0.12, 0.11, 0.13)]
    now = Figures(0.2, 250, 250.0)
    found = bounds(spec, ESCALATION, now, history)
    values = [0.10, 0.12, 0.11, 0.13]
    b, s2 = statistics.fmean(values), statistics.variance(values)
    v, v_before = b * (1 - b) / 250, b * (1 - b) / 200
    width = 3 * math.sqrt(v + max(s2 - v_before, 0) + s2 / 4)
    assert found.baseline == pytest.approx(b)
    assert found.lower == pytest.approx(b - width) and found.upper == pytest.approx(b + width)
    assert found.used == 4 and found.judgeable


def test_windows_under_the_minimum_sample_are_not_a_baseline() -> None:
    spec = MonitorSpec(name="m", metric="escalationRate", min_sample=100)
    history = [Figures(0.1, 200, 200.0), Figures(0.9, 20, 20.0), Figures(None, 300, 0.0),
               Figures(0.12, 150, 150.0)]  # fmt: skip
    found = bounds(spec, ESCALATION, Figures(0.1, 200, 200.0), history)
    assert found.used == 2 and found.baseline == pytest.approx(0.11)
    only_one = bounds(spec, ESCALATION, Figures(0.1, 200, 200.0), history[:3])
    assert not only_one.judgeable and "1 of 4 windows" in only_one.reason


def test_direction_threshold_and_a_baseline_of_zeros() -> None:
    up = MonitorSpec(name="m", metric="escalationRate", direction="up")
    history = [Figures(0.1, 100, 100.0)] * 4
    found = bounds(up, ESCALATION, Figures(0.1, 100, 100.0), history)
    assert found.lower is None and found.upper is not None
    threshold = MonitorSpec(name="t", metric="csat", condition="threshold", below=0.6)
    found = bounds(threshold, CATALOGUE["csat"], Figures(0.5, 40, 40.0), [])
    assert (found.baseline, found.lower, found.upper) == (None, 0.6, None)
    # a count with a baseline of zeros: chance is at least one event, so one event is no alarm
    zeros = MonitorSpec(name="z", metric="escalations", direction="up")
    found = bounds(zeros, CATALOGUE["escalations"], Figures(1.0, 50, 50.0),
                   [Figures(0.0, 50, 50.0)] * 4)  # fmt: skip
    assert found.upper == pytest.approx(3.0)


def test_a_percentile_takes_its_chance_variance_from_its_histogram() -> None:
    spec = MonitorSpec(name="p", metric="latencyP95Ms")
    metric = CATALOGUE["latencyP95Ms"]
    history = [Figures(v, 100, 500.0, variance=400.0) for v in (1000.0, 1010.0, 990.0, 1000.0)]
    wide = bounds(spec, metric, Figures(1100.0, 100, 500.0, variance=400.0), history)
    narrow = bounds(spec, metric, Figures(1100.0, 100, 500.0, variance=1.0), history)
    assert wide.upper is not None and narrow.upper is not None and wide.upper > narrow.upper


def test_windows_and_baselines() -> None:
    wednesday = date(2026, 11, 18)
    assert window_of(wednesday, "week") == (date(2026, 11, 16), date(2026, 11, 22))
    spec = MonitorSpec(name="m", metric="conversations")
    assert baseline_windows(wednesday, spec)[0] == (date(2026, 11, 11), date(2026, 11, 11))
    assert len(baseline_windows(wednesday, spec)) == 4
    trailing = MonitorSpec(name="m", metric="conversations", baseline="trailing", windows=3)
    assert baseline_windows(wednesday, trailing) == [
        (wednesday - timedelta(days=i), wednesday - timedelta(days=i)) for i in (1, 2, 3)
    ]
    today = date(2026, 11, 26)
    days = windows_to_judge(date(2026, 1, 1), None, today, "day", 10)
    assert days[0][0] == today - timedelta(days=10) and days[-1][0] == today - timedelta(days=1)
    after = windows_to_judge(date(2026, 1, 1), today - timedelta(days=3), today, "day", 10)
    assert [w[0] for w in after] == [today - timedelta(days=2), today - timedelta(days=1)]
    weeks = windows_to_judge(date(2026, 1, 1), None, today, "week", 21)
    assert all(w[0].weekday() == 0 and (w[1] - w[0]).days == 6 for w in weeks)
    assert weeks[-1][1] < today  # only complete weeks
    assert windows_to_judge(today - timedelta(days=2), None, today, "day", 10)[0][0] == (
        today - timedelta(days=2)
    )  # not before the series' data


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.booleans(), st.booleans()), max_size=40))
def test_each_episode_alerts_once_and_resolves_once(verdicts: list[tuple[bool, bool]]) -> None:
    state, episode = None, None
    alerts = resolves = 0
    start = date(2026, 1, 1)
    for i, (judged, breach) in enumerate(verdicts):
        step = advance(state, episode, judged, breach, start + timedelta(days=i))
        if not judged:  # a window not judged changes nothing
            assert step.transition is None
            assert (step.state == "alerting") == (state == "alerting")
        alerts += step.transition == "alert"
        resolves += step.transition == "resolve"
        if step.transition == "alert":
            assert state != "alerting" and step.episode_start == start + timedelta(days=i)
        if step.transition == "resolve":
            assert state == "alerting" and step.episode_start == episode
        state, episode = step.state, step.episode_start
    # every resolve closes one alert; at most one episode is open at the end
    assert alerts - resolves == (1 if state == "alerting" else 0)


def test_a_definition_version_follows_what_judges_only() -> None:
    base = MonitorSpec(name="m", metric="escalationRate")
    v = Monitor.of(base, "config", "UTC").version
    assert Monitor.of(base.model_copy(update={"description": "x", "enabled": False}),
                      "config", "UTC").version == v  # fmt: skip
    assert Monitor.of(base.model_copy(update={"k": 2.5}), "config", "UTC").version != v
    assert Monitor.of(base, "config", "Europe/Berlin").version != v


def test_table_problems_are_one_line_each() -> None:
    specs, problems = monitor_problems([
        {"name": "ok", "metric": "csat"},
        {"name": "bad name!", "metric": "csat"},
        {"name": "t", "metric": "csat", "condition": "threshold"},
        {"name": "ok", "metric": "csat", "surprise": 1},
    ])  # fmt: skip
    assert [s.name for s in specs] == ["ok"]
    assert any("#2 name" in p and "not a monitor name" in p for p in problems)
    assert any("#3" in p and "needs above" in p for p in problems)
    assert any("#4 surprise" in p for p in problems)


def test_the_store_keeps_the_last_line_of_a_name_and_survives_a_cut_line(tmp_path: Path) -> None:
    path = tmp_path / "monitors.jsonl"
    save_monitor(path, MonitorSpec(name="a", metric="csat"))
    save_monitor(path, MonitorSpec(name="b", metric="escalationRate"))
    save_monitor(path, MonitorSpec(name="a", metric="csat", k=2.0))
    with path.open("ab") as f:
        f.write(b'{"op": "save", "name": "c", "monitor": {"na')  # a kill mid-line
    assert [(s.name, s.k) for s in read_stored(path)] == [("b", 3.0), ("a", 2.0)]
    save_monitor(path, MonitorSpec(name="d", metric="csat"))  # starts a fresh line
    assert [s.name for s in read_stored(path)] == ["b", "a", "d"]
    assert delete_monitor(path, "b") and not delete_monitor(path, "b")
    assert [s.name for s in read_stored(path)] == ["a", "d"]


def test_a_stored_monitor_cannot_take_a_configured_name() -> None:
    spec = MonitorSpec(name="esc", metric="escalationRate")
    with pytest.raises(UserError, match="both in"):
        monitors_of([spec], [spec], "UTC")
    with pytest.raises(UserError, match="did you mean"):
        monitors_of([MonitorSpec(name="x", metric="escalationrate")], [], "UTC")


def test_a_series_that_varies_more_than_chance_gets_wider_bounds() -> None:
    from convo_analytics.monitors._judge import dispersion, residual

    spec = MonitorSpec(name="m", metric="escalationRate")
    history = [Figures(v, 200, 200.0) for v in (0.10, 0.12, 0.11, 0.13)]
    now = Figures(0.2, 250, 250.0)
    calm = bounds(spec, ESCALATION, now, history, phi=1.0)
    wild = bounds(spec, ESCALATION, now, history, phi=4.0)
    assert calm.upper is not None and wild.upper is not None
    assert wild.upper - wild.baseline == pytest.approx(2 * (calm.upper - calm.baseline))
    # the residual of a window that is its baseline's mean is 0; one far off is large
    assert residual(spec, ESCALATION, Figures(0.115, 200, 200.0), history) == 0.0
    far = residual(spec, ESCALATION, Figures(0.3, 200, 200.0), history)
    assert far is not None and far > 9
    assert residual(spec, ESCALATION, Figures(0.3, 10, 10.0), history) is None  # not judged
    # a median of squared normals' median is a dispersion of 1; never below 1
    assert dispersion([0.454936] * 7) == pytest.approx(1.0)
    assert dispersion([0.0] * 7) == 1.0 and dispersion([4.0] * 6) is None
    assert dispersion([4 * 0.454936] * 9) == pytest.approx(4.0)


def test_a_same_weekday_centre_is_pooled_by_how_much_weekdays_really_differ() -> None:
    from convo_analytics.monitors._judge import _pooled

    spec = MonitorSpec(name="m", metric="conversations")
    # 28 days: weekdays differ a lot (a weekly rhythm) -> the own weekday's mean is kept
    rhythm = [(d % 7, Figures(100.0 + 200.0 * (d % 7 == 0) + (d % 3), 300, 300.0))
              for d in range(28)]  # fmt: skip
    own = [300.0, 301.0, 302.0, 300.0]
    centre, variance = _pooled(spec, own, rhythm) or (0.0, 0.0)
    assert centre == pytest.approx(statistics.fmean(own), abs=0.5) and variance > 0
    # no weekly rhythm: the four high values are shrunk to the 28 days' level
    flat = [(d % 7, Figures(0.15 + 0.01 * ((d * 5) % 3 - 1), 300, 300.0)) for d in range(28)]
    centre, _ = _pooled(spec, [0.17, 0.18, 0.16, 0.17], flat) or (0.0, 0.0)
    level = statistics.fmean(f.value for _, f in flat if f.value is not None)
    assert abs(centre - level) < 0.01 < abs(0.17 - level)
    assert _pooled(spec, own, rhythm[:8]) is None  # too few days to pool
