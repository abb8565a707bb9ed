"""Notifications: telling people that something happened, reliably and safely.

Today the nightly run's failure and warning alert goes through here; monitors
(issue 28) will too. One :class:`Notification` (a kind, a subject, plain text,
structured fields and an idempotency key stable for the same fact) goes to
every configured channel: a webhook signed as the service's interface signs
its events, a Slack-compatible incoming webhook, email over SMTP, and the
run's alert URL and command of old. Delivery is at-least-once with the stable
key: each notification is recorded in the delivery log before any channel is
tried, attempts are retried with backoff within bounds, what still fails is
retried by the next :func:`deliver_pending`, and a key a channel has had is
never sent to it again (D-NOTIFY-CHANNELS). Secrets (webhook URLs, the
signing secret, the SMTP password) come from the environment or a file, and
never reach a log line, an error or the delivery log.
"""

from convo_analytics.notify._channel import Channel, DeliveryError
from convo_analytics.notify._command import CommandChannel
from convo_analytics.notify._config import check_webhook_url, notify_config
from convo_analytics.notify._deliver import (
    HOLD_ENV,
    DeliverySummary,
    NotifyConfig,
    RetryPolicy,
    deliver_pending,
    read_deliveries,
    record,
    send,
)
from convo_analytics.notify._email import EmailChannel, email_message
from convo_analytics.notify._log import Delivery, DeliveryLog
from convo_analytics.notify._message import Attachment, Notification, notification_key
from convo_analytics.notify._slack import SlackChannel, mrkdwn, slack_body
from convo_analytics.notify._webhook import WebhookChannel, sign_body

__all__ = [
    "HOLD_ENV",
    "Attachment",
    "Channel",
    "CommandChannel",
    "Delivery",
    "DeliveryError",
    "DeliveryLog",
    "DeliverySummary",
    "EmailChannel",
    "Notification",
    "NotifyConfig",
    "RetryPolicy",
    "SlackChannel",
    "WebhookChannel",
    "check_webhook_url",
    "deliver_pending",
    "email_message",
    "mrkdwn",
    "notification_key",
    "notify_config",
    "read_deliveries",
    "record",
    "send",
    "sign_body",
    "slack_body",
]
