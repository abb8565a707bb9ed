"""Services of the same domain in shapes unlike the sandbox's (a test helper, issue 13).

The interface does not show paging, envelopes, field names or query
parameters, so a real workspace may answer in shapes our sandbox never uses.
The extractor's configuration, detection and ``--check`` are tested over real
HTTP against these servers, which other people might plausibly have written.
One seeded :class:`ForeignDomain` feeds every shape, and ``truth(shape)`` says
what a correct extraction must load, so a test compares the warehouse with it.

Every shape requires ``Authorization: Bearer <key>`` (401 JSON otherwise),
records every request's path and query in ``app.requests``, has no
``/v1/analytics/summary`` (404), answers 404 for unknown ids, serves
``GET /v1/conversations``, ``GET /v1/conversations/{id}`` and ``GET /v1/leads``,
and lists conversations without their messages (the detail has them).
Leads always carry their own ``status`` field.

=============  =====================================  =====================================
shape          paging and envelope                    ids, times, renamed fields
=============  =====================================  =====================================
pages          json-server 0.17: bare arrays;         ``c-0001``, ``l-001``, ``m-00001``;
               ``_page`` (1-based) + ``_limit``       ISO with ``+02:00``; ``handedOff``,
               (default 10, no cap) -> absolute       ``leadRef``, ``csat.score`` (absent
               ``Link`` first/prev/next/last and      without feedback); detail messages
               ``X-Total-Count``; no ``_page``: all,  only with ``_embed=messages``, time
               or ``_start`` + ``_end``/``_limit``    ``sentAt``; any non-``_`` parameter
               slices (with ``X-Total-Count``);       naming a field is an equality filter
               ``_sort``/``_order``;                  (``status=any`` empties leads);
               ``<field>_gte``/``_lte`` compare       others ignored
offsets        ``{"records", "totalRecords"}``;       ``conv_12``, ``lead_5``, ``msg_301``;
               ``skip`` + ``take`` (20, cap 50);      ISO ``+00:00``; ``wasEscalated``,
               id order, or ``orderBy=lastModified``  ``leadIdentifier``, ``rating``;
               (then id); ``modifiedSince`` (ISO,     detail ``messages[].postedAt``;
               lastModified >=)                       unknown parameters ignored
next_link      ``{"items", "next"}``; ``pageSize``    ``C1001``, ``L2001``, ``M100001``;
               (25, cap 100); opaque ``page``         ISO with ``Z``; ``isEscalated``,
               token; next link relative on odd       ``lead.id``, ``feedback.stars``;
               pages, absolute on even pages;         detail ``messages[].time``
               ``updated_after`` (ISO, strict >);
               always by updatedAt then id
header_cursor  ``{"conversations"}``/``{"leads"}``;   integer ids (1.., 5001.., 90001..);
               cursor only in ``X-Next-Cursor``,      epoch milliseconds; ``escalated_flag``
               sent back as ``after``; ``max``        (+ ``escalation_count``), ``lead_id``,
               (25, capped at 25); ``since_ms``       ``score_csat``; detail wrapped in
               (epoch ms, >=; other values            ``{"conversation": {...}}`` with
               ignored); by updated then id           ``transcript[].ts``; a lead's key is
                                                      ``lead_id`` (it also has
                                                      ``conversation_id``)
leaky          next_link, but the first page's        as next_link
               next link is absolute on another
               origin (``leak_to``)
=============  =====================================  =====================================

A number, time or token a shape cannot read is a 400. ``make_counter_app()``
stands at the leaky shape's other origin and records what reaches it.

``ForeignDomain.truth(shape)`` is a :class:`Truth` of three dicts keyed by the
ids as the warehouse stores them (strings: ``c-0001``, ``conv_1``, ``C1001``,
``1``): ``conversations`` -> :class:`ConversationTruth` (updated_at, escalated,
lead_id, feedback_rating, message_count), ``messages`` -> :class:`MessageTruth`
(conversation_id, created_at) and ``leads`` -> :class:`LeadTruth` (status,
score). Times are aware UTC datetimes; NamedTuples compare equal to row tuples.
"""

from __future__ import annotations

import base64
import hmac
import json
import random
import re
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta, timezone
from typing import Any, NamedTuple

from starlette.applications import Starlette
from starlette.datastructures import Headers, QueryParams
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Mount, Route
from starlette.types import ASGIApp, Receive, Scope, Send

