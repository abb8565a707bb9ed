"""Workspaces as partitions on Dagster (issue 19): six sandbox workspaces (real HTTP) run by
the ``nightly_workspaces`` job with the multiprocess executor, three at once, on a
PostgreSQL-backed instance; each workspace's shard holds the marts a ``convo run`` of all
six computes for it; the rollup is their sum; a failing workspace fails alone and Dagster's
re-execution from failure completes it; the partitioned assets run one workspace alone."""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import duckdb
import pytest

from conftest import RunningSandbox

ROOT = Path(__file__).resolve().parents[1]
DEFS = ROOT / "pipelines" / "dagster" / "definitions.py"
NAMES = ("north", "south", "east", "west", "up", "down")
#: The marts a transform rebuilds, compared row for row (run ids and times left out).
MARTS = ("mart_conversations", "mart_escalations", "mart_guardrail_incidents", "mart_slices",
         "mart_daily_conversations", "mart_daily_messages", "mart_daily_latency",
         "mart_daily_guardrails", "mart_daily_escalations", "mart_daily_durations",
         "mart_daily_percentiles")  # fmt: skip
_VOLATILE = {"run_id", "first_run_id", "last_run_id", "loaded_at", "computed_at", "built_at",
             "updated_at"}  # fmt: skip


def _key(name: str) -> str:
    return f"sk_test_{name}_0123456789"


def _config(folder: Path, url: str, catalog: str | None = None) -> Path:
    """A convo.toml reading the six workspaces, each by its key file, into ``folder`` (and
    publishing into the lake of ``catalog``, a PostgreSQL-backed Iceberg catalog)."""
    folder.mkdir(parents=True, exist_ok=True)
    blocks = []
    for name in NAMES:
        (folder / f"{name}.key").write_text(_key(name))
        blocks.append(f'[[workspaces]]\nname = "{name}"\nbase_url = "{url}"\n'
                      f'auth = {{ type = "api_key", key_file = "{name}.key" }}\n')  # fmt: skip
    path = folder / "convo.toml"
    path.write_text(
        f'[service]\nrate_limit = "none"\n\n[warehouse]\npath = "{folder}/data/warehouse.duckdb"\n'
        f'\n[auth]\ntoken_store = "{folder}/data/tokens.json"\n\n'
        + (f'[lake]\ncatalog_uri = "{catalog}"\nwarehouse = "{folder}/lake"\n\n' if catalog else "")
        + "\n".join(blocks)
    )
    return path


def _marts(db: Path | duckdb.DuckDBPyConnection, workspace_id: str) -> dict[str, Any]:
    """The workspace's rows of every mart (of a warehouse file, or of the lake read back)."""
    con = db if isinstance(db, duckdb.DuckDBPyConnection) else duckdb.connect(str(db), True)
    try:
        out = {}
        for table in MARTS:
            cols = [c for (c,) in con.execute(
                "SELECT column_name FROM information_schema.columns WHERE table_name = ? "
                "ORDER BY ordinal_position", [table]).fetchall() if c not in _VOLATILE]  # fmt: skip
            where = "WHERE workspace_id = ?" if "workspace_id" in cols else ""
            params = [workspace_id] if where else []
            rows = con.execute(f"SELECT {', '.join(cols)} FROM {table} {where}", params)
            out[table] = {tuple(map(_plain, r)) for r in rows.fetchall()}
        return out
    finally:
        con.close()


def _plain(value: Any) -> Any:
    """A value as both sides can hold it (a time's zone object differs, not its instant)."""
    if isinstance(value, datetime):
        return value.astimezone(UTC).isoformat()
    return repr(value) if isinstance(value, list | dict) else value


def _rows(db: Path, sql: str) -> list[tuple[Any, ...]]:
    con = duckdb.connect(str(db), read_only=True)
    try:
        return con.execute(sql).fetchall()
    finally:
        con.close()


