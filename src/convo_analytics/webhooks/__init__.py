"""Webhook events: signatures, the delivery archive format, receiving and ingesting."""

from convo_analytics.webhooks._archive import archive_line, parse_archive_line
from convo_analytics.webhooks._signature import (
    SIGNATURE_PREFIX,
    append_signature,
    sign,
    strip_signature,
    verify,
)

__all__ = [
    "SIGNATURE_PREFIX",
    "append_signature",
    "archive_line",
    "parse_archive_line",
    "sign",
    "strip_signature",
    "verify",
]
