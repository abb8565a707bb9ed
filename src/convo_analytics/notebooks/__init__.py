"""Notebooks: the file format, cells that read earlier cells, markdown cells rendered
safely, the chart a result gets, stopped-cell marks and the limited query executor.

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

from convo_analytics.notebooks._cells import Composed, cell_name, compose
from convo_analytics.notebooks._files import (
    STARTERS_DIR,
    list_notebooks,
    load_notebook,
    save_notebook,
)
from convo_analytics.notebooks._format import (
    CHART_KINDS,
    CHART_SETTINGS,
    Cell,
    CellKind,
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
    referenced,
)

if TYPE_CHECKING:
    from convo_analytics.notebooks._chart import ChartChoice, chart_for, choose_chart
    from convo_analytics.notebooks._executor import (
        Executor,
        Limits,
        QueryResult,
        StopReason,
        describe_size,
    )
    from convo_analytics.notebooks._headless import (
        CellRun,
        NotebookRun,
        parse_param_args,
        run_notebook,
    )
    from convo_analytics.notebooks._markdown import markdown_html
    from convo_analytics.notebooks._report import HTML_ROWS, ReportFiles, write_report

__all__ = [
    "BUILTINS",
    "CHART_KINDS",
    "CHART_SETTINGS",
    "HTML_ROWS",
    "PARAM_TYPES",
    "STARTERS_DIR",
    "TABLE_FUNCTIONS",
    "Cell",
    "CellKind",
    "CellRun",
    "ChartChoice",
    "ChartKind",
    "Composed",
    "Executor",
    "Limits",
    "Notebook",
    "NotebookRun",
    "ParamError",
    "ParamSpec",
    "ParamType",
    "QueryResult",
    "ReportFiles",
    "StopMark",
    "StopReason",
    "cell_key",
    "cell_name",
    "chart_for",
    "choose_chart",
    "clear_mark",
    "compose",
    "convert",
    "describe_size",
    "encode_values",
    "list_notebooks",
    "load_marks",
    "load_notebook",
    "mark_stopped",
    "markdown_html",
    "notebook_name",
    "parse_notebook",
    "parse_param_args",
    "referenced",
    "render_notebook",
    "run_notebook",
    "save_notebook",
    "write_report",
]

#: Imported on first use: the query process imports this package and needs none of them
#: (the executor, the chart, headless runs and reports load polars, the markdown renderer
#: markdown-it).
_LAZY = {
    "Executor": "_executor",
    "Limits": "_executor",
    "QueryResult": "_executor",
    "StopReason": "_executor",
    "describe_size": "_executor",
    "ChartChoice": "_chart",
    "chart_for": "_chart",
    "choose_chart": "_chart",
    "markdown_html": "_markdown",
    "CellRun": "_headless",
    "NotebookRun": "_headless",
    "parse_param_args": "_headless",
    "run_notebook": "_headless",
    "HTML_ROWS": "_report",
    "ReportFiles": "_report",
    "write_report": "_report",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        module = importlib.import_module(f"convo_analytics.notebooks.{_LAZY[name]}")
        return getattr(module, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
