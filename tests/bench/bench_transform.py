"""Benchmarks of `convo transform` (full and incremental) and of the summary export.

Issue 18: "full rebuild time and peak memory (aim: peak under 4 GiB, time at
most 5x the 1,000,000 figure) on 5,000,000 conversations and 50,000,000
messages; incremental run after 1 % of conversations changed (aim: under 10 s
and under 1 GiB); the same figures at 1,000,000 beside them". Issue 5: the
latency of a 90-day summary export (aim: under 100 ms).

The warehouses are synthetic (transform_data.py), built once with DuckDB SQL
and kept under data/bench/; each run works on a copy. Per size: a full
rebuild, then a night's loads (1 % of conversations, mostly recent), then the
incremental transform; then a second night spread over the whole year (every
day's messages change: the worst case) and its incremental transform. At
1,000,000 the previous release's transform (the code before partitions,
ANCHOR_REV, taken from git) runs on the same warehouse as the anchor, and the
marts of the incremental runs are checked against a full rebuild of the same
data. Every transform runs in a child process, so that its peak memory is its
own.
"""

from __future__ import annotations

import shutil
import statistics
import subprocess
import sys
import tarfile
import time
from datetime import date, timedelta
from pathlib import Path
from typing import Any

from _common import DATA_DIR, BenchContext, Report, emit, extract_source, memory_mib, python_child
from transform_data import MESSAGES_PER_CONVERSATION, apply_night, build_warehouse, warehouse_path

THIS = Path(__file__).resolve()
ROOT = THIS.parents[2]
FOLDER = DATA_DIR
#: The last commit whose transform rebuilt every mart from the whole warehouse at once.
ANCHOR_REV = "521519f91c229f46f225257e0819268b0a943784"
AIM_FULL_MIB = 4096
AIM_GROWTH = 5.0
AIM_INCREMENTAL_SECONDS = 10.0
AIM_INCREMENTAL_MIB = 1024
AIM_EXPORT_MS = 100


def child_transform(db: str, mode: str, src: str = "") -> None:
    """One transform; ``mode`` full, incremental or previous (``src``: that release's code)."""
    if src:
        sys.path.insert(0, src)
    from convo_analytics.transform import TransformConfig, run_transform
    from convo_analytics.warehouse import open_warehouse

    con = open_warehouse(Path(db))
    options = {"full": True} if mode == "full" else {}
    started = time.perf_counter()
    result = run_transform(con, TransformConfig(timezones=("UTC",), reconcile=False, **options))
    con.close()  # the checkpoint that makes the marts durable is part of the cost
    seconds = time.perf_counter() - started
    emit({"seconds": seconds, "result": result.as_json(), "memory": memory_mib()})


def child_checksums(db: str) -> None:
    """A checksum of every mart (row count and the sum of the rows' hashes)."""
    import duckdb

    from convo_analytics.warehouse._marts import REBUILT_MARTS

    con = duckdb.connect(db, read_only=True)
    sums = {}
    for table in REBUILT_MARTS:
        cols = ", ".join(c.name for c in table.columns)
        row = con.execute(f"SELECT count(*), sum(hash({cols}))::VARCHAR FROM {table.name}")
        sums[table.name] = list(row.fetchall()[0])
    con.close()
    emit({"checksums": sums})


def child_export(db: str, days: str, repeats: str) -> None:
    """Latency of the 90-day summary: on an open connection, and as `convo serve` does it."""
    import duckdb

    from convo_analytics.export import export_summary

    last = date(2026, 11, 20)
    first = last - timedelta(days=int(days) - 1)
    warm: list[float] = []
    cold: list[float] = []
    con = duckdb.connect(db, read_only=True)
    con.execute("SET TimeZone = 'UTC'")
    body = export_summary(con, first, last)  # the first call pays imports and JSON warm-up
    for _ in range(int(repeats)):
        started = time.perf_counter()
        body = export_summary(con, first, last)
        warm.append((time.perf_counter() - started) * 1000)
    con.close()
    for _ in range(int(repeats)):
        started = time.perf_counter()
        con = duckdb.connect(db, read_only=True)
        con.execute("SET TimeZone = 'UTC'")
        export_summary(con, first, last)
        con.close()
        cold.append((time.perf_counter() - started) * 1000)
    emit(
        {
            "warm_ms": warm,
            "per_request_ms": cold,
            "conversations": body["totals"]["conversations"],
            "days": len(body["daily"]),
        }
    )


