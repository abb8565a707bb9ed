"""The nightly run (steps in order, recorded in pipeline_runs, alerting on failure) and the
writers' locks every writing command takes (the warehouse's, ``<warehouse>.lock``, and a
snapshot publish's published folder's); a workspace's share of the run on its own shard;
the retention step's removals and their manifest; a batch of shards published into the
lake in one publish."""

from convo_analytics.pipeline._batch_publish import ShardsPublish, publish_shards
from convo_analytics.pipeline._lock import (
    LOCKED_EXIT,
    LockUnavailable,
    WarehouseLocked,
    WriterLock,
    acquire_writer_locks,
    lock_beside,
    publish_lock,
    warehouse_lock,
    warehouse_writer,
)
from convo_analytics.pipeline._retention import RetentionResult, check_retention, run_retention
from convo_analytics.pipeline._retention_config import Days, RetentionConfig, retention_config
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
    "Days",
    "LockUnavailable",
    "RetentionConfig",
    "RetentionResult",
    "RunContext",
    "RunResult",
    "ShardWorkspaces",
    "ShardsPublish",
    "Step",
    "StepFailed",
    "WarehouseLocked",
    "WriterLock",
    "acquire_writer_locks",
    "check_retention",
    "check_steps",
    "load_steps",
    "lock_beside",
    "publish_lock",
    "publish_shards",
    "retention_config",
    "run_pipeline",
    "run_retention",
    "run_shard_step",
    "shard_path",
    "shard_settings",
    "shard_workspaces",
    "warehouse_lock",
    "warehouse_writer",
]
