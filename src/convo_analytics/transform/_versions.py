"""Definition versions: which version of each definition the marts are built with.

An incremental transform adds what changed to marts an earlier run built; that
is only right when both runs define every figure the same way. So each
definition the marts depend on is listed here with the version that last
changed it, the marts store the highest (``mart_state.definition_version``),
and a run that finds another version rebuilds every partition. Whoever
changes a definition bumps its entry here and in docs/warehouse.md
("Definition versions"; a test keeps the two in step).
"""

from __future__ import annotations

#: Definition -> the version that last changed it. Metric names are the summary's.
DEFINITIONS: dict[str, int] = {
    # metrics (docs/warehouse.md, "Service summary" and "Metrics")
    "conversations": 1,
    "engagedConversations": 1,
    "resolved": 1,
    "abandoned": 1,
    "open": 1,
    "resolutionRate": 1,
    "containedConversations": 1,
    "containmentRate": 1,
    "escalatedConversations": 1,
    "escalationRate": 1,
    "abandonmentRate": 1,
    "leadsQualified": 1,
    "leadQualificationRate": 1,
    "feedbackCount": 1,
    "positiveFeedback": 1,
    "ratingSum": 1,
    "avgRating": 1,
    "csat": 1,
    "medianFirstResponseMs": 1,
    "medianTimeToResolutionSeconds": 1,
    "userMessages": 1,
    "assistantResponses": 1,
    "escalations": 1,
    "guardrailTriggers": 1,
    "guardrailTriggersByFlag": 1,
    "guardrailTriggersPer1000Responses": 1,
    "latencyMs": 1,
    "avgConfidence": 1,
    "lowConfidenceResponses": 1,
    "lowConfidenceShare": 1,
    "modelTierMix": 1,
    # facts and how the marts are cut
    "fact sources (D-FACT-SOURCES)": 1,
    "intent (D-INTENT)": 1,
    "contact capture time (D-CONTACT-TIME)": 1,
    "lead funnel steps": 1,
    "newest lead of a conversation (ties broken by lead id)": 2,
    "slice keys (hash of the dimension values)": 6,
    "topic dimension (D-TOPICS-WAREHOUSE)": 6,
    "knowledge gaps: failing answers, severity (D-KNOWLEDGE-GAPS)": 7,
    "partitions (workspace, zone, day) and their percentile rows": 2,
    "conversation footprints (spans and message digests)": 2,
    "a conversation is its workspace and its id in every join (D-WORKSPACE-ID)": 3,
    "a webhook subject is its workspace and its id; an event naming none is default's": 4,
    # not a definition: incremental runs before it could keep a stale escalation; a rebuild
    # puts right the marts they left
    "a new event of a stored subject changes the conversations it was counted for": 5,
}

#: The version the marts of this release follow.
DEFINITION_VERSION = max(DEFINITIONS.values())
