"""What the Dagster test and the Dagster benchmark (issue 19) both set up: a convo.toml of
several workspaces, a Dagster instance of ``pipelines/dagster/dagster.yaml`` on PostgreSQL,
the definitions' jobs as reconstructable jobs (the multiprocess executor starts each step
in a new process, which must load the job again by itself) and their run config.

One place for it, so that the test and ``make bench`` run the very same setup: a figure
of the benchmark is then a figure of what the test checks.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from functools import cache
from importlib.util import module_from_spec, spec_from_file_location
from pathlib import Path
from types import ModuleType
from typing import Any

from postgres_support import Postgres

__all__ = [
    "DEFINITIONS",
    "ROOT",
    "definitions",
    "most_steps_at_once",
    "postgres_instance",
    "reconstructable_job",
    "reexecute_module",
    "run_config",
    "step_keys",
    "write_config",
]

ROOT = Path(__file__).resolve().parents[1]
DEFINITIONS = ROOT / "pipelines" / "dagster" / "definitions.py"
INSTANCE_YAML = ROOT / "pipelines" / "dagster" / "dagster.yaml"


def write_config(
    folder: Path,
    url: str,
    keys: Mapping[str, str],
    *,
    catalog: str | None = None,
    rate_limit: str = "none",
    step_storage: Path | None = None,
    batch_size: int | None = None,
) -> Path:
    """A convo.toml in ``folder`` reading workspace NAME of the service at ``url`` with
    ``keys[NAME]`` (stored in ``folder/NAME.key``, which a test may rewrite), its warehouse
    and shards under ``folder/data``; with ``catalog`` (a SQLAlchemy URL), a lake there;
    with ``step_storage``, the Dagster steps' outputs there (orchestrator.step_storage);
    with ``batch_size``, that many workspaces per step (orchestrator.batch_size)."""
    folder.mkdir(parents=True, exist_ok=True)
    blocks = []
    for name, key in keys.items():
        (folder / f"{name}.key").write_text(key)
        blocks.append(f'[[workspaces]]\nname = "{name}"\nbase_url = "{url}"\n'
                      f'auth = {{ type = "api_key", key_file = "{name}.key" }}\n')  # fmt: skip
    lake = f'[lake]\ncatalog_uri = "{catalog}"\nwarehouse = "{folder}/lake"\n\n' if catalog else ""
    orchestrator = ""
    if step_storage is not None:
        orchestrator += f'step_storage = "{step_storage}"\n'
    if batch_size is not None:
        orchestrator += f"batch_size = {batch_size}\n"
    if orchestrator:
        lake += f"[orchestrator]\n{orchestrator}\n"

    path = folder / "convo.toml"
    path.write_text(
        f'[service]\nrate_limit = "{rate_limit}"\n\n'
        f'[warehouse]\npath = "{folder}/data/warehouse.duckdb"\n\n'
        f'[auth]\ntoken_store = "{folder}/data/tokens.json"\n\n' + lake + "\n".join(blocks)
    )
    return path


@contextmanager
def postgres_instance(home: Path, postgres: Postgres, database: str) -> Iterator[Any]:
    """A Dagster instance of pipelines/dagster/dagster.yaml in ``home`` (made here) on a new
    PostgreSQL database ``database``. ``DAGSTER_HOME`` and ``DAGSTER_POSTGRES_URL`` are set
    while it is open (the steps' processes inherit them), then restored."""
    import dagster as dg

    home.mkdir(parents=True)
    shutil.copy(INSTANCE_YAML, home / "dagster.yaml")
    url = postgres.url(database=postgres.create_database(database))
    saved = {k: os.environ.get(k) for k in ("DAGSTER_HOME", "DAGSTER_POSTGRES_URL")}
    os.environ |= {"DAGSTER_HOME": str(home), "DAGSTER_POSTGRES_URL": url}
    try:
        with dg.DagsterInstance.from_config(str(home)) as instance:
            yield instance
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def reconstructable_job(name: str) -> Any:
    """Job ``name`` of the definitions, as each step's process loads it again."""
    from dagster._core.definitions.reconstruct import ReconstructableRepository

    repo = ReconstructableRepository.for_file(str(DEFINITIONS), "defs", working_directory=str(ROOT))
    return repo.get_reconstructable_job(name)


@cache
def reexecute_module() -> ModuleType:
    """pipelines/dagster/reexecute.py as a module: the documented re-execution, as it is."""
    spec = spec_from_file_location("convo_dagster_reexecute", DEFINITIONS.with_name("reexecute.py"))
    assert spec is not None and spec.loader is not None
    module = module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@cache
def definitions() -> ModuleType:
    """pipelines/dagster/definitions.py as a module (it is a file, not a package)."""
    spec = spec_from_file_location("convo_dagster_definitions", DEFINITIONS)
    assert spec is not None and spec.loader is not None
    module = module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def run_config(config: Path, *, in_process: bool = False) -> dict[str, Any]:
    """The run config of a job on the settings of ``config``: the definitions' own
    multiprocess settings (three at once), or ``in_process`` (the partitioned assets' job,
    whose executor runs either way)."""
    execution = {"in_process": {}} if in_process else definitions().EXECUTION
    return {"execution": {"config": execution},
            "resources": {"convo": {"config": {"config_path": str(config)}}}}  # fmt: skip


def step_keys(result: Any, event_type: str) -> set[str]:
    """The steps of a run's result with an event of ``event_type`` (e.g. STEP_FAILURE)."""
    return {str(e.step_key) for e in result.all_events if e.event_type_value == event_type}


def most_steps_at_once(instance: Any, run_id: str, prefix: str = "") -> int:
    """The most steps (those whose key starts with ``prefix``) that were running at the same
    moment, from the run's event log."""
    import dagster as dg

    ended = (dg.DagsterEventType.STEP_SUCCESS, dg.DagsterEventType.STEP_FAILURE,
             dg.DagsterEventType.STEP_UP_FOR_RETRY)  # fmt: skip
    edges = []
    for record in instance.all_logs(run_id):
        event = record.dagster_event
        if event is None or not str(event.step_key or "").startswith(prefix):
            continue
        if event.event_type == dg.DagsterEventType.STEP_START:
            edges.append((record.timestamp, 1))
        elif event.event_type in ended:
            edges.append((record.timestamp, -1))
    running = most = 0
    for _, change in sorted(edges):  # at the same instant, an end before a start
        running += change
        most = max(most, running)
    return most
