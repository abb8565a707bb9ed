"""The outgoing webhook, signed as the service's interface signs its events.

A POST of a JSON body (UTF-8, compact) with these headers (D-NOTIFY-CHANNELS;
the names are the sandbox's delivery headers, D-WEBHOOK-HEADERS):

``X-Convo-Signature``
    ``sha256=`` + the lowercase hex HMAC-SHA256 of the exact body bytes, keyed
    with ``notify.signing_secret`` (the interface's scheme; the receiver
    recomputes it over the raw body and compares in constant time). The body
    has no ``signature`` member: the header signs all of it.
``X-Convo-Timestamp``
    when the notification was recorded, ISO 8601 UTC with milliseconds
    (``2026-11-21T02:15:00.000Z``); it is inside the signed body too
    (``timestamp``), so a receiver can refuse a stale replay.
``Idempotency-Key``
    the notification's key (``ntf_`` + 32 hex digits), the same on every attempt
    and every run: a receiver that has seen it drops the repeat.
``X-Convo-Event``
    the notification's kind (``run.failed``, ``run.warning``).
``X-Convo-Delivery``
    ``dlv_`` + 16 hex digits, one per notification and channel, stable across attempts.
``X-Convo-Attempt``
    1, 2, ...: counted across runs. Only this header changes between attempts;
    the body and the signature are the same bytes every time.

The body: ``{"event", "timestamp", "idempotencyKey", "source", "subject", "text",
"data"}`` (``data``: the notification's fields and details), shaped like the interface's event
envelope. A notification's attachments (a scheduled report's HTML and CSVs) are in
``data.attachments``, each ``{"filename", "contentType", "size", "sha256", "base64"}``
(the file read when sent, inside the signed body). The run's alert URL of old
(``run.alert_webhook_url``) keeps its flat body, ``{"runId", "status", "failedStep",
"error", "warnings", "text"}``, with ``kind``, ``subject`` and ``idempotencyKey``
added, and is signed the same way when a signing secret is set.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
from dataclasses import dataclass
from typing import Any

import orjson

from convo_analytics.config import Secret
from convo_analytics.contract import (
    DELIVERY_HEADER,
    EVENT_HEADER,
    IDEMPOTENCY_HEADER,
    SIGNATURE_HEADER,
    TIMESTAMP_HEADER,
)
from convo_analytics.notify._channel import attachment_bytes, post_json
from convo_analytics.notify._message import Attachment, Notification

__all__ = ["ATTEMPT_HEADER", "WebhookChannel", "delivery_id", "sign_body"]

ATTEMPT_HEADER = "X-Convo-Attempt"
SIGNATURE_PREFIX = "sha256="


def sign_body(secret: Secret, body: bytes) -> str:
    """``sha256=`` + the lowercase hex HMAC-SHA256 of ``body`` keyed with ``secret``."""
    digest = hmac.new(secret.reveal().encode("utf-8"), body, hashlib.sha256).hexdigest()
    return SIGNATURE_PREFIX + digest


def delivery_id(key: str, channel: str) -> str:
    """One notification on one channel: stable across attempts and runs."""
    return "dlv_" + hashlib.sha256(f"{key}\x1f{channel}".encode()).hexdigest()[:16]


def _attached(attachment: Attachment) -> dict[str, Any]:
    data = attachment_bytes(attachment)
    return {
        "filename": attachment.filename,
        "contentType": attachment.content_type,
        "size": len(data),
        "sha256": hashlib.sha256(data).hexdigest(),
        "base64": base64.b64encode(data).decode("ascii"),
    }


@dataclass(frozen=True, slots=True)
class WebhookChannel:
    """A signed JSON POST; ``flat``: the run alert's body of old (``run.alert_webhook_url``)."""

    name: str
    url: Secret
    signing_secret: Secret | None = None
    flat: bool = False

    def body(self, n: Notification) -> bytes:
        doc: dict[str, Any]
        if self.flat:
            doc = {**n.fields, **n.details, "text": n.text}
            for key, value in (("kind", n.kind), ("subject", n.subject),
                               ("idempotencyKey", n.key)):  # fmt: skip
                doc.setdefault(key, value)
        else:
            doc = {
                "event": n.kind,
                "timestamp": n.created_at,
                "idempotencyKey": n.key,
                "source": n.source,
                "subject": n.subject,
                "text": n.text,
                "data": {**n.fields, **n.details},
            }
            if n.attachments:
                doc["data"]["attachments"] = [_attached(a) for a in n.attachments]
        return orjson.dumps(doc)

    def headers(self, n: Notification, body: bytes, attempt: int) -> dict[str, str]:
        headers = {
            IDEMPOTENCY_HEADER: n.key,
            EVENT_HEADER: n.kind,
            TIMESTAMP_HEADER: n.created_at,
            DELIVERY_HEADER: delivery_id(n.key, self.name),
            ATTEMPT_HEADER: str(attempt),
        }
        if self.signing_secret is not None:
            headers[SIGNATURE_HEADER] = sign_body(self.signing_secret, body)
        return headers

    def send(self, notification: Notification, attempt: int, timeout: float) -> int | None:
        body = self.body(notification)
        return post_json(self.url, body, self.headers(notification, body, attempt), timeout)
