"""What every channel is: a name and one ``send`` of one notification, which either returns
(delivered) or raises :class:`DeliveryError` saying whether trying again could help.

The HTTP channels share :func:`post_json` and its one rule for answers: 2xx is
delivered; 4xx other than 408 and 429 is permanent (the request itself is
wrong: a retry would be refused the same way); anything else (3xx, 408, 429,
5xx, no answer, a refused connection, a TLS failure) is retried. Errors name
the kind of failure and the status, never the URL (webhook URLs carry their
credential) nor the receiver's body.
"""

from __future__ import annotations

import email.utils
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Protocol

import httpx

from convo_analytics.config import Secret
from convo_analytics.notify._message import Attachment, Notification

__all__ = ["Channel", "DeliveryError", "attachment_bytes", "is_permanent_status", "post_json"]

USER_AGENT = "convo-analytics-notify/1"
#: The longest Retry-After we honour (longer: the delivery waits for the next call).
MAX_RETRY_AFTER_SECONDS = 3600.0


class DeliveryError(Exception):
    """A failed attempt: ``message`` without any secret, ``permanent`` when a retry would
    fail the same way, ``code`` the status (HTTP or SMTP) or exit status if any,
    ``retry_after`` the receiver's own wait (seconds), if it gave one."""

    def __init__(
        self,
        message: str,
        *,
        permanent: bool = False,
        code: int | None = None,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.permanent = permanent
        self.code = code
        self.retry_after = retry_after

    def __str__(self) -> str:
        return self.message


class Channel(Protocol):
    """A way to tell someone; ``name`` keys its deliveries in the delivery log."""

    @property
    def name(self) -> str: ...

    def send(self, notification: Notification, attempt: int, timeout: float) -> int | None:
        """Deliver once within ``timeout`` seconds (``attempt``: 1 for the first try of this
        notification on this channel, counted across runs); the status, or
        :class:`DeliveryError`."""
        ...


def attachment_bytes(attachment: Attachment) -> bytes:
    """The file's content, read now; a permanent DeliveryError when it is gone or unreadable
    (no retry brings back a file; the message names the file, not its folder)."""
    try:
        return Path(attachment.path).read_bytes()
    except OSError as exc:
        raise DeliveryError(
            f"the attachment {attachment.filename} cannot be read "
            f"({exc.strerror or type(exc).__name__}); it was moved or removed",
            permanent=True,
        ) from None


def is_permanent_status(status: int) -> bool:
    """4xx other than 408 (request timeout) and 429 (too many requests): the request is wrong."""
    return 400 <= status < 500 and status not in (408, 429)


def _retry_after(value: str | None) -> float | None:
    """Seconds of a Retry-After header (delta seconds or an HTTP date), None if unreadable."""
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        return min(float(value), MAX_RETRY_AFTER_SECONDS)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return min(max(0.0, (when - datetime.now(UTC)).total_seconds()), MAX_RETRY_AFTER_SECONDS)


def _transport_error(exc: httpx.HTTPError, timeout: float) -> str:
    """The kind of failure, in words: never ``str(exc)``, which may quote the URL."""
    if isinstance(exc, httpx.TimeoutException):
        return f"no answer within {timeout:g} s ({type(exc).__name__})"
    if isinstance(exc, httpx.ConnectError):
        return f"could not connect ({type(exc).__name__})"
    return f"the request failed ({type(exc).__name__})"


def post_json(url: Secret, body: bytes, headers: Mapping[str, str], timeout: float) -> int:
    """POST ``body`` to ``url`` (revealed only here); the 2xx status, or DeliveryError."""
    try:
        response = httpx.post(
            url.reveal(),
            content=body,
            headers={"Content-Type": "application/json", "User-Agent": USER_AGENT, **headers},
            timeout=timeout,
            follow_redirects=False,
        )
    except httpx.HTTPError as exc:
        raise DeliveryError(_transport_error(exc, timeout)) from None
    status = response.status_code
    if 200 <= status < 300:
        return status
    raise DeliveryError(
        f"the receiver answered {status}",
        permanent=is_permanent_status(status),
        code=status,
        retry_after=_retry_after(response.headers.get("retry-after")),
    )
