"""Webhook events: signatures, the delivery archive format, receiving and ingesting."""

from convo_analytics.webhooks._archive import archive_line, parse_archive_line
from convo_analytics.webhooks._archive_erase import ArchiveRewrite, erase_archive_lines
from convo_analytics.webhooks._archive_writer import ArchiveWriter
from convo_analytics.webhooks._endpoints import (
    EndpointKeys,
    archive_files,
    archive_workspace,
    check_bindings,
    endpoint_keys,
    flat_keys,
    ingest_batches,
    ingest_options,
    known_workspace_ids,
    receiver_settings,
    replay_keys,
    require_flat_keys,
)
from convo_analytics.webhooks._ingest import IngestOptions
from convo_analytics.webhooks._quarantine import check_replay, purge, quarantine_counts, replay
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
from convo_analytics.webhooks._workspace import (
    WORKSPACE_UNKNOWN,
    EndpointWorkspace,
    WorkspaceScope,
)

__all__ = [
    "READINGS",
    "SIGNATURE_HEADERS",
    "SIGNATURE_PREFIX",
    "WORKSPACE_UNKNOWN",
    "ArchiveRewrite",
    "ArchiveWriter",
    "EndpointKeys",
    "EndpointWorkspace",
    "IngestOptions",
    "IngestResult",
    "ReceiverSettings",
    "Verification",
    "WorkspaceScope",
    "append_signature",
    "archive_files",
    "archive_line",
    "archive_workspace",
    "check_bindings",
    "check_replay",
    "create_receiver_app",
    "endpoint_keys",
    "erase_archive_lines",
    "flat_keys",
    "ingest",
    "ingest_batches",
    "ingest_options",
    "known_workspace_ids",
    "parse_archive_line",
    "purge",
    "quarantine_counts",
    "receiver_settings",
    "replay",
    "replay_keys",
    "require_flat_keys",
    "secret_keys",
    "sign",
    "signature_alarm",
    "strip_signature",
    "verify",
    "verify_delivery",
]
