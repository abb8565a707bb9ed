"""``convo publish`` and ``convo dashboard``: a snapshot for readers, and the app that reads it."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from convo_analytics.cli._app import settings_from_context
from convo_analytics.cli._errors import (
    BehindTlsProxy,
    listening_socket,
    report_error,
    require_loopback,
)
from convo_analytics.cli._lock import warehouse_writer
from convo_analytics.cli._options import DbOption, default_of
from convo_analytics.errors import UserError

__all__ = ["dashboard", "publish"]

#: The app's entry script, in the repository next to src/.
APP = Path(__file__).resolve().parents[3] / "dashboards" / "streamlit_app.py"


def publish(
    ctx: typer.Context,
    db: DbOption = None,
    published_dir: Annotated[
        Path | None,
        typer.Option(
            "--dir", metavar="DIR", help=f"Where snapshots go. {default_of('publish.dir')}"
        ),
    ] = None,
    keep: Annotated[
        int | None,
        typer.Option(
            "--keep", min=1, metavar="N", help=f"Snapshots kept. {default_of('publish.keep')}"
        ),
    ] = None,
) -> None:
    """Publish a consistent snapshot of the warehouse for the dashboard and other readers.

    Exit status 0 when published; 1 when the copy could not be written (not
    enough space, a write error: nothing is left behind and the published
    snapshot stays); 75 when another writer holds the warehouse; 2 for usage
    errors (no warehouse).
    """
    settings = settings_from_context(
        ctx, {"warehouse.path": db, "publish.dir": published_dir, "publish.keep": keep}
    )
    db_path = settings.require_path("warehouse.path")
    from convo_analytics.publish import PublishFailed, publish_snapshot
    from convo_analytics.warehouse import open_warehouse, require_existing

    require_existing(db_path)  # said before the lock is waited for
    folder = settings.require_path("publish.dir")
    with warehouse_writer(settings, "convo publish"):
        con = open_warehouse(db_path, must_exist=True)
        try:
            snap = publish_snapshot(con, db_path, folder, settings.get_int("publish.keep"))
        except PublishFailed as exc:
            report_error(str(exc), "convo publish")
            raise typer.Exit(1) from None
        finally:
            con.close()
    Console(stderr=True, highlight=False, soft_wrap=True).print(
        f"published {snap.path} (snapshot {snap.snapshot_id})"
    )


def dashboard(
    ctx: typer.Context,
    host: Annotated[
        str | None,
        typer.Option(
            "--host",
            metavar="HOST",
            help=f"Interface to listen on. {default_of('dashboard.host')}",
        ),
    ] = None,
    port: Annotated[
        int | None,
        typer.Option("--port", metavar="PORT", help=f"TCP port. {default_of('dashboard.port')}"),
    ] = None,
    published_dir: Annotated[
        Path | None,
        typer.Option(
            "--dir", metavar="DIR", help=f"Snapshots to read. {default_of('publish.dir')}"
        ),
    ] = None,
    behind_tls_proxy: BehindTlsProxy = False,
) -> None:
    """Serve the Streamlit app over the published snapshot (never the live warehouse)."""
    settings = settings_from_context(
        ctx, {"dashboard.host": host, "dashboard.port": port, "publish.dir": published_dir}
    )
    bind_host = settings.get_str("dashboard.host")
    require_loopback(bind_host, behind_tls_proxy, "the dashboard")
    if not APP.exists():
        raise UserError(f"the app's entry script {APP} is missing; run from a checkout of the repo")
    folder = settings.require_path("publish.dir").resolve()
    port = settings.get_int("dashboard.port")
    listening_socket(bind_host, port).close()  # a busy port: one line, exit 2 (not Streamlit's)
    env = {
        **os.environ,
        "CONVO_PUBLISHED_DIR": str(folder),
        # the app reads its settings from the environment: the values resolved here win
        "CONVO_DASHBOARD_NOTEBOOKS_DIR": str(
            settings.require_path("dashboard.notebooks_dir").resolve()
        ),
        "CONVO_DASHBOARD_QUERY_TIMEOUT_SECONDS": str(
            settings.get_float("dashboard.query_timeout_seconds")
        ),
        "CONVO_DASHBOARD_QUERY_ROW_LIMIT": str(settings.get_int("dashboard.query_row_limit")),
    }
    argv = [
        sys.executable, "-m", "streamlit", "run", str(APP),
        "--server.address", bind_host, "--server.port", str(settings.get_int("dashboard.port")),
        "--server.headless", "true", "--browser.gatherUsageStats", "false",
        "--client.toolbarMode", "minimal",  # no Deploy button: this is not a dev server
    ]  # fmt: skip
    Console(highlight=False, soft_wrap=True).print(
        f"dashboard on http://{bind_host}:{settings.get_int('dashboard.port')} reading {folder}"
    )
    sys.stdout.flush()
    # Become Streamlit rather than wait for it as a child: a stop signal from a service
    # manager, a test or Ctrl-C then reaches the server itself, which leaves no orphan.
    os.execve(sys.executable, argv, env)
