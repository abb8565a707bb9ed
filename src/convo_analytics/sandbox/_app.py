"""The sandbox's ASGI application."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI
from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp

from convo_analytics import __version__
from convo_analytics.sandbox import (
    _routes_control,
    _routes_live,
    _routes_oauth,
    _routes_read,
    _routes_webhooks,
)
from convo_analytics.sandbox._errors import (
    ApiException,
    api_exception_handler,
    http_exception_handler,
    validation_exception_handler,
)
from convo_analytics.sandbox._faults import FaultInjector
from convo_analytics.sandbox._service import Sandbox

DESCRIPTION = """\
A faithful local implementation of the Conversational Assistant Service's
interface, for development, tests and benchmarks of convo-analytics. Where the
interface does not show a shape, this document shows the one chosen; the
reasons are in docs/decisions.md. Every error answers with the ErrorBody shape.
"""


SWEEP_SECONDS = 1.0


async def _sweep_forever(sandbox: Sandbox) -> None:
    """Complete live conversations that went quiet (checked every second)."""
    while True:
        await asyncio.sleep(SWEEP_SECONDS)
        now = int(time.time() * 1000)
        for ws in list(sandbox.workspaces.values()):
            await asyncio.to_thread(sandbox.live.sweep, ws, now)


def create_app(sandbox: Sandbox) -> ASGIApp:
    """The HTTP app over a built sandbox (fault injection wraps it)."""

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        await sandbox.dispatcher.start()
        sweeper = asyncio.create_task(_sweep_forever(sandbox))
        try:
            yield
        finally:
            sweeper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await sweeper
            await sandbox.dispatcher.stop()

    app = FastAPI(
        title="Conversational Assistant Service (convo-analytics sandbox)",
        version=__version__,
        description=DESCRIPTION,
        lifespan=lifespan,
        docs_url="/docs",
        redoc_url=None,
    )
    app.state.sandbox = sandbox
    app.state.faults = sandbox.settings.faults
    app.add_exception_handler(ApiException, api_exception_handler)
    app.add_exception_handler(StarletteHTTPException, http_exception_handler)
    app.add_exception_handler(RequestValidationError, validation_exception_handler)
    app.include_router(_routes_read.router)
    app.include_router(_routes_live.router)
    app.include_router(_routes_webhooks.router)
    app.include_router(_routes_control.router)
    app.include_router(_routes_oauth.router)
    injector = FaultInjector(app, sandbox.settings.faults, seed=sandbox.settings.seed)
    return injector
