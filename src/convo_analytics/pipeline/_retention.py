"""The run's retention step: per workspace, raw payloads, transcripts and received archives
past their days removed, each run's removals listed in a manifest (issue 30; D-RETENTION).

In order, each safe to repeat:

1. per workspace of the warehouse, in one transaction: its raw payloads and transcript
   text past its days removed (``_retention_warehouse``), and what went written to
   ``retention_log``;
2. per archive folder (a workspace's, the flat endpoint's): the files past its days that
   the warehouse has read, written to ``retention_log``, then unlinked
   (``_retention_archives``);
3. the manifest (``retention.manifest_dir/RUN_ID.json``): what this run removed, and what
   an interrupted run logged but never listed; written whole, recorded in the audit trail
   (``retention``, with its SHA-256), its rows marked listed (``_retention_manifest``).

A run killed anywhere leaves each workspace as it was or done, and the next run removes
what is left and lists what the killed one removed. The marts stay as they were: the
lake sees the changed rows by their fingerprints at the next ``convo publish --lake``.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import duckdb

from convo_analytics.config import Settings
from convo_analytics.pipeline._retention_archives import (
    ArchiveGroup,
    archive_groups,
    read_files,
    remove_files,
)
from convo_analytics.pipeline._retention_config import RetentionConfig, retention_config
from convo_analytics.pipeline._retention_manifest import (
    log_removal,
    mark_listed,
    unlisted,
    write_manifest,
)
from convo_analytics.pipeline._retention_warehouse import (
    WorkspaceRemoval,
    remove_in_workspace,
    warehouse_workspaces,
)
from convo_analytics.warehouse import open_warehouse, transaction

__all__ = ["RetentionResult", "check_retention", "run_retention"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RetentionResult:
    """What a retention did: its manifest (path, SHA-256, content)."""

    manifest: Path
    sha256: str
    body: dict[str, Any]

    def counts(self) -> dict[str, Any]:
        """The step's counts (the run's summary line, ``--json`` and ``pipeline_runs``)."""
        totals = self.body["totals"]
        return {
            "removed_anything": self.body["removed_anything"],
            "raw_rows": totals["raw_rows"],
            "conversations": totals["conversations"],
            "messages": totals["messages"],
            "archive_files": totals["archive_files"],
            "archive_bytes": totals["archive_bytes"],
            "archive_kept_unread": totals["archive_kept_unread"],
            "earlier_listed": len(self.body["interrupted_runs"]),
            "manifest": str(self.manifest),
        }


def check_retention(settings: Settings) -> None:
    """The settings read, and the audit log writable (else exit 2 before the run)."""
    from convo_analytics.audit import auditor

    retention_config(settings, warn=False)  # the run says it, once
    auditor(settings)


def run_retention(
    settings: Settings, db_path: Path, run_id: str, *, now: datetime | None = None
) -> RetentionResult:
    """Remove what the retention settings say, list it in the run's manifest and record
    the manifest in the audit trail. ``now``: the moment the days are counted back from."""
    from convo_analytics.audit import auditor

    config = retention_config(settings)
    audit = auditor(settings)
    moment = now or datetime.now(UTC)
    con = open_warehouse(db_path)
    try:
        workspaces = _warehouse(con, config, moment, run_id)
        groups = _archives(con, config, moment, run_id)
        earlier = unlisted(con, run_id, config.archive_dir)
        body = _body(config, run_id, moment, workspaces, groups, earlier)
        path = (config.manifest_dir / f"{run_id}.json").absolute()
        sha256 = write_manifest(path, body)
        if audit is not None:
            audit.record("retention", what=f"convo run {run_id} (retention step)",
                         rows=body["totals"]["removed"],
                         detail={"manifest": str(path), "manifestSha256": sha256})  # fmt: skip
        with transaction(con):
            mark_listed(con, path)
    finally:
        con.close()
    log.info("retention: %s (manifest %s)", "removed" if body["removed_anything"] else
             "nothing to remove", path)  # fmt: skip
    return RetentionResult(path, sha256, body)


def _warehouse(
    con: duckdb.DuckDBPyConnection, config: RetentionConfig, now: datetime, run_id: str
) -> dict[str, tuple[str | None, WorkspaceRemoval]]:
    """Each workspace's removal, one transaction each; by the name the manifest lists it
    under (the warehouse's name for it, else its ``[[workspaces]]`` table's, else its id)."""
    patterns = _recorded_patterns(con) or config.fallback_patterns
    out: dict[str, tuple[str | None, WorkspaceRemoval]] = {}
    for workspace_id, name in warehouse_workspaces(con).items():
        table, days = config.for_workspace(workspace_id, name)
        label = name or table or workspace_id
        with transaction(con):
            removal = remove_in_workspace(con, workspace_id, days, now, run_id, patterns)
            if removal.total:
                log_removal(con, run_id, label, "warehouse", workspace_id, removal.as_json())
        out[label] = (table, removal)
    return out


def _recorded_patterns(con: duckdb.DuckDBPyConnection) -> tuple[str, ...] | None:
    """The fallback patterns the knowledge gaps were found with (None: no marts yet, or
    none recorded): an answer is judged by the words the marts judged it by."""
    rows = con.execute("SELECT fallback_patterns FROM mart_state").fetchall()
    if len(rows) != 1 or rows[0][0] is None:
        return None
    return tuple(rows[0][0])


def _archives(
    con: duckdb.DuckDBPyConnection, config: RetentionConfig, now: datetime, run_id: str
) -> list[ArchiveGroup]:
    groups = archive_groups(config.archive_dir, config.for_archive, read_files(con),
                            now.timestamp())  # fmt: skip
    for group in groups:
        if not group.removed:
            continue
        with transaction(con):  # logged before the first unlink
            log_removal(con, run_id, group.folder, "archive", None, group.as_json())
        remove_files(config.archive_dir, group.removed)
    return groups


def _body(
    config: RetentionConfig,
    run_id: str,
    now: datetime,
    workspaces: dict[str, tuple[str | None, WorkspaceRemoval]],
    groups: list[ArchiveGroup],
    earlier: list[dict[str, Any]],
) -> dict[str, Any]:
    """The manifest: per workspace its days, cutoffs and what went from the warehouse and
    its archive folder; the flat endpoint's archive; what interrupted runs removed."""
    by_folder = {g.folder: g for g in groups}
    listed: dict[str, dict[str, Any]] = {}
    for label, (table, removal) in sorted(workspaces.items()):
        listed[label] = {"configured_as": table, "warehouse": removal.as_json()}
    for folder, group in sorted(by_folder.items()):
        if folder:
            listed.setdefault(folder, {"configured_as": folder})["archive"] = group.as_json()
    flat = by_folder.get("")
    raw_rows = sum(sum(r.raw.values()) for _, r in workspaces.values())
    transcript = [r.transcript for _, r in workspaces.values()]
    totals = {
        "raw_rows": raw_rows,
        "conversations": sum(t.get("conversations", 0) for t in transcript),
        "messages": sum(t.get("messages", 0) for t in transcript),
        "archive_files": sum(len(g.removed) for g in groups),
        "archive_bytes": sum(size for g in groups for _, size in g.removed),
        "archive_kept_unread": sum(g.kept_unread for g in groups),
    }
    totals["removed"] = sum(r.total for _, r in workspaces.values()) + totals["archive_files"]
    return {
        "run_id": run_id,
        "written_at": now.isoformat().replace("+00:00", "Z"),
        "settings": config.as_json(),
        "removed_anything": bool(totals["removed"] or earlier),
        "totals": totals,
        "workspaces": listed,
        "flat_endpoint_archive": flat.as_json() if flat is not None else None,
        "interrupted_runs": earlier,
    }
