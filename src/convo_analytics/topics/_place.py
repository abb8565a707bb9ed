"""Topics in the warehouse: each workspace's topics discovered once, then kept stable.

The transform calls :func:`place_topics` with the conversations that changed
(or all of them, when it rebuilds). A conversation is placed by its first
user message: a workspace that has topics places its new conversations in the
nearest one (cost follows the new conversations); a workspace without topics
gets them discovered as soon as it has ``min_conversations`` first messages;
``rediscover`` clusters a workspace again and maps the new topics to the old
ones by overlap, so ids, and the curations and saved views that name them,
survive (decision D-TOPICS-WAREHOUSE). Everything is per workspace: the texts
clustered, the centroids assigned against and the labels are one workspace's.

Languages: a workspace's conversations are discovered per language (the
locale's language) where a language has ``MIN_LANGUAGE_GROUP`` conversations,
the rest together as ``mixed``; a new conversation is placed among its
language's topics (else the mixed ones, else all).
"""

from __future__ import annotations

import logging
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import polars as pl

from convo_analytics.topics._curations import (
    Curation,
    apply_curations,
    read_curations,
    split_regex,
)
from convo_analytics.topics._discover import OTHER_ID, OTHER_LABEL, discover_topics, place_texts
from convo_analytics.warehouse._retention_tables import texts_removed_sql
from convo_analytics.warehouse._topic_tables import (
    CONVERSATION_TOPICS,
    MART_TOPICS,
    TOPIC_CURATIONS,
    TOPICS,
)

log = logging.getLogger(__name__)

__all__ = ["MIN_LANGUAGE_GROUP", "TopicConfig", "TopicStep", "place_topics"]

#: A language with fewer of a workspace's conversations is discovered with the others
#: ("mixed"): too few texts make topics of noise.
MIN_LANGUAGE_GROUP = 300
MIXED = "mixed"
#: A first message is placed by (and kept as) its first this many characters: the topic is
#: in the opening, and a pasted log of a megabyte must not cost what a million texts do.
MAX_TEXT = 2000
_TEXTS = "_topic_texts"


@dataclass(frozen=True, slots=True)
class TopicConfig:
    """How the transform places conversations in topics (``[topics]`` settings)."""

    enabled: bool = True
    #: A workspace gets topics once it has this many first messages.
    min_conversations: int = 500
    #: The app-state store of curations (None: no curations).
    curations_path: Path | None = None
    #: What a conversation is placed by: its first user message, or all of them ("all").
    messages: str = "first"
    #: Workspaces to cluster again (``convo topics rediscover``); "*" for every one.
    rediscover: tuple[str, ...] = ()
    seed: int = 0


@dataclass(slots=True)
class TopicStep:
    """What one transform did to the topics (in ``convo transform --json``)."""

    placed: int = 0
    discovered: dict[str, dict[str, int]] = field(default_factory=dict)

    def as_json(self) -> dict[str, Any]:
        return {"placed": self.placed, "discovered": self.discovered}


def _frame(
    con: duckdb.DuckDBPyConnection, sql: str, params: list[Any] | None = None
) -> pl.DataFrame:
    frame = pl.from_arrow(con.sql(sql, params=params).to_arrow_table())
    assert isinstance(frame, pl.DataFrame)
    return frame


