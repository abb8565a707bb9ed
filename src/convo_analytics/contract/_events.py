"""The webhook event catalogue: the union of the interface's two event sets."""

from typing import Final

#: Set A: events listed with their key fields.
EVENT_SET_A: Final = (
    "conversation.created",
    "message.responded",
    "lead.qualified",
    "escalation.created",
)
#: Set B: events listed with their use; these come in the documented envelope.
EVENT_SET_B: Final = (
    "lead.qualified",
    "conversation.escalated",
    "conversation.completed",
    "conversation.feedback",
    "guardrail.triggered",
)
#: We read the full catalogue as the union of both sets (decision D-EVENTS).
ALL_EVENT_TYPES: Final = tuple(dict.fromkeys(EVENT_SET_A + EVENT_SET_B))

# Delivery headers are "not shown" by the interface; these are the sandbox's
# (decision D-WEBHOOK-HEADERS). Header names are matched case-insensitively.
SIGNATURE_HEADER: Final = "X-Convo-Signature"
IDEMPOTENCY_HEADER: Final = "Idempotency-Key"
EVENT_HEADER: Final = "X-Convo-Event"
DELIVERY_HEADER: Final = "X-Convo-Delivery"
TIMESTAMP_HEADER: Final = "X-Convo-Timestamp"
