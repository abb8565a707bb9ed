"""Bearer-token authentication and per-key rate limiting for /v1 requests."""

from __future__ import annotations

import math
from dataclasses import dataclass
from email.utils import formatdate
from typing import Annotated

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from convo_analytics.sandbox._errors import ApiException
from convo_analytics.sandbox._service import Sandbox, key_id
from convo_analytics.sandbox._workspace import Workspace

bearer = HTTPBearer(auto_error=False, description="A workspace API key")


@dataclass(frozen=True, slots=True)
class Caller:
    workspace: Workspace
    key_id: str


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
    workspace = sandbox.workspace_for(credentials.credentials)
    if workspace is None:
        raise ApiException(401, "invalid API key", code="invalid_api_key", headers=challenge)
    caller = Caller(workspace, key_id(credentials.credentials))
    verdict = sandbox.limiter.take(workspace.id, caller.key_id)
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


CallerDep = Annotated[Caller, Depends(authenticate)]
