"""The nightly run (steps in order, recorded in pipeline_runs, alerting on failure) and the
warehouse writers' lock every writing command takes."""

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

__all__ = [
    "LOCKED_EXIT",
    "RunContext",
    "RunResult",
    "Step",
    "StepFailed",
    "WarehouseLocked",
    "WriterLock",
    "check_steps",
    "load_steps",
    "prune_archives",
    "run_pipeline",
]