from convo_analytics._serving import ServerThread

SHAPES = ("pages", "offsets", "next_link", "header_cursor", "leaky")
#: The domain's history ends here; conversations start in the 10 days before.
END = datetime(2026, 11, 20, tzinfo=UTC)
PLUS_TWO = timezone(timedelta(hours=2))

CHANNELS = ("web", "sms", "whatsapp")
LOCALES = ("en-US", "de-DE", "fr-FR", "es-ES", "nl-NL")
STATUSES = ("open", "resolved", "abandoned")
LEAD_STATUSES = ("new", "contacted", "qualified")
INTENTS = ("pricing", "demo", "support_upgrade", "partnership")
USER_LINES = ("How much does the pro plan cost?", "Can I book a demo?", "My order is late.")
ASSISTANT_LINES = ("Happy to help with that.", "Here is what I found.", "Let me check.")


# --- the domain -----------------------------------------------------------------------------


class Message(NamedTuple):
    number: int  # 1-based, over the whole domain
    role: str  # user or assistant, alternating from user
    text: str
    sent_at: datetime


@dataclass
class Conversation:
    number: int  # 1-based
    external_user_id: str
    channel: str
    locale: str
    status: str
    created_at: datetime
    updated_at: datetime
    ended_at: datetime | None  # None while open
    escalation_count: int
    lead: int | None  # the lead's number
    feedback_rating: int | None
    messages: list[Message] = field(default_factory=list)

    @property
    def escalated(self) -> bool:
        return self.escalation_count > 0


@dataclass
class Lead:
    number: int  # 1-based
    conversation: int  # the conversation's number
    status: str
    score: int
    intent: str
    email: str
    created_at: datetime
    updated_at: datetime


class ConversationTruth(NamedTuple):
    updated_at: datetime
    escalated: bool
    lead_id: str | None
    feedback_rating: int | None
    message_count: int


class MessageTruth(NamedTuple):
    conversation_id: str
    created_at: datetime


class LeadTruth(NamedTuple):
    status: str
    score: int


@dataclass(frozen=True)
class Truth:
    """What a correct extraction of one shape loads, typed as the warehouse types it."""

    conversations: dict[str, ConversationTruth]
    messages: dict[str, MessageTruth]
    leads: dict[str, LeadTruth]


def _render_id(shape: str, kind: str, number: int) -> str | int:
    """A record's id as ``shape`` writes it (kind: conversation, lead or message)."""
    if shape == "pages":
        return {"conversation": f"c-{number:04d}", "lead": f"l-{number:03d}"}.get(
            kind, f"m-{number:05d}"
        )
    if shape == "offsets":
        return {"conversation": "conv_", "lead": "lead_", "message": "msg_"}[kind] + str(number)
    if shape in ("next_link", "leaky"):
        prefix, base = {"conversation": ("C", 1000), "lead": ("L", 2000)}.get(kind, ("M", 100000))
        return f"{prefix}{base + number}"
    if shape == "header_cursor":
        return number + {"conversation": 0, "lead": 5000, "message": 90000}[kind]
    raise ValueError(f"unknown shape {shape!r}; one of {SHAPES}")


def record_id(shape: str, kind: str, number: int) -> str:
    """A record's id as the warehouse stores it: ``c-0001``, ``conv_1``, ``C1001``, ``1``."""
    return str(_render_id(shape, kind, number))


