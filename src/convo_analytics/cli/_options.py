"""Options shared by several commands, and the help text of options backed by a setting.

Help must read well in an 80-column terminal (``tests/test_cli_help.py``
renders every command at that width): plain click layout (no rich panels,
which cut long option names), short upper-case metavars, and the default of
every option shown. An option whose value falls back to a setting shows the
setting's default and name, since that is where the value comes from when the
flag is not given.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from convo_analytics.config import REGISTRY

__all__ = ["PLAIN_HELP", "DbOption", "default_of", "setting_option"]

#: Every ``typer.Typer`` takes ``rich_markup_mode=PLAIN_HELP``: click's plain help
#: layout, which wraps the help column and never cuts an option name.
PLAIN_HELP = None


def default_of(setting: str) -> str:
    """``[default: VALUE from SETTING]`` (or ``[from SETTING]`` when it has no default)."""
    value = REGISTRY.get(setting).default
    if value is None or value == "":
        return f"[from {setting}]"
    if isinstance(value, tuple | list):
        value = ",".join(str(v) for v in value)
    elif isinstance(value, bool):
        value = str(value).lower()
    return f"[default: {value} from {setting}]"


def setting_option(flag: str, setting: str, metavar: str, text: str, **more: Any) -> Any:
    """``typer.Option(flag)`` for a value that falls back to ``setting``: its help ends
    with that setting's default and name."""
    return typer.Option(flag, metavar=metavar, help=f"{text} {default_of(setting)}", **more)


DbOption = Annotated[
    Path | None,
    typer.Option(
        "--db", metavar="FILE", help=f"Warehouse file (DuckDB). {default_of('warehouse.path')}"
    ),
]
