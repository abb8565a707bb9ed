"""Polars transforms: facts, the daily cube, metrics, the lead funnel and guardrail incidents.

`convo transform` brings the marts up to date (:func:`run_transform`, with the
configuration :func:`transform_config` builds from the settings: the
partitions what changed touches, or all of them); everything that shows a
number (exports, `convo serve`, the dashboard) reads them through
:func:`load_cube` and :func:`metrics_table`, so every view agrees. The
knowledge gaps (failing answers, by topic) are read through :func:`gap_report`
and :func:`gap_conversations` by the dashboard and the export alike.
"""

from convo_analytics.transform._configure import (
    SETTING_ZONES,
    checked_zone,
    default_zone,
    transform_config,
)
from convo_analytics.transform._cube import TIER, Cube, build_cube, local_date
from convo_analytics.transform._facts import Facts, read_facts
from convo_analytics.transform._funnel import STEPS, in_range, lead_funnel, score_bands
from convo_analytics.transform._gap_report import (
    CONTENT_DOES_NOT_ANSWER,
    MISSING_CONTENT,
    REPORT_COLUMNS,
    UNKNOWN_TOPIC,
    conversations_of,
    failing_answers,
    gap_conversations,
    gap_report,
    require_gaps,
)
from convo_analytics.transform._gaps import FALLBACK_PATTERNS, REASONS
from convo_analytics.transform._incidents import (
    INCIDENT_COLUMNS,
    INCIDENT_QUERY,
    incidents,
    per_flag_per_day,
    repeated,
)
from convo_analytics.transform._metrics import (
    COUNTS,
    LATENCY_QUANTILES,
    MEDIANS,
    RATES,
    breakdown,
    flag_rates,
    metrics_table,
    summary_body,
)
from convo_analytics.transform._published import (
    NotTransformed,
    PublishedRun,
    latest_transform,
    load_cube,
    require_marts,
)
from convo_analytics.transform._reconcile import Mismatch, Reconciliation, reconcile
from convo_analytics.transform._redact import redact, redact_expr
from convo_analytics.transform._run import TransformConfig, TransformResult, run_transform
from convo_analytics.transform._slices import DIMENSIONS
from convo_analytics.transform._versions import DEFINITION_VERSION, DEFINITIONS

__all__ = [
    "CONTENT_DOES_NOT_ANSWER",
    "COUNTS",
    "DEFINITIONS",
    "DEFINITION_VERSION",
    "DIMENSIONS",
    "FALLBACK_PATTERNS",
    "INCIDENT_COLUMNS",
    "INCIDENT_QUERY",
    "LATENCY_QUANTILES",
    "MEDIANS",
    "MISSING_CONTENT",
    "RATES",
    "REASONS",
    "REPORT_COLUMNS",
    "SETTING_ZONES",
    "STEPS",
    "TIER",
    "UNKNOWN_TOPIC",
    "Cube",
    "Facts",
    "Mismatch",
    "NotTransformed",
    "PublishedRun",
    "Reconciliation",
    "TransformConfig",
    "TransformResult",
    "breakdown",
    "build_cube",
    "checked_zone",
    "conversations_of",
    "default_zone",
    "failing_answers",
    "flag_rates",
    "gap_conversations",
    "gap_report",
    "in_range",
    "incidents",
    "latest_transform",
    "lead_funnel",
    "load_cube",
    "local_date",
    "metrics_table",
    "per_flag_per_day",
    "read_facts",
    "reconcile",
    "redact",
    "redact_expr",
    "repeated",
    "require_gaps",
    "require_marts",
    "run_transform",
    "score_bands",
    "summary_body",
    "transform_config",
]
