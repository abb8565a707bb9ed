"""The sizing tables of docs/scale-out.md ("Sizing on paper"), computed from the figures the
scale-batched benchmark measures (tests/bench/bench_dagster.py), which prints them at its end:
run it again to refresh the doc. The figures not measured there are constants here, each
with where it was measured (decision D-SCALE-SIZING)."""

from __future__ import annotations

import math

#: Measured earlier and still holding (bench scale-out-per-workspace, 2026-11-24; the
#: extract is unchanged since): a workspace's extract of 2,000 conversations, 2,040 requests
#: at 97 % of its limit, and its incremental transform (issue 18's 1 s).
EXTRACT_S = {"600/min": 210.0, "100/min": 1262.0}
TRANSFORM_S = 1.0
PER_DAY = 2000  # conversations a day per workspace
#: A publish fingerprints the shard's every row (D-LAKE-INCREMENTAL): 4,628,461 rows in
#: 1.6 s with nothing changed (bench lake, full size, 2026-11-24), some 2.9 M rows/s.
FINGERPRINT_ROWS_PER_S = 2.9e6
#: A night rewrites the month so far of each table it changes (D-LAKE-MONTHS): 15.7 days
#: on average over a month of 30.4 days.
MONTH_SO_FAR_DAYS = 15.7
WINDOW_S = 7200.0
FIXED_WORKERS = 50
#: The batch size docs/scale-out.md recommends per limit: whole batches fill the window as
#: single workspaces do (in 2 h a worker runs some 30 nights of 600/min one after another,
#: or 5 of 100/min: 3 batches of 10, or 1 of 5), so the workers stay those of batch 1
#: while the process starts and the catalog's commits fall about 10 and 5 times.
RECOMMENDED = {"600/min": 10, "100/min": 5}


def sizing(inputs: dict[str, float]) -> list[str]:
    """The tables of docs/scale-out.md ("Sizing"), computed from a run's figures: printed
    by the benchmark so that the doc can be refreshed by running it again. Each row at the
    recommended batch size, beside batch 1 (``N / 1``)."""
    rows = inputs["rows_per_conversation"]
    rewrite = MONTH_SO_FAR_DAYS * PER_DAY * rows / inputs["write_rows_per_s"]
    fingerprints = 365 * PER_DAY * rows / FINGERPRINT_ROWS_PER_S
    publish_ws = rewrite + fingerprints
    lines = [
        f"sizing: a workspace's night's publish rewrites {MONTH_SO_FAR_DAYS} days x {PER_DAY} "
        f"conversations x {rows:.1f} rows ({rewrite:.1f} s) and fingerprints a year's rows "
        f"({fingerprints:.1f} s): {publish_ws:.1f} s",
        "| workspaces | limit | batch | worker-hours | workers for 2 h (N / 1) | "
        "wall with 50 (N / 1) | step processes (N / 1) | commits a night, per s over 2 h "
        "(N / 1) |",
    ]
    lake = ["| workspaces | lake bytes a day | a year | written a night | live files a year |"]
    for limit in ("600/min", "100/min"):
        cells: dict[int, list[tuple[float, ...]]] = {}
        for n in (RECOMMENDED[limit], 1):
            per_batch = inputs["publish_per_batch"] if n > 1 else 0.0
            commits = (
                inputs["commits_per_batch"] if n > 1 else inputs["commits_per_workspace_alone"]
            )
            batch_s = (
                2 * inputs["start"] + per_batch + n * (EXTRACT_S[limit] + TRANSFORM_S + publish_ws)
            )
            for workspaces in (100, 1000, 10000):
                batches = math.ceil(workspaces / n)
                rounds = max(1, math.floor(WINDOW_S / batch_s))
                cells.setdefault(workspaces, []).append((
                    batches * batch_s / 3600,
                    math.ceil(batches / rounds) if batch_s <= WINDOW_S else math.nan,
                    math.ceil(batches / FIXED_WORKERS) * batch_s, 2 * batches + 2,
                    batches * commits,
                ))  # fmt: skip
        for workspaces, ((hours, workers, wall, steps, commits), one) in cells.items():
            lines.append(
                f"| {workspaces:,} | {limit} | {RECOMMENDED[limit]} | {hours:,.0f} | "
                f"{_count(workers)} / {_count(one[1])} | {_duration(wall)} / {_duration(one[2])} | "
                f"{steps:,} / {one[3]:,} | {commits:,.0f} ({commits / WINDOW_S:.2g}/s) / "
                f"{one[4]:,.0f} ({one[4] / WINDOW_S:.2g}/s) |"
            )
    for workspaces in (100, 1000, 10000):
        day = workspaces * PER_DAY * inputs["bytes_per_conversation"]
        lake.append(
            f"| {workspaces:,} | {_bytes(day)} | {_bytes(day * 365)} | "
            f"{_bytes(day * MONTH_SO_FAR_DAYS)} | "
            f"{workspaces * inputs['files_per_workspace_year']:,.0f} |"
        )
    return lines + lake


def _count(workers: float) -> str:
    return "none (a batch outlasts 2 h)" if math.isnan(workers) else f"{workers:,.0f}"


def _duration(seconds: float) -> str:
    return f"{seconds / 60:.0f} min" if seconds < 3 * 3600 else f"{seconds / 3600:.1f} h"


def _bytes(count: float) -> str:
    for unit, size in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6)):
        if count >= size:
            return f"{count / size:.3g} {unit}"
    return f"{count / 1e3:.3g} kB"
