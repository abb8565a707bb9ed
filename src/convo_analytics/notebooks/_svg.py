"""A cell's chart as inline SVG, for a report that is mailed and opened without a network.

A mail client runs no script, and a report must fetch nothing (decision
D-NOTEBOOK-REPORTS), so a JavaScript chart library is out; a static SVG drawn
here is markup like the rest of the page. It draws what :func:`chart_for`
chose (the same rule as Explore's charts): lines, bars, areas or points of
the y column over the x column, one series per value of the colour column.

* x: a date or timestamp column is a time axis (ticks on days, weeks, months
  or years); a number is a linear axis (for lines, areas and points); anything
  else, and every bar chart, is one band per value (at most :data:`MAX_BANDS`,
  in the result's order; numbers and dates sorted).
* colour: at most :data:`MAX_SERIES` series, the largest (by the sum of |y|),
  listed by name, a value keeping its colour across the charts of a page;
  points of the rest are drawn grey as "other", while lines, areas and bars of
  the rest are left out (their sum would misstate a rate) and a note says how
  many.
* at most :data:`MAX_POINTS` rows are drawn; the table and the CSV hold them all.

Every text (a value, a column name) is escaped; the markup holds no script, no
link, no style sheet and no reference to anything outside itself.
"""

from __future__ import annotations

import html
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

import polars as pl

from convo_analytics.notebooks._chart import ChartChoice

__all__ = ["MAX_BANDS", "MAX_POINTS", "MAX_SERIES", "Svg", "svg_chart"]

#: Series a chart draws in colour (the rest: grey "other" points, or left out).
MAX_SERIES = 8
#: Bands (categories) a chart draws along x.
MAX_BANDS = 50
#: Rows a chart draws.
MAX_POINTS = 5000
WIDTH = 720
PLOT_HEIGHT = 240
PALETTE = ("#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#9c755f")
OTHER = "#b0b0b0"
_FONT = 'font-family="system-ui, -apple-system, Segoe UI, Roboto, sans-serif" font-size="12"'
_CHAR = 6.6  # an average character's width at 12px, for layout
_LABEL_CHARS = 18
_TIPS_MAX = 600  # marks with a hover title (<title>), at most
_DAY = 86_400.0
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
#: The times a time axis can show (a Python datetime's years 1 to 9999), in seconds.
_FIRST, _LAST = -62_135_596_800.0, 253_402_214_400.0
#: Values beyond this are not drawn (a scale's arithmetic would overflow).
_HUGE = 1e300
_TIME_FORMATS = {"time": "%m-%d %H:%M", "day": "%Y-%m-%d", "month": "%Y-%m", "year": "%Y"}


@dataclass(frozen=True, slots=True)
class Svg:
    """A chart's markup ("" when there is none) and notes on what it left out."""

    markup: str
    notes: tuple[str, ...] = ()


@dataclass(slots=True)
class _Series:
    name: str
    color: str
    xs: list[float | str] = field(default_factory=list)
    ys: list[float] = field(default_factory=list)


def _e(text: object) -> str:
    return html.escape(str(text), quote=True)


def _short(text: str, chars: int = _LABEL_CHARS) -> str:
    return text if len(text) <= chars else text[: chars - 1] + "\u2026"


def _f(v: float) -> str:
    return f"{v:.1f}"


# -- numbers and ticks --------------------------------------------------------------------------


def _nice_step(span: float, count: int = 5) -> float:
    raw = span / max(count, 1)
    if raw <= 0 or not math.isfinite(raw):
        return 1.0
    power = 10.0 ** math.floor(math.log10(raw))
    return next(m * power for m in (1, 2, 5, 10) if m * power >= raw)


def _nice_ticks(lo: float, hi: float, count: int = 5) -> tuple[float, float, list[float]]:
    """A domain widened to round numbers, and its ticks."""
    if lo == hi:
        pad = abs(lo) * 0.1 or 1.0
        lo, hi = lo - pad, hi + pad
    step = _nice_step(hi - lo, count)
    start, end = math.floor(lo / step) * step, math.ceil(hi / step) * step
    ticks = [start + i * step for i in range(round((end - start) / step) + 1)]
    return start, end, ticks


