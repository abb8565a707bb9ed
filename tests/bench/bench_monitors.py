"""Benchmark of the monitors (issue 28): do they find an incident, and only it, and how fast.

For each seed, a sandbox workspace's 60-day history with an injected incident (on one
weekday, every web conversation about support is escalated) is extracted over HTTP and
transformed; then an escalation-rate monitor judges every day:

* quality, at two volumes (~200 and ~600 conversations a day): whether it fires on the
  incident day, how many alarms it raises on the 59
  quiet days (the false-alarm count the issue asks to print), and the share of the
  change its breakdown gives the incident's channel and intent; beside it, the anchor
  measured on the same histories: the other baseline the issue names, a trailing mean
  ± 3 standard deviations of the last 14 days (``baseline = "trailing"``), and the same
  weekday's plain mean ± 3 sd of 4 weeks without the chance term (what a spreadsheet
  rule does);
* speed: judging 60 days of one monitor, and of ten monitors over the catalogue,
  beside one ``metrics_table`` over the same range (what the dashboard's Overview pays).
"""

from __future__ import annotations

import statistics
import sys
import time
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

from _common import DATA_DIR, BenchContext, Report

THIS = Path(__file__).resolve()
ROOT = THIS.parents[2]
sys.path.insert(0, str(ROOT / "tests"))

METRICS = ("escalationRate", "resolutionRate", "containmentRate", "csat", "conversations",
           "escalatedConversations", "lowConfidenceShare", "latencyP95Ms",
           "guardrailTriggersPer1000Responses", "abandonmentRate")  # fmt: skip
KEY = "sk_bench_monitors_0123456789"


def _history(folder: Path, seed: int, conversations: int, now: datetime) -> tuple[Path, date]:
    """A transformed warehouse of one workspace's 60 days with an incident, and its day."""
    from convo_analytics._serving import ServerThread
    from convo_analytics.sandbox import Incident, Sandbox, SandboxSettings, create_app
    from convo_analytics.topics import TopicConfig
    from convo_analytics.transform import TransformConfig, run_transform
    from convo_analytics.warehouse import open_warehouse
    from extract_support import extract

    day = now.date() - timedelta(days=4)
    while day.weekday() >= 5:
        day -= timedelta(days=1)
    day_ms = int(datetime(day.year, day.month, day.day, tzinfo=UTC).timestamp()) * 1000
    settings = SandboxSettings(
        seed=seed, conversations=conversations, days=60, until_ms=int(now.timestamp() * 1000),
        rate_limit="none", workspaces=[("acme", KEY)],
        incidents=(Incident(day_ms, "web", "support"),),
    )  # fmt: skip
    db = folder / f"monitors-{seed}-{conversations}.duckdb"
    db.unlink(missing_ok=True)
    with ServerThread(create_app(Sandbox(settings))) as server:
        result = extract(server.url, KEY, db)
        if not result.ok:
            raise RuntimeError(f"extract failed: {result.to_json()}")
    con = open_warehouse(db)
    try:
        run_transform(con, TransformConfig(timezones=("UTC",), topics=TopicConfig(enabled=False)))
    finally:
        con.close()
    return db, day


def _judge(db: Path, specs: list[Any], now: datetime) -> tuple[list[dict[str, Any]], float]:
    from convo_analytics.monitors import EvaluationConfig, Monitor, evaluate
    from convo_analytics.warehouse import open_warehouse

    con = open_warehouse(db, read_only=True)
    try:
        monitors = [Monitor.of(s, "config", "UTC") for s in specs]
        started = time.perf_counter()
        result = evaluate(con, monitors, EvaluationConfig(lookback_days=60), now=now)
        return result.rows, time.perf_counter() - started
    finally:
        con.close()


def _plain_rule(db: Path, day: date, now: datetime) -> tuple[bool, int]:
    """The spreadsheet rule: the same weekday's mean ± 3 sd of 4 weeks, nothing else."""
    from convo_analytics.transform import load_cube, metrics_table
    from convo_analytics.warehouse import open_warehouse

    con = open_warehouse(db, read_only=True)
    try:
        first, last = now.date() - timedelta(days=90), now.date() - timedelta(days=1)
        table = metrics_table(load_cube(con, "UTC", first=first, last=last), first, last)
    finally:
        con.close()
    rows = {r["date"]: r for r in table.iter_rows(named=True)}
    fired, false = False, 0
    for d, row in rows.items():
        base = [rows.get(d - timedelta(days=7 * i)) for i in range(1, 5)]
        values = [b["escalationRate"] for b in base if b and b["conversations"] >= 30]
        if len(values) < 2 or row["conversations"] < 30 or row["escalationRate"] is None:
            continue
        mean, sd = statistics.fmean(values), statistics.stdev(values)
        if abs(row["escalationRate"] - mean) > 3 * sd:
            fired |= d == day
            false += d != day
    return fired, false


