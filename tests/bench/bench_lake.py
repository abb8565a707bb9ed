"""Benchmark of `convo publish --lake`: publish throughput into the Iceberg lake.

Issue 19: "publish throughput into the lake (rows/s) ... with the
single-process figures beside them". A synthetic warehouse (transform_data.py:
conversations with 10 messages each and their details' children, built with
DuckDB) is spread over WORKSPACES workspaces and transformed once (kept under
data/bench/). Then, each into a fresh lake (SQLite catalog, local files):

* one process publishes every workspace (``publish_lake``, one commit per
  table): rows/s over all lake tables;
* then a recent night (transform_data.apply_night: 1 % of conversations new or
  loaded again, mostly recent, some late changes spread over the year), the
  incremental transform, and the publish again into the same lake: its time,
  rows and partitions beside the full publish's (the previous release
  rewrote every partition every time: the full figure is its cost), and a
  publish with nothing changed (the fingerprints' floor);
* WORKSPACES processes publish one workspace each, started together: the
  aggregate rows/s, and the commits that had to be made again;
* the lake's data files per workspace-year and bytes per conversation, beside the
  previous release's layout (tables cut by day, D-LAKE-MONTHS) publishing the same
  rows into a lake of its own;
* the anchor: DuckDB alone writing the same tables' rows to Parquet (zstd)
  with ``COPY ... TO``, the floor of what any Parquet writer costs here.

Sizes printed: rows per table group, the lake's files and bytes, the
Parquet bytes.
"""

from __future__ import annotations

import shutil
import sys
import time
from pathlib import Path
from typing import Any

from _common import DATA_DIR, BenchContext, Report, emit, python_child

THIS = Path(__file__).resolve()
ROOT = THIS.parents[2]
FOLDER = DATA_DIR
WORKSPACES = 4


def _lake(folder: Path) -> Any:
    from convo_analytics.lake import LakeConfig

    return LakeConfig(f"sqlite:///{folder / 'catalog.db'}", f"file://{folder / 'files'}")


def _spread(con: Any, workspaces: int, where: str = "TRUE") -> None:
    """Give every row of the published tables one of ``workspaces`` workspaces, by a hash of
    its conversation (a conversation's rows stay together)."""
    tables = [
        r[0]
        for r in con.execute(
            "SELECT table_name FROM information_schema.columns WHERE column_name = 'workspace_id'"
        ).fetchall()
    ]
    for table in tables:
        columns = {r[0] for r in con.execute(f"DESCRIBE {table}").fetchall()}
        if table == "conversations":
            key = "id"
        elif "conversation_id" in columns:
            key = "coalesce(conversation_id, id)" if table == "leads" else "conversation_id"
        else:
            continue  # logs and bookkeeping: not published
        con.execute(f"UPDATE {table} SET workspace_id = 'ws_' || (hash({key}) % {workspaces}) "
                    f"WHERE {where}")  # fmt: skip


def child_prepare(source: str, target: str, workspaces: str) -> None:
    """Copy the synthetic warehouse, spread it over workspaces, transform it."""
    import duckdb

    from convo_analytics.transform import TransformConfig, run_transform
    from convo_analytics.warehouse import open_warehouse

    shutil.copyfile(source, target)
    con = duckdb.connect(target)
    _spread(con, int(workspaces))
    con.execute("CHECKPOINT")
    con.close()
    con = open_warehouse(Path(target))
    run_transform(con, TransformConfig(reconcile=False))
    con.close()
    emit({"prepared": True})


def child_night(db: str, conversations: str, workspaces: str, days: str) -> None:
    """A recent night's loads into the workspaces (a warehouse built over ``days``), then
    the incremental transform."""
    import duckdb
    from transform_data import apply_night

    from convo_analytics.transform import TransformConfig, run_transform
    from convo_analytics.warehouse import open_warehouse

    changed = apply_night(Path(db), int(conversations), "recent", 1, int(days))
    con = duckdb.connect(db)
    _spread(con, int(workspaces), "workspace_id = 'ws_bench'")  # the night's own rows
    con.close()
    con = open_warehouse(Path(db))
    run = run_transform(con, TransformConfig(reconcile=False))
    con.close()
    emit({"night": {"changed": changed, "mode": run.mode}})


