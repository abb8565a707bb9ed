"""What a notebook query may name: the statement check, on DuckDB's own parse tree.

The query process already cannot reach a file, the network or a setting
(``enable_external_access = false``, ``lock_configuration``). This check
keeps a query to the views of the rows it may read: it accepts one SELECT
statement (which covers ``WITH``, ``DESCRIBE``, ``SUMMARIZE``, a ``PIVOT``
with its values listed), serializes it with DuckDB's ``json_serialize_sql``
and walks the tree:

* a table is named without a catalog, or with ``memory`` / ``main`` only, and
  is one of the views the executor made (or a CTE of the query): the attached
  snapshot (``snapshot.main.mart_conversations``, ``snapshot.x``) and the
  system's views (``pg_settings``, ``duckdb_databases``) are refused by name;
* a table function is one of :data:`TABLE_FUNCTIONS` (``range``,
  ``generate_series``, ``unnest``); ``read_blob``, ``query``, ``duckdb_*()``,
  ``json_execute_serialized_sql`` and every other one are refused;
* a function is not one of :data:`REFUSED_FUNCTIONS` (those that show
  settings, the environment or the catalog, run SQL from a string, or read a
  sequence) nor in ``pg_catalog`` only, and is not qualified with a schema;
* ``SHOW`` (other than ``DESCRIBE``) is refused: the page lists the tables.

A parameter is named (``$from``): ``?`` and ``$1`` are refused, since a cell's
values are bound by name (decision D-NOTEBOOK-PARAMS).

A CTE may not take the name of a system view (else a reference outside its
scope would reach that view). Decision D-EXPLORE-SAFETY.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from typing import Any

import duckdb

__all__ = [
    "REFUSED_FUNCTIONS",
    "TABLE_FUNCTIONS",
    "parameter_names",
    "refusal",
    "system_names",
]

#: Table functions a query may call: each is exercised by a test (none reads a file,
#: the catalog or a setting).
TABLE_FUNCTIONS = frozenset({"range", "generate_series", "unnest"})
#: Scalar functions refused: they show settings, the environment or the catalog, run SQL
#: from a string, or touch a sequence.
REFUSED_FUNCTIONS = frozenset(
    {
        "current_setting", "getenv", "getvariable", "json_serialize_sql",
        "json_deserialize_sql", "json_serialize_plan", "json_execute_serialized_sql",
        "query", "query_table", "nextval", "currval", "setval", "write_log", "current_query",
        "current_database", "current_catalog", "current_schema", "current_schemas",
        "in_search_path", "which_secret", "parse_duckdb_log_message", "stats",
        "get_block_size",
    }
)  # fmt: skip
_REFUSED_PREFIXES = ("duckdb_", "pragma_", "pg_", "__internal", "has_")
_TABLE_REFS = frozenset(
    {"BASE_TABLE", "TABLE_FUNCTION", "JOIN", "SUBQUERY", "EMPTY", "EXPRESSION_LIST", "PIVOT",
     "SHOW_REF"}
)  # fmt: skip
_CATALOGS = ("", "memory")
_SCHEMAS = ("", "main")


def system_names(con: duckdb.DuckDBPyConnection) -> tuple[frozenset[str], frozenset[str]]:
    """(the views and tables a bare name reaches in the system catalog, the functions
    only ``pg_catalog`` has): asked once per query process."""
    tables = con.execute(
        "SELECT lower(view_name) FROM duckdb_views() WHERE database_name IN ('system', 'temp') "
        "UNION SELECT lower(table_name) FROM duckdb_tables() "
        "WHERE database_name IN ('system', 'temp')"
    ).fetchall()
    pg_only = con.execute(
        "SELECT lower(function_name) FROM duckdb_functions() WHERE schema_name = 'pg_catalog' "
        "EXCEPT SELECT lower(function_name) FROM duckdb_functions() WHERE schema_name = 'main'"
    ).fetchall()
    return frozenset(r[0] for r in tables), frozenset(r[0] for r in pg_only)


def _nodes(tree: Any) -> Iterator[dict[str, Any]]:
    """Every object of the parse tree, depth first (bounded by the tree itself)."""
    stack = [tree]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            yield item
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)


def _ctes(tree: Any) -> set[str]:
    names: set[str] = set()
    for node in _nodes(tree):
        cte_map = node.get("cte_map")
        if isinstance(cte_map, dict):
            names.update(str(e.get("key", "")).lower() for e in cte_map.get("map", []))
    return names


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split())[:400] or type(exc).__name__


def refusal(
    con: duckdb.DuckDBPyConnection,
    sql: str,
    tables: frozenset[str],
    system: tuple[frozenset[str], frozenset[str]],
    cells: Sequence[str] = (),
    reads: Sequence[str] = (),
) -> str | None:
    """Why ``sql`` is refused (one line), or None: one SELECT over ``tables`` (lower-case
    view names) and what the module docstring allows. ``cells``: the names of the notebook's
    earlier cells (a message about an unknown table lists them); ``reads``: those ``sql``
    reads as CTEs (``_cells.compose``), which may not take a table's name."""
    if not sql.strip():
        return "write a query: one SELECT statement"
    shadowed = sorted({name.lower() for name in reads} & tables)
    if shadowed:
        return (
            f"an earlier cell is called {shadowed[0]}, which is also a table's name; retitle "
            "that cell, so this cell reads the one it means"
        )
    try:
        statements = con.extract_statements(sql)
    except duckdb.Error as exc:
        return _one_line(exc)
    if len(statements) != 1:
        return f"one statement per cell, found {len(statements)}"
    if statements[0].type.name != "SELECT":
        word = sql.split(None, 1)[0].upper()
        named = word if word.isalpha() else statements[0].type.name
        return f"{named} statements are refused: Explore is read-only (one SELECT per cell)"
    ((text,),) = con.execute("SELECT json_serialize_sql(?::VARCHAR)", [sql]).fetchall()
    tree = json.loads(text)
    if tree.get("error") or len(tree.get("statements", [])) != 1:
        message = tree.get("error_message") or "it cannot be checked"
        return f"this query is refused: {message}"
    names = [str(e.get("key", "")) for e in tree["statements"][0].get("named_param_map", [])]
    if any(not name or name[0].isdigit() for name in names):
        return "name each parameter ($from, $channel): ? and $1 are not available in a cell"
    system_tables, pg_only = system
    ctes = _ctes(tree)
    clash = sorted((ctes & system_tables) - tables)
    if clash:
        return f"a WITH query may not be called {clash[0]} (a system name); rename it"
    for node in _nodes(tree["statements"]):
        why = _node_refusal(node, tables, ctes, pg_only, cells)
        if why is not None:
            return why
    return None


