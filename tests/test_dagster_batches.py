"""Batches of workspaces on Dagster (issue 31, D-SCALE-BATCH): ``orchestrator.batch_size``
workspaces per step of ``nightly_workspaces`` and per lake publish. Six sandbox workspaces
(real HTTP) in batches of three, the multiprocess executor, a SQLite-backed instance and
lake catalog: two steps of each kind, one commit per lake table per batch, and the lake
holds exactly the rows a publish of each workspace alone (as a step per workspace did)
leaves. One workspace failing inside a batch (a revoked key) fails alone: the two others
of its batch are published, the step's failure names only it, and the re-execution from
that failure redoes its night alone. A shard that cannot be read is left out of its
batch's publish, the others published."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from conftest import RunningSandbox
from dagster_support import (
    reconstructable_job,
    reexecute_module,
    run_config,
    step_keys,
    write_config,
)
from lake_support import assert_lake_equals, lake_config, lake_rows

NAMES = ("west", "north", "south", "east", "up", "down")


def _key(name: str) -> str:
    return f"sk_test_{name}_0123456789"


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


def test_batches_of_three_publish_once_per_batch_and_a_failure_stays_alone(
    start_sandbox: Any, tmp_path: Path
) -> None:
    import dagster as dg

    from convo_analytics.config import load_settings
    from convo_analytics.lake import LakeConfig, publish_lake
    from convo_analytics.lake._read import read_lake
    from convo_analytics.pipeline import publish_shards
    from convo_analytics.warehouse import open_warehouse

    running: RunningSandbox = start_sandbox(
        conversations=10, days=3, workspaces=[(n, _key(n)) for n in NAMES]
    )
    ids = {n: running.sandbox.workspaces[f"ws_{n}"].id for n in NAMES}
    keys = {n: _key(n) for n in NAMES} | {"west": "sk_test_revoked_000000"}  # west fails
    folder = tmp_path / "convo"
    config = write_config(folder, running.url, keys, catalog=f"sqlite:///{tmp_path}/catalog.db",
                          step_storage=tmp_path / "steps", batch_size=3)  # fmt: skip
    settings = load_settings(config, {})
    lake = LakeConfig.from_settings(settings)
    shards = folder / "data" / "shards"
    (tmp_path / "home").mkdir()
    with dg.DagsterInstance.local_temp(str(tmp_path / "home")) as instance:
        first = dg.execute_job(reconstructable_job("nightly_workspaces"), instance,
                               run_config=run_config(config))  # fmt: skip
        assert not first.success
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
        assert not (shards / "_rollup.duckdb").exists(), "no rollup while west is missing"

        # one commit per table and batch: two publishes for five workspaces
        assert _snapshots(lake, "mart_conversations") == 2
        # the lake as a publish of each workspace alone leaves it
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
        # each workspace's own newest transform and own slices, row for row as alone (not
        # the batch's newest transform for all, nor a slice once per shard that has it)
        for table in ("transform_runs", "mart_slices"):
            whole = {
                cfg: sorted(str(sorted(r.items())) for r in cfg.open_catalog().load_table(
                    (cfg.namespace, table)).scan().to_arrow().to_pylist())
                for cfg in (lake, alone)
            }  # fmt: skip
            assert whole[lake] == whole[alone], table

        (folder / "west.key").write_text(_key("west"))  # fixed: re-executed from its failure
        again = reexecute_module().reexecute(first.run_id, instance)
        assert again.success, _failures(again)
        assert step_keys(again, "STEP_SUCCESS") == {"workspace_publish[west__3]", "rollup"}
        assert _materialised(again, "extract") == {"west"}, "west's night redone alone"
    assert_lake_equals(lake, shards / "west.duckdb", [ids["west"]])
    assert _snapshots(lake, "mart_conversations") == 3
    assert (shards / "_rollup.duckdb").exists()

    # a shard that cannot be read is left out of its batch's publish; the others are published
    (shards / "bogus.duckdb").write_bytes(b"not a duckdb file" * 100)
    other = lake_config(tmp_path / "other")
    moved = settings.with_values({"lake.catalog_uri": other.catalog_uri,
                                  "lake.warehouse": other.warehouse}, "test")  # fmt: skip
    done = publish_shards(moved, ["north", "bogus", "south"])
    assert done.published == ["north", "south"] and set(done.failed) == {"bogus"}
    assert done.counts["publishes"] == 1
    assert_lake_equals(other, shards / "north.duckdb", [ids["north"]])
    assert_lake_equals(other, shards / "south.duckdb", [ids["south"]])
