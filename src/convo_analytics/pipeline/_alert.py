"""Telling someone a run failed, or ended with a warning (reconciliation found differences):
a webhook POST and/or a command, both from the config.

The alert carries the run's id, status, failed step, error and warnings, never a
secret (errors are built without them). A failing alert is logged, never
raised: it must not turn a failed run into a crashed one.
"""

from __future__ import annotations

import logging
import os
import subprocess
from collections.abc import Mapping
from typing import Any

import httpx
import orjson

from convo_analytics.config import Settings
from convo_analytics.errors import UserError

log = logging.getLogger(__name__)
ALERT_TIMEOUT_SECONDS = 10


def check_alert_settings(settings: Settings) -> None:
    """The alert webhook's URL has a scheme (it is a secret: the message never shows it)."""
    url = settings.get_secret("run.alert_webhook_url")
    if url is not None and not url.reveal().startswith(("https://", "http://")):
        raise UserError(
            "run.alert_webhook_url (CONVO_RUN_ALERT_WEBHOOK_URL) must be an http:// or "
            "https:// URL; the value set has no scheme"
        )


def send_alert(settings: Settings, run: dict[str, Any]) -> None:
    """Alert on a failed run, or on one that ended with warnings (``status`` says which)."""
    warnings = [f"{w['step']}: {w['message']}" for w in run.get("warnings") or []]
    text = (
        f"convo run {run['run_id']} {run['status']} in {run['failed_step']}: {run['error']}"
        if run["status"] != "warning"
        else f"convo run {run['run_id']} warning: {'; '.join(warnings)}"
    )
    body = {
        "runId": run["run_id"],
        "status": run["status"],
        "failedStep": run["failed_step"],
        "error": run["error"],
        "warnings": warnings,
        "text": text,
    }
    url = settings.get_secret("run.alert_webhook_url")
    if url is not None:
        try:
            httpx.post(url.reveal(), content=orjson.dumps(body), timeout=ALERT_TIMEOUT_SECONDS,
                       headers={"Content-Type": "application/json"}).raise_for_status()  # fmt: skip
        except httpx.HTTPError as exc:  # the URL is a secret: name only the kind of failure
            log.error("the alert webhook failed: %s", type(exc).__name__)
    command = settings.get_str("run.alert_command")
    if command:
        env = {**_without_secrets(os.environ), "CONVO_RUN_ID": str(run["run_id"]),
               "CONVO_RUN_STATUS": str(run["status"]),
               "CONVO_RUN_FAILED_STEP": str(run["failed_step"] or ""),
               "CONVO_RUN_ERROR": str(run["error"] or ""),
               "CONVO_RUN_WARNINGS": "\n".join(warnings)}  # fmt: skip
        try:
            done = subprocess.run(
                command, shell=True, env=env, timeout=ALERT_TIMEOUT_SECONDS * 6,
                input=orjson.dumps(body), capture_output=True, check=False,
            )  # fmt: skip
            if done.returncode:
                log.error("the alert command exited %s", done.returncode)
        except subprocess.TimeoutExpired:
            log.error("the alert command did not finish within %s s", ALERT_TIMEOUT_SECONDS * 6)


def _without_secrets(environ: Mapping[str, str]) -> dict[str, str]:
    """The environment minus every variable that can carry a secret setting."""
    from convo_analytics.config import REGISTRY

    secret_vars = {
        name
        for setting in REGISTRY.settings
        if setting.is_secret
        for name in (setting.env_var, *setting.env_aliases)
    }
    return {k: v for k, v in environ.items() if k not in secret_vars}
