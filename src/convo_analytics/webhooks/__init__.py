"""Webhook events: signatures, the delivery archive format, receiving and ingesting."""

from convo_analytics.webhooks._archive import archive_line, parse_archive_line
from convo_analytics.webhooks._archive_writer import ArchiveWriter
from convo_analytics.webhooks._ingest import IngestOptions
from convo_analytics.webhooks._quarantine import purge, quarantine_counts, replay
from convo_analytics.webhooks._receiver import ReceiverSettings, create_receiver_app
from convo_analytics.webhooks._run import IngestResult, ingest, signature_alarm
from convo_analytics.webhooks._signature import (
    SIGNATURE_PREFIX,
    append_signature,
    sign,
    strip_signature,
    verify,
)
from convo_analytics.webhooks._verify import (
    READINGS,
    SIGNATURE_HEADERS,
    Verification,
    secret_keys,
    verify_delivery,
)

__all__ = [
    "READINGS",
    "SIGNATURE_HEADERS",
    "SIGNATURE_PREFIX",
    "ArchiveWriter",
    "IngestOptions",
    "IngestResult",
    "ReceiverSettings",
    "Verification",
    "append_signature",
    "archive_line",
    "create_receiver_app",
    "ingest",
    "parse_archive_line",
    "purge",
    "quarantine_counts",
    "replay",
    "secret_keys",
    "sign",
    "signature_alarm",
    "strip_signature",
    "verify",
    "verify_delivery",
]
