"""``convo reports``: the scheduled reports of convo.toml and where each stands."""

from __future__ import annotations

import sys
from datetime import UTC, datetime
from typing import Annotated, Any

import orjson
import typer
from rich.console import Console
from rich.table import Table
from rich.text import Text

from convo_analytics.cli._app import settings_from_context
from convo_analytics.cli._options import PLAIN_HELP

__all__ = ["reports_app"]

reports_app = typer.Typer(
    rich_markup_mode=PLAIN_HELP,
    name="reports",
    help="Scheduled reports: notebooks `convo run` makes after publishing and sends.",
    no_args_is_help=True,
)


@reports_app.command("list")
def list_reports(
    ctx: typer.Context,
    as_json: Annotated[bool, typer.Option("--json", help="Print the result as JSON.")] = False,
) -> None:
    """List every [[reports]] report per workspace: its notebook, schedule, whether the next
    run makes it (and which period), and its last run."""
    from convo_analytics.reports import check_reports, report_states

    settings = settings_from_context(ctx)
    check_reports(settings)
    rows = report_states(settings, datetime.now(UTC))
    if as_json:
        sys.stdout.write(orjson.dumps({"reports": rows}, default=str).decode() + "\n")
        return
    if not rows:
        sys.stderr.write("no reports: add [[reports]] tables to convo.toml "
                         "(docs/configuration.md, \"Reports\")\n")  # fmt: skip
        return
    table = Table("report", "workspace", "notebook", "schedule", "now", "last run")
    for r in rows:
        table.add_row(Text(r["report"]), Text(r["workspace"]), Text(r["notebook"]),
                      r["schedule"], r["state"], Text(_last(r["last"])))  # fmt: skip
    Console(highlight=False, soft_wrap=True).print(table, markup=False)


def _last(last: dict[str, Any] | None) -> str:
    if last is None:
        return "never"
    said = f"{last['status']} ({last['period']}, {last['finished_at']})"
    failures = last.get("failures") or []
    return f"{said}: {failures[0]}" if failures else said
