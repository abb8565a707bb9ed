"""The Pipeline page's alert deliveries: what the delivery log says was not delivered.

The log is the app's own state (``notify.delivery_log``, written by ``convo run``
through ``notify/``), not the published snapshot: the page reads it as it is
when the page runs. A delivery shown is pending (the next run tries again),
or was refused for good or abandoned within the last days shown.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import polars as pl

from convo_analytics.notify import Delivery, read_deliveries

__all__ = ["COLUMNS", "AlertDeliveries", "alert_deliveries"]

#: The table's columns, in order.
COLUMNS = ("recorded_at", "channel", "kind", "subject", "status", "attempts", "error",
           "last_attempt_at")  # fmt: skip
_SCHEMA = pl.Schema(
    {
        "recorded_at": pl.Datetime("us", "UTC"),
        "channel": pl.String(),
        "kind": pl.String(),
        "subject": pl.String(),
        "status": pl.String(),
        "attempts": pl.Int64(),
        "error": pl.String(),
        "last_attempt_at": pl.Datetime("us", "UTC"),
    }
)


@dataclass(frozen=True, slots=True)
class AlertDeliveries:
    """The undelivered (newest first) and how many were delivered within ``days``."""

    undelivered: pl.DataFrame
    delivered: int
    days: int


def _when(text: str | None) -> datetime | None:
    if not text:
        return None
    try:
        when = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    return when if when.tzinfo else when.replace(tzinfo=UTC)


def _row(d: Delivery) -> dict[str, object]:
    return {
        "recorded_at": _when(d.recorded_at),
        "channel": d.channel,
        "kind": d.notification.kind,
        "subject": d.notification.subject,
        "status": d.status,
        "attempts": d.attempts,
        "error": d.error,
        "last_attempt_at": _when(d.last_attempt_at),
    }


def alert_deliveries(path: Path | None, days: int = 30) -> AlertDeliveries:
    """Pending deliveries, and those failed or abandoned within ``days``, from the log at
    ``path`` (none: no log yet, or none configured)."""
    found = read_deliveries(path) if path is not None else []
    since = datetime.now(UTC) - timedelta(days=days)
    recent = [d for d in found if (_when(d.last_attempt_at or d.recorded_at) or since) >= since]
    rows = [_row(d) for d in found if d.status == "pending"]
    rows += [_row(d) for d in recent if d.status in ("failed", "abandoned")]
    frame = pl.DataFrame(rows, schema=_SCHEMA, orient="row").sort("recorded_at", descending=True)
    return AlertDeliveries(frame, sum(d.status == "delivered" for d in recent), days)
