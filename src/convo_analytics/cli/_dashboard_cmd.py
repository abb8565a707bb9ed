"""``convo dashboard``: the app that reads the published snapshot (or a copy of the lake)."""

from __future__ import annotations

import json
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
    require_loopback,
)
from convo_analytics.cli._options import default_of
from convo_analytics.config import Settings
from convo_analytics.errors import UserError

__all__ = ["dashboard"]

#: The workspace ids the app shows (a JSON list), read by dashboard._session.
WORKSPACES_ENV = "CONVO_DASHBOARD_WORKSPACE_IDS"
#: The app's entry script, in the repository next to src/.
APP = Path(__file__).resolve().parents[3] / "dashboards" / "streamlit_app.py"


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
    workspace: Annotated[
        list[str] | None,
        typer.Option(
            "--workspace",
            metavar="NAME",
            help="Serve only this workspace (its [[workspaces]] name or its id; repeatable): "
            "the sidebar offers only these, every page and Explore's SQL see only their rows.",
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
    ids = _workspace_ids(settings, folder, workspace) if workspace else None
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
        # the run's alert deliveries (the Pipeline page), wherever the app's folder is
        "CONVO_NOTIFY_DELIVERY_LOG": str(settings.require_path("notify.delivery_log").resolve()),
        **{
            f"CONVO_DASHBOARD_QUERY_{limit.upper()}": str(
                settings.get_int(f"dashboard.query_{limit}")
            )
            for limit in ("memory_mb", "threads", "workers", "temp_mb")
        },
        # the same config file for what the app reads itself (read.source, lake.*)
        **({"CONVO_CONFIG": str(settings.config_path)} if settings.config_path else {}),
    }
    # the Topics page appends renames and merges to the store every transform reads
    store = settings.topics.curations_file
    if store is not None:
        env["CONVO_TOPICS_CURATIONS_FILE"] = str(store.resolve())
    env.pop(WORKSPACES_ENV, None)
    if ids is not None:
        env[WORKSPACES_ENV] = json.dumps(ids)
    argv = [
        sys.executable, "-m", "streamlit", "run", str(APP),
        "--server.address", bind_host, "--server.port", str(settings.get_int("dashboard.port")),
        "--server.headless", "true", "--browser.gatherUsageStats", "false",
        "--client.toolbarMode", "minimal",  # no Deploy button: this is not a dev server
    ]  # fmt: skip
    only = f" (workspaces: {', '.join(ids)})" if ids else ""
    Console(highlight=False, soft_wrap=True).print(
        f"dashboard on http://{bind_host}:{settings.get_int('dashboard.port')} reading "
        f"{folder}{only}",
        markup=False,
    )
    sys.stdout.flush()
    # Become Streamlit rather than wait for it as a child: a stop signal from a service
    # manager, a test or Ctrl-C then reaches the server itself, which leaves no orphan.
    os.execve(sys.executable, argv, env)


def _workspace_ids(settings: Settings, folder: Path, wanted: list[str]) -> list[str]:
    """The ids of the workspaces ``--workspace`` names (a name first, else an id), as the
    exports resolve them: the current snapshot's workspaces, named by ``[[workspaces]]``."""
    from convo_analytics.config import load_workspaces
    from convo_analytics.export import find_workspace, warehouse_workspaces
    from convo_analytics.publish import SnapshotUnreadable, current_snapshot

    try:
        snap = current_snapshot(folder)
    except SnapshotUnreadable as exc:
        raise UserError(
            f"--workspace {wanted[0]!r}: the published snapshot in {folder} cannot be read "
            f"({exc.reason}); run 'convo publish'"
        ) from None
    if snap is None:
        raise UserError(
            f"--workspace {wanted[0]!r}: nothing is published in {folder} yet to find it in; "
            "run 'convo publish' first"
        )
    configured = load_workspaces(settings, resolve_secrets=False)
    con = snap.connect()
    try:
        known = warehouse_workspaces(con, configured)
    finally:
        con.close()
    return list(dict.fromkeys(find_workspace(known, w, configured).workspace_id for w in wanted))
