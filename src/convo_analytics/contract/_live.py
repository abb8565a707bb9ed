"""Request and response shapes of the interface's write side (the live assistant).

The interface shows the create-conversation and send-message request fields
(externalUserId, channel, metadata; text, channel, locale) and the
knowledge-source fields (name, type, seedUrls); the rest is ours
(docs/decisions.md, D-LIVE-SHAPES). Unknown fields are rejected, so a typo is
a 422 rather than silently ignored.
"""

from __future__ import annotations

from typing import Any, Literal

import orjson
from pydantic import BaseModel, ConfigDict, Field, field_validator

#: language-REGION, as the interface's locale example (e.g. en-US, pt-BR).
LOCALE_PATTERN = r"^[a-z]{2,3}-[A-Z]{2}$"
MAX_TEXT = 4000
MAX_METADATA_BYTES = 16_384


class _Request(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ConversationCreate(_Request):
    externalUserId: str = Field(min_length=1, max_length=200)
    channel: str = Field(min_length=1, max_length=32, pattern=r"^[a-z][a-z0-9_-]*$")
    metadata: dict[str, Any] = Field(default_factory=dict)
    locale: str | None = Field(default=None, pattern=LOCALE_PATTERN)

    @field_validator("metadata")
    @classmethod
    def _storable(cls, value: dict[str, Any]) -> dict[str, Any]:
        """Metadata is stored and sent on as JSON: bounded in size, numbers within 64 bits."""
        try:
            size = len(orjson.dumps(value))
        except (TypeError, orjson.JSONEncodeError):
            raise ValueError("metadata must be plain JSON with integers within 64 bits") from None
        if size > MAX_METADATA_BYTES:
            raise ValueError(f"metadata must be at most {MAX_METADATA_BYTES} bytes of JSON")
        return value


class MessageCreate(_Request):
    text: str = Field(min_length=1, max_length=MAX_TEXT)
    channel: str = Field(min_length=1, max_length=32, pattern=r"^[a-z][a-z0-9_-]*$")
    locale: str = Field(pattern=LOCALE_PATTERN, description="language-REGION, e.g. en-US")


class FeedbackCreate(_Request):
    rating: int = Field(ge=1, le=5)
    comment: str | None = Field(default=None, max_length=2000)


class KnowledgeSourceCreate(_Request):
    """A source; a second POST with the same name updates it (re-crawls a url-crawl source)."""

    name: str = Field(min_length=1, max_length=200)
    type: Literal["url-crawl", "text", "faq"]
    seedUrls: list[str] = Field(default_factory=list, max_length=20)
    content: str | None = Field(default=None, max_length=200_000, description="type text")
    entries: list[dict[str, str]] = Field(
        default_factory=list, max_length=500, description="type faq: {question, answer}"
    )


class KnowledgeUpload(_Request):
    """A document uploaded into a source (created as type text when it does not exist)."""

    title: str = Field(min_length=1, max_length=300)
    content: str = Field(min_length=1, max_length=200_000)
    source: str = Field(default="uploads", min_length=1, max_length=200)
    documentId: str | None = Field(default=None, max_length=128, description="update this one")


class EscalationCreate(_Request):
    conversationId: str = Field(min_length=1, max_length=128)
    reasonCode: str = Field(min_length=1, max_length=64)
    destination: str = Field(min_length=1, max_length=64, description="e.g. helpdesk, crm")
    owner: str | None = Field(default=None, max_length=128)
    priority: Literal["low", "normal", "high", "urgent"] = "normal"
    note: str | None = Field(default=None, max_length=2000)


class Trace(BaseModel):
    latencyMs: int
    modelTier: str
    confidence: float
    policyFlags: list[str]
    knowledgeSource: str | None
    retrieval: list[dict[str, Any]]


class MessageExchange(BaseModel):
    """The answer to a user message: both messages, the trace, and what it set off."""

    conversationId: str
    message: dict[str, Any]
    response: dict[str, Any]
    trace: Trace
    events: list[str] = Field(description="event types the exchange emitted")