def _base(conversations: int, report: Report) -> Path:
    """The kept synthetic warehouse of that size (built the first time)."""
    FOLDER.mkdir(parents=True, exist_ok=True)
    db = warehouse_path(FOLDER, conversations)
    if not db.exists():
        started = time.perf_counter()
        build_warehouse(db, conversations)
        report.note(
            f"built the {conversations:,}-conversation warehouse in "
            f"{time.perf_counter() - started:.0f} s (kept as {db.name})"
        )
    return db


def _work_copy(base: Path, name: str) -> Path:
    copy = FOLDER / name
    for stale in (copy, Path(f"{copy}.wal")):
        stale.unlink(missing_ok=True)
    shutil.copyfile(base, copy)
    return copy


def _transform(db: Path, mode: str, src: str = "") -> dict[str, Any]:
    with python_child(THIS, ["transform", str(db), mode, src], cwd=ROOT) as child:
        out = child.json_line("seconds", timeout=3600)
    result = out["result"]
    if mode != "previous" and result["mode"] != mode:
        raise RuntimeError(f"asked for a {mode} transform, got {result['mode']}")
    return out


def _checksums(db: Path) -> dict[str, Any]:
    with python_child(THIS, ["checksums", str(db)], cwd=ROOT) as child:
        sums: dict[str, Any] = child.json_line("checksums", timeout=1800)["checksums"]
    return sums


def _peak(out: dict[str, Any]) -> float:
    return float(out["memory"].get("peak_rss_mib", float("nan")))


def _anchor_source() -> Path | None:
    """The previous release's src/ (from git), extracted once under data/bench/."""
    folder = FOLDER / f"anchor-{ANCHOR_REV[:12]}"
    if (folder / "src" / "convo_analytics").exists():
        return folder / "src"
    archive = FOLDER / "anchor.tar"
    try:
        with archive.open("wb") as out:
            subprocess.run(
                ["git", "-C", str(ROOT), "archive", ANCHOR_REV, "src"],
                stdout=out,
                check=True,
                timeout=120,
            )
    except (OSError, subprocess.SubprocessError):
        archive.unlink(missing_ok=True)
        return None
    with tarfile.open(archive) as tar:
        extract_source(tar, folder)
    archive.unlink()
    return folder / "src"


