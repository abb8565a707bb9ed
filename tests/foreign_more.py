"""Two more services of the same domain, each with a summary (a test helper, issue 25).

Like tests/foreign_services.py (whose :class:`ForeignDomain` feeds them), they
stand for workspaces other people might have written; each requires
``Authorization: Bearer <key>``, records every request in ``app.requests`` and
serves the conversations, their details, the leads and a summary.

``jsonapi`` (JSON:API): lists are ``{"data", "links", "meta"}``, paged by
``page[number]`` (1-based) and ``page[size]`` (10, cap 50), with a relative
``links.next`` carrying both (absent on the last page), ``links.self``,
``first`` and ``last``, and ``meta.total``; ``filter[updated][gt]`` (ISO,
strict) filters; always by updated then id; other parameters are ignored.
Ids ``C1001``, ``L2001``, ``M100001``; fields under ``attributes``
(``created``, ``updated`` ISO with ``Z``, ``escalated``, ``feedback.rating``,
``tags`` a list), the lead at ``relationships.lead.data.id``. A detail is
``{"data": ...}`` with its messages in ``included`` (``attributes``: ``role``,
``text``, ``created``, ``trace.latencyMs``) only with ``include=messages``.
The summary is CSV (``text/csv``) for ``from``..``to``: ``day``,
``conversations_started``, ``resolved_count``, ...

``ranges``: lists are bare JSON arrays, paged by ``skip`` and ``take`` (20,
cap 40), with ``Content-Range: items 0-19/140`` (``items */140`` past the
end); ``modified_since`` (ISO, >=) filters; by modified_at then id; other
parameters are ignored. Ids ``conv_1``, ``lead_1``, ``msg_1``; times ISO
``+00:00`` in ``created_at`` and ``modified_at``; ``escalated``, ``lead_id``,
``rating``. A detail holds ``messages`` (``role``, ``text``, ``created_at``).
The summary is JSON, ``{"period", "days": [{"day", "total_conversations",
...}]}``, for ``since``..``until``, else for the 7 days ending today (UTC).

``app.knobs.hidden`` (a dict: list kind -> n) makes a listing leave out its
``n`` oldest-updated records while still counting them in its total: a
service whose listing lost records (a search index behind its store);
``app.knobs.total_of_all`` makes a total count the whole collection, whatever
the filter (``filter[updated][gt]``, ``modified_since``) left. A summary's
day counts, in UTC, the conversations started that day (all, resolved,
abandoned, open) and the user and assistant messages sent that day, so a
correct extraction reconciles with it without a difference.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from typing import Any

from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from convo_analytics._serving import ServerThread
from foreign_services import (
    Conversation,
    ConversationTruth,
    ForeignApp,
    ForeignDomain,
    Lead,
    LeadTruth,
    Message,
    MessageTruth,
    RequestLog,
    Truth,
    _error,
    _Guard,
)

SHAPES = ("jsonapi", "ranges")
Json = dict[str, Any]
#: The summary's metrics: (the jsonapi CSV's column, the ranges JSON's key), by what it counts.
SUMMARY_KEYS = {
    "conversations": ("conversations_started", "total_conversations"),
    "resolved": ("resolved_count", "resolved_count"),
    "abandoned": ("abandoned_count", "abandoned_count"),
    "open": ("open_count", "open_count"),
    "user_messages": ("user_message_count", "user_message_count"),
    "assistant_responses": ("assistant_message_count", "assistant_message_count"),
}


def record_id(shape: str, kind: str, number: int) -> str:
    """A record's id as the warehouse stores it."""
    if shape == "jsonapi":
        prefix, base = {"conversation": ("C", 1000), "lead": ("L", 2000)}.get(kind, ("M", 100000))
        return f"{prefix}{base + number}"
    return {"conversation": "conv_", "lead": "lead_", "message": "msg_"}[kind] + str(number)


