"""The set of mart tables a rebuild writes: the marts themselves, or their staging copies
(the knowledge gaps among them: they are rewritten with the facts they are made of).

An incremental run changes the marts in place, in one transaction. A full rebuild
writes every row again; DuckDB keeps what a transaction appends in memory until it
commits, so one transaction holding the whole history would need memory that grows
with it. A full rebuild therefore fills staging copies, committing a chunk or a month
at a time, and then swaps them in for the marts in one short transaction (decision
D-TRANSFORM-MEMORY): readers see the old marts or the new ones, and a run killed while
staging leaves the marts whole (the next run drops what it staged).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import duckdb

from convo_analytics.warehouse import Table
from convo_analytics.warehouse._marts import (
    DAILY_MARTS,
    MART_CONVERSATION_FOOTPRINTS,
    MART_CONVERSATIONS,
    MART_DAILY_PERCENTILES,
    MART_ESCALATIONS,
    MART_GUARDRAIL_INCIDENTS,
    MART_SLICES,
)
from convo_analytics.warehouse._topic_tables import KNOWLEDGE_GAPS

STAGING_PREFIX = "_staging_"


@dataclass(frozen=True, slots=True)
class MartSet:
    """The tables that play each mart's part."""

    conversations: Table
    footprints: Table
    escalations: Table
    incidents: Table
    slices: Table
    daily: dict[str, Table]
    percentiles: Table
    #: ``knowledge_gaps`` (``transform._gaps``), made from the facts above.
    gaps: Table

    def all(self) -> tuple[Table, ...]:
        return (
            self.conversations,
            self.footprints,
            self.escalations,
            self.incidents,
            self.slices,
            *self.daily.values(),
            self.percentiles,
            self.gaps,
        )


LIVE = MartSet(
    conversations=MART_CONVERSATIONS,
    footprints=MART_CONVERSATION_FOOTPRINTS,
    escalations=MART_ESCALATIONS,
    incidents=MART_GUARDRAIL_INCIDENTS,
    slices=MART_SLICES,
    daily=dict(DAILY_MARTS),
    percentiles=MART_DAILY_PERCENTILES,
    gaps=KNOWLEDGE_GAPS,
)


def _staged(table: Table) -> Table:
    return replace(table, name=STAGING_PREFIX + table.name)


STAGING = MartSet(
    conversations=_staged(MART_CONVERSATIONS),
    footprints=_staged(MART_CONVERSATION_FOOTPRINTS),
    escalations=_staged(MART_ESCALATIONS),
    incidents=_staged(MART_GUARDRAIL_INCIDENTS),
    slices=_staged(MART_SLICES),
    daily={name: _staged(table) for name, table in DAILY_MARTS.items()},
    percentiles=_staged(MART_DAILY_PERCENTILES),
    gaps=_staged(KNOWLEDGE_GAPS),
)


def drop_staging(con: duckdb.DuckDBPyConnection) -> None:
    """Remove what a full rebuild staged (a previous run killed while staging, or this one)."""
    for table in STAGING.all():
        con.execute(f"DROP TABLE IF EXISTS {table.name}")


def create_staging(con: duckdb.DuckDBPyConnection) -> None:
    drop_staging(con)
    for table in STAGING.all():
        con.execute(table.ddl())


def swap_in_staging(con: duckdb.DuckDBPyConnection) -> None:
    """Replace every mart by its staged copy (inside the caller's transaction)."""
    for live, staged in zip(LIVE.all(), STAGING.all(), strict=True):
        con.execute(f"DROP TABLE IF EXISTS {live.name}")
        con.execute(f"ALTER TABLE {staged.name} RENAME TO {live.name}")
