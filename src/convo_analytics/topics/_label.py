"""Names for topics: class-based TF-IDF terms and representative texts.

A topic's words are distinctive when they are frequent in its texts and rare
in the others' (BERTopic's c-TF-IDF: all texts of a topic as one document,
term frequency scaled by log(1 + average words per topic / the word's
frequency over all topics)). Stop words are left out and bigrams kept, so a
label reads "claim, file claim, accident" rather than "i, to, my". The three
texts closest to the centroid show what the topic sounds like.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from numpy.typing import NDArray

#: Distinctive terms kept per topic; the label is the first LABEL_TERMS.
TERMS = 10
LABEL_TERMS = 3
EXAMPLES = 3
#: Vocabulary cap, so that 100,000 texts with bigrams stay within memory.
MAX_VOCABULARY = 50_000


def topic_terms(texts: Sequence[str], labels: NDArray[np.int64], topics: int) -> list[list[str]]:
    """The best terms of each topic 0..topics-1 (rows with label < 0 are ignored)."""
    from sklearn.feature_extraction.text import CountVectorizer

    keep = labels >= 0
    docs = [t for t, k in zip(texts, keep, strict=True) if k]
    if topics == 0 or not docs:
        return [[] for _ in range(topics)]
    vectorizer = CountVectorizer(
        stop_words="english", ngram_range=(1, 2), max_features=MAX_VOCABULARY,
        token_pattern=r"(?u)\b[^\W\d_][\w']+\b",
    )  # fmt: skip
    try:
        counts = vectorizer.fit_transform(docs)
    except ValueError:  # nothing but stop words
        return [[] for _ in range(topics)]
    vocabulary = vectorizer.get_feature_names_out()
    members = labels[keep]
    per_topic = np.zeros((topics, counts.shape[1]), dtype=np.float64)
    for topic in range(topics):
        rows = np.flatnonzero(members == topic)
        if len(rows):
            per_topic[topic] = np.asarray(counts[rows].sum(axis=0)).ravel()
    words = per_topic.sum(axis=1, keepdims=True)
    tf = per_topic / np.maximum(words, 1.0)
    frequency = per_topic.sum(axis=0)
    idf = np.log1p(words.mean() / np.maximum(frequency, 1.0))
    scores = tf * idf
    out = []
    for topic in range(topics):
        order = np.argsort(-scores[topic], kind="stable")
        chosen: list[str] = []
        for j in order:
            if scores[topic, j] <= 0 or len(chosen) >= TERMS:
                break
            chosen.append(str(vocabulary[j]))
        out.append(_drop_repeats(chosen))
    return out


def _drop_repeats(terms: list[str]) -> list[str]:
    """Terms without those whose words a better term already says ("car" after
    "car insurance", or "car insurance" after "car" and "insurance")."""
    seen: set[str] = set()
    kept: list[str] = []
    for term in terms:
        words = set(term.split())
        if words <= seen or any(term in k.split() for k in kept):
            continue
        kept.append(term)
        seen |= words
    return kept


def label_for(terms: Sequence[str], examples: Sequence[str], topic_id: int) -> str:
    """The top terms joined; a topic without distinctive words is named by a text."""
    if terms:
        return ", ".join(terms[:LABEL_TERMS])
    if examples and examples[0].strip():
        text = " ".join(examples[0].split())
        return text if len(text) <= 40 else text[:39] + "…"
    return f"topic {topic_id}"


def representatives(
    texts: Sequence[str], rows: NDArray[np.int64], similarity: NDArray[np.float32]
) -> tuple[str, ...]:
    """Up to EXAMPLES distinct texts among ``rows``, the most central first."""
    order = rows[np.argsort(-similarity[rows], kind="stable")]
    picked: list[str] = []
    seen: set[str] = set()
    for i in order:
        key = " ".join(texts[i].casefold().split())
        if key in seen:
            continue
        seen.add(key)
        picked.append(texts[i])
        if len(picked) == EXAMPLES:
            break
    return tuple(picked)
