"""Benchmarks of scaling out (issue 19): the six-workspace Dagster job, and the per-workspace
figures docs/scale-out.md sizes 100 to 10,000 workspaces from.

- dagster-six-workspaces: ``nightly_workspaces`` over six sandbox workspaces at 100/min
  each (a night is bound by each workspace's own limit) with the multiprocess executor
  (three at once) on a PostgreSQL-backed instance and a
  PostgreSQL-catalogued lake; beside it, the anchor measured in the same run: the same
  six one after another in one process (``execute_in_process``, fresh shards and lake),
  and the most steps the multiprocess run had in flight at once (from its event log).
  The setup (config, instance, jobs, run config) is the Dagster test's own
  (tests/dagster_support.py).
- scale-out-per-workspace: one workspace's extract at 600/min and 100/min against a
  sandbox enforcing that limit (seconds per 1,000 conversations, requests per
  conversation), its transform and lake publish (seconds), and the lake's bytes per
  conversation (a SQLite catalog, data files on the local disk).
- scale-batched (issue 31): a steady night of ``nightly_workspaces`` over workspaces holding
  a year each, in batches of one (the anchor) and of N (``orchestrator.batch_size``), from
  the same state: wall time, step processes and their start, publish time per workspace and
  per batch, catalog commits (the snapshots the lake gained), the lake's live files and
  bytes; then one larger workspace-year in one process (bytes and rows per conversation,
  the rewrite rate). It ends by printing docs/scale-out.md's sizing tables computed from
  these figures (``sizing``), so that the doc is refreshed by running it again.

Servers run in threads of this process (the rate-limited extracts are bound by the
limit, not by the GIL); PostgreSQL is a throwaway server (tests/postgres_support.py).
"""

from __future__ import annotations

import asyncio
import math
import os
import re
import shutil
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from _common import BenchContext, Report
from _sizing import sizing

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/, for dagster_support
from dagster_support import (
    ROOT,
    definitions,
    most_steps_at_once,
    postgres_instance,
    reconstructable_job,
    run_config,
    write_config,
)

NAMES = ("north", "south", "east", "west", "up", "down")


def _key(name: str) -> str:
    return f"sk_bench_{name}_0123456789"


#: The sandbox's histories end here (2026-11-18); a later night's activity is a day after.
UNTIL_MS = 1_795_000_000_000


@contextmanager
def _sandbox(
    conversations: int, rate_limit: str, names: tuple[str, ...], days: int = 7
) -> Iterator[Any]:
    with _served(conversations, rate_limit, names, days) as (server, _):
        yield server


@contextmanager
def _served(
    conversations: int, rate_limit: str, names: tuple[str, ...], days: int
) -> Iterator[tuple[Any, Any]]:
    """The sandbox's server and the sandbox itself (for a later night's activity)."""
    from convo_analytics._serving import ServerThread
    from convo_analytics.sandbox import Sandbox, SandboxSettings, create_app

    settings = SandboxSettings(seed=7, conversations=conversations, days=days,
                               until_ms=UNTIL_MS, rate_limit=rate_limit,
                               workspaces=[(n, _key(n)) for n in names],
                               admin_token="adm_bench_token", crawl_scope="loopback")  # fmt: skip
    sandbox = Sandbox(settings)
    with ServerThread(create_app(sandbox)) as server:
        yield server, sandbox


