"""`convo transform`: the marts brought up to date with the warehouse in one transaction.

A run is incremental when the marts were built under the same definition
version, zones and threshold: it finds the conversations that changed since
the last transform (decision D-TRANSFORM-CHANGES) and rewrites the partitions
they touch, and their knowledge gaps (all of them when the fallback patterns
changed). Otherwise, or with ``--full``, it rebuilds every partition, in
bounded memory. Either way the marts are the same, row for row, and a
failure or a kill leaves the previous ones whole.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from datetime import UTC, date, datetime
from typing import Any

import duckdb
import orjson

from convo_analytics.topics import TopicConfig, TopicStep, place_topics
from convo_analytics.transform._frames import scalar
from convo_analytics.transform._gaps import FALLBACK_PATTERNS, GapStep, write_gaps
from convo_analytics.transform._mart_set import LIVE, STAGING, drop_staging, swap_in_staging
from convo_analytics.transform._partitions import (
    CHANGED,
    add_topic_changes,
    describe,
    drop_temporaries,
    find_changed_conversations,
    find_new_runs,
    full_reason,
    gaps_reason,
    read_state,
    record_watermarks,
    write_state,
)
from convo_analytics.transform._published import read_marts_cube
from convo_analytics.transform._rebuild import RebuildStats, rebuild_changed, stage_all
from convo_analytics.transform._reconcile import (
    Mismatch,
    Reconciliation,
    reconcile,
    service_days,
)
from convo_analytics.transform._versions import DEFINITION_VERSION
from convo_analytics.warehouse import transaction
from convo_analytics.warehouse._marts import TRANSFORM_RUNS

log = logging.getLogger(__name__)

#: DuckDB's own memory while a transform runs (its default is 80 % of the machine): joins
#: and sorts beyond it spill to disk, so the polars frames have the rest.
DUCKDB_MEMORY_LIMIT = "512MB"
#: Past this share of all conversations changed, recomputing everything costs less (and
#: an incremental run's one transaction would hold that much in memory).
MOSTLY_CHANGED = 0.25


@dataclass(frozen=True, slots=True)
class TransformConfig:
    timezones: tuple[str, ...] = ("UTC",)
    low_confidence_threshold: float = 0.5
    reconcile: bool = True
    #: Relative difference from the service's figure allowed before a mismatch is listed.
    tolerance: float = 0.01
    #: Rebuild every partition even when the marts could be brought up to date.
    full: bool = False
    #: How conversations are placed in topics (and which workspaces to rediscover).
    topics: TopicConfig = field(default_factory=TopicConfig)
    #: Answers that are fallbacks (case-insensitive RE2 expressions; knowledge gaps).
    fallback_patterns: tuple[str, ...] = FALLBACK_PATTERNS


@dataclass(slots=True)
class TransformResult:
    transform_run_id: str
    status: str = "running"
    mode: str = "incremental"
    full_reason: str | None = None
    #: Conversations whose facts were recomputed (all of them when full).
    changed_conversations: int = 0
    conversations: int = 0
    messages: int = 0
    incidents: int = 0
    mart_rows: dict[str, int] = field(default_factory=dict)
    #: The partitions rewritten and why (see ``partitions.describe``).
    partitions: dict[str, Any] = field(default_factory=lambda: {"count": 0, "partitions": []})
    mismatches: list[Mismatch] = field(default_factory=list)
    #: Days of the service's own summary compared (0: nothing to compare with; None: not asked).
    reconciled_days: int | None = None
    #: Those days per zone the marts are built in (a zone without any: 0).
    reconciled_zones: dict[str, int] = field(default_factory=dict)
    duration_seconds: float = 0.0
    error: str | None = None
    #: Conversations placed in topics, and the workspaces whose topics were (re)discovered.
    topics: TopicStep = field(default_factory=TopicStep)
    #: The knowledge gaps rewritten.
    gaps: GapStep = field(default_factory=GapStep)

    def as_json(self) -> dict[str, Any]:
        return {
            "transform_run_id": self.transform_run_id,
            "status": self.status,
            "mode": self.mode,
            "full_reason": self.full_reason,
            "definition_version": DEFINITION_VERSION,
            "changed_conversations": self.changed_conversations,
            "conversations": self.conversations,
            "messages": self.messages,
            "incidents": self.incidents,
            "mart_rows": self.mart_rows,
            "partitions": self.partitions,
            "mismatches": [m.as_json() for m in self.mismatches],
            "reconciled_days": self.reconciled_days,
            "reconciliation": self.reconciliation.as_json(),
            "duration_seconds": round(self.duration_seconds, 3),
            "error": self.error,
            "topics": self.topics.as_json(),
            "knowledge_gaps": self.gaps.as_json(),
        }

    @property
    def reconciliation(self) -> Reconciliation:
        """What the comparison with the service's own summary found, in one object."""
        return Reconciliation(
            dict(self.reconciled_zones), tuple(self.mismatches), self.reconciled_days is not None
        )


