"""The reports step: make each due report, write its files, record it, and send it.

:func:`run_reports` is what ``convo run`` calls after publishing. For each
enabled ``[[reports]]`` table and each of its workspaces whose period is due
(``_schedule``) and not done (``_log``), it runs the notebook over the
published snapshot, narrowed to that workspace's rows (``run_notebook`` with
``workspace=``), with the report's params and the period's ``from``/``to``
(unless the params set them); writes the HTML and CSVs to
``reporting.out_dir/REPORT/WORKSPACE/PERIOD/``; records the report's
notification in the delivery log (and delivers it through the report's
channels); and only then writes the ``ok`` line of the report log. A run killed
before that line makes the report again at the next run, whose notification
has the same key: the delivery log sends it once. A run killed after it leaves
the delivery pending; the run's end (``send_alert``) and every later run
deliver it.

A report that fails (a cell error, a notebook or workspace that cannot be
found, files that cannot be written) is a ``failed`` line with its failures,
and a ``report.failed`` notification to every configured channel, once per
report, workspace and period. Nothing here fails the step: its counts say what
was made and what failed, and the run's status stays the data's (decision
D-NOTEBOOK-SCHEDULED-REPORTS).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from convo_analytics.audit import AuditError, record_event
from convo_analytics.config import ReportSpec, Settings, load_workspaces
from convo_analytics.errors import UserError
from convo_analytics.notify import NotifyConfig, notify_config, send
from convo_analytics.reports._log import append_run, done_periods, read_runs
from convo_analytics.reports._notice import (
    ReportJob,
    attachments_for,
    failed_notice,
    ready_notice,
)
from convo_analytics.reports._schedule import due_period

__all__ = [
    "ReportingSettings",
    "check_reports",
    "due_jobs",
    "report_timezone",
    "reporting_settings",
    "run_reports",
]

log = logging.getLogger(__name__)

#: The settings that make each channel, for messages.
_CHANNEL_SETTING = {
    "email": "notify.smtp_host (CONVO_NOTIFY_SMTP_HOST)",
    "webhook": "notify.webhook_url (CONVO_NOTIFY_WEBHOOK_URL)",
    "slack": "notify.slack_webhook_url (CONVO_NOTIFY_SLACK_WEBHOOK_URL)",
}
#: The channels a report goes through when its table names none (those configured).
DEFAULT_CHANNELS = ("email", "webhook")


@dataclass(frozen=True, slots=True)
class ReportingSettings:
    """The reporting settings a run needs, read once from the configuration."""

    enabled: bool
    out_dir: Path
    log: Path
    attach_csvs: bool
    cap_bytes: int
    default_timezone: str
    workspaces: tuple[str, ...]


def reporting_settings(settings: Settings) -> ReportingSettings:
    return ReportingSettings(
        enabled=settings.get_bool("reporting.enabled"),
        out_dir=settings.require_path("reporting.out_dir"),
        log=settings.require_path("reporting.log"),
        attach_csvs=settings.get_bool("reporting.attach_csvs"),
        cap_bytes=int(settings.get_float("reporting.max_attachment_mb") * 1024 * 1024),
        default_timezone=(settings.get_list("transform.timezones") or ["UTC"])[0],
        workspaces=tuple(w.name for w in load_workspaces(settings, resolve_secrets=False)),
    )


def report_timezone(spec: ReportSpec, default: str) -> str:
    """The zone a report's days are cut in: its ``tz`` parameter, else ``default``."""
    given = spec.params.get("tz")
    return given[-1] if given else default


