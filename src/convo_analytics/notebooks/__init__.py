"""Notebooks: the file format, stopped-cell marks and the limited query executor.

The one place user SQL runs (Explore now, headless notebooks and reports
later): :class:`Executor` runs each query in a query process it can stop at
the time and memory limits, over views of the rows the reader may see
(decisions D-EXPLORE-SAFETY and D-EXPLORE-EXECUTOR). Nothing here imports
the dashboard or the CLI.

The executor is imported lazily, so that a query process (which imports
``_worker`` through this package) does not load polars.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from convo_analytics.notebooks._format import (
    CHART_KINDS,
    Cell,
    ChartKind,
    Notebook,
    notebook_name,
    parse_notebook,
    render_notebook,
)
from convo_analytics.notebooks._guard import TABLE_FUNCTIONS
from convo_analytics.notebooks._marks import (
    StopMark,
    cell_key,
    clear_mark,
    load_marks,
    mark_stopped,
)
from convo_analytics.notebooks._params import (
    BUILTINS,
    PARAM_TYPES,
    ParamError,
    ParamSpec,
    ParamType,
    convert,
    encode_values,
)

if TYPE_CHECKING:
    from convo_analytics.notebooks._executor import (
        Executor,
        Limits,
        QueryResult,
        StopReason,
        describe_size,
    )

__all__ = [
    "BUILTINS",
    "CHART_KINDS",
    "PARAM_TYPES",
    "TABLE_FUNCTIONS",
    "Cell",
    "ChartKind",
    "Executor",
    "Limits",
    "Notebook",
    "ParamError",
    "ParamSpec",
    "ParamType",
    "QueryResult",
    "StopMark",
    "StopReason",
    "cell_key",
    "clear_mark",
    "convert",
    "describe_size",
    "encode_values",
    "load_marks",
    "mark_stopped",
    "notebook_name",
    "parse_notebook",
    "render_notebook",
]

_LAZY = {"Executor", "Limits", "QueryResult", "StopReason", "describe_size"}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        from convo_analytics.notebooks import _executor

        return getattr(_executor, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