def bench_six_workspaces(ctx: BenchContext, report: Report) -> None:
    """The six-workspace job, three processes at once, against the six one after another."""
    import dagster as dg

    from postgres_support import running_postgres

    # At a rate limit, as a real night is: each workspace's extract waits on its own limit.
    # 100/min: even this small workspace waits on its limit most of its night (as a real one
    # does at any limit), rather than on the 2 cores the sandbox and the steps share here.
    conversations, limit = ctx.size(40, 20, 5), ctx.size("100/min", "100/min", "none")
    names = NAMES[: ctx.size(6, 6, 2)]  # a smoke run: two workspaces prove it runs
    report.sizes["workspaces"] = len(names)
    report.sizes["conversations each"] = f"{conversations}, over 7 days"
    report.sizes["rate limit"] = f"{limit} per workspace (server and client)"
    with (
        _sandbox(conversations, limit, names) as server,
        running_postgres() as pg,
        tempfile.TemporaryDirectory(prefix="bench-dagster-") as tmp,
    ):
        seconds: dict[str, float] = {}
        for how in ("multiprocess", "in_process"):
            folder = Path(tmp) / how
            lake = pg.url(database=pg.create_database(f"lake_{how}"))
            config = write_config(folder, server.url, {n: _key(n) for n in names},
                                  catalog=lake, rate_limit=limit)  # fmt: skip
            with postgres_instance(folder / "dagster_home", pg, f"dagster_{how}") as instance:
                started = time.perf_counter()
                if how == "multiprocess":
                    result = dg.execute_job(reconstructable_job("nightly_workspaces"), instance,
                                            run_config=run_config(config))  # fmt: skip
                else:
                    result = _in_process(config, instance)
                seconds[how] = time.perf_counter() - started
                if not result.success:
                    raise RuntimeError(f"the {how} run failed")
                if how == "multiprocess":
                    at_once = most_steps_at_once(instance, result.run_id)
    report.add("six workspaces, multiprocess (3 at once)", round(seconds["multiprocess"], 1), "s")
    report.add("six workspaces, one after another (anchor)", round(seconds["in_process"], 1), "s")
    report.add("speed-up", round(seconds["in_process"] / seconds["multiprocess"], 2), "x")
    report.add("most steps at once (multiprocess)", at_once)


def _in_process(config: Path, instance: Any) -> Any:
    """The same job's ops in this one process, one step after another."""
    import dagster as dg

    job_def = definitions().defs.resolve_job_def("nightly_workspaces")
    in_process = dg.JobDefinition(
        graph_def=job_def.graph, resource_defs=job_def.resource_defs,
        executor_def=dg.in_process_executor, name="nightly_workspaces_in_process",
    )  # fmt: skip
    return in_process.execute_in_process(
        run_config={"resources": run_config(config)["resources"]}, instance=instance
    )


def bench_per_workspace(ctx: BenchContext, report: Report) -> None:
    """One workspace: extract at each limit, transform, publish, lake bytes."""
    from convo_analytics.config import load_settings
    from convo_analytics.extract import ExtractConfig, run_extract
    from convo_analytics.lake import LakeConfig
    from convo_analytics.pipeline import load_steps, run_shard_step, shard_path
    from convo_analytics.warehouse import open_warehouse

    steps = {s.name: s for s in load_steps(ROOT / "pipelines" / "nightly.py")}
    # smoke: two conversations at each limit (ten took 8 s at 100/min, waiting on the limit)
    aimed, least = ctx.size(25.0, 10.0, 0.2), ctx.size(10, 10, 2)
    for spec, per_second in (("600/min", 10.0), ("100/min", 100 / 60)):
        n = max(least, int(per_second * aimed))
        with _sandbox(n, spec, ("acme",)) as server, tempfile.TemporaryDirectory() as tmp:
            config = ExtractConfig(base_url=server.url, api_key=_key("acme"),
                                   db_path=Path(tmp) / "w.duckdb", rate_limit=spec)  # fmt: skip
            started = time.perf_counter()
            result = asyncio.run(run_extract(config))
            took = time.perf_counter() - started
            requests = sum(s.stats.requests for s in result.streams.values())
        report.sizes[f"extract at {spec}"] = f"{n} conversations"
        report.add(f"extract s per 1,000 conversations at {spec}", round(took / n * 1000, 1), "s")
        report.add(f"requests per conversation at {spec}", round(requests / n, 3))
    n = ctx.size(2000, 300, 50)
    report.sizes["transform and publish"] = f"one workspace of {n} conversations, 7 days"
    with _sandbox(n, "none", ("acme",)) as server, tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        config = write_config(folder, server.url, {"acme": _key("acme")},
                              catalog=f"sqlite:///{folder}/lake/catalog.db")  # fmt: skip
        settings = load_settings(config, {})
        timings = {}
        for step in ("extract", "transform"):
            started = time.perf_counter()
            run_shard_step(steps[step], settings, "acme", f"bench-{step}")
            timings[step] = time.perf_counter() - started
        lake = LakeConfig.from_settings(settings)
        published = _timed_publish(settings, lake, timings, "publish")
        # the newest day's conversation rows changed (the transform sees no new load, so its
        # marts stay), the publish of what changed; then a publish with nothing changed
        con = open_warehouse(shard_path(settings, "acme"))
        try:
            con.execute(
                "UPDATE conversations SET updated_at = updated_at + INTERVAL 1 HOUR, "
                "last_run_id = 'bench-night' WHERE CAST(created_at AS DATE) = "
                "(SELECT max(CAST(created_at AS DATE)) FROM conversations)"
            )
        finally:
            con.close()
        run_shard_step(steps["transform"], settings, "acme", "bench-night-transform")
        night = _timed_publish(settings, lake, timings, "night")
        _timed_publish(settings, lake, timings, "unchanged")
        lake_bytes = sum(p.stat().st_size for p in (folder / "lake").rglob("*") if p.is_file())
        shard_bytes = shard_path(settings, "acme").stat().st_size
    report.add("extract s per workspace (no limit)", round(timings["extract"], 2), "s")
    report.add("transform s per workspace", round(timings["transform"], 2), "s")
    report.add("lake publish s per workspace (first, the whole history)",
               round(timings["publish"], 2), "s")  # fmt: skip
    report.add("... its table commits", sum(1 for t in published.tables if t.attempts))
    report.add("lake publish s after the newest day's conversations changed",
               round(timings["night"], 2), "s")  # fmt: skip
    report.add("... its table commits", sum(1 for t in night.tables if t.attempts))
    report.add("... its partitions replaced", sum(t.partitions for t in night.tables))
    report.add("lake publish s with nothing changed", round(timings["unchanged"], 2), "s")
    report.add("lake bytes per conversation", round(lake_bytes / n), "B")
    report.add("shard (DuckDB) bytes per conversation (anchor)", round(shard_bytes / n), "B")


