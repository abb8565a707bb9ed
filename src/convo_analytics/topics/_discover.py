"""Topic discovery: texts to topics, and later texts to the same topics.

The steps are separate and swappable, BERTopic style: features
(``_features``: sentence embeddings), clustering (``_cluster``: a consensus of
k-means runs whose number of topics comes from the data), and names
(``_label``: class-based TF-IDF terms and central texts). Texts that fit no
topic, blank ones included, go to the "other" topic (id 0) instead of being
forced into the nearest: a text is "other" when its cosine similarity to every
topic's centroid is below ``OTHER_SIMILARITY``, or when the cluster it came
from is too small to be a topic. The same nearest-centroid rule places the
discovered texts and, in :func:`assign_topics`, tomorrow's texts, so that
assigning the discovered texts again gives their discovered topics.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from convo_analytics.topics._cluster import CORE_SIZE, consensus_labels
from convo_analytics.topics._features import features
from convo_analytics.topics._label import label_for, representatives, topic_terms
from convo_analytics.topics._threads import limited_threads

if TYPE_CHECKING:
    from numpy.typing import NDArray

OTHER_ID = 0
OTHER_LABEL = "other"
#: Below this cosine similarity to every centroid a text is "other". On DSTC11 about 1%
#: of the texts are this far from their own topic's centroid.
OTHER_SIMILARITY = 0.35
#: Fewer texts than this are not clustered: they make one topic.
MIN_CLUSTERED = 10
#: A consensus cluster of fewer texts than this share of the clustered ones (at least
#: 2) is not a topic; its texts go to their nearest topic or to "other".
MIN_TOPIC_SHARE = 0.002


@dataclass(frozen=True)
class Topic:
    """One discovered topic: what it is called, how big it is, and what it sounds like."""

    id: int  # 1..n; 0 is the "other" topic
    label: str  # non-empty; "other" for id 0
    size: int
    examples: tuple[str, ...]  # up to 3 representative texts
    terms: tuple[str, ...]  # distinctive terms, best first


@dataclass(frozen=True)
class Discovery:
    """The topics of a set of texts, each text's topic, and the centroids that let
    :func:`assign_topics` place new texts in the same topics."""

    assignments: tuple[int, ...]  # topic id per input text, same order
    topics: tuple[Topic, ...]  # sorted by size descending, "other" last if present
    centroids: NDArray[np.float32]  # one row per topic in `topics` order (feature space)


def _unit(rows: NDArray[np.float32]) -> NDArray[np.float32]:
    norms = np.linalg.norm(rows, axis=1, keepdims=True)
    out = np.zeros_like(rows)
    np.divide(rows, norms, out=out, where=norms > 0)
    return out


def _centroids(
    x: NDArray[np.float32], labels: NDArray[np.int64], count: int
) -> NDArray[np.float32]:
    out = np.zeros((count, x.shape[1]), dtype=np.float32)
    np.add.at(out, labels, x)
    return _unit(out)


def _nearest(
    x: NDArray[np.float32], centroids: NDArray[np.float32]
) -> tuple[NDArray[np.int64], NDArray[np.float32]]:
    """Each row's nearest centroid (-1: "other") and its similarity to it."""
    if len(centroids) == 0 or len(x) == 0:
        return np.full(len(x), -1, dtype=np.int64), np.zeros(len(x), dtype=np.float32)
    nearest = np.empty(len(x), dtype=np.int64)
    best = np.empty(len(x), dtype=np.float32)
    for start in range(0, len(x), 8192):  # bounded memory for many texts and topics
        sims = x[start : start + 8192] @ centroids.T
        nearest[start : start + len(sims)] = sims.argmax(axis=1)
        best[start : start + len(sims)] = sims.max(axis=1)
    nearest[best < OTHER_SIMILARITY] = -1
    return nearest, best


def _clustered(x: NDArray[np.float32], seed: int, max_sample: int) -> NDArray[np.float32]:
    """Centroids of the topics found in ``x`` (unit rows, in no particular order)."""
    rng = np.random.default_rng(seed)
    sample = np.arange(len(x))
    if len(sample) > max_sample:
        sample = np.sort(rng.choice(sample, size=max_sample, replace=False))
    core = sample
    if len(core) > CORE_SIZE:
        core = np.sort(rng.choice(core, size=CORE_SIZE, replace=False))
    usable = core[np.linalg.norm(x[core], axis=1) > 0]
    if len(usable) < MIN_CLUSTERED:
        labels = np.zeros(len(usable), dtype=np.int64)
    else:
        labels = consensus_labels(x[usable], seed)
    sizes = np.bincount(labels) if len(labels) else np.zeros(0, dtype=np.int64)
    floor = 1 if len(usable) < MIN_CLUSTERED else max(2, math.ceil(MIN_TOPIC_SHARE * len(usable)))
    kept = np.flatnonzero(sizes >= floor)
    keep = np.isin(labels, kept)
    remap = np.full(len(sizes), -1, dtype=np.int64)
    remap[kept] = np.arange(len(kept))
    centroids = _centroids(x[usable[keep]], remap[labels[keep]], len(kept))
    if len(sample) > len(core) and len(centroids):
        # One k-means step over the whole sample: the core only anchored the topics.
        nearest, _ = _nearest(x[sample], centroids)
        placed = nearest >= 0
        moved = _centroids(x[sample][placed], nearest[placed], len(centroids))
        empty = np.linalg.norm(moved, axis=1) == 0
        moved[empty] = centroids[empty]
        centroids = moved
    return centroids


