"""``convo run``: the nightly pipeline, one unattended command safe to schedule."""

from __future__ import annotations

import logging
import shutil
import sys
import textwrap
from pathlib import Path
from typing import Annotated

import orjson
import typer

from convo_analytics.cli._app import CliState
from convo_analytics.errors import UserError

__all__ = ["NIGHTLY", "run"]

#: The steps, as data, in the repository next to src/.
NIGHTLY = Path(__file__).resolve().parents[3] / "pipelines" / "nightly.py"
#: How the step logs read, on stderr (with --verbose) and in run.log_file.
LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


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
    fail_on_mismatch: Annotated[
        bool,
        typer.Option(
            "--fail-on-mismatch",
            help="Exit 1 when reconciliation finds differences from the service's own summary "
            "(without it the run's status is warning and the exit status 0).",
        ),
    ] = False,
    verbose: Annotated[
        bool,
        typer.Option(
            "--verbose", "-v", help="Log each step on stderr (otherwise warnings and errors only)."
        ),
    ] = False,
) -> None:
    """Run the nightly pipeline: extract, webhook ingest, transform, monitors, exports,
    retention, publish, then the due scheduled reports.

    Prints one summary line on stdout (one JSON object with --json); the step
    logs go to stderr with --verbose, and to run.log_file when it is set.

    Exit status 0 when every step succeeded, also when the run's status is
    warning (reconciliation found differences from the service's own summary:
    the summary line says where), 1 when a step failed (the run stops there, the
    published data stays as it was, and the alert goes out) or, with
    --fail-on-mismatch, when reconciliation found differences, 75 when another
    writer holds the warehouse writers' lock (after run.lock_wait_seconds), 2 for
    usage or configuration errors.
    """
    from convo_analytics._run_ids import new_run_id
    from convo_analytics.cli._app import settings_from_context
    from convo_analytics.pipeline import run_pipeline, warehouse_writer

    if config is not None:
        state = ctx.find_object(CliState)
        if state is not None:
            state.config_path = config
    from convo_analytics.pipeline import check_steps, load_steps

    steps = load_steps(NIGHTLY)
    if list_steps:
        sys.stdout.write(list_text(steps))
        return
    settings = settings_from_context(ctx)
    check_steps(steps, settings)  # configuration errors: exit 2, nothing locked or recorded
    _logging(verbose, settings.get_path("run.log_file"))
    with warehouse_writer(settings, "convo run", new_run_id(), publishes=True) as lock:
        result = run_pipeline(steps, settings, lock)
    if as_json:
        sys.stdout.write(orjson.dumps(result.as_json()).decode() + "\n")
    else:
        sys.stdout.write(result.summary_line() + "\n")
    if result.status == "failed" or (fail_on_mismatch and result.warned("reconciliation")):
        raise typer.Exit(1)


def list_text(steps: list, width: int | None = None) -> str:  # type: ignore[type-arg]
    """Each step's name, then what it does (its whole docstring's first paragraph), wrapped
    at the terminal's width between whole words, never cut."""
    columns = width or shutil.get_terminal_size((100, 24)).columns
    columns = max(40, min(columns, 100))
    out = []
    for step in steps:
        first = (step.doc or "").strip().split("\n\n")[0]
        out.append(step.name)
        text = " ".join(first.split())
        if text:
            out += textwrap.wrap(text, columns, initial_indent="  ", subsequent_indent="  ",
                                 break_long_words=False, break_on_hyphens=False)  # fmt: skip
    return "\n".join(out) + "\n"


def _logging(verbose: bool, log_file: Path | None) -> None:
    """Warnings and errors on stderr (every step's log with ``verbose``); every step's log
    appended to ``log_file`` when one is set."""
    root = logging.getLogger()
    console = logging.StreamHandler(sys.stderr)
    console.setLevel(logging.INFO if verbose else logging.WARNING)
    console.setFormatter(logging.Formatter(LOG_FORMAT))
    root.addHandler(console)
    if log_file is not None:
        try:
            log_file.parent.mkdir(parents=True, exist_ok=True)
            kept = logging.FileHandler(log_file, encoding="utf-8")
        except OSError as exc:
            raise UserError(
                f"run.log_file {log_file} cannot be opened for appending "
                f"({exc.strerror or type(exc).__name__}); set another file (CONVO_RUN_LOG_FILE) "
                "or leave it empty"
            ) from None
        kept.setLevel(logging.INFO)
        kept.setFormatter(logging.Formatter(LOG_FORMAT))
        root.addHandler(kept)
    root.setLevel(logging.INFO)
    logging.getLogger("httpx").setLevel(logging.WARNING)
