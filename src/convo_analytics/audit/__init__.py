"""The audit trail (issue 30): who read or exported what, in an append-only log whose
records each carry the hash of the one before (decision D-AUDIT-TRAIL).

Record an action with :func:`record_event` (from the settings) or an :class:`Auditor`
(:func:`auditor`); join an export's manifest to the chain with
:meth:`Auditor.seal_manifest`; check the log with :func:`verify` against the heads
:func:`recorded_heads` finds; hand a range out with :func:`export_range`.
"""

from convo_analytics.audit._auditor import Auditor, auditor, file_sha256, os_user, record_event
from convo_analytics.audit._chain import ACTIONS, GENESIS, Head, canonical, record_hash
from convo_analytics.audit._export import RangeExport, export_range
from convo_analytics.audit._log import AuditError, AuditLog
from convo_analytics.audit._verify import (
    KnownHead,
    Manifest,
    Problem,
    Verification,
    read_manifest,
    recorded_heads,
    verify,
)

__all__ = [
    "ACTIONS",
    "GENESIS",
    "AuditError",
    "AuditLog",
    "Auditor",
    "Head",
    "KnownHead",
    "Manifest",
    "Problem",
    "RangeExport",
    "Verification",
    "auditor",
    "canonical",
    "export_range",
    "file_sha256",
    "os_user",
    "read_manifest",
    "record_event",
    "record_hash",
    "recorded_heads",
    "verify",
]