def _timed_publish(settings: Any, lake: Any, timings: dict[str, float], what: str) -> Any:
    from convo_analytics.lake import publish_lake
    from convo_analytics.pipeline import shard_path
    from convo_analytics.warehouse import open_warehouse

    con = open_warehouse(shard_path(settings, "acme"), read_only=True)
    try:
        started = time.perf_counter()
        result = publish_lake(con, lake, ["acme"])
        timings[what] = time.perf_counter() - started
        return result
    finally:
        con.close()


# -- scale-batched: a night in batches against a night a workspace at a time (issue 31) --

DAY_MS = 86_400_000


def bench_scale_batched(ctx: BenchContext, report: Report) -> None:
    """A steady night of ``nightly_workspaces`` over K workspaces holding a year each, at
    batch size 1 (the anchor: a workspace per step and per publish) and N, from the same
    state; then one larger workspace-year in one process, for the lake's bytes and write
    rate. docs/scale-out.md ("Sizing") computes 100 to 10,000 workspaces from these figures
    (printed at the end: run again to refresh them)."""
    from postgres_support import running_postgres

    count = ctx.size(24, 12, 2)
    conversations = ctx.size(100, 60, 6)  # per workspace, over the year
    batch = ctx.size(8, 4, 2)
    # smoke: the batched night alone proves the bench runs (the anchor's run is the same job)
    sizes: tuple[int, ...] = ctx.size((1, batch), (1, batch), (batch,))
    new, progressed = ctx.size(3, 3, 1), ctx.size(3, 3, 1)  # the steady night, per workspace
    names = tuple(f"w{i:02d}" for i in range(count))
    report.sizes["workspaces"] = count
    report.sizes["history"] = f"{conversations} conversations each over 365 days"
    report.sizes["steady night"] = f"{new} new and {progressed} changed conversations each"
    report.sizes["batch sizes"] = " and ".join(f"{n} (anchor)" if n == 1 else str(n) for n in sizes)
    report.sizes["executor"] = "multiprocess, 3 steps at once, forkserver (the definitions')"
    report.sizes["load average at start"] = round(os.getloadavg()[0], 1)
    measured: dict[int, dict[str, Any]] = {}
    with (
        _served(conversations, "none", names, 365) as (server, sandbox),
        running_postgres() as pg,
        tempfile.TemporaryDirectory(prefix="bench-batched-") as tmp,
    ):
        configs = {}
        for size in sizes:
            folder = Path(tmp) / f"batch{size}"
            lake = pg.url(database=pg.create_database(f"lake_b{size}"))
            configs[size] = write_config(folder, server.url, {n: _key(n) for n in names},
                                         catalog=lake, batch_size=size)  # fmt: skip
        started = time.perf_counter()
        _load_year(configs, names)
        report.note(f"the year loaded and published, in this process: "
                    f"{time.perf_counter() - started:.0f} s")  # fmt: skip
        _next_night(sandbox, new, progressed)
        # one instance for every run: the executor's forkserver, started by the first run,
        # hands its environment (DAGSTER_HOME, the instance's database) to every later step
        with postgres_instance(Path(tmp) / "dagster_home", pg, "dagster") as instance:
            for size, config in configs.items():
                measured[size] = _batched_night(config, instance, f"batch {size}")
        files = {size: _lake_files(config) for size, config in configs.items()}
    report.sizes["load average at end"] = round(os.getloadavg()[0], 1)
    for size in sizes:
        m = measured[size]
        report.add(f"steady night, batch {size}: wall time", round(m["wall"], 1), "s")
        report.add("... load average (1 min) at its end", round(m["load"], 1))
        report.add("... step processes started", m["processes"])
        report.add("... s of process start per step (mean)", round(m["start_mean"], 2), "s")
        report.add("... s of night step per workspace", round(m["night_step"] / count, 2), "s")
        report.add("... s of publish step per workspace", round(m["publish_step"] / count, 2), "s")
        report.add("... publish_lake s per workspace (in its batch)",
                   round(m["publish_seconds"] / count, 3), "s")  # fmt: skip
        report.add("... publish_lake s per batch (mean)",
                   round(m["publish_seconds"] / m["publishes"], 2), "s")  # fmt: skip
        report.add("... catalog commits (snapshots the lake gained)", m["commits"])
        report.add("... commits per workspace", round(m["commits"] / count, 2))
        report.add("... commit attempts (the publishes' own count)", m["attempts"])
    anchor = measured.get(1, measured[batch])
    report.add(f"steady night, wall time: batch 1 over batch {batch}",
               round(anchor["wall"] / measured[batch]["wall"], 2), "x")  # fmt: skip
    for size in sizes:
        f = files[size]
        report.add(f"lake of the year and the night, batch {size}: live data files per workspace",
                   round(f["live"] / count, 1), "files")  # fmt: skip
        report.add("... per table per workspace (most)", f["most"], "files")
        report.add("... live data bytes per workspace", round(f["live_bytes"] / count), "B")
        report.add("... data files on disk (live and replaced, kept a week)", f["on_disk"], "files")
    year = _year_workspace(ctx, report)
    batches = math.ceil(count / batch)
    inputs = {
        "start": measured[batch]["start_mean"],
        "publish_per_batch": measured[batch]["publish_seconds"] / batches,
        "commits_per_batch": measured[batch]["commits"] / batches,
        "commits_per_workspace_alone": anchor["commits"] / count,
        **year,
    }
    report.note(f"the sizing's inputs (the steady night at batch {batch}, batch 1's commits, "
                "the workspace-year): "
                + ", ".join(f"{k} {v:.4g}" for k, v in inputs.items()))  # fmt: skip
    for line in sizing(inputs):
        report.note(line)