def place_topics(
    con: duckdb.DuckDBPyConnection,
    config: TopicConfig,
    transform_run_id: str,
    candidates: str | None,
) -> TopicStep:
    """Place the ``candidates`` (a table of ``workspace_id, id``; None: every conversation)
    in topics, discovering or rediscovering where due; then apply the curations and write
    ``mart_topics``. Runs inside the caller's transaction."""
    step = TopicStep()
    if not config.enabled:
        return step
    _read_texts(con, candidates, every_message=config.messages == "all")
    try:
        placed = _store_texts(con, transform_run_id)
        curations = (
            read_curations(config.curations_path) if config.curations_path is not None else []
        )
        by_ws: dict[str, list[Curation]] = {}
        for c in curations:
            by_ws.setdefault(c.workspace_id, []).append(c)
        with_topics = {
            r[0] for r in con.execute(f"SELECT DISTINCT workspace_id FROM {TOPICS.name}").fetchall()
        }
        counts = dict(
            con.execute(
                f"""SELECT workspace_id, count(*) FROM {CONVERSATION_TOPICS.name}
                    WHERE trim(coalesce(text, '')) <> '' GROUP BY ALL"""
            ).fetchall()
        )
        wanted = set(counts) if "*" in config.rediscover else set(config.rediscover)
        due = {
            ws
            for ws, n in counts.items()
            if ws in wanted or (ws not in with_topics and n >= config.min_conversations)
        }
        for ws in sorted(due):
            step.discovered[ws] = _discover(con, ws, config, transform_run_id, by_ws.get(ws, []))
        for ws in sorted(set(placed) & with_topics - due):
            _assign(con, ws, transform_run_id)
        step.placed = sum(placed.values())
        for ws in sorted(set(counts) | with_topics):
            _apply_splits(con, ws, by_ws.get(ws, []), transform_run_id)
        write_mart_topics(con, curations)
    finally:
        con.execute(f"DROP TABLE IF EXISTS {_TEXTS}")
    return step


def _read_texts(
    con: duckdb.DuckDBPyConnection, candidates: str | None, *, every_message: bool = False
) -> None:
    """``_topic_texts``: each candidate's first user message (or all its user messages in
    order, joined by a blank line) and language."""
    scope = (
        "TRUE"
        if candidates is None
        else f"(c.workspace_id, c.id) IN (SELECT workspace_id, id FROM {candidates})"
    )
    m_scope = (
        "TRUE"
        if candidates is None
        else "(coalesce(workspace_id, ''), conversation_id) IN "
        f"(SELECT workspace_id, id FROM {candidates})"
    )
    con.execute(
        f"""CREATE OR REPLACE TEMP TABLE {_TEXTS} AS
        WITH firsts AS (
            SELECT workspace_id, conversation_id,
                   {
            "string_agg(text, chr(10) || chr(10) ORDER BY position)"
            if every_message
            else "arg_min(text, position)"
        } AS text,
                   arg_min(locale, position) AS locale
            FROM messages
            WHERE role = 'user' AND trim(coalesce(text, '')) <> '' AND {m_scope}
            GROUP BY ALL)
        SELECT c.workspace_id, c.id AS conversation_id, left(f.text, {MAX_TEXT}) AS text,
               lower(regexp_extract(coalesce(c.locale, f.locale, ''), '^[A-Za-z]+')) AS language
        FROM conversations c
        LEFT JOIN firsts f ON f.workspace_id = c.workspace_id AND f.conversation_id = c.id
        WHERE c.workspace_id IS NOT NULL AND {scope}"""
    )


def _store_texts(con: duckdb.DuckDBPyConnection, run_id: str) -> dict[str, int]:
    """Record new or changed first messages (not yet placed); per workspace, how many.

    A conversation whose text the run's retention step removed keeps its placement (its
    text is gone, not changed; D-RETENTION) until a newer transcript brings text again."""
    con.execute(
        f"""CREATE OR REPLACE TEMP TABLE _topic_new AS
        SELECT t.* FROM {_TEXTS} t
        LEFT JOIN {CONVERSATION_TOPICS.name} o
          ON o.workspace_id = t.workspace_id AND o.conversation_id = t.conversation_id
        WHERE (o.conversation_id IS NULL OR o.text IS DISTINCT FROM t.text
               OR o.language IS DISTINCT FROM t.language)
          AND NOT (t.text IS NULL AND o.conversation_id IS NOT NULL
                   AND (t.workspace_id, t.conversation_id) IN (
                       SELECT workspace_id, conversation_id FROM ({texts_removed_sql()})))"""
    )
    con.execute(
        f"""DELETE FROM {CONVERSATION_TOPICS.name}
            WHERE (workspace_id, conversation_id) IN
                  (SELECT workspace_id, conversation_id FROM _topic_new)"""
    )
    con.execute(
        f"""INSERT INTO {CONVERSATION_TOPICS.name}
            (workspace_id, conversation_id, topic_id, language, text, similarity, assigned_by,
             transform_run_id)
            SELECT workspace_id, conversation_id, NULL, language, text, NULL, NULL, ?
            FROM _topic_new""",
        [run_id],
    )
    counts = dict(
        con.execute("SELECT workspace_id, count(*) FROM _topic_new GROUP BY ALL").fetchall()
    )
    con.execute("DROP TABLE _topic_new")
    return counts