def child_publish(db: str, lake: str, workspaces: str) -> None:
    """One worker: publish the workspaces given (comma-separated, or 'all')."""
    import duckdb

    from convo_analytics.lake import publish_lake

    con = duckdb.connect(db, read_only=True)
    wanted = None if workspaces == "all" else workspaces.split(",")
    # the libraries the publish imports on first use, timed apart: once per process (the
    # anchor's DuckDB is imported before its clock starts too)
    started = time.perf_counter()
    import pyiceberg.catalog.sql
    import pyiceberg.io.pyarrow
    import pyiceberg.table  # noqa: F401

    imports = time.perf_counter() - started
    started = time.perf_counter()
    result = publish_lake(con, _lake(Path(lake)), wanted)
    emit({"published": result.to_json(), "wall": time.perf_counter() - started,
          "imports": imports, "finished": time.time()})  # fmt: skip


def child_publish_days(db: str, lake: str) -> None:
    """The previous release's layout: every table with a time cut by day (its partition
    spec, and no move to months), every workspace published once."""
    sys.path.insert(0, str(ROOT / "tests"))
    from lake_support import by_day_layout

    with by_day_layout():
        child_publish(db, lake, "all")


def child_anchor(db: str, out: str) -> None:
    """DuckDB alone: the same rows of the same tables to Parquet (zstd)."""
    import duckdb

    from convo_analytics.lake import LAKE_TABLES

    con = duckdb.connect(db, read_only=True)
    present = {
        r[0] for r in con.execute("SELECT table_name FROM information_schema.tables").fetchall()
    }
    folder = Path(out)
    folder.mkdir(parents=True, exist_ok=True)
    tables = [
        (spec, spec.query("SELECT DISTINCT workspace_id FROM conversations"))
        for spec in LAKE_TABLES
        if spec.name in present
    ]
    rows = sum(con.execute(f"SELECT count(*) FROM ({q})").fetchall()[0][0] for _, q in tables)
    started = time.perf_counter()
    for spec, query in tables:
        con.execute(
            f"COPY ({query}) TO '{folder / spec.name}.parquet' (FORMAT parquet, COMPRESSION zstd)"
        )
    seconds = time.perf_counter() - started
    # the same rows into the lake's layout: one file per workspace and month, DuckDB's own
    # partitioned writer (the floor of the layout: its per-file cost is in both)
    con.execute("SET TimeZone = 'UTC'")
    files = 0
    started = time.perf_counter()
    for spec, query in tables:
        month = "NULL" if spec.day_column is None else f"strftime(q.{spec.day_column}, '%Y-%m')"
        target = folder / "partitioned" / spec.name
        target.mkdir(parents=True)
        written = con.execute(
            f"COPY (SELECT q.*, q.workspace_id AS _ws, {month} AS _month FROM ({query}) q) "
            f"TO '{target}' (FORMAT parquet, COMPRESSION zstd, PARTITION_BY (_ws, _month), "
            "WRITE_PARTITION_COLUMNS false, RETURN_STATS)"
        ).fetchall()
        files += len(written)
    emit({"anchor": {"rows": rows, "seconds": seconds, "files": files,
                     "partitioned_seconds": time.perf_counter() - started}})  # fmt: skip


def _bytes(folder: Path, suffix: str = "") -> tuple[int, int]:
    files = [p for p in folder.rglob(f"*{suffix}") if p.is_file()]
    return len(files), sum(p.stat().st_size for p in files)


