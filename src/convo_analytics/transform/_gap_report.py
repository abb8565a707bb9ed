"""The knowledge-gap report: where the assistant fails, per topic, ranked by impact.

One reader for the dashboard's Knowledge gaps page and `convo export
knowledge-gaps` (decision D-KNOWLEDGE-GAPS), over ``knowledge_gaps`` (one row
per failing answer, ``transform._gaps``), the conversations' facts and
dimensions (``mart_conversations``), the topics as analysts see them
(``mart_topics``: a merged topic counts under the one it was merged into) and
the knowledge sources every answer used (``messages.knowledge_source``).

For a workspace (or several: a topic is always one workspace's), the failing
answers given on ``first``..``last`` (days cut in ``tz``) of the conversations
the slice filters keep are grouped by their conversation's **effective topic**
(conversations without a topic under ``unknown``). Per topic:

- ``conversations``: conversations with a failing answer; ``failing_answers``;
- ``mean_severity``: the mean severity of its failing answers (1 to 4);
- ``impact`` = ``conversations`` x ``mean_severity``, the rank (highest first);
- ``escalated``, ``low_rated``, ``abandoned``: conversations with a failing answer
  escalated at or after it, rated 2 or less, abandoned;
- up to three representative ``questions`` and distinct ``answers``: the most
  frequent ones (compared in lower case, spaces collapsed, end punctuation
  dropped), ties by text, each shown as its most frequent spelling;
- ``sources``: every knowledge source the topic's answers used in the range (all
  of its assistant answers, not only the failing ones), most used first;
- ``verdict``: ``missing content`` when none of the topic's answers used a
  source, else ``content that does not answer``.

Questions and answers are redacted (emails, card and phone numbers replaced)
unless asked otherwise.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import date
from typing import Any

import duckdb
import polars as pl

from convo_analytics.transform._frames import read_frame
from convo_analytics.transform._incidents import day_bounds
from convo_analytics.transform._published import NotTransformed, require_marts
from convo_analytics.transform._redact import redact_expr
from convo_analytics.transform._slices import DIMENSIONS

__all__ = [
    "CONTENT_DOES_NOT_ANSWER",
    "EXAMPLES",
    "MISSING_CONTENT",
    "REPORT_COLUMNS",
    "UNKNOWN_TOPIC",
    "conversations_of",
    "failing_answers",
    "gap_conversations",
    "gap_report",
    "require_gaps",
]

MISSING_CONTENT = "missing content"
CONTENT_DOES_NOT_ANSWER = "content that does not answer"
#: The topic of conversations that have none (the topic dimension's value for them).
UNKNOWN_TOPIC = "unknown"
#: How many representative questions and answers a topic shows.
EXAMPLES = 3
#: The report's columns, in order.
REPORT_COLUMNS = (
    "workspace_id",
    "topic",
    "topic_id",
    "topic_label",
    "verdict",
    "impact",
    "conversations",
    "failing_answers",
    "mean_severity",
    "escalated",
    "low_rated",
    "abandoned",
    "responses",
    "responses_with_source",
    "questions",
    "question_counts",
    "answers",
    "answer_counts",
    "sources",
    "source_responses",
)
_GAP_TABLES = ("knowledge_gaps", "mart_topics", "messages")


def require_gaps(con: duckdb.DuckDBPyConnection) -> None:
    """Raise NotTransformed, naming the fix, when the warehouse (or snapshot) has no
    knowledge gaps to read: no marts, or marts of a release before them."""
    require_marts(con)
    found = {
        r[0]
        for r in con.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema()"
        ).fetchall()
    }
    missing = [t for t in _GAP_TABLES if t not in found]
    if missing:
        raise NotTransformed(
            f"this warehouse has no knowledge gaps yet ({', '.join(missing)} missing); run "
            "'convo transform' with this release (and publish) first"
        )


def _conversations_sql(
    workspaces: Sequence[str] | None, filters: Mapping[str, Sequence[str]] | None
) -> tuple[str, list[Any]]:
    """The conversations the report reads (workspaces, slice filters), each with its
    effective topic and that topic's name."""
    where, params = ["TRUE"], list[Any]()
    if workspaces is not None:
        where.append(f"c.workspace_id IN ({', '.join('?' * len(workspaces))})" if workspaces
                     else "FALSE")  # fmt: skip
        params += list(workspaces)
    effective = f"coalesce(CAST(t.effective_topic_id AS VARCHAR), c.topic, '{UNKNOWN_TOPIC}')"
    for dim, values in (filters or {}).items():
        if dim not in DIMENSIONS:
            raise ValueError(f"unknown dimension {dim!r}; one of {', '.join(DIMENSIONS)}")
        if not values:
            continue
        marks = ", ".join("?" * len(values))
        if dim == "topic":  # a topic or the topic it was merged into
            where.append(f"(c.topic IN ({marks}) OR {effective} IN ({marks}))")
            params += [*values, *values]
        else:
            where.append(f"c.{dim} IN ({marks})")
            params += list(values)
    sql = f"""SELECT c.workspace_id, c.conversation_id, c.started_at, c.channel, c.locale,
                     c.source, c.intent, c.status, c.feedback_rating, c.escalated,
                     {effective} AS topic,
                     CASE WHEN {effective} = '{UNKNOWN_TOPIC}' THEN '{UNKNOWN_TOPIC}'
                          ELSE coalesce(t.effective_label, {effective}) END AS topic_label
              FROM mart_conversations c
              LEFT JOIN mart_topics t ON t.workspace_id = c.workspace_id AND t.topic = c.topic
              WHERE {" AND ".join(where)}"""
    return sql, params