def _load_year(configs: dict[int, Path], names: tuple[str, ...]) -> None:
    """The state before the measured night, made in this process (no Dagster, no process
    starts): each workspace's night (the year's history) on the first config's shards, the
    shards copied to the other configs', and each config's lake published in one publish."""
    from convo_analytics.config import load_settings
    from convo_analytics.pipeline import load_steps, publish_shards, run_shard_step

    steps = {s.name: s for s in load_steps(ROOT / "pipelines" / "nightly.py")}
    first, *others = configs.values()
    settings = load_settings(first, {})
    for name in names:
        for step in ("extract", "webhook_ingest", "transform", "monitors"):
            run_shard_step(steps[step], settings, name, "bench-year")
    for other in others:
        shutil.copytree(first.parent / "data" / "shards", other.parent / "data" / "shards")
    for config in configs.values():
        done = publish_shards(load_settings(config, {}), list(names))
        if done.failed:
            raise RuntimeError(f"the year's publish failed: {done.failed}")


def _next_night(sandbox: Any, new: int, progressed: int) -> None:
    """A day after the histories end: ``new`` conversations in each workspace and
    ``progressed`` of its open ones moved on (the sandbox's own simulation)."""
    import random

    from convo_analytics.sandbox._simulate import simulate

    for number, ws in enumerate(sandbox.workspaces.values()):
        simulate(ws, UNTIL_MS + DAY_MS, new, progressed, random.Random(number))