def bench_lake(ctx: BenchContext, report: Report) -> None:
    """Publish throughput into the lake: one process, several at once, DuckDB's COPY."""
    from transform_data import MESSAGES_PER_CONVERSATION, YEAR_DAYS, build_warehouse

    conversations = ctx.size(200_000, 20_000, 200)
    # smoke: two workspaces still race into one lake; each process pays its imports on 2 cores
    workspaces = ctx.size(WORKSPACES, WORKSPACES, 2)
    # smoke: a week, not a year: 200 conversations over a year made ~1,900 partitions of a
    # row or two, and writing those files was most of the smoke run
    days = ctx.size(YEAR_DAYS, YEAR_DAYS, 7)
    span = "" if days == YEAR_DAYS else f"-{days}d"
    FOLDER.mkdir(parents=True, exist_ok=True)
    source = FOLDER / f"lake-source-{conversations}{span}.duckdb"
    db = FOLDER / f"lake-{workspaces}ws-{conversations}{span}.duckdb"
    if not db.exists():
        started = time.perf_counter()
        if not source.exists():
            build_warehouse(source, conversations, days)
        with python_child(THIS, ["prepare", str(source), str(db), str(workspaces)],
                          cwd=ROOT) as child:  # fmt: skip
            child.json_line("prepared", timeout=3600)
        report.note(f"built and transformed the warehouse in {time.perf_counter() - started:.0f} s")
    report.sizes.update({"conversations": conversations, "workspaces": workspaces,
                         "messages": conversations * MESSAGES_PER_CONVERSATION,
                         "days": days})  # fmt: skip
    work = FOLDER / "lake-run"
    shutil.rmtree(work, ignore_errors=True)

    # one process, every workspace
    single = work / "single"
    with python_child(THIS, ["publish", str(db), str(single), "all"], cwd=ROOT) as child:
        one = child.json_line("published", timeout=3600)
    rows, seconds = one["published"]["rows"], one["published"]["seconds"]
    report.sizes["lake rows"] = rows
    files, size = _bytes(single / "files", ".parquet")
    report.sizes.update({"lake data files": files, "lake data MiB": round(size / 2**20, 1)})
    years = workspaces * days / 365
    report.add("lake data files per workspace-year", round(files / years, 1), "files")
    report.add("lake bytes per conversation", round(size / conversations), "B")
    # the previous release's layout (by day), the same rows, into its own lake
    by_day = work / "by-day"
    with python_child(THIS, ["publish-days", str(db), str(by_day)], cwd=ROOT) as child:
        child.json_line("published", timeout=3600)
    day_files, day_size = _bytes(by_day / "files", ".parquet")
    report.add("anchor: previous release (by day), data files per workspace-year",
               round(day_files / years, 1), "files")  # fmt: skip
    report.add("... bytes per conversation", round(day_size / conversations), "B")
    report.sizes["by-day lake data files"] = day_files
    shutil.rmtree(by_day, ignore_errors=True)
    report.add("publish, 1 process, all workspaces", round(rows / seconds), "rows/s")
    report.add("... its time", round(seconds, 1), "s")
    report.add("... the publish's imports, once per process (not in its time)",
               round(one["imports"], 2), "s")  # fmt: skip
    by_table = {t["table"]: t for t in one["published"]["tables"]}
    report.add("... messages alone", round(by_table["messages"]["rows"]
               / max(by_table["messages"]["seconds"], 1e-9)), "rows/s")  # fmt: skip

    # a recent night, the incremental transform, and the publish again: what changed only
    night_db = work / "night.duckdb"
    shutil.copyfile(db, night_db)
    with python_child(THIS, ["night", str(night_db), str(conversations), str(workspaces),
                             str(days)], cwd=ROOT) as child:  # fmt: skip
        night = child.json_line("night", timeout=3600)["night"]
    with python_child(THIS, ["publish", str(night_db), str(single), "all"], cwd=ROOT) as child:
        after = child.json_line("published", timeout=3600)["published"]
    with python_child(THIS, ["publish", str(night_db), str(single), "all"], cwd=ROOT) as child:
        again = child.json_line("published", timeout=3600)["published"]
    partitions = sum(t["partitions"] for t in after["tables"])
    report.sizes["conversations changed by the night"] = night["changed"]
    full_partitions = sum(t["partitions"] for t in one["published"]["tables"])
    report.add("publish after a recent night (1 % changed), 1 process", round(after["seconds"], 1),
               "s")  # fmt: skip
    report.add("... rows written (the full publish: all rows)", after["rows"], "rows")
    report.add("... partitions replaced", partitions, "partitions")
    report.add("... partitions the full publish replaced", full_partitions, "partitions")
    report.add("... tables committed", sum(1 for t in after["tables"] if t["attempts"]),
               f"of {len(after['tables'])}")  # fmt: skip
    report.add("publish with nothing changed (fingerprints only)", round(again["seconds"], 1), "s")
    if again["rows"]:
        report.note(f"the publish with nothing changed wrote {again['rows']} rows")
    night_db.unlink(missing_ok=True)

    # one process per workspace, at once, into one lake (they race to create its tables,
    # then on every table's commits)
    many = work / "many"
    names = [f"ws_{i}" for i in range(workspaces)]
    started = time.time()
    children = [
        python_child(THIS, ["publish", str(db), str(many), name], cwd=ROOT) for name in names
    ]
    try:
        outs = [c.json_line("published", timeout=3600) for c in children]
    finally:
        for c in children:
            c.stop(sig=0)
    wall = max(o["finished"] for o in outs) - started
    total = sum(o["published"]["rows"] for o in outs)
    retried = sum(max(t["attempts"] - 1, 0) for o in outs for t in o["published"]["tables"])
    report.add(f"publish, {workspaces} processes at once (one workspace each)",
               round(total / wall), "rows/s")  # fmt: skip
    report.add("... wall time (incl. process start)", round(wall, 1), "s")
    report.add("... table commits made again after losing a race", retried, "")
    if total != rows:
        report.note(f"the workers published {total} rows, the single process {rows}")

    # anchor: DuckDB alone
    parquet = work / "parquet"
    with python_child(THIS, ["anchor", str(db), str(parquet)], cwd=ROOT) as child:
        anchor = child.json_line("anchor", timeout=3600)["anchor"]
    report.add("anchor: DuckDB COPY to Parquet (zstd), the same rows",
               round(anchor["rows"] / anchor["seconds"]), "rows/s")  # fmt: skip
    report.add("... the publish's share of it (aim: at least 0.2)",
               round(anchor["seconds"] / seconds, 3), "")  # fmt: skip
    report.add("anchor: DuckDB COPY of the same rows partitioned by workspace and month",
               round(anchor["rows"] / anchor["partitioned_seconds"]), "rows/s")  # fmt: skip
    report.add("... its files (the lake's, one per partition)", anchor["files"], "files")
    report.add("... the publish's share of it",
               round(anchor["partitioned_seconds"] / seconds, 3), "")  # fmt: skip
    _, parquet_size = _bytes(parquet / "partitioned", ".parquet")
    report.sizes["DuckDB partitioned Parquet MiB"] = round(parquet_size / 2**20, 1)
    _, parquet_size = _bytes(parquet, ".parquet")
    parquet_size -= _bytes(parquet / "partitioned", ".parquet")[1]
    report.sizes["DuckDB Parquet MiB"] = round(parquet_size / 2**20, 1)
    shutil.rmtree(work, ignore_errors=True)


BENCHES = [("lake", bench_lake)]


if __name__ == "__main__":
    role, *rest = sys.argv[1:] or ["help"]
    if role == "prepare":
        child_prepare(*rest)
    elif role == "night":
        child_night(*rest)
    elif role == "publish":
        child_publish(*rest)
    elif role == "publish-days":
        child_publish_days(*rest)
    elif role == "anchor":
        child_anchor(*rest)
    else:
        raise SystemExit("usage: bench_lake.py prepare|night|publish|anchor ...")
