"""A decoy authorization server on a loopback port: another origin, recording what reaches it.

It stands in for a hostile or mistaken server: its metadata document (RFC
8414) is whatever the test sets (endpoints on other origins, plain http), and
every other request is answered with a token that would work, so a client
that sent anything here would carry on as if nothing were wrong. Tests
assert on :attr:`Decoy.hits` that nothing arrived.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from convo_analytics._serving import ServerThread

WELL_KNOWN = "/.well-known/oauth-authorization-server"


@dataclass
class Hit:
    method: str
    path: str
    authorization: str | None
    body: bytes


@dataclass
class Decoy:
    """The decoy's state: its URL, the metadata it serves, and every request it got."""

    url: str = ""
    metadata: dict[str, Any] = field(default_factory=dict)
    hits: list[Hit] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def seen(self, text: str) -> bool:
        """Whether ``text`` reached the decoy in any request's header or body."""
        with self.lock:
            return any(text in (h.authorization or "") or text.encode() in h.body
                       for h in self.hits)  # fmt: skip


def _app(decoy: Decoy) -> Starlette:
    async def anything(request: Request) -> Response:
        body = await request.body()
        with decoy.lock:
            decoy.hits.append(Hit(request.method, request.url.path,
                                  request.headers.get("authorization"), body))  # fmt: skip
        if request.url.path == WELL_KNOWN:
            return JSONResponse(decoy.metadata)
        return JSONResponse({"access_token": "decoy-access", "token_type": "Bearer",
                             "expires_in": 3600, "refresh_token": "decoy-refresh"})  # fmt: skip

    return Starlette(routes=[Route("/{path:path}", anything, methods=["GET", "POST"])])


@contextmanager
def decoy_server() -> Iterator[Decoy]:
    decoy = Decoy()
    with ServerThread(_app(decoy)) as server:
        decoy.url = server.url
        yield decoy
