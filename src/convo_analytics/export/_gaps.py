"""The knowledge-gap report for knowledge authors: CSV (one row per topic) or JSON.

The report is ``transform.gap_report``, the one the dashboard's Knowledge gaps
page shows (decision D-KNOWLEDGE-GAPS): per workspace and topic, ranked by
impact, what users asked, what the assistant answered, which sources its
answers used and the verdict. The CSV holds a topic per row, its
representative questions, answers and sources joined with new lines in one
cell each, so that an author can work down the rows in a spreadsheet; the
JSON holds the whole structure (counts of each question, answer and source,
and the conversations behind each topic). Questions and answers are redacted
(emails, card and phone numbers) unless asked otherwise.

Written to a file, it is written under a temporary name and renamed, with a
manifest beside it as the guardrail log has (rows, bytes, SHA-256, the
parameters, the transform it came from, versions).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any, Literal

import duckdb
import orjson
import polars as pl

from convo_analytics.errors import UserError
from convo_analytics.export._guardrails import _sha256, _versions
from convo_analytics.export._summary import check_range
from convo_analytics.export._workspaces import WarehouseWorkspace, warehouse_workspaces
from convo_analytics.transform import (
    conversations_of,
    failing_answers,
    gap_report,
    latest_transform,
)

__all__ = ["GAP_FORMATS", "GapExport", "default_gap_range", "export_knowledge_gaps", "writable"]

GapFormat = Literal["csv", "json"]
GAP_FORMATS: tuple[str, ...] = ("csv", "json")
#: The days a report covers when no range is given: this many, up to the newest
#: conversation.
DEFAULT_DAYS = 30
#: What joins a topic's questions, answers and sources in one CSV cell.
JOIN = "\n"
DEFINITIONS = {
    "failingAnswer": "an assistant answer that is a fallback (it matches one of "
    "transform.fallback_patterns, or it used no knowledge source and its confidence is "
    "under transform.low_confidence_threshold) or whose confidence is under that threshold",
    "severity": "1 + escalated at or after the answer + conversation rated 2 or less + "
    "conversation abandoned (1 to 4)",
    "impact": "conversations with a failing answer x the mean severity of the topic's "
    "failing answers; topics are ranked by it, highest first",
    "verdict": "'missing content' when none of the topic's assistant answers in the range "
    "used a knowledge source, else 'content that does not answer'",
    "topic": "each conversation's topic as analysts see it (mart_topics: merges applied); "
    "'unknown' before its workspace has topics",
    "docs": "docs/warehouse.md, 'Knowledge gaps'",
}


@dataclass(frozen=True, slots=True)
class GapExport:
    """What an export made: the document's bytes, its topics, and where it went."""

    data: bytes
    topics: int
    manifest: dict[str, Any]
    data_file: Path | None = None
    manifest_file: Path | None = None


def writable(out: Path) -> None:
    """A UserError naming ``--out`` when the file cannot be written there (checked before
    anything is read: nothing is left behind)."""
    tmp = out.with_name(out.name + ".partial")
    made = [p for p in (out.parent, *out.parent.parents) if not p.exists()]
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        with tmp.open("wb"):
            pass
        tmp.unlink()
        for folder in made:  # made again when the file is written
            folder.rmdir()
    except OSError as exc:
        raise UserError(
            f"--out {out}: cannot write there ({exc.strerror or exc}); name a file in a "
            "folder you can write to"
        ) from None


def default_gap_range(
    con: duckdb.DuckDBPyConnection,
    tz: str,
    first: date | None,
    last: date | None,
    workspaces: Sequence[str] | None = None,
) -> tuple[date, date]:
    """The range asked for, its missing ends filled: ``last`` the day (in ``tz``) of the
    newest conversation (of the workspaces), ``first`` ``DEFAULT_DAYS`` days up to it."""
    if last is None:
        where, params = "", list[Any]()
        if workspaces is not None:
            where = f" WHERE workspace_id IN ({', '.join('?' * len(workspaces))})" if workspaces \
                else " WHERE FALSE"  # fmt: skip
            params = list(workspaces)
        newest = con.execute(
            f"SELECT max(timezone(?, started_at))::DATE FROM mart_conversations{where}",
            [tz, *params],
        ).fetchall()[0][0]
        last = newest if isinstance(newest, date) else datetime.now(UTC).date()
        if first is not None and last < first:
            last = first
    if first is None:
        first = last - timedelta(days=DEFAULT_DAYS - 1)
    return first, last


def _names(
    frame: pl.DataFrame, known: Sequence[WarehouseWorkspace], chosen: Sequence[WarehouseWorkspace]
) -> pl.DataFrame:
    names = {w.workspace_id: w.name for w in (*known, *chosen)}
    name = pl.col("workspace_id").replace_strict(names, default=None, return_dtype=pl.String)
    return frame.with_columns(workspace_name=name)