class ForeignDomain:
    """Conversations, their messages and leads, the same for every seed and shape."""

    def __init__(
        self,
        seed: int = 4,  # 61 leads, as in the issue
        conversations: int = 140,
        *,
        lead_share: float = 0.45,
        escalated_share: float = 0.3,
        feedback_share: float = 0.4,
    ) -> None:
        self.rng = random.Random(seed)
        self.lock = threading.RLock()  # servers read while a test calls touch()
        self.conversations: list[Conversation] = []
        self.leads: list[Lead] = []
        self._message_count = 0
        rng = self.rng
        start = END - timedelta(days=10)
        for i in range(1, conversations + 1):
            created = start + timedelta(seconds=rng.randrange(10 * 86400 - 6 * 3600))
            updated = created + timedelta(seconds=rng.randrange(300, 6 * 3600))
            status = rng.choice(STATUSES)
            conv = Conversation(
                number=i,
                external_user_id=f"u-{rng.randrange(10**6):06d}",
                channel=rng.choice(CHANNELS),
                locale=rng.choice(LOCALES),
                status=status,
                created_at=created,
                updated_at=updated,
                ended_at=None if status == "open" else updated,
                escalation_count=rng.choice((1, 1, 2)) if rng.random() < escalated_share else 0,
                lead=None,
                feedback_rating=rng.randint(1, 5) if rng.random() < feedback_share else None,
            )
            span = int((updated - created).total_seconds())
            count = rng.randint(3, 8)
            offsets = [0, *sorted(rng.sample(range(1, span), count - 2)), span]
            for offset in offsets:
                self._add_message(conv, created + timedelta(seconds=offset))
            if rng.random() < lead_share:
                lead_created = created + timedelta(seconds=rng.randrange(span))
                conv.lead = len(self.leads) + 1
                self.leads.append(
                    Lead(
                        number=conv.lead,
                        conversation=i,
                        status=rng.choice(LEAD_STATUSES),
                        score=rng.randint(0, 100),
                        intent=rng.choice(INTENTS),
                        email=f"user{i}@example.com",
                        created_at=lead_created,
                        updated_at=lead_created + timedelta(seconds=rng.randrange(60, 8 * 3600)),
                    )
                )
            self.conversations.append(conv)

    def _add_message(self, conv: Conversation, at: datetime) -> None:
        self._message_count += 1
        role = "assistant" if conv.messages and conv.messages[-1].role == "user" else "user"
        lines = USER_LINES if role == "user" else ASSISTANT_LINES
        conv.messages.append(Message(self._message_count, role, self.rng.choice(lines), at))

    def conversation(self, number: int) -> Conversation | None:
        return self.conversations[number - 1] if 1 <= number <= len(self.conversations) else None

    def lead(self, number: int) -> Lead | None:
        return self.leads[number - 1] if 1 <= number <= len(self.leads) else None

    def touch(self, n: int) -> list[int]:
        """Add a message to the ``n`` oldest-updated conversations; their numbers, in order.

        Each becomes newer than every existing update, so an incremental run
        must fetch exactly these again.
        """
        with self.lock:
            oldest = sorted(self.conversations, key=lambda c: (c.updated_at, c.number))[:n]
            latest = max(c.updated_at for c in self.conversations)
            for conv in oldest:
                latest += timedelta(seconds=self.rng.randrange(60, 1800))
                self._add_message(conv, latest)
                conv.updated_at = latest
                if conv.ended_at is not None:
                    conv.ended_at = latest
            return [c.number for c in oldest]

    def truth(self, shape: str) -> Truth:
        """What a correct extraction of ``shape`` must load: ids as strings, times in UTC."""
        with self.lock:
            conversations, messages = {}, {}
            for conv in self.conversations:
                cid = record_id(shape, "conversation", conv.number)
                lead = None if conv.lead is None else record_id(shape, "lead", conv.lead)
                conversations[cid] = ConversationTruth(
                    conv.updated_at, conv.escalated, lead, conv.feedback_rating, len(conv.messages)
                )
                for m in conv.messages:
                    messages[record_id(shape, "message", m.number)] = MessageTruth(cid, m.sent_at)
            leads = {
                record_id(shape, "lead", lead.number): LeadTruth(lead.status, lead.score)
                for lead in self.leads
            }
            return Truth(conversations, messages, leads)


# --- renderings -----------------------------------------------------------------------------

Json = dict[str, Any]


def _z(at: datetime) -> str:
    return at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _plus_two(at: datetime) -> str:
    return at.astimezone(PLUS_TWO).isoformat()


def _ms(at: datetime) -> int:
    return int(at.timestamp() * 1000)


