"""The write side of the interface: conversations, messages, knowledge, escalations, feedback."""

from __future__ import annotations

import random
import time
from typing import Annotated, Any
from urllib.parse import urlsplit

from fastapi import APIRouter, Path, Request
from starlette.responses import Response

from convo_analytics._net import is_loopback_host
from convo_analytics.contract import ConversationSummary, ErrorBody
from convo_analytics.contract._live import (
    ConversationCreate,
    EscalationCreate,
    FeedbackCreate,
    KnowledgeSourceCreate,
    KnowledgeUpload,
    MessageCreate,
    MessageExchange,
)
from convo_analytics.contract._records import Escalation, Feedback
from convo_analytics.sandbox._activity import ConversationClosed
from convo_analytics.sandbox._auth import CallerDep, sandbox_of
from convo_analytics.sandbox._delivery import check_webhook_url
from convo_analytics.sandbox._errors import ApiException
from convo_analytics.sandbox._ids import new_id
from convo_analytics.sandbox._knowledge import Document, Source, fetch_page
from convo_analytics.sandbox._model import Conversation
from convo_analytics.sandbox._routes_read import ERRORS, NOT_FOUND, json_response
from convo_analytics.sandbox._workspace import Workspace

router = APIRouter(prefix="/v1", tags=["assistant"])
CONFLICT: dict[int | str, dict[str, Any]] = {
    409: {"model": ErrorBody, "description": "the conversation has completed"},
    422: {"model": ErrorBody, "description": "a field is missing or invalid"},
}
_rng = random.Random()


def _now() -> int:
    return int(time.time() * 1000)


def _conversation(request: Request, ws: Workspace, conversation_id: str) -> Conversation:
    sandbox_of(request).live.sweep(ws, _now())
    conv = ws.get(conversation_id)
    if conv is None:
        raise ApiException(404, f"conversation {conversation_id!r} not found in this workspace")
    return conv


@router.post(
    "/conversations",
    status_code=201,
    response_model=ConversationSummary,
    responses={**ERRORS, **CONFLICT},
    summary="Create a conversation session (emits conversation.created)",
)
def create_conversation(request: Request, caller: CallerDep, body: ConversationCreate) -> Response:
    sandbox = sandbox_of(request)
    conv = sandbox.live.open(
        caller.workspace, external_user_id=body.externalUserId, channel=body.channel,
        metadata=body.metadata, locale=body.locale, now=_now(),
    )  # fmt: skip
    return json_response(conv.summary_json(), request, 201)


@router.post(
    "/conversations/{conversation_id}/messages",
    status_code=201,
    response_model=MessageExchange,
    responses={**ERRORS, **NOT_FOUND, **CONFLICT},
    summary="Send a user message; the assistant answers with trace metadata",
)
def send_message(
    request: Request,
    caller: CallerDep,
    conversation_id: Annotated[str, Path(max_length=128)],
    body: MessageCreate,
) -> Response:
    ws = caller.workspace
    conv = _conversation(request, ws, conversation_id)
    try:
        out = sandbox_of(request).live.message(
            ws, conv, text=body.text, channel=body.channel, locale=body.locale, now=_now()
        )
    except ConversationClosed:
        raise ApiException(
            409, f"conversation {conversation_id!r} has completed; open a new one", "conflict"
        ) from None
    exchange = {
        "conversationId": conv.id,
        "message": out["user"],
        "response": out["reply"],
        "trace": {"latencyMs": out["latency"], "modelTier": out["tier"],
                  "confidence": out["confidence"], "policyFlags": out["flags"],
                  "knowledgeSource": out["source"], "retrieval": out["retrieval"]},
        "events": out["events"],
    }  # fmt: skip
    return json_response(exchange, request, 201)


@router.post(
    "/conversations/{conversation_id}/feedback",
    status_code=201,
    response_model=Feedback,
    responses={**ERRORS, **NOT_FOUND, **CONFLICT},
    summary="Give feedback on a conversation (emits conversation.feedback)",
)
def give_feedback(
    request: Request,
    caller: CallerDep,
    conversation_id: Annotated[str, Path(max_length=128)],
    body: FeedbackCreate,
) -> Response:
    ws = caller.workspace
    conv = _conversation(request, ws, conversation_id)
    if conv.feedback is not None:
        raise ApiException(409, "feedback was already given for this conversation", "conflict")
    ws.change(conv, lambda c: ws.activity.feedback(c, _now(), body.rating, body.comment))
    assert conv.feedback is not None
    return json_response(conv.feedback.to_json(), request, 201)


