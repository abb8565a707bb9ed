"""Sandbox-only control endpoints (not part of the service's interface).

They let tests and demos make things happen (activity, faults, limits) and
are guarded by the sandbox's admin token, which is written to the key file.
"""

from __future__ import annotations

import random
import secrets
import time
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request
from fastapi.security import HTTPAuthorizationCredentials
from pydantic import BaseModel, ConfigDict, Field
from starlette.responses import Response

from convo_analytics.sandbox._auth import bearer, sandbox_of
from convo_analytics.sandbox._errors import ApiException
from convo_analytics.sandbox._faults import FaultSettings
from convo_analytics.sandbox._intents import LATENT_INTENTS
from convo_analytics.sandbox._model import parse_iso_ms
from convo_analytics.sandbox._ratelimit import RateLimitPolicy
from convo_analytics.sandbox._routes_read import json_response
from convo_analytics.sandbox._simulate import simulate

router = APIRouter(prefix="/_sandbox", include_in_schema=False)


def _is_admin(request: Request, credentials: HTTPAuthorizationCredentials | None) -> bool:
    token = credentials.credentials if credentials else ""
    return secrets.compare_digest(token.encode(), sandbox_of(request).admin_token.encode())


def require_admin(
    request: Request,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)],
) -> None:
    if not _is_admin(request, credentials):
        raise ApiException(401, "the sandbox control API needs the admin token (see the key file)")


Admin = Depends(require_admin)


@router.get("/health")
def health(
    request: Request,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)],
) -> Response:
    """Liveness for anyone; the workspaces and their sizes only for the admin token.

    Load balancers and start-up probes need an answer without a secret, but the
    workspace names and counts are the sandbox's data, so they stay behind the
    token like the rest of the control API.
    """
    if not _is_admin(request, credentials):
        return json_response({"status": "ok"}, request)
    sandbox = sandbox_of(request)
    return json_response(
        {
            "status": "ok",
            "workspaces": {ws.name: len(ws.conversations) for ws in sandbox.workspaces.values()},
            "pendingDeliveries": sandbox.dispatcher.pending(),
        },
        request,
    )


class SimulateRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    workspace: str = "demo"
    newConversations: int = Field(default=0, ge=0, le=10_000)
    progress: int = Field(default=0, ge=0, le=10_000)
    seed: int | None = None
    #: When the activity happens (ISO 8601); default now. With ``seed``, the same request
    #: to a sandbox of the same history makes the same activity (``make demo`` restarts).
    at: str | None = None


@router.post("/simulate", dependencies=[Admin])
def run_simulation(request: Request, body: SimulateRequest) -> Response:
    sandbox = sandbox_of(request)
    ws = sandbox.workspaces.get(f"ws_{body.workspace}")
    if ws is None:
        raise ApiException(404, f"workspace {body.workspace!r} not found")
    now_ms = int(time.time() * 1000)
    if body.at is not None:
        try:
            now_ms = parse_iso_ms(body.at)
        except ValueError:
            raise ApiException(
                422, f"at {body.at[:40]!r} is not an ISO 8601 time, e.g. 2026-11-18T09:00:00Z"
            ) from None
    rng = random.Random(body.seed)
    result = simulate(ws, now_ms, body.newConversations, body.progress, rng)
    return json_response(
        {"created": result.created, "changed": result.changed, "events": result.events}, request
    )


class SweepRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    workspace: str = "demo"


@router.post("/sweep", dependencies=[Admin])
def run_sweep(request: Request, body: SweepRequest) -> Response:
    """Complete the live conversations that have been quiet past their window, now."""
    sandbox = sandbox_of(request)
    ws = sandbox.workspaces.get(f"ws_{body.workspace}")
    if ws is None:
        raise ApiException(404, f"workspace {body.workspace!r} not found")
    return json_response({"completed": sandbox.live.sweep(ws, int(time.time() * 1000))}, request)


@router.get("/workspaces/{workspace_id}/latent-intents", dependencies=[Admin])
def latent_intents(request: Request, workspace_id: str) -> Response:
    """The ground truth of topic discovery: the intent catalogue and each conversation's.

    Only here, behind the admin token (decision D-SANDBOX-INTENTS): the service
    itself never tells what a user really wanted, so nothing a client reads does.
    ``workspace_id`` is the id (``ws_acme``) or the name (``acme``); a conversation
    opened through the live API has no latent intent (null).
    """
    sandbox = sandbox_of(request)
    ws = sandbox.workspaces.get(workspace_id) or sandbox.workspaces.get(f"ws_{workspace_id}")
    if ws is None:
        raise ApiException(404, f"workspace {workspace_id[:60]!r} not found")
    with ws.lock:
        conversations = {c.id: c.latent_intent for c in ws.conversations.records.values()}
    catalogue = [
        {"name": li.name, "intent": li.intent, "has_source": li.has_source, "source": li.source}
        for li in LATENT_INTENTS
    ]
    return json_response({"intents": catalogue, "conversations": conversations}, request)


class FaultsRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    errorRate: float = Field(default=0.0, ge=0, le=1)
    slowRate: float = Field(default=0.0, ge=0, le=1)
    slowSeconds: float = Field(default=2.0, ge=0, le=120)
    dropRate: float = Field(default=0.0, ge=0, le=1)


@router.put("/faults", dependencies=[Admin])
def set_faults(request: Request, body: FaultsRequest) -> Response:
    faults: FaultSettings = request.app.state.faults
    faults.error_rate, faults.slow_rate = body.errorRate, body.slowRate
    faults.slow_seconds, faults.drop_rate = body.slowSeconds, body.dropRate
    return json_response(body.model_dump(), request)


class RateLimitRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    rateLimit: str
    retryAfterFormat: str | None = None


@router.put("/rate-limit", dependencies=[Admin])
def set_rate_limit(request: Request, body: RateLimitRequest) -> Response:
    sandbox = sandbox_of(request)
    try:
        sandbox.limiter.set_policy(RateLimitPolicy.parse(body.rateLimit))
    except ValueError as exc:
        raise ApiException(422, str(exc)) from None
    if body.retryAfterFormat in ("seconds", "http-date"):
        sandbox.settings.retry_after_format = body.retryAfterFormat
    out: dict[str, Any] = {
        "rateLimit": body.rateLimit,
        "retryAfterFormat": sandbox.settings.retry_after_format,
    }
    return json_response(out, request)