def _conversation(shape: str, c: Conversation) -> Json:
    cid = _render_id(shape, "conversation", c.number)
    lead = None if c.lead is None else _render_id(shape, "lead", c.lead)
    if shape == "pages":
        ended = None if c.ended_at is None else _plus_two(c.ended_at)
        record: Json = {
            "id": cid, "externalUserId": c.external_user_id, "channel": c.channel,
            "locale": c.locale, "status": c.status, "createdAt": _plus_two(c.created_at),
            "updatedAt": _plus_two(c.updated_at), "endedAt": ended, "handedOff": c.escalated,
            "leadRef": lead,
        }  # fmt: skip
        if c.feedback_rating is not None:
            record["csat"] = {"score": c.feedback_rating}
        return record
    if shape == "offsets":
        return {
            "id": cid, "userRef": c.external_user_id, "channel": c.channel,
            "language": c.locale, "state": c.status, "createdOn": c.created_at.isoformat(),
            "lastModified": c.updated_at.isoformat(), "wasEscalated": c.escalated,
            "leadIdentifier": lead, "rating": c.feedback_rating,
        }  # fmt: skip
    if shape in ("next_link", "leaky"):
        stars = c.feedback_rating
        return {
            "id": cid, "user": c.external_user_id, "channel": c.channel, "locale": c.locale,
            "status": c.status, "createdAt": _z(c.created_at), "updatedAt": _z(c.updated_at),
            "isEscalated": c.escalated, "lead": None if lead is None else {"id": lead},
            "feedback": None if stars is None else {"stars": stars},
        }  # fmt: skip
    return {
        "id": cid, "user_id": c.external_user_id, "channel": c.channel, "locale": c.locale,
        "status": c.status, "created": _ms(c.created_at), "updated": _ms(c.updated_at),
        "escalation_count": c.escalation_count, "escalated_flag": c.escalated,
        "lead_id": lead, "score_csat": c.feedback_rating,
    }  # fmt: skip


def _message(shape: str, conv: Conversation, m: Message) -> Json:
    mid = _render_id(shape, "message", m.number)
    if shape == "pages":
        cid = _render_id(shape, "conversation", conv.number)
        at = _plus_two(m.sent_at)
        return {"id": mid, "conversationId": cid, "role": m.role, "text": m.text, "sentAt": at}
    if shape == "offsets":
        return {"id": mid, "from": m.role, "content": m.text, "postedAt": m.sent_at.isoformat()}
    if shape in ("next_link", "leaky"):
        return {"id": mid, "role": m.role, "text": m.text, "time": _z(m.sent_at)}
    return {"id": mid, "speaker": m.role, "body": m.text, "ts": _ms(m.sent_at)}


def _lead(shape: str, lead: Lead) -> Json:
    lid = _render_id(shape, "lead", lead.number)
    cid = _render_id(shape, "conversation", lead.conversation)
    if shape == "pages":
        return {
            "id": lid, "conversationId": cid, "status": lead.status, "score": lead.score,
            "intent": lead.intent, "email": lead.email, "createdAt": _plus_two(lead.created_at),
            "updatedAt": _plus_two(lead.updated_at),
        }  # fmt: skip
    if shape == "offsets":
        return {
            "id": lid, "conversation": cid, "status": lead.status, "score": lead.score,
            "topic": lead.intent, "email": lead.email, "createdOn": lead.created_at.isoformat(),
            "lastModified": lead.updated_at.isoformat(),
        }  # fmt: skip
    if shape in ("next_link", "leaky"):
        return {
            "id": lid, "conversationId": cid, "status": lead.status, "score": lead.score,
            "intent": lead.intent, "createdAt": _z(lead.created_at),
            "updatedAt": _z(lead.updated_at),
        }  # fmt: skip
    return {
        "lead_id": lid, "conversation_id": cid, "status": lead.status, "score": lead.score,
        "intent": lead.intent, "created": _ms(lead.created_at), "updated": _ms(lead.updated_at),
    }  # fmt: skip


class _Item(NamedTuple):
    """A list entry: its number (id order), its updated time and its rendering."""

    number: int
    updated: datetime
    record: Json


def _items(domain: ForeignDomain, shape: str, kind: str) -> list[_Item]:
    with domain.lock:
        if kind == "conversations":
            return [
                _Item(c.number, c.updated_at, _conversation(shape, c)) for c in domain.conversations
            ]
        return [_Item(x.number, x.updated_at, _lead(shape, x)) for x in domain.leads]