#: DuckDB settings while a transform runs: the memory above, and rows inserted in any
#: order (the marts have no order; keeping it makes DuckDB insert on one thread).
_SETTINGS = {"memory_limit": DUCKDB_MEMORY_LIMIT, "preserve_insertion_order": "false"}


@contextmanager
def _duckdb_settings(con: duckdb.DuckDBPyConnection) -> Iterator[None]:
    before = {name: scalar(con, f"SELECT current_setting('{name}')") for name in _SETTINGS}
    for name, value in _SETTINGS.items():
        con.execute(f"SET {name} = '{value}'")
    try:
        yield
    finally:
        for name, value in before.items():
            if value is not None:
                con.execute(f"SET {name} = '{value}'")


def run_transform(con: duckdb.DuckDBPyConnection, config: TransformConfig) -> TransformResult:
    """Bring the marts up to date; on failure the previous marts stay as they were."""
    result = TransformResult(transform_run_id=uuid.uuid4().hex[:16])
    started = datetime.now(UTC)
    clock = time.perf_counter()

    def finish(stats: RebuildStats) -> None:
        _finish(con, config, result, stats)
        result.status = "ok"
        result.duration_seconds = time.perf_counter() - clock
        con.execute(*_run_row(result, config, started))

    try:
        with _duckdb_settings(con):
            drop_staging(con)  # what a run killed while staging left
            reason = _incremental(con, config, finish, result)
            if reason is not None:
                log.info("transform: rebuilding every partition: %s", reason)
                result.mode, result.full_reason = "full", reason
                find_new_runs(con, all_runs=True)
                done = result.topics.discovered  # an incremental attempt's rediscovery stays
                topic_config = replace(config.topics, rediscover=()) if done else config.topics
                with transaction(con):  # its own: the marts' rebuild re-reads what it wrote
                    step = place_topics(con, topic_config, result.transform_run_id, None)
                result.topics = TopicStep(step.placed, {**done, **step.discovered})
                stats = stage_all(con, tuple(config.timezones), config.low_confidence_threshold)
                with transaction(con):  # staged with the marts they are made of
                    written = _gaps(con, config, None, staged=True)
                result.gaps = GapStep(written, "all")
                with transaction(con):
                    swap_in_staging(con)
                    finish(stats)
    except Exception as exc:
        result.status = "failed"
        result.error = f"{type(exc).__name__}: {exc}"
        result.duration_seconds = time.perf_counter() - clock
        drop_staging(con)
        with transaction(con):
            con.execute(*_run_row(result, config, started))
        raise
    finally:
        drop_temporaries(con)
    if result.mismatches:
        log.warning("%s", result.reconciliation.describe())
    for m in result.mismatches:  # each one in the log (all of them in transform_runs)
        log.info("reconciliation: %s", m.describe())
    return result


