"""The tables of what conversations are about, and where the assistant failed them.

Written by the transform in the same transaction as the marts (issue 27):
``topics`` (each workspace's discovered topics: their names, examples and the
centroids that place tomorrow's conversations), ``conversation_topics`` (the
topic of each conversation), ``topic_curations`` (the analysts' renames,
merges, splits and pins, copied from the app's own state store on every run),
``mart_topics`` (the topics as analysts see them: curations applied) and
``knowledge_gaps`` (assistant answers that did not answer). Topics never cross
a workspace: every key starts with the workspace (decision D-TOPICS-WAREHOUSE).
"""

from __future__ import annotations

from convo_analytics.warehouse._tables import Column, Table

_TS = "TIMESTAMPTZ"
_WORKSPACE = Column("workspace_id", "VARCHAR NOT NULL", doc="the workspace the topic is one of")
_TOPIC = Column(
    "topic_id",
    "INTEGER NOT NULL",
    doc="the topic's number within its workspace (0: 'other', what fits no topic); never "
    "reused, kept across rediscoveries for the topics they map to",
)

TOPICS = Table(
    "topics",
    (
        _WORKSPACE,
        _TOPIC,
        Column(
            "language",
            "VARCHAR",
            doc="the language group it was discovered in: a locale's language (en, de, …) "
            "with enough conversations, else 'mixed'",
        ),
        Column("label", "VARCHAR", doc="the discovered name: its most distinctive terms"),
        Column("terms", "VARCHAR[]", doc="distinctive terms (class-based TF-IDF), best first"),
        Column("examples", "VARCHAR[]", doc="up to three representative first messages"),
        Column("discovered_size", "BIGINT", doc="conversations it held when discovered"),
        Column(
            "centroid",
            "FLOAT[]",
            doc="its centre in the embedding space: a new conversation goes to the nearest",
        ),
        Column("discovery_id", "VARCHAR", doc="the discovery that made or last mapped it"),
        Column("discovered_at", _TS),
        Column(
            "retired",
            "BOOLEAN",
            doc="no longer assigned to (a rediscovery found nothing like it); kept so that "
            "older views and curations still name it",
        ),
    ),
    ("workspace_id", "topic_id"),
    "Each workspace's discovered topics (D-TOPICS-WAREHOUSE).",
    indexed=False,
)
CONVERSATION_TOPICS = Table(
    "conversation_topics",
    (
        Column("workspace_id", "VARCHAR NOT NULL"),
        Column("conversation_id", "VARCHAR NOT NULL"),
        Column(
            "topic_id",
            "INTEGER",
            doc="its topic (splits applied); NULL while the workspace has too few "
            "conversations for topics or the conversation has no user message",
        ),
        Column("language", "VARCHAR", doc="its language group (see topics.language)"),
        Column("text", "VARCHAR", doc="what it was placed by: its first user message"),
        Column("similarity", "DOUBLE", doc="cosine similarity to the topic's centroid"),
        Column("assigned_by", "VARCHAR", doc="discovery, assignment (nearest centroid) or split"),
        Column("transform_run_id", "VARCHAR", doc="the transform that placed it"),
    ),
    ("workspace_id", "conversation_id"),
    "The topic of each conversation of a workspace with topics.",
    indexed=False,
)
TOPIC_CURATIONS = Table(
    "topic_curations",
    (
        Column("workspace_id", "VARCHAR NOT NULL"),
        Column("sequence", "BIGINT", doc="its order in the store: applied in this order"),
        Column("action", "VARCHAR", doc="rename, merge, split or pin (unpin)"),
        Column("topic_id", "INTEGER", doc="the topic it acts on"),
        Column("target_topic_id", "INTEGER", doc="merge: the topic it is merged into"),
        Column("label", "VARCHAR", doc="rename: the new name; split: the new topic's name"),
        Column("pattern", "VARCHAR", doc="split: the word or phrase that splits off"),
        Column("created_at", _TS),
        Column("created_by", "VARCHAR", doc="cli or dashboard"),
        Column("applied", "BOOLEAN", doc="false when it names a topic that does not exist"),
    ),
    ("workspace_id", "sequence"),
    "The analysts' curations, as the app-state store held them at the last transform.",
    indexed=False,
)
MART_TOPICS = Table(
    "mart_topics",
    (
        _WORKSPACE,
        _TOPIC,
        Column(
            "topic",
            "VARCHAR",
            doc="the value of the topic dimension in mart_slices and mart_conversations",
        ),
        Column("label", "VARCHAR", doc="its name: renamed, else discovered"),
        Column(
            "effective_topic_id",
            "INTEGER",
            doc="the topic it counts under: itself, or the one it was merged into",
        ),
        Column("effective_label", "VARCHAR", doc="the name of that topic"),
        Column("language", "VARCHAR"),
        Column("terms", "VARCHAR[]"),
        Column("examples", "VARCHAR[]"),
        Column("conversations", "BIGINT", doc="conversations placed in it (all time)"),
        Column("pinned", "BOOLEAN", doc="kept as it is by rediscovery"),
        Column("renamed", "BOOLEAN"),
        Column("split_from", "INTEGER", doc="the topic a split made it from"),
        Column("retired", "BOOLEAN"),
    ),
    ("workspace_id", "topic_id"),
    "Every topic as analysts see it: curations applied, one row per topic ever made.",
    indexed=False,
)
KNOWLEDGE_GAPS = Table(
    "knowledge_gaps",
    (
        Column("workspace_id", "VARCHAR NOT NULL"),
        Column("conversation_id", "VARCHAR NOT NULL"),
        Column("message_id", "VARCHAR NOT NULL", doc="the assistant answer that failed"),
        Column("answered_at", _TS, doc="when it was given: the day the report counts it on"),
        Column("topic_id", "INTEGER", doc="the conversation's topic (NULL: none yet)"),
        Column(
            "question",
            "VARCHAR",
            doc="the user message it replied to: the nearest earlier one with text",
        ),
        Column("answer", "VARCHAR", doc="what the assistant answered"),
        Column("confidence", "DOUBLE"),
        Column("knowledge_source", "VARCHAR", doc="the source the answer used, if any"),
        Column(
            "reasons",
            "VARCHAR[]",
            doc="why it counts: fallback_pattern, no_source_low_confidence, low_confidence "
            "(every rule that fired, in this order)",
        ),
        Column(
            "escalated_after",
            "BOOLEAN",
            doc="the conversation escalated at or after it",
        ),
        Column("low_rating", "BOOLEAN", doc="the conversation was rated 2 or less"),
        Column("abandoned", "BOOLEAN", doc="the conversation ended abandoned"),
        Column("severity", "INTEGER", doc="1 + escalated_after + low_rating + abandoned"),
    ),
    ("workspace_id", "conversation_id", "message_id"),
    "Assistant answers that did not answer (D-KNOWLEDGE-GAPS); the report groups them by topic.",
    indexed=False,
)

TOPIC_TABLES = (TOPICS, CONVERSATION_TOPICS, TOPIC_CURATIONS, MART_TOPICS, KNOWLEDGE_GAPS)
