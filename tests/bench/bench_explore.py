"""Benchmark of the analyst's pages on 1,000,000 conversations: Explore and Conversations.

"Explore query round trip on 1,000,000 conversations, and Conversations
search, each under 1 s." It reuses the transform benchmark's synthetic
warehouse (10,000,000 messages with text; built and transformed here when
missing), publishes a snapshot of it, and in a child process times:

* an Explore cell's round trip (``notebooks.Executor.run`` with the default
  limits: the request to a warm query process, its database of the snapshot's
  views, the statement check, the query, the rows back as Arrow IPC into
  polars) for each starter notebook's SQL cells (a cell that reads an earlier
  one as the statement it runs as, ``notebooks.compose``) and an aggregate over
  every message; the anchor is the same SQL on a plain read-only DuckDB connection
  held open (DuckDB alone);
* the Explore page rendered by AppTest with a starter notebook (cold caches);
* Conversations: a search of words said, of an end user id and of a
  conversation id over the default 30 days, and the 20th page of a slice
  (``dashboard._conversations.conversation_page``).

Each figure is the median of several runs after one warm-up.
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
#: An Explore cell over every message (10,000,000 rows).
MESSAGES_SQL = (
    "SELECT role, model_tier, count(*) AS messages, avg(latency_ms) AS avg_latency_ms "
    "FROM messages GROUP BY ALL ORDER BY messages DESC"
)


def _median(fn: object, repeats: int = REPEATS) -> float:
    assert callable(fn)
    fn()  # warm-up: the file's pages in the OS cache, as for a reader of a kept snapshot
    runs = []
    for _ in range(repeats):
        started = time.perf_counter()
        fn()
        runs.append(time.perf_counter() - started)
    return statistics.median(runs)


def child_measure(db: str, published: str, repeats: str = str(REPEATS)) -> None:
    import os

    import duckdb
    import streamlit as st
    from streamlit.testing.v1 import AppTest
    from transform_data import publish_transformed

    from convo_analytics.dashboard._conversations import conversation_page
    from convo_analytics.dashboard._explore import page_params, param_default
    from convo_analytics.dashboard._notebooks import STARTERS_DIR, load_notebook
    from convo_analytics.dashboard._queries import Filters, data_range
    from convo_analytics.dashboard._views import Slice
    from convo_analytics.notebooks import Executor, compose
    from convo_analytics.notebooks._guard import parameter_names
    from convo_analytics.publish import current_snapshot

    publish_transformed(db, published)
    snap = current_snapshot(Path(published))
    assert snap is not None
    plain = duckdb.connect(str(snap.path), read_only=True)
    cells: dict[str, tuple[str, dict[str, Any], tuple[str, ...]]] = {}
    whole = data_range(plain)
    assert whole is not None
    every_channel = [r[0] for r in plain.execute(
        "SELECT DISTINCT channel FROM mart_conversations ORDER BY 1").fetchall()]  # fmt: skip
    for path in sorted(STARTERS_DIR.glob("*.sql")):
        notebook = load_notebook(Path("/nonexistent"), path.stem)
        assert notebook is not None
        # the page's values with the sidebar on the whole data and every channel
        specs = page_params(notebook.params, [c.sql for c in notebook.cells if c.kind == "sql"])
        values = {s.name: param_default(s, Filters(whole[0], whole[1])) for s in specs}
        values.update({"channel": every_channel} if "channel" in values else {})
        for at, cell in enumerate(notebook.cells):
            if cell.kind != "sql":  # a markdown cell: prose, nothing to run
                continue
            composed = compose(notebook.cells, at)  # earlier cells it reads, as CTEs
            assert composed.error is None, composed.error
            cells[f"{path.stem}: {cell.title}"] = (composed.sql, values, composed.reads)
    cells["every message by role and tier"] = (MESSAGES_SQL, {}, ())
    explore: dict[str, dict[str, float]] = {}
    executor = Executor()
    run_query = executor.run
    times = int(repeats)

    def alone(sql: str, values: dict[str, Any]) -> Any:
        bound = {name: values[name] for name in parameter_names(plain, sql)}
        return plain.execute(sql, bound).to_arrow_table()

    for label, (sql, values, reads) in cells.items():
        result = run_query(snap.path, sql, timeout=60, params=values, cells=reads, reads=reads)
        if result.error:
            raise RuntimeError(f"{label}: {result.error}")
        explore[label] = {
            "round_trip": _median(
                lambda sql=sql, values=values, reads=reads: run_query(
                    snap.path, sql, timeout=60, params=values, cells=reads, reads=reads
                ),
                times,
            ),
            "duckdb_alone": _median(lambda sql=sql, values=values: alone(sql, values), times),
            "rows": float(result.frame.height if result.frame is not None else 0),
        }
    executor.close()
    span = data_range(plain)
    assert span is not None
    f = Filters(span[1] - timedelta(days=29), span[1])
    word = "refund"
    someone = plain.execute(
        "SELECT external_user_id FROM mart_conversations ORDER BY started_at DESC LIMIT 1"
    ).fetchall()[0][0]
    searches = {
        f"search words said ({word!r})": Slice(search=word),
        f"search an end user id ({someone})": Slice(search=str(someone)),
        "search a conversation id ('c99999')": Slice(search="c99999"),
    }
    conversations: dict[str, dict[str, float]] = {}
    for label, s in searches.items():
        page = conversation_page(plain.cursor(), f, s, 1, 100)
        conversations[label] = {
            "seconds": _median(lambda s=s: conversation_page(plain.cursor(), f, s, 1, 100), times),
            "total": float(page.total),
        }
    twentieth = conversation_page(plain.cursor(), f, Slice(), 20, 100)
    conversations["page 20 of the range (100 per page)"] = {
        "seconds": _median(lambda: conversation_page(plain.cursor(), f, Slice(), 20, 100), times),
        "total": float(twentieth.total),
    }
    os.environ["CONVO_PUBLISHED_DIR"] = published
    at = AppTest.from_file(str(ROOT / "dashboards" / "streamlit_app.py"), default_timeout=120)
    at.query_params["notebook"] = "escalations_by_reason_and_channel"
    at.run()
    at.switch_page("app_pages/explore.py")
    st.cache_data.clear()
    started = time.perf_counter()
    at.run()
    page_cold = time.perf_counter() - started
    if at.exception or at.error:
        raise RuntimeError(f"explore page: {at.exception or [e.value for e in at.error]}")
    started = time.perf_counter()
    at.run()
    page_warm = time.perf_counter() - started
    emit({"explore": explore, "conversations": conversations, "page_cold": page_cold,
          "page_warm": page_warm, "memory": memory_mib()})  # fmt: skip


def bench_explore(ctx: BenchContext, report: Report) -> None:
    """Explore round trips and Conversations search on 1,000,000 conversations."""
    from transform_data import MESSAGES_PER_CONVERSATION, synthetic_warehouse

    db, conversations = synthetic_warehouse(ctx, report)
    folder = db.parent
    report.sizes.update({"conversations": conversations,
                         "messages": conversations * MESSAGES_PER_CONVERSATION})  # fmt: skip
    published = folder / f"published-explore-{conversations}"
    repeats = ctx.size(REPEATS, REPEATS, 1)  # smoke: each call once after its warm-up
    with python_child(THIS, ["measure", str(db), str(published), str(repeats)],
                      cwd=ROOT) as child:  # fmt: skip
        out = child.json_line("explore", timeout=1800)
    for label, got in out["explore"].items():
        seconds = got["round_trip"]
        report.add(f"Explore round trip, {label} ({got['rows']:,.0f} rows)", round(seconds, 3),
                   "s", f"< {AIM_SECONDS:g}", seconds < AIM_SECONDS)  # fmt: skip
        report.add("... the same SQL, DuckDB alone", round(got["duckdb_alone"], 3), "s")
    for label, got in out["conversations"].items():
        seconds = got["seconds"]
        report.add(f"Conversations {label} ({got['total']:,.0f} found)", round(seconds, 3), "s",
                   f"< {AIM_SECONDS:g}", seconds < AIM_SECONDS)  # fmt: skip
    report.add("Explore page (3 starter cells), first render after a publish",
               round(out["page_cold"], 2), "s")  # fmt: skip
    report.add("Explore page, warm rerender", round(out["page_warm"], 2), "s")
    report.add("peak memory", round(out["memory"].get("peak_rss_mib", float("nan"))), "MiB")


BENCHES = [("explore", bench_explore)]


if __name__ == "__main__":
    role, *rest = sys.argv[1:] or ["help"]
    if role == "measure":
        child_measure(*rest)
    else:
        raise SystemExit("usage: bench_explore.py measure DB PUBLISHED_DIR [REPEATS]")
