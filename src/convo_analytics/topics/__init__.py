"""Topic discovery over what end users say: which topics there are, and whose they are.

Offline and on a CPU: sentence embeddings from weights bundled in a wheel, a
consensus clustering that chooses the number of topics, class-based TF-IDF
names. :func:`discover_topics` finds topics in a set of texts;
:func:`assign_topics` places later texts in the topics found (nightly runs);
:func:`discover_file` runs discovery on any JSONL or CSV file (``convo topics discover``).
Decision D-TOPICS-DISCOVERY says why each step is what it is.
"""

from convo_analytics.topics._discover import Discovery, Topic, assign_topics, discover_topics
from convo_analytics.topics._files import InputRecords, discover_file, read_records

__all__ = [
    "Discovery",
    "InputRecords",
    "Topic",
    "assign_topics",
    "discover_file",
    "discover_topics",
    "read_records",
]