def _incremental(
    con: duckdb.DuckDBPyConnection,
    config: TransformConfig,
    finish: Callable[[RebuildStats], None],
    result: TransformResult,
) -> str | None:
    """Bring the marts up to date in place, in one transaction; or, without writing
    anything, say why every partition must be rebuilt instead."""
    zones, threshold = tuple(config.timezones), config.low_confidence_threshold
    run_id = result.transform_run_id
    state = read_state(con)
    reason = full_reason(state, zones, threshold, asked=config.full)
    if reason is not None:
        return reason
    recompute = gaps_reason(state, config.fallback_patterns)
    with transaction(con):
        find_new_runs(con, all_runs=False)
        find_changed_conversations(con)
        result.topics = place_topics(con, config.topics, run_id, CHANGED)
        changed = add_topic_changes(con)
        total = int(scalar(con, "SELECT count(*) FROM conversations"))
        if changed > 1000 and changed > MOSTLY_CHANGED * total:
            return f"most conversations changed ({changed} of {total})"
        stats = rebuild_changed(con, zones, threshold)
        written = _gaps(con, config, None if recompute else CHANGED)
        result.gaps = GapStep(written, "all" if recompute else "changed", recompute)
        finish(stats)
    return None


def _gaps(
    con: duckdb.DuckDBPyConnection,
    config: TransformConfig,
    candidates: str | None,
    *,
    staged: bool = False,
) -> int:
    """Rewrite the knowledge gaps of the candidates (None: all), from the marts just
    rewritten (or staged)."""
    marts = STAGING if staged else LIVE
    return write_gaps(
        con, marts, config.low_confidence_threshold, config.fallback_patterns, candidates
    )


def _finish(
    con: duckdb.DuckDBPyConnection,
    config: TransformConfig,
    result: TransformResult,
    stats: RebuildStats,
) -> None:
    """What every run writes with its marts: watermarks, state, counts, reconciliation."""
    full = result.mode == "full"
    record_watermarks(con, result.transform_run_id, replace=full)
    con.execute("DELETE FROM transform_pending")  # recomputed with the rest (D-ERASURE)
    write_state(
        con,
        tuple(config.timezones),
        config.low_confidence_threshold,
        result.transform_run_id,
        full=full,
        patterns=config.fallback_patterns,
    )
    result.changed_conversations = stats.conversations
    result.messages = stats.messages
    result.partitions = describe(stats.partitions)
    result.mart_rows = {
        table.name: int(scalar(con, f"SELECT count(*) FROM {table.name}")) for table in LIVE.all()
    }
    result.conversations = result.mart_rows["mart_conversations"]
    result.incidents = result.mart_rows["mart_guardrail_incidents"]
    if config.reconcile:
        _reconcile(con, config, result)


def _reconcile(
    con: duckdb.DuckDBPyConnection, config: TransformConfig, result: TransformResult
) -> None:
    """Compare the new marts with the service's summary, day by day, in every zone."""
    result.reconciled_days = 0
    for tz in config.timezones:
        days = service_days(con, tz)
        result.reconciled_zones[tz] = days
        if not days:
            continue
        result.reconciled_days += days
        first, last = con.execute(
            "SELECT min(date), max(date) FROM service_summaries WHERE timezone = ?", [tz]
        ).fetchall()[0]
        assert isinstance(first, date) and isinstance(last, date)
        cube = read_marts_cube(
            con, tz, config.low_confidence_threshold, first=first, last=last, by_dimension=False
        )
        result.mismatches += reconcile(con, cube, config.tolerance)
    if not result.reconciled_days:
        log.info("%s", result.reconciliation.describe())


def _run_row(
    result: TransformResult, config: TransformConfig, started: datetime
) -> tuple[str, list[Any]]:
    cols = [c.name for c in TRANSFORM_RUNS.columns]
    values = [
        result.transform_run_id,
        started,
        datetime.now(UTC),
        result.status,
        list(config.timezones),
        config.low_confidence_threshold,
        result.conversations,
        result.messages,
        result.incidents,
        orjson.dumps(result.mart_rows).decode(),
        orjson.dumps([m.as_json() for m in result.mismatches]).decode(),
        result.duration_seconds,
        result.error,
        result.mode,
        result.full_reason,
        DEFINITION_VERSION,
        result.changed_conversations,
        orjson.dumps(result.partitions).decode(),
    ]
    marks = ", ".join("?" * len(cols))
    sql = f"INSERT INTO {TRANSFORM_RUNS.name} ({', '.join(cols)}) VALUES ({marks})"
    return sql, values