def _size(ctx: BenchContext, report: Report, n: int, *, anchor: bool) -> float:
    """Full, incremental (a recent night) and worst-case incremental at ``n`` conversations;
    returns the full rebuild's seconds."""
    label = f"{n:,}"
    base = _base(n, report)
    report.sizes[f"warehouse {label} MB"] = round(base.stat().st_size / 1e6)
    if anchor:
        source = _anchor_source()
        if source is None:
            report.note("no git history here: the previous release's transform was not run")
        else:
            db = _work_copy(base, f"anchor-{n}.duckdb")
            out = _transform(db, "previous", str(source))
            report.add(f"{label}: previous release, whole rebuild", round(out["seconds"], 1), "s")
            report.add(f"{label}: previous release, peak memory", round(_peak(out)), "MiB")
            db.unlink()
    db = _work_copy(base, f"work-{n}.duckdb")
    full = _transform(db, "full")
    seconds = float(full["seconds"])
    report.add(f"{label}: full rebuild", round(seconds, 1), "s")
    peak = _peak(full)
    report.add(
        f"{label}: full rebuild, peak memory",
        round(peak),
        "MiB",
        f"< {AIM_FULL_MIB}",
        peak < AIM_FULL_MIB,
    )
    for night, kind in ((1, "recent"), (2, "spread")):
        changed = apply_night(db, n, kind, night)
        out = _transform(db, "incremental")
        took, peak = float(out["seconds"]), _peak(out)
        what = "a recent night" if kind == "recent" else "worst case, spread over the year"
        report.add(
            f"{label}: incremental, {changed:,} changed ({what})",
            round(took, 1),
            "s",
            f"< {AIM_INCREMENTAL_SECONDS:g}" if kind == "recent" else "",
            took < AIM_INCREMENTAL_SECONDS if kind == "recent" else None,
        )
        report.add(
            f"{label}: incremental ({kind}), peak memory",
            round(peak),
            "MiB",
            f"< {AIM_INCREMENTAL_MIB}" if kind == "recent" else "",
            peak < AIM_INCREMENTAL_MIB if kind == "recent" else None,
        )
        report.add(
            f"{label}: incremental ({kind}), partitions rewritten",
            int(out["result"]["partitions"]["count"]),
        )
    if anchor and (ctx.smoke or not ctx.quick):  # a smoke run checks it too: it is cheap
        again = _work_copy(db, f"check-{n}.duckdb")
        _transform(again, "full")
        same = _checksums(db) == _checksums(again)
        report.add(f"{label}: incremental marts equal a full rebuild's", same, "", "equal", same)
        again.unlink()
    if n == ctx.size(1_000_000, 100_000, 500):
        _export(report, db, ctx.size(20, 20, 3))  # smoke: fewer rounds, the same calls
    db.unlink()
    return seconds


def _export(report: Report, db: Path, repeats: int) -> None:
    with python_child(THIS, ["export", str(db), "90", str(repeats)], cwd=ROOT) as child:
        lat = child.json_line("warm_ms", timeout=600)
    warm = statistics.median(lat["warm_ms"])
    per_request = statistics.median(lat["per_request_ms"])
    report.sizes["summary range"] = f"{lat['days']} days, {lat['conversations']:,} conversations"
    report.add(
        f"90-day summary export, median of {repeats}",
        round(warm, 1),
        "ms",
        f"< {AIM_EXPORT_MS}",
        warm < AIM_EXPORT_MS,
    )
    report.add(
        "... opening the warehouse per request (as convo serve)", round(per_request, 1), "ms"
    )


def bench_transform(ctx: BenchContext, report: Report) -> None:
    """Full and incremental transforms at two sizes, the previous release as the anchor."""
    # smoke: 500 and 1,000 still give each night new, finishing and late conversations (0.3,
    # 0.5 and 0.2 %) and every path; topic discovery in each full rebuild is what costs there
    small, large = ctx.size((1_000_000, 5_000_000), (100_000, 500_000), (500, 1_000))
    report.sizes.update(
        {"conversations": f"{small:,} and {large:,}", "messages each": MESSAGES_PER_CONVERSATION}
    )
    first = _size(ctx, report, small, anchor=True)
    second = _size(ctx, report, large, anchor=False)
    growth = second / first
    report.add(
        f"full rebuild: {large:,} / {small:,}",
        round(growth, 2),
        "x",
        f"<= {AIM_GROWTH:g}",
        growth <= AIM_GROWTH,
    )


BENCHES = [("transform", bench_transform)]


if __name__ == "__main__":
    role, *rest = sys.argv[1:] or ["help"]
    if role == "transform":
        child_transform(*rest)
    elif role == "checksums":
        child_checksums(*rest)
    elif role == "export":
        child_export(*rest)
    else:
        raise SystemExit(
            "usage: bench_transform.py transform DB MODE [SRC] | checksums DB | "
            "export DB DAYS REPEATS"
        )
