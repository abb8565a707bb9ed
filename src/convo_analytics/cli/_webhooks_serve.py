"""``convo webhooks serve``: receive the service's webhook deliveries into the archive.

Registered by ``_webhooks_cmd.py`` in the ``webhooks`` group. The receiver
speaks plain HTTP: TLS is terminated by a proxy in front of it, so it listens
on loopback unless ``--behind-tls-proxy`` says that such a proxy is there.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from convo_analytics.cli._app import settings_from_context
from convo_analytics.cli._errors import BehindTlsProxy, listening_socket, require_loopback
from convo_analytics.cli._options import default_of
from convo_analytics.errors import UserError

__all__ = ["serve"]

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8788
DEFAULT_MAX_BODY_BYTES = 1 << 20


def serve(
    ctx: typer.Context,
    host: Annotated[
        str,
        typer.Option(
            "--host",
            metavar="HOST",
            help="Interface to listen on (loopback unless behind a proxy).",
        ),
    ] = DEFAULT_HOST,
    port: Annotated[
        int, typer.Option("--port", metavar="PORT", help="TCP port (0 picks a free one).")
    ] = (DEFAULT_PORT),
    archive_dir: Annotated[
        Path | None,
        typer.Option(
            "--archive-dir",
            metavar="DIR",
            help=f"Archive directory. {default_of('webhooks.archive_dir')}",
        ),
    ] = None,
    max_body_bytes: Annotated[
        int,
        typer.Option(
            "--max-body-bytes", min=1, metavar="N", help="Larger bodies are answered 413."
        ),
    ] = DEFAULT_MAX_BODY_BYTES,
    behind_tls_proxy: BehindTlsProxy = False,
    path: Annotated[
        str, typer.Option("--path", metavar="PATH", help="URL path deliveries are POSTed to.")
    ] = ("/webhooks"),
) -> None:
    """Receive webhook deliveries: verify, archive durably, then acknowledge.

    Secrets come from CONVO_WEBHOOK_SECRET or CONVO_WEBHOOK_SECRET_FILE
    (comma-separated: several are accepted while a secret is rotated).
    """
    settings = settings_from_context(ctx, {"webhooks.archive_dir": archive_dir})
    require_loopback(host, behind_tls_proxy, "the receiver")
    from convo_analytics.webhooks import create_receiver_app, receiver_settings

    config = receiver_settings(settings, max_body_bytes=max_body_bytes, path=path)
    secrets, workspaces, directory = config.secrets, config.workspaces, config.archive_dir
    try:
        app = create_receiver_app(config)
    except ValueError as exc:
        raise UserError(f"receiver settings: {exc}") from None
    sock = listening_socket(host, port)
    actual_port = sock.getsockname()[1]
    shown_host = f"[{host}]" if ":" in host else host
    out = Console(highlight=False, soft_wrap=True)
    out.print(f"receiving webhooks on http://{shown_host}:{actual_port}{path}")
    for name in workspaces:
        out.print(f"  workspace {name}: http://{shown_host}:{actual_port}{path.rstrip('/')}/{name}")
    shown_dir = directory.resolve()
    out.print(f"archive: {shown_dir} (rejected deliveries: {shown_dir / 'quarantine'})")
    plural = "s" if len(secrets) > 1 else ""
    out.print(f"verifying with {len(secrets)} configured secret{plural}")
    import logging

    import uvicorn

    from convo_analytics.webhooks._server import connection_cap

    cap, fd_limit = connection_cap(config.max_connections)
    out.print(f"holding at most {cap} connections (file-descriptor limit {fd_limit})")
    # The receiver's own warnings (the signature alarm, the connection cap) go to stderr.
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(message)s")
    server = uvicorn.Server(
        uvicorn.Config(
            app,
            log_level="warning",
            access_log=False,
            timeout_graceful_shutdown=5,
            **config.server_options(),
        )
    )
    from convo_analytics._serving import run_foreground

    run_foreground(server, sock)
