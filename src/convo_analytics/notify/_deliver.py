"""Delivery: record first, then try each channel with bounded retries; what fails waits for
the next call of :func:`deliver_pending`.

:func:`send` appends the notification to the delivery log (synced) for every
configured channel that has not had it yet, and only then delivers. A process
killed in between leaves it pending; the next :func:`deliver_pending` (the
nightly run calls it every night) delivers it with the same key, once. A key a
channel has had (``delivered``) or refused for good (``failed``) is never sent
to it again.

Retries (:class:`RetryPolicy`): at most ``max_attempts`` attempts per delivery
and call, each with a timeout of ``timeout_seconds``, the waits between them
growing fourfold from ``backoff_seconds`` (2 s, 8 s, 32 s, as the interface's
own webhook retries) with jitter (each wait drawn between half and all of it,
so that many senders do not retry in step), a receiver's Retry-After honoured
when longer, and the whole within ``max_seconds``. When a channel's delivery
ends pending, its later deliveries wait for the next call too: a dead
receiver costs one delivery's budget a call, not one per alert. Deliveries
still pending after ``give_up_days`` are abandoned (and shown as such).
"""

from __future__ import annotations

import logging
import os
import random
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from convo_analytics.config import Secret
from convo_analytics.notify._channel import Channel, DeliveryError
from convo_analytics.notify._log import Delivery, DeliveryLog, now_iso
from convo_analytics.notify._message import Notification

__all__ = [
    "HOLD_ENV",
    "DeliverySummary",
    "NotifyConfig",
    "RetryPolicy",
    "deliver_pending",
    "read_deliveries",
    "record",
    "send",
]

log = logging.getLogger(__name__)

#: A testing knob, like the runner's: ``recorded`` makes :func:`send` stop after recording
#: (logging "notify holding") for up to HOLD_SECONDS, so a test can kill it right there.
HOLD_ENV = "CONVO_NOTIFY_HOLD"
HOLD_SECONDS = 120.0
#: Each wait is this many times the one before.
BACKOFF_FACTOR = 4.0


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    max_attempts: int = 4
    backoff_seconds: float = 2.0
    max_seconds: float = 60.0
    timeout_seconds: float = 10.0
    give_up_days: float = 7.0

    def wait(self, attempt: int, rng: random.Random) -> float:
        """The wait after the ``attempt``-th attempt of a call: exponential, jittered."""
        full = self.backoff_seconds * BACKOFF_FACTOR ** (attempt - 1)
        return full * rng.uniform(0.5, 1.0)


@dataclass(frozen=True, slots=True)
class NotifyConfig:
    """Where to tell (the channels), how hard to try, and where the log is; ``secrets``:
    every credential the channels hold, masked should one reach an error anyway."""

    channels: tuple[Channel, ...]
    log_path: Path
    policy: RetryPolicy = RetryPolicy()
    secrets: tuple[Secret, ...] = ()


@dataclass(slots=True)
class DeliverySummary:
    """What a call did (``delivered``, ``failed``, ``abandoned``: in this call) and what is
    left (``pending``: in the whole log); ``undelivered``: each delivery pending now or
    given up in this call; ``busy``: another process was delivering from the log."""

    delivered: int = 0
    failed: int = 0
    abandoned: int = 0
    pending: int = 0
    busy: bool = False
    undelivered: list[dict[str, Any]] = field(default_factory=list)

    def as_json(self) -> dict[str, Any]:
        return {
            "delivered": self.delivered,
            "pending": self.pending,
            "failed": self.failed,
            "abandoned": self.abandoned,
            "busy": self.busy,
            "undelivered": self.undelivered,
        }


def _scrub(text: str | None, secrets: Sequence[Secret]) -> str | None:
    """Belt and braces: errors are built without secrets; a secret found anyway is masked."""
    if text is None:
        return None
    for secret in secrets:
        value = secret.reveal()
        if len(value) >= 4:
            text = text.replace(value, "***")
    return text[:500]


def record(config: NotifyConfig, notification: Notification) -> int:
    """Append ``notification`` for each channel that has not had it (synced); how many."""
    if not config.channels:
        return 0
    delivery_log = DeliveryLog(config.log_path)
    known = delivery_log.read().deliveries
    new = [c.name for c in config.channels if (notification.key, c.name) not in known]
    if new:
        delivery_log.append([{
            "type": "notification", "key": notification.key, "channels": new,
            "recorded_at": now_iso(), "notification": notification.as_json(),
        }])  # fmt: skip
    return len(new)


def send(config: NotifyConfig, notification: Notification) -> DeliverySummary:
    """Record ``notification`` for every channel, then deliver everything pending."""
    record(config, notification)
    if os.environ.get(HOLD_ENV) == "recorded":  # a warning: shown whatever the log level
        log.warning("notify holding after recording %s (%s is set)", notification.key, HOLD_ENV)
        time.sleep(HOLD_SECONDS)
    return deliver_pending(config)


