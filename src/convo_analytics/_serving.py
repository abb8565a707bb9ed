"""Running an ASGI app under uvicorn, in the foreground or in a background thread.

The background form is what tests and benchmarks use to talk to real servers
over real HTTP on 127.0.0.1: it binds port 0 so the kernel picks a free port.
"""

from __future__ import annotations

import signal
import socket
import threading
import time
from types import TracebackType
from typing import Any

import uvicorn
from starlette.types import ASGIApp


def bind(host: str, port: int) -> socket.socket:
    """A listening socket for uvicorn.

    Created with IPPROTO_TCP explicitly: asyncio turns Nagle's algorithm off
    (TCP_NODELAY) only for sockets whose protocol says TCP, and without it every
    small answer waits for the client's delayed ACK (about 40 ms).
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(512)
    sock.set_inheritable(True)
    return sock


def run_foreground(server: uvicorn.Server, sock: socket.socket) -> None:
    """Serve on ``sock`` until Ctrl-C or SIGTERM, which stop the server as uvicorn's own would.

    uvicorn installs its signal handlers only once its event loop runs; a Ctrl-C in the
    instant before (right after a command printed where it listens) was raised inside
    the loop's setup, where it could be swallowed, and the server then ran on. Handlers
    installed here first ask the server to stop whenever the signal comes; afterwards
    the signal is raised again with the handlers the command had, so the command ends
    as it always did (exit 130 for Ctrl-C, terminated for SIGTERM).
    """
    received: list[int] = []

    def stop(signum: int, frame: object) -> None:
        received.append(signum)
        server.should_exit = True

    handled = (signal.SIGINT, signal.SIGTERM)
    previous = {sig: signal.signal(sig, stop) for sig in handled}
    try:
        server.run(sockets=[sock])
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    for signum in dict.fromkeys(received):
        signal.raise_signal(signum)


class ServerThread:
    """``with ServerThread(app) as server: httpx.get(server.url + "/...")``."""

    def __init__(
        self,
        app: ASGIApp,
        host: str = "127.0.0.1",
        port: int = 0,
        startup_timeout: float = 30.0,
        **options: Any,
    ) -> None:
        """``options``: more uvicorn.Config settings (the receiver's protocol, say)."""
        self.sock = bind(host, port)
        self.host, self.port = self.sock.getsockname()[:2]
        config = uvicorn.Config(
            app,
            log_level="warning",
            access_log=False,
            lifespan="on",
            timeout_graceful_shutdown=2,
            **options,
        )
        self.server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._run, name="uvicorn", daemon=True)
        self._startup_timeout = startup_timeout

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def _run(self) -> None:
        self.server.run(sockets=[self.sock])

    def start(self) -> ServerThread:
        self._thread.start()
        deadline = time.monotonic() + self._startup_timeout
        while not self.server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError(f"the server on {self.url} did not start")
            time.sleep(0.01)
        return self

    def stop(self) -> None:
        self.server.should_exit = True
        self._thread.join(timeout=10)
        self.sock.close()

    def __enter__(self) -> ServerThread:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
