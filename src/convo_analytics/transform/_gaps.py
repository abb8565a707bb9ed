"""Knowledge gaps: the assistant answers that did not answer, one row each.

The service's interface has no marker for a fallback answer, so one is
recognised (decision D-KNOWLEDGE-GAPS) by its words (``fallback_patterns``:
case-insensitive RE2 regular expressions, ``transform.fallback_patterns``) or
by its trace (no knowledge source, and a confidence under the low-confidence
threshold); an answer whose confidence is under the threshold fails too.
Each failing answer is kept with the question it replied to (the nearest
earlier user message of its conversation), what followed (an escalation at
or after it, a rating of 2 or less, the conversation abandoned) and a
severity of 1 plus one for each. ``transform._gap_report`` groups the rows by
topic for the dashboard and `convo export knowledge-gaps`.

An answer whose text the run's retention step removed (``removed_texts``, D-RETENTION)
is a fallback when its words were one then: the marts stay as they were, and its
question and answer stay empty.

The rows of a conversation depend only on its messages and its facts (status,
rating, topic, escalations), so the transform rewrites them for the
conversations it recomputes, in the transaction that rewrites their marts: a
kill leaves the old rows or the new ones (a full rebuild stages them with the
other marts and swaps them in together).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import duckdb

from convo_analytics.errors import UserError
from convo_analytics.transform._frames import scalar
from convo_analytics.transform._mart_set import MartSet
from convo_analytics.warehouse._retention_tables import REMOVED_TEXTS
from convo_analytics.warehouse._topic_tables import KNOWLEDGE_GAPS

__all__ = [
    "FALLBACK_PATTERNS",
    "LOW_RATING",
    "REASONS",
    "GapStep",
    "check_patterns",
    "write_gaps",
]

#: Answers a fallback is written in (English): "I don't have information about that",
#: "I couldn't find ...", "could you rephrase", "I'm not (completely) sure", "I don't
#: know". Case-insensitive, RE2 syntax; ``.?`` stands for an apostrophe of any kind (or
#: none). The default of ``transform.fallback_patterns`` (config/_sections.py says the
#: same; a test keeps the two equal).
FALLBACK_PATTERNS: tuple[str, ...] = (
    r"\bI (do not|don.?t) have (any |enough )?(information|info|details)\b",
    r"\bI (could not|couldn.?t|cannot|can.?t|was unable to|am unable to) find\b",
    r"\b(could|can) you (please )?(rephrase|reword)\b",
    r"\bI( a|.?)m not (completely |entirely |quite |totally )?sure\b",
    r"\bI (do not|don.?t) know\b",
)
#: Why an answer counts, in the order ``reasons`` lists them.
REASONS = ("fallback_pattern", "no_source_low_confidence", "low_confidence")
#: A rating at or under this is a low one.
LOW_RATING = 2
#: What names the setting in errors.
SETTING = "transform.fallback_patterns"


def check_patterns(patterns: Sequence[str], named: str = SETTING) -> tuple[str, ...]:
    """The patterns, each checked as DuckDB (RE2) will use it; a UserError naming ``named``
    and the pattern otherwise. RE2 has no look-around and no back-references."""
    con = duckdb.connect()
    try:
        for pattern in patterns:
            try:
                con.execute("SELECT regexp_matches('', ?, 'i')", [pattern])
            except duckdb.Error as exc:
                why = str(exc).split("Error: ", 1)[-1].strip()
                raise UserError(
                    f"{named}: {pattern!r} is not a regular expression RE2 reads ({why}); "
                    "write it in RE2 syntax (no look-around, no back-references)"
                ) from None
    finally:
        con.close()
    return tuple(patterns)


def _matcher(patterns: Sequence[str]) -> str | None:
    """One expression matching any of the patterns (each checked alone first)."""
    return "|".join(f"(?:{p})" for p in patterns) if patterns else None


@dataclass(slots=True)
class GapStep:
    """What one transform did to ``knowledge_gaps`` (in ``convo transform --json``)."""

    #: Failing answers written (of the conversations recomputed, or all of them).
    written: int = 0
    #: "changed" (the conversations recomputed) or "all".
    scope: str = "changed"
    #: Why every row was recomputed in an incremental run (the patterns changed).
    reason: str | None = None

    def as_json(self) -> dict[str, Any]:
        return {"written": self.written, "scope": self.scope, "reason": self.reason}


def write_gaps(
    con: duckdb.DuckDBPyConnection,
    marts: MartSet,
    threshold: float,
    patterns: Sequence[str],
    candidates: str | None,
) -> int:
    """Rewrite the ``knowledge_gaps`` rows (``marts.gaps``) of the ``candidates`` (a table of
    ``workspace_id, id``, '' standing for a NULL workspace; None: every conversation) from
    their messages and their facts in ``marts``; returns the rows written. Runs inside the
    caller's transaction, after the facts were rewritten."""
    target = marts.gaps.name
    if candidates is None:
        con.execute(f"DELETE FROM {target}")
        scope = "TRUE"
    else:
        listed = f"(SELECT workspace_id, id FROM {candidates})"
        con.execute(f"DELETE FROM {target} WHERE (workspace_id, conversation_id) IN {listed}")
        scope = f"(coalesce(m.workspace_id, ''), m.conversation_id) IN {listed}"
    matcher = _matcher(patterns)
    by_words = "FALSE" if matcher is None else "regexp_matches(coalesce(m.text, ''), ?, 'i')"
    # an answer whose text retention removed is a fallback if its words were one then
    pattern_rule = (
        "CASE WHEN m.text IS NULL AND r.conversation_id IS NOT NULL "
        f"THEN coalesce(list_contains(r.fallback_answers, m.id), false) ELSE {by_words} END"
    )
    params: list[Any] = ([matcher] if matcher is not None else []) + [threshold, threshold]
    columns = ", ".join(c.name for c in KNOWLEDGE_GAPS.columns)
    before = int(scalar(con, f"SELECT count(*) FROM {target}"))  # the other conversations'
    con.execute(
        f"""INSERT INTO {target} ({columns})
        WITH answers AS (
            SELECT m.workspace_id, m.conversation_id, m.id AS message_id, m.position,
                   m.created_at AS answered_at, m.text AS answer, m.confidence,
                   m.knowledge_source,
                   list_concat(
                       CASE WHEN {pattern_rule} THEN ['{REASONS[0]}'] ELSE []::VARCHAR[] END,
                       CASE WHEN nullif(trim(m.knowledge_source), '') IS NULL
                                 AND m.confidence < ? THEN ['{REASONS[1]}']
                            ELSE []::VARCHAR[] END,
                       CASE WHEN m.confidence < ? THEN ['{REASONS[2]}']
                            ELSE []::VARCHAR[] END) AS reasons
            FROM messages m
            LEFT JOIN {REMOVED_TEXTS.name} r
              ON r.workspace_id = m.workspace_id AND r.conversation_id = m.conversation_id
             AND r.messages_run_id = m.run_id
            WHERE m.role = 'assistant' AND m.workspace_id IS NOT NULL AND {scope}
        ),
        failing AS (SELECT * FROM answers WHERE len(reasons) > 0),
        questions AS (
            SELECT m.workspace_id, m.conversation_id, m.position, m.text
            FROM messages m
            WHERE m.role = 'user' AND nullif(trim(m.text), '') IS NOT NULL
              AND (m.workspace_id, m.conversation_id) IN (
                  SELECT workspace_id, conversation_id FROM failing)
        ),
        asked AS (
            SELECT f.*, q.text AS question
            FROM failing f ASOF LEFT JOIN questions q
              ON f.workspace_id = q.workspace_id AND f.conversation_id = q.conversation_id
             AND f.position > q.position
        ),
        judged AS (
            SELECT a.*, TRY_CAST(nullif(c.topic, 'unknown') AS INTEGER) AS topic_id,
                   EXISTS (SELECT 1 FROM {marts.escalations.name} e
                           WHERE e.workspace_id = a.workspace_id
                             AND e.conversation_id = a.conversation_id
                             AND (a.answered_at IS NULL OR e.escalated_at >= a.answered_at))
                       AS escalated_after,
                   coalesce(c.feedback_rating <= {LOW_RATING}, false) AS low_rating,
                   coalesce(c.status = 'abandoned', false) AS abandoned
            FROM asked a JOIN {marts.conversations.name} c
              ON c.workspace_id = a.workspace_id AND c.conversation_id = a.conversation_id
        )
        SELECT workspace_id, conversation_id, message_id, answered_at, topic_id, question,
               answer, confidence, knowledge_source, reasons, escalated_after, low_rating,
               abandoned,
               (1 + escalated_after::INTEGER + low_rating::INTEGER + abandoned::INTEGER)
                   AS severity
        FROM judged""",
        params,
    )
    return int(scalar(con, f"SELECT count(*) FROM {target}")) - before