def _batched_night(config: Path, instance: Any, label: str) -> dict[str, Any]:
    """One run of ``nightly_workspaces``: its wall time, and from its event log the step
    processes, their start, the steps' times and the publishes'."""
    import dagster as dg

    from convo_analytics.config import load_settings
    from convo_analytics.lake import LakeConfig

    lake = LakeConfig.from_settings(load_settings(config, {}))
    before = _snapshots(lake)
    started = time.perf_counter()
    result = dg.execute_job(reconstructable_job("nightly_workspaces"), instance,
                            run_config=run_config(config))  # fmt: skip
    wall = time.perf_counter() - started
    if not result.success:
        raise RuntimeError(f"the {label} run failed")
    out = _from_event_log(instance, result.run_id)
    out["wall"] = wall
    out["load"] = os.getloadavg()[0]
    out["commits"] = _snapshots(lake) - before
    return out


def _from_event_log(instance: Any, run_id: str) -> dict[str, Any]:
    import dagster as dg

    kinds = dg.DagsterEventType
    launched: dict[str, float] = {}
    began: dict[str, float] = {}
    starts: list[float] = []
    took = {"workspace_night": 0.0, "workspace_publish": 0.0}
    processes = 0
    batches: dict[str, dict[str, float]] = {}
    for record in instance.all_logs(run_id):
        event = record.dagster_event
        if event is None:
            continue
        key = str(event.step_key or "")
        if event.event_type == kinds.STEP_WORKER_STARTING:
            processes += 1
            launched[key] = record.timestamp
        elif event.event_type == kinds.STEP_START:
            began[key] = record.timestamp
            if key in launched:
                starts.append(record.timestamp - launched.pop(key))
        elif event.event_type == kinds.STEP_SUCCESS and key in began:
            kind = key.partition("[")[0]
            if kind in took:
                took[kind] += record.timestamp - began[key]
        elif event.event_type == kinds.ASSET_MATERIALIZATION:
            done = event.event_specific_data.materialization
            if done.asset_key.path == ["lake_publish"]:
                meta = {k: v.value for k, v in done.metadata.items()}
                batches[str(meta["batch"])] = {
                    k: float(meta[k]) for k in ("seconds", "commit_attempts", "publishes")
                }
    if not starts:
        raise RuntimeError("the run's event log shows no step's start")
    return {
        "processes": processes,
        "start_mean": sum(starts) / len(starts),
        "night_step": took["workspace_night"],
        "publish_step": took["workspace_publish"],
        "publish_seconds": sum(b["seconds"] for b in batches.values()),
        "publishes": max(1.0, sum(b["publishes"] for b in batches.values())),
        "attempts": int(sum(b["commit_attempts"] for b in batches.values())),
    }


def _snapshots(lake: Any) -> int:
    """Every snapshot the lake's tables hold (data tables and the lake's record): its catalog
    commits so far (none is a week old, so none has been expired)."""
    catalog = lake.open_catalog()
    total = 0
    for namespace in (lake.namespace, lake.records_namespace):
        if not catalog.namespace_exists(namespace):
            continue
        for identifier in catalog.list_tables(namespace):
            total += len(catalog.load_table(identifier).metadata.snapshots)
    return total