def _groups(languages: list[str]) -> list[str]:
    """Each row's language group: its language when enough rows share it, else mixed."""
    counts = Counter(languages)
    return [lang if lang and counts[lang] >= MIN_LANGUAGE_GROUP else MIXED for lang in languages]


def _topic_rows(con: duckdb.DuckDBPyConnection, ws: str) -> pl.DataFrame:
    return _frame(
        con,
        f"""SELECT topic_id, language, label, centroid, retired, discovery_id
            FROM {TOPICS.name} WHERE workspace_id = ? ORDER BY topic_id""",
        [ws],
    )


def _discover(
    con: duckdb.DuckDBPyConnection,
    ws: str,
    config: TopicConfig,
    run_id: str,
    curations: list[Curation],
) -> dict[str, int]:
    """(Re)discover one workspace's topics and place all its conversations in them."""
    now = datetime.now(UTC)
    discovery_id = f"{run_id}:{ws}"
    old_topics = _topic_rows(con, ws)
    applied, _ = apply_curations(
        (
            (int(r["topic_id"]), str(r["label"]), bool(r["retired"]), None)
            for r in old_topics.iter_rows(named=True)
        ),
        curations,
    )
    pinned = {tid for tid, t in applied.items() if t.pinned and tid != OTHER_ID}
    splits = {
        int(r["topic_id"])
        for r in old_topics.iter_rows(named=True)
        if str(r["discovery_id"] or "").startswith("split:")
    }
    rows = _frame(
        con,
        f"""SELECT conversation_id, topic_id, language, text FROM {CONVERSATION_TOPICS.name}
            WHERE workspace_id = ? ORDER BY conversation_id""",
        [ws],
    )
    # what has no text any more (retention, D-RETENTION) cannot be clustered again: it
    # keeps its topic, as a pinned topic's conversations do
    removed = [
        r[0]
        for r in con.execute(
            f"SELECT conversation_id FROM ({texts_removed_sql()}) WHERE workspace_id = ?", [ws]
        ).fetchall()
    ]
    textless = rows["text"].is_null() & rows["topic_id"].is_not_null()
    keep = rows["topic_id"].is_in(list(pinned)).fill_null(False) | (
        textless & rows["conversation_id"].is_in(removed)
    ).fill_null(False)
    todo = rows.filter(~keep)
    texts = [t or "" for t in todo["text"].to_list()]
    groups = _groups(todo["language"].fill_null("").to_list())
    # discover each language group; gather its topics under provisional keys
    new_of_row = np.full(len(todo), -1, dtype=np.int64)  # provisional key; -1 other
    sims = np.zeros(len(todo), dtype=np.float32)
    provisional: list[tuple[str, Any]] = []  # (group, Topic) with its centroid
    centroids: list[np.ndarray] = []
    for group in sorted(set(groups)):
        idx = np.array([i for i, g in enumerate(groups) if g == group], dtype=np.int64)
        found = discover_topics([texts[i] for i in idx], seed=config.seed)
        key_of = {}
        real = []
        for topic, centroid in zip(found.topics, found.centroids, strict=True):
            if topic.id == OTHER_ID:
                continue
            key_of[topic.id] = len(provisional)
            real.append(len(centroids))
            provisional.append((group, topic))
            centroids.append(np.asarray(centroid, dtype=np.float32))
        assigned = np.array(found.assignments, dtype=np.int64)
        new_of_row[idx] = [key_of.get(int(a), -1) for a in assigned]
        if real:  # similarity to its own topic, by the rule later conversations are placed by
            matrix = np.array([centroids[k] for k in real], dtype=np.float32)
            _, best = place_texts(matrix, [texts[i] for i in idx])
            sims[idx] = np.where(new_of_row[idx] >= 0, best, 0.0)
    # map provisional topics to old ids by overlap, else fresh ids
    old_ids: list[int | None] = todo["topic_id"].to_list()
    id_of, kept = _map_by_overlap(
        old_ids,
        [int(k) for k in new_of_row],
        len(provisional),
        frozen=pinned | splits,
        first_free=max({*old_topics["topic_id"].to_list(), OTHER_ID}) + 1,
    )
    # write the topics: mapped and new ones replace theirs; pinned and split ones stay;
    # the other old ones are retired (kept for the views and curations naming them)
    live = set(id_of.values()) | pinned | splits | {OTHER_ID}
    con.execute(
        f"""UPDATE {TOPICS.name} SET retired = true
            WHERE workspace_id = ? AND NOT list_contains(?, topic_id)""",
        [ws, sorted(live)],
    )
    con.execute(
        f"DELETE FROM {TOPICS.name} WHERE workspace_id = ? AND list_contains(?, topic_id)",
        [ws, sorted(set(id_of.values()) | {OTHER_ID})],
    )
    records = [
        (ws, id_of[key], group, topic.label, list(topic.terms), list(topic.examples), topic.size,
         centroids[key].tolist(), discovery_id, now, False)
        for key, (group, topic) in enumerate(provisional)
    ]  # fmt: skip
    other_examples = [texts[i] for i in np.flatnonzero(new_of_row < 0) if texts[i].strip()][:3]
    records.append(
        (ws, OTHER_ID, MIXED, OTHER_LABEL, [], other_examples, int((new_of_row < 0).sum()),
         None, discovery_id, now, False)
    )  # fmt: skip
    con.executemany(
        f"""INSERT INTO {TOPICS.name} (workspace_id, topic_id, language, label, terms, examples,
            discovered_size, centroid, discovery_id, discovered_at, retired)
            VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)""",
        records,
    )
    final = [
        id_of[int(k)] if k >= 0 else (OTHER_ID if texts[i].strip() else None)
        for i, k in enumerate(new_of_row)
    ]
    update = pl.DataFrame(
        {
            "conversation_id": todo["conversation_id"],
            "topic_id": pl.Series(final, dtype=pl.Int32),
            "similarity": pl.Series(sims.astype(np.float64)),
        }
    )
    _write_placements(con, ws, update, "discovery", run_id)
    moved = sum(
        1
        for old, new in zip(old_ids, final, strict=True)
        if old is not None and new is not None and old != new
    )
    log.info("topics: %s: %d topics discovered (%d kept their ids)", ws, len(provisional), kept)
    return {
        "topics": len(provisional),
        "kept": kept,
        "new": len(provisional) - kept,
        "retired": len(set(old_topics["topic_id"].to_list()) - live),
        "conversations": len(todo),
        "moved": moved,
    }


