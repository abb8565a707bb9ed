"""Explore's page logic that needs no Streamlit: the chart a result gets and the choices its
axes offer, user text made safe to show in a message, the caption naming a cell for later
cells (decision D-NOTEBOOK-CELLS), and a notebook's parameter values (from the URL, the
sidebar and the header's defaults; decision D-NOTEBOOK-PARAMS).

Queries do not run here: the notebooks package's executor runs each one in a
query process it can stop (decisions D-EXPLORE-SAFETY, D-EXPLORE-EXECUTOR).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import date
from typing import Any

from convo_analytics.dashboard._queries import Filters
from convo_analytics.dashboard._text import plain
from convo_analytics.notebooks import (
    BUILTINS,
    CHART_KINDS,
    ChartChoice,
    ChartKind,
    ParamError,
    ParamSpec,
    cell_name,
    chart_for,
    choose_chart,
    convert,
    referenced,
)

__all__ = [
    "AUTO",
    "CHART_KINDS",
    "URL_PREFIX",
    "ChartChoice",
    "ChartKind",
    "axis_options",
    "chart_for",
    "choose_chart",
    "literal",
    "name_caption",
    "page_params",
    "param_default",
    "referenced",
    "values_from_url",
    "values_to_url",
]

#: A parameter's value in the URL: ``?p.NAME=VALUE`` (a list: the key repeated).
URL_PREFIX = "p."


def literal(text: str) -> str:
    """``text`` shown as written inside ``st.error`` and the like: a notebook's name, a
    cell's title or a query's error (which quotes the SQL) gives no link, image, HTML,
    heading, colour or formula (``_text.plain``, uncut)."""
    return plain(text, None)


#: The axis choice "auto" (the column the result's types give): no DuckDB column is called "".
AUTO = ""


def axis_options(columns: Sequence[str], saved: str | None) -> list[str]:
    """What a chart axis offers: auto, the result's ``columns``, and the ``saved`` column
    when the result has no such column (kept until the author picks another, so a run that
    lost the column does not erase the setting; the chart's note says it is unused)."""
    options = [AUTO, *columns]
    if saved and saved not in columns:
        options.append(saved)
    return options


def name_caption(title: str, others: Iterable[str] = ()) -> str:
    """The caption under a SQL cell's title: the name later cells read its result by (a
    code span: the name is lower-case letters, digits and ``_`` only), or why they cannot;
    ``others``: the titles of the notebook's other SQL cells (a shared name is ambiguous)."""
    name = cell_name(title)
    if not name:
        return "Later cells cannot read this result: give the cell a title with a letter or digit."
    shown = literal(name)
    shown = f"`{shown}`" if shown == name else shown
    text = f"Later cells read this result as {shown}."
    if any(cell_name(other) == name for other in others):
        text += (
            " Another cell has the same name: retitle one, so a later cell reads the one it means."
        )
    return text


def page_params(declared: Iterable[ParamSpec], sqls: Iterable[str]) -> list[ParamSpec]:
    """The parameters the page offers: the built-ins the cells use, then the declared ones."""
    used = referenced(sqls)
    return [p for p in BUILTINS if p.name in used] + list(declared)


def param_default(spec: ParamSpec, filters: Filters | None) -> Any:
    """``spec``'s value when nothing sets it: a built-in's is the sidebar's, a declared one's
    its header default (converted; None: it has none)."""
    if spec.builtin and filters is not None:
        by_name: dict[str, Any] = {
            "workspace": filters.workspace or "",
            "from": filters.first,
            "to": filters.last,
            "tz": filters.tz,
            "channel": list(filters.channels),
        }
        return by_name[spec.name]
    if spec.default is None:
        return None
    if spec.default == "" and spec.type in ("date", "number"):
        return None
    return convert(spec, spec.default)


def values_from_url(
    specs: Iterable[ParamSpec], params: Mapping[str, list[str]], filters: Filters | None
) -> tuple[dict[str, Any], list[str]]:
    """Each parameter's value (the URL's ``p.NAME`` when it can be used, else its default)
    and a note per URL value that could not be (one line each)."""
    values: dict[str, Any] = {}
    notes: list[str] = []
    for spec in specs:
        values[spec.name] = param_default(spec, filters)
        given = params.get(URL_PREFIX + spec.name)
        if not given:
            continue
        try:
            values[spec.name] = convert(spec, given if spec.type == "choices" else given[-1])
        except ParamError as exc:
            notes.append(f"?{URL_PREFIX}{spec.name}: {exc}; its default is used")
    return values, notes


def _url_text(value: Any) -> str | list[str]:
    if isinstance(value, list | tuple):
        return [str(v) for v in value]
    return value.isoformat() if isinstance(value, date) else str(value)


def values_to_url(
    specs: Iterable[ParamSpec], values: Mapping[str, Any], filters: Filters | None
) -> dict[str, str | list[str]]:
    """The URL keys of the values that differ from their defaults."""
    out: dict[str, str | list[str]] = {}
    for spec in specs:
        value = values.get(spec.name)
        if value is None or value == [] or value == param_default(spec, filters):
            continue
        out[URL_PREFIX + spec.name] = _url_text(value)
    return out
