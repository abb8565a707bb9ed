"""``convo serve``: the summary endpoint over the published snapshot, behind tokens that
map to the workspaces they may read (decision D-SERVE-TOKENS).

Workspace tokens are read here only, when the server starts, so that no other
command (a nightly run) needs them.
"""

from __future__ import annotations

import os
from typing import Annotated

import typer
from rich.console import Console

from convo_analytics.cli._app import settings_from_context
from convo_analytics.cli._errors import BehindTlsProxy, listening_socket, require_loopback
from convo_analytics.cli._options import DbOption, default_of
from convo_analytics.config import CONFIG_ENV_VAR, load_workspaces, serve_tokens

__all__ = ["serve"]


def serve(
    ctx: typer.Context,
    host: Annotated[
        str | None,
        typer.Option(
            "--host", metavar="HOST", help=f"Interface to listen on. {default_of('serve.host')}"
        ),
    ] = None,
    port: Annotated[
        int | None,
        typer.Option(
            "--port",
            metavar="PORT",
            help=f"TCP port (0 picks a free one). {default_of('serve.port')}",
        ),
    ] = None,
    db: DbOption = None,
    behind_tls_proxy: BehindTlsProxy = False,
) -> None:
    """Answer GET /v1/analytics/summary from the warehouse, behind bearer tokens.

    The global token (CONVO_SERVE_TOKEN or CONVO_SERVE_TOKEN_FILE) reads every
    workspace; a [[workspaces]] table's serve_tokens_env / serve_tokens_file
    tokens read that workspace only (?workspace=NAME picks one).
    """
    settings = settings_from_context(
        ctx, {"serve.host": host, "serve.port": port, "warehouse.path": db}
    )
    bind_host = settings.get_str("serve.host")
    require_loopback(bind_host, behind_tls_proxy, "convo serve")
    token = settings.get_secret("serve.token")
    configured = load_workspaces(settings, resolve_secrets=False)
    workspace_tokens = {
        w.name: [t.reveal() for t in serve_tokens(w, settings.environ)] for w in configured
    }
    db_path = settings.require_path("warehouse.path")
    if settings.config_path is not None:  # what the reader looks up itself (read.source, lake.*)
        os.environ[CONFIG_ENV_VAR] = str(settings.config_path)
    from convo_analytics.audit import auditor
    from convo_analytics.serve import create_serve_app

    app = create_serve_app(
        db_path,
        token.reveal() if token else None,
        settings.get_path("publish.dir"),
        workspace_tokens=workspace_tokens,
        configured=configured,
        auditor=auditor(settings),
    )
    sock = listening_socket(bind_host, settings.get_int("serve.port"))
    shown = f"[{bind_host}]" if ":" in bind_host else bind_host
    Console(highlight=False, soft_wrap=True).print(
        f"serving GET /v1/analytics/summary on http://{shown}:{sock.getsockname()[1]} "
        f"from {db_path}"
    )
    import uvicorn

    server = uvicorn.Server(
        uvicorn.Config(app, log_level="warning", access_log=False, timeout_graceful_shutdown=5)
    )
    from convo_analytics._serving import run_foreground

    run_foreground(server, sock)