#: A new topic takes an old topic's id when they share at least this share of the old
#: topic's conversations (that were clustered again) or of the new topic's.
MIN_OVERLAP = 0.3


def _map_by_overlap(
    old_ids: list[int | None],
    new_keys: list[int],
    count: int,
    *,
    frozen: set[int],
    first_free: int,
) -> tuple[dict[int, int], int]:
    """Each new topic's id (new topics are numbered 0..count-1 in ``new_keys``; -1 is
    other): the id of the old topic it overlaps most, pairs taken greedily by overlap
    (largest first, each old and new topic used once) when the overlap is at least
    :data:`MIN_OVERLAP` of either side; else a fresh id. Old topics in ``frozen`` (pinned,
    split off) are never given away. Returns the ids and how many kept an old one."""
    pairs: Counter[tuple[int, int]] = Counter(
        (old, new)
        for old, new in zip(old_ids, new_keys, strict=True)
        if new >= 0 and old is not None and old != OTHER_ID and old not in frozen
    )
    old_size = Counter(o for o in old_ids if o is not None)
    new_size = Counter(n for n in new_keys if n >= 0)
    id_of: dict[int, int] = {}
    taken: set[int] = set()
    for (old, new), n in sorted(pairs.items(), key=lambda p: (-p[1], p[0])):
        if new in id_of or old in taken:
            continue
        if n >= MIN_OVERLAP * old_size[old] or n >= MIN_OVERLAP * new_size[new]:
            id_of[new] = old
            taken.add(old)
    kept = len(id_of)
    fresh = first_free
    for key in range(count):
        if key not in id_of:
            id_of[key] = fresh
            fresh += 1
    return id_of, kept