def truth(domain: ForeignDomain, shape: str) -> Truth:
    """What a correct extraction of ``shape`` loads (as ``ForeignDomain.truth`` says it)."""
    with domain.lock:
        conversations, messages = {}, {}
        for c in domain.conversations:
            cid = record_id(shape, "conversation", c.number)
            lead = None if c.lead is None else record_id(shape, "lead", c.lead)
            conversations[cid] = ConversationTruth(
                c.updated_at, c.escalated, lead, c.feedback_rating, len(c.messages)
            )
            for m in c.messages:
                messages[record_id(shape, "message", m.number)] = MessageTruth(cid, m.sent_at)
        leads = {
            record_id(shape, "lead", x.number): LeadTruth(x.status, x.score) for x in domain.leads
        }
    return Truth(conversations, messages, leads)


def _z(at: datetime) -> str:
    return at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


# --- the summary ------------------------------------------------------------------------------


def day_counts(domain: ForeignDomain, day: date) -> dict[str, int]:
    """What a summary counts on ``day`` (UTC), by SUMMARY_KEYS' names."""
    with domain.lock:
        started = [c for c in domain.conversations if c.created_at.date() == day]
        sent = [m for c in domain.conversations for m in c.messages if m.sent_at.date() == day]
    return {
        "conversations": len(started),
        "resolved": sum(c.status == "resolved" for c in started),
        "abandoned": sum(c.status == "abandoned" for c in started),
        "open": sum(c.status == "open" for c in started),
        "user_messages": sum(m.role == "user" for m in sent),
        "assistant_responses": sum(m.role == "assistant" for m in sent),
    }


def _days(request: Request, start: str, end: str, default_days: int) -> list[date] | Response:
    """The days asked with ``start``..``end`` (inclusive), else the default ending today."""
    params = request.query_params
    try:
        if start in params and end in params:
            first, last = date.fromisoformat(params[start]), date.fromisoformat(params[end])
        else:
            last = datetime.now(UTC).date()
            first = last - timedelta(days=default_days - 1)
    except ValueError:
        return JSONResponse({"error": f"{start} and {end} are dates, YYYY-MM-DD"}, 400)
    if last < first or (last - first).days > 400:
        return JSONResponse({"error": "bad range"}, 400)
    return [first + timedelta(days=i) for i in range((last - first).days + 1)]


# --- jsonapi ----------------------------------------------------------------------------------


def _jsonapi_conversation(c: Conversation) -> Json:
    lead = None if c.lead is None else {"type": "leads", "id": record_id("jsonapi", "lead", c.lead)}
    return {
        "type": "conversations",
        "id": record_id("jsonapi", "conversation", c.number),
        "attributes": {
            "externalUserId": c.external_user_id, "channel": c.channel, "locale": c.locale,
            "status": c.status, "created": _z(c.created_at), "updated": _z(c.updated_at),
            "escalated": c.escalated,
            "feedback": None if c.feedback_rating is None else {"rating": c.feedback_rating},
            "tags": [c.channel, c.status],
        },
        "relationships": {"lead": {"data": lead}},
        "links": {"self": f"/v1/conversations/{record_id('jsonapi', 'conversation', c.number)}"},
    }  # fmt: skip


def _jsonapi_message(m: Message) -> Json:
    return {
        "type": "messages",
        "id": record_id("jsonapi", "message", m.number),
        "attributes": {
            "role": m.role, "text": m.text, "created": _z(m.sent_at),
            "trace": {"latencyMs": 100 + m.number % 900} if m.role == "assistant" else None,
        },
    }  # fmt: skip


def _jsonapi_lead(x: Lead) -> Json:
    conversation = {"type": "conversations", "id": record_id("jsonapi", "conversation",
                                                             x.conversation)}  # fmt: skip
    return {
        "type": "leads",
        "id": record_id("jsonapi", "lead", x.number),
        "attributes": {
            "status": x.status, "score": x.score, "intent": x.intent, "email": x.email,
            "created": _z(x.created_at), "updated": _z(x.updated_at),
        },
        "relationships": {"conversation": {"data": conversation}},
    }  # fmt: skip


