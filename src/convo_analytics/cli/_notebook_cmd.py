"""``convo notebook``: Explore's notebooks run without a browser, as a report to read or mail."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import orjson
import typer
from rich.console import Console
from rich.table import Table
from rich.text import Text

from convo_analytics.cli._app import settings_from_context
from convo_analytics.cli._audit_cmd import command_line
from convo_analytics.cli._options import PLAIN_HELP, default_of
from convo_analytics.errors import UserError

__all__ = ["notebook_app"]

notebook_app = typer.Typer(
    rich_markup_mode=PLAIN_HELP,
    name="notebook",
    help="Run Explore's notebooks without a browser: an HTML report and CSVs.",
    no_args_is_help=True,
)

JsonOption = Annotated[bool, typer.Option("--json", help="Print the result as JSON.")]


@notebook_app.command("run")
def run(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument(metavar="NAME", hidden=True)],
    out: Annotated[
        Path,
        typer.Option(
            "--out",
            metavar="DIR",
            help="Folder the report goes to (made when missing): NAME.html and a CSV per "
            "SQL cell, replacing earlier ones of the same names.",
        ),
    ],
    param: Annotated[
        list[str] | None,
        typer.Option(
            "--param",
            "-p",
            metavar="NAME=VALUE",
            help="A parameter's value (repeatable; a choices parameter: once per value). "
            "Default: the notebook's own; from/to: the last 30 days with data, tz: the "
            "first of transform.timezones, channel: every channel.",
        ),
    ] = None,
    workspace: Annotated[
        str | None,
        typer.Option(
            "--workspace",
            metavar="NAME",
            help="Read only this workspace's rows (its name or id). Default: every row.",
        ),
    ] = None,
    published_dir: Annotated[
        Path | None,
        typer.Option(
            "--dir", metavar="DIR", help=f"Snapshots to read. {default_of('publish.dir')}"
        ),
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """Run notebook NAME (see 'convo notebook list') over the published snapshot and
    write its report.

    The report is one self-contained HTML file (parameters, data freshness, each
    cell's chart and table; it loads nothing, so it can be mailed) and a CSV per SQL
    cell holding every row. Prints the files written. Exit status 0 when every cell
    ran; 1 when a cell did not (the report is still written, the cell's error in
    place of its table; one line per such cell on stderr); 2 for usage errors (an
    unknown notebook, parameter or workspace, a value its type refuses, nothing
    published).
    """
    from convo_analytics.audit import auditor
    from convo_analytics.notebooks import parse_param_args, run_notebook, write_report

    params = parse_param_args(param or [])  # a malformed --param: before anything is read
    if out.exists() and not out.is_dir():
        raise UserError(f"--out {out} is a file; name a folder for the report")
    settings = settings_from_context(ctx, {"publish.dir": published_dir})
    audit = auditor(settings)  # a log it could not write stops it now
    result = run_notebook(settings, name, params=params, workspace=workspace)
    try:
        files = write_report(result, out)
    except OSError as exc:
        raise UserError(
            f"--out {out}: the report cannot be written there ({exc.strerror or exc}); "
            "name a folder you can write to"
        ) from None
    if audit is not None:  # the report's files recorded (removed when that cannot be done)
        rows = sum(c.frame.height for c in result.cells if c.frame is not None)
        audit.record_files(
            "notebook.run",
            [files.html, *files.csvs],
            what=command_line(ctx),
            rows=rows,
            workspace=result.scope.workspace_name or workspace,
            detail={"notebook": name, "snapshot_id": result.snapshot_id, "ok": result.ok},
        )
    if as_json:
        doc = {
            "notebook": name,
            "ok": result.ok,
            "html": str(files.html),
            "csvs": [str(p) for p in files.csvs],
            "failures": result.failures,
            "snapshot_id": result.snapshot_id,
        }
        sys.stdout.write(orjson.dumps(doc).decode() + "\n")
    else:
        for path in (files.html, *files.csvs):
            sys.stdout.write(f"{path}\n")
    for line in result.failures:
        sys.stderr.write(f"failed: {' '.join(line.split())}\n")
    if not result.ok:
        raise typer.Exit(1)


@notebook_app.command("list")
def list_cmd(ctx: typer.Context, as_json: JsonOption = False) -> None:
    """List the notebooks by name, with their titles (saved ones over starters)."""
    from convo_analytics.notebooks import list_notebooks

    settings = settings_from_context(ctx)
    found = list_notebooks(settings.require_path("dashboard.notebooks_dir"))
    if as_json:
        rows = [{"name": k, "title": v} for k, v in found.items()]
        sys.stdout.write(orjson.dumps(rows).decode() + "\n")
        return
    table = Table("notebook", "title")
    for key, title in found.items():
        table.add_row(key, Text(title))
    Console(highlight=False, soft_wrap=True).print(table, markup=False)