@pytest.fixture
def instance(postgres: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """A Dagster instance of pipelines/dagster/dagster.yaml on its own PostgreSQL database."""
    import dagster as dg

    home = tmp_path / "dagster_home"
    home.mkdir()
    shutil.copy(ROOT / "pipelines" / "dagster" / "dagster.yaml", home / "dagster.yaml")
    database = postgres.create_database(f"dagster_{tmp_path.name[-20:].replace('-', '_')}")
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    monkeypatch.setenv("DAGSTER_POSTGRES_URL", postgres.url(database=database))
    with dg.DagsterInstance.get() as found:
        yield found


def _job(name: str) -> Any:
    from dagster._core.definitions.reconstruct import ReconstructableRepository

    repo = ReconstructableRepository.for_file(str(DEFS), "defs", working_directory=str(ROOT))
    return repo.get_reconstructable_job(name)


def _run_config(config: Path) -> dict[str, Any]:
    from importlib.util import module_from_spec, spec_from_file_location

    spec = spec_from_file_location("convo_dagster_definitions", DEFS)
    assert spec is not None and spec.loader is not None
    module = module_from_spec(spec)
    spec.loader.exec_module(module)
    return {"execution": {"config": module.EXECUTION},
            "resources": {"convo": {"config": {"config_path": str(config)}}}}  # fmt: skip


def _failures(result: Any) -> dict[str, str]:
    return {str(e.step_key): str(e.event_specific_data)[:600] for e in result.all_events
            if e.event_type_value in ("STEP_FAILURE", "RUN_FAILURE")}  # fmt: skip


def _most_at_once(instance: Any, run_id: str) -> int:
    """The most steps that were running at the same moment, from the run's event log."""
    import dagster as dg

    edges = []
    for record in instance.all_logs(run_id):
        event = record.dagster_event
        if event is None:
            continue
        if event.event_type == dg.DagsterEventType.STEP_START:
            edges.append((record.timestamp, 1))
        elif event.event_type in (dg.DagsterEventType.STEP_SUCCESS,
                                  dg.DagsterEventType.STEP_FAILURE,
                                  dg.DagsterEventType.STEP_UP_FOR_RETRY):  # fmt: skip
            edges.append((record.timestamp, -1))
    running = most = 0
    for _, change in sorted(edges, key=lambda e: (e[0], e[1])):
        running += change
        most = max(most, running)
    return most


def test_six_workspaces_three_at_once_on_postgres(
    start_sandbox: Any, instance: Any, postgres: Any, tmp_path: Path
) -> None:
    import dagster as dg

    from convo_analytics.config import load_settings
    from convo_analytics.lake import LakeConfig, read_lake

    running: RunningSandbox = start_sandbox(
        conversations=30, days=5, workspaces=[(n, _key(n)) for n in NAMES]
    )
    # the reference: one `convo run` of all six workspaces into one warehouse
    reference = _config(tmp_path / "reference", running.url)
    done = subprocess.run(
        [sys.executable, "-m", "convo_analytics.cli", "--config", str(reference), "run"],
        cwd=reference.parent, capture_output=True, text=True, timeout=300,
        env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    reference_db = reference.parent / "data" / "warehouse.duckdb"

    lake_db = postgres.create_database(f"lake_{tmp_path.name[-20:].replace('-', '_')}")
    config = _config(tmp_path / "dagster", running.url, postgres.url(database=lake_db))
    (config.parent / "west.key").write_text("sk_test_revoked_000000")  # west fails
    job = _job("nightly_workspaces")
    run_config = _run_config(config)
    first = dg.execute_job(job, instance, run_config=run_config)
    assert not first.success
    failed = {e.step_key for e in first.all_events if e.event_type_value == "STEP_FAILURE"}
    assert failed == {"workspace_night[west]"}, "west fails alone"
    shards = config.parent / "data" / "shards"
    assert _rows(shards / "north.duckdb", "SELECT count(*) FROM mart_conversations")[0][0] > 0
    assert not (shards / "_rollup.duckdb").exists(), "no rollup while a workspace is missing"
    assert 2 <= _most_at_once(instance, first.run_id) <= 3, "three processes at once, at most"

    (config.parent / "west.key").write_text(_key("west"))  # fixed: Dagster retries from failure
    again = dg.execute_job(
        job, instance, run_config=run_config,
        reexecution_options=dg.ReexecutionOptions.from_failure(first.run_id, instance),
    )  # fmt: skip
    assert again.success, _failures(again)
    redone = {e.step_key for e in again.all_events if e.event_type_value == "STEP_SUCCESS"}
    assert redone == {"workspace_night[west]", "rollup"}

    lake = LakeConfig.from_settings(load_settings(config, {}))
    for name in NAMES:
        ws_id = running.sandbox.workspaces[f"ws_{name}"].id
        published = _marts(read_lake(lake, MARTS, [ws_id]), ws_id)
        whole = _marts(reference_db, ws_id)
        assert published["mart_conversations"], name
        assert published.pop("mart_slices") <= whole.pop("mart_slices"), name  # shared
        assert published == whole, name
    rollup = _rows(shards / "_rollup.duckdb", "SELECT timezone, date, workspaces, conversations, "
                   "resolved, leads_qualified FROM workspace_rollup ORDER BY 1, 2")  # fmt: skip
    expected = _rows(reference_db, "SELECT timezone, date, count(DISTINCT workspace_id), "
                     "sum(conversations), sum(resolved), sum(leads_qualified) "
                     "FROM mart_daily_conversations GROUP BY 1, 2 ORDER BY 1, 2")  # fmt: skip
    assert rollup == expected and len(rollup) >= 5

    assert sorted(instance.get_dynamic_partitions("workspaces")) == sorted(NAMES)
    assert type(instance.run_storage).__name__ == "PostgresRunStorage"
    assert len(instance.get_runs()) == 2
    materialised = instance.fetch_materializations(dg.AssetKey("transform"), limit=20).records
    assert {r.partition_key for r in materialised} == set(NAMES)

    # the partitioned assets: one workspace's run, as a backfill launches it
    before = datetime.now().timestamp()
    partition = dg.execute_job(
        _job("workspace_partition"), instance, tags={"dagster/partition": "east"},
        run_config={"resources": run_config["resources"],
                    "execution": {"config": {"in_process": {}}}},
    )  # fmt: skip
    assert partition.success
    latest = instance.get_latest_materialization_event(dg.AssetKey("transform"))
    assert latest is not None and latest.timestamp >= before
    assert latest.dagster_event.partition == "east"
