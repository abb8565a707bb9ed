"""What an export is written with, built from the settings: the one way to read them.

`convo export summary|guardrails` and the nightly run's ``exports`` step
(pipelines/nightly.py) both call :func:`export_options`, so a run's exports
cut days in the zone, name the workspaces and write where the commands would
with the same settings (decision D-CONFIG-BUILDERS). Readers need no
credential, so the workspaces come without their secrets.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, cast

from convo_analytics.config import WorkspaceConfig, load_workspaces
from convo_analytics.export._guardrails import Format
from convo_analytics.transform import default_zone

if TYPE_CHECKING:
    from convo_analytics.config import Settings

__all__ = ["ExportOptions", "export_options", "recent_days"]


@dataclass(frozen=True, slots=True)
class ExportOptions:
    """An export's zone, workspaces, folder and format."""

    #: The IANA zone days are cut in (checked).
    zone: str
    #: The ``[[workspaces]]`` names and ids (no secret read).
    configured: list[WorkspaceConfig]
    #: Where the guardrail log and its manifest go (``export.dir``); None when the export
    #: writes no folder (a summary goes to a file or stdout).
    directory: Path | None
    #: The guardrail log's format.
    fmt: Format

    @property
    def folder(self) -> Path:
        """:attr:`directory`, for an export that writes one (options built ``to_folder``)."""
        if self.directory is None:
            raise ValueError("export options built with to_folder=False have no folder")
        return self.directory


def export_options(
    settings: Settings,
    *,
    tz: str | None = None,
    fmt: str | None = None,
    to_folder: bool = True,
    named: str = "--tz",
) -> ExportOptions:
    """The export's options from the settings.

    ``tz``: a ``--tz`` flag (else the first of ``transform.timezones``), errors naming the
    zone as ``named``; ``fmt``: a ``--format`` flag, already one of FORMATS (else
    ``run.guardrail_format``); ``to_folder``: the export writes into ``export.dir``,
    which must then be set.
    """
    directory = settings.require_path("export.dir") if to_folder else None
    zone = default_zone(settings, tz, named=named)
    return ExportOptions(
        zone=zone,
        configured=load_workspaces(settings, resolve_secrets=False),
        directory=directory,
        fmt=cast(Format, fmt or settings.get_str("run.guardrail_format")),
    )


def recent_days(settings: Settings, today: date | None = None) -> tuple[date, date]:
    """The nightly exports' days: ``run.export_days`` of them, ending yesterday (UTC)."""
    last = (today or datetime.now(UTC).date()) - timedelta(days=1)
    return last - timedelta(days=settings.get_int("run.export_days") - 1), last
