"""Reconciliation: our metrics against the service's own summary for the same days.

The extractor stores what GET /v1/analytics/summary answered in
``service_summaries``; every day and metric there is compared with the same
metric made from the warehouse. A difference larger than the tolerance
(relative to the larger of the two, at least one unit) is a mismatch; what a
mismatch means and how to read one is in docs/warehouse.md ("Reconciliation").
:class:`Reconciliation` is what a run reports: the days compared in each zone
and the differences, and in words whether there was nothing to compare (no
service summary for any day), everything matched, or which days differ.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date
from typing import Any, Literal

import duckdb
import polars as pl

from convo_analytics.transform._cube import Cube
from convo_analytics.transform._frames import read_frame
from convo_analytics.transform._metrics import (
    COUNTS,
    LATENCY_QUANTILES,
    MEDIANS,
    RATES,
    metrics_table,
)
from convo_analytics.warehouse._tables import snake_case

#: Metrics that depend on the low-confidence threshold (compared only when both used the same).
_THRESHOLDED = ("lowConfidenceResponses", "lowConfidenceShare")


@dataclass(frozen=True, slots=True)
class Mismatch:
    timezone: str
    date: date
    metric: str
    warehouse: float | None
    service: float | None
    #: The workspace whose service summary this is (each workspace is compared alone).
    workspace_id: str | None = None

    def describe(self) -> str:
        where = f"{self.workspace_id} " if self.workspace_id else ""
        return (
            f"{where}{self.date} ({self.timezone}) {self.metric}: warehouse {self.warehouse}, "
            f"service {self.service}"
        )

    def as_json(self) -> dict[str, Any]:
        return {
            "workspace_id": self.workspace_id,
            "timezone": self.timezone,
            "date": self.date.isoformat(),
            "metric": self.metric,
            "warehouse": self.warehouse,
            "service": self.service,
        }


#: What a reconciliation found: no service summary day to compare with, every compared
#: figure within the tolerance, differences, or not asked (``--no-reconcile``).
Outcome = Literal["nothing to compare", "match", "differences", "off"]


@dataclass(frozen=True, slots=True)
class Reconciliation:
    """A transform's comparison with the service's own summary, as a run reports it."""

    #: Days of the service's summary compared, per zone the marts are built in (0: none).
    days: dict[str, int] = field(default_factory=dict)
    mismatches: tuple[Mismatch, ...] = ()
    #: False when the run was told not to reconcile.
    asked: bool = True

    @property
    def compared(self) -> int:
        return sum(self.days.values())

    @property
    def outcome(self) -> Outcome:
        if not self.asked:
            return "off"
        if not self.compared:
            return "nothing to compare"
        return "differences" if self.mismatches else "match"

    def differing_days(self) -> list[tuple[str | None, str, date]]:
        """The (workspace, zone, day)s with at least one difference, in order."""
        found = {(m.workspace_id, m.timezone, m.date) for m in self.mismatches}
        return sorted(found, key=lambda k: (k[0] or "", k[1], k[2]))

    def describe(self) -> str:
        """One sentence: what was compared and what was found (never "0 mismatches" when
        nothing was compared)."""
        if self.outcome == "off":
            return "reconciliation not run (--no-reconcile)"
        if self.outcome == "nothing to compare":
            zones = ", ".join(self.days) or "any zone"
            return (
                "reconciliation: nothing to compare, the service's own summary has no day in "
                f"{zones} (service_summaries is empty there)"
            )
        missing = [tz for tz, n in self.days.items() if not n]
        tail = f"; no service summary in {', '.join(missing)}" if missing else ""
        days = f"{self.compared:,} day{'s' if self.compared != 1 else ''}"
        if self.outcome == "match":
            return f"reconciliation: {days} of the service's own summary match{tail}"
        differing = self.differing_days()
        first, last = min(d for _, _, d in differing), max(d for _, _, d in differing)
        span = f"{first}" if first == last else f"{first} to {last}"
        n = len(self.mismatches)
        return (
            f"reconciliation: {n:,} difference{'s' if n != 1 else ''} from the service's own "
            f"summary on {len(differing):,} of {days} ({span}){tail}"
        )

    def as_json(self, *, with_mismatches: bool = False) -> dict[str, Any]:
        out: dict[str, Any] = {
            "outcome": self.outcome,
            "days_compared": self.compared,
            "zones": dict(self.days),
            "differences": len(self.mismatches),
            "days_differing": [
                {"workspace_id": ws, "timezone": tz, "date": day.isoformat()}
                for ws, tz, day in self.differing_days()
            ],
            "text": self.describe(),
        }
        if with_mismatches:
            out["mismatches"] = [m.as_json() for m in self.mismatches]
        return out


def _basis(metric: str) -> str:
    """The count whose presence says a rate's or percentile's null is a real "no data"."""
    if metric in RATES:
        return RATES[metric][1]
    if metric in LATENCY_QUANTILES:
        return "assistantResponses"
    return "conversations"


def _reported(row: dict[str, Any], metric: str) -> bool:
    """A null from the service is a figure only for rates and percentiles over reported counts."""
    if metric in COUNTS:
        return False
    return row.get(snake_case(_basis(metric))) is not None


def _differs(ours: float | None, theirs: float | None, tolerance: float) -> bool:
    if ours is None or theirs is None:
        return (ours is None) != (theirs is None)
    scale = max(abs(ours), abs(theirs), 1.0)
    return abs(ours - theirs) > tolerance * scale + 1e-9


def service_days(con: duckdb.DuckDBPyConnection, timezone: str) -> int:
    """How many days of the service's own summary there are to compare with in ``timezone``:
    days with a metric (none when the service has no summary endpoint, D-SUMMARY-OPTIONAL,
    or its summary maps no metric, D-SUMMARY-SHAPES)."""
    metrics = [snake_case(m) for m in (*COUNTS, *RATES, *LATENCY_QUANTILES, *MEDIANS)]
    reported = " OR ".join(f"{m} IS NOT NULL" for m in metrics)
    rows = con.execute(
        f"SELECT count(*) FROM service_summaries WHERE timezone = ? AND ({reported})", [timezone]
    ).fetchall()
    return int(rows[0][0])


def reconcile(con: duckdb.DuckDBPyConnection, cube: Cube, tolerance: float) -> list[Mismatch]:
    """Every (workspace, day, metric) where the warehouse and the service disagree beyond
    ``tolerance``: each workspace's summary rows against that workspace's rows of the cube
    (a service summary is one workspace's, D-WORKSPACE-ID)."""
    service = read_frame(
        con,
        "SELECT * FROM service_summaries WHERE timezone = ? ORDER BY workspace_id, date",
        [cube.timezone],
    )
    out: list[Mismatch] = []
    for (workspace_id,), rows in service.group_by("workspace_id", maintain_order=True):
        out += _reconcile_workspace(cube, str(workspace_id), rows, tolerance)
    return out


def _reconcile_workspace(
    cube: Cube, workspace_id: str, service: pl.DataFrame, tolerance: float
) -> list[Mismatch]:
    first, last = service["date"].min(), service["date"].max()
    assert isinstance(first, date) and isinstance(last, date)
    # a cube of one workspace comes summed over it (no workspace_id column): nothing to narrow
    narrowed = "workspace_id" in cube.conversations.columns
    mine_cube = cube.of_workspaces([workspace_id]) if narrowed else cube
    ours = {row["date"]: row for row in metrics_table(mine_cube, first, last).iter_rows(named=True)}
    # A metric null on every day is one the service does not report (a summary of another
    # shape maps only some, D-SUMMARY-SHAPES): nothing to compare, not a difference.
    metrics = [
        m
        for m in (*COUNTS, *RATES, *LATENCY_QUANTILES, *MEDIANS)
        if snake_case(m) in service.columns and service[snake_case(m)].null_count() < service.height
    ]
    out = []
    for row in service.iter_rows(named=True):
        same_threshold = row.get("low_confidence_threshold") == cube.low_confidence_threshold
        mine = ours[row["date"]]
        for metric in metrics:
            column = snake_case(metric)
            if column not in row or (metric in _THRESHOLDED and not same_threshold):
                continue
            if row[column] is None and not _reported(row, metric):
                continue  # the service did not report it: nothing to compare
            if _differs(mine.get(metric), row[column], tolerance):
                out.append(
                    Mismatch(
                        cube.timezone, row["date"], metric, mine.get(metric), row[column],
                        workspace_id,
                    )
                )  # fmt: skip
    return out
