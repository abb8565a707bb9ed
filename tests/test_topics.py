"""Topic discovery: quality on a labelled set, offline, deterministic, and at the edges.

The DSTC11 insurance set (tests/data/intents/) is only measured against here:
its intents never reach the product. The floors sit a little under what
``make bench BENCH_ARGS="--only topics"`` measured for seed 0 (NMI 0.832, ARI
0.581, accuracy 0.713), so that a change that makes discovery worse fails.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
from scipy.optimize import linear_sum_assignment
from sklearn.metrics import adjusted_rand_score, normalized_mutual_info_score

from convo_analytics.topics import Discovery, assign_topics, discover_topics

ROOT = Path(__file__).resolve().parent.parent
DSTC11 = ROOT / "tests" / "data" / "intents" / "dstc11-insurance-dev.jsonl"


def _dstc11() -> tuple[list[str], list[str]]:
    rows = [json.loads(line) for line in DSTC11.read_text(encoding="utf-8").splitlines()]
    return [r["utterance"] for r in rows], [r["intent"] for r in rows]


def _accuracy(truth: list[str], found: tuple[int, ...]) -> float:
    y = np.unique(truth, return_inverse=True)[1]
    p = np.unique(found, return_inverse=True)[1]
    table = np.zeros((p.max() + 1, y.max() + 1))
    np.add.at(table, (p, y), 1)
    rows, cols = linear_sum_assignment(-table)
    return float(table[rows, cols].sum() / len(y))


def _well_formed(found: Discovery, count: int) -> None:
    assert len(found.assignments) == count
    ids = [t.id for t in found.topics]
    assert set(found.assignments) <= set(ids)
    assert len(set(ids)) == len(ids)
    assert found.centroids.shape[0] == len(found.topics)
    assert sum(t.size for t in found.topics) == count
    for topic in found.topics:
        assert topic.label.strip() and topic.size == found.assignments.count(topic.id)
        assert len(topic.examples) <= 3 and len(set(topic.examples)) == len(topic.examples)
    real = [t for t in found.topics if t.id != 0]
    assert [t.id for t in real] == list(range(1, len(real) + 1))
    assert [t.size for t in real] == sorted((t.size for t in real), reverse=True)
    if 0 in ids:
        assert found.topics[-1].id == 0 and found.topics[-1].label == "other"


def test_discovery_finds_the_intents_of_the_dstc11_set_without_being_told_how_many() -> None:
    texts, intents = _dstc11()
    found = discover_topics(texts, seed=0)
    _well_formed(found, len(texts))
    assert normalized_mutual_info_score(intents, found.assignments) >= 0.80
    assert adjusted_rand_score(intents, found.assignments) >= 0.52
    assert _accuracy(intents, found.assignments) >= 0.66
    assert 12 <= len(found.topics) <= 40  # 22 intents
    assert found.assignments.count(0) < len(texts) * 0.05
    for topic in found.topics[:-1]:
        assert topic.terms and topic.label == ", ".join(topic.terms[:3])
        assert len(topic.examples) == 3
    # The nightly assignment places the discovered texts where discovery did.
    assert assign_topics(found, texts) == found.assignments
    assert assign_topics(found, ["", "   ", "I want to file a claim for my car"])[:2] == (0, 0)


def test_discovery_is_deterministic_for_a_seed() -> None:
    texts, _ = _dstc11()
    first = discover_topics(texts[::3], seed=5)
    again = discover_topics(texts[::3], seed=5)
    assert first.assignments == again.assignments and first.topics == again.topics
    assert np.array_equal(first.centroids, again.centroids)


@pytest.mark.parametrize(
    "texts",
    [[], ["I want a quote for my car"], ["I want a quote", "How do I file a claim?"],
     ["", "  \n"], ["", "pay my bill", "   "], ["ok"] * 25],
)  # fmt: skip
def test_tiny_and_blank_inputs_give_one_topic_or_other(texts: list[str]) -> None:
    found = discover_topics(texts)
    _well_formed(found, len(texts))
    said = [i for i, t in enumerate(texts) if t.strip()]
    assert all(found.assignments[i] == 0 for i, t in enumerate(texts) if not t.strip())
    assert len([t for t in found.topics if t.id != 0]) <= max(1, len(said))
    if said and len(said) <= 2:
        assert {found.assignments[i] for i in said} == {1}
    assert assign_topics(found, texts) == found.assignments


def test_discovery_works_offline_and_leaves_logging_alone(tmp_path: Path) -> None:
    """A fresh process (no model cached) with every socket refused and HF_HUB_OFFLINE
    unset: the bundled weights are enough. wordllama's import-time basicConfig is
    neutralized, so the root logger is as the host left it."""
    script = textwrap.dedent(
        """
        import json, logging, socket, sys

        def refuse(*args, **kwargs):
            raise OSError("network access attempted")

        socket.socket.connect = refuse
        socket.socket.connect_ex = refuse
        socket.create_connection = refuse
        socket.getaddrinfo = refuse
        from convo_analytics.topics import discover_topics

        texts = [line.strip() for line in sys.stdin if line.strip()]
        found = discover_topics(texts)
        root = logging.getLogger()
        print(json.dumps({"topics": len(found.topics), "handlers": len(root.handlers),
                          "level": root.level}))
        """
    )
    texts, _ = _dstc11()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "CONVO_"))}
    env["HOME"] = str(tmp_path)  # no cache of a model downloaded earlier either
    done = subprocess.run(
        [sys.executable, "-c", script], input="\n".join(texts[::10]), env=env, cwd=tmp_path,
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["topics"] >= 2
    assert out == {"topics": out["topics"], "handlers": 0, "level": 30}
    assert "network access attempted" not in done.stderr
