"""Record shapes of the service's REST interface, as pydantic models.

They drive the OpenAPI document the sandbox publishes and are the shapes the
extractors expect by default. Field names are camelCase like the interface's
own request fields (externalUserId, seedUrls).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

ConversationStatus = Literal["open", "resolved", "abandoned"]
Role = Literal["user", "assistant", "agent", "system"]


class _Shape(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Message(_Shape):
    """One transcript entry; trace fields are set on assistant messages only."""

    id: str
    role: Role
    text: str
    createdAt: str = Field(description="ISO 8601 UTC timestamp")
    channel: str
    locale: str | None
    latencyMs: int | None = Field(description="assistant messages: time to respond")
    modelTier: str | None
    confidence: float | None = Field(ge=0, le=1)
    policyFlags: list[str]
    knowledgeSource: str | None = Field(description="source of the passage used, if any")


class Escalation(_Shape):
    id: str
    conversationId: str
    createdAt: str
    reasonCode: str
    destination: str
    owner: str | None
    priority: Literal["low", "normal", "high", "urgent"]
    origin: Literal["automatic", "manual"]
    note: str | None


class GuardrailEvent(_Shape):
    id: str
    conversationId: str
    messageId: str
    triggeredAt: str
    flag: str
    rule: str
    category: str | None
    severity: Literal["low", "medium", "high", "critical"] | None
    action: Literal["redacted", "blocked", "warned", "escalated", "logged"]
    excerpt: str


class Feedback(_Shape):
    id: str
    conversationId: str
    createdAt: str
    rating: int = Field(ge=1, le=5)
    comment: str | None


class Lead(_Shape):
    id: str
    conversationId: str
    workspaceId: str
    createdAt: str
    updatedAt: str
    status: Literal["scored", "qualified"]
    score: float = Field(ge=0, le=100)
    intent: str
    qualifiedAt: str | None
    email: str | None
    phone: str | None
    name: str | None
    company: str | None
    contactFields: list[str]
    source: str | None
    metadata: dict[str, Any]
    conversationUrl: str


class ConversationSummary(_Shape):
    """A conversation as listed: the detail without its nested collections."""

    id: str
    workspaceId: str
    externalUserId: str
    channel: str
    locale: str | None
    intent: str | None = Field(description="what the user wants, as the assistant classified it")
    metadata: dict[str, Any]
    status: ConversationStatus
    createdAt: str
    updatedAt: str
    endedAt: str | None
    messageCount: int
    escalated: bool
    escalationCount: int
    guardrailTriggerCount: int
    leadId: str | None
    feedbackRating: int | None


class ConversationDetail(ConversationSummary):
    messages: list[Message]
    escalations: list[Escalation]
    guardrailEvents: list[GuardrailEvent]
    lead: Lead | None
    feedback: Feedback | None


class Page(_Shape):
    """The list envelope: records, and an opaque cursor while more remain."""

    data: list[dict[str, Any]]
    hasMore: bool
    nextCursor: str | None


class ConversationPage(Page):
    data: list[ConversationSummary]  # type: ignore[assignment]


class LeadPage(Page):
    data: list[Lead]  # type: ignore[assignment]


class ApiError(_Shape):
    code: str = Field(description="stable machine-readable code, e.g. not_found")
    message: str
    requestId: str
    details: list[dict[str, Any]] | None = None


class ErrorBody(_Shape):
    """Every error answer of the sandbox has this body."""

    error: ApiError


class WebhookCreate(_Shape):
    url: str = Field(min_length=1, max_length=2048)
    events: list[str] = Field(default_factory=lambda: ["*"])
    secret: str | None = Field(default=None, min_length=16, max_length=256)
    description: str | None = Field(default=None, max_length=500)


class WebhookEndpoint(_Shape):
    id: str
    workspaceId: str
    url: str
    events: list[str]
    description: str | None
    createdAt: str
    active: bool


class WebhookCreated(WebhookEndpoint):
    secret: str = Field(description="returned once, at registration")


class WebhookList(_Shape):
    data: list[WebhookEndpoint]


class DeliveryAttempt(_Shape):
    id: str
    webhookId: str
    eventType: str
    idempotencyKey: str
    conversationId: str | None
    attempt: int
    attemptedAt: str
    statusCode: int | None
    error: str | None
    durationMs: float
    outcome: Literal["succeeded", "retrying", "failed"]
    nextAttemptAt: str | None
    payload: str


class DeliveryPage(Page):
    data: list[DeliveryAttempt]  # type: ignore[assignment]
