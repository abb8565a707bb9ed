"""The receiver's HTTP server: uvicorn's h11 protocol with a header timeout and a connection cap.

uvicorn times out an idle keep-alive connection, but not a client that sends
part of its request headers and stalls: such a connection is held for ever,
and a few hundred of them exhaust the file descriptors (``accept()`` fails with
EMFILE and valid deliveries time out). uvicorn's ``limit_concurrency`` answers
503 only once a request's headers have arrived, so it does not help either.
Decision D-RECEIVER-LIMITS:

- a connection must deliver its request headers within ``header_timeout``
  seconds of connecting (or of its previous answer), else it is closed (with a
  408 when nothing was answered on it yet);
- the body must arrive within ``body_timeout`` seconds: that is enforced in the
  app (``_receiver.py``), which answers 408 and closes;
- at most ``max_connections`` connections are held, kept 64 below the
  process's file-descriptor limit: a connection beyond the cap is answered 503
  (with ``Retry-After``) and closed at once, and a log line says the cap was
  reached (at most every 10 seconds), so descriptors stay available for the
  archive and for the deliveries already accepted.
"""

from __future__ import annotations

import asyncio
import logging
import resource
import time
from typing import Any

from uvicorn.protocols.http.h11_impl import H11Protocol

__all__ = ["connection_cap", "guarded_protocol"]

log = logging.getLogger(__name__)

#: Descriptors left free under the limit: the archive files, the listening socket, logs.
_SPARE_FDS = 64
_CAP_LOG_EVERY = 10.0


def _answer(status: str, code: str, message: str, *extra: str) -> bytes:
    """A whole HTTP/1.1 answer in the receiver's error shape, closing the connection."""
    body = f'{{"error":{{"code":"{code}","message":"{message}"}}}}'.encode()
    head = [f"HTTP/1.1 {status}", "content-type: application/json", *extra,
            "connection: close", f"content-length: {len(body)}"]  # fmt: skip
    return ("\r\n".join(head) + "\r\n\r\n").encode() + body


_TIMEOUT = _answer("408 Request Timeout", "request_timeout", "the headers did not arrive in time")
_FULL = _answer(
    "503 Service Unavailable", "unavailable", "too many connections are open; retry",
    "retry-after: 1",
)  # fmt: skip


def connection_cap(wanted: int) -> tuple[int, int]:
    """(the cap on open connections, the file-descriptor limit it was kept under)."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY or soft <= 0:
        return wanted, -1
    return max(1, min(wanted, soft - _SPARE_FDS)), soft


def guarded_protocol(header_timeout: float, max_connections: int) -> type[H11Protocol]:
    """An h11 protocol class for uvicorn (``Config(http=...)``) with the limits above."""
    cap, fd_limit = connection_cap(max_connections)
    state: dict[str, Any] = {"refused": 0, "logged": 0.0}

    class GuardedH11Protocol(H11Protocol):
        _header_timer: asyncio.TimerHandle | None = None
        _answered = False

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            if len(self.connections) > cap:
                self._refuse()
                return
            self._arm()

        def _refuse(self) -> None:
            state["refused"] += 1
            now = time.monotonic()
            if now - state["logged"] >= _CAP_LOG_EVERY:
                limit = f"file-descriptor limit {fd_limit}" if fd_limit > 0 else "no fd limit"
                log.warning(
                    "receiver: %d connections open, the cap (webhooks.max_connections, "
                    "%s): %d new connection(s) answered 503 and closed since the last note",
                    cap, limit, state["refused"],
                )  # fmt: skip
                state["logged"], state["refused"] = now, 0
            self.transport.write(_FULL)
            self.transport.close()

        def _arm(self) -> None:
            self._disarm()
            self._header_timer = self.loop.call_later(header_timeout, self._headers_late)

        def _disarm(self) -> None:
            if self._header_timer is not None:
                self._header_timer.cancel()
                self._header_timer = None

        def _headers_late(self) -> None:
            self._header_timer = None
            if self.transport.is_closing():
                return
            if self.cycle is not None and not self.cycle.response_complete:
                return  # a request is being answered; its body has its own timeout
            if not self._answered:
                self.transport.write(_TIMEOUT)
            self.transport.close()

        def handle_events(self) -> None:
            before = self.cycle
            super().handle_events()
            if self.cycle is not before:  # a request's headers arrived
                self._disarm()

        def on_response_complete(self) -> None:
            self._answered = True
            super().on_response_complete()
            if not self.transport.is_closing():
                self._arm()

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm()
            super().connection_lost(exc)

    return GuardedH11Protocol