def _page_number(request: Request, name: str, default: int) -> int:
    raw = request.query_params.get(name, str(default))
    if not raw.isdigit() or int(raw) < 1:
        raise ValueError(f"{name} must be a positive integer")
    return int(raw)


@dataclass
class Knobs:
    """How a service misbehaves, set by a test while it serves."""

    hidden: dict[str, int] = field(default_factory=dict)
    total_of_all: bool = False


def _jsonapi_list(
    request: Request, items: list[tuple[datetime, int, Json]], hidden: int, of_all: bool
) -> Response:
    try:
        size = min(_page_number(request, "page[size]", 10), 50)
        number = _page_number(request, "page[number]", 1)
        since_raw = request.query_params.get("filter[updated][gt]")
        since = None if since_raw is None else datetime.fromisoformat(since_raw)
    except ValueError as exc:
        error = {"status": "400", "title": "Bad Request", "detail": str(exc)}
        return JSONResponse({"errors": [error]}, 400)
    ordered = sorted(items, key=lambda i: (i[0], i[1]))
    if since is not None:
        since = since if since.tzinfo else since.replace(tzinfo=UTC)
        ordered = [i for i in ordered if i[0] > since]
    total = len(items) if of_all else len(ordered)
    listed = ordered[hidden:]  # the records the listing lost, still counted in the total
    page = listed[(number - 1) * size : number * size]
    last = max(1, -(-len(listed) // size))

    def link(n: int) -> str:
        url = request.url.include_query_params(**{"page[number]": n, "page[size]": size})
        return f"{url.path}?{url.query}"

    links = {"self": link(number), "first": link(1), "last": link(last)}
    if number < last:
        links["next"] = link(number + 1)
    body = {"data": [i[2] for i in page], "links": links, "meta": {"total": total}}
    return JSONResponse(body, media_type="application/vnd.api+json")


def _jsonapi_summary(domain: ForeignDomain, request: Request) -> Response:
    days = _days(request, "from", "to", 30)
    if isinstance(days, Response):
        return days
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(["day", *(csv_name for csv_name, _ in SUMMARY_KEYS.values())])
    for day in days:
        counts = day_counts(domain, day)
        writer.writerow([day.isoformat(), *(counts[k] for k in SUMMARY_KEYS)])
    return Response(out.getvalue(), media_type="text/csv")


# --- ranges -----------------------------------------------------------------------------------


def _ranges_conversation(c: Conversation) -> Json:
    lead = None if c.lead is None else record_id("ranges", "lead", c.lead)
    return {
        "id": record_id("ranges", "conversation", c.number), "user": c.external_user_id,
        "channel": c.channel, "locale": c.locale, "status": c.status,
        "created_at": c.created_at.isoformat(), "modified_at": c.updated_at.isoformat(),
        "escalated": c.escalated, "lead_id": lead, "rating": c.feedback_rating,
    }  # fmt: skip


def _ranges_lead(x: Lead) -> Json:
    return {
        "id": record_id("ranges", "lead", x.number),
        "conversation_id": record_id("ranges", "conversation", x.conversation),
        "status": x.status, "score": x.score, "intent": x.intent, "email": x.email,
        "created_at": x.created_at.isoformat(), "modified_at": x.updated_at.isoformat(),
    }  # fmt: skip


def _ranges_list(
    request: Request, items: list[tuple[datetime, int, Json]], hidden: int, of_all: bool
) -> Response:
    params = request.query_params
    try:
        skip = int(params.get("skip", "0"))
        take = min(max(int(params.get("take", "20")), 1), 40)
        since_raw = params.get("modified_since")
        since = None if since_raw is None else datetime.fromisoformat(since_raw)
    except ValueError:
        return JSONResponse({"error": "skip and take are integers, modified_since a time"}, 400)
    ordered = sorted(items, key=lambda i: (i[0], i[1]))
    if since is not None:
        since = since if since.tzinfo else since.replace(tzinfo=UTC)
        ordered = [i for i in ordered if i[0] >= since]
    total = len(items) if of_all else len(ordered)
    listed = ordered[hidden:]
    page = listed[max(skip, 0) : max(skip, 0) + take]
    span = f"{skip}-{skip + len(page) - 1}" if page else "*"
    return JSONResponse([i[2] for i in page], headers={"Content-Range": f"items {span}/{total}"})


def _ranges_summary(domain: ForeignDomain, request: Request) -> Response:
    days = _days(request, "since", "until", 7)
    if isinstance(days, Response):
        return days
    rows = []
    for day in days:
        counts = day_counts(domain, day)
        rows.append(
            {
                "day": day.isoformat(),
                **{json_key: counts[k] for k, (_, json_key) in SUMMARY_KEYS.items()},
            }
        )
    period = {"since": days[0].isoformat(), "until": days[-1].isoformat()}
    return JSONResponse({"period": period, "days": rows})  # fmt: skip


# --- the apps ---------------------------------------------------------------------------------


class MoreApp(ForeignApp):
    knobs: Knobs


def make_app(domain: ForeignDomain, shape: str, key: str) -> MoreApp:
    """The service of ``domain`` in ``shape`` (one of SHAPES)."""
    if shape not in SHAPES:
        raise ValueError(f"unknown shape {shape!r}; one of {SHAPES}")
    knobs = Knobs()

    def items(kind: str) -> list[tuple[datetime, int, Json]]:
        with domain.lock:
            if kind == "conversations":
                render: Callable[[Any], Json] = (
                    _jsonapi_conversation if shape == "jsonapi" else _ranges_conversation
                )
                return [(c.updated_at, c.number, render(c)) for c in domain.conversations]
            render = _jsonapi_lead if shape == "jsonapi" else _ranges_lead
            return [(x.updated_at, x.number, render(x)) for x in domain.leads]

    def lister(kind: str) -> Callable[[Request], Response]:
        def endpoint(request: Request) -> Response:
            listing = _jsonapi_list if shape == "jsonapi" else _ranges_list
            return listing(request, items(kind), knobs.hidden.get(kind, 0), knobs.total_of_all)

        return endpoint

    def detail(request: Request) -> Response:
        raw = request.path_params["cid"]
        with domain.lock:
            conv = next(
                (c for c in domain.conversations if record_id(shape, "conversation", c.number)
                 == raw), None,
            )  # fmt: skip
            if conv is None:
                return JSONResponse({"error": "no such conversation"}, 404)
            if shape == "ranges":
                messages = [
                    {"id": record_id(shape, "message", m.number), "role": m.role,
                     "text": m.text, "created_at": m.sent_at.isoformat()}
                    for m in conv.messages
                ]  # fmt: skip
                return JSONResponse({**_ranges_conversation(conv), "messages": messages})
            body: Json = {"data": _jsonapi_conversation(conv)}
            if "messages" in request.query_params.get("include", "").split(","):
                body["included"] = [_jsonapi_message(m) for m in conv.messages]
        return JSONResponse(body, media_type="application/vnd.api+json")

    def summary(request: Request) -> Response:
        return (_jsonapi_summary if shape == "jsonapi" else _ranges_summary)(domain, request)

    log = RequestLog()
    app = MoreApp(
        routes=[
            Route("/v1/conversations", lister("conversations")),
            Route("/v1/conversations/{cid}", detail),
            Route("/v1/leads", lister("leads")),
            Route("/v1/analytics/summary", summary),
        ],
        middleware=[Middleware(_Guard, key=key, log=log)],
        exception_handlers={404: _error, 405: _error},
    )
    app.requests, app.domain, app.shape, app.knobs = log, domain, shape, knobs
    return app


@contextmanager
def serve(domain: ForeignDomain, shape: str, key: str) -> Iterator[tuple[ServerThread, MoreApp]]:
    """``with serve(domain, "jsonapi", KEY) as (server, app):`` server.url on 127.0.0.1."""
    app = make_app(domain, shape, key)
    with ServerThread(app) as server:
        yield server, app
