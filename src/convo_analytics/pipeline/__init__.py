"""The nightly run (steps in order, recorded in pipeline_runs, alerting on failure) and the
warehouse writers' lock every writing command takes; a workspace's share of it on its own shard."""

from convo_analytics.pipeline._lock import LOCKED_EXIT, WarehouseLocked, WriterLock
from convo_analytics.pipeline._retention import prune_archives
from convo_analytics.pipeline._runner import (
    RunContext,
    RunResult,
    Step,
    StepFailed,
    check_steps,
    load_steps,
    run_pipeline,
)
from convo_analytics.pipeline._shards import (
    ShardWorkspaces,
    run_shard_step,
    shard_path,
    shard_settings,
    shard_workspaces,
)

__all__ = [
    "LOCKED_EXIT",
    "RunContext",
    "RunResult",
    "ShardWorkspaces",
    "Step",
    "StepFailed",
    "WarehouseLocked",
    "WriterLock",
    "check_steps",
    "load_steps",
    "prune_archives",
    "run_pipeline",
    "run_shard_step",
    "shard_path",
    "shard_settings",
    "shard_workspaces",
]