def _number_text(value: float, step: float, reach: float) -> str:
    """A tick's label: on an axis reaching 10,000 or more, thousands as k, millions as M and
    billions as B (each label by its own size); decimals as the step needs."""
    if abs(value) < 1e-12 * max(reach, 1.0):
        return "0"
    div, suffix = 1.0, ""
    if reach >= 1e4:
        for size, mark in ((1e9, "B"), (1e6, "M"), (1e3, "k")):
            if abs(value) >= size:
                div, suffix = size, mark
                break
    scaled = step / div
    decimals = next((d for d in range(7) if abs(round(scaled, d) - scaled) < 1e-9 * scaled), 6)
    return f"{value / div:,.{decimals}f}{suffix}"


def _value_text(value: float) -> str:
    return f"{value:,.6g}" if abs(value) < 1e15 else f"{value:.6g}"


def _stamp(seconds: float) -> datetime:
    return _EPOCH + timedelta(seconds=seconds)


def _month_ticks(lo: float, hi: float, months: int) -> list[float]:
    start = _stamp(lo)
    year, month = start.year, start.month
    month -= (month - 1) % months
    ticks = []
    for _ in range(400):  # bounded: 400 ticks at most
        tick = datetime(year, month, 1, tzinfo=UTC)
        seconds = (tick - _EPOCH).total_seconds()
        if seconds > hi:
            break
        if seconds >= lo:
            ticks.append(seconds)
        month += months
        year, month = year + (month - 1) // 12, (month - 1) % 12 + 1
    return ticks


