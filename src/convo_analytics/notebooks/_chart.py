"""The chart a cell's result gets: its saved settings, else a default from the result's types.

One rule for the app and for headless reports, so a notebook's chart is the
same wherever it is drawn: a line over a date column, bars over a category,
points for two numbers. A cell's saved settings (``-- chart: KIND x=.. y=..
color=..``) override the kind and each axis; a saved column the result no
longer has falls back to the default, with a note saying so (a renamed
column never fails the cell).
"""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from convo_analytics.notebooks._format import Cell, ChartKind

__all__ = ["ChartChoice", "chart_for", "choose_chart"]


@dataclass(frozen=True, slots=True)
class ChartChoice:
    """What to draw for a result: a mark and the columns on each axis (None: no chart),
    and a note when a saved setting could not be used."""

    kind: ChartKind
    x: str | None = None
    y: str | None = None
    color: str | None = None
    note: str | None = None


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


def chart_for(frame: pl.DataFrame, cell: Cell) -> ChartChoice:
    """The chart of ``cell``'s result ``frame``: its saved kind and columns where the
    result has them, the default (:func:`choose_chart`) for the rest."""
    base = choose_chart(frame, cell.chart)
    if cell.chart == "none" or frame.height == 0 or not (cell.x or cell.y or cell.color):
        return base
    columns = set(frame.columns)
    missing = [c for c in (cell.x, cell.y, cell.color) if c and c not in columns]
    x = cell.x if cell.x in columns else base.x
    y = cell.y if cell.y in columns and frame.schema[cell.y].is_numeric() else base.y
    if cell.y in columns and cell.y not in missing and y != cell.y:
        missing.append(cell.y)
    color = cell.color if cell.color in columns else base.color
    if x is None or y is None:
        return ChartChoice("none", note=_note(missing))
    kind = base.kind if base.kind != "none" else ("bar" if cell.chart == "auto" else cell.chart)
    return ChartChoice(kind, x, y, color, _note(missing))


def _note(missing: list[str]) -> str | None:
    if not missing:
        return None
    return (
        f"the chart's saved column {missing[0]} is not a usable column of the result "
        "(renamed, or not a number for y); the chart uses its default there"
    )
