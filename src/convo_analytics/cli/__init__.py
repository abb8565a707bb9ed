"""The ``convo`` command line.

Command modules define a ``typer.Typer()`` group and read their settings with
:func:`settings_from_context` (import it from ``convo_analytics.cli._app`` inside
``convo_analytics.cli`` to avoid import cycles).  Groups are attached below.
"""

from __future__ import annotations

from convo_analytics.cli._app import (
    PROG_NAME,
    CliState,
    app,
    config_location_from_context,
    main,
    settings_from_context,
)
from convo_analytics.cli._audit_cmd import audit_app
from convo_analytics.cli._auth_cmd import auth_app
from convo_analytics.cli._config_cmd import config_app
from convo_analytics.cli._dashboard_cmd import dashboard
from convo_analytics.cli._erase_cmd import erase
from convo_analytics.cli._export_cmd import export_app
from convo_analytics.cli._extract_cmd import extract
from convo_analytics.cli._monitors_cmd import monitors_app
from convo_analytics.cli._notebook_cmd import notebook_app
from convo_analytics.cli._publish_cmd import publish
from convo_analytics.cli._reports_cmd import reports_app
from convo_analytics.cli._run_cmd import run
from convo_analytics.cli._sandbox_cmd import sandbox_app
from convo_analytics.cli._serve_cmd import serve
from convo_analytics.cli._topics_cmd import topics_app
from convo_analytics.cli._transform_cmd import transform
from convo_analytics.cli._webhooks_cmd import webhooks_app
from convo_analytics.cli._webhooks_quarantine import quarantine_app

__all__ = [
    "PROG_NAME",
    "CliState",
    "app",
    "config_location_from_context",
    "main",
    "settings_from_context",
]

# --- subcommand groups -----------------------------------------------------------
# One import + one add_typer per group; document each command in docs/cli.md
# (tests/test_cli_basics.py fails for undocumented commands).
app.add_typer(config_app, name="config")
app.add_typer(auth_app, name="auth")
app.add_typer(sandbox_app, name="sandbox")
app.command("extract")(extract)
webhooks_app.add_typer(quarantine_app, name="quarantine")
app.add_typer(webhooks_app, name="webhooks")
app.command("transform")(transform)
app.add_typer(export_app, name="export")
app.add_typer(topics_app, name="topics")
app.add_typer(monitors_app, name="monitors")
app.add_typer(notebook_app, name="notebook")
app.add_typer(reports_app, name="reports")
app.command("serve")(serve)
app.command("publish")(publish)
app.command("dashboard")(dashboard)
app.command("run")(run)
app.add_typer(audit_app, name="audit")
app.command("erase")(erase)
