"""The service's own summary: asked for a range of days, read in its shape, loaded by day.

The interface says only "summary for a date range", so the range's parameter
names, the answer's format (JSON, or CSV), where its daily rows are and what
its fields are called are all a service's choice. A run asks with the
sandbox's ``from``, ``to`` and ``tz`` unless ``[extract.streams.summary]
range`` names others, reads the daily rows at ``records`` (``daily``; a CSV
answer's rows are its lines) and types each day's metrics from the sandbox's
names or the ``[extract.fields] "service_summaries.*"`` paths. It does not
guess metric names: a wrong guess would read as reconciliation differences,
so ``convo extract --check`` proposes the mapping for the user to keep
(decision D-SUMMARY-SHAPES). An answer that makes no typed day is a warning
naming what it held, the parameters sent and the settings that map it; the
raw answer is stored either way.
"""

from __future__ import annotations

import contextlib
import csv
import io
import re
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from typing import TYPE_CHECKING, Any

import httpx
import orjson

from convo_analytics.extract._http import ServiceClient
from convo_analytics.extract._results import StreamResult
from convo_analytics.extract._shapes import json_type, value_at
from convo_analytics.extract._source import StreamPlan
from convo_analytics.warehouse import _load as load
from convo_analytics.warehouse import record_findings, transaction
from convo_analytics.warehouse._shape import LoadShape, source_path
from convo_analytics.warehouse._tables import SERVICE_SUMMARIES

if TYPE_CHECKING:
    from convo_analytics.extract._run_state import ExtractionState

__all__ = ["ABSENT", "DEFAULT_RECORDS", "SummaryAnswer", "SummaryRun", "day_of", "read_answer"]

#: Answers meaning "this service has no such endpoint" for an optional stream.
ABSENT = (404, 405, 501)
#: Where the sandbox keeps the daily rows.
DEFAULT_RECORDS = "daily"
#: Where a CSV answer's rows are in what is stored for it.
CSV_ROWS = "rows"
_WHERE = "[extract.streams.summary]"
_NUMBER = re.compile(r"-?\d+")
_DECIMAL = re.compile(r"-?(\d+\.\d*|\.\d+|\d+)([eE][-+]?\d+)?")


def _csv_value(text: str) -> Any:
    """A CSV cell as the JSON value it stands for: a number, null (empty) or text."""
    text = text.strip()
    if not text:
        return None
    if _NUMBER.fullmatch(text):
        return int(text)
    if _DECIMAL.fullmatch(text):
        return float(text)
    return text


@dataclass(frozen=True)
class SummaryAnswer:
    """A summary answer read: its format, what is stored and loaded (JSON), and its rows."""

    format: str  # json, csv
    body: bytes  # JSON: the answer as it came; CSV: {"format", "columns", "rows"} as JSON
    data: Any
    records: str  # key path of the daily rows in ``data`` ("": ``data`` is their list)
    rows: list[dict[str, Any]]

    def describe(self) -> str:
        """What the answer held, for a warning: keys, lists and their rows' keys; or columns."""
        if self.format == "csv":
            columns = self.data.get("columns", [])
            return f"CSV with the columns {', '.join(columns) or 'none'} ({len(self.rows)} rows)"
        data = self.data
        if isinstance(data, list):
            first = next((r for r in data if isinstance(r, dict)), {})
            return f"a JSON array of {len(data)} items with the keys {_keys(first)}"
        if not isinstance(data, dict):
            return f"a JSON {json_type(data)}"
        lists = [
            f"{k}: {len(v)} objects with the keys {_keys(v[0])}"
            for k, v in data.items()
            if isinstance(v, list) and v and isinstance(v[0], dict)
        ]
        text = f"a JSON object with the keys {_keys(data)}"
        return text + (f" ({'; '.join(lists)})" if lists else "")


def _keys(record: Any) -> str:
    keys = list(record)[:16] if isinstance(record, dict) else []
    return ", ".join(keys) or "none"


def read_answer(response: httpx.Response, content: bytes, records: str | None) -> SummaryAnswer:
    """The answer as JSON (its rows at ``records``, default ``daily``) or as CSV; raises
    ValueError when it is neither."""
    kind = response.headers.get("content-type", "").split(";")[0].strip().lower()
    if "csv" not in kind:
        try:
            data = orjson.loads(content)
        except orjson.JSONDecodeError:
            if "json" in kind:
                raise ValueError("the answer is not valid JSON") from None
        else:
            where = DEFAULT_RECORDS if records is None else records
            found = value_at(data, where) if where else data
            rows = [r for r in found if isinstance(r, dict)] if isinstance(found, list) else []
            return SummaryAnswer("json", content, data, where, rows)
    try:
        text = content.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise ValueError(f"the answer ({kind or 'no content type'}) is not UTF-8 text") from None
    lines = text.strip().splitlines()
    if not lines or not any(sep in lines[0] for sep in ",;\t"):
        raise ValueError(f"the answer ({kind or 'no content type'}) is neither JSON nor CSV")
    dialect: type[csv.Dialect] = csv.excel
    with contextlib.suppress(csv.Error):
        dialect = csv.Sniffer().sniff(lines[0], delimiters=",;\t")
    reader = csv.reader(io.StringIO(text), dialect)
    header = [h.strip() for h in next(reader, [])]
    rows = [
        {name: _csv_value(cell) for name, cell in zip(header, line, strict=False) if name}
        for line in reader
        if any(cell.strip() for cell in line)
    ]
    stored = {"format": "csv", "columns": header, CSV_ROWS: rows}
    return SummaryAnswer("csv", orjson.dumps(stored), stored, CSV_ROWS, rows)


