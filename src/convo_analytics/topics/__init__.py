"""Topic discovery over what end users say: which topics there are, and whose they are.

Offline and on a CPU: sentence embeddings from weights bundled in a wheel, a
consensus clustering that chooses the number of topics, class-based TF-IDF
names. :func:`discover_topics` finds topics in a set of texts;
:func:`assign_topics` places later texts in the topics found (nightly runs);
:func:`discover_file` runs discovery on any JSONL or CSV file (``convo topics discover``);
:func:`place_topics` keeps each workspace's topics in the warehouse (the transform's step),
and curations (:func:`append_curation`) rename, merge, split and pin them.
Decision D-TOPICS-DISCOVERY says why each step is what it is.
"""

from convo_analytics.topics._catalog import curate, resolve_workspace, topic_catalog
from convo_analytics.topics._curations import (
    ACTIONS,
    AppliedTopic,
    Curation,
    append_curation,
    apply_curations,
    read_curations,
)
from convo_analytics.topics._discover import Discovery, Topic, assign_topics, discover_topics
from convo_analytics.topics._files import InputRecords, discover_file, read_records
from convo_analytics.topics._place import TopicConfig, TopicStep, place_topics

__all__ = [
    "ACTIONS",
    "AppliedTopic",
    "Curation",
    "Discovery",
    "InputRecords",
    "Topic",
    "TopicConfig",
    "TopicStep",
    "append_curation",
    "apply_curations",
    "assign_topics",
    "curate",
    "discover_file",
    "discover_topics",
    "place_topics",
    "read_curations",
    "read_records",
    "resolve_workspace",
    "topic_catalog",
]
