"""Benchmark of topic discovery: quality on a labelled set, speed and memory at scale.

Quality: the DSTC11 Track 2 insurance development set (913 utterances, 22
intents; tests/data/intents/) through ``discover_topics``, which is not told
the number of intents, scored against the intents by NMI, ARI and accuracy
(Hungarian matching of topics to intents; "other" counts as one more topic).
Beside it, measured in the same run: TF-IDF + k-means given the true number of
intents (22), and the bundled embeddings + k-means with the k of best
silhouette (2-60), the plain method that discovery improves on.

Speed and memory, in a child process (its own peak RSS): discovery over
100,000 synthetic first messages, and ``assign_topics`` for 20,000. The
messages are DSTC11 utterances sampled with replacement and perturbed (a
greeting or a closing added, a word dropped or repeated, case changed), so
that few are exact duplicates.
"""

from __future__ import annotations

import json
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _common import BenchContext, Report, emit, memory_mib, python_child

THIS = Path(__file__).resolve()
ROOT = THIS.parents[2]
DSTC11 = ROOT / "tests" / "data" / "intents" / "dstc11-insurance-dev.jsonl"
TRUE_TOPICS = 22
AIM = {"NMI": 0.84, "ARI": 0.60, "accuracy": 0.72}
AIM_DISCOVER_S, AIM_ASSIGN_S, AIM_MIB = 60.0, 10.0, 2048.0
OPENERS = ["", "", "hi, ", "hello ", "hey there. ", "good morning, ", "Hi! "]
CLOSERS = ["", "", " thanks", " please", " thank you!", " asap", "?"]


def load_dstc11(limit: int | None = None) -> tuple[list[str], list[str]]:
    rows = [json.loads(line) for line in DSTC11.read_text(encoding="utf-8").splitlines()]
    if limit is not None:
        rows = random.Random(0).sample(rows, min(limit, len(rows)))
    return [r["utterance"] for r in rows], [r["intent"] for r in rows]


def synthetic_messages(count: int, seed: int) -> list[str]:
    """``count`` first messages: perturbed DSTC11 utterances (see the module doc)."""
    base, _ = load_dstc11()
    rng = random.Random(seed)
    out = []
    for _ in range(count):
        words = rng.choice(base).split()
        if len(words) > 3 and rng.random() < 0.3:
            del words[rng.randrange(len(words))]
        if rng.random() < 0.1:
            i = rng.randrange(len(words))
            words.insert(i, words[i])
        text = rng.choice(OPENERS) + " ".join(words) + rng.choice(CLOSERS)
        out.append(text.lower() if rng.random() < 0.3 else text)
    return out


def scores(truth: list[str], found: list[int]) -> dict[str, float]:
    """NMI, ARI and accuracy after the best one-to-one matching of topics to intents."""
    import numpy as np
    from scipy.optimize import linear_sum_assignment
    from sklearn.metrics import adjusted_rand_score, normalized_mutual_info_score

    y = np.unique(truth, return_inverse=True)[1]
    p = np.unique(found, return_inverse=True)[1]
    table = np.zeros((p.max() + 1, y.max() + 1))
    np.add.at(table, (p, y), 1)
    rows, cols = linear_sum_assignment(-table)
    return {
        "NMI": float(normalized_mutual_info_score(y, p)),
        "ARI": float(adjusted_rand_score(y, p)),
        "accuracy": float(table[rows, cols].sum() / len(y)),
    }


def tfidf_kmeans(texts: list[str], k: int) -> list[int]:
    from sklearn.cluster import KMeans
    from sklearn.feature_extraction.text import TfidfVectorizer

    x = TfidfVectorizer(stop_words="english").fit_transform(texts)
    return [int(v) for v in KMeans(n_clusters=k, n_init=4, random_state=0).fit_predict(x)]


def silhouette_kmeans(texts: list[str], ks: range) -> list[int]:
    from sklearn.cluster import KMeans
    from sklearn.metrics import silhouette_score

    from convo_analytics.topics._features import features

    x = features(texts)
    best: tuple[float, list[int]] = (-2.0, [])
    for k in ks:
        labels = KMeans(n_clusters=k, n_init=4, random_state=0).fit_predict(x)
        score = float(silhouette_score(x, labels, metric="cosine"))
        if score > best[0]:
            best = (score, [int(v) for v in labels])
    return best[1]


def child_scale(discover_count: str, assign_count: str) -> None:
    from convo_analytics.topics import assign_topics, discover_topics
    from convo_analytics.topics._embed import load_model

    messages = synthetic_messages(int(discover_count), seed=1)
    later = synthetic_messages(int(assign_count), seed=2)
    before = memory_mib()
    started = time.perf_counter()
    load_model()
    loaded = time.perf_counter() - started
    started = time.perf_counter()
    found = discover_topics(messages, seed=0)
    discover_s = time.perf_counter() - started
    started = time.perf_counter()
    assigned = assign_topics(found, later)
    assign_s = time.perf_counter() - started
    emit({"scale": True, "load_s": loaded, "discover_s": discover_s, "assign_s": assign_s,
          "topics": len(found.topics), "other_share": found.assignments.count(0) / len(messages),
          "assigned_other_share": assigned.count(0) / len(later),
          "before": before, "memory": memory_mib()})  # fmt: skip


