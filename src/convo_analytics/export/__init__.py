"""Exports: the /v1/analytics/summary-compatible summary, the guardrail incident log and
the knowledge-gap report, of one workspace, several, or all of them rolled up;
:func:`export_options` reads what they are written with from the settings."""

from convo_analytics.export._configure import ExportOptions, export_options, recent_days
from convo_analytics.export._gaps import (
    GAP_FORMATS,
    GapExport,
    default_gap_range,
    export_knowledge_gaps,
    writable,
)
from convo_analytics.export._guardrails import FORMATS, GuardrailExport, export_guardrails
from convo_analytics.export._summary import (
    MAX_SUMMARY_DAYS,
    SummaryScope,
    check_range,
    choose_summary,
    empty_range_warning,
    export_summary,
    parse_day,
    workspace_summary,
)
from convo_analytics.export._workspaces import (
    ALL_WORKSPACES,
    WarehouseWorkspace,
    file_label,
    find_workspace,
    summary_scope,
    warehouse_workspaces,
)

__all__ = [
    "ALL_WORKSPACES",
    "FORMATS",
    "GAP_FORMATS",
    "MAX_SUMMARY_DAYS",
    "ExportOptions",
    "GapExport",
    "GuardrailExport",
    "SummaryScope",
    "WarehouseWorkspace",
    "check_range",
    "choose_summary",
    "default_gap_range",
    "empty_range_warning",
    "export_guardrails",
    "export_knowledge_gaps",
    "export_options",
    "export_summary",
    "file_label",
    "find_workspace",
    "parse_day",
    "recent_days",
    "summary_scope",
    "warehouse_workspaces",
    "workspace_summary",
    "writable",
]
