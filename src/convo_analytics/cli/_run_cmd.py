"""``convo run``: the nightly pipeline, one unattended command safe to schedule."""

from __future__ import annotations

import logging
import sys
from pathlib import Path
from typing import Annotated

import orjson
import typer

from convo_analytics.cli._app import CliState

__all__ = ["NIGHTLY", "run"]

#: The steps, as data, in the repository next to src/.
NIGHTLY = Path(__file__).resolve().parents[3] / "pipelines" / "nightly.py"


def run(
    ctx: typer.Context,
    config: Annotated[
        Path | None,
        typer.Option("--config", "-c", metavar="PATH", help="Config file (as convo --config)."),
    ] = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print the run as one JSON object.")
    ] = False,
    list_steps: Annotated[bool, typer.Option("--list", help="List the steps and exit.")] = False,
) -> None:
    """Run the nightly pipeline: extract, webhook ingest, transform, exports, retention, publish.

    Exit status 0 when every step succeeded, 1 when one failed (the run stops
    there, the published data stays as it was, and the alert goes out), 75 when
    another writer holds the warehouse writers' lock (after run.lock_wait_seconds),
    2 for usage or configuration errors.
    """
    from convo_analytics._run_ids import new_run_id
    from convo_analytics.cli._app import settings_from_context
    from convo_analytics.cli._lock import warehouse_writer
    from convo_analytics.pipeline import run_pipeline

    if config is not None:
        state = ctx.find_object(CliState)
        if state is not None:
            state.config_path = config
    from convo_analytics.pipeline import check_steps, load_steps

    steps = load_steps(NIGHTLY)
    if list_steps:
        for step in steps:
            typer.echo(f"{step.name}: {step.doc.splitlines()[0] if step.doc else ''}")
        return
    settings = settings_from_context(ctx)
    check_steps(steps, settings)  # configuration errors: exit 2, nothing locked or recorded
    logging.basicConfig(
        level=logging.INFO, stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )  # fmt: skip
    logging.getLogger("httpx").setLevel(logging.WARNING)
    with warehouse_writer(settings, "convo run", new_run_id(), publishes=True) as lock:
        result = run_pipeline(steps, settings, lock)
    if as_json:
        sys.stdout.write(orjson.dumps(result.as_json()).decode() + "\n")
    else:
        sys.stdout.write(result.summary_line() + "\n")
    if result.status != "ok":
        raise typer.Exit(1)