def _sandbox_warehouse(db: Path, conversations: int, seed: int, prefix: str) -> dict[str, str]:
    """Conversations and messages of a sandbox history (workspace ws_acme) written into a
    warehouse's tables (only the columns placing topics reads); their latent intents."""
    import duckdb

    from convo_analytics.sandbox._generate import HistorySpec, generate_history
    from convo_analytics.sandbox._model import EventFactory
    from convo_analytics.warehouse import open_warehouse

    spec = HistorySpec("ws_acme", seed=seed, conversations=conversations, days=30,
                       until_ms=1_795_000_000_000)  # fmt: skip
    history = generate_history(spec, EventFactory(app_base="https://app.example"))
    conv_rows, message_rows, truth = [], [], {}
    for c in history:
        cid = prefix + c.id
        truth[cid] = c.latent_intent or ""
        conv_rows.append(("ws_acme", cid, c.locale))
        message_rows += [("ws_acme", cid, f"{cid}-{i}", i, m.role, m.text)
                         for i, m in enumerate(c.messages)]  # fmt: skip
    open_warehouse(db).close()
    con = duckdb.connect(str(db))
    # as Arrow tables, one INSERT each: executemany ran a statement per row (seconds for a
    # few thousand messages, minutes at the full sizes)
    _insert(con, "conversations", ("workspace_id", "id", "locale"), conv_rows)
    _insert(con, "messages", ("workspace_id", "conversation_id", "id", "position", "role",
                              "text"), message_rows)  # fmt: skip
    con.close()
    return truth


def _insert(con: Any, table: str, columns: tuple[str, ...], rows: list[tuple[Any, ...]]) -> None:
    """The rows (tuples of ``columns``) into ``table``, in one statement."""
    import pyarrow as pa

    data = pa.table(dict(zip(columns, zip(*rows, strict=True), strict=True)))
    con.register("_rows", data)
    try:
        con.execute(f"INSERT INTO {table} ({', '.join(columns)}) SELECT * FROM _rows")
    finally:
        con.unregister("_rows")


def child_sandbox(folder: str, conversations: str, new: str) -> None:
    """Topics through the warehouse path over a sandbox history: quality against its
    latent intents per locale; then the nightly placement of ``new`` more conversations."""
    import duckdb

    from convo_analytics.topics import TopicConfig, place_topics

    db = Path(folder) / "sandbox.duckdb"
    truth = _sandbox_warehouse(db, int(conversations), 7, "")
    con = duckdb.connect(str(db))
    started = time.perf_counter()
    with con.cursor() as cur:
        cur.execute("BEGIN")
        place_topics(cur, TopicConfig(min_conversations=2), "bench", None)
        cur.execute("COMMIT")
    discover_s = time.perf_counter() - started
    rows = con.execute(
        "SELECT t.conversation_id, t.topic_id, t.language FROM conversation_topics t "
        "WHERE t.topic_id IS NOT NULL"
    ).fetchall()
    topics = con.execute("SELECT count(*) FROM topics WHERE NOT retired").fetchall()[0][0]
    con.close()
    quality: dict[str, Any] = {"all": scores([truth[r[0]] for r in rows], [r[1] for r in rows])}
    quality["all"]["conversations"] = len(rows)
    for lang in sorted({r[2] for r in rows}):
        mine = [r for r in rows if r[2] == lang]
        if len(mine) >= 30:
            quality[lang or "none"] = {**scores([truth[r[0]] for r in mine],
                                                [r[1] for r in mine]),
                                       "conversations": len(mine)}  # fmt: skip
    later = Path(folder) / "later.duckdb"
    _sandbox_warehouse(later, int(new), 8, "n-")
    con = duckdb.connect(str(db))
    con.execute(f"ATTACH '{later}' AS later (READ_ONLY)")
    con.execute("INSERT INTO conversations (workspace_id, id, locale) "
                "SELECT workspace_id, id, locale FROM later.conversations")  # fmt: skip
    con.execute("INSERT INTO messages (workspace_id, conversation_id, id, position, role, text) "
                "SELECT workspace_id, conversation_id, id, position, role, text "
                "FROM later.messages")  # fmt: skip
    con.execute("CREATE TEMP TABLE _new AS SELECT workspace_id, id FROM later.conversations")
    started = time.perf_counter()
    con.execute("BEGIN")
    step = place_topics(con, TopicConfig(min_conversations=2), "bench-2", "_new")
    con.execute("COMMIT")
    assign_s = time.perf_counter() - started
    emit({"sandbox": True, "quality": quality, "topics": topics, "discover_s": discover_s,
          "assign_s": assign_s, "placed": step.placed, "memory": memory_mib()})  # fmt: skip


