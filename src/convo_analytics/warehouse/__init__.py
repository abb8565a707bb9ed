"""The DuckDB warehouse: table definitions, opening it, and loading fetched pages."""

from convo_analytics.warehouse._connection import (
    ALL_TABLES,
    WarehouseBusy,
    defer_checkpoints,
    ensure_schema,
    hold_bookmark,
    open_warehouse,
    read_bookmark,
    require_existing,
    write_bookmark,
)
from convo_analytics.warehouse._load import WHOLE_BODY, PageCounts, RecordPaths
from convo_analytics.warehouse._monitor_tables import MONITOR_EVALUATIONS
from convo_analytics.warehouse._privacy_tables import FindingRow, record_findings
from convo_analytics.warehouse._sql import sql_literal
from convo_analytics.warehouse._tables import Column, Table
from convo_analytics.warehouse._transaction import transaction

__all__ = [
    "ALL_TABLES",
    "MONITOR_EVALUATIONS",
    "WHOLE_BODY",
    "Column",
    "FindingRow",
    "PageCounts",
    "RecordPaths",
    "Table",
    "WarehouseBusy",
    "defer_checkpoints",
    "ensure_schema",
    "hold_bookmark",
    "open_warehouse",
    "read_bookmark",
    "record_findings",
    "require_existing",
    "sql_literal",
    "transaction",
    "write_bookmark",
]
