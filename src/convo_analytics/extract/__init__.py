"""Extractors: page the service's API into the warehouse, incrementally and safely.

Public surface: :class:`ExtractConfig` (built from the settings by
:func:`extract_configs`), :func:`run_extract` and its :class:`ExtractResult`;
the progress sinks for terminals and logs.
"""

from convo_analytics.config._endpoints import SourceSpec, load_source, source_errors
from convo_analytics.extract._configure import (
    extract_config,
    extract_configs,
    flag_date,
    source_description,
)
from convo_analytics.extract._http import ExtractError
from convo_analytics.extract._paging import PagingError
from convo_analytics.extract._progress import BarProgress, LogProgress, NoProgress
from convo_analytics.extract._results import ExtractResult, StreamResult, WorkspacesResult
from convo_analytics.extract._runner import run_extract, run_extract_many
from convo_analytics.extract._shapes import ShapeError
from convo_analytics.extract._source import field_problems
from convo_analytics.extract._streams import ALL_STREAMS, ExtractConfig

__all__ = [
    "ALL_STREAMS",
    "BarProgress",
    "ExtractConfig",
    "ExtractError",
    "ExtractResult",
    "LogProgress",
    "NoProgress",
    "PagingError",
    "ShapeError",
    "SourceSpec",
    "StreamResult",
    "WorkspacesResult",
    "extract_config",
    "extract_configs",
    "field_problems",
    "flag_date",
    "load_source",
    "run_extract",
    "run_extract_many",
    "source_description",
    "source_errors",
]
