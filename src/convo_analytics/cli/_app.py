"""The root ``convo`` command, shared CLI state, and the ``main()`` entry point.

Error policy (``main``):

* :class:`~convo_analytics.errors.WarehouseLocked` (another writer holds the
  warehouse) -> one line ``<command>: <message>`` on stderr, exit status 75;
* :class:`~convo_analytics.errors.UserError` (including ``ConfigError``) and
  click usage errors -> one line ``error: ... (see 'convo <command> --help')`` on
  stderr, exit status 2, no traceback;
* ``KeyboardInterrupt`` -> exit status 130;
* anything else is a bug and propagates with its traceback.

Commands should return ``None``; to exit with another status raise
``typer.Exit(code)``.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

import typer
from typer._click.exceptions import NoArgsIsHelpError

from convo_analytics import __version__
from convo_analytics.cli._errors import (
    USER_ERROR_EXIT,
    command_path,
    report_error,
    report_locked,
)
from convo_analytics.cli._options import PLAIN_HELP
from convo_analytics.config import ConfigLocation, Settings, find_config_file, load_settings
from convo_analytics.errors import LOCKED_EXIT, UserError, WarehouseLocked

__all__ = [
    "PROG_NAME",
    "CliState",
    "app",
    "config_location_from_context",
    "main",
    "settings_from_context",
]

PROG_NAME = "convo"

app = typer.Typer(
    rich_markup_mode=PLAIN_HELP,
    name=PROG_NAME,
    help=(
        "Analytics pipeline for the hosted Conversational Assistant Service.\n\n"
        "Settings come from convo.toml, environment variables (CONVO_*) and flags; "
        "see 'convo config show'."
    ),
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)


@dataclass
class CliState:
    """Stored in ``ctx.obj`` by the root command; reachable from every subcommand."""

    config_path: Path | None = None


def _show_version(ctx: typer.Context, value: bool) -> None:
    if value and not ctx.resilient_parsing:
        typer.echo(f"{PROG_NAME} {__version__}")
        raise typer.Exit()


@app.callback()
def root(
    ctx: typer.Context,
    config: Annotated[
        Path | None,
        typer.Option(
            "--config",
            "-c",
            metavar="PATH",
            help=(
                "Config file to use. Default: $CONVO_CONFIG, else ./convo.toml if it exists, "
                "else none."
            ),
            show_default=False,
        ),
    ] = None,
    version: Annotated[
        bool,
        typer.Option(
            "--version",
            callback=_show_version,
            is_eager=True,
            help="Show the version and exit.",
        ),
    ] = False,
) -> None:
    """Root options shared by every command."""
    ctx.obj = CliState(config_path=config)


def _state(ctx: typer.Context) -> CliState:
    state = ctx.find_object(CliState)
    return CliState() if state is None else state


def settings_from_context(
    ctx: typer.Context,
    overrides: Mapping[str, object] | None = None,
    *,
    environ: Mapping[str, str] | None = None,
) -> Settings:
    """Load the effective settings for a command.

    ``overrides`` maps dotted setting names to the command's flag values, with
    ``None`` meaning "flag not given", e.g. ``{"sandbox.port": port}``.  The root
    ``--config`` option is taken from the context.
    """
    return load_settings(_state(ctx).config_path, overrides or {}, environ)


def config_location_from_context(
    ctx: typer.Context, environ: Mapping[str, str] | None = None
) -> ConfigLocation | None:
    """The config file the command will use (``None`` if there is none)."""
    return find_config_file(_state(ctx).config_path, environ)


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``convo`` and return its exit status (the console script entry point)."""
    args = list(sys.argv[1:] if argv is None else argv)
    command = typer.main.get_command(app)
    try:
        result = command.main(args=args, prog_name=PROG_NAME, standalone_mode=False)
    except KeyboardInterrupt:
        return 130
    except NoArgsIsHelpError as exc:
        # A group called without a subcommand: its help was already printed
        # (rich prints it while the error is built); add it if it was not.
        if exc.format_message().strip():
            sys.stderr.write(exc.format_message().rstrip() + "\n")
        return USER_ERROR_EXIT
    except WarehouseLocked as exc:
        report_locked(exc.command or command_path(command, args, PROG_NAME), str(exc))
        return LOCKED_EXIT
    except (UserError, typer.TyperException) as exc:
        message = exc.format_message() if isinstance(exc, typer.TyperException) else str(exc)
        report_error(message, command_path(command, args, PROG_NAME, exc))
        return USER_ERROR_EXIT
    except typer.Abort:
        sys.stderr.write("error: aborted\n")
        return 1
    if isinstance(result, int) and not isinstance(result, bool):
        return result
    return 0
