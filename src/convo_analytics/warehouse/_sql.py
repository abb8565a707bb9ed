"""SQL pieces every loader builds from: quoting, timestamps, and one-pass JSON parses.

A typed table's columns name the JSON path each comes from; a record is
parsed once into a struct holding every sourced column (``structure``) and
each column is then picked from that struct (``access``). The loads of API
records and of webhook events both build their statements from these.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import orjson

from convo_analytics.warehouse._tables import Column

__all__ = ["_access", "_ident", "_json_type", "_path", "_q", "_quoted_structure", "_structure"]
__all__ += ["_ts", "sql_literal"]


def _q(name: str) -> str:
    """A JSON path component, quoted."""
    return '"' + name.replace('"', '\\"') + '"'


def sql_literal(text: str) -> str:
    """A text value as an SQL string literal (where DuckDB takes no parameter: ATTACH, a
    view's body, a statement built once and run many times)."""
    return "'" + text.replace("'", "''") + "'"


def _ident(name: str) -> str:
    """An SQL identifier (a struct field), quoted."""
    return '"' + name.replace('"', '""') + '"'


def _path(dotted: str) -> str:
    return "$." + ".".join(_q(part) for part in dotted.split("."))


def _ts(expr: str) -> str:
    """Text or epoch seconds/milliseconds to TIMESTAMPTZ; NULL when unreadable."""
    return (
        f"COALESCE(TRY_CAST({expr} AS TIMESTAMPTZ), "
        f"CASE WHEN TRY_CAST({expr} AS DOUBLE) > 1e11 THEN to_timestamp(TRY_CAST({expr} AS DOUBLE)"
        f" / 1000) ELSE to_timestamp(TRY_CAST({expr} AS DOUBLE)) END)"
    )


def _json_type(col: Column) -> str | list[str]:
    kind = col.type.split()[0]
    if kind == "VARCHAR[]":
        return ["VARCHAR"]
    if kind in ("TIMESTAMPTZ", "VARCHAR"):
        return "VARCHAR"
    return kind


def _structure(columns: Sequence[Column]) -> dict[str, Any]:
    """The from_json structure that parses every sourced column in one pass."""
    root: dict[str, Any] = {}
    for col in columns:
        if col.source is None:
            continue
        parts = col.source.removeprefix("$.").split(".")
        node = root
        for part in parts[:-1]:
            node = node.setdefault(part, {})
            if not isinstance(node, dict):  # under a whole-JSON column: read with ->>
                break
        else:
            kind = _json_type(col)
            if kind == "JSON" or parts[-1] not in node:  # a whole-JSON parent wins
                node[parts[-1]] = kind
    return root


def _access(col: Column, struct: str, structure: dict[str, Any]) -> str:
    """The column's value in the parsed struct; fields inside a JSON-typed member via ->>."""
    assert col.source is not None
    parts = col.source[2:].split(".")
    value = struct
    node: Any = structure
    for i, part in enumerate(parts):
        if not isinstance(node, dict):
            value = f"({value}->>'{_path('.'.join(parts[i:]))}')"
            break
        value += "." + _ident(part)
        node = node.get(part)
    return _ts(value) if col.type.startswith("TIMESTAMPTZ") else value


def _quoted_structure(structure: dict[str, Any]) -> str:
    """A parse structure as an SQL string literal."""
    return orjson.dumps(structure).decode().replace("'", "''")