def check_reports(settings: Settings) -> None:
    """What no run could fix, before ``convo run`` locks anything (UserError): a workspace
    that is not configured, a channel that is not, recipients without email, a ``tz``
    that is not a time zone."""
    if not settings.get_bool("reporting.enabled") or not settings.reports:
        return
    chosen = reporting_settings(settings)
    configured = {c.name for c in notify_config(settings).channels}
    for i, spec in enumerate(settings.reports):
        where = f"[[reports]] #{i + 1} ({spec.name})"
        for name in spec.workspaces:
            if name not in chosen.workspaces:
                raise UserError(
                    f"{where} workspaces: {name!r} is not a configured workspace (there are: "
                    f"{', '.join(chosen.workspaces)}); fix the name or add its [[workspaces]] table"
                )
        for channel in spec.channels or ():
            if channel not in configured:
                raise UserError(
                    f"{where} channels: {channel} is not configured; set "
                    f"{_CHANNEL_SETTING[channel]} or remove {channel} from its channels"
                )
        if spec.recipients and "email" not in configured:
            raise UserError(
                f"{where} recipients: email is not configured; set {_CHANNEL_SETTING['email']} "
                "(and notify.email_from), or remove its recipients"
            )
        if spec.recipients and spec.channels is not None and "email" not in spec.channels:
            raise UserError(
                f'{where} recipients: its channels leave out email; add "email" to its '
                "channels or remove its recipients"
            )
        tz = report_timezone(spec, chosen.default_timezone)
        try:
            ZoneInfo(tz)
        except (ZoneInfoNotFoundError, ValueError):
            raise UserError(
                f"{where} params.tz: {tz!r} is not an IANA time zone; use one such as UTC or "
                "Europe/Berlin"
            ) from None


def due_jobs(
    settings: Settings,
    now: datetime,
    done: set[tuple[str, str, str]],
    workspaces: Sequence[str] | None = None,
) -> tuple[list[tuple[ReportSpec, ReportJob]], int]:
    """The reports to make now (each report's workspaces, ``workspaces`` only when given),
    and how many were due but are done already."""
    chosen = reporting_settings(settings)
    jobs: list[tuple[ReportSpec, ReportJob]] = []
    already = 0
    for spec in settings.reports:
        if not spec.enabled:
            continue
        today = now.astimezone(ZoneInfo(report_timezone(spec, chosen.default_timezone))).date()
        period = due_period(spec.schedule, spec.weekday, today)
        if period is None:
            continue
        for workspace in spec.workspaces or chosen.workspaces:
            if workspaces is not None and workspace not in workspaces:
                continue
            if (spec.name, workspace, period.label) in done:
                already += 1
                continue
            jobs.append((spec, ReportJob(
                report=spec.name, notebook=spec.notebook, workspace=workspace,
                schedule=spec.schedule, period=period.label,
                first=period.first.isoformat(), last=period.last.isoformat(),
            )))  # fmt: skip
    return jobs, already


def run_reports(
    settings: Settings,
    run_id: str | None = None,
    *,
    now: datetime | None = None,
    workspaces: Sequence[str] | None = None,
) -> dict[str, Any]:
    """Make, record and send every due report (see the module's docstring); the step's
    counts. Never raises: a problem of the step itself is its counts' ``error``."""
    if not settings.get_bool("reporting.enabled"):
        return {"skipped": "reporting.enabled is false"}
    if not any(s.enabled for s in settings.reports):
        return {"reports": 0}
    try:
        return _run(settings, run_id, now or datetime.now(UTC), workspaces)
    except UserError as exc:  # e.g. the report log's folder cannot be written
        log.error("reports could not be made: %s", exc)
        return {"error": str(exc)}
    except Exception as exc:  # never the run's failure; the message may hold anything
        log.error("reports could not be made: %s", type(exc).__name__)
        return {"error": f"reports could not be made ({type(exc).__name__})"}


def _run(
    settings: Settings, run_id: str | None, now: datetime, workspaces: Sequence[str] | None
) -> dict[str, Any]:
    chosen = reporting_settings(settings)
    jobs, already = due_jobs(settings, now, done_periods(read_runs(chosen.log)), workspaces)
    counts: dict[str, Any] = {
        "reports": sum(1 for s in settings.reports if s.enabled),
        "due": len(jobs),
        "already_made": already,
        "made": 0,
        "failed": 0,
    }
    if not jobs:
        return counts
    config = notify_config(settings)
    failures: list[str] = []
    delivered = pending = 0
    for spec, job in jobs:
        outcome, said, summary = _make(settings, chosen, config, spec, job, run_id)
        counts[outcome] += 1
        failures += [f"{job.describe()}: {line}" for line in said]
        if summary is not None:
            delivered, pending = delivered + summary.delivered, summary.pending
    counts["deliveries"] = {"delivered": delivered, "pending": pending}
    if failures:
        counts["failures"] = failures
    return counts


