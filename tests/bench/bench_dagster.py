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

Servers run in threads of this process (the rate-limited extracts are bound by the
limit, not by the GIL); PostgreSQL is a throwaway server (tests/postgres_support.py).
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from _common import BenchContext, Report

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


@contextmanager
def _sandbox(conversations: int, rate_limit: str, names: tuple[str, ...]) -> Iterator[Any]:
    from convo_analytics._serving import ServerThread
    from convo_analytics.sandbox import Sandbox, SandboxSettings, create_app

    settings = SandboxSettings(seed=7, conversations=conversations, days=7,
                               until_ms=1_795_000_000_000, rate_limit=rate_limit,
                               workspaces=[(n, _key(n)) for n in names],
                               admin_token="adm_bench_token", crawl_scope="loopback")  # fmt: skip
    with ServerThread(create_app(Sandbox(settings))) as server:
        yield server


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


BENCHES = [
    ("dagster-six-workspaces", bench_six_workspaces),
    ("scale-out-per-workspace", bench_per_workspace),
]
