"""What a report tells: the report itself (``report.ready``) and its failure (``report.failed``).

Both are :class:`notify.Notification` values keyed by (report, workspace,
period), so however often a run is repeated (after a kill, a second run the
same night), each channel gets a period's report once and its failure alert
once. The report goes to its readers: the report's ``recipients`` (else
``notify.email_to``) through its channels, with its files as attachments (the
HTML first, then each CSV in cell order while the total stays within
``reporting.max_attachment_mb``; the text names the folder that holds what was
left out). The failure goes to whoever gets the run's alerts: every configured
channel, the default recipients, no attachment.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from convo_analytics.notify import Attachment, Notification

__all__ = ["ReportJob", "attachments_for", "failed_notice", "ready_notice", "subject_id"]

_TYPES = {".html": "text/html", ".csv": "text/csv"}


@dataclass(frozen=True, slots=True)
class ReportJob:
    """One report to make: the report's name and notebook, the workspace, the period."""

    report: str
    notebook: str
    workspace: str
    schedule: str
    period: str
    first: str
    last: str

    def describe(self) -> str:
        """``weekly for acme, 2026-W47 (2026-11-16 to 2026-11-22)``."""
        days = self.first if self.first == self.last else f"{self.first} to {self.last}"
        return f"{self.report} for {self.workspace}, {self.period} ({days})"


def subject_id(job: ReportJob) -> str:
    """What a report's notifications are about: the report, the workspace, the period."""
    return "\x1f".join((job.report, job.workspace, job.period))


def attachments_for(
    html: Path, csvs: Sequence[Path], *, with_csvs: bool, cap_bytes: int
) -> tuple[list[Attachment], list[Path]]:
    """(what is attached, what is left out): the HTML first, then each CSV in order while
    the total is at most ``cap_bytes``."""
    attached: list[Attachment] = []
    left: list[Path] = []
    total = 0
    for path in [html, *(csvs if with_csvs else ())]:
        size = path.stat().st_size
        if total + size > cap_bytes:
            left.append(path)
            continue
        total += size
        kind = _TYPES.get(path.suffix, "application/octet-stream")
        attached.append(Attachment(str(path.resolve()), path.name, kind))
    return attached, left


def ready_notice(
    job: ReportJob,
    title: str,
    facts: dict[str, Any],
    folder: Path,
    attached: Sequence[Attachment],
    left: Sequence[Path],
    recipients: Sequence[str],
) -> Notification:
    """The report, for its readers (``facts``: snapshotId, publishedAt, dataThrough)."""
    lines = [
        f"{title}: the report {job.describe()}, from notebook {job.notebook}.",
        f"Data published {facts.get('publishedAt') or '?'}, through "
        f"{facts.get('dataThrough') or 'no data'}.",
    ]
    if attached:
        lines.append("Attached: " + ", ".join(a.filename for a in attached) + ".")
    if left:
        lines.append(
            "Not attached (over reporting.max_attachment_mb): "
            + ", ".join(p.name for p in left)
            + f"; they are in {folder}."
        )
    return Notification.create(
        source="report",
        subject_id=subject_id(job),
        kind="report.ready",
        subject=f"{title}: {job.workspace}, {job.period}",
        text="\n".join(lines),
        fields={
            **_job_fields(job),
            "schedule": job.schedule,
            **facts,
            "folder": str(folder),
        },
        attachments=attached,
        recipients=recipients,
    )


def _job_fields(job: ReportJob) -> dict[str, str]:
    """What every notice of a report says of it: which report, notebook, workspace, days."""
    return {
        "report": job.report,
        "notebook": job.notebook,
        "workspace": job.workspace,
        "period": job.period,
        "from": job.first,
        "to": job.last,
    }


def failed_notice(job: ReportJob, why: Sequence[str]) -> Notification:
    """A report that could not be made, for whoever gets the run's alerts."""
    return Notification.create(
        source="report",
        subject_id=subject_id(job),
        kind="report.failed",
        subject=f"report {job.report} failed for {job.workspace}, {job.period}",
        text=f"The report {job.describe()}, from notebook {job.notebook}, failed:\n"
        + "\n".join(f"- {line}" for line in why),
        fields={
            **_job_fields(job),
            "failures": list(why),
        },
    )