def _iso(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def _make(
    settings: Settings,
    chosen: ReportingSettings,
    config: NotifyConfig,
    spec: ReportSpec,
    job: ReportJob,
    run_id: str | None,
) -> tuple[str, list[str], Any]:
    """Make one report: ("made" or "failed", its failures, the delivery summary)."""
    from convo_analytics.notebooks import run_notebook, write_report

    started, clock = datetime.now(UTC), time.perf_counter()
    params = {name: list(values) for name, values in spec.params.items()}
    params.setdefault("from", [job.first])
    params.setdefault("to", [job.last])
    folder = chosen.out_dir / job.report / job.workspace / job.period
    row: dict[str, Any] = {
        "report": job.report, "workspace": job.workspace, "period": job.period,
        "schedule": job.schedule, "from": job.first, "to": job.last,
        "notebook": job.notebook, "run_id": run_id, "started_at": _iso(started),
    }  # fmt: skip
    failures: list[str] = []
    facts: dict[str, Any] = {}
    files = None
    try:
        run = run_notebook(settings, spec.notebook, params=params, workspace=job.workspace)
        failures = run.failures
        facts = {"snapshotId": run.snapshot_id, "publishedAt": run.published_at,
                 "dataThrough": run.data_through}  # fmt: skip
        files = write_report(run, folder)  # a failed run's report too: it shows the errors
        row.update(dir=str(folder), html=files.html.name, csvs=[p.name for p in files.csvs])
    except UserError as exc:
        failures = [str(exc)]
    except OSError as exc:
        failures = [f"the report's files cannot be written in {folder} "
                    f"({exc.strerror or type(exc).__name__})"]  # fmt: skip
    except Exception as exc:  # a bug or a crash of the query process: this report fails
        failures = [f"the notebook run failed ({type(exc).__name__})"]
    row.update(snapshot_id=facts.get("snapshotId"), data_through=facts.get("dataThrough"))
    if failures or files is None:
        failures = failures or ["no report was written"]
        log.error("report %s failed: %s", job.describe(), failures[0])
        summary = send(config, failed_notice(job, failures))
        _finish(chosen, row, "failed", clock, failures=failures, key=None)
        return "failed", failures, summary
    attached, left = attachments_for(files.html, files.csvs, with_csvs=chosen.attach_csvs,
                                     cap_bytes=chosen.cap_bytes)  # fmt: skip
    recipients = spec.recipients or ()
    notice = ready_notice(job, run.notebook.title, facts, folder, attached, left, recipients)
    wanted = spec.channels if spec.channels is not None else DEFAULT_CHANNELS
    through = NotifyConfig(
        channels=tuple(c for c in config.channels if c.name in wanted),
        log_path=config.log_path,
        policy=config.policy,
        secrets=config.secrets,
    )
    try:  # recorded before it is handed out: a report the trail cannot hold is not sent
        record_event(
            settings,
            "report.sent",
            what=f"report {job.report} ({job.notebook}) for {job.first}..{job.last}",
            rows=sum(c.frame.height for c in run.cells if c.frame is not None),
            workspace=job.workspace,
            detail={
                "key": notice.key,
                "period": job.period,
                "channels": [c.name for c in through.channels],
                "recipients": len(recipients),
                "files": [p.name for p in (files.html, *files.csvs)],
            },
        )
    except AuditError as exc:
        failures = [f"the audit record cannot be written ({exc}); the report is not sent"]
        log.error("report %s failed: %s", job.describe(), failures[0])
        summary = send(config, failed_notice(job, failures))
        _finish(chosen, row, "failed", clock, failures=failures, key=None)
        return "failed", failures, summary
    summary = send(through, notice)  # recorded (synced) before any channel is tried
    _finish(chosen, row, "ok", clock, failures=[], key=notice.key)
    log.info("report %s made and sent through %s", job.describe(),
             ", ".join(c.name for c in through.channels) or "no channel")  # fmt: skip
    return "made", [], summary


def _finish(
    chosen: ReportingSettings,
    row: dict[str, Any],
    status: str,
    clock: float,
    *,
    failures: list[str],
    key: str | None,
) -> None:
    row.update(status=status, finished_at=_iso(datetime.now(UTC)),
               seconds=round(time.perf_counter() - clock, 3), key=key,
               failures=failures)  # fmt: skip
    append_run(chosen.log, row)