@router.post(
    "/escalations",
    status_code=201,
    response_model=Escalation,
    responses={**ERRORS, **NOT_FOUND, **CONFLICT},
    summary="Push a manual handoff into CRM or helpdesk workflows",
)
def create_escalation(request: Request, caller: CallerDep, body: EscalationCreate) -> Response:
    ws = caller.workspace
    conv = _conversation(request, ws, body.conversationId)
    made: list[Any] = []

    def escalate(c: Conversation) -> list[Any]:
        esc, events = ws.activity.escalate(
            c, _now(), reason_code=body.reasonCode, destination=body.destination,
            owner=body.owner, priority=body.priority, origin="manual", note=body.note,
        )  # fmt: skip
        made.append(esc)
        return events

    try:
        ws.change(conv, escalate)
    except ConversationClosed:
        raise ApiException(409, "the conversation has completed; it cannot be escalated") from None
    return json_response(made[0].to_json(), request, 201)


@router.post(
    "/knowledge-sources",
    status_code=201,
    responses={**ERRORS, **CONFLICT, 200: {"description": "an existing source, updated"}},
    summary="Create or update (by name) a knowledge source; a url-crawl source fetches its seeds",
)
def put_knowledge_source(
    request: Request, caller: CallerDep, body: KnowledgeSourceCreate
) -> Response:
    kb = sandbox_of(request).live.kb(caller.workspace)
    now = _now()
    if body.type == "url-crawl":
        if not body.seedUrls:
            raise ApiException(422, "a url-crawl source needs seedUrls", "validation_failed")
        for url in body.seedUrls:
            try:
                check_webhook_url(url)  # the same rule: https, or http to loopback only
            except ValueError as exc:
                raise ApiException(422, f"seedUrls: {url!r}: {exc}", "validation_failed") from None
    elif body.type == "text" and not body.content:
        raise ApiException(422, "a text source needs content", "validation_failed")
    elif body.type == "faq" and not body.entries:
        raise ApiException(422, "a faq source needs entries", "validation_failed")
    source = kb.by_name(body.name)
    created = source is None
    if source is None:
        source = Source(new_id("ks", _rng), body.name, body.type, list(body.seedUrls), now, now)
        kb.sources[source.id] = source
    source.type, source.seed_urls, source.errors = body.type, list(body.seedUrls), []
    docs = _documents(body, source, sandbox_of(request).settings.crawl_scope)
    source.status = "ready" if docs or not source.errors else "failed"
    kb.replace_documents(source, docs, now)
    return json_response(source.to_json(), request, 201 if created else 200)


def _documents(body: KnowledgeSourceCreate, source: Source, scope: str) -> list[Document]:
    now = _now()
    if body.type == "text":
        return [Document(f"{source.id}-text", body.name, body.content or "", None, now)]
    if body.type == "faq":
        return [
            Document(f"{source.id}-faq-{i}", e.get("question", ""),
                     f"{e.get('question', '')} {e.get('answer', '')}", None, now)
            for i, e in enumerate(body.entries)
        ]  # fmt: skip
    docs = []
    for i, url in enumerate(body.seedUrls):
        if scope == "loopback" and not is_loopback_host(urlsplit(url).hostname or ""):
            source.errors.append({"url": url, "error": "this sandbox crawls loopback hosts only"})
            continue
        try:
            title, text = fetch_page(url)
        except ValueError as exc:
            source.errors.append({"url": url, "error": str(exc)})
            continue
        docs.append(Document(f"{source.id}-page-{i}", title or url, text, url, now))
    return docs


@router.get("/knowledge-sources", responses={**ERRORS}, summary="List knowledge sources")
def list_knowledge_sources(request: Request, caller: CallerDep) -> Response:
    kb = sandbox_of(request).live.kb(caller.workspace)
    return json_response({"data": [s.to_json() for s in kb.sources.values()]}, request)


@router.post(
    "/knowledge",
    status_code=201,
    responses={**ERRORS, **CONFLICT},
    summary="Upload or update knowledge content (a document in a source)",
)
def upload_knowledge(request: Request, caller: CallerDep, body: KnowledgeUpload) -> Response:
    kb = sandbox_of(request).live.kb(caller.workspace)
    now = _now()
    source = kb.by_name(body.source)
    if source is None:
        source = Source(new_id("ks", _rng), body.source, "text", [], now, now)
        kb.sources[source.id] = source
    doc_id = body.documentId or new_id("doc", _rng)
    doc = kb.put_document(source, doc_id, body.title, body.content, None, now)
    return json_response(
        {"documentId": doc.id, "sourceId": source.id, "source": source.name, "title": doc.title},
        request,
        201,
    )
