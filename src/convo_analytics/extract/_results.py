"""What an extraction reports: per stream its counts, status and warnings.

A stream is ``ok`` (possibly with warnings), ``partial`` (records may be
missing: a reported total not reached, a list that could not be paged, no
transcript in any detail), ``failed``, or ``unavailable`` (an optional
endpoint the service does not have). A run is ok when no stream is failed
or partial; with ``strict`` a warning fails its stream too. A green run
never hides records it left behind.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from convo_analytics.extract._http import RequestStats

__all__ = ["ExtractResult", "StreamResult", "WorkspacesResult"]

#: Statuses that do not fail a run.
PASSING = ("ok", "unavailable")


@dataclass
class StreamResult:
    stream: str
    status: str = "running"
    pagination: str | None = None
    pages: int = 0
    records: int = 0
    new: int = 0
    changed: int = 0
    unchanged: int = 0
    details: int = 0
    details_missing: int = 0
    #: Records left out: they name a person an erasure removed (D-ERASURE).
    suppressed: int = 0
    stats: RequestStats = field(default_factory=RequestStats)
    bookmark_before: datetime | None = None
    bookmark_after: datetime | None = None
    drift: list[str] = field(default_factory=list)
    #: What may be wrong with the load, each with the setting that fixes it.
    warnings: list[str] = field(default_factory=list)
    #: Why records may be missing (the stream is ``partial``).
    gaps: list[str] = field(default_factory=list)
    #: How the stream was read: values configured, defaulted or detected (the run log).
    shape: dict[str, Any] = field(default_factory=dict)
    error: str | None = None
    seconds: float = 0.0
    #: The workspace id its ``extract_runs`` row was written under (it may be learned later).
    recorded_as: str | None = None

    def finish(self, *, strict: bool) -> None:
        """Settle the status of a stream that ran to its end."""
        if self.status != "running":
            return
        if self.gaps:
            self.status = "partial"
        elif strict and self.warnings:
            self.status = "failed"
            self.error = f"--strict: {len(self.warnings)} warning(s): " + "; ".join(self.warnings)
        else:
            self.status = "ok"
        if self.status == "partial":
            self.error = "; ".join(self.gaps)

    def to_json(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "pagination": self.pagination,
            "requests": self.stats.requests,
            "pages": self.pages,
            "records": self.records,
            "new": self.new,
            "changed": self.changed,
            "unchanged": self.unchanged,
            "details": self.details,
            "detailsMissing": self.details_missing,
            "suppressed": self.suppressed,
            "rateLimited": self.stats.rate_limited,
            "retries": self.stats.retries,
            "serverErrors": self.stats.server_errors,
            "transportErrors": self.stats.transport_errors,
            "durationSeconds": round(self.seconds, 3),
            "bookmarkBefore": self.bookmark_before.isoformat() if self.bookmark_before else None,
            "bookmarkAfter": self.bookmark_after.isoformat() if self.bookmark_after else None,
            "drift": self.drift,
            "warnings": [*self.gaps, *self.warnings],
            "shape": self.shape,
            "error": self.error,
        }

    def summary(self) -> str:
        if self.status == "unavailable":
            return f"unavailable: {self.warnings[0] if self.warnings else 'not served'}"
        if self.status not in ("ok", "partial"):
            return f"FAILED: {self.error}"
        text = (
            f"{self.records} records ({self.new} new, {self.changed} changed), "
            f"{self.details} details, {self.stats.requests} requests, "
            f"{self.stats.rate_limited} answered 429, {self.stats.retries} retries"
        )
        if self.suppressed:
            text += f", {self.suppressed} left out (erased people)"
        if self.status == "partial":
            text = f"PARTIAL: {text}; {self.error}"
        if self.warnings:
            text += f"; {len(self.warnings)} warning(s)"
        return text


@dataclass
class ExtractResult:
    run_id: str
    mode: str
    streams: dict[str, StreamResult]
    seconds: float
    workspace: str = "default"
    workspace_id: str | None = None

    @property
    def ok(self) -> bool:
        return all(s.status in PASSING for s in self.streams.values())

    @property
    def status(self) -> str:
        statuses = {s.status for s in self.streams.values()}
        if "failed" in statuses:
            return "failed"
        return "partial" if "partial" in statuses else "ok"

    def to_json(self) -> dict[str, Any]:
        return {
            "runId": self.run_id,
            "status": self.status,
            "mode": self.mode,
            "workspace": self.workspace,
            "workspaceId": self.workspace_id,
            "durationSeconds": round(self.seconds, 3),
            "streams": {name: s.to_json() for name, s in self.streams.items()},
        }


@dataclass
class WorkspacesResult:
    """One run over several workspaces: each workspace's result; it fails when one does."""

    run_id: str
    mode: str
    workspaces: dict[str, ExtractResult]
    seconds: float

    @property
    def ok(self) -> bool:
        return all(r.ok for r in self.workspaces.values())

    @property
    def status(self) -> str:
        statuses = {r.status for r in self.workspaces.values()}
        return next((s for s in ("failed", "partial") if s in statuses), "ok")

    def failing(self) -> list[str]:
        return [name for name, r in self.workspaces.items() if not r.ok]

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "runId": self.run_id,
            "status": self.status,
            "mode": self.mode,
            "durationSeconds": round(self.seconds, 3),
            "workspaces": {name: r.to_json() for name, r in self.workspaces.items()},
        }
        if len(self.workspaces) == 1:  # one workspace: its streams where they always were
            (only,) = self.workspaces.values()
            out["workspace"], out["streams"] = only.workspace, only.to_json()["streams"]
        return out
