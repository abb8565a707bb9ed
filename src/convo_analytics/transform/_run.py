"""`convo transform`: facts and daily cubes rebuilt from the warehouse and swapped in at once."""

from __future__ import annotations

import logging
import time
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import duckdb
import orjson
import polars as pl

from convo_analytics.transform._cube import Cube, build_cube
from convo_analytics.transform._facts import read_facts
from convo_analytics.transform._frames import replace_marts
from convo_analytics.transform._metrics import daily_percentiles
from convo_analytics.transform._reconcile import Mismatch, reconcile, service_days
from convo_analytics.warehouse import Table, transaction
from convo_analytics.warehouse._marts import (
    DAILY_MARTS,
    MART_CONVERSATIONS,
    MART_DAILY_PERCENTILES,
    MART_ESCALATIONS,
    MART_GUARDRAIL_INCIDENTS,
    MART_SLICES,
    TRANSFORM_RUNS,
)
from convo_analytics.warehouse._tables import snake_case

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class TransformConfig:
    timezones: tuple[str, ...] = ("UTC",)
    low_confidence_threshold: float = 0.5
    reconcile: bool = True
    #: Relative difference from the service's figure allowed before a mismatch is listed.
    tolerance: float = 0.01


@dataclass(slots=True)
class TransformResult:
    transform_run_id: str
    status: str = "running"
    conversations: int = 0
    messages: int = 0
    incidents: int = 0
    mart_rows: dict[str, int] = field(default_factory=dict)
    mismatches: list[Mismatch] = field(default_factory=list)
    #: Days of the service's own summary compared (0: nothing to compare with; None: not asked).
    reconciled_days: int | None = None
    duration_seconds: float = 0.0
    error: str | None = None

    def as_json(self) -> dict[str, Any]:
        return {
            "transform_run_id": self.transform_run_id,
            "status": self.status,
            "conversations": self.conversations,
            "messages": self.messages,
            "incidents": self.incidents,
            "mart_rows": self.mart_rows,
            "mismatches": [m.as_json() for m in self.mismatches],
            "reconciled_days": self.reconciled_days,
            "duration_seconds": round(self.duration_seconds, 3),
            "error": self.error,
        }


def _daily_frames(cubes: list[Cube]) -> dict[Table, pl.DataFrame]:
    frames: dict[Table, pl.DataFrame] = {}
    for name, table in DAILY_MARTS.items():
        parts = []
        for cube in cubes:
            part = getattr(cube, name).with_columns(timezone=pl.lit(cube.timezone))
            if name == "messages":
                part = part.with_columns(
                    low_confidence_threshold=pl.lit(cube.low_confidence_threshold)
                )
            parts.append(part)
        frames[table] = pl.concat(parts, how="diagonal_relaxed")
    return frames


def _percentile_rows(cube: Cube) -> pl.DataFrame:
    frame = daily_percentiles(cube).with_columns(timezone=pl.lit(cube.timezone))
    return frame.rename({name: snake_case(name) for name in frame.columns if name != "date"})


def run_transform(con: duckdb.DuckDBPyConnection, config: TransformConfig) -> TransformResult:
    """Rebuild every mart; on failure the previous marts stay as they were."""
    result = TransformResult(transform_run_id=uuid.uuid4().hex[:16])
    started = datetime.now(UTC)
    clock = time.perf_counter()
    try:
        facts = read_facts(con)
        cubes = [build_cube(facts, tz, config.low_confidence_threshold) for tz in config.timezones]
        frames: dict[Table, pl.DataFrame] = {
            MART_CONVERSATIONS: facts.conversations,
            MART_ESCALATIONS: facts.escalations,
            MART_GUARDRAIL_INCIDENTS: facts.incidents,
            MART_SLICES: facts.slices,
            **_daily_frames(cubes),
            MART_DAILY_PERCENTILES: pl.concat(
                [_percentile_rows(cube) for cube in cubes], how="diagonal_relaxed"
            ),
        }
        result.conversations = facts.conversations.height
        result.messages = facts.messages.height
        result.incidents = facts.incidents.height
        result.mart_rows = {table.name: frame.height for table, frame in frames.items()}
        if config.reconcile:
            result.reconciled_days = sum(service_days(con, cube.timezone) for cube in cubes)
            for cube in cubes:
                result.mismatches += reconcile(con, cube, config.tolerance)
            if not result.reconciled_days:
                log.info("reconciliation: no service summary to compare with")
        for m in result.mismatches:
            log.warning("reconciliation: %s", m.describe())
        result.status = "ok"
        result.duration_seconds = time.perf_counter() - clock
        replace_marts(con, frames, [_run_row(result, config, started)])
    except Exception as exc:
        result.status = "failed"
        result.error = f"{type(exc).__name__}: {exc}"
        result.duration_seconds = time.perf_counter() - clock
        with transaction(con):
            con.execute(*_run_row(result, config, started))
        raise
    return result


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
    ]
    marks = ", ".join("?" * len(cols))
    sql = f"INSERT INTO {TRANSFORM_RUNS.name} ({', '.join(cols)}) VALUES ({marks})"
    return sql, values