def day_of(value: Any) -> date | None:
    """The day a row's date field names (``2026-11-12``, or a time on that day)."""
    if not isinstance(value, str) or len(value) < 10:
        return None
    try:
        return date.fromisoformat(value[:10])
    except ValueError:
        return None


def range_params(plan: StreamPlan, first: date, last: date, timezone: str) -> dict[str, str]:
    """The query of a summary for ``first``..``last``: the range's parameters, then the
    configured ``params`` (which win)."""
    assert plan.range is not None
    names = plan.range.names()
    values = {"from": first.isoformat(), "to": last.isoformat(), "tz": timezone}
    params = {names[role]: value for role, value in values.items() if names[role]}
    return {**params, **plan.params}


class SummaryRun:
    """Reads the summary of one run (see the module docstring)."""

    def __init__(
        self, run: ExtractionState, client: ServiceClient, plan: StreamPlan, result: StreamResult
    ) -> None:
        self.run, self.client, self.plan, self.result = run, client, plan, result

    async def read(self) -> None:
        cfg, plan, result = self.run.config, self.plan, self.result
        assert self.run.con is not None
        today = datetime.now(UTC).date()
        first: date = (
            cfg.backfill_from.date()
            if cfg.backfill_from
            else today - timedelta(days=cfg.summary_days - 1)
        )
        last: date = cfg.backfill_to.date() if cfg.backfill_to else today
        params = range_params(plan, first, last, cfg.summary_timezone)
        response, content = await self.client.get(
            plan.path,
            params,
            result.stats,
            plan.path,
            missing=() if cfg.streams_named else ABSENT,
            parse=False,
        )
        result.pagination, result.pages = "single", 1
        if content is None:
            result.status = "unavailable"
            result.warnings.append(
                f"the service has no summary endpoint ({plan.path} answered "
                f"{response.status_code}), so reconciliation has no service summary to compare "
                f"with; set {_WHERE} enabled = false to skip it"
            )
            return
        sent = ", ".join(f"{k}={v}" for k, v in params.items()) or "none"
        try:
            answer = read_answer(response, content, plan.records)
        except ValueError as exc:
            result.warnings.append(
                f"the summary answered {response.status_code} but {exc}; parameters sent: "
                f"{sent}; nothing was loaded, so reconciliation has nothing to compare"
            )
            return
        if isinstance(answer.data, dict):
            self.run.identity.learn([answer.data])
        shape = LoadShape(plan.fields)
        workspace = self.run.workspace_id
        body, found = self.run.scrubber.whole(workspace, answer.body, answer.data)
        with transaction(self.run.con):
            self.run.identity.record(self.run.con, self.run.run_id)
            now = datetime.now(UTC)
            record_findings(self.run.con, workspace, "summary", found, self.run.run_id, now)
            _, days = load.merge_summary(
                self.run.con, body, self.run.run_id, now,
                self.run.workspace_id, records=answer.records, shape=shape,
                timezone=cfg.summary_timezone,
                raw_id=f"{workspace}|{first}|{last}|{cfg.summary_timezone}",
            )  # fmt: skip
        result.records = days
        day_path = self._day_path(shape)
        result.shape = {
            "format": answer.format,
            "records": {"value": answer.records, "origin": self._origin("records")},
            "range": {"params": sent, "origin": self._origin("range")},
            "fields": dict(plan.fields),
            "days": days,
        }
        if not days:
            self._nothing_typed(answer, sent, day_path)
            return
        answered = sorted(
            {d for r in answer.rows if (d := day_of(value_at(r, day_path))) is not None}
        )
        if answered and (answered[0] < first or answered[-1] > last):
            names = plan.range.names() if plan.range else {}
            result.warnings.append(
                f"the summary answered the days {answered[0]}..{answered[-1]} for the "
                f"{first}..{last} asked with {sent}: the service seems to ignore "
                f"{names.get('from')!r} and {names.get('to')!r}; set {_WHERE} range = "
                '{ from_param = "...", to_param = "..." } (`convo extract --check` finds them)'
            )

    def _origin(self, key: str) -> str:
        return "configured" if key in self.plan.configured else "default"

    @staticmethod
    def _day_path(shape: LoadShape) -> str:
        table = shape.table(SERVICE_SUMMARIES.name)
        column = next(c for c in table.columns if c.name == "date")
        return source_path(column.source) or ""

    def _nothing_typed(self, answer: SummaryAnswer, sent: str, day_path: str) -> None:
        """A 200 that made no typed day: a warning naming what came and what maps it."""
        if answer.rows:
            held = (
                f"{len(answer.rows)} rows at {answer.records or 'the top'!r} with no day at "
                f"{day_path!r} or no metric under the names mapped"
            )
        elif answer.format == "json":
            held = f"no list of rows at {answer.records or 'the top'!r}"
        else:
            held = "no row"
        records = "" if answer.format == "csv" else 'records = "<key of the daily rows>", '
        self.result.warnings.append(
            f"the summary answered {answer.describe()}, which made no typed day ({held}); "
            f"parameters sent: {sent}; map it with {_WHERE} {records}range = {{ from_param = "
            '"...", to_param = "..." } and [extract.fields] "service_summaries.date" = '
            '"<day field>", "service_summaries.conversations" = "<field>", ... (`convo extract '
            "--check --write-config FILE` proposes them); until then reconciliation has nothing "
            "to compare"
        )