def _write_placements(
    con: duckdb.DuckDBPyConnection, ws: str, update: pl.DataFrame, how: str, run_id: str
) -> None:
    con.register("_topic_update", update.to_arrow())
    try:
        con.execute(
            f"""UPDATE {CONVERSATION_TOPICS.name} AS t
                SET topic_id = u.topic_id, similarity = u.similarity,
                    assigned_by = CASE WHEN u.topic_id IS NULL THEN NULL ELSE ? END,
                    transform_run_id = ?
                FROM _topic_update u
                WHERE t.workspace_id = ? AND t.conversation_id = u.conversation_id""",
            [how, run_id, ws],
        )
    finally:
        con.unregister("_topic_update")


def _assign(con: duckdb.DuckDBPyConnection, ws: str, run_id: str) -> None:
    """Place the workspace's unplaced conversations in its nearest live topics."""
    rows = _frame(
        con,
        f"""SELECT conversation_id, language, text FROM {CONVERSATION_TOPICS.name}
            WHERE workspace_id = ? AND topic_id IS NULL AND trim(coalesce(text, '')) <> ''""",
        [ws],
    )
    if not len(rows):
        return
    topics = _topic_rows(con, ws).filter(
        ~pl.col("retired").fill_null(False)
        & (pl.col("topic_id") != OTHER_ID)
        & pl.col("centroid").is_not_null()
        & ~pl.col("discovery_id").fill_null("").str.starts_with("split:")
    )
    languages = set(topics["language"].to_list())
    texts = rows["text"].to_list()
    wanted = [
        lang if lang in languages else (MIXED if MIXED in languages else None)
        for lang in rows["language"].fill_null("").to_list()
    ]
    topic_ids = np.full(len(rows), OTHER_ID, dtype=np.int64)
    sims = np.zeros(len(rows), dtype=np.float32)
    for group in set(wanted):
        pool = topics if group is None else topics.filter(pl.col("language") == group)
        idx = np.array([i for i, g in enumerate(wanted) if g == group], dtype=np.int64)
        if not len(pool):
            continue
        matrix = np.array(pool["centroid"].to_list(), dtype=np.float32)
        nearest, best = place_texts(matrix, [texts[i] for i in idx])
        ids = np.array(pool["topic_id"].to_list(), dtype=np.int64)
        topic_ids[idx] = np.where(nearest >= 0, ids[np.maximum(nearest, 0)], OTHER_ID)
        sims[idx] = np.where(nearest >= 0, best, 0.0)
    update = pl.DataFrame(
        {
            "conversation_id": rows["conversation_id"],
            "topic_id": pl.Series(topic_ids, dtype=pl.Int32),
            "similarity": pl.Series(sims.astype(np.float64)),
        }
    )
    _write_placements(con, ws, update, "assignment", run_id)


