"""Workspaces as shards: one workspace's share of the nightly run, in its own DuckDB file.

Scaling out (issue 19, docs/scale-out.md) runs the nightly steps once per
workspace, several workspaces at once on different workers. DuckDB allows
one writing process per file, so each workspace writes its own shard
(``<warehouse folder>/shards/NAME.duckdb``) under its own writers' lock
(``NAME.duckdb.lock`` beside it, the rule of every warehouse); the
steps are the very functions ``convo run`` runs (``pipelines/nightly.py``),
handed settings narrowed to that workspace. Nothing here schedules, retries
or limits concurrency: the orchestrator (Dagster, ``pipelines/dagster/``) does.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from convo_analytics.config import (
    OAuthAuth,
    Settings,
    WorkspaceConfig,
    load_workspaces,
    select_workspaces,
)
from convo_analytics.pipeline._lock import warehouse_writer
from convo_analytics.pipeline._runner import RunContext, Step

__all__ = ["ShardWorkspaces", "run_shard_step", "shard_path", "shard_settings", "shard_workspaces"]

log = logging.getLogger(__name__)


def shard_path(settings: Settings, name: str) -> Path:
    """Where workspace ``name``'s shard lives: ``shards/NAME.duckdb`` beside the warehouse."""
    return settings.require_path("warehouse.path").parent / "shards" / f"{name}.duckdb"


def shard_settings(settings: Settings, name: str) -> Settings:
    """``settings`` narrowed to workspace ``name``: its ``[[workspaces]]`` entry only, its own
    shard, lock, snapshots, exports and retention manifests, and only its own webhook
    archives (the flat ``webhooks.secret`` and ``run.ingest_paths`` belong to the whole
    installation).
    ``run.lock_file`` is emptied: a shard's lock is always its own, beside the shard (a
    lock file named for the installation would make every shard wait for every other).

    Raises ConfigError when no workspace has that name.
    """
    (chosen,) = select_workspaces(load_workspaces(settings), [name])
    db = shard_path(settings, name)
    folder = db.parent
    overrides: dict[str, object] = {
        "warehouse.path": db,
        "run.lock_file": None,
        "publish.dir": folder / "published" / name,
        "export.dir": folder / "exports" / name,
        "retention.manifest_dir": folder / "retention" / name,
    }
    if not chosen.implicit:
        overrides |= {"webhooks.secret": None, "run.ingest_paths": ()}
    own = tuple(spec for spec in settings.workspaces if spec.name == name)
    return settings.with_values(overrides, f"shard of workspace {name}", workspaces=own)


def run_shard_step(step: Step, settings: Settings, name: str, run_id: str) -> dict[str, Any]:
    """Run one nightly step for workspace ``name`` on its shard, under the shard's lock
    (and, for the snapshot ``publish`` step, its published folder's), taken as every
    writing command takes them (``warehouse_writer``).

    Raises what the step raises (StepFailed, UserError, ...), for the orchestrator to
    retry; the lock dies with its holder, so a killed worker never blocks the retry.
    """
    narrowed = shard_settings(settings, name)
    db = narrowed.require_path("warehouse.path")
    db.parent.mkdir(parents=True, exist_ok=True)
    with warehouse_writer(narrowed, f"{step.name} of workspace {name}", run_id,
                          publishes=step.name == "publish"):  # fmt: skip
        if step.check is not None:
            step.check(narrowed)
        return step.run(RunContext(settings=narrowed, run_id=run_id, db_path=db))


@dataclass(frozen=True)
class ShardWorkspaces:
    """The workspaces an orchestrator may run, and the grants it cannot (yet)."""

    #: Configured workspaces that can authenticate: an API key, a client-credentials
    #: client, or an authorization-code client with a grant in the token store.
    runnable: tuple[str, ...]
    #: Configured OAuth workspaces nobody has logged in to (``convo auth login``).
    awaiting_login: tuple[str, ...]
    #: Grants in the token store with no ``[[workspaces]]`` entry (nothing says where to read).
    unconfigured_grants: tuple[str, ...]


def shard_workspaces(settings: Settings) -> ShardWorkspaces:
    """Which workspaces are partitions: the config's ``[[workspaces]]``, checked against the
    token store's OAuth grants."""
    from convo_analytics.auth import TokenStore

    store = TokenStore.from_settings(settings)
    granted = set(store.workspaces())
    workspaces = load_workspaces(settings)
    runnable: list[str] = []
    waiting: list[str] = []
    for ws in workspaces:
        (runnable if _can_run(ws, granted) else waiting).append(ws.name)
    configured = {w.name for w in workspaces}
    return ShardWorkspaces(tuple(runnable), tuple(waiting),
                           tuple(sorted(granted - configured)))  # fmt: skip


def _can_run(ws: WorkspaceConfig, granted: set[str]) -> bool:
    if isinstance(ws.auth, OAuthAuth):
        return ws.auth.grant == "client_credentials" or ws.name in granted
    return ws.api_key is not None
