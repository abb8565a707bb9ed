"""A notebook's parameters: declared in its header, converted by type, bound by DuckDB.

A notebook's header declares each parameter on a line of its own, optionally
followed by the query that lists a choice's values::

    -- param: reason text = timeout
    -- param: min_turns number = 3
    -- param: since date = 2024-01-01
    -- param: locale choice = en
    -- values: SELECT DISTINCT locale FROM mart_conversations ORDER BY 1
    -- param: locales choices = en, de

Cells name a parameter as ``$name``; a ``choices`` parameter is a list, used
as ``= ANY($name)``. The built-ins (:data:`BUILTINS`: ``workspace``,
``from``, ``to``, ``tz``, ``channel``) always exist and take the sidebar's
values unless the page or the URL sets them. A value is converted and
checked by its type here (a bad one is a one-line :class:`ParamError`
naming the parameter), then handed to DuckDB as a prepared-statement
parameter by the query process: it is data, never SQL (decision
D-NOTEBOOK-PARAMS).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import date
from typing import Any, Literal

__all__ = [
    "BUILTINS",
    "PARAM_TYPES",
    "ParamError",
    "ParamSpec",
    "ParamType",
    "convert",
    "decode_values",
    "encode_values",
    "parse_param",
    "referenced",
    "render_param",
]

ParamType = Literal["date", "text", "number", "choice", "choices"]
PARAM_TYPES: tuple[ParamType, ...] = ("date", "text", "number", "choice", "choices")
_NAME = re.compile(r"[a-z_][a-z0-9_]{0,39}")
_REFERENCE = re.compile(r"\$([a-z_][a-z0-9_]{0,39})\b")
_LINE = re.compile(r"^\s*(\S+)\s+(\S+)\s*(?:=\s*(.*?))?\s*$")
#: A text value is at most this long.
TEXT_CAP = 1000
#: A list value holds at most this many items.
LIST_CAP = 1000


class ParamError(ValueError):
    """A parameter line or value that cannot be used; the message is one line naming it."""


@dataclass(frozen=True, slots=True)
class ParamSpec:
    """A parameter: its name, type, default (as written: text, or a list for ``choices``;
    None: none) and, for a choice, the query whose first column lists the values."""

    name: str
    type: ParamType
    default: str | tuple[str, ...] | None = None
    values_sql: str | None = None
    builtin: bool = False


#: The parameters every notebook has; their defaults are the sidebar's (the page sets them).
BUILTINS: tuple[ParamSpec, ...] = (
    ParamSpec("workspace", "text", "", builtin=True),
    ParamSpec("from", "date", None, builtin=True),
    ParamSpec("to", "date", None, builtin=True),
    ParamSpec("tz", "text", "UTC", builtin=True),
    ParamSpec(
        "channel",
        "choices",
        (),
        "SELECT DISTINCT channel FROM mart_conversations ORDER BY 1",
        builtin=True,
    ),
)
_BUILTIN_NAMES = frozenset(p.name for p in BUILTINS)


def parse_param(text: str) -> ParamSpec:
    """The spec of a ``-- param:`` line's text (after ``param:``): ``NAME TYPE [= DEFAULT]``.

    Raises :class:`ParamError` (one line) for a bad name, an unknown type, a built-in's
    name, or a default its type refuses."""
    shown = " ".join(text.split())[:80]
    match = _LINE.match(text)
    if match is None:
        raise ParamError(f"param line {shown!r}: write -- param: NAME TYPE [= DEFAULT]")
    name, kind, default = match.group(1), match.group(2).lower(), match.group(3)
    if not _NAME.fullmatch(name):
        raise ParamError(
            f"param {name[:40]!r}: a name is lower-case letters, digits and _ "
            "(starting with a letter or _), at most 40 characters"
        )
    if name in _BUILTIN_NAMES:
        raise ParamError(
            f"param {name}: a built-in parameter (set by the sidebar); pick another name"
        )
    if kind not in PARAM_TYPES:
        raise ParamError(f"param {name}: type {kind[:20]!r} is not one of {', '.join(PARAM_TYPES)}")
    value: str | tuple[str, ...] | None = default
    if kind == "choices" and default is not None:
        value = tuple(v.strip() for v in default.split(",") if v.strip())
    spec = ParamSpec(name, kind, value)
    if value is not None and value != "":
        convert(spec, value)  # a default its type refuses is an error of the line
    return spec


def render_param(spec: ParamSpec) -> list[str]:
    """The header lines of ``spec`` (``parse_param`` reads the first back to it)."""
    line = f"-- param: {spec.name} {spec.type}"
    if isinstance(spec.default, tuple):
        line += f" = {', '.join(spec.default)}" if spec.default else ""
    elif spec.default is not None:
        line += f" = {spec.default}"
    lines = [line]
    if spec.values_sql:
        lines.append(f"-- values: {' '.join(spec.values_sql.split())}")
    return lines


def _number(name: str, text: str) -> int | float:
    try:
        number: int | float = int(text)
    except ValueError:
        try:
            number = float(text)
        except ValueError:
            raise ParamError(f"parameter {name}: {text[:40]!r} is not a number") from None
    if isinstance(number, float) and not math.isfinite(number):
        raise ParamError(f"parameter {name}: {text[:40]!r} is not a finite number")
    return number


def convert(spec: ParamSpec, raw: Any) -> Any:
    """``raw`` (text from a URL or a widget, a list for ``choices``, or already typed) as the
    value bound for ``spec``: a ``date``, an int or float, a str, or a list of str."""
    name = spec.name
    if spec.type == "choices":
        items = [raw] if isinstance(raw, str) else list(raw or ())
        if len(items) > LIST_CAP:
            raise ParamError(f"parameter {name}: at most {LIST_CAP} values")
        return [_text(name, str(item)) for item in items]
    if isinstance(raw, list | tuple):
        if len(raw) != 1:
            raise ParamError(f"parameter {name}: takes one value, got {len(raw)}")
        raw = raw[0]
    if raw is None:
        raise ParamError(f"parameter {name}: needs a value (its line has no default)")
    if spec.type == "date":
        if isinstance(raw, date):
            return raw
        try:
            return date.fromisoformat(str(raw).strip())
        except ValueError:
            raise ParamError(
                f"parameter {name}: {str(raw)[:40]!r} is not a date (write YYYY-MM-DD)"
            ) from None
    if spec.type == "number":
        if isinstance(raw, int | float) and not isinstance(raw, bool):
            return _number(name, repr(raw))
        return _number(name, str(raw).strip())
    return _text(name, str(raw))


def _text(name: str, text: str) -> str:
    if len(text) > TEXT_CAP:
        raise ParamError(f"parameter {name}: at most {TEXT_CAP} characters")
    if "\x00" in text:
        raise ParamError(f"parameter {name}: a value may not hold a NUL character")
    return text


def encode_values(values: Mapping[str, Any]) -> dict[str, Any]:
    """Converted values as JSON for the query process (a date is tagged)."""
    out: dict[str, Any] = {}
    for name, value in values.items():
        out[name] = {"date": value.isoformat()} if isinstance(value, date) else value
    return out


def decode_values(values: Mapping[str, Any], used: Sequence[str]) -> dict[str, Any]:
    """The values of the parameters ``used`` (DuckDB refuses a value a statement does not
    use), dates back as dates."""
    out: dict[str, Any] = {}
    for name in used:
        value = values[name]
        if isinstance(value, dict) and set(value) == {"date"}:
            value = date.fromisoformat(value["date"])
        out[name] = value
    return out


def referenced(sqls: Iterable[str]) -> set[str]:
    """The parameter names ``$name`` in ``sqls`` (text inside strings too: a superset of what
    DuckDB binds, which the query process works out itself)."""
    return {m.group(1) for sql in sqls for m in _REFERENCE.finditer(sql)}