def _in_range(column: str) -> str:
    """SQL keeping rows whose ``column`` falls on the range's days in the zone (parameters:
    the UTC bounds, the zone, the first and the last day)."""
    return (
        f"{column} >= ?::TIMESTAMPTZ AND {column} < ?::TIMESTAMPTZ "
        f"AND timezone(?, {column})::DATE BETWEEN ? AND ?"
    )


def _range_params(first: date, last: date, tz: str) -> list[Any]:
    lo, hi = day_bounds(first, last)
    return [lo, hi, tz, first, last]


def failing_answers(
    con: duckdb.DuckDBPyConnection,
    first: date,
    last: date,
    tz: str = "UTC",
    *,
    workspaces: Sequence[str] | None = None,
    filters: Mapping[str, Sequence[str]] | None = None,
    redact: bool = True,
) -> pl.DataFrame:
    """The failing answers of the range, each with its conversation's effective topic."""
    require_gaps(con)
    conversations, params = _conversations_sql(workspaces, filters)
    frame = read_frame(
        con,
        f"""WITH conv AS ({conversations})
        SELECT g.workspace_id, conv.topic, conv.topic_label, g.conversation_id, g.message_id,
               g.answered_at, conv.started_at, conv.channel, conv.locale, g.question, g.answer,
               g.confidence, g.knowledge_source, g.reasons, g.escalated_after, g.low_rating,
               g.abandoned, g.severity
        FROM knowledge_gaps g
        JOIN conv ON conv.workspace_id = g.workspace_id
                 AND conv.conversation_id = g.conversation_id
        WHERE {_in_range("g.answered_at")}
        ORDER BY g.workspace_id, g.conversation_id, g.answered_at, g.message_id""",
        [*params, *_range_params(first, last, tz)],
    )
    if redact and frame.height:
        frame = frame.with_columns(redact_expr("question"), redact_expr("answer"))
    return frame


def _responses(
    con: duckdb.DuckDBPyConnection,
    first: date,
    last: date,
    tz: str,
    workspaces: Sequence[str] | None,
    filters: Mapping[str, Sequence[str]] | None,
) -> pl.DataFrame:
    """Every assistant answer of the range per topic and knowledge source (NULL: none)."""
    conversations, params = _conversations_sql(workspaces, filters)
    return read_frame(
        con,
        f"""WITH conv AS ({conversations})
        SELECT conv.workspace_id, conv.topic, nullif(trim(m.knowledge_source), '') AS source,
               count(*) AS responses
        FROM messages m
        JOIN conv ON conv.workspace_id = m.workspace_id
                 AND conv.conversation_id = m.conversation_id
        WHERE m.role = 'assistant' AND {_in_range("m.created_at")}
        GROUP BY ALL""",
        [*params, *_range_params(first, last, tz)],
    )