def _time_ticks(lo: float, hi: float, count: int = 6) -> tuple[list[float], str]:
    """Ticks on round times within [lo, hi] (seconds), and the format of their labels."""
    span = hi - lo
    for step in (60.0, 300.0, 900.0, 1800.0, 3600.0, 3 * 3600.0, 6 * 3600.0, 12 * 3600.0):
        if span / step <= count:
            first = math.ceil(lo / step) * step
            return [first + i * step for i in range(int((hi - first) // step) + 1)], "time"
    for days in (1, 2, 7, 14):
        step = days * _DAY
        if span / step <= count:
            # weeks start on Monday: 1970-01-05 was one
            offset = 4 * _DAY if days >= 7 else 0.0
            first = math.ceil((lo - offset) / step) * step + offset
            return [first + i * step for i in range(int((hi - first) // step) + 1)], "day"
    for months in (1, 2, 3, 6, 12, 24, 60, 120):
        ticks = _month_ticks(lo, hi, months)
        if len(ticks) <= count:
            return ticks, ("year" if months >= 12 else "month")
    return [lo, hi], "day"


# -- the data -----------------------------------------------------------------------------------


def _x_kind(dtype: pl.DataType, kind: str) -> str:
    if isinstance(dtype, pl.Date | pl.Datetime):
        return "band" if kind == "bar" else "time"
    if dtype.is_numeric() and kind != "bar":
        return "number"
    return "band"


def _x_values(frame: pl.DataFrame, x: str) -> pl.Series:
    """x as numbers for ordering and scales (a time: seconds since 1970 of the wall time
    shown), or nulls when x is not a number or a time."""
    col = frame.get_column(x)
    if isinstance(col.dtype, pl.Date):
        return col.cast(pl.Int64).cast(pl.Float64) * _DAY
    if isinstance(col.dtype, pl.Datetime):
        if col.dtype.time_zone is not None:
            col = col.dt.replace_time_zone(None)
        return col.dt.epoch("ms").cast(pl.Float64) / 1000.0
    if col.dtype.is_numeric():
        return col.cast(pl.Float64)
    return pl.Series([None] * frame.height, dtype=pl.Float64)


def _text(value: object) -> str:
    if value is None:
        return "(null)"
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _prepared(frame: pl.DataFrame, choice: ChartChoice) -> tuple[pl.DataFrame, str, list[str]]:
    """The rows to draw (``_x``: x as a number, ``_label``: x as text, ``_y``, ``_c``: the
    colour value), the x axis's kind, and notes on what was left out."""
    assert choice.x is not None and choice.y is not None
    notes: list[str] = []
    x_kind = _x_kind(frame.schema[choice.x], choice.kind)
    colour = choice.color if choice.color not in (None, choice.y) else None
    data = pl.DataFrame(
        {
            "_x": _x_values(frame, choice.x),
            "_label": pl.Series([_text(v) for v in frame.get_column(choice.x)], dtype=pl.String),
            "_y": frame.get_column(choice.y).cast(pl.Float64),
            "_c": pl.Series(
                [_text(v) for v in frame.get_column(colour)] if colour else [None] * frame.height,
                dtype=pl.String,
            ),
        }
    )
    # finite, and within what a scale (and a Python datetime, years 1 to 9999) can take
    data = data.filter(pl.col("_y").is_finite() & (pl.col("_y").abs() < _HUGE))
    if x_kind == "band":
        data = data.filter(pl.col("_label") != "(null)")
    elif x_kind == "time":
        data = data.filter(pl.col("_x").is_between(_FIRST, _LAST))
    else:
        data = data.filter(pl.col("_x").is_finite() & (pl.col("_x").abs() < _HUGE))
    if data.height > MAX_POINTS:
        notes.append(
            f"the chart draws the first {MAX_POINTS:,} of {data.height:,} rows; "
            "the table and the CSV hold them all"
        )
        data = data.head(MAX_POINTS)
    return data, x_kind, notes


def _colours(names: list[str], shared: dict[str, str]) -> list[str]:
    """A colour per name, each different: the one ``shared`` gave the name in an earlier
    chart of the page when it is still free, else the first free one (then remembered)."""
    taken: set[str] = set()
    out: dict[str, str] = {}
    for name in names:
        if shared.get(name) in PALETTE and shared[name] not in taken:
            out[name] = shared[name]
            taken.add(out[name])
    for name in names:
        if name not in out:
            out[name] = next(c for c in PALETTE if c not in taken)
            taken.add(out[name])
            shared.setdefault(name, out[name])
    return [out[name] for name in names]


def _series(
    data: pl.DataFrame, choice: ChartChoice, notes: list[str], shared: dict[str, str]
) -> list[_Series]:
    if data.get_column("_c").null_count() == data.height:
        return [_Series(choice.y or "", PALETTE[0])]
    totals = (
        data.group_by("_c", maintain_order=True)
        .agg(pl.col("_y").abs().sum().alias("size"))
        .sort("size", descending=True, maintain_order=True)
    )
    names = totals.get_column("_c").to_list()
    kept_names = sorted(names[:MAX_SERIES])  # the largest, listed by name
    kept = [_Series(n, c) for n, c in zip(kept_names, _colours(kept_names, shared), strict=True)]
    rest = len(names) - len(kept)
    if rest > 0 and choice.kind == "point":
        kept.append(_Series("other", OTHER))
    elif rest > 0:
        notes.append(
            f"the chart draws the {MAX_SERIES} largest of {len(names)} {choice.color} values; "
            "the table and the CSV hold them all"
        )
    return kept


def _bands(data: pl.DataFrame, notes: list[str]) -> tuple[pl.DataFrame, list[str]]:
    """The band labels in order (sorted for numbers and dates; else the result's order)."""
    order = data.group_by("_label", maintain_order=True).agg(pl.col("_x").first())
    if order.get_column("_x").null_count() == 0:
        order = order.sort("_x", maintain_order=True)
    labels = order.get_column("_label").to_list()
    if len(labels) > MAX_BANDS:
        notes.append(
            f"the chart draws the first {MAX_BANDS} of {len(labels)} values along x; "
            "the table and the CSV hold them all"
        )
        labels = labels[:MAX_BANDS]
        data = data.filter(pl.col("_label").is_in(labels))
    return data, labels


# -- drawing ------------------------------------------------------------------------------------


@dataclass(slots=True)
class _Frame:
    """Where the plot sits in the picture, and how values map onto it."""

    left: float
    top: float
    width: float
    height: float
    y_lo: float
    y_hi: float
    x_lo: float = 0.0
    x_hi: float = 1.0
    time: bool = False
    bands: dict[str, int] = field(default_factory=dict)

    @property
    def bottom(self) -> float:
        return self.top + self.height

    @property
    def right(self) -> float:
        return self.left + self.width

    def y(self, value: float) -> float:
        return self.bottom - (value - self.y_lo) / (self.y_hi - self.y_lo) * self.height

    def x(self, value: float) -> float:
        return self.left + (value - self.x_lo) / (self.x_hi - self.x_lo) * self.width

    def band_centre(self, label: str) -> float:
        return self.left + self.width / max(len(self.bands), 1) * (self.bands[label] + 0.5)

    def at(self, value: float | str) -> float:
        return self.band_centre(value) if isinstance(value, str) else self.x(value)


def _legend(series: Sequence[_Series], width: float) -> tuple[list[str], float]:
    if len(series) < 2:
        return [], 0.0
    parts, x, y = [], 8.0, 14.0
    for s in series:
        label = _short(s.name, 24)
        item = 18 + len(label) * _CHAR + 14
        if x + item > width and x > 8:
            x, y = 8.0, y + 18
        parts.append(
            f'<g><rect x="{_f(x)}" y="{_f(y - 9)}" width="10" height="10" fill="{s.color}"/>'
            f'<text x="{_f(x + 15)}" y="{_f(y)}">{_e(label)}'
            + (f"<title>{_e(s.name)}</title>" if label != s.name else "")
            + "</text></g>"
        )
        x += item
    return parts, y + 10


def _fill(data: pl.DataFrame, series: list[_Series], x_kind: str) -> list[_Series]:
    """Each row into its series (a colour value past the cap: into "other", or left out)."""
    by_name = {s.name: s for s in series}
    other = series[-1] if series[-1].color == OTHER else None
    single = series[0] if data.get_column("_c").null_count() == data.height else None
    for row in data.iter_rows(named=True):
        target = single or by_name.get(row["_c"]) or other
        if target is None:
            continue
        target.xs.append(row["_label"] if x_kind == "band" else row["_x"])
        target.ys.append(row["_y"])
    return [s for s in series if s.ys]


def svg_chart(
    frame: pl.DataFrame,
    choice: ChartChoice,
    *,
    title: str = "",
    width: int = WIDTH,
    colours: dict[str, str] | None = None,
) -> Svg:
    """The chart ``choice`` of ``frame`` as an ``<svg>`` element (see the module docstring).

    ``colours`` (a series' name to its colour), shared by the charts of one page, gives a
    name the same colour in each chart that has it."""
    if choice.kind in ("none", "auto") or choice.x is None or choice.y is None:
        return Svg("")
    data, x_kind, notes = _prepared(frame, choice)
    if data.height == 0:
        return Svg("", ("no row has a value to draw",))
    series = _series(data, choice, notes, {} if colours is None else colours)
    labels: list[str] = []
    if x_kind == "band":
        data, labels = _bands(data, notes)
    elif choice.kind in ("line", "area"):
        data = data.sort("_x", maintain_order=True)
    series = _fill(data, series, x_kind)
    ys = [y for s in series for y in s.ys]
    if not ys:
        return Svg("", tuple(notes))
    lo, hi = min(ys), max(ys)
    if choice.kind in ("bar", "area"):
        lo, hi = min(lo, 0.0), max(hi, 0.0)
    y_lo, y_hi, y_ticks = _nice_ticks(lo, hi)
    step = y_ticks[1] - y_ticks[0] if len(y_ticks) > 1 else 1.0
    y_texts = [_number_text(t, step, max(abs(y_lo), abs(y_hi))) for t in y_ticks]

    legend, legend_h = _legend(series, width)
    left = 30 + max(len(t) for t in y_texts) * _CHAR
    rotate, bottom = False, 40.0
    if x_kind == "band":
        longest = max(len(_short(label)) for label in labels) * _CHAR
        band = (width - left - 16) / len(labels)
        rotate = longest + 6 > band
        if rotate:  # a turned label reaches down, and left of its band
            bottom += longest * 0.6
            left = max(left, longest * 0.82 - band / 2 + 6)
    right = 16 if x_kind == "band" else 40  # room for the last tick's label
    plot = _Frame(left, legend_h + 12, width - left - right, PLOT_HEIGHT, y_lo, y_hi)
    height = plot.bottom + bottom
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" role="img" width="{width}" '
        f'height="{_f(height)}" viewBox="0 0 {width} {_f(height)}" {_FONT} fill="#333">',
        f"<title>{_e(title or choice.y)}</title>",
        *legend,
    ]
    for tick, text in zip(y_ticks, y_texts, strict=True):
        at = plot.y(tick)
        out.append(
            f'<line x1="{_f(plot.left)}" x2="{_f(plot.right)}" y1="{_f(at)}" y2="{_f(at)}" '
            f'stroke="#e5e5e5"/><text x="{_f(plot.left - 6)}" y="{_f(at + 4)}" '
            f'text-anchor="end">{_e(text)}</text>'
        )
    out.append(
        f'<line x1="{_f(plot.left)}" x2="{_f(plot.right)}" y1="{_f(plot.bottom)}" '
        f'y2="{_f(plot.bottom)}" stroke="#888"/>'
    )
    if x_kind == "band":
        plot.bands = {label: i for i, label in enumerate(labels)}
        out += _band_axis(labels, plot, rotate)
    else:
        out += _linear_axis(data, x_kind, plot)
    out.append(
        f'<text x="{_f(plot.left + plot.width / 2)}" y="{_f(height - 6)}" '
        f'text-anchor="middle" font-weight="600">{_e(choice.x)}</text>'
        f'<text transform="translate(12 {_f(plot.top + plot.height / 2)}) rotate(-90)" '
        f'text-anchor="middle" font-weight="600">{_e(choice.y)}</text>'
    )
    tips = len(ys) <= _TIPS_MAX
    if choice.kind == "bar":
        out += _bars(series, labels, plot, tips)
    else:
        out += _marks(choice.kind, series, plot, tips)
    out.append("</svg>")
    return Svg("".join(out), tuple(notes))


def _band_axis(labels: list[str], plot: _Frame, rotate: bool) -> list[str]:
    """One label per band (every k-th when they would overlap), turned when long."""
    out = []
    every = max(1, math.ceil(len(labels) * 14 / plot.width)) if rotate else 1
    for i, label in enumerate(labels):
        if i % every:
            continue
        at, short = plot.band_centre(label), _short(label)
        tip = f"<title>{_e(label)}</title>" if short != label else ""
        if rotate:
            out.append(
                f'<text transform="translate({_f(at + 3)} {_f(plot.bottom + 12)}) rotate(-35)" '
                f'text-anchor="end">{_e(short)}{tip}</text>'
            )
        else:
            out.append(
                f'<text x="{_f(at)}" y="{_f(plot.bottom + 16)}" text-anchor="middle">'
                f"{_e(short)}{tip}</text>"
            )
    return out


def _linear_axis(data: pl.DataFrame, x_kind: str, plot: _Frame) -> list[str]:
    """Ticks on round times or numbers along a linear x."""
    xs = data.get_column("_x")
    lo, hi = float(xs.min()), float(xs.max())  # type: ignore[arg-type]
    if x_kind == "time":
        if lo == hi:
            lo, hi = lo - _DAY, hi + _DAY
        ticks, fmt = _time_ticks(lo, hi)
        texts = [_stamp(t).strftime(_TIME_FORMATS[fmt]) for t in ticks]
    else:  # the data's own range (not widened), ticks on round numbers inside it
        if lo == hi:
            lo, hi = lo - (abs(lo) * 0.1 or 1.0), hi + (abs(hi) * 0.1 or 1.0)
        _, _, nice = _nice_ticks(lo, hi)
        ticks = [t for t in nice if lo - 1e-9 * (hi - lo) <= t <= hi + 1e-9 * (hi - lo)]
        step = nice[1] - nice[0] if len(nice) > 1 else 1.0
        texts = [_number_text(t, step, max(abs(lo), abs(hi))) for t in ticks]
    plot.x_lo, plot.x_hi, plot.time = lo, hi, x_kind == "time"
    out = []
    for tick, text in zip(ticks, texts, strict=True):
        at = plot.x(tick)
        out.append(
            f'<line x1="{_f(at)}" x2="{_f(at)}" y1="{_f(plot.bottom)}" '
            f'y2="{_f(plot.bottom + 4)}" stroke="#888"/><text x="{_f(at)}" '
            f'y="{_f(plot.bottom + 16)}" text-anchor="middle">{_e(text)}</text>'
        )
    return out


def _tip(s: _Series, x: float | str, y: float, count: int, x_kind: str) -> str:
    if isinstance(x, str):
        shown = x
    elif x_kind == "time":
        shown = _stamp(x).strftime("%Y-%m-%d %H:%M:%S").removesuffix(" 00:00:00")
    else:
        shown = _value_text(x)
    text = f"{shown}: {_value_text(y)}"
    return f"{s.name}, {text}" if count > 1 else text


def _bars(series: Sequence[_Series], labels: list[str], plot: _Frame, tips: bool) -> list[str]:
    band = plot.width / max(len(labels), 1)
    inner = band * 0.8 / max(len(series), 1)
    zero = plot.y(0.0)
    out = []
    for k, s in enumerate(series):
        for x, y in zip(s.xs, s.ys, strict=True):
            start = plot.left + band * plot.bands[str(x)] + band * 0.1 + inner * k
            tip = f"<title>{_e(_tip(s, x, y, len(series), 'band'))}</title>" if tips else ""
            out.append(
                f'<rect x="{_f(start)}" y="{_f(min(plot.y(y), zero))}" '
                f'width="{_f(max(inner - 1, 1))}" height="{_f(max(abs(zero - plot.y(y)), 0.5))}" '
                f'fill="{s.color}">{tip}</rect>'
            )
    return out


def _marks(kind: str, series: Sequence[_Series], plot: _Frame, tips: bool) -> list[str]:
    """Lines, areas (to zero, or the nearest edge) or points; lines get dots when few."""
    x_kind = "band" if plot.bands else ("time" if plot.time else "number")
    base = plot.y(max(min(0.0, plot.y_hi), plot.y_lo))
    out = []
    for s in series:
        points = [(plot.at(x), plot.y(y)) for x, y in zip(s.xs, s.ys, strict=True)]
        path = " ".join(f"{_f(a)},{_f(b)}" for a, b in points)
        if kind == "area":
            out.append(
                f'<path d="M{_f(points[0][0])},{_f(base)} L{path.replace(" ", " L")} '
                f'L{_f(points[-1][0])},{_f(base)} Z" fill="{s.color}" fill-opacity="0.25"/>'
            )
        if kind in ("line", "area"):
            out.append(
                f'<polyline points="{path}" fill="none" stroke="{s.color}" stroke-width="2"/>'
            )
        if kind == "point" or (tips and len(points) <= 60):
            radius, opacity = ("3.5", ' fill-opacity="0.7"') if kind == "point" else ("2.5", "")
            for (a, b), x, y in zip(points, s.xs, s.ys, strict=True):
                tip = f"<title>{_e(_tip(s, x, y, len(series), x_kind))}</title>" if tips else ""
                out.append(
                    f'<circle cx="{_f(a)}" cy="{_f(b)}" r="{radius}" fill="{s.color}"{opacity}>'
                    f"{tip}</circle>"
                )
    return out
