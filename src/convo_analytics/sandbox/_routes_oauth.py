"""The OAuth 2.0 endpoints of the sandbox: metadata, authorize (with consent), token, revoke.

The protocol is Authlib's (``_oauth.OAuthServer``); these routes read each
request whole, hand it over, and turn Authlib's answers into responses.
"""

from __future__ import annotations

import secrets
from typing import Any

from fastapi import APIRouter, Request
from starlette.responses import RedirectResponse, Response

from convo_analytics.sandbox._auth import sandbox_of
from convo_analytics.sandbox._oauth import (
    ALL_SCOPES,
    Incoming,
    OAuthClient,
    consent_error,
    consent_page,
    invalid_request,
    redirect_problem,
)
from convo_analytics.sandbox._routes_control import Admin
from convo_analytics.sandbox._routes_read import json_response

router = APIRouter(include_in_schema=False)


async def _incoming(request: Request) -> Incoming:
    form: dict[str, str] = {}
    if request.method == "POST":
        data = await request.form()
        form = {k: str(v) for k, v in data.items()}
    return Incoming(
        method=request.method,
        url=str(request.url),
        headers=request.headers,
        query=dict(request.query_params),
        form=form,
    )


def _malformed_redirect(params: dict[str, str] | Any) -> Response | None:
    """400 ``invalid_request`` for a redirect URI no one can be sent to (never a 500)."""
    given = params.get("redirect_uri")
    problem = redirect_problem(given) if given else None
    return invalid_request(problem) if problem else None


def _issuer(request: Request) -> str:
    return str(request.base_url).rstrip("/")


@router.get("/.well-known/oauth-authorization-server")
def metadata(request: Request) -> Response:
    return json_response(sandbox_of(request).oauth.metadata(_issuer(request)), request)


@router.get("/oauth/authorize")
async def authorize(request: Request) -> Response:
    """The consent page, or (with auto-approve) the redirect with a code at once."""
    sandbox = sandbox_of(request)
    server = sandbox.oauth
    incoming = await _incoming(request)
    if (malformed := _malformed_redirect(incoming.query)) is not None:
        return malformed
    try:
        grant = server.get_consent_grant(incoming)
    except Exception as exc:  # Authlib's OAuth2Error: invalid client, redirect, PKCE, scope
        return _authorize_error(server, incoming, exc)
    if server.settings.auto_approve:
        names = sandbox.workspace_names()
        name = incoming.query.get("workspace") or next(iter(names))
        workspace = names.get(name) or (name if name in names.values() else None)
        if workspace is None:
            return consent_error(f"no workspace named {name!r}", 400)
        answer: Response = server.create_authorization_response(grant.request, workspace, grant)
        return answer
    client = grant.client
    assert isinstance(client, OAuthClient)
    return Response(
        consent_page(incoming, client, sandbox.workspace_names()), media_type="text/html"
    )


@router.post("/oauth/authorize")
async def decide(request: Request) -> Response:
    """The admin's decision: approve with the workspace's admin key, or deny."""
    sandbox = sandbox_of(request)
    server = sandbox.oauth
    incoming = await _incoming(request)
    # the authorization request's parameters came back as hidden form fields
    incoming.query = {k: v for k, v in incoming.form.items() if k not in ("admin_key",)}
    if (malformed := _malformed_redirect(incoming.query)) is not None:
        return malformed
    try:
        grant = server.get_consent_grant(incoming)
    except Exception as exc:
        return _authorize_error(server, incoming, exc)
    user = None
    if incoming.form.get("decision") == "approve":
        workspace = sandbox.workspace_names().get(incoming.form.get("workspace", ""))
        if workspace is None or not sandbox.is_workspace_admin(
            workspace, incoming.form.get("admin_key", "")
        ):
            return consent_error("that key does not administer that workspace", 403)
        user = workspace
    decided: Response = server.create_authorization_response(grant.request, user, grant)
    return decided


def _authorize_error(server: Any, incoming: Incoming, exc: Exception) -> Response:
    """RFC 6749, 4.1.2.1: redirect the error only to a redirect URI checked for the client."""
    from authlib.oauth2 import OAuth2Error

    if not isinstance(exc, OAuth2Error):
        raise exc
    if getattr(exc, "redirect_uri", None):
        _, _, headers = exc()
        location = dict(headers).get("Location")
        if location:
            return RedirectResponse(location, status_code=302)
    return consent_error(f"{exc.error}: {exc.description or 'invalid request'}", 400)


@router.post("/oauth/token")
async def token(request: Request) -> Response:
    incoming = await _incoming(request)
    if (malformed := _malformed_redirect(incoming.form)) is not None:
        return malformed
    response: Response = sandbox_of(request).oauth.create_token_response(incoming)
    return response


@router.post("/oauth/revoke")
async def revoke(request: Request) -> Response:
    server = sandbox_of(request).oauth
    response: Response = server.create_endpoint_response("revocation", await _incoming(request))
    return response


@router.post("/_sandbox/oauth/clients", dependencies=[Admin])
async def register_client(request: Request) -> Response:
    """Register a client (admin token): ``{"client_id", "confidential", "redirect_uris",
    "scope", "workspace"}``; a confidential client's secret is answered once."""
    sandbox = sandbox_of(request)
    body = await request.json()
    confidential = bool(body.get("confidential"))
    workspace = body.get("workspace")
    client = OAuthClient(
        client_id=str(body.get("client_id") or f"client_{secrets.token_hex(6)}"),
        client_secret=f"ocs_{secrets.token_urlsafe(24)}" if confidential else None,
        redirect_uris=tuple(body.get("redirect_uris") or ("http://127.0.0.1/callback",)),
        scope=str(body.get("scope") or " ".join(ALL_SCOPES)),
        workspace_id=sandbox.workspace_names().get(workspace) if workspace else None,
        name=str(body.get("name") or ""),
    )
    sandbox.oauth.register_client(client)
    return json_response(
        {"client_id": client.client_id, "client_secret": client.client_secret,
         "redirect_uris": list(client.redirect_uris), "scope": client.scope},
        request,
        201,
    )  # fmt: skip
