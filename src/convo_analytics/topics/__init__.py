"""Topic discovery over what end users say: which topics there are, and whose they are.

Offline and on a CPU: sentence embeddings from weights bundled in a wheel, a
consensus clustering that chooses the number of topics, class-based TF-IDF
names. :func:`discover_topics` finds topics in a set of texts;
:func:`assign_topics` places later texts in the topics found (nightly runs).
Decision D-TOPICS-DISCOVERY says why each step is what it is.
"""

from convo_analytics.topics._discover import Discovery, Topic, assign_topics, discover_topics

__all__ = ["Discovery", "Topic", "assign_topics", "discover_topics"]
