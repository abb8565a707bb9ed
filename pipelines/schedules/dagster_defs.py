"""The nightly run as Dagster assets (the `orchestrator` extra: `uv sync --extra orchestrator`).

Each step of pipelines/nightly.py becomes an asset that depends on the one
before it, so Dagster shows the lineage extract -> ... -> retention and can
re-materialise from any step; a daily schedule materialises them all. The
steps are the same functions `convo run` runs; Dagster's own run queue takes
the place of `convo run`'s lock (one run at a time: see the tag below).

    dagster dev -f pipelines/schedules/dagster_defs.py
"""

from pathlib import Path

import dagster as dg

from convo_analytics.config import load_settings
from convo_analytics.pipeline import RunContext, Step, load_steps

_NIGHTLY = Path(__file__).resolve().parents[1] / "nightly.py"


def _steps() -> list[Step]:
    return load_steps(_NIGHTLY)


def _asset(step: Step, upstream: str | None) -> dg.AssetsDefinition:
    @dg.asset(
        name=step.name,
        deps=[upstream] if upstream else [],
        description=step.doc,
        group_name="convo_nightly",
        op_tags={"dagster/concurrency_key": "convo-warehouse"},
    )
    def _materialise(context: dg.AssetExecutionContext) -> dg.MaterializeResult:
        settings = load_settings(None, {}, None)
        db = settings.require_path("warehouse.path")
        ctx = RunContext(settings=settings, run_id=context.run_id, db_path=db)
        counts = step.run(ctx)
        for warning in ctx.warnings:  # e.g. reconciliation found differences (D-RUN-WARNING)
            context.log.warning(warning["message"])
        metadata = {k: str(v) for k, v in counts.items()}
        if ctx.warnings:
            metadata["warnings"] = "; ".join(w["message"] for w in ctx.warnings)
        return dg.MaterializeResult(metadata=metadata)

    return _materialise


def _assets() -> list[dg.AssetsDefinition]:
    out, previous = [], None
    for step in _steps():
        out.append(_asset(step, previous))
        previous = step.name
    return out


ASSETS = _assets()
nightly_job = dg.define_asset_job(
    "convo_nightly", selection=dg.AssetSelection.groups("convo_nightly")
)
defs = dg.Definitions(
    assets=ASSETS,
    jobs=[nightly_job],
    schedules=[dg.ScheduleDefinition(job=nightly_job, cron_schedule="15 2 * * *")],
)