def _lake_files(config: Path) -> dict[str, Any]:
    """The lake's live data files (the current snapshots' files, all data tables), the most
    one table holds for one workspace, their bytes, and the Parquet files on disk."""
    from convo_analytics.config import load_settings
    from convo_analytics.lake import LakeConfig

    lake = LakeConfig.from_settings(load_settings(config, {}))
    catalog = lake.open_catalog()
    live = size = most = 0
    for identifier in catalog.list_tables(lake.namespace):
        tasks = list(catalog.load_table(identifier).scan().plan_files())
        live += len(tasks)
        size += sum(t.file.file_size_in_bytes for t in tasks)
        per: dict[str, int] = {}
        for task in tasks:
            found = re.search(r"/workspace_id=([^/]+)/", task.file.file_path)
            if found:
                per[found.group(1)] = per.get(found.group(1), 0) + 1
        most = max([most, *per.values()])
    on_disk = sum(1 for _ in (config.parent / "lake").rglob("*.parquet"))
    return {"live": live, "live_bytes": size, "most": most, "on_disk": on_disk}


def _year_workspace(ctx: BenchContext, report: Report) -> dict[str, float]:
    """One larger workspace-year in this process (no Dagster): the lake's bytes and rows per
    conversation, its data files, the publish's write rate, and a steady night's publish
    (a day's new conversations rewrite the current month's file of each table)."""
    from convo_analytics.config import load_settings
    from convo_analytics.lake import LakeConfig, publish_lake
    from convo_analytics.pipeline import load_steps, publish_shards, run_shard_step, shard_path
    from convo_analytics.warehouse import open_warehouse

    steps = {s.name: s for s in load_steps(ROOT / "pipelines" / "nightly.py")}
    n = ctx.size(4000, 1500, 40)
    report.sizes["one workspace-year"] = f"{n} conversations over 365 days, SQLite catalog"
    with (
        _served(n, "none", ("acme",), 365) as (server, sandbox),
        tempfile.TemporaryDirectory(prefix="bench-year-") as tmp,
    ):
        folder = Path(tmp)
        config = write_config(folder, server.url, {"acme": _key("acme")},
                              catalog=f"sqlite:///{folder}/catalog.db")  # fmt: skip
        settings = load_settings(config, {})
        lake = LakeConfig.from_settings(settings)

        def night(run: str) -> tuple[Any, float]:
            for step in ("extract", "transform"):
                run_shard_step(steps[step], settings, "acme", f"{run}-{step}")
            started = time.perf_counter()
            done = publish_shards(settings, ["acme"])
            if done.failed:
                raise RuntimeError(f"the publish failed: {done.failed}")
            return done.counts, time.perf_counter() - started

        first, first_s = night("year")
        files = _lake_files(config)
        before = _snapshots(lake)
        per_day = max(1, round(n / 365))
        _next_night(sandbox, per_day, per_day)
        steady, steady_s = night("steady")
        commits = _snapshots(lake) - before
        # every month rewritten, into tables that exist: the rate a night's rewrite of the
        # month so far runs at (the first publish also made the tables)
        con = open_warehouse(shard_path(settings, "acme"), read_only=True)
        try:
            started = time.perf_counter()
            full = publish_lake(con, lake, ["acme"], full=True)
            full_s = time.perf_counter() - started
        finally:
            con.close()
    rows = int(first["rows"])
    report.add("one workspace-year: lake rows per conversation", round(rows / n, 1), "rows")
    report.add("... live data bytes per conversation", round(files["live_bytes"] / n), "B")
    report.add("... live data files (all tables)", files["live"], "files")
    report.add("... most files of one table", files["most"], "files")
    report.add("... first publish (the year, the tables made)", round(first_s, 2), "s")
    report.add("... its write rate", round(rows / first_s), "rows/s")
    report.add("... every month rewritten (publish --full)", round(full_s, 2), "s")
    report.add("... its write rate (used for a night's rewrite)", round(full.rows / full_s),
               "rows/s")  # fmt: skip
    report.add(f"... steady night ({per_day} new, {per_day} changed): publish",
               round(steady_s, 2), "s")  # fmt: skip
    report.add("... its rows written", int(steady["rows"]), "rows")
    report.add("... its rows written over the year's rows", round(int(steady["rows"]) / rows, 3))
    report.add("... its catalog commits", commits)
    return {
        "rows_per_conversation": rows / n,
        "bytes_per_conversation": files["live_bytes"] / n,
        "files_per_workspace_year": files["live"],
        "write_rows_per_s": full.rows / full_s,
    }


BENCHES = [
    ("dagster-six-workspaces", bench_six_workspaces),
    ("scale-out-per-workspace", bench_per_workspace),
    ("scale-batched", bench_scale_batched),
]
