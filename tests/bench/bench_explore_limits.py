"""Benchmark of Explore's limits (issue 24): hostile queries stopped on time, in bounded memory.

The reviewer's two queries are single DuckDB calls that no interrupt stops:
``list_sort`` over a 60-million-item list and ``regexp_replace`` over a 300 MB
string (the in-thread executor before this one ran each about 56 s, 8 GB
resident, with a 1 s time limit). Here they run through the notebooks
package's executor with the default limits (10 s, 1 GiB, 2 query processes),
in a child process standing in for the app, which times:

* each query alone, with the default time limit and with a 1 s one: how long
  until it was stopped, by which limit, and how long after the time limit;
* a query that only takes time (``sum(hash(range))`` over 10^11 rows): how long after
  the limit its process was killed;
* the next query's round trip right after a stop (a process was killed and
  its replacement may still be starting);
* both queries at once, one per query process: the peak resident memory of
  the app process and of each query process, against the limit times the processes
  + 300 MiB;
* anchors: a trivial query's round trip through a warm query process, the
  same on DuckDB in the app's own process, and a query process's start.
"""

from __future__ import annotations

import statistics
import sys
import threading
import time
from pathlib import Path

from _common import BenchContext, Report, emit, memory_mib, python_child

THIS = Path(__file__).resolve()
ROOT = THIS.parents[2]
SORT = "SELECT length(list_sort(list_reverse(range(60000000))))"
REGEXP = "SELECT regexp_replace(repeat('ab', 150000000), 'a', 'xyz', 'g')"
SLOW = "SELECT sum(hash(range)) FROM range(100000000000)"
QUERIES = {"list_sort of 60 M items": SORT, "regexp_replace over 300 MB": REGEXP}
#: A stop is on time when it comes within this many seconds of the time limit.
AIM_AFTER_LIMIT = 2.0
#: The app and its query processes stay under memory limit × processes + this (MiB).
AIM_APP_MIB = 300


def _median(fn: object, repeats: int) -> float:
    assert callable(fn)
    fn()
    runs = []
    for _ in range(repeats):
        started = time.perf_counter()
        fn()
        runs.append(time.perf_counter() - started)
    return statistics.median(runs)


def child_measure(folder: str, size: str = "") -> None:
    """``size``: "" (the figures), "quick" or "smoke" (a shorter time limit: it runs)."""
    import duckdb

    from convo_analytics.notebooks import Executor, Limits

    quick = size in ("quick", "smoke")
    repeats = 3 if quick else 20
    snapshot = Path(folder) / "warehouse-bench.duckdb"
    if not snapshot.exists():
        con = duckdb.connect(str(snapshot))
        con.execute("CREATE TABLE mart_conversations AS SELECT range AS n, 'ws_a' AS "
                    "workspace_id FROM range(1000)")  # fmt: skip
        con.close()
    limits = Limits()  # the defaults: dashboard.query_* settings
    # quick and smoke: not the figures; smoke (make test) stops each query at the 1 s limit
    # the full run also measures
    timeout = {"quick": 2.0, "smoke": 1.0}.get(size, 10.0)
    started = time.perf_counter()
    executor = Executor(limits)
    assert executor.wait_ready()
    pool_start = time.perf_counter() - started
    plain = duckdb.connect()
    out: dict[str, object] = {
        "limits": {
            "memory_mb": limits.memory_mb,
            "workers": limits.workers,
            "timeout": timeout,
        },
        "pool_start": pool_start,
        "trivial": _median(lambda: executor.run(snapshot, "SELECT 1"), repeats),
        "trivial_duckdb": _median(lambda: plain.sql("SELECT 1").fetchall(), repeats),
    }
    alone: dict[str, dict[str, object]] = {}
    for label, sql in {**QUERIES, "sum(hash(x)) over 10^11 rows": SLOW}.items():
        for limit in (timeout,) if quick else (timeout, 1.0):
            assert executor.wait_ready()
            result = executor.run(snapshot, sql, timeout=limit)
            next_started = time.perf_counter()
            answer = executor.run(snapshot, "SELECT 1")
            alone[f"{label}, {limit:g} s limit"] = {
                "seconds": result.seconds, "stopped": result.stopped, "limit": limit,
                "peak_mib": result.peak_mib, "line": result.error,
                "next_seconds": time.perf_counter() - next_started,
                "next_ok": answer.error is None,
            }  # fmt: skip
    out["alone"] = alone
    assert executor.wait_ready()
    results: dict[str, object] = {}

    def run(label: str, sql: str) -> None:
        results[label] = executor.run(snapshot, sql, timeout=timeout)

    threads = [threading.Thread(target=run, args=item) for item in QUERIES.items()]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    out["together"] = {
        label: {"stopped": r.stopped, "peak_mib": r.peak_mib}  # type: ignore[attr-defined]
        for label, r in results.items()
    }
    executor.close()
    out["app"] = memory_mib()
    emit({"explore_limits": out})


