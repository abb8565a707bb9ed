"""Explore's page logic that needs no Streamlit: the chart a result gets, and user text made
safe to show in a message.

Queries do not run here: the notebooks package's executor runs each one in a
query process it can stop (decisions D-EXPLORE-SAFETY, D-EXPLORE-EXECUTOR).
"""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from convo_analytics.dashboard._text import plain
from convo_analytics.notebooks import CHART_KINDS, ChartKind

__all__ = ["CHART_KINDS", "ChartChoice", "ChartKind", "choose_chart", "literal"]


def literal(text: str) -> str:
    """``text`` shown as written inside ``st.error`` and the like: a notebook's name, a
    cell's title or a query's error (which quotes the SQL) gives no link, image, HTML,
    heading, colour or formula (``_text.plain``, uncut)."""
    return plain(text, None)


@dataclass(frozen=True, slots=True)
class ChartChoice:
    """What to draw for a result: a mark and the columns on each axis (None: no chart)."""

    kind: ChartKind
    x: str | None = None
    y: str | None = None
    color: str | None = None


def _is_time(dtype: pl.DataType) -> bool:
    return isinstance(dtype, pl.Date | pl.Datetime)


def choose_chart(frame: pl.DataFrame, wanted: ChartKind = "auto") -> ChartChoice:
    """A chart from the result's types: a line over a date column, bars over a category,
    points for two numbers; ``wanted`` overrides the mark (``none``: no chart).

    The y axis is the first numeric column that is not the x axis; a second text
    column (with a date on x) colours the lines.
    """
    if wanted == "none" or frame.height == 0:
        return ChartChoice("none")
    schema = frame.schema
    times = [c for c, t in schema.items() if _is_time(t)]
    numbers = [c for c, t in schema.items() if t.is_numeric()]
    texts = [c for c, t in schema.items() if t in (pl.String, pl.Categorical, pl.Boolean)]
    if times and numbers:
        x, kind = times[0], "line"
        color = texts[0] if texts else None
    elif texts and numbers:
        x, kind, color = texts[0], "bar", (texts[1] if len(texts) > 1 else None)
    elif len(numbers) >= 2:
        x, kind, color = numbers[0], "point", texts[0] if texts else None
    else:
        return ChartChoice("none")
    y = next((c for c in numbers if c != x), None)
    if y is None:
        return ChartChoice("none")
    chosen: ChartKind = kind if wanted == "auto" else wanted  # type: ignore[assignment]
    return ChartChoice(chosen, x, y, color)