def _add_scores(report: Report, name: str, got: dict[str, float], aim: bool = False) -> None:
    for metric, value in got.items():
        if aim:
            report.add(f"{name}: {metric}", round(value, 3), "", f">= {AIM[metric]:g}",
                       value >= AIM[metric])  # fmt: skip
        else:
            report.add(f"{name}: {metric}", round(value, 3))


def bench_topics(ctx: BenchContext, report: Report) -> None:
    """Topic discovery on DSTC11 (quality, two baselines) and on 100,000 messages."""
    from convo_analytics.topics import discover_topics

    limit = ctx.size(None, None, 200)
    # smoke: a few hundred, the same path (discovery's cost grows faster than the count)
    discover_count = ctx.size(100_000, 30_000, 300)
    assign_count = ctx.size(20_000, 20_000, 300)
    texts, intents = load_dstc11(limit)
    report.sizes.update({"labelled utterances": len(texts), "intents": len(set(intents))})
    report.sizes.update({"discovery texts": discover_count, "assigned texts": assign_count})
    started = time.perf_counter()
    found = discover_topics(texts, seed=0)
    seconds = time.perf_counter() - started
    ids = list(found.assignments)
    _add_scores(report, "discover_topics", scores(intents, ids), aim=not ctx.smoke)
    report.add("discover_topics: topics chosen (incl. other)", len(found.topics), "",
               f"true {len(set(intents))}")  # fmt: skip
    report.add("discover_topics: texts in other", ids.count(0))
    report.add("discover_topics: seconds", round(seconds, 2), "s")
    k = min(TRUE_TOPICS, len(set(intents)))
    _add_scores(
        report, f"baseline TF-IDF + k-means (k={k}, told)", scores(intents, tfidf_kmeans(texts, k))
    )
    chosen = silhouette_kmeans(texts, ctx.size(range(5, 61), range(5, 61), range(5, 16, 5)))
    _add_scores(report, "embeddings + silhouette k-means", scores(intents, chosen))
    report.add("embeddings + silhouette k-means: k chosen", len(set(chosen)))
    with python_child(THIS, ["scale", str(discover_count), str(assign_count)], cwd=ROOT) as child:
        out: dict[str, Any] = child.json_line("scale", timeout=1200)
    report.add("model load (bundled weights)", round(out["load_s"], 2), "s")
    report.add(f"discover_topics, {discover_count:,} messages", round(out["discover_s"], 1), "s",
               f"< {AIM_DISCOVER_S:g}", out["discover_s"] < AIM_DISCOVER_S)  # fmt: skip
    report.add("... topics found (incl. other)", out["topics"])
    report.add("... share in other", round(out["other_share"], 4))
    report.add(f"assign_topics, {assign_count:,} messages", round(out["assign_s"], 2), "s",
               f"< {AIM_ASSIGN_S:g}", out["assign_s"] < AIM_ASSIGN_S)  # fmt: skip
    peak = out["memory"]["peak_rss_mib"]
    report.add("peak memory (child)", round(peak), "MiB", f"< {AIM_MIB:g}", peak < AIM_MIB)
    report.note("the messages at scale: DSTC11 utterances sampled and perturbed (greetings, "
                "closings, a word dropped or repeated, lower case), not the sandbox's")  # fmt: skip
    sandbox_count = ctx.size(2_000, 2_000, 300)
    new_count = ctx.size(20_000, 20_000, 500)
    report.sizes.update({"sandbox conversations": sandbox_count,
                         "sandbox conversations placed nightly": new_count})  # fmt: skip
    with (
        tempfile.TemporaryDirectory() as folder,
        python_child(
            THIS, ["sandbox", folder, str(sandbox_count), str(new_count)], cwd=ROOT
        ) as child,
    ):
        got: dict[str, Any] = child.json_line("sandbox", timeout=1800)
    for name, figures in got["quality"].items():
        n = figures.pop("conversations")
        _add_scores(report, f"sandbox latent intents, {name} ({n})", figures)
    report.add("sandbox: topics discovered (warehouse path, per language group)", got["topics"])
    report.add("sandbox: discovery through place_topics", round(got["discover_s"], 1), "s")
    report.add(f"place_topics, {got['placed']:,} new conversations (nightly)",
               round(got["assign_s"], 2), "s", f"< {AIM_ASSIGN_S:g}",
               got["assign_s"] < AIM_ASSIGN_S)  # fmt: skip


BENCHES = [("topics", bench_topics)]


if __name__ == "__main__":
    role, *rest = sys.argv[1:] or ["help"]
    if role == "scale":
        child_scale(*rest)
    elif role == "sandbox":
        child_sandbox(*rest)
    else:
        raise SystemExit("usage: bench_topics.py scale DISCOVER_COUNT ASSIGN_COUNT")