def _csv(report: pl.DataFrame) -> bytes:
    """One row per topic; lists joined with new lines (sources with their answers)."""
    flat = report.with_columns(
        pl.col("questions").list.join(JOIN),
        pl.col("answers").list.join(JOIN),
        pl.struct("sources", "source_responses")
        .map_elements(
            lambda s: JOIN.join(
                f"{name} ({n} answer{'' if n == 1 else 's'})"
                for name, n in zip(s["sources"], s["source_responses"], strict=True)
            ),
            return_dtype=pl.String,
        )
        .alias("sources"),
        pl.col("impact").round(3),
        pl.col("mean_severity").round(3),
    ).drop("question_counts", "answer_counts", "source_responses", "conversation_ids")
    return flat.write_csv().encode("utf-8")


def _json_topics(report: pl.DataFrame) -> list[dict[str, Any]]:
    out = []
    for row in report.iter_rows(named=True):
        questions = zip(row.pop("questions"), row.pop("question_counts"), strict=True)
        answers = zip(row.pop("answers"), row.pop("answer_counts"), strict=True)
        sources = zip(row.pop("sources"), row.pop("source_responses"), strict=True)
        row["questions"] = [{"text": t, "failing_answers": n} for t, n in questions]
        row["answers"] = [{"text": t, "failing_answers": n} for t, n in answers]
        row["sources"] = [{"source": s, "responses": n} for s, n in sources]
        out.append(row)
    return out


def export_knowledge_gaps(
    con: duckdb.DuckDBPyConnection,
    first: date,
    last: date,
    *,
    tz: str = "UTC",
    fmt: GapFormat = "csv",
    redact: bool = True,
    workspaces: Sequence[WarehouseWorkspace] | None = None,
    out: Path | None = None,
    known: Sequence[WarehouseWorkspace] | None = None,
    filters: Mapping[str, Sequence[str]] | None = None,
) -> GapExport:
    """The report of ``first``..``last`` (days in ``tz``) of ``workspaces`` (None: every
    one, each topic naming its workspace) and of the conversations the slice ``filters``
    keep (the dashboard's), as CSV or JSON; written to ``out`` with a manifest beside it
    when given."""
    check_range(first, last, tz)
    listed = list(known) if known is not None else warehouse_workspaces(con)
    ids = None if workspaces is None else [w.workspace_id for w in workspaces]
    report = gap_report(con, first, last, tz, workspaces=ids, filters=filters, redact=redact)
    report = _names(report, listed, workspaces or ())
    behind = (
        conversations_of(
            failing_answers(con, first, last, tz, workspaces=ids, filters=filters, redact=False)
        )
        .group_by("workspace_id", "topic", maintain_order=True)
        .agg(pl.col("conversation_id").alias("conversation_ids"))
    )
    report = (
        report.with_columns(pl.int_range(1, report.height + 1, dtype=pl.Int64).alias("rank"))
        .join(behind, on=["workspace_id", "topic"], how="left")
        .with_columns(pl.col("conversation_ids").fill_null([]))
        .sort("rank")
    )
    front = ["workspace_id", "workspace_name", "rank"]
    report = report.select(*front, pl.exclude(front))
    run = latest_transform(con)
    parameters = {
        "from": first.isoformat(),
        "to": last.isoformat(),
        "timezone": tz,
        "redacted": redact,
        "format": fmt,
        "workspaces": None if workspaces is None else [w.name for w in workspaces],
        "filters": {k: list(v) for k, v in (filters or {}).items() if v} or None,
    }
    generated = datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    if fmt == "csv":
        data = _csv(report)
    else:
        document = {
            "kind": "knowledge-gaps",
            **parameters,
            "lowConfidenceThreshold": run.low_confidence_threshold if run else None,
            "definitions": DEFINITIONS,
            "generatedAt": generated,
            "topics": _json_topics(report),
        }
        data = orjson.dumps(document, option=orjson.OPT_INDENT_2) + b"\n"
    manifest: dict[str, Any] = {
        "kind": "knowledge-gaps",
        "files": [],
        "rowCount": report.height,
        "columns": [c for c in report.columns if fmt == "json" or c not in _CSV_DROPPED],
        "parameters": parameters,
        "definitions": DEFINITIONS,
        "redaction": (
            "emails, card numbers and phone numbers in questions and answers replaced by "
            "[EMAIL], [CARD], [PHONE]"
            if redact
            else "none: questions and answers as the service sent them (--no-redact)"
        ),
        "transformRunId": run.transform_run_id if run else None,
        "lowConfidenceThreshold": run.low_confidence_threshold if run else None,
        "generatedAt": generated,
        "versions": _versions(),
    }
    if out is None:
        return GapExport(data, report.height, manifest)
    _replace(out, data)
    manifest["files"] = [
        {"path": out.name, "format": fmt, "rows": report.height, "bytes": len(data),
         "sha256": _sha256(out)}
    ]  # fmt: skip
    manifest_file = out.with_name(out.name + ".manifest.json")
    _replace(manifest_file, orjson.dumps(manifest, option=orjson.OPT_INDENT_2) + b"\n")
    return GapExport(data, report.height, manifest, out, manifest_file)


_CSV_DROPPED = ("question_counts", "answer_counts", "source_responses", "conversation_ids")


def _replace(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` whole: a temporary file, synced, then renamed."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".partial")
    try:
        with tmp.open("wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        tmp.replace(path)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise UserError(f"--out {path}: cannot write there ({exc.strerror or exc})") from None
