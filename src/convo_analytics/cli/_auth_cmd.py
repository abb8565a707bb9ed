"""``convo auth``: log in to OAuth workspaces, see their grants, log out (revoking)."""

from __future__ import annotations

import sys
import time
from typing import TYPE_CHECKING, Annotated

import orjson
import typer

from convo_analytics.cli._app import settings_from_context
from convo_analytics.errors import UserError

if TYPE_CHECKING:
    from convo_analytics.auth import TokenStore
    from convo_analytics.config import WorkspaceConfig

__all__ = ["auth_app"]

auth_app = typer.Typer(
    name="auth", help="OAuth 2.0 grants of [[workspaces]]: login, status, logout.",
    no_args_is_help=True,
)  # fmt: skip

WorkspaceOption = Annotated[
    str,
    typer.Option("--workspace", "-w", metavar="NAME", help="The workspace ([[workspaces]] name)."),
]


def _workspace_and_store(ctx: typer.Context, name: str) -> tuple[WorkspaceConfig, TokenStore]:
    from convo_analytics.auth import TokenStore
    from convo_analytics.config import load_workspaces, select_workspaces

    settings = settings_from_context(ctx)
    (workspace,) = select_workspaces(load_workspaces(settings), [name])
    return workspace, TokenStore.from_settings(settings)


@auth_app.command("login")
def login_cmd(
    ctx: typer.Context,
    workspace: WorkspaceOption,
    no_browser: Annotated[
        bool, typer.Option("--no-browser", help="Print the URL only; open it yourself.")
    ] = False,
) -> None:
    """Grant convo-analytics access to a workspace: the authorization code flow with PKCE.

    Prints the authorization URL (and opens it unless --no-browser), waits for the
    redirect on a loopback port of this machine, and keeps the tokens in the token
    store (auth.token_store, mode 0600). Tokens are never printed.
    """
    from convo_analytics.auth import login

    ws, store = _workspace_and_store(ctx, workspace)
    shown = login(ws, store, open_browser=not no_browser,
                  say=lambda line: typer.echo(line, err=True))  # fmt: skip
    expires = shown.get("expires_at")
    left = f", access token valid {max(0, int(float(expires) - time.time()))} s" if expires else ""
    typer.echo(
        f"logged in to {workspace!r}: scope {shown.get('scope') or '(none)'}{left}", err=True
    )


@auth_app.command("status")
def status_cmd(
    ctx: typer.Context,
    workspace: Annotated[
        list[str] | None,
        typer.Option(
            "--workspace",
            "-w",
            metavar="NAME",
            help="Only this workspace (repeatable); default: every one.",
        ),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="One JSON object.")] = False,
) -> None:
    """Each workspace's authentication: API key or OAuth, logged in, scopes, expiry (no tokens).

    A workspace whose secret is named but missing is shown not ready, with the variable
    or file to set; the others are shown as they are.
    """
    from convo_analytics.auth import TokenStore
    from convo_analytics.config import ConfigError, load_workspaces, select_workspaces

    settings = settings_from_context(ctx)
    store = TokenStore.from_settings(settings)
    store.workspaces()  # a malformed file is one line, not a guess; each entry is read below
    rows = []
    for ws in select_workspaces(load_workspaces(settings), list(workspace or ())):
        row: dict[str, object] = {"workspace": ws.name, "base_url": ws.base_url}
        try:
            row.update(_status(ws, store))
        except ConfigError as exc:  # its secret is missing: say which, show the others
            row.update(ready=False, problem=str(exc))
        rows.append(row)
    if as_json:
        sys.stdout.write(orjson.dumps({"workspaces": rows}).decode() + "\n")
        return
    for row in rows:
        details = ", ".join(f"{k} {v}" for k, v in row.items() if k not in ("workspace",))
        typer.echo(f"{row['workspace']}: {details}")


def _status(ws: WorkspaceConfig, store: TokenStore) -> dict[str, object]:
    """How ``ws`` authenticates and whether it can (reads its own secret only)."""
    if not ws.uses_oauth:
        return {"auth": "api_key", "ready": ws.api_key is not None}
    token = store.get(ws.name) or {}
    grant = getattr(ws.auth, "grant", "")
    expires = token.get("expires_at")
    ready = bool(token.get("refresh_token"))
    if grant == "client_credentials":
        ready = ws.client_secret is not None
    return {
        "auth": f"oauth ({grant})",
        "ready": ready,
        "scope": token.get("scope"),
        "access_expires_in": int(float(expires) - time.time()) if expires else None,
    }


@auth_app.command("logout")
def logout_cmd(ctx: typer.Context, workspace: WorkspaceOption) -> None:
    """Revoke the workspace's OAuth grant at the service and forget its tokens."""
    from convo_analytics.auth import logout

    ws, store = _workspace_and_store(ctx, workspace)
    if not logout(ws, store):
        raise UserError(f"workspace {workspace!r} has no stored OAuth login")
    typer.echo(f"logged out of {workspace!r}: the grant was revoked", err=True)
