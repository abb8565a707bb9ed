"""Benchmark of the dashboard: the time to render each page on 1,000,000 conversations.

"the time to render each page on a warehouse of 1,000,000 conversations (aim:
under 1 s)". It reuses the transform benchmark's synthetic warehouse (built
and transformed there; built here if missing), publishes a snapshot of it and
renders every page with Streamlit's AppTest in a child process: once with
empty caches (what the first reader after a publish waits) and once warm.
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

from _common import BenchContext, Report, emit, memory_mib, python_child

THIS = Path(__file__).resolve()
ROOT = THIS.parents[2]
AIM_SECONDS = 1.0
PAGES = ["overview", "conversations", "leads", "quality", "guardrails", "explore", "pipeline"]


def child_render(db: str, published: str, repeats: str) -> None:
    import os

    import streamlit as st
    from streamlit.testing.v1 import AppTest
    from transform_data import publish_transformed

    publish_transformed(db, published)
    os.environ["CONVO_PUBLISHED_DIR"] = published
    app = str(ROOT / "dashboards" / "streamlit_app.py")
    cold: dict[str, float] = {}
    warm: dict[str, list[float]] = {}
    for page in PAGES:
        at = AppTest.from_file(app, default_timeout=120)
        at.run()
        if page != "overview":
            at.switch_page(f"app_pages/{page}.py")
        st.cache_data.clear()
        started = time.perf_counter()
        at.run()
        cold[page] = time.perf_counter() - started
        if at.exception:
            raise RuntimeError(f"{page}: {at.exception}")
        warm[page] = []
        for _ in range(int(repeats)):
            started = time.perf_counter()
            at.run()
            warm[page].append(time.perf_counter() - started)
    emit({"cold": cold, "warm": {p: statistics.median(v) for p, v in warm.items()},
          "memory": memory_mib()})  # fmt: skip


def bench_dashboard(ctx: BenchContext, report: Report) -> None:
    """Seconds to render each page, first reader after a publish and warm."""
    from transform_data import synthetic_warehouse

    db, conversations = synthetic_warehouse(ctx, report)
    folder = db.parent
    report.sizes.update({"conversations": conversations, "pages": len(PAGES)})
    published = folder / f"published-{conversations}"
    repeats = ctx.size(3, 3, 1)  # smoke: one warm rerender per page shows it runs
    with python_child(THIS, ["render", str(db), str(published), str(repeats)], cwd=ROOT) as child:
        out = child.json_line("cold", timeout=1200)
    for page in PAGES:
        cold = out["cold"][page]
        report.add(
            f"{page}: first render after a publish",
            round(cold, 2),
            "s",
            f"< {AIM_SECONDS:g}",
            cold < AIM_SECONDS,
        )
        report.add(f"{page}: warm rerender", round(out["warm"][page], 2), "s")
    report.add("peak memory", round(out["memory"].get("peak_rss_mib", float("nan"))), "MiB")


BENCHES = [("dashboard", bench_dashboard)]


if __name__ == "__main__":
    role, *rest = sys.argv[1:] or ["help"]
    if role == "render":
        child_render(*rest)
    else:
        raise SystemExit("usage: bench_dashboard.py render DB PUBLISHED_DIR REPEATS")
