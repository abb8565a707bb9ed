"""The Conversational Assistant Service's interface as convo-analytics reads it.

The interface document leaves most shapes "not shown"; this package is the one
place where our reading of them is written down, so that the sandbox that
serves them, the extractors that read them and the exports that imitate them
cannot drift apart. Each choice is explained in docs/decisions.md.
"""

from convo_analytics.contract._events import (
    ALL_EVENT_TYPES,
    DELIVERY_HEADER,
    EVENT_HEADER,
    EVENT_SET_A,
    EVENT_SET_B,
    IDEMPOTENCY_HEADER,
    SIGNATURE_HEADER,
    TIMESTAMP_HEADER,
)
from convo_analytics.contract._limits import RateLimitPolicy
from convo_analytics.contract._records import (
    ApiError,
    ConversationDetail,
    ConversationSummary,
    DeliveryAttempt,
    ErrorBody,
    Escalation,
    Feedback,
    GuardrailEvent,
    Lead,
    Message,
    Page,
    WebhookCreate,
    WebhookCreated,
    WebhookEndpoint,
)
from convo_analytics.contract._summary import DailySummary, SummaryMetrics, SummaryResponse

__all__ = [
    "ALL_EVENT_TYPES",
    "DELIVERY_HEADER",
    "EVENT_HEADER",
    "EVENT_SET_A",
    "EVENT_SET_B",
    "IDEMPOTENCY_HEADER",
    "SIGNATURE_HEADER",
    "TIMESTAMP_HEADER",
    "ApiError",
    "ConversationDetail",
    "ConversationSummary",
    "DailySummary",
    "DeliveryAttempt",
    "ErrorBody",
    "Escalation",
    "Feedback",
    "GuardrailEvent",
    "Lead",
    "Message",
    "Page",
    "RateLimitPolicy",
    "SummaryMetrics",
    "SummaryResponse",
    "WebhookCreate",
    "WebhookCreated",
    "WebhookEndpoint",
]
