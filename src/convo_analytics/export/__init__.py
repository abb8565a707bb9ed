"""Exports: the /v1/analytics/summary-compatible summary and the guardrail incident log."""

from convo_analytics.export._guardrails import FORMATS, GuardrailExport, export_guardrails
from convo_analytics.export._summary import (
    MAX_SUMMARY_DAYS,
    check_range,
    empty_range_warning,
    export_summary,
    parse_day,
    warehouse_workspace,
)

__all__ = [
    "FORMATS",
    "MAX_SUMMARY_DAYS",
    "GuardrailExport",
    "check_range",
    "empty_range_warning",
    "export_guardrails",
    "export_summary",
    "parse_day",
    "warehouse_workspace",
]