@limited_threads(openmp=True)
def discover_topics(texts: Sequence[str], *, seed: int = 0, max_sample: int = 20000) -> Discovery:
    """Find the topics of ``texts`` without being told how many there are.

    Deterministic for a given ``seed``. At most ``max_sample`` texts shape the
    centroids (a random sample of them, of which at most ``_cluster.CORE_SIZE``
    are clustered); every text is then placed by nearest centroid. Blank texts,
    and texts far from every topic, are in the "other" topic (id 0).
    """
    texts = list(texts)
    valid = np.array([i for i, t in enumerate(texts) if t.strip()], dtype=np.int64)
    x = features([texts[i] for i in valid])
    centroids = _clustered(x, seed, max(1, max_sample)) if len(valid) else x[:0]
    nearest, similarity = _nearest(x, centroids)
    sizes = np.bincount(nearest[nearest >= 0], minlength=len(centroids))
    order = [int(c) for c in np.argsort(-sizes, kind="stable") if sizes[c] > 0]
    topic_of = np.full(len(centroids), OTHER_ID, dtype=np.int64)
    topic_of[order] = np.arange(1, len(order) + 1)
    ranked = np.full(len(valid), -1, dtype=np.int64)  # 0..len(order)-1, -1 for other
    ranked[nearest >= 0] = topic_of[nearest[nearest >= 0]] - 1
    valid_texts = [texts[i] for i in valid]
    terms = topic_terms(valid_texts, ranked, len(order))
    topics = []
    for rank in range(len(order)):
        rows = np.flatnonzero(ranked == rank)
        examples = representatives(valid_texts, rows, similarity)
        topics.append(
            Topic(id=rank + 1, label=label_for(terms[rank], examples, rank + 1),
                  size=len(rows), examples=examples, terms=tuple(terms[rank]))
        )  # fmt: skip
    assignments = np.full(len(texts), OTHER_ID, dtype=np.int64)
    assignments[valid] = ranked + 1  # other (-1) becomes 0
    rows_out = [centroids[c] for c in order]
    others = np.flatnonzero(assignments == OTHER_ID)
    if len(others):
        said = np.array([i for i in others if texts[i].strip()], dtype=np.int64)
        examples = representatives(texts, said, np.zeros(len(texts), dtype=np.float32))
        topics.append(Topic(OTHER_ID, OTHER_LABEL, len(others), examples, ()))
        rows_out.append(np.zeros(x.shape[1], dtype=np.float32))
    matrix = np.array(rows_out, dtype=np.float32).reshape(len(rows_out), x.shape[1])
    return Discovery(tuple(int(a) for a in assignments), tuple(topics), matrix)


@limited_threads(openmp=False)
def assign_topics(discovery: Discovery, texts: Sequence[str]) -> tuple[int, ...]:
    """The topic id of each text by nearest centroid of ``discovery``; "other" (0) for
    blank texts and texts far from every topic (the rule discovery placed its own by)."""
    texts = list(texts)
    ids = np.array([t.id for t in discovery.topics], dtype=np.int64)
    real = ids != OTHER_ID
    centroids = np.asarray(discovery.centroids, dtype=np.float32)[real]
    out = np.full(len(texts), OTHER_ID, dtype=np.int64)
    valid = np.array([i for i, t in enumerate(texts) if t.strip()], dtype=np.int64)
    if len(valid) and len(centroids):
        nearest, _ = _nearest(features([texts[i] for i in valid]), centroids)
        placed = nearest >= 0
        out[valid[placed]] = ids[real][nearest[placed]]
    return tuple(int(a) for a in out)


@limited_threads(openmp=False)
def place_texts(
    centroids: NDArray[np.float32], texts: Sequence[str]
) -> tuple[NDArray[np.int64], NDArray[np.float32]]:
    """Each text's nearest row of ``centroids`` (-1: blank, or far from every row: "other")
    and its cosine similarity to it: the rule :func:`assign_topics` places texts by, for
    centroids kept elsewhere (the warehouse's ``topics`` table)."""
    texts = list(texts)
    rows = np.full(len(texts), -1, dtype=np.int64)
    sims = np.zeros(len(texts), dtype=np.float32)
    valid = np.array([i for i, t in enumerate(texts) if t and t.strip()], dtype=np.int64)
    if len(valid) and len(centroids):
        nearest, best = _nearest(features([texts[i] for i in valid]), centroids)
        rows[valid], sims[valid] = nearest, best
    return rows, sims