def bench_explore_limits(ctx: BenchContext, report: Report) -> None:
    """The two hostile queries under the default limits: stopped on time, memory bounded."""
    import tempfile

    with tempfile.TemporaryDirectory(prefix="bench-explore-limits-") as folder:
        args = ["measure", folder, ctx.size("", "quick", "smoke")]
        with python_child(THIS, args, cwd=ROOT) as child:
            out = child.json_line("explore_limits", timeout=600)["explore_limits"]
    limits = out["limits"]
    report.sizes.update({"memory_mb": limits["memory_mb"], "query_processes": limits["workers"],
                         "time_limit_s": limits["timeout"]})  # fmt: skip
    for label, got in out["alone"].items():
        seconds, limit = got["seconds"], got["limit"]
        stopped = got["stopped"] or "not stopped"
        after = max(0.0, seconds - limit)
        report.add(f"{label}: stopped by {stopped} after", round(seconds, 2), "s",
                   f"<= limit + {AIM_AFTER_LIMIT:g}", after <= AIM_AFTER_LIMIT and
                   got["stopped"] is not None)  # fmt: skip
        report.add("... its query process's peak resident memory",
                   round(got["peak_mib"] or float("nan")), "MiB",
                   f"<= {limits['memory_mb']} + 32",
                   (got["peak_mib"] or 0) <= limits["memory_mb"] + 32)  # fmt: skip
        report.add("... the next query's round trip", round(got["next_seconds"], 3), "s", "",
                   got["next_ok"])  # fmt: skip
    peaks = [got["peak_mib"] or 0.0 for got in out["together"].values()]
    app = out["app"]["peak_rss_mib"]
    total = app + sum(peaks)
    aim = limits["memory_mb"] * limits["workers"] + AIM_APP_MIB
    report.add("both at once: app process peak", round(app), "MiB", f"<= {AIM_APP_MIB}",
               app <= AIM_APP_MIB)  # fmt: skip
    for (label, got), peak in zip(out["together"].items(), peaks, strict=True):
        report.add(f"both at once: {label} ({got['stopped']}) process peak", round(peak), "MiB")
    report.add("both at once: app + query processes", round(total), "MiB", f"<= {aim}",
               total <= aim)  # fmt: skip
    report.add("anchor: SELECT 1 through a warm query process", round(out["trivial"], 4), "s")
    report.add("anchor: SELECT 1 on DuckDB in the app's process",
               round(out["trivial_duckdb"], 5), "s")  # fmt: skip
    report.add("anchor: the pool's start (query processes ready)", round(out["pool_start"], 2),
               "s")  # fmt: skip


BENCHES = [("query-limits", bench_explore_limits)]


if __name__ == "__main__":
    role, *rest = sys.argv[1:] or ["help"]
    if role == "measure":
        child_measure(*rest)
    else:
        raise SystemExit("usage: bench_explore_limits.py measure FOLDER [quick|smoke]")
