"""Benchmark of the Topics page on 1,000,000 conversations (issue 27).

"the Topics page under 1 s at 1,000,000 conversations (data built with DuckDB, as the
other page benchmarks do)". It reuses the readers' synthetic warehouse (built by DuckDB
SQL straight into the source tables: transform_data.py), transforms it when its marts
do not hold topics yet (each workspace's topics discovered by the transform, as a
nightly run does), publishes a snapshot and, in a child process, times:

* the page's query (``dashboard._topics.topic_report``: every topic's figures, the
  previous period and the trend, curations applied) for the default range (the last
  30 days) and the whole year, median of several runs after one warm-up;
* beside it, the anchor measured in the same run on the same snapshot and ranges: the
  Overview's query (``kpis`` and ``daily``: the same cube read, for the whole workspace),
  what every page already pays;
* the Topics page rendered by AppTest (first render after a publish, cache cleared, and
  warm), beside the Overview page rendered the same way.
"""

from __future__ import annotations

import statistics
import sys
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

from _common import BenchContext, Report, emit, memory_mib, python_child

THIS = Path(__file__).resolve()
ROOT = THIS.parents[2]
AIM_SECONDS = 1.0
REPEATS = 5


def _median(fn: Any, repeats: int = REPEATS) -> float:
    fn()  # warm-up: the snapshot's pages in the OS cache, as for a reader of a kept snapshot
    runs = []
    for _ in range(repeats):
        started = time.perf_counter()
        fn()
        runs.append(time.perf_counter() - started)
    return statistics.median(runs)


def _with_topics(db: str) -> None:
    """Transform the warehouse when its marts have no topics yet (a warehouse kept from a
    release before topics): the definition changed, so the transform rebuilds them."""
    from convo_analytics.transform import TransformConfig, run_transform
    from convo_analytics.warehouse import open_warehouse

    con = open_warehouse(Path(db))
    try:
        if not con.execute("SELECT count(*) FROM mart_topics").fetchall()[0][0]:
            run_transform(con, TransformConfig(reconcile=False))
    finally:
        con.close()


def _render(page: str, published: str, warm_runs: int = 3) -> tuple[float, float]:
    """Seconds to render ``page`` by AppTest: the first time after a publish (empty
    caches), and warm (median of ``warm_runs``)."""
    import os

    import streamlit as st
    from streamlit.testing.v1 import AppTest

    os.environ["CONVO_PUBLISHED_DIR"] = published
    at = AppTest.from_file(str(ROOT / "dashboards" / "streamlit_app.py"), default_timeout=120)
    at.run()
    if page != "overview":
        at.switch_page(f"app_pages/{page}.py")
    st.cache_data.clear()
    started = time.perf_counter()
    at.run()
    cold = time.perf_counter() - started
    if at.exception or at.error:
        raise RuntimeError(f"{page}: {at.exception or [e.value for e in at.error]}")
    if page == "topics" and not at.dataframe:
        raise RuntimeError(f"the Topics page shows no topics: {[i.value for i in at.info]}")
    warm = []
    for _ in range(warm_runs):
        started = time.perf_counter()
        at.run()
        warm.append(time.perf_counter() - started)
    return cold, statistics.median(warm)


def child_measure(db: str, published: str, store: str, repeats: str = str(REPEATS)) -> None:
    import os

    from transform_data import publish_transformed

    from convo_analytics.dashboard._compare import kpis
    from convo_analytics.dashboard._queries import Filters, daily, data_range
    from convo_analytics.dashboard._topics import topic_report
    from convo_analytics.publish import connect_snapshot, current_snapshot

    os.environ["CONVO_TOPICS_CURATIONS_FILE"] = store  # none yet: the marts' names
    _with_topics(db)
    publish_transformed(db, published)
    snap = current_snapshot(Path(published))
    assert snap is not None
    con = connect_snapshot(snap.path).cursor()  # as the dashboard opens it
    con.execute("SET TimeZone = 'UTC'")
    span = data_range(con)
    assert span is not None
    ranges = {
        "last 30 days": Filters(span[1] - timedelta(days=29), span[1]),
        "whole year": Filters(span[0], span[1]),
    }
    queries: dict[str, dict[str, float]] = {}
    for label, f in ranges.items():
        report = topic_report(con, f)
        queries[label] = {
            "topics": _median(lambda f=f: topic_report(con, f), int(repeats)),
            "overview": _median(lambda f=f: (kpis(con, f), daily(con, f)), int(repeats)),
            "rows": float(report.table.height),
            "conversations": float(report.table["conversations"].sum()),
        }
    (topics,) = con.execute("SELECT count(*) FROM mart_topics").fetchall()[0]
    (slices,) = con.execute("SELECT count(*) FROM mart_slices").fetchall()[0]
    warm_runs = min(3, int(repeats))
    pages = {page: _render(page, published, warm_runs) for page in ("topics", "overview")}
    emit({"queries": queries, "pages": pages, "topics": topics, "slices": slices,
          "memory": memory_mib()})  # fmt: skip


def bench_topic_page(ctx: BenchContext, report: Report) -> None:
    """The Topics page's query and render on 1,000,000 conversations, beside the Overview's."""
    from transform_data import synthetic_warehouse

    db, conversations = synthetic_warehouse(ctx, report)
    folder = db.parent
    published = folder / f"published-topics-{conversations}"
    store = folder / "topic-page-curations.jsonl"
    repeats = ctx.size(REPEATS, REPEATS, 1)  # smoke: each query and render once when warm
    with python_child(THIS, ["measure", str(db), str(published), str(store), str(repeats)],
                      cwd=ROOT) as child:  # fmt: skip
        out = child.json_line("queries", timeout=3600)
    report.sizes.update({"conversations": conversations, "topics": out["topics"],
                         "slices": out["slices"]})  # fmt: skip
    for label, got in out["queries"].items():
        seconds = got["topics"]
        report.add(
            f"Topics query, {label} ({got['rows']:,.0f} rows, "
            f"{got['conversations']:,.0f} conversations)",
            round(seconds, 3), "s", f"< {AIM_SECONDS:g}", seconds < AIM_SECONDS,
        )  # fmt: skip
        report.add(f"... anchor: the Overview's query, {label}", round(got["overview"], 3), "s")
    cold, warm = out["pages"]["topics"]
    report.add("Topics page, first render after a publish", round(cold, 2), "s",
               f"< {AIM_SECONDS:g}", cold < AIM_SECONDS)  # fmt: skip
    report.add("Topics page, warm rerender", round(warm, 2), "s")
    anchor_cold, anchor_warm = out["pages"]["overview"]
    report.add("... anchor: Overview page, first render after a publish", round(anchor_cold, 2),
               "s")  # fmt: skip
    report.add("... anchor: Overview page, warm rerender", round(anchor_warm, 2), "s")
    report.add("peak memory", round(out["memory"].get("peak_rss_mib", float("nan"))), "MiB")


BENCHES = [("topic-page", bench_topic_page)]


if __name__ == "__main__":
    role, *rest = sys.argv[1:] or ["help"]
    if role == "measure":
        child_measure(*rest)
    else:
        raise SystemExit("usage: bench_topic_page.py measure DB PUBLISHED_DIR STORE [REPEATS]")
