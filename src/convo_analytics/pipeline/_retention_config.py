"""``[retention]`` and each workspace's own days, read into what the retention step runs
with (D-CONFIG-BUILDERS; D-RETENTION).

A workspace's ``retention_*_days`` in its ``[[workspaces]]`` table win over
``[retention]``. In the warehouse a workspace is its id: the table whose ``workspace_id``
it is, else the table of the name the warehouse's ``workspaces`` table gives the id,
else the table named as the id. An archive folder ``workspaces/NAME/`` is the table
named NAME; the flat endpoint's files follow ``[retention]``.

``retention.archive_days`` was ``run.archive_retention_days``: the older name is read
when the new one is not set (a deprecated alias; a warning in the run's log says so).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from convo_analytics.config import Settings, Source

__all__ = ["ARCHIVE_ALIAS", "Days", "RetentionConfig", "retention_config"]

log = logging.getLogger(__name__)

#: The deprecated older name of ``retention.archive_days``.
ARCHIVE_ALIAS = "run.archive_retention_days"


@dataclass(frozen=True, slots=True)
class Days:
    """How many days each store keeps (0: kept)."""

    raw_payload: int = 0
    transcript: int = 0
    archive: int = 90

    def as_json(self) -> dict[str, int]:
        return {
            "raw_payload": self.raw_payload,
            "transcript": self.transcript,
            "archive": self.archive,
        }


@dataclass(frozen=True, slots=True)
class _Table:
    name: str
    workspace_id: str | None
    days: Days


@dataclass(frozen=True)
class RetentionConfig:
    """What the retention step runs with."""

    defaults: Days
    archive_dir: Path
    manifest_dir: Path
    #: The fallback patterns of the knowledge gaps (``transform.fallback_patterns``): used
    #: when the marts recorded none (an answer's words are judged before they go).
    fallback_patterns: tuple[str, ...]
    #: Which setting the archive days came from (the manifest says so).
    archive_days_from: str = "retention.archive_days"
    tables: tuple[_Table, ...] = ()

    def for_workspace(self, workspace_id: str, name: str | None) -> tuple[str | None, Days]:
        """The ``[[workspaces]]`` table's name (None: no table) and the days of the
        warehouse's workspace ``workspace_id``, known there as ``name``."""
        rules: tuple[Callable[[_Table], bool], ...] = (
            lambda t: t.workspace_id == workspace_id,
            lambda t: name is not None and t.name == name,
            lambda t: t.name == workspace_id,
        )
        for wanted in rules:
            for table in self.tables:
                if wanted(table):
                    return table.name, table.days
        return None, self.defaults

    def for_archive(self, folder: str) -> Days:
        """The days of the archive folder ``workspaces/FOLDER/`` ('' : the flat endpoint)."""
        for table in self.tables:
            if folder and table.name == folder:
                return table.days
        return self.defaults

    def as_json(self) -> dict[str, Any]:
        return {
            "defaults": self.defaults.as_json(),
            "archive_days_from": self.archive_days_from,
            "workspaces": {t.name: t.days.as_json() for t in self.tables},
        }


def retention_config(settings: Settings, *, warn: bool = True) -> RetentionConfig:
    """The settings' retention, each workspace's own days resolved (``warn``: say in the
    log when the deprecated name is read or ignored)."""
    archive, source = settings.get_int("retention.archive_days"), "retention.archive_days"
    alias = settings.get_int(ARCHIVE_ALIAS)
    if settings.source(ARCHIVE_ALIAS) is not Source.DEFAULT:
        if settings.source("retention.archive_days") is Source.DEFAULT:
            archive, source = alias, ARCHIVE_ALIAS
            if warn:
                log.warning("%s is deprecated: name it retention.archive_days", ARCHIVE_ALIAS)
        elif alias != archive and warn:
            log.warning("%s (%d) is deprecated and ignored: retention.archive_days (%d) is set",
                        ARCHIVE_ALIAS, alias, archive)  # fmt: skip
    defaults = Days(
        settings.get_int("retention.raw_payload_days"),
        settings.get_int("retention.transcript_days"),
        archive,
    )
    tables = tuple(
        _Table(
            spec.name,
            spec.workspace_id,
            Days(
                _own(spec.retention_raw_payload_days, defaults.raw_payload),
                _own(spec.retention_transcript_days, defaults.transcript),
                _own(spec.retention_archive_days, defaults.archive),
            ),
        )
        for spec in settings.workspaces
    )
    return RetentionConfig(
        defaults=defaults,
        archive_dir=settings.require_path("webhooks.archive_dir"),
        manifest_dir=settings.require_path("retention.manifest_dir"),
        fallback_patterns=settings.get_list("transform.fallback_patterns"),
        archive_days_from=source,
        tables=tables,
    )


def _own(value: int | None, default: int) -> int:
    return default if value is None else value