_KEY = ["workspace_id", "topic"]


def _top(frame: pl.DataFrame, column: str, limit: int, redact: bool) -> pl.DataFrame:
    """Per topic, the ``limit`` most frequent values of ``column`` (redacted first, if
    asked; compared in lower case, spaces collapsed, end punctuation dropped; ties by that
    form), each as its most frequent spelling (ties: the first in text order), and how
    many failing answers had it. Exact texts are counted first, so each distinct text is
    redacted and compared once."""
    texts = (
        frame.filter(pl.col(column).str.strip_chars().str.len_chars() > 0)
        .group_by(*_KEY, pl.col(column).alias("text"))
        .agg(pl.len().alias("n"))
    )
    if redact and texts.height:
        texts = texts.with_columns(redact_expr("text"))
    key = (
        pl.col("text")
        .str.to_lowercase()
        .str.replace_all(r"\s+", " ")
        .str.strip_chars(" .,;:!?¿¡…\"'")
        .alias("key")
    )
    spelled = (
        texts.with_columns(key)
        .group_by(*_KEY, "key")
        .agg(
            pl.col("text").sort_by("n", "text", descending=[True, False]).first(),
            pl.col("n").sum(),
        )
    )
    return spelled.group_by(_KEY).agg(
        pl.col("text")
        .sort_by("n", "key", descending=[True, False])
        .head(limit)
        .alias(column + "s"),
        pl.col("n")
        .sort_by("n", "key", descending=[True, False])
        .head(limit)
        .cast(pl.Int64)
        .alias(column + "_counts"),
    )


def _empty() -> pl.DataFrame:
    strings, ints = pl.List(pl.String), pl.List(pl.Int64)
    schema: dict[str, Any] = {
        "workspace_id": pl.String, "topic": pl.String, "topic_id": pl.Int64,
        "topic_label": pl.String, "verdict": pl.String, "impact": pl.Float64,
        "conversations": pl.Int64, "failing_answers": pl.Int64, "mean_severity": pl.Float64,
        "escalated": pl.Int64, "low_rated": pl.Int64, "abandoned": pl.Int64,
        "responses": pl.Int64, "responses_with_source": pl.Int64, "questions": strings,
        "question_counts": ints, "answers": strings, "answer_counts": ints,
        "sources": strings, "source_responses": ints,
    }  # fmt: skip
    return pl.DataFrame(schema=schema)


def gap_report(
    con: duckdb.DuckDBPyConnection,
    first: date,
    last: date,
    tz: str = "UTC",
    *,
    workspaces: Sequence[str] | None = None,
    filters: Mapping[str, Sequence[str]] | None = None,
    redact: bool = True,
    examples: int = EXAMPLES,
) -> pl.DataFrame:
    """One row per (workspace, effective topic) with failing answers on ``first``..``last``
    (days in ``tz``), highest impact first (:data:`REPORT_COLUMNS`; see the module).

    ``workspaces`` (ids) keeps theirs (None: all); ``filters`` keeps the conversations
    whose dimensions (channel, locale, source, intent, topic: a topic id as text, or
    ``unknown``; a merged topic's id or its target's) take one of the values given.
    """
    gaps = failing_answers(
        con, first, last, tz, workspaces=workspaces, filters=filters, redact=False
    )
    if gaps.is_empty():
        return _empty()
    conversation = pl.col("conversation_id")  # one workspace's within a group
    figures = gaps.group_by(_KEY).agg(
        pl.col("topic_label").first(),
        conversation.n_unique().cast(pl.Int64).alias("conversations"),
        pl.len().cast(pl.Int64).alias("failing_answers"),
        pl.col("severity").mean().alias("mean_severity"),
        *(
            conversation.filter(pl.col(flag)).n_unique().cast(pl.Int64).alias(name)
            for flag, name in (
                ("escalated_after", "escalated"),
                ("low_rating", "low_rated"),
                ("abandoned", "abandoned"),
            )
        ),
    )
    responses = _responses(con, first, last, tz, workspaces, filters)
    totals = responses.group_by(_KEY).agg(
        pl.col("responses").sum().cast(pl.Int64),
        pl.col("responses")
        .filter(pl.col("source").is_not_null())
        .sum()
        .cast(pl.Int64)
        .alias("responses_with_source"),
    )
    sources = (
        responses.filter(pl.col("source").is_not_null())
        .sort([*_KEY, "responses", "source"], descending=[False, False, True, False])
        .group_by(_KEY, maintain_order=True)
        .agg(
            pl.col("source").alias("sources"),
            pl.col("responses").cast(pl.Int64).alias("source_responses"),
        )
    )
    report = (
        figures.join(totals, on=_KEY, how="left")
        .join(_top(gaps, "question", examples, redact), on=_KEY, how="left")
        .join(_top(gaps, "answer", examples, redact), on=_KEY, how="left")
        .join(sources, on=_KEY, how="left")
        .with_columns(
            pl.col("responses", "responses_with_source").fill_null(0),
            pl.col("questions", "answers", "sources").fill_null([]),
            pl.col("question_counts", "answer_counts", "source_responses").fill_null([]),
            (pl.col("conversations") * pl.col("mean_severity")).alias("impact"),
            pl.col("topic").cast(pl.Int64, strict=False).alias("topic_id"),
        )
        .with_columns(
            pl.when(pl.col("responses_with_source") > 0)
            .then(pl.lit(CONTENT_DOES_NOT_ANSWER))
            .otherwise(pl.lit(MISSING_CONTENT))
            .alias("verdict")
        )
    )
    ranked = report.sort(
        ["impact", "conversations", "failing_answers", "workspace_id", "topic_id"],
        descending=[True, True, True, False, False],
        nulls_last=True,
    )
    return ranked.select(REPORT_COLUMNS).cast(_empty().schema)


