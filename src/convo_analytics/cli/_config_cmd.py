"""``convo config``: inspect the effective configuration (secrets always masked)."""

from __future__ import annotations

import sys
from typing import Annotated

import orjson
import typer
from rich.console import Console
from rich.table import Table
from rich.text import Text

from convo_analytics.cli._app import config_location_from_context, settings_from_context
from convo_analytics.cli._options import PLAIN_HELP

__all__ = ["config_app"]

config_app = typer.Typer(
    rich_markup_mode=PLAIN_HELP,
    name="config",
    help="Inspect the effective configuration.",
    no_args_is_help=True,
)


@config_app.command("show")
def show(
    ctx: typer.Context,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")] = False,
) -> None:
    """Show every setting's effective value and where it came from.

    Sources, highest precedence first: flag, env, file, default.  Secrets are
    shown as *** when set and as (unset) / null otherwise.
    """
    from convo_analytics.extract import source_description

    settings = settings_from_context(ctx)
    shown = settings.display()
    endpoints = source_description(settings)
    config_file = None if settings.config_path is None else str(settings.config_path)
    if as_json:
        payload = {"config_file": config_file, "settings": shown, "extract_source": endpoints}
        sys.stdout.write(orjson.dumps(payload, option=orjson.OPT_INDENT_2).decode() + "\n")
        return
    console = Console(highlight=False)
    if not console.is_terminal:  # piped: do not squeeze the table into 80 columns
        console = Console(highlight=False, width=200)
    title = f"config file: {config_file} ({settings.config_reason})" if config_file else None
    table = Table(title=title or "config file: none", title_justify="left")
    table.add_column("setting", no_wrap=True)
    table.add_column("value", overflow="fold")
    table.add_column("source", overflow="fold")
    table.add_column("env var", overflow="fold")
    for name, row in shown.items():
        value = row["value"]
        if value is None:
            cell = Text("(unset)", style="dim")
        elif isinstance(value, list):
            cell = Text(", ".join(str(item) for item in value))
        else:
            cell = Text(str(value).lower() if isinstance(value, bool) else str(value))
        source = str(row["source"])
        origin = str(row["origin"])
        source_cell = Text(source if origin == source else f"{source}: {origin}")
        table.add_row(Text(name), cell, source_cell, Text(str(row["env"])))
    console.print(table)
    if endpoints:
        console.print("[extract.streams] and [extract.fields] as configured:", markup=False)
        console.print(orjson.dumps(endpoints, option=orjson.OPT_INDENT_2).decode(), markup=False)


@config_app.command("path")
def path(ctx: typer.Context) -> None:
    """Print the config file in use, or "none".

    Looked up in this order: --config, $CONVO_CONFIG, ./convo.toml.
    """
    location = config_location_from_context(ctx)
    typer.echo("none" if location is None else str(location.path))
