"""The read side of the interface: conversation and lead lists, details, the summary."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date
from functools import lru_cache
from typing import Annotated, Any, Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import orjson
from fastapi import APIRouter, Depends, Path, Query, Request
from starlette.responses import Response

from convo_analytics.contract import ConversationDetail, ErrorBody
from convo_analytics.contract._records import ConversationPage, LeadPage
from convo_analytics.contract._summary import SummaryResponse
from convo_analytics.sandbox._auth import CallerDep, sandbox_of
from convo_analytics.sandbox._errors import ApiException
from convo_analytics.sandbox._model import iso, parse_iso_ms
from convo_analytics.sandbox._store import Collection, CursorError, Filter, Key
from convo_analytics.sandbox._summary import summarize
from convo_analytics.sandbox._workspace import CONVERSATION_FILTERS, LEAD_FILTERS

MAX_SUMMARY_DAYS = 732

router = APIRouter(prefix="/v1")

ERRORS: dict[int | str, dict[str, Any]] = {
    400: {"model": ErrorBody, "description": "invalid query"},
    401: {"model": ErrorBody, "description": "missing or invalid API key"},
    429: {"model": ErrorBody, "description": "rate limit exceeded; see Retry-After"},
}
NOT_FOUND: dict[int | str, dict[str, Any]] = {
    404: {"model": ErrorBody, "description": "no such record in this workspace"}
}


def json_response(body: Any, request: Request, status: int = 200) -> Response:
    headers = getattr(request.state, "rate_headers", None) or {}
    return Response(
        orjson.dumps(body), status_code=status, media_type="application/json", headers=headers
    )


def _parse_instant(name: str, value: str) -> str:
    try:
        return iso(parse_iso_ms(value))
    except ValueError:
        raise ApiException(
            400, f"query parameter '{name}': {value!r} is not an ISO 8601 date or timestamp"
        ) from None


def _criteria(filters: tuple[Filter, ...], given: dict[str, str | None]) -> dict[str, Any]:
    """Normalised filter values, so equal queries compare equal inside cursors."""
    out: dict[str, Any] = {}
    for f in filters:
        raw = given.get(f.param)
        if raw is None:
            continue
        if f.op in ("ge", "lt"):
            out[f.param] = _parse_instant(f.param, raw)
        elif f.op == "min":
            out[f.param] = float(raw)
        elif f.param == "escalated":
            out[f.param] = raw.lower() in ("true", "1")
        else:
            out[f.param] = raw
    return out


def _accepts(filters: tuple[Filter, ...], criteria: dict[str, Any]) -> Any:
    tests = [(f, criteria[f.param]) for f in filters if f.param in criteria]

    def accept(body: dict[str, Any]) -> bool:
        for f, value in tests:
            have = body.get(f.field)
            if f.op == "eq" and have != value:
                return False
            if f.op == "ge" and not (have is not None and have >= value):
                return False
            if f.op == "lt" and not (have is not None and have < value):
                return False
            if f.op == "min" and not (have is not None and have >= value):
                return False
        return True

    return accept


def encode_cursor(request: Request, workspace_id: str, state: dict[str, Any]) -> str:
    """A signed cursor for ``state``, bound to the workspace that is listing."""
    return sandbox_of(request).cursors.encode({**state, "w": workspace_id})


def decode_cursor(request: Request, cursor: str, kind: str, workspace_id: str) -> dict[str, Any]:
    """The state a cursor carries, or a 400 naming what is wrong with it.

    A cursor is bound to the workspace it was issued to (D-PAGINATION): another
    workspace's key sending it gets a 400, not a listing of its own records.
    """
    try:
        state = sandbox_of(request).cursors.decode(cursor)
    except CursorError as exc:
        raise ApiException(400, f"query parameter 'cursor': {exc}", code="invalid_cursor") from None
    if state.get("w") != workspace_id:
        raise ApiException(
            400, "query parameter 'cursor': it was issued to another workspace",
            code="invalid_cursor",
        )  # fmt: skip
    if state.get("c") != kind:
        raise ApiException(
            400, "query parameter 'cursor': it belongs to another list", code="invalid_cursor"
        )
    return state


Limit = Annotated[int | None, Query(ge=1, le=200, description="page size (default 50, max 200)")]
Cursor = Annotated[
    str | None, Query(max_length=2048, description="nextCursor of the previous page")
]
Sort = Annotated[
    Literal["updatedAt", "createdAt"] | None,
    Query(description="ascending order by this field (default updatedAt)"),
]
Instant = Annotated[str | None, Query(max_length=64, description="ISO 8601 timestamp or date")]


@dataclass
class ListWindow:
    """Paging and time-window query parameters that every list endpoint shares."""

    limit: Limit = None
    cursor: Cursor = None
    sort: Sort = None
    updatedSince: Instant = None
    updatedBefore: Instant = None
    createdSince: Instant = None
    createdBefore: Instant = None

    def given(self) -> dict[str, str | None]:
        return {
            "updatedSince": self.updatedSince,
            "updatedBefore": self.updatedBefore,
            "createdSince": self.createdSince,
            "createdBefore": self.createdBefore,
            "sort": self.sort,
        }


Window = Annotated[ListWindow, Depends()]


def _list(
    request: Request,
    workspace_id: str,
    collection: Collection[Any],
    kind: str,
    filters: tuple[Filter, ...],
    window: ListWindow,
    given: dict[str, str | None],
) -> Response:
    sandbox = sandbox_of(request)
    given = {**window.given(), **given}
    sort = window.sort or "updatedAt"
    limit = window.limit or sandbox.settings.default_page_size
    cursor = window.cursor
    criteria = _criteria(filters, given)
    after: Key | None = None
    snapshot = collection.seq
    if cursor:
        state = decode_cursor(request, cursor, kind, workspace_id)
        explicit = {k: v for k, v in criteria.items() if given.get(k) is not None}
        if any(state["q"].get(k) != v for k, v in explicit.items()) or (
            "o" in state and sort != state["o"] and given.get("sort") is not None
        ):
            raise ApiException(
                400,
                "query parameter 'cursor': the filters differ from the first page's; "
                "send the cursor with the same filters, or with none",
                code="cursor_mismatch",
            )
        criteria, sort, snapshot = state["q"], state["o"], int(state["s"])
        after = (int(state["k"][0]), str(state["k"][1]))
    start = None
    for f in filters:
        if f.op == "ge" and f.field == sort and f.param in criteria:
            start = (parse_iso_ms(criteria[f.param]), "")
    rows, last = collection.page(sort, after, snapshot, _accepts(filters, criteria), limit, start)
    next_cursor = None
    if last is not None:
        next_cursor = encode_cursor(
            request,
            workspace_id,
            {"v": 1, "c": kind, "o": sort, "s": snapshot, "k": list(last), "q": criteria},
        )
    return json_response(
        {"data": rows, "hasMore": last is not None, "nextCursor": next_cursor}, request
    )


@router.get(
    "/conversations",
    response_model=ConversationPage,
    responses={**ERRORS},
    summary="List conversations",
    tags=["conversations"],
)
def list_conversations(
    request: Request,
    caller: CallerDep,
    window: Window,
    channel: Annotated[str | None, Query(max_length=64)] = None,
    status: Literal["open", "resolved", "abandoned"] | None = None,
    escalated: bool | None = None,
    externalUserId: Annotated[str | None, Query(max_length=256)] = None,
) -> Response:
    given = {
        "channel": channel,
        "status": status,
        "escalated": None if escalated is None else str(escalated).lower(),
        "externalUserId": externalUserId,
    }
    ws = caller.workspace
    with ws.lock:
        return _list(
            request, ws.id, ws.conversations, "conversations", CONVERSATION_FILTERS, window, given
        )


@router.get(
    "/conversations/{conversation_id}",
    response_model=ConversationDetail,
    responses={**ERRORS, **NOT_FOUND},
    summary="Fetch a conversation: transcript, outcome, escalation state",
    tags=["conversations"],
)
def get_conversation(
    request: Request,
    caller: CallerDep,
    conversation_id: Annotated[str, Path(max_length=128)],
) -> Response:
    ws = caller.workspace
    with ws.lock:
        conv = ws.get(conversation_id)
        if conv is None:
            raise ApiException(404, f"conversation {conversation_id!r} not found")
        body = conv.detail_json(ws.events.app_base)
    return json_response(body, request)


@router.get(
    "/leads",
    response_model=LeadPage,
    responses={**ERRORS},
    summary="List leads with score and intent",
    tags=["leads"],
)
def list_leads(
    request: Request,
    caller: CallerDep,
    window: Window,
    minScore: Annotated[float | None, Query(ge=0, le=100)] = None,
    intent: Annotated[str | None, Query(max_length=64)] = None,
    status: Literal["qualified", "scored", "any"] | None = None,
) -> Response:
    # The default applies to a first page; a cursor carries the first page's choice.
    chosen = status or (None if window.cursor else "qualified")
    given = {
        "minScore": None if minScore is None else repr(minScore),
        "intent": intent,
        "status": None if chosen == "any" else chosen,
    }
    ws = caller.workspace
    with ws.lock:
        return _list(request, ws.id, ws.leads, "leads", LEAD_FILTERS, window, given)


@lru_cache(maxsize=64)
def _zone_ok(tz: str) -> bool:
    try:
        ZoneInfo(tz)
    except (ZoneInfoNotFoundError, ValueError):
        return False
    return True


@router.get(
    "/analytics/summary",
    response_model=SummaryResponse,
    responses={**ERRORS},
    summary="Aggregated metrics for a date range",
    tags=["analytics"],
)
def analytics_summary(
    request: Request,
    caller: CallerDep,
    from_: Annotated[date, Query(alias="from", description="first day, inclusive (YYYY-MM-DD)")],
    to: Annotated[date, Query(description="last day, inclusive (YYYY-MM-DD)")],
    tz: Annotated[str, Query(max_length=64, description="IANA time zone for days")] = "UTC",
    lowConfidenceThreshold: Annotated[float, Query(ge=0, le=1)] = 0.5,
) -> Response:
    if to < from_:
        raise ApiException(400, "query parameter 'to' must not be before 'from'")
    if (to - from_).days >= MAX_SUMMARY_DAYS:
        raise ApiException(400, f"the range may span at most {MAX_SUMMARY_DAYS} days")
    if not _zone_ok(tz):
        raise ApiException(400, f"query parameter 'tz': {tz!r} is not an IANA time zone")
    ws = caller.workspace
    with ws.lock:
        conversations = list(ws.conversations.records.values())
    # Computed outside the lock, so a long summary never stalls the workspace's other reads.
    body = summarize(ws.id, conversations, from_, to, tz, lowConfidenceThreshold)
    return json_response(body, request)
