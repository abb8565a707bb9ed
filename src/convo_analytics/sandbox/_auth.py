"""Bearer-token authentication and per-key rate limiting for /v1 requests."""

from __future__ import annotations

import math
from dataclasses import dataclass
from email.utils import formatdate
from typing import Annotated

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from convo_analytics.sandbox._errors import ApiException
from convo_analytics.sandbox._oauth import required_scope
from convo_analytics.sandbox._service import Sandbox, key_id
from convo_analytics.sandbox._workspace import Workspace

bearer = HTTPBearer(auto_error=False, description="A workspace API key")


@dataclass(frozen=True, slots=True)
class Caller:
    workspace: Workspace
    key_id: str
    #: What an OAuth access token was granted; None for an API key (everything).
    scopes: frozenset[str] | None = None


def sandbox_of(request: Request) -> Sandbox:
    sandbox: Sandbox = request.app.state.sandbox
    return sandbox


def authenticate(
    request: Request,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)],
) -> Caller:
    """Resolve the key to its workspace, then spend a token of its rate limit."""
    sandbox = sandbox_of(request)
    challenge = {"WWW-Authenticate": 'Bearer realm="convo"'}
    if credentials is None or not credentials.credentials:
        raise ApiException(
            401,
            "missing bearer token: send 'Authorization: Bearer <API key>'",
            headers=challenge,
        )
    token = credentials.credentials
    workspace = sandbox.workspace_for(token)
    if workspace is not None:
        caller = Caller(workspace, key_id(token))
    else:
        caller = _oauth_caller(sandbox, token)
    _check_scope(request, caller)
    verdict = sandbox.limiter.take(caller.workspace.id, caller.key_id)
    if verdict is not None:
        allowed, wait, remaining = verdict
        policy = sandbox.limiter.policy
        assert policy is not None
        request.state.rate_headers = {
            "X-RateLimit-Limit": f"{policy.per_minute:g}",
            "X-RateLimit-Remaining": str(int(remaining)),
        }
        if not allowed:
            seconds = max(1, math.ceil(wait))
            if sandbox.settings.retry_after_format == "http-date":
                import time

                retry_after = formatdate(time.time() + seconds, usegmt=True)
            else:
                retry_after = str(seconds)
            raise ApiException(
                429,
                f"rate limit of {policy.label} exceeded; retry after {seconds} s",
                headers={"Retry-After": retry_after, **request.state.rate_headers},
            )
    return caller


def _oauth_caller(sandbox: Sandbox, token: str) -> Caller:
    """An OAuth access token: its grant's workspace and scopes; rate-limited per grant
    family, so that a refreshed token does not start a new budget."""
    grant = sandbox.oauth.bearer(token)
    workspace = sandbox.workspaces.get(grant.workspace_id) if grant else None
    if grant is None or workspace is None:
        raise ApiException(
            401,
            "invalid API key or access token (unknown, expired or revoked)",
            code="invalid_api_key",
            headers={"WWW-Authenticate": 'Bearer realm="convo", error="invalid_token"'},
        )
    return Caller(workspace, f"oauth_{grant.family}", frozenset(grant.scope.split()))


def _check_scope(request: Request, caller: Caller) -> None:
    """403 with the error body when an access token lacks the endpoint's scope."""
    if caller.scopes is None:
        return
    route = request.scope.get("route")
    needed = required_scope(request.method, getattr(route, "path", request.url.path))
    if needed and needed not in caller.scopes:
        raise ApiException(
            403,
            f"the access token lacks the scope {needed!r} this endpoint needs",
            code="insufficient_scope",
            headers={
                "WWW-Authenticate": f'Bearer realm="convo", error="insufficient_scope", '
                f'scope="{needed}"'
            },
        )


CallerDep = Annotated[Caller, Depends(authenticate)]
