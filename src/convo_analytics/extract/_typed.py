"""A stream's typed columns: which fields fill them, decided once, and those left empty.

Before a stream's first commit, its first records (and, for conversations,
their first details and transcripts) decide the :class:`LoadShape` every
batch of the run is loaded with: configured paths, the sandbox's names where
the records carry them, usual names that fit (``_fields``). Tables with no
sample this run keep what the previous run detected. After the stream, a
column that stayed NULL in every row it loaded, and whose field the records
never wrote, is a warning naming the ``[extract.fields]`` key to set.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import duckdb

from convo_analytics.extract._detail import find_transcript
from convo_analytics.extract._fields import FieldFinding, find_fields
from convo_analytics.extract._shapes import FieldMap, time_format_of, value_at
from convo_analytics.extract._source import StreamPlan
from convo_analytics.warehouse._shape import DETAIL_LISTS, FIELD_TABLES, LoadShape, field_key

if TYPE_CHECKING:
    from convo_analytics.extract._detail import DetailReader
    from convo_analytics.extract._paging import Paginator

log = logging.getLogger("convo.extract")

__all__ = ["TypedFields", "empty_columns"]

#: Transcript items sampled per run to find the message fields.
_ITEMS = 500
#: A column filled in at most this share of a run's rows counts as empty.
_EMPTY_SHARE = 0.01
#: A configured path that filled nothing is worth a warning from this many rows on (fewer
#: may all lack the field: few conversations have feedback).
_CONFIGURED_ROWS = 20


def empty_columns(
    con: duckdb.DuckDBPyConnection, table: str, run_id: str, workspace: str
) -> dict[str, tuple[int, int]]:
    """Per sourced column of ``table``: rows this run loaded, and how many it filled."""
    columns = [c.name for c in FIELD_TABLES[table].columns if c.source is not None]
    run_column = (
        "run_id" if "run_id" in {c.name for c in FIELD_TABLES[table].columns} else ("last_run_id")
    )
    counts = ", ".join(f"count({c})" for c in columns)
    (row,) = con.execute(
        f"SELECT count(*), {counts} FROM {table} WHERE {run_column} = ? AND workspace_id = ?",
        [run_id, workspace],
    ).fetchall()
    return {c: (int(row[0]), int(n)) for c, n in zip(columns, row[1:], strict=True)}


class TypedFields:
    """Decides a stream's load shape from its first records and reports what stays empty."""

    def __init__(self, plan: StreamPlan, previous: Mapping[str, Any] | None) -> None:
        self.plan = plan
        self.configured = dict(plan.fields)
        self.previous = dict(previous or {})
        self.decided = False
        self.findings: dict[str, FieldFinding] = {}
        before_transcript = self.previous.get("transcript", {})
        self.transcript: tuple[str, str] = (  # key, origin
            str(before_transcript.get("key") or ""),
            "previous run" if before_transcript.get("key") else "",
        )
        #: What an earlier run detected for tables this run has no sample of.
        self.carried = {
            k: v for k, v in self._previous_fields().items() if k not in self.configured
        }
        self.id_field: str | None = plan.id
        self.page_size: dict[str, int] = {}
        self.key_fields: FieldMap | None = None
        inc = plan.incremental
        before = self.previous.get("incremental", {})
        self.time_format: str = inc.format
        if inc.format != "auto":
            self.format_origin = "configured"
        else:
            self.time_format = str(before.get("format") or "iso")
            self.format_origin = "previous run" if before.get("format") else "default"
        self.shape = LoadShape(self._previous_fields(), self._lists(None))

    def _previous_fields(self, tables: tuple[str, ...] | None = None) -> dict[str, str]:
        """Configured paths, and what the previous run detected (for ``tables``, or all)."""
        fields = {
            key: str(found["path"])
            for key, found in self.previous.get("fields", {}).items()
            if found.get("origin") == "detected" and (tables is None or key.split(".")[0] in tables)
        }
        return {**fields, **self.configured}

    def _lists(self, detected: str | None) -> dict[str, str]:
        lists = dict(self.plan.lists)
        if "messages" not in lists:
            key = detected or self.previous.get("transcript", {}).get("key")
            if key:
                lists["messages"] = str(key)
        return lists

    def note_fields(self, fields: FieldMap, records: list[dict[str, Any]]) -> None:
        """The stream's key fields; the incremental format follows how records write times."""
        self.key_fields = fields
        self.id_field = fields.id
        if self.plan.incremental.format == "auto" and fields.updated:
            updated = fields.updated
            value = next((v for r in records if (v := value_at(r, updated))), None)
            if value is not None:
                self.time_format, self.format_origin = time_format_of(value), "detected"

    def tables(self) -> list[str]:
        if self.plan.name == "conversations":
            return ["conversations", "messages"]
        return ["leads"] if self.plan.name == "leads" else []

    def decide(self, records: list[dict[str, Any]], details: list[dict[str, Any]]) -> None:
        """Fix the load shape from the first page's records and details."""
        keys = [
            k
            for k in (self.key_fields or FieldMap(None, "id", None, None)).__dict__.values()
            if isinstance(k, str)
        ]
        found: dict[str, FieldFinding] = {}
        unsampled: list[str] = []
        if self.plan.name == "leads":
            found.update(find_fields("leads", records, self.configured, keys=keys))
        elif self.plan.name == "conversations":
            found.update(
                find_fields("conversations", [*details, *records], self.configured, keys=keys)
            )
            key = self._transcript_key(details)
            lists = [v for d in details if isinstance(v := value_at(d, key), list)]
            items = [m for items in lists for m in items if isinstance(m, dict)]
            if details:
                found.update(find_fields("messages", items[:_ITEMS], self.configured))
            else:
                unsampled.append("messages")
        self.findings = found
        fields = self._previous_fields(tuple(unsampled))
        self.carried = {k: v for k, v in fields.items() if k not in self.configured}
        fields.update({k: f.path for k, f in found.items() if f.origin == "detected" and f.path})
        self.shape = LoadShape(fields, self._lists(self.transcript[0] or None))
        self.decided = True
        self._log()

    def _transcript_key(self, details: list[dict[str, Any]]) -> str:
        configured = self.plan.lists.get("messages")
        if configured is not None:
            self.transcript = (configured, "configured")
        elif not details:
            before = str(self.previous.get("transcript", {}).get("key") or DETAIL_LISTS["messages"])
            self.transcript = (before, "previous run" if before != "messages" else "default")
        elif any(isinstance(d.get("messages"), list) for d in details):
            self.transcript = ("messages", "default")
        elif (found := find_transcript(details)) is not None:
            self.transcript = (found, "detected")
        else:
            self.transcript = ("messages", "missing")
        return self.transcript[0]

    def _log(self) -> None:
        detected = [f"{k} <- {f.path}" for k, f in self.findings.items() if f.origin == "detected"]
        if self.transcript[1] == "detected":
            detected.append(f"transcript <- {self.transcript[0]}")
        configured = sorted(self.plan.configured | set(self.configured))
        log.info(
            "%s: configured: %s; detected fields: %s",
            self.plan.name,
            ", ".join(configured) or "nothing (the sandbox's shape)",
            ", ".join(detected) or "none needed",
        )

    def null_warnings(self, table: str, counts: Mapping[str, tuple[int, int]]) -> list[str]:
        """A warning per column this run left NULL although its field may be named otherwise."""
        out = []
        for column, (rows, filled) in counts.items():
            key = field_key(table, column)
            finding = self.findings.get(key)
            if finding is None or rows == 0 or filled > rows * _EMPTY_SHARE:
                continue
            if finding.origin == "missing":
                seen = ", ".join(finding.candidates) or "none that fit"
                default = next(
                    (c.source for c in FIELD_TABLES[table].columns if c.name == column), ""
                )
                out.append(
                    f"{key} is NULL in all {rows} rows this run loaded: the records have no "
                    f'{(default or "")[2:]!r} field; set [extract.fields] "{key}" = "<path>" '
                    f'(keys seen that could fill it: {seen}), or "" if the service has none'
                )
            elif finding.origin == "configured" and finding.path and rows >= _CONFIGURED_ROWS:
                out.append(
                    f"{key} is NULL in all {rows} rows this run loaded although [extract.fields] "
                    f"maps it to {finding.path!r}; check that path"
                )
        return out

    def describe(
        self,
        paginator: Paginator | None,
        fields: FieldMap | None,
        envelope: str | None,
        details: DetailReader | None,
    ) -> dict[str, Any]:
        """How the stream was read, each value with its origin (the run log, ``extract_runs``)."""
        plan = self.plan

        def origin(name: str) -> str:
            return "configured" if name in plan.configured else "detected"

        out: dict[str, Any] = {
            "pagination": {
                "style": paginator.style if paginator else None,
                "origin": "configured" if plan.paginator.type != "auto" else "detected",
                "options": plan.paginator.options(),
            },
            "records": {
                "value": envelope if envelope is not None else "",
                "origin": origin("records"),
            },
            "params": {
                "value": plan.params,
                "origin": "configured" if "params" in plan.configured else "default",
            },
            "pageSize": self.page_size,
            "incremental": {
                "param": plan.incremental.param,
                "format": self.time_format,
                "origin": self.format_origin,
            },
            "fields": {
                **{k: {"path": path, "origin": "detected"} for k, path in self.carried.items()},
                **{
                    k: {"path": f.path, "origin": f.origin}
                    for k, f in self.findings.items()
                    if f.origin in ("configured", "detected")
                },
            },
            "missing": sorted(k for k, f in self.findings.items() if f.origin == "missing"),
        }
        if fields is not None:
            for role in ("id", "updated", "created"):
                out[role] = {"value": getattr(fields, role), "origin": origin(role)}
        if details is not None:
            out["detail"] = details.describe()
            out["transcript"] = {"key": self.transcript[0], "origin": self.transcript[1]}
        return out
