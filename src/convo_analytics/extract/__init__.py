"""Extractors: page the service's API into the warehouse, incrementally and safely.

Public surface: :class:`ExtractConfig`, :func:`run_extract` and its
:class:`ExtractResult`; the progress sinks for terminals and logs.
"""

from convo_analytics.config._endpoints import SourceSpec, load_source, source_errors
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
    "field_problems",
    "load_source",
    "run_extract",
    "run_extract_many",
    "source_errors",
]
