"""Re-execute a failed ``nightly_workspaces`` run from its failure, on Dagster's public API
(docs/scale-out.md, "Re-execution"): only the failed workspaces' steps and what follows
them (the rollup) run again, reading the other workspaces' outputs from the first run's
step storage (``orchestrator.step_storage``).

The UI's "Re-execute from failure" does the same; this is for a script or a cron job::

    DAGSTER_HOME=... DAGSTER_POSTGRES_URL=... python pipelines/dagster/reexecute.py RUN_ID

It reuses the failed run's run config (executor settings, the ``convo`` resource's
``config_path``), so fix what failed (a key file, the service) first. Exit status 0 when
the re-execution succeeded, 1 when it failed, 2 when the run cannot be re-executed.
"""

from __future__ import annotations

import sys
from pathlib import Path

import dagster as dg

HERE = Path(__file__).resolve().parent


def reexecute(run_id: str, instance: dg.DagsterInstance) -> dg.ExecutionResult:
    """Run again, from its failure, the run ``run_id`` of a job of definitions.py (such as
    ``nightly_workspaces``) on ``instance``, with the failed run's run config: only the
    steps that failed, or did not run, run; the others' outputs are read where the failed
    run's steps stored them.

    The job is ``dg.build_reconstructable_job``'s: each step's process imports
    definitions.py from this folder and calls its ``job_named``, which binds the
    definitions' resources (``convo``, the step storage), as the UI's code location does.
    Raises DagsterInvariantViolationError when the instance holds no run ``run_id``.
    """
    parent = instance.get_run_by_id(run_id)
    if parent is None:
        raise dg.DagsterInvariantViolationError(f"no run {run_id} in this instance")
    job = dg.build_reconstructable_job(
        "definitions", "job_named", (parent.job_name,), reconstructor_working_directory=str(HERE)
    )
    return dg.execute_job(
        job,
        instance,
        run_config=dict(parent.run_config),
        tags={k: v for k, v in parent.tags.items() if k == "dagster/partition"},
        reexecution_options=dg.ReexecutionOptions.from_failure(run_id, instance),
    )


def main(argv: list[str] | None = None) -> int:
    """``reexecute.py RUN_ID`` on the instance of ``DAGSTER_HOME``."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python pipelines/dagster/reexecute.py RUN_ID", file=sys.stderr)
        return 2
    with dg.DagsterInstance.get() as instance:
        try:
            result = reexecute(args[0], instance)
        except dg.DagsterInvariantViolationError as e:
            print(f"reexecute: {e}", file=sys.stderr)
            return 2
        ran = sorted({str(e.step_key) for e in result.all_events if e.is_step_success})
        print(f"run {result.run_id}: {'success' if result.success else 'failure'}; "
              f"steps run again: {', '.join(ran) or 'none'}")  # fmt: skip
        return 0 if result.success else 1


if __name__ == "__main__":
    sys.exit(main())
