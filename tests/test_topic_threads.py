"""Topic discovery and placement run with one BLAS and one OpenMP thread (D-TOPIC-THREADS),
whatever pools the process had: spinning pools of one thread per core made discovery
several times slower on a busy machine. Each public entry point is watched from inside
(its k-means, its features): the pools it found were wider, and it ran on one thread."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from threadpoolctl import threadpool_info, threadpool_limits

from convo_analytics.topics import _cluster, _discover, assign_topics, discover_topics
from convo_analytics.topics._discover import place_texts

TEXTS = [f"{verb} my {thing} please" for verb in ("cancel", "renew", "change", "pay")
         for thing in ("policy", "claim", "address", "card", "plan")] * 2  # fmt: skip
#: Pools wider than the limit, as a process on a machine of several cores starts with them.
WIDE = 4


def _pools() -> dict[str, int]:
    """The widest pool of each kind loaded now (blas, openmp)."""
    out: dict[str, int] = {}
    for pool in threadpool_info():
        out[pool["user_api"]] = max(out.get(pool["user_api"], 0), pool["num_threads"])
    return out


@pytest.fixture
def seen(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[dict[str, int]]]:
    """The pools as k-means and the features saw them, each time they ran."""
    import sklearn.cluster  # noqa: F401  (its OpenMP runtime loaded, so that it is widened too)

    seen: list[dict[str, int]] = []
    kmeans, features = _cluster._kmeans, _discover.features

    def watched_kmeans(*args: Any, **kwargs: Any) -> Any:
        seen.append(_pools())
        return kmeans(*args, **kwargs)

    def watched_features(*args: Any, **kwargs: Any) -> Any:
        seen.append(_pools())
        return features(*args, **kwargs)

    monkeypatch.setattr(_cluster, "_kmeans", watched_kmeans)
    monkeypatch.setattr(_discover, "features", watched_features)
    with threadpool_limits(limits=WIDE):
        assert set(_pools().values()) == {WIDE}, _pools()
        yield seen
        assert set(_pools().values()) == {WIDE}, "the process's own pools are given back"


def test_discovery_and_placement_run_on_one_thread(seen: list[dict[str, int]]) -> None:
    found = discover_topics(TEXTS)
    assert any("openmp" in pools for pools in seen), "k-means ran and was watched"
    discovered = len(seen)
    assign_topics(found, TEXTS[:5])
    place_texts(found.centroids, TEXTS[:5])
    assert len(seen) == discovered + 2, "placement's features were watched too"
    assert seen and all(set(pools.values()) == {1} for pools in seen), seen