_DRILL_SCHEMA: dict[str, Any] = {
    "workspace_id": pl.String, "topic": pl.String, "conversation_id": pl.String,
    "started_at": pl.Datetime("us", "UTC"), "channel": pl.String, "locale": pl.String,
    "failing_answers": pl.Int64, "severity": pl.Int64, "escalated": pl.Boolean,
    "low_rating": pl.Boolean, "abandoned": pl.Boolean,
    "first_answered_at": pl.Datetime("us", "UTC"), "question": pl.String, "answer": pl.String,
}  # fmt: skip


def conversations_of(gaps: pl.DataFrame) -> pl.DataFrame:
    """Per topic, the conversations behind its failing answers (``gaps``: from
    :func:`failing_answers`), most severe first: each with its failing answers, worst
    severity, what followed, and its first failing answer and the question before it."""
    if gaps.is_empty():
        return pl.DataFrame(schema=_DRILL_SCHEMA)
    out = (
        gaps.sort("answered_at", "message_id", nulls_last=True)
        .group_by("workspace_id", "topic", "conversation_id", maintain_order=True)
        .agg(
            pl.col("started_at").first(),
            pl.col("channel").first(),
            pl.col("locale").first(),
            pl.len().cast(pl.Int64).alias("failing_answers"),
            pl.col("severity").max().cast(pl.Int64),
            pl.col("escalated_after").any().alias("escalated"),
            pl.col("low_rating").any(),
            pl.col("abandoned").any(),
            pl.col("answered_at").first().alias("first_answered_at"),
            pl.col("question").first(),
            pl.col("answer").first(),
        )
        .sort(
            [*_KEY, "severity", "failing_answers", "first_answered_at", "conversation_id"],
            descending=[False, False, True, True, False, False],
            nulls_last=True,
        )
    )
    return out.select(list(_DRILL_SCHEMA))


def gap_conversations(
    con: duckdb.DuckDBPyConnection,
    first: date,
    last: date,
    tz: str,
    workspace_id: str,
    topic: str,
    *,
    filters: Mapping[str, Sequence[str]] | None = None,
    redact: bool = True,
) -> pl.DataFrame:
    """The drill-down: the conversations behind one topic's gaps on ``first``..``last``
    (``topic``: a topic of the report, ``unknown`` included), as :func:`conversations_of`
    lists them."""
    gaps = failing_answers(
        con, first, last, tz, workspaces=[workspace_id], filters=filters, redact=False
    )
    drill = conversations_of(gaps.filter(pl.col("topic") == topic))
    if redact and drill.height:
        drill = drill.with_columns(redact_expr("question"), redact_expr("answer"))
    return drill
