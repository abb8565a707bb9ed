"""``convo extract --check`` on the summary: its format, its daily rows, its fields, its range.

The summary is probed as the lists are, in a few requests: a week asked with
the configured (or the sandbox's) range parameters shows the format (JSON or
CSV), where the daily rows are and which field fills each ``service_summaries``
column (the sandbox's names, else the usual ones: ``day``,
``total_conversations``, …); when the days that come back are not the days
asked for, the usual pairs of range parameters (``since``/``until``,
``start_date``/``end_date``, ``filter[from]``/``filter[to]``, …) are tried on
two days until one answers exactly those. What is found is the
``[extract.streams.summary]`` table and the ``[extract.fields]
"service_summaries.*"`` lines a run reads (decision D-SUMMARY-SHAPES).
"""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, date, datetime, timedelta

from convo_analytics.config._endpoints import RangeSpec
from convo_analytics.extract._fields import find_fields
from convo_analytics.extract._http import ExtractError
from convo_analytics.extract._probe import Probe, StreamCheck
from convo_analytics.extract._shapes import ShapeError, find_records, value_at
from convo_analytics.extract._source import StreamPlan
from convo_analytics.extract._summary import (
    ABSENT,
    DEFAULT_RECORDS,
    SummaryAnswer,
    day_of,
    range_params,
    read_answer,
)

__all__ = ["RANGE_PAIRS", "check_summary"]

#: The pairs of range parameters services use, after the configured (or sandbox's) one.
RANGE_PAIRS = (
    ("from", "to"), ("since", "until"), ("start", "end"), ("start_date", "end_date"),
    ("startDate", "endDate"), ("date_from", "date_to"), ("from_date", "to_date"),
    ("dateFrom", "dateTo"), ("fromDate", "toDate"), ("begin", "end"), ("after", "before"),
    ("period_start", "period_end"), ("filter[from]", "filter[to]"),
    ("filter[start]", "filter[end]"), ("filter[date][gte]", "filter[date][lte]"),
)  # fmt: skip
_DAY = "service_summaries.date"


def _days(answer: SummaryAnswer, day_path: str) -> set[date]:
    return {d for r in answer.rows if (d := day_of(value_at(r, day_path))) is not None}


def _span(first: date, last: date) -> set[date]:
    return {first + timedelta(days=i) for i in range((last - first).days + 1)}


async def _ask(
    probe: Probe, plan: StreamPlan, params: dict[str, str], records: str
) -> SummaryAnswer | None:
    """The answer to one probe, read at ``records``; None when refused or unreadable."""
    try:
        response, content = await probe.get(plan.path, params, missing=(400, 404, 422), parse=False)
    except ExtractError:
        return None
    if content is None:
        return None
    try:
        return read_answer(response, content, records)
    except ValueError:
        return None


def _rows_elsewhere(answer: SummaryAnswer) -> SummaryAnswer:
    """A JSON answer without ``daily``: its rows where a list of objects is."""
    try:
        rows, where = find_records(answer.data)
    except ShapeError:
        return answer
    return replace(answer, records=where or "", rows=rows) if rows else answer


async def check_summary(probe: Probe, plan: StreamPlan, check: StreamCheck) -> None:
    """Probe the summary (see the module docstring); fills ``check``."""
    assert plan.range is not None
    last = datetime.now(UTC).date() - timedelta(days=1)
    first = last - timedelta(days=6)
    params = range_params(plan, first, last, "UTC")
    response, content = await probe.get(plan.path, params, missing=ABSENT, parse=False)
    if content is None:
        check.status = "unavailable"
        check.spec = {"enabled": False}
        check.notes.append(f"{plan.path} answered {response.status_code}: no summary endpoint")
        return
    try:
        answer = read_answer(response, content, plan.records)
    except ValueError as exc:
        check.todo.append(f"the summary answered {response.status_code} but {exc}")
        return
    if answer.format == "json" and not answer.rows and plan.records is None:
        answer = _rows_elsewhere(answer)
    check.notes.append(f"{plan.path} answers {answer.describe()}")
    if not answer.rows:
        check.todo.append(
            "no daily rows found in the summary: set records to the key path of its list"
        )
        return
    if answer.format == "json" and answer.records != DEFAULT_RECORDS:
        check.spec["records"] = answer.records
    found = find_fields("service_summaries", answer.rows, plan.fields)
    check.fields.update(found)
    day = found[_DAY]
    metrics = [
        k for k, f in found.items() if k != _DAY and f.path and f.filled and f.origin != "missing"
    ]
    if not day.path:
        seen = ", ".join(day.candidates) or "none that read as a date"
        check.todo.append(
            f'no field of the daily rows reads as a day: set [extract.fields] "{_DAY}" '
            f"(keys that could: {seen})"
        )
        return
    check.notes.append(
        f"the day is {day.path!r}; {len(metrics)} of {len(found) - 1} summary columns found"
        + (f" ({', '.join(k.split('.', 1)[1] for k in metrics[:12])})" if metrics else "")
    )
    if not metrics:
        check.todo.append(
            "no summary metric found in the daily rows: map them in [extract.fields] "
            '("service_summaries.conversations" = "<field>", ...)'
        )
    await _range(probe, plan, check, answer, day.path, first, last)


async def _range(
    probe: Probe,
    plan: StreamPlan,
    check: StreamCheck,
    answer: SummaryAnswer,
    day_path: str,
    first: date,
    last: date,
) -> None:
    """Which parameters ask the summary for a range: kept when the week came back exactly,
    else the usual pairs tried on two days."""
    assert plan.range is not None
    names = plan.range.names()
    if _days(answer, day_path) == _span(first, last):
        check.notes.append(f"the range is asked with {names['from']!r} and {names['to']!r}")
        if "range" in plan.configured:
            check.spec["range"] = plan.range.model_dump(exclude_none=True)
        return
    a, b = last - timedelta(days=2), last - timedelta(days=1)
    for start, end in dict.fromkeys([(names["from"], names["to"]), *RANGE_PAIRS]):
        if not start or not end:
            continue
        got = await _ask(
            probe, plan, {start: a.isoformat(), end: b.isoformat(), **plan.params}, answer.records
        )
        if got is None or not (days := _days(got, day_path)) or not days <= {a, b}:
            continue
        tz = names["tz"] or "tz"
        with_tz = {start: a.isoformat(), end: b.isoformat(), tz: "UTC", **plan.params}
        again = await _ask(probe, plan, with_tz, answer.records)
        kept = again is not None and _days(again, day_path) == days
        check.spec["range"] = RangeSpec(
            from_param=start, to_param=end, tz_param=tz if kept else ""
        ).model_dump()
        check.notes.append(
            f"the range is asked with {start!r} and {end!r} (found by trying the usual names)"
        )
        return
    check.todo.append(
        f"the summary answered the days it chose whatever range was asked ({len(RANGE_PAIRS)} "
        "pairs of parameters tried): set range = { from_param = ..., to_param = ... }"
    )
