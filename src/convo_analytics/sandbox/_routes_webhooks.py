"""Webhook registration and the delivery log."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Path, Query, Request
from starlette.responses import Response

from convo_analytics.contract import ALL_EVENT_TYPES, ErrorBody, WebhookCreate, WebhookCreated
from convo_analytics.contract._records import DeliveryPage, WebhookEndpoint, WebhookList
from convo_analytics.sandbox._auth import CallerDep, sandbox_of
from convo_analytics.sandbox._errors import ApiException
from convo_analytics.sandbox._routes_read import (
    ERRORS,
    NOT_FOUND,
    decode_cursor,
    encode_cursor,
    json_response,
)

router = APIRouter(prefix="/v1", tags=["webhooks"])
WebhookId = Annotated[str, Path(max_length=64)]
INVALID: dict[int | str, dict[str, Any]] = {
    422: {"model": ErrorBody, "description": "the body does not describe a valid endpoint"}
}


@router.post(
    "/webhooks",
    status_code=201,
    response_model=WebhookCreated,
    responses={**ERRORS, **INVALID},
    summary="Register a webhook endpoint",
)
def register_webhook(request: Request, caller: CallerDep, body: WebhookCreate) -> Response:
    unknown = sorted(set(body.events) - set(ALL_EVENT_TYPES) - {"*"})
    if unknown or not body.events:
        raise ApiException(
            422,
            f"field 'events': unknown event types {unknown}; choose from "
            f"{list(ALL_EVENT_TYPES)} or '*'"
            if unknown
            else "field 'events' must not be empty",
        )
    try:
        endpoint = sandbox_of(request).dispatcher.register(
            caller.workspace.id, body.url, body.events, body.secret, body.description
        )
    except ValueError as exc:
        raise ApiException(422, f"field 'url': {exc}") from None
    return json_response({**endpoint.to_json(), "secret": endpoint.secret}, request, 201)


@router.get(
    "/webhooks", response_model=WebhookList, responses={**ERRORS}, summary="List webhook endpoints"
)
def list_webhooks(request: Request, caller: CallerDep) -> Response:
    endpoints = sandbox_of(request).dispatcher.endpoints_of(caller.workspace.id)
    return json_response({"data": [e.to_json() for e in endpoints]}, request)


def _endpoint(request: Request, caller: CallerDep, webhook_id: str) -> Any:
    endpoint = sandbox_of(request).dispatcher.endpoints.get(webhook_id)
    if endpoint is None or endpoint.workspace_id != caller.workspace.id:
        raise ApiException(404, f"webhook {webhook_id!r} not found")
    return endpoint


@router.get(
    "/webhooks/{webhook_id}",
    response_model=WebhookEndpoint,
    responses={**ERRORS, **NOT_FOUND},
    summary="Fetch a webhook endpoint",
)
def get_webhook(request: Request, caller: CallerDep, webhook_id: WebhookId) -> Response:
    return json_response(_endpoint(request, caller, webhook_id).to_json(), request)


@router.delete(
    "/webhooks/{webhook_id}",
    status_code=204,
    responses={**ERRORS, **NOT_FOUND},
    summary="Stop deliveries to an endpoint",
)
def delete_webhook(request: Request, caller: CallerDep, webhook_id: WebhookId) -> Response:
    endpoint = _endpoint(request, caller, webhook_id)
    endpoint.active = False
    del sandbox_of(request).dispatcher.endpoints[endpoint.id]
    return Response(status_code=204)


@router.get(
    "/webhooks/{webhook_id}/deliveries",
    response_model=DeliveryPage,
    responses={**ERRORS, **NOT_FOUND},
    summary="The delivery log: every attempt, oldest first",
)
def list_deliveries(
    request: Request,
    caller: CallerDep,
    webhook_id: WebhookId,
    limit: Annotated[int | None, Query(ge=1, le=200)] = None,
    cursor: Annotated[str | None, Query(max_length=512)] = None,
) -> Response:
    sandbox = sandbox_of(request)
    endpoint = _endpoint(request, caller, webhook_id)
    log = sandbox.dispatcher.log.get(endpoint.id, [])
    start = 0
    if cursor:
        state = decode_cursor(request, cursor, f"deliveries:{endpoint.id}", caller.workspace.id)
        start = int(state["p"])
    size = limit or sandbox.settings.default_page_size
    rows = log[start : start + size]
    more = start + size < len(log)
    next_cursor = (
        encode_cursor(
            request, caller.workspace.id, {"c": f"deliveries:{endpoint.id}", "p": start + size}
        )
        if more
        else None
    )
    return json_response({"data": rows, "hasMore": more, "nextCursor": next_cursor}, request)