def _quality(rows: list[dict[str, Any]], day: date) -> tuple[bool, int, int, float, float]:
    """Fired on the day, false alarms, judged quiet days, web's and support's shares."""
    import orjson

    fired = any(r["breach"] and r["window_start"] == day for r in rows)
    quiet = [r for r in rows if r["judged"] and r["window_start"] != day]
    alert = next((r for r in rows if r["window_start"] == day and r["explanation"]), None)
    web = support = float("nan")
    if alert is not None:
        split = alert["explanation"]
        split = orjson.loads(split) if isinstance(split, str) else split
        shares = {
            dim: {s["value"]: s["share"] for s in split["breakdown"].get(dim, {}).get("slices", [])}
            for dim in ("channel", "intent")
        }
        web, support = shares["channel"].get("web", 0.0), shares["intent"].get("support", 0.0)
    return fired, sum(r["breach"] for r in quiet), len(quiet), web, support


def _volume(
    report: Report, conversations: int, seeds: list[int], now: datetime
) -> list[tuple[float, float, float]]:
    """One volume's histories: quality figures reported, timings returned."""
    from convo_analytics.config import MonitorSpec
    from convo_analytics.transform import load_cube, metrics_table
    from convo_analytics.warehouse import open_warehouse

    ours = MonitorSpec(name="escalations", metric="escalationRate")
    trailing = MonitorSpec(name="trailing", metric="escalationRate", baseline="trailing")
    found: dict[str, list[tuple[bool, int, int, float, float]]] = {"ours": [], "trailing": []}
    plain: list[tuple[bool, int]] = []
    timings: list[tuple[float, float, float]] = []
    for seed in seeds:
        db, day = _history(DATA_DIR, seed, conversations, now)
        rows, one = _judge(db, [ours], now)
        found["ours"].append(_quality(rows, day))
        found["trailing"].append(_quality(_judge(db, [trailing], now)[0], day))
        plain.append(_plain_rule(db, day, now))
        specs = [MonitorSpec(name=f"m{i}", metric=m) for i, m in enumerate(METRICS)]
        _, ten = _judge(db, specs, now)
        con = open_warehouse(db, read_only=True)
        try:
            first, last = now.date() - timedelta(days=90), now.date()
            started = time.perf_counter()
            metrics_table(load_cube(con, "UTC", first=first, last=last), first, last)
            anchor = time.perf_counter() - started
        finally:
            con.close()
        timings.append((one, ten, anchor))
    per_day = f"~{conversations // 60:,}/day"
    for name, label in (("ours", "same weekday, 4 weeks, k = 3 (the default)"),
                        ("trailing", "anchor: trailing 14 days, k = 3")):  # fmt: skip
        got = found[name]
        fired, false, quiet = sum(g[0] for g in got), sum(g[1] for g in got), sum(g[2] for g in got)
        aimed = name == "ours"
        report.add(f"{per_day}, {label}: incident found", f"{fired} of {len(got)}", "",
                   "all" if aimed else "", fired == len(got) if aimed else None)  # fmt: skip
        report.add(f"{per_day}, {label}: false alarms on quiet days", f"{false} in {quiet}",
                   "", "0" if aimed else "", false == 0 if aimed else None)  # fmt: skip
        if aimed and (webs := [g[3] for g in got if g[0]]):
            supports = [g[4] for g in got if g[0]]
            report.add(f"{per_day}, share of the change given to web (min)",
                       round(min(webs), 3), "", ">= 0.7", min(webs) >= 0.7)  # fmt: skip
            report.add(f"{per_day}, share of the change given to support (min)",
                       round(min(supports), 3), "", ">= 0.7", min(supports) >= 0.7)  # fmt: skip
    report.add(f"{per_day}, anchor: plain same-weekday mean ± 3 sd: incident found",
               f"{sum(p[0] for p in plain)} of {len(plain)}")  # fmt: skip
    report.add(f"{per_day}, anchor: plain same-weekday mean ± 3 sd: false alarms",
               f"{sum(p[1] for p in plain)}")  # fmt: skip
    return timings


def bench_monitors(ctx: BenchContext, report: Report) -> None:
    """Incident found, false alarms on quiet days, and evaluation speed (issue 28)."""
    volumes = ctx.size(
        [(12_000, [1, 2, 3, 4, 5]), (36_000, [1, 2, 3])], [(12_000, [1, 2])], [(1_500, [1])]
    )
    now = datetime(2026, 11, 18, 14, 0, tzinfo=UTC)
    DATA_DIR.mkdir(parents=True, exist_ok=True)
    timings: list[tuple[float, float, float]] = []
    for conversations, seeds in volumes:
        timings += _volume(report, conversations, seeds, now)
    report.sizes.update({"histories": sum(len(s) for _, s in volumes), "days": 60,
                         "conversations per history": "/".join(
                             f"{c:,}" for c, _ in volumes)})  # fmt: skip
    one = statistics.median(t[0] for t in timings)
    ten = statistics.median(t[1] for t in timings)
    anchor = statistics.median(t[2] for t in timings)
    report.add("judge 60 days of one monitor (median over histories)", round(one, 3), "s")
    report.add(f"judge 60 days of {len(METRICS)} monitors", round(ten, 3), "s")
    report.add("... anchor: one metrics_table over the same 90 days", round(anchor, 3), "s")


BENCHES = [("monitors", bench_monitors)]
