"""The delivery log: what was to be told, to which channels, and every attempt.

A JSON-lines file in the app's own state folder (``notify.delivery_log``, by
default ``data/app-state/deliveries.jsonl``), append-only, each line written
whole and synced under a lock of its own (``<log>.lock``), like the topic
curations' store. Two kinds of line:

``{"type": "notification", "key", "channels", "recorded_at", "notification"}``
    written (and synced) *before* any channel is tried: a run killed after it
    delivers on the next call, with the same key.
``{"type": "attempt", "key", "channel", "attempt", "status", "code", "error", "at", "ms"}``
    one per attempt; ``status`` is ``delivered``, ``retrying`` (another attempt
    follows in this call), ``pending`` (the last attempt of this call failed;
    the next call tries again), ``failed`` (permanent: never tried again) or
    ``abandoned`` (still undelivered after ``notify.give_up_days``; the line
    records no attempt of its own).

A delivery's state is its last attempt's status (``retrying`` read as
``pending``: the call that wrote it was killed); a notification's channel with
no attempt yet is ``pending``. No secret is ever written: a notification holds
no credential, and errors are built without them. A line a kill left
half-written is skipped, and the next append starts a fresh line.
"""

from __future__ import annotations

import fcntl
import os
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson

from convo_analytics.errors import UserError
from convo_analytics.notify._message import Notification

__all__ = ["DONE", "Delivery", "DeliveryLog", "LogState", "now_iso"]

#: States after which a delivery is never tried again.
DONE = ("delivered", "failed", "abandoned")


def now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


@dataclass(slots=True)
class Delivery:
    """One notification on one channel, as the log says it stands."""

    key: str
    channel: str
    notification: Notification
    recorded_at: str
    status: str = "pending"
    attempts: int = 0
    code: int | None = None
    error: str | None = None
    last_attempt_at: str | None = None

    def as_json(self) -> dict[str, Any]:
        return {
            "key": self.key,
            "channel": self.channel,
            "kind": self.notification.kind,
            "subject": self.notification.subject,
            "status": self.status,
            "attempts": self.attempts,
            "code": self.code,
            "error": self.error,
            "recorded_at": self.recorded_at,
            "last_attempt_at": self.last_attempt_at,
        }


@dataclass(slots=True)
class LogState:
    """Every delivery the log knows, in the order the notifications were recorded."""

    deliveries: dict[tuple[str, str], Delivery] = field(default_factory=dict)
    keys: set[str] = field(default_factory=set)

    def pending(self) -> list[Delivery]:
        return [d for d in self.deliveries.values() if d.status not in DONE]


class DeliveryLog:
    """The log at ``path``: :meth:`read` its state, :meth:`append` lines, :meth:`delivering`
    to be the one process delivering from it (a lock apart from the appends' lock)."""

    def __init__(self, path: Path) -> None:
        self.path = path

    @contextmanager
    def _flock(self, suffix: str, wait_seconds: float | None) -> Iterator[bool]:
        """Hold ``<log><suffix>``; with ``wait_seconds``, give up after that long (yield
        False) instead of waiting for ever."""
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(f"{self.path}{suffix}", os.O_RDWR | os.O_CREAT, 0o600)
        except OSError as exc:
            raise UserError(
                f"notify.delivery_log {self.path}: cannot be written ({exc.strerror}); fix "
                "its folder's permissions or point notify.delivery_log elsewhere"
            ) from None
        try:
            if wait_seconds is None:
                fcntl.flock(fd, fcntl.LOCK_EX)
                held = True
            else:
                deadline = time.monotonic() + wait_seconds
                while True:
                    try:
                        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                        held = True
                        break
                    except BlockingIOError:
                        if time.monotonic() >= deadline:
                            held = False
                            break
                        time.sleep(0.05)
            try:
                yield held
            finally:
                if held:
                    fcntl.flock(fd, fcntl.LOCK_UN)
        finally:
            os.close(fd)

    @contextmanager
    def delivering(self, wait_seconds: float) -> Iterator[bool]:
        """Whether this process is the one delivering (another may be, for a while)."""
        with self._flock(".deliver.lock", wait_seconds) as held:
            yield held

    def append(self, rows: Sequence[dict[str, Any]]) -> None:
        """Append ``rows`` as lines, synced, under the appends' lock."""
        if not rows:
            return
        data = b"".join(orjson.dumps(row) + b"\n" for row in rows)
        with self._flock(".lock", None):
            fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
            try:
                size = os.fstat(fd).st_size
                if size:
                    with self.path.open("rb") as f:  # a line a kill cut short: start a new one
                        f.seek(size - 1)
                        if f.read(1) != b"\n":
                            data = b"\n" + data
                os.write(fd, data)
                os.fsync(fd)
            finally:
                os.close(fd)

    def rewrite(self, change: Callable[[dict[str, Any]], dict[str, Any] | None]) -> int:
        """Write the log again with each line's row through ``change`` (None: the row as
        it was), under the appends' lock, whole (a temporary file, synced, renamed): an
        erasure taking a person out of what was told (D-ERASURE). Returns the lines
        changed; a line that is not a JSON object is kept as it is."""
        with self._flock(".lock", None):
            try:
                data = self.path.read_bytes()
            except FileNotFoundError:
                return 0
            lines, changed = [], 0
            for line in data.splitlines():
                try:
                    row = orjson.loads(line)
                except orjson.JSONDecodeError:
                    lines.append(line)
                    continue
                new = change(row) if isinstance(row, dict) else None
                if new is None or new == row:
                    lines.append(line)
                    continue
                lines.append(orjson.dumps(new))
                changed += 1
            if not changed:
                return 0
            tmp = self.path.with_name(self.path.name + ".rewrite")
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "wb") as f:
                f.write(b"".join(line + b"\n" for line in lines))
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, self.path)
            return changed

    def exists(self) -> bool:
        return self.path.exists()

    def read(self) -> LogState:
        """The state of every delivery (none without a file); unreadable lines skipped."""
        state = LogState()
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return state
        except OSError as exc:
            raise UserError(
                f"notify.delivery_log {self.path}: cannot be read ({exc.strerror}); fix its "
                "permissions or point notify.delivery_log elsewhere"
            ) from None
        for line in data.splitlines():
            try:
                row = orjson.loads(line)
                if not isinstance(row, dict):
                    continue
                if row.get("type") == "notification":
                    _add_notification(state, row)
                elif row.get("type") == "attempt":
                    _add_attempt(state, row)
            except (orjson.JSONDecodeError, KeyError, TypeError, ValueError):
                continue
        return state


def _add_notification(state: LogState, row: dict[str, Any]) -> None:
    notification = Notification.from_json(row["notification"])
    key = str(row["key"])
    if notification.key != key:
        return
    state.keys.add(key)
    for channel in row["channels"]:  # a repeat of a key adds only channels it did not name
        state.deliveries.setdefault(
            (key, str(channel)),
            Delivery(key, str(channel), notification, str(row.get("recorded_at") or "")),
        )


def _add_attempt(state: LogState, row: dict[str, Any]) -> None:
    found = state.deliveries.get((str(row["key"]), str(row["channel"])))
    if found is None or found.status in DONE:
        return
    status = str(row["status"])
    if status not in (*DONE, "pending", "retrying"):
        return
    found.status = "pending" if status == "retrying" else status
    found.attempts = max(found.attempts, int(row.get("attempt") or 0))
    found.code = row.get("code") if isinstance(row.get("code"), int) else None
    found.error = row.get("error") if isinstance(row.get("error"), str) else None
    found.last_attempt_at = str(row.get("at") or "") or found.last_attempt_at
