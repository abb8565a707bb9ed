"""The shape of GET /v1/analytics/summary, which our own export reproduces.

Metric definitions (attribution date, numerator, denominator) are written in
docs/warehouse.md under "Service summary"; the field descriptions below are
the short form of them.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class LatencyPercentiles(BaseModel):
    model_config = ConfigDict(extra="forbid")
    p50: float | None
    p90: float | None
    p95: float | None
    p99: float | None


class SummaryMetrics(BaseModel):
    """One period's metrics. Counts add up across days; rates and percentiles do not."""

    model_config = ConfigDict(extra="forbid")

    # Conversation cohort: attributed to the day the conversation started.
    conversations: int = Field(description="conversations started")
    engagedConversations: int = Field(description="started, with at least one user message")
    resolved: int = Field(description="started, status resolved now")
    abandoned: int = Field(description="started, status abandoned now")
    open: int = Field(description="started, still open now")
    escalatedConversations: int = Field(description="started, escalated at least once")
    containedConversations: int = Field(description="started, ended, never escalated")
    leadsQualified: int = Field(description="started, lead qualified")
    feedbackCount: int = Field(description="started, feedback given")
    positiveFeedback: int = Field(description="started, feedback rating >= 4")
    ratingSum: int = Field(description="sum of feedback ratings (for averaging)")
    resolutionRate: float | None = Field(description="resolved / conversations")
    containmentRate: float | None = Field(description="containedConversations / conversations")
    escalationRate: float | None = Field(description="escalatedConversations / conversations")
    abandonmentRate: float | None = Field(description="abandoned / conversations")
    leadQualificationRate: float | None = Field(description="leadsQualified / conversations")
    avgRating: float | None = Field(description="ratingSum / feedbackCount")
    csat: float | None = Field(description="positiveFeedback / feedbackCount")
    medianFirstResponseMs: float | None = Field(
        description="median time from a conversation's first user message to the reply"
    )
    medianTimeToResolutionSeconds: float | None = Field(
        description="median time from start to end of resolved conversations"
    )
    # Event time: attributed to the day the message or event happened.
    userMessages: int
    assistantResponses: int
    escalations: int = Field(description="escalations created (a conversation may have several)")
    guardrailTriggers: int
    guardrailTriggersPer1000Responses: float | None
    guardrailTriggersByFlag: dict[str, int]
    latencyMs: LatencyPercentiles = Field(
        description="assistant response latency, linear interpolation between ranks"
    )
    avgConfidence: float | None
    lowConfidenceResponses: int = Field(description="responses with confidence below threshold")
    lowConfidenceShare: float | None
    modelTierMix: dict[str, int] = Field(description="assistant responses by model tier")


class DailySummary(SummaryMetrics):
    date: str = Field(description="calendar day in the requested time zone, YYYY-MM-DD")


class SummaryResponse(BaseModel):
    model_config = ConfigDict(extra="forbid")

    workspaceId: str
    from_: str = Field(alias="from", description="first day, inclusive")
    to: str = Field(description="last day, inclusive")
    timezone: str
    lowConfidenceThreshold: float
    generatedAt: str
    totals: SummaryMetrics
    daily: list[DailySummary]