def _detail(domain: ForeignDomain, shape: str, raw_id: str, embed: bool) -> Json | None:
    """The detail body of the conversation ``raw_id`` (as ``shape`` writes ids), or None."""
    digits = re.search(r"\d+$", raw_id)
    if digits is None:
        return None
    zero = re.search(r"\d+$", record_id(shape, "conversation", 0))
    number = int(digits.group()) - int(zero.group() if zero else 0)
    with domain.lock:
        conv = domain.conversation(number)
        if conv is None or record_id(shape, "conversation", number) != raw_id:
            return None
        record = _conversation(shape, conv)
        messages = [_message(shape, conv, m) for m in conv.messages]
    if shape == "pages":
        return {**record, "messages": messages} if embed else record
    if shape == "header_cursor":
        return {"conversation": {**record, "transcript": messages}}
    return {**record, "messages": messages}


# --- the list endpoints, one per shape ------------------------------------------------------


class BadRequest(Exception):
    """A query parameter the shape cannot read; answered with 400."""


def _int(params: QueryParams, name: str, default: int) -> int:
    raw = params.get(name)
    if raw is None:
        return default
    try:
        return int(raw)
    except ValueError:
        raise BadRequest(f"query parameter {name!r} must be an integer") from None


def _when(params: QueryParams, name: str) -> datetime | None:
    raw = params.get(name)
    if raw is None:
        return None
    try:
        at = datetime.fromisoformat(raw)
    except ValueError:
        raise BadRequest(f"query parameter {name!r} must be an ISO 8601 time") from None
    return at if at.tzinfo else at.replace(tzinfo=UTC)


def _token(*parts: Any) -> str:
    return base64.urlsafe_b64encode(json.dumps(parts).encode()).decode().rstrip("=")


def _untoken(raw: str, name: str) -> list[Any]:
    try:
        parts = json.loads(base64.urlsafe_b64decode(raw + "=" * (-len(raw) % 4)))
    except ValueError:
        raise BadRequest(f"query parameter {name!r} is not a token this service gave") from None
    if not isinstance(parts, list) or len(parts) != 3 or not all(isinstance(p, int) for p in parts):
        raise BadRequest(f"query parameter {name!r} is not a token this service gave")
    return parts


def _path_value(record: Json, path: str) -> tuple[bool, Any]:
    """(whether ``path`` (dotted) exists in ``record``, its value)."""
    value: Any = record
    for part in path.split("."):
        if not isinstance(value, dict) or part not in value:
            return False, None
        value = value[part]
    return True, value


def _comparable(value: Any) -> Any:
    if isinstance(value, str):
        try:
            at = datetime.fromisoformat(value)
        except ValueError:
            return value
        return at if at.tzinfo else at.replace(tzinfo=UTC)
    return value


def _as_text(value: Any) -> str | None:
    if isinstance(value, bool):
        return "true" if value else "false"
    return None if value is None or isinstance(value, dict | list) else str(value)


def _matches(value: Any, op: str, wanted: list[str]) -> bool:
    """json-server's test of a record's value against ``field=`` (any of), ``_gte`` or ``_lte``."""
    if value is None:
        return False
    if op == "eq":
        return _as_text(value) in wanted
    for bound in wanted:
        a, b = _comparable(value), _comparable(bound)
        try:
            if isinstance(value, int | float) and not isinstance(value, bool):
                b = float(bound)
            if not (a >= b if op == "gte" else a <= b):
                return False
        except (TypeError, ValueError):
            return False
    return True