def deliver_pending(config: NotifyConfig, *, rng: random.Random | None = None) -> DeliverySummary:
    """Try every pending delivery of the log once more (oldest first), within the policy."""
    summary = DeliverySummary()
    policy, secrets = config.policy, config.secrets
    delivery_log = DeliveryLog(config.log_path)
    if not delivery_log.exists():
        return summary
    rng = rng or random.Random()
    by_name = {c.name: c for c in config.channels}
    with delivery_log.delivering(policy.max_seconds) as held:
        summary.busy = not held
        state = delivery_log.read()
        given_up: list[Delivery] = []
        stalled: set[str] = set()  # channels whose delivery ended pending in this call
        oldest = datetime.now(UTC) - timedelta(days=policy.give_up_days)
        for delivery in state.pending() if held else ():
            if _recorded(delivery) < oldest:
                delivery_log.append([_line(delivery, "abandoned", None,
                    f"undelivered after {policy.give_up_days:g} days", 0.0)])  # fmt: skip
                delivery.status = "abandoned"
                summary.abandoned += 1
                given_up.append(delivery)
                continue
            channel = by_name.get(delivery.channel)
            if channel is None or delivery.channel in stalled:
                continue  # a channel no longer configured waits (until it is given up)
            outcome = _deliver(delivery_log, channel, delivery, policy, secrets, rng)
            if outcome == "delivered":
                summary.delivered += 1
            elif outcome == "failed":
                summary.failed += 1
                given_up.append(delivery)
            else:
                stalled.add(delivery.channel)
    left = delivery_log.read().pending()
    summary.pending = len(left)
    summary.undelivered = [d.as_json() for d in [*left, *given_up]]
    return summary


def read_deliveries(log_path: Path) -> list[Delivery]:
    """Every delivery the log holds, with its state (for the dashboard and reports)."""
    return list(DeliveryLog(log_path).read().deliveries.values())


def _recorded(delivery: Delivery) -> datetime:
    try:
        when = datetime.fromisoformat(delivery.recorded_at.replace("Z", "+00:00"))
    except ValueError:
        return datetime.now(UTC)
    return when if when.tzinfo else when.replace(tzinfo=UTC)


def _line(
    delivery: Delivery, status: str, code: int | None, error: str | None, ms: float
) -> dict[str, Any]:
    return {
        "type": "attempt",
        "key": delivery.key,
        "channel": delivery.channel,
        "attempt": delivery.attempts,
        "status": status,
        "code": code,
        "error": error,
        "at": now_iso(),
        "ms": round(ms, 1),
    }


def _deliver(
    delivery_log: DeliveryLog,
    channel: Channel,
    delivery: Delivery,
    policy: RetryPolicy,
    secrets: Sequence[Secret],
    rng: random.Random,
) -> str:
    """Attempts of one delivery in this call, each logged; its outcome."""
    started = time.monotonic()
    for tried in range(1, policy.max_attempts + 1):
        remaining = policy.max_seconds - (time.monotonic() - started)
        timeout = max(0.1, min(policy.timeout_seconds, remaining))
        delivery.attempts += 1
        clock = time.monotonic()
        failure: DeliveryError | None = None
        code: int | None = None
        try:
            code = channel.send(delivery.notification, delivery.attempts, timeout)
        except DeliveryError as exc:
            failure = exc
        except Exception as exc:  # a channel's bug must not stop the others, nor the run
            failure = DeliveryError(f"the channel failed unexpectedly ({type(exc).__name__})")
        ms = (time.monotonic() - clock) * 1000
        if failure is None:
            delivery_log.append([_line(delivery, "delivered", code, None, ms)])
            delivery.status = "delivered"
            return "delivered"
        error = _scrub(failure.message, secrets)
        if failure.permanent:
            delivery_log.append([_line(delivery, "failed", failure.code, error, ms)])
            delivery.status, delivery.error = "failed", error
            log.error("notification %s to %s failed for good: %s", delivery.key,
                      delivery.channel, error)  # fmt: skip
            return "failed"
        wait = policy.wait(tried, rng)
        if failure.retry_after is not None:
            wait = max(wait, failure.retry_after)
        last = tried == policy.max_attempts or (
            time.monotonic() - started + wait >= policy.max_seconds
        )
        status = "pending" if last else "retrying"
        delivery_log.append([_line(delivery, status, failure.code, error, ms)])
        delivery.status, delivery.error = "pending", error
        if last:
            log.error("notification %s to %s not delivered (%s); the next run tries again",
                      delivery.key, delivery.channel, error)  # fmt: skip
            return "pending"
        time.sleep(wait)
    return "pending"
