"""The nightly run: steps in order under a lock, recorded in pipeline_runs, alerting on failure."""

from convo_analytics.pipeline._lock import LOCKED_EXIT, RunLock, RunLocked
from convo_analytics.pipeline._retention import prune_archives
from convo_analytics.pipeline._runner import (
    RunContext,
    RunResult,
    Step,
    StepFailed,
    load_steps,
    run_pipeline,
)

__all__ = [
    "LOCKED_EXIT",
    "RunContext",
    "RunLock",
    "RunLocked",
    "RunResult",
    "Step",
    "StepFailed",
    "load_steps",
    "prune_archives",
    "run_pipeline",
]
