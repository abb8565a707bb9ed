"""Workspaces as partitions on Dagster (issues 19 and 31): six sandbox workspaces (real HTTP)
run by the ``nightly_workspaces`` job in batches of three (orchestrator.batch_size,
D-SCALE-BATCH) with the multiprocess executor, on a PostgreSQL-backed instance into a
PostgreSQL-catalogued Iceberg lake. Every workspace's marts in the lake equal those of a
single ``convo run`` of that workspace alone, and every lake table equals a publish of
each workspace's shard alone; the rollup is the sum over those six runs. One workspace
failing inside a batch (a revoked key) fails alone: the two others of its batch are
published, the step's failure names only it, and the documented re-execution from failure
(pipelines/dagster/reexecute.py) redoes its night alone. One commit per lake table per
batch; every lake publish runs in the ``convo_lake`` pool (at 1: one at a time); the steps
hand each other their outputs through orchestrator.step_storage, never
DAGSTER_HOME/storage; the partitioned assets run one workspace alone; a shard that cannot
be read is left out of its batch's publish."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import duckdb
import pytest

from conftest import RunningSandbox
from dagster_support import (
    definitions,
    most_steps_at_once,
    postgres_instance,
    reconstructable_job,
    reexecute_module,
    run_config,
    step_keys,
    write_config,
)
from lake_support import assert_lake_equals, lake_config, lake_rows

#: West first: its failing night and the RetryPolicy's waits between its tries (2 s, 4 s)
#: then overlap the other workspaces' nights instead of trailing them.
NAMES = ("west", "north", "south", "east", "up", "down")
#: The marts a transform rebuilds, compared row for row (run ids and times left out).
MARTS = ("mart_conversations", "mart_escalations", "mart_guardrail_incidents", "mart_slices",
         "mart_daily_conversations", "mart_daily_messages", "mart_daily_latency",
         "mart_daily_guardrails", "mart_daily_escalations", "mart_daily_durations",
         "mart_daily_percentiles")  # fmt: skip
_VOLATILE = {"run_id", "first_run_id", "last_run_id", "loaded_at", "computed_at", "built_at",
             "updated_at"}  # fmt: skip
#: Seconds the six single runs may take together (they run while the Dagster job does).
SINGLE_RUNS_TIMEOUT = 300


def _key(name: str) -> str:
    return f"sk_test_{name}_0123456789"


def _marts(con: duckdb.DuckDBPyConnection, workspace_id: str) -> dict[str, Any]:
    """The workspace's rows of every mart (of a warehouse, or of the lake read back); a
    mart without a workspace_id column (mart_slices) whole."""
    out = {}
    for table in MARTS:
        cols = [c for (c,) in con.execute(
            "SELECT column_name FROM information_schema.columns WHERE table_name = ? "
            "ORDER BY ordinal_position", [table]).fetchall() if c not in _VOLATILE]  # fmt: skip
        where = "WHERE workspace_id = ?" if "workspace_id" in cols else ""
        rows = con.execute(f"SELECT {', '.join(cols)} FROM {table} {where}",
                           [workspace_id] if where else [])  # fmt: skip
        out[table] = {tuple(map(_plain, r)) for r in rows.fetchall()}
    return out


def _plain(value: Any) -> Any:
    """A value as both sides can hold it (a time's zone object differs, not its instant)."""
    if isinstance(value, datetime):
        return value.astimezone(UTC).isoformat()
    return repr(value) if isinstance(value, list | dict) else value


def _rows(db: Path, sql: str) -> list[tuple[Any, ...]]:
    with duckdb.connect(str(db), read_only=True) as con:
        return con.execute(sql).fetchall()


@contextmanager
def _single_runs(folder: Path, url: str) -> Iterator[Callable[[], dict[str, Path]]]:
    """Start a ``convo run`` of each workspace alone (its own config and warehouse), all at
    once as child processes; yields a function that waits for them (bounded) and returns
    each workspace's warehouse. Any still running at the end are killed."""
    started: dict[str, tuple[subprocess.Popen[bytes], Path]] = {}
    env = {"PATH": "/usr/bin:/bin", "HOME": str(folder)}
    try:
        for name in NAMES:
            config = write_config(folder / name, url, {name: _key(name)})
            log = config.parent / "run.log"
            with log.open("wb") as out:
                proc = subprocess.Popen(
                    [sys.executable, "-m", "convo_analytics.cli", "--config", str(config), "run"],
                    cwd=config.parent, stdout=out, stderr=subprocess.STDOUT, env=env,
                )  # fmt: skip
            started[name] = (proc, log)

        def finish() -> dict[str, Path]:
            deadline = time.monotonic() + SINGLE_RUNS_TIMEOUT
            for name, (proc, log) in started.items():
                try:
                    code = proc.wait(timeout=max(0.1, deadline - time.monotonic()))
                except subprocess.TimeoutExpired:
                    pytest.fail(f"the single runs took over {SINGLE_RUNS_TIMEOUT} s ({name})")
                assert code == 0, f"convo run of {name}: {log.read_text()[-3000:]}"
            return {n: folder / n / "data" / "warehouse.duckdb" for n in NAMES}

        yield finish
    finally:
        for proc, _ in started.values():
            if proc.poll() is None:
                proc.kill()
                proc.wait(timeout=30)


@pytest.fixture
def instance(postgres: Any, tmp_path: Path) -> Iterator[Any]:
    """A Dagster instance of pipelines/dagster/dagster.yaml on its own PostgreSQL database."""
    database = f"dagster_{tmp_path.name[-20:].replace('-', '_')}"
    with postgres_instance(tmp_path / "dagster_home", postgres, database) as found:
        yield found


def test_six_workspaces_in_batches_of_three_on_postgres(
    start_sandbox: Any, instance: Any, postgres: Any, tmp_path: Path
) -> None:
    import dagster as dg

    from convo_analytics.config import load_settings
    from convo_analytics.lake import LakeConfig, read_lake
    from convo_analytics.pipeline import publish_shards

    running: RunningSandbox = start_sandbox(
        conversations=20, days=4, workspaces=[(n, _key(n)) for n in NAMES]
    )
    lake_db = postgres.create_database(f"lake_{tmp_path.name[-20:].replace('-', '_')}")
    keys = {n: _key(n) for n in NAMES} | {"west": "sk_test_revoked_000000"}  # west fails
    storage = tmp_path / "step_storage"  # the steps' outputs: not under DAGSTER_HOME
    config = write_config(tmp_path / "dagster", running.url, keys, batch_size=3,
                          catalog=postgres.url(database=lake_db), step_storage=storage)  # fmt: skip
    lake = LakeConfig.from_settings(load_settings(config, {}))
    ids = {n: running.sandbox.workspaces[f"ws_{n}"].id for n in NAMES}
    job = reconstructable_job("nightly_workspaces")
    nodes = definitions().nightly_workspaces.nodes_in_topological_order
    assert {n.name: n.definition.pool for n in nodes}["workspace_publish"] == "convo_lake"
    instance.event_log_storage.set_concurrency_slots("convo_lake", 1)  # one publish at a time
    # the references, a `convo run` of each workspace alone, run while the job does
    with _single_runs(tmp_path / "single", running.url) as single_runs:
        first = dg.execute_job(job, instance, run_config=run_config(config))
        references = single_runs()
    assert not first.success
    # west fails alone inside its batch (west, north, south): the batch's publish step fails
    # naming only it, and north and south are published
    failures = _failures(first)
    assert set(failures) == {"workspace_publish[west__3]"}, failures
    failure = failures["workspace_publish[west__3]"]
    assert "west: " in failure and "north" not in failure and "south" not in failure
    ran = step_keys(first, "STEP_SUCCESS")
    assert {k for k in ran if k.startswith("workspace_")} == {
        "workspace_night[west__3]", "workspace_night[east__3]", "workspace_publish[east__3]"
    }  # fmt: skip
    assert _materialised(first, "transform") == set(NAMES) - {"west"}, "west's not logged"
    assert _materialised(first, "lake_publish") == set(NAMES) - {"west"}
    shards = config.parent / "data" / "shards"
    assert _rows(shards / "north.duckdb", "SELECT count(*) FROM mart_conversations")[0][0] > 0
    assert not (shards / "_rollup.duckdb").exists(), "no rollup while a workspace is missing"
    assert 2 <= most_steps_at_once(instance, first.run_id) <= 3, "three processes at once, at most"
    assert most_steps_at_once(instance, first.run_id, "workspace_publish") == 1, "pool of 1"
    outputs = storage / first.run_id / "runnable_workspaces" / "result"
    assert sorted(p.name for p in outputs.iterdir()) == ["east__3", "west__3"], "in step_storage"
    _batches_publish_once_each_as_each_shard_alone(lake, shards, ids, tmp_path)

    (config.parent / "west.key").write_text(_key("west"))  # fixed: Dagster retries from failure
    again = reexecute_module().reexecute(first.run_id, instance)  # docs/scale-out.md's way
    failures = {str(e.step_key): str(e.event_specific_data)[:600] for e in again.all_events
                if e.event_type_value in ("STEP_FAILURE", "RUN_FAILURE")}  # fmt: skip
    assert again.success, failures
    assert step_keys(again, "STEP_SUCCESS") == {"workspace_publish[west__3]", "rollup"}
    assert _materialised(again, "extract") == {"west"}, "west's night redone alone"
    assert_lake_equals(lake, shards / "west.duckdb", [ids["west"]])
    assert _snapshots(lake, "mart_conversations") == 3, "one more commit, west's"
    # the rollup read the other batch's outputs of the first run from step_storage
    assert (storage / again.run_id / "workspace_publish[west__3]").is_dir()
    home_storage = tmp_path / "dagster_home" / "storage"
    stored = {p.relative_to(home_storage).parts[1] for p in home_storage.glob("*/*")}
    assert not stored - {"compute_logs"}, f"step outputs under DAGSTER_HOME: {stored}"

    seen: set[str] = set()  # the marts with rows in some workspace: each is checked somewhere
    with read_lake(lake, [m for m in MARTS if m != "mart_slices"]) as published:
        for name in NAMES:
            ws_id = ids[name]
            with duckdb.connect(str(references[name]), read_only=True) as con:
                alone = _marts(con, ws_id)
            assert alone["mart_conversations"], name
            seen |= {table for table, rows in alone.items() if rows}
            # mart_slices has no workspace_id: the lake's slices of this workspace alone
            with read_lake(lake, ["mart_slices"], [ws_id]) as slices:
                assert _marts(slices, ws_id).pop("mart_slices") == alone.pop("mart_slices"), name
            lake_marts = _marts(published, ws_id)
            lake_marts.pop("mart_slices")
            assert lake_marts == alone, name
    assert seen == set(MARTS), "every mart has rows in some workspace, or its check is weak"
    counts = definitions().ROLLUP_COUNTS
    rollup = _rows(shards / "_rollup.duckdb", f"SELECT timezone, date, workspaces, "
                   f"{', '.join(counts)} FROM workspace_rollup ORDER BY 1, 2")  # fmt: skip
    with duckdb.connect() as con:
        each = " UNION ALL ".join(f"SELECT * FROM read_only_{n}.mart_daily_conversations"
                                  for n in NAMES)  # fmt: skip
        for name, path in references.items():
            con.execute(f"ATTACH '{path}' AS read_only_{name} (READ_ONLY)")
        expected = con.execute(
            f"SELECT timezone, date, count(DISTINCT workspace_id), "
            f"{', '.join(f'sum({c})' for c in counts)} FROM ({each}) GROUP BY 1, 2 ORDER BY 1, 2"
        ).fetchall()
    assert rollup == expected and len({r[1] for r in rollup}) >= 4

    assert sorted(instance.get_dynamic_partitions("workspaces")) == sorted(NAMES)
    assert type(instance.run_storage).__name__ == "PostgresRunStorage"
    assert len(instance.get_runs()) == 2
    materialised = instance.fetch_materializations(dg.AssetKey("transform"), limit=20).records
    assert {r.partition_key for r in materialised} == set(NAMES)

    # the partitioned assets: one workspace's run, as a backfill launches it
    before = datetime.now().timestamp()
    partition = dg.execute_job(
        reconstructable_job("workspace_partition"), instance, tags={"dagster/partition": "east"},
        run_config=run_config(config, in_process=True),
    )  # fmt: skip
    assert partition.success
    latest = instance.get_latest_materialization_event(dg.AssetKey("transform"))
    assert latest is not None and latest.timestamp >= before
    assert latest.dagster_event.partition == "east"

    # a shard that cannot be read is left out of its batch's publish; the others are published
    (shards / "bogus.duckdb").write_bytes(b"not a duckdb file" * 100)
    other = lake_config(tmp_path / "other")
    moved = load_settings(config, {}).with_values(
        {"lake.catalog_uri": other.catalog_uri, "lake.warehouse": other.warehouse}, "test"
    )
    done = publish_shards(moved, ["north", "bogus", "south"])
    assert done.published == ["north", "south"] and set(done.failed) == {"bogus"}
    assert done.counts["publishes"] == 1
    assert_lake_equals(other, shards / "north.duckdb", [ids["north"]])
    assert_lake_equals(other, shards / "south.duckdb", [ids["south"]])


def _failures(result: Any) -> dict[str, str]:
    return {str(e.step_key): str(e.event_specific_data) for e in result.all_events
            if e.event_type_value == "STEP_FAILURE"}  # fmt: skip


def _materialised(result: Any, asset: str) -> set[str]:
    return {str(e.event_specific_data.materialization.partition) for e in result.all_events
            if e.event_type_value == "ASSET_MATERIALIZATION"
            and e.event_specific_data.materialization.asset_key.path == [asset]}  # fmt: skip


def _snapshots(config: Any, table: str) -> int:
    loaded = config.open_catalog().load_table((config.namespace, table))
    return len(loaded.metadata.snapshots)


def _batches_publish_once_each_as_each_shard_alone(
    lake: Any, shards: Path, ids: dict[str, str], tmp_path: Path
) -> None:
    """The first run's two batches (west failed in the first): one commit per table and
    batch, and the lake as a publish of each of the five shards alone leaves it."""
    from convo_analytics.lake import publish_lake, read_lake
    from convo_analytics.warehouse import open_warehouse

    assert _snapshots(lake, "mart_conversations") == 2
    alone = lake_config(tmp_path / "alone")
    for name in NAMES[1:]:
        con = open_warehouse(shards / f"{name}.duckdb", read_only=True)
        try:
            publish_lake(con, alone, [name])
        finally:
            con.close()
    assert _snapshots(alone, "mart_conversations") == 5
    five = [ids[n] for n in NAMES[1:]]
    batched, reference = lake_rows(lake, five), lake_rows(alone, five)
    assert batched == reference
    assert batched["mart_conversations"] and batched["mart_slices"]
    with read_lake(lake, ["conversations"]) as con:
        held = {r[0] for r in con.execute("SELECT DISTINCT workspace_id FROM conversations")
                .fetchall()}  # fmt: skip
    assert held == set(five), "north and south of west's batch are published, west is not"
    # the same keys declared (views declare none: the batch hands them over)
    keyed = {
        cfg: {name: cfg.open_catalog().load_table((cfg.namespace, name)).schema()
              .identifier_field_names() for _, name in
              cfg.open_catalog().list_tables(cfg.namespace)}
        for cfg in (lake, alone)
    }  # fmt: skip
    assert keyed[lake] == keyed[alone] and keyed[lake]["conversations"]
    # each workspace's own newest transform and own slices, row for row as alone (not the
    # batch's newest transform for all, nor a slice once per shard that has it)
    for table in ("transform_runs", "mart_slices"):
        whole = {
            cfg: sorted(str(sorted(r.items())) for r in cfg.open_catalog().load_table(
                (cfg.namespace, table)).scan().to_arrow().to_pylist())
            for cfg in (lake, alone)
        }  # fmt: skip
        assert whole[lake] == whole[alone], table


#: Seconds the other writer holds the shard's lock. A step that does not wait fails and is
#: tried again by its RetryPolicy (2 s, then 4 s later), which may then succeed: the test
#: asks for no retry at all, not only for success.
HOLD_SECONDS = 3
_HOLDER = """
import sys, time
from pathlib import Path
from convo_analytics.config import load_settings
from convo_analytics.pipeline import shard_settings, warehouse_writer
settings = shard_settings(load_settings(Path(sys.argv[1]), {}), sys.argv[2])
with warehouse_writer(settings, "convo transform (the test's other writer)"):
    print("held", flush=True)
    time.sleep(float(sys.argv[3]))
"""


def test_a_step_waits_for_a_held_shard_lock(tmp_path: Path) -> None:
    """A Dagster step (a backfill's ``webhook_ingest`` of one workspace) that meets the
    shard's lock held by another process waits for it (orchestrator.step_lock_wait_seconds,
    300 s by default) and succeeds once it is released, where the command line's default
    (run.lock_wait_seconds = 0) stops at once."""
    import select

    import dagster as dg

    from convo_analytics.config import load_settings

    config = write_config(tmp_path / "convo", "http://127.0.0.1:9", {"east": _key("east")})
    assert load_settings(config, {}).get_float("run.lock_wait_seconds") == 0
    (config.parent / "data" / "shards").mkdir(parents=True)
    holder = subprocess.Popen(
        [sys.executable, "-c", _HOLDER, str(config), "east", str(HOLD_SECONDS)],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
    )  # fmt: skip
    try:
        assert holder.stdout is not None
        ready, _, _ = select.select([holder.stdout], [], [], 60)
        assert ready and holder.stdout.readline() == b"held\n", "the other writer took the lock"
        (tmp_path / "dagster_home").mkdir()
        with dg.DagsterInstance.local_temp(str(tmp_path / "dagster_home")) as instance:
            instance.add_dynamic_partitions("workspaces", ["east"])
            result = dg.execute_job(
                reconstructable_job("workspace_partition"), instance,
                tags={"dagster/partition": "east"},
                asset_selection=[dg.AssetKey("webhook_ingest")],
                run_config=run_config(config, in_process=True),
            )  # fmt: skip
            failures = [str(e.event_specific_data)[:400] for e in result.all_events
                        if e.event_type_value == "STEP_FAILURE"]  # fmt: skip
            assert result.success, failures
            assert step_keys(result, "STEP_UP_FOR_RETRY") == set(), "it waited, not retried"
        assert holder.wait(timeout=30) == 0, "the holder had released the lock"
    finally:
        if holder.poll() is None:
            holder.kill()
            holder.wait(timeout=30)


def test_the_orchestrator_extra_locks_the_executors() -> None:
    """dagster-k8s, dagster-celery and dagster-aws (the executors and the S3 IO manager
    docs/scale-out.md configures) are locked under the ``orchestrator`` extra, on the
    release line of the locked dagster, and not in the dev group ``make install`` syncs."""
    import tomllib

    from dagster_support import ROOT

    lock = tomllib.loads((ROOT / "uv.lock").read_text(encoding="utf-8"))
    packages = {p["name"]: p for p in lock["package"]}
    ours = packages["convo-analytics"]
    extra = {d["name"] for d in ours["optional-dependencies"]["orchestrator"]}
    dev = {d["name"] for d in ours["dev-dependencies"]["dev"]}
    minor = int(packages["dagster"]["version"].split(".")[1])  # dagster 1.N: libraries 0.N+16
    for name in ("dagster-k8s", "dagster-celery", "dagster-aws"):
        assert name in extra and name not in dev, name
        assert packages[name]["version"].startswith(f"0.{minor + 16}."), name
