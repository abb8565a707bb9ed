"""Telling someone a run failed, or ended with a warning (reconciliation found differences),
through every configured notification channel (``notify/``): the signed webhook, Slack,
email, and ``run.alert_webhook_url`` and ``run.alert_command`` as before.

The alert carries the run's id, status, failed step, error and warnings, never a
secret (errors are built without them); its idempotency key is the run's id and
status, so a run's alert reaches each channel once however often it is tried.
Every run, alerting or not, then delivers what earlier runs left pending. A
failing delivery is logged and recorded, never raised: it must not turn a
failed run into a crashed one, nor fail a run whose data steps succeeded.
"""

from __future__ import annotations

import logging
from typing import Any

from convo_analytics.config import Settings
from convo_analytics.errors import UserError
from convo_analytics.notify import Notification, deliver_pending, notify_config, send

log = logging.getLogger(__name__)


def check_alert_settings(settings: Settings) -> None:
    """Every channel's settings (URLs https or loopback, a signing secret with the signed
    webhook, SMTP's encryption): a UserError before the run locks or records anything."""
    notify_config(settings)


def run_notification(run: dict[str, Any]) -> Notification:
    """The alert of a failed run, or of one that ended with warnings (``status`` says which)."""
    warnings = [f"{w['step']}: {w['message']}" for w in run.get("warnings") or []]
    failed = run["status"] != "warning"
    text = (
        f"convo run {run['run_id']} {run['status']} in {run['failed_step']}: {run['error']}"
        if failed
        else f"convo run {run['run_id']} warning: {'; '.join(warnings)}"
    )
    subject = (
        f"convo run {run['run_id']} failed in {run['failed_step']}"
        if failed
        else f"convo run {run['run_id']} ended with a warning"
    )
    return Notification.create(
        source="pipeline",
        subject_id=str(run["run_id"]),
        kind="run.failed" if failed else "run.warning",
        subject=subject,
        text=text,
        fields={
            "runId": run["run_id"],
            "status": run["status"],
            "failedStep": run["failed_step"],
            "error": run["error"],
            "warnings": warnings,
        },
        env={
            "CONVO_RUN_ID": str(run["run_id"]),
            "CONVO_RUN_STATUS": str(run["status"]),
            "CONVO_RUN_FAILED_STEP": str(run["failed_step"] or ""),
            "CONVO_RUN_ERROR": str(run["error"] or ""),
            "CONVO_RUN_WARNINGS": "\n".join(warnings),
        },
    )


def send_alert(settings: Settings, run: dict[str, Any]) -> dict[str, Any]:
    """Alert on ``run`` when it failed or warned, then deliver whatever is pending; the
    deliveries' summary (``convo run --json``'s ``deliveries``). Never raises."""
    try:
        config = notify_config(settings)
        if run["status"] in ("failed", "warning"):
            summary = send(config, run_notification(run))
        else:
            summary = deliver_pending(config)
    except UserError as exc:  # e.g. the delivery log's folder cannot be written
        log.error("the alert could not be recorded: %s", exc)
        return {"error": str(exc)}
    except Exception as exc:  # never the run's failure; the message may hold anything
        log.error("the alert could not be delivered: %s", type(exc).__name__)
        return {"error": f"the alert could not be delivered ({type(exc).__name__})"}
    if summary.pending or summary.failed or summary.abandoned:
        log.warning("alert deliveries: %s delivered, %s pending, %s failed, %s abandoned",
                    summary.delivered, summary.pending, summary.failed,
                    summary.abandoned)  # fmt: skip
    return summary.as_json()