def _apply_splits(
    con: duckdb.DuckDBPyConnection, ws: str, curations: list[Curation], run_id: str
) -> None:
    """Make a topic for each split curation (once; its id kept), and move the parent's
    conversations that match its phrase into it, on every run."""
    for c in curations:
        if c.action != "split" or c.pattern is None:
            continue
        tag = f"split:{c.sequence}"
        parent = con.execute(
            f"SELECT language, centroid FROM {TOPICS.name} WHERE workspace_id = ? AND topic_id = ?",
            [ws, c.topic_id],
        ).fetchall()
        if not parent:
            continue  # recorded as not applied in topic_curations
        made = con.execute(
            f"SELECT topic_id FROM {TOPICS.name} WHERE workspace_id = ? AND discovery_id = ?",
            [ws, tag],
        ).fetchall()
        if made:
            split_id = int(made[0][0])
        else:
            split_id = int(
                con.execute(
                    f"""SELECT coalesce(max(topic_id), 0) + 1 FROM {TOPICS.name}
                        WHERE workspace_id = ?""",
                    [ws],
                ).fetchall()[0][0]
            )
            con.execute(
                f"""INSERT INTO {TOPICS.name} (workspace_id, topic_id, language, label, terms,
                    examples, discovered_size, centroid, discovery_id, discovered_at, retired)
                    VALUES (?, ?, ?, ?, ?, [], 0, ?, ?, now(), false)""",
                [ws, split_id, parent[0][0], c.label, c.pattern.split(), parent[0][1], tag],
            )
        con.execute(
            f"""UPDATE {CONVERSATION_TOPICS.name} SET topic_id = ?, assigned_by = 'split',
                    transform_run_id = ?
                WHERE workspace_id = ? AND topic_id = ? AND regexp_matches(text, ?)""",
            [split_id, run_id, ws, c.topic_id, split_regex(c.pattern)],
        )


def write_mart_topics(con: duckdb.DuckDBPyConnection, curations: list[Curation]) -> None:
    """``mart_topics`` and ``topic_curations`` again: every topic with curations applied."""
    topics = _frame(
        con,
        f"""SELECT t.workspace_id, t.topic_id, t.label, coalesce(t.retired, false) AS retired,
                   t.language, t.terms, t.examples, t.discovery_id,
                   coalesce(n.conversations, 0) AS conversations
            FROM {TOPICS.name} t
            LEFT JOIN (SELECT workspace_id, topic_id, count(*) AS conversations
                       FROM {CONVERSATION_TOPICS.name} GROUP BY ALL) n
              ON n.workspace_id = t.workspace_id AND n.topic_id = t.topic_id
            ORDER BY t.workspace_id, t.topic_id""",
    )
    split_parent = {
        (c.workspace_id, c.sequence): c.topic_id for c in curations if c.action == "split"
    }
    out: list[tuple[Any, ...]] = []
    applied_rows: list[tuple[Any, ...]] = []
    for (ws,), part in topics.group_by(["workspace_id"], maintain_order=True):
        mine = [c for c in curations if c.workspace_id == ws]
        rows = list(part.iter_rows(named=True))
        parents = {
            r["topic_id"]: split_parent.get((ws, int(str(r["discovery_id"]).split(":")[1])))
            for r in rows
            if str(r["discovery_id"] or "").startswith("split:")
        }
        applied, ok = apply_curations(
            ((r["topic_id"], r["label"], r["retired"], parents.get(r["topic_id"])) for r in rows),
            mine,
        )
        for r in rows:
            a = applied[r["topic_id"]]
            out.append(
                (ws, r["topic_id"], str(r["topic_id"]), a.label, a.effective_topic_id,
                 a.effective_label, r["language"], r["terms"], r["examples"], r["conversations"],
                 a.pinned, a.renamed, a.split_from, r["retired"])
            )  # fmt: skip
        applied_rows += [(c, ok.get(c.sequence, False)) for c in mine]
    known = {str(ws) for ws in topics["workspace_id"].unique().to_list()}
    applied_rows += [(c, False) for c in curations if c.workspace_id not in known]
    con.execute(f"DELETE FROM {MART_TOPICS.name}")
    if out:
        marks = ", ".join("?" * len(out[0]))
        con.executemany(f"INSERT INTO {MART_TOPICS.name} VALUES ({marks})", out)
    con.execute(f"DELETE FROM {TOPIC_CURATIONS.name}")
    if applied_rows:
        con.executemany(
            f"INSERT INTO {TOPIC_CURATIONS.name} VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [
                (c.workspace_id, c.sequence, c.action, c.topic_id, c.target_topic_id, c.label,
                 c.pattern, c.created_at or None, c.created_by, ok)
                for c, ok in applied_rows
            ],
        )  # fmt: skip
