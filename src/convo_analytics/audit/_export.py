"""`convo audit export`: a range of the log for a reviewer, with what checks it.

The export is JSON lines: first a header (the range, the chain's verification, and the
hashes that tie the range to the rest of the chain), then the records exactly as the
log holds them, so each one's hash can be recomputed. The range is every record from
the first written on ``--from`` or later to the last written on ``--to`` or earlier
(days in UTC), with all records between them: a clock set back cannot leave a hole.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date
from typing import IO, Any

import orjson

from convo_analytics.audit._chain import now_text
from convo_analytics.audit._log import AuditLog
from convo_analytics.audit._verify import KnownHead, Verification, verify

__all__ = ["RangeExport", "export_range"]

HOW_TO_CHECK = (
    "Each record's hash is the SHA-256 of the record without its hash member, written as "
    "JSON with keys sorted, no spaces, UTF-8. Each record's prev is the hash of the record "
    "before it; the first record's prev is anchor.hash (the record before the range). "
    "'convo audit verify --head LAST' (LAST: last.seq:last.hash) later shows that the log "
    "still holds this range unchanged."
)


@dataclass(frozen=True, slots=True)
class RangeExport:
    records: int
    verification: Verification


def export_range(
    log: AuditLog, first: date, last: date, heads: Sequence[KnownHead], out: IO[bytes]
) -> RangeExport:
    """Write the records of ``first``..``last`` (UTC days) to ``out`` after their header."""
    span = _span(log, first.isoformat(), last.isoformat())
    verification = verify(log, heads)
    picked: list[bytes] = []
    if span is not None:
        with log.lines() as lines:
            picked = [raw for number, raw, _ in lines if span[0] <= number <= span[1]]
    records = [orjson.loads(raw) for raw in picked]
    header: dict[str, Any] = {
        "kind": "convo-audit-export",
        "from": first.isoformat(),
        "to": last.isoformat(),
        "file": str(log.path),
        "generatedAt": now_text(),
        "records": len(records),
        "firstSeq": records[0]["seq"] if records else None,
        "lastSeq": records[-1]["seq"] if records else None,
        "anchor": {"seq": records[0]["seq"] - 1, "hash": records[0]["prev"]} if records else None,
        "last": {"seq": records[-1]["seq"], "hash": records[-1]["hash"]} if records else None,
        "head": {"seq": verification.head.seq, "hash": verification.head.hash},
        "verification": verification.as_json(),
        "howToCheck": HOW_TO_CHECK,
    }
    out.write(orjson.dumps(header) + b"\n")
    for raw in picked:
        out.write(raw + b"\n")
    return RangeExport(len(records), verification)


def _span(log: AuditLog, first: str, last: str) -> tuple[int, int] | None:
    """The lines from the first record of day ``first`` or later to the last of day
    ``last`` or earlier (None: no record in the range)."""
    start = end = None
    with log.lines() as lines:
        for number, raw, _ in lines:
            try:
                record = orjson.loads(raw)
                day = str(record["when"])[:10]
            except (orjson.JSONDecodeError, KeyError, TypeError):
                continue
            if start is None and day >= first:
                start = number
            if day <= last:
                end = number
    if start is None or end is None or end < start:
        return None
    return start, end