def _json_server_list(request: Request, items: list[_Item]) -> Response:
    """json-server 0.17's list: field filters, ``_sort``, ``_page``/``_limit``, ``_start``/``_end``.

    As in json-server, a parameter naming no field of any record is ignored.
    """
    params = request.query_params
    records = [item.record for item in items]
    for name in {k for k in params if not k.startswith("_")}:
        path, op = name, "eq"
        if name.endswith(("_gte", "_lte")):
            path, op = name[:-4], name[-3:]
        if not any(_path_value(r, path)[0] for r in records):
            continue
        wanted = params.getlist(name)
        records = [r for r in records if _matches(_path_value(r, path)[1], op, wanted)]
    if "_sort" in params:
        keys = params["_sort"].split(",")
        orders = params.get("_order", "asc").split(",")
        for i in reversed(range(len(keys))):
            desc = (orders[i] if i < len(orders) else orders[-1]).lower() == "desc"

            def key(r: Json, path: str = keys[i]) -> tuple[bool, Any]:
                value = _comparable(_path_value(r, path)[1])
                return value is not None, value if value is not None else 0

            records.sort(key=key, reverse=desc)
    total, headers = len(records), {}
    if "_page" in params:
        page = max(_safe_int(params["_page"]) or 1, 1)
        limit = _safe_int(params.get("_limit", "")) or 10
        last = max(-(-total // limit), 1)
        records = records[(page - 1) * limit : page * limit]
        links = {"first": 1, "prev": page - 1 if page > 1 else None}
        links |= {"next": page + 1 if page < last else None, "last": last}
        headers["Link"] = ", ".join(
            f'<{request.url.include_query_params(_page=n)}>; rel="{rel}"'
            for rel, n in links.items()
            if n is not None
        )
        headers["X-Total-Count"] = str(total)
        headers["Access-Control-Expose-Headers"] = "X-Total-Count, Link"
    elif "_end" in params or "_limit" in params:
        start = _safe_int(params.get("_start", "")) or 0
        end = _safe_int(params["_end"]) if "_end" in params else None
        end = end if end is not None else start + (_safe_int(params.get("_limit", "")) or 0)
        records = records[start:end]
        headers["X-Total-Count"] = str(total)
        headers["Access-Control-Expose-Headers"] = "X-Total-Count"
    return JSONResponse(records, headers=headers)


def _safe_int(raw: str) -> int | None:
    """JavaScript's ``parseInt`` as json-server uses it: None when it is no number."""
    digits = raw.strip()
    sign = -1 if digits.startswith("-") else 1
    digits = digits.lstrip("+-")
    end = len(digits) - len(digits.lstrip("0123456789"))
    return sign * int(digits[:end]) if end else None


def _offsets_list(request: Request, items: list[_Item]) -> Response:
    params = request.query_params
    skip, take = max(_int(params, "skip", 0), 0), min(max(_int(params, "take", 20), 1), 50)
    since = _when(params, "modifiedSince")
    if since is not None:
        items = [i for i in items if i.updated >= since]
    if params.get("orderBy") == "lastModified":
        items = sorted(items, key=lambda i: (i.updated, i.number))
    records = [i.record for i in items[skip : skip + take]]
    return JSONResponse({"records": records, "totalRecords": len(items)})


class _Page(NamedTuple):
    items: list[_Item]
    number: int  # 1-based
    more: bool  # whether a next page exists


def _keyset(request: Request, items: list[_Item], name: str, size: int) -> _Page:
    """The page of ``size`` items by (updated, number) after the position in the token ``name``."""
    items = sorted(items, key=lambda i: (i.updated, i.number))
    number = 1
    if name in request.query_params:
        after_ms, after_number, previous = _untoken(request.query_params[name], name)
        items = [i for i in items if (_ms(i.updated), i.number) > (after_ms, after_number)]
        number = previous + 1
    return _Page(items[:size], number, len(items) > size)


def _following(page: _Page) -> str:
    """The token of the page after ``page``: where it ended, and its number."""
    last = page.items[-1]
    return _token(_ms(last.updated), last.number, page.number)


def _next_link_list(request: Request, items: list[_Item], leak_to: str | None) -> Response:
    params = request.query_params
    size = min(max(_int(params, "pageSize", 25), 1), 100)
    since = _when(params, "updated_after")
    if since is not None:
        items = [i for i in items if i.updated > since]
    page = _keyset(request, items, "page", size)
    following: str | None = None
    if page.more:
        url = request.url.include_query_params(page=_following(page))
        relative = f"{url.path}?{url.query}"
        if leak_to is not None and page.number == 1:
            following = leak_to.rstrip("/") + relative
        else:
            following = relative if page.number % 2 else str(url)
    return JSONResponse({"items": [i.record for i in page.items], "next": following})


def _header_cursor_list(request: Request, items: list[_Item], envelope: str) -> Response:
    params = request.query_params
    size = min(max(_int(params, "max", 25), 1), 25)
    since = params.get("since_ms", "")
    if since.lstrip("-").isdigit():  # anything else (an ISO time, say) is ignored
        items = [i for i in items if _ms(i.updated) >= int(since)]
    page = _keyset(request, items, "after", size)
    headers = {"X-Next-Cursor": _following(page)} if page.more else {}
    return JSONResponse({envelope: [i.record for i in page.items]}, headers=headers)


# --- the apps -------------------------------------------------------------------------------


class RequestLog:
    """A thread-safe list of what reached a server (the server appends, a test reads)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._entries: list[Any] = []

    def append(self, entry: Any) -> None:
        with self._lock:
            self._entries.append(entry)

    def snapshot(self) -> list[Any]:
        with self._lock:
            return list(self._entries)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)

    def __iter__(self) -> Iterator[Any]:
        return iter(self.snapshot())

    def __getitem__(self, index: int) -> Any:
        return self.snapshot()[index]


def _target(scope: Scope) -> str:
    query = scope.get("query_string", b"").decode("latin-1")
    path: str = scope["path"]
    return path + (f"?{query}" if query else "")


class _Guard:
    """Records every request, then refuses those without the bearer key."""

    def __init__(self, app: ASGIApp, *, key: str, log: RequestLog) -> None:
        self.app, self.log = app, log
        self.expected = f"Bearer {key}".encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        self.log.append(_target(scope))
        given = Headers(scope=scope).get("authorization", "").encode("latin-1")
        if not hmac.compare_digest(given, self.expected):
            refusal = {"error": "unauthorized", "message": "a valid bearer key is required"}
            headers = {"WWW-Authenticate": "Bearer"}
            await JSONResponse(refusal, 401, headers=headers)(scope, receive, send)
            return
        await self.app(scope, receive, send)


async def _error(request: Request, exc: Exception) -> Response:
    status = exc.status_code if isinstance(exc, HTTPException) else 400
    return JSONResponse({"error": str(getattr(exc, "detail", exc))}, status)


class ForeignApp(Starlette):
    """A Starlette app with the requests that reached it (``path?query`` strings)."""

    requests: RequestLog
    domain: ForeignDomain
    shape: str


def make_app(
    domain: ForeignDomain, shape: str, key: str, *, leak_to: str | None = None
) -> ForeignApp:
    """The service of ``domain`` in ``shape`` (one of SHAPES); "leaky" needs ``leak_to``,
    the origin (``http://127.0.0.1:PORT``) its first page's next link points at."""
    if shape not in SHAPES:
        raise ValueError(f"unknown shape {shape!r}; one of {SHAPES}")
    if (shape == "leaky") != (leak_to is not None):
        raise ValueError("leak_to is given for the 'leaky' shape, and only for it")

    def lister(kind: str) -> Callable[[Request], Response]:
        def endpoint(request: Request) -> Response:
            items = _items(domain, shape, kind)
            try:
                if shape == "pages":
                    return _json_server_list(request, items)
                if shape == "offsets":
                    return _offsets_list(request, items)
                if shape == "header_cursor":
                    return _header_cursor_list(request, items, kind)
                return _next_link_list(request, items, leak_to)
            except BadRequest as exc:
                return JSONResponse({"error": str(exc)}, 400)

        return endpoint

    def detail(request: Request) -> Response:
        embed = "messages" in ",".join(request.query_params.getlist("_embed")).split(",")
        body = _detail(domain, shape, request.path_params["cid"], embed)
        if body is None:
            return JSONResponse({"error": "no such conversation"}, 404)
        return JSONResponse(body)

    log = RequestLog()
    app = ForeignApp(
        routes=[
            Route("/v1/conversations", lister("conversations")),
            Route("/v1/conversations/{cid}", detail),
            Route("/v1/leads", lister("leads")),
        ],
        middleware=[Middleware(_Guard, key=key, log=log)],
        exception_handlers={404: _error, 405: _error},
    )
    app.requests, app.domain, app.shape = log, domain, shape
    return app


class Hit(NamedTuple):
    target: str  # path?query
    authorization: str | None


class CounterApp(Starlette):
    """Stands at another origin: records each request (``Hit``s), answers an empty page."""

    requests: RequestLog


def make_counter_app() -> CounterApp:
    log = RequestLog()

    async def anything(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            auth = Headers(scope=scope).get("authorization")
            log.append(Hit(_target(scope), auth))
            await JSONResponse({"items": [], "next": None})(scope, receive, send)

    app = CounterApp(routes=[Mount("", app=anything)])
    app.requests = log
    return app


@contextmanager
def serve(
    domain: ForeignDomain, shape: str, key: str, *, leak_to: str | None = None
) -> Iterator[tuple[ServerThread, ForeignApp]]:
    """``with serve(domain, "pages", KEY) as (server, app):`` server.url on 127.0.0.1."""
    app = make_app(domain, shape, key, leak_to=leak_to)
    with ServerThread(app) as server:
        yield server, app