def parameter_names(con: duckdb.DuckDBPyConnection, sql: str) -> tuple[str, ...]:
    """The named parameters ``sql`` uses (``$from`` gives ``from``), sorted; call it for a
    statement :func:`refusal` accepted."""
    ((text,),) = con.execute("SELECT json_serialize_sql(?::VARCHAR)", [sql]).fetchall()
    tree = json.loads(text)
    found = {str(e.get("key", "")) for s in tree.get("statements", [])
             for e in s.get("named_param_map", [])}  # fmt: skip
    return tuple(sorted(found))


def _unknown(name: str, cells: Sequence[str]) -> str:
    if not cells:
        return f"there is no table {name} here; the tables are listed beside the cells"
    shown = ", ".join(list(cells)[:8]) + (", ..." if len(cells) > 8 else "")
    return (
        f"there is no table or earlier cell called {name}; the tables are listed beside the "
        f"cells, and the cells above this one are called {shown}"
    )


def _node_refusal(
    node: dict[str, Any],
    tables: frozenset[str],
    ctes: set[str],
    pg_only: frozenset[str],
    cells: Sequence[str] = (),
) -> str | None:
    kind = node.get("type")
    if "class" not in node and "alias" in node and "sample" in node and kind not in _TABLE_REFS:
        return f"this query is refused: {kind} is not read here"
    if kind == "BASE_TABLE":
        catalog = str(node.get("catalog_name", "")).lower()
        schema = str(node.get("schema_name", "")).lower()
        name = str(node.get("table_name", ""))
        if catalog not in _CATALOGS or schema not in _SCHEMAS:
            qualified = ".".join(p for p in (catalog, schema, name) if p)
            return (
                f"{qualified}: name a table without a database or schema "
                "(the tables beside the cells are all there is)"
            )
        if name.lower() not in tables and name.lower() not in ctes:
            return _unknown(name, cells)
    elif kind == "TABLE_FUNCTION":
        function = node.get("function") or {}
        name = str(function.get("function_name", "")).lower()
        if name not in TABLE_FUNCTIONS or function.get("schema") or function.get("catalog"):
            allowed = ", ".join(sorted(TABLE_FUNCTIONS))
            return f"{name}() is not available in Explore (table functions: {allowed})"
    elif kind == "SHOW_REF" and (
        node.get("show_type") not in ("DESCRIBE", "SUMMARY") or node.get("query") is None
    ):
        return "SHOW is not available in Explore: the tables are listed beside the cells"
    if "function_name" in node:
        name = str(node.get("function_name", "")).lower()
        if node.get("schema") or node.get("catalog"):
            return f"{name}(): name a function without a schema"
        if name in REFUSED_FUNCTIONS or name in pg_only or name.startswith(_REFUSED_PREFIXES):
            return f"{name}() is not available in Explore"
    return None
