"""A local command (``run.alert_command``), run by the shell as it always was.

It gets the notification's flat JSON body on stdin (the run's alert: ``{"runId",
"status", "failedStep", "error", "warnings", "text", "kind", "subject",
"idempotencyKey"}``), the notification's own variables (the run's alert:
``CONVO_RUN_ID``, ``CONVO_RUN_STATUS``, ``CONVO_RUN_FAILED_STEP``,
``CONVO_RUN_ERROR``, ``CONVO_RUN_WARNINGS``) and ``CONVO_NOTIFY_KEY``,
``CONVO_NOTIFY_KIND``, ``CONVO_NOTIFY_SUBJECT``, ``CONVO_NOTIFY_ATTEMPT``, in an
environment without the variables of any secret setting. Exit status 0 is
delivered; any other, or no end within the time allowed, is retried.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass

import orjson

from convo_analytics.notify._channel import DeliveryError
from convo_analytics.notify._message import Notification, one_line

__all__ = ["COMMAND_TIMEOUT_SECONDS", "CommandChannel", "without_secrets"]

#: How long one run of the command may take (as before notify/ existed).
COMMAND_TIMEOUT_SECONDS = 60.0


def without_secrets(environ: Mapping[str, str]) -> dict[str, str]:
    """The environment minus every variable that can carry a secret setting."""
    from convo_analytics.config import REGISTRY

    secret_vars = {
        name for setting in REGISTRY.settings if setting.is_secret for name in setting.env_vars
    }
    return {k: v for k, v in environ.items() if k not in secret_vars}


@dataclass(frozen=True, slots=True)
class CommandChannel:
    command: str
    name: str = "alert_command"

    def send(self, notification: Notification, attempt: int, timeout: float) -> int | None:
        n = notification
        body = {**n.fields, **n.details, "text": n.text}
        for key, value in (("kind", n.kind), ("subject", n.subject), ("idempotencyKey", n.key)):
            body.setdefault(key, value)
        env = {
            **without_secrets(os.environ),
            **n.env,
            "CONVO_NOTIFY_KEY": n.key,
            "CONVO_NOTIFY_KIND": n.kind,
            "CONVO_NOTIFY_SUBJECT": one_line(n.subject, 500),
            "CONVO_NOTIFY_ATTEMPT": str(attempt),
        }
        try:
            done = subprocess.run(
                self.command, shell=True, env=env, timeout=COMMAND_TIMEOUT_SECONDS,
                input=orjson.dumps(body), capture_output=True, check=False,
            )  # fmt: skip
        except subprocess.TimeoutExpired:
            raise DeliveryError(
                f"the command did not finish within {COMMAND_TIMEOUT_SECONDS:g} s"
            ) from None
        except OSError as exc:
            raise DeliveryError(f"the command could not start ({exc.strerror})") from None
        if done.returncode:
            raise DeliveryError(f"the command exited {done.returncode}", code=done.returncode)
        return 0
