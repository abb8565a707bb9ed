"""The channels a configuration asks for, checked: :func:`notify_config` (D-CONFIG-BUILDERS).

From ``[notify]`` the signed webhook (``webhook``), the Slack-compatible one
(``slack``) and email (``email``); from ``[run]`` the run's alert URL of old
(``alert_webhook``, flat body) and command (``alert_command``). The names key
the delivery log, so they stay. Every refusal is a :class:`UserError` naming
the setting and the fix, never quoting a URL (a webhook URL is a credential).
"""

from __future__ import annotations

from email.utils import parseaddr

from convo_analytics._net import insecure_url, is_loopback_host
from convo_analytics.config import Secret, Settings
from convo_analytics.errors import UserError
from convo_analytics.notify._channel import Channel
from convo_analytics.notify._command import CommandChannel
from convo_analytics.notify._deliver import NotifyConfig, RetryPolicy
from convo_analytics.notify._email import EmailChannel, default_port
from convo_analytics.notify._message import one_line
from convo_analytics.notify._slack import SlackChannel
from convo_analytics.notify._webhook import WebhookChannel

__all__ = ["check_webhook_url", "notify_config"]


def check_webhook_url(name: str, env: str, url: Secret) -> None:
    """https://, or plain http:// to a loopback host, and nothing else (D-WEBHOOK-URL)."""
    text = url.reveal()
    if "://" not in text:
        raise UserError(
            f"{name} ({env}) must be an http:// or https:// URL; the value set has no scheme"
        )
    why = insecure_url(text)
    if why is not None:
        raise UserError(
            f"{name} ({env}) {why}; give an https:// URL (plain http:// only to a loopback "
            "host such as 127.0.0.1)"
        )


def _address(name: str, value: str) -> str:
    if one_line(value, 320) != value or "@" not in parseaddr(value)[1]:
        raise UserError(
            f"{name}: {value!r} is not an email address; give one such as alerts@example.com"
        )
    return value


def _email(settings: Settings) -> EmailChannel | None:
    host = settings.get_str("notify.smtp_host")
    to = settings.get_list("notify.email_to")
    if not host:
        if to:
            raise UserError(
                "notify.email_to is set but notify.smtp_host is not; set the SMTP server "
                "(CONVO_NOTIFY_SMTP_HOST), or empty notify.email_to"
            )
        return None
    tls = settings.get_str("notify.smtp_tls")
    if tls == "none" and not is_loopback_host(host):
        raise UserError(
            f'notify.smtp_tls = "none" would send mail and the SMTP password unencrypted to '
            f'{host}; set notify.smtp_tls to "starttls" or "ssl" ("none" is for a relay on '
            "this machine, a loopback host, only)"
        )
    sender = settings.get_str("notify.email_from")
    if not sender:
        raise UserError("notify.email_from is not set; give the From address of notification "
                        "emails (CONVO_NOTIFY_EMAIL_FROM)")  # fmt: skip
    if not to:
        raise UserError("notify.email_to is empty; give the addresses notification emails go "
                        "to (CONVO_NOTIFY_EMAIL_TO, comma-separated)")  # fmt: skip
    user = settings.get_str("notify.smtp_user")
    password = settings.get_secret("notify.smtp_password")
    if user and password is None:
        raise UserError(
            "notify.smtp_user is set but notify.smtp_password is not; "
            + settings.registry.how_to_set_secret("notify.smtp_password")
        )
    if password is not None and not user:
        raise UserError("notify.smtp_password is set but notify.smtp_user is not; set the "
                        "SMTP login name (CONVO_NOTIFY_SMTP_USER)")  # fmt: skip
    return EmailChannel(
        host=host,
        port=settings.get_int("notify.smtp_port") or default_port(tls),
        tls=tls,
        sender=_address("notify.email_from", sender),
        recipients=tuple(_address("notify.email_to", a) for a in to),
        user=user,
        password=password,
    )


def notify_config(settings: Settings) -> NotifyConfig:
    """The configured channels, retry policy and delivery log; a UserError for a setting no
    delivery could work with (checked by ``convo run`` before it locks anything)."""
    channels: list[Channel] = []
    secrets: list[Secret] = []
    signing = settings.get_secret("notify.signing_secret")
    webhook = settings.get_secret("notify.webhook_url")
    if webhook is not None:
        check_webhook_url("notify.webhook_url", "CONVO_NOTIFY_WEBHOOK_URL", webhook)
        if signing is None:
            raise UserError(
                "notify.webhook_url is set but notify.signing_secret is not (the webhook is "
                "signed); " + settings.registry.how_to_set_secret("notify.signing_secret")
            )
        channels.append(WebhookChannel("webhook", webhook, signing))
    slack = settings.get_secret("notify.slack_webhook_url")
    if slack is not None:
        check_webhook_url("notify.slack_webhook_url", "CONVO_NOTIFY_SLACK_WEBHOOK_URL", slack)
        channels.append(SlackChannel("slack", slack))
    if (email := _email(settings)) is not None:
        channels.append(email)
        secrets += [email.password] if email.password is not None else []
    alert_url = settings.get_secret("run.alert_webhook_url")
    if alert_url is not None:
        check_webhook_url("run.alert_webhook_url", "CONVO_RUN_ALERT_WEBHOOK_URL", alert_url)
        channels.append(WebhookChannel("alert_webhook", alert_url, signing, flat=True))
    if command := settings.get_str("run.alert_command"):
        channels.append(CommandChannel(command))
    secrets += [s for s in (signing, webhook, slack, alert_url) if s is not None]
    return NotifyConfig(
        channels=tuple(channels),
        log_path=settings.require_path("notify.delivery_log"),
        policy=RetryPolicy(
            max_attempts=settings.get_int("notify.max_attempts"),
            backoff_seconds=settings.get_float("notify.backoff_seconds"),
            max_seconds=settings.get_float("notify.max_seconds"),
            timeout_seconds=settings.get_float("notify.timeout_seconds"),
            give_up_days=settings.get_float("notify.give_up_days"),
        ),
        secrets=tuple(secrets),
    )
