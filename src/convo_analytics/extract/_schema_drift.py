"""Noticing when a stream's records change shape: new, missing or retyped fields.

The shape of each list page's records comes from DuckDB (``json_structure`` of
the page) and is merged over the run; at the end it is compared with the shape stored
from earlier runs. Drift is reported in the run log and ``extract_runs``,
never raised: the raw payloads keep whatever the new shape carries.
"""

from __future__ import annotations

import logging
from typing import Any

import duckdb

from convo_analytics.extract._shapes import compare_schemas

log = logging.getLogger("convo.extract")

_DUCKDB_TYPES = {
    "VARCHAR": "string", "BIGINT": "integer", "UBIGINT": "integer", "INTEGER": "integer",
    "HUGEINT": "integer", "UHUGEINT": "integer", "DOUBLE": "number", "BOOLEAN": "boolean",
    "NULL": "null",
}  # fmt: skip


def _json_type(structure: Any) -> set[str]:
    if isinstance(structure, dict):
        return {"object"}
    if isinstance(structure, list):
        return {"array"}
    name = _DUCKDB_TYPES.get(str(structure))
    if name is None:  # "JSON": DuckDB saw several types
        return {"mixed"}
    return {name}


class SchemaTracker:
    def __init__(
        self,
        con: duckdb.DuckDBPyConnection,
        stream: str,
        run_id: str,
        workspace: str = "default",
    ) -> None:
        self.con = con
        self.stream = stream
        self.run_id = run_id
        self.workspace = workspace
        self.seen: dict[str, set[str]] = {}
        rows = con.execute(
            "SELECT field, json_type FROM stream_schemas WHERE workspace_id = ? AND stream = ?",
            [workspace, stream],
        ).fetchall()
        self.before = {str(field): str(kind) for field, kind in rows}

    def observe(self, structure: dict[str, Any]) -> None:
        for field, kind in structure.items():
            self.seen.setdefault(field, set()).update(_json_type(kind))

    def _after(self) -> dict[str, str]:
        after = {}
        for field, kinds in self.seen.items():
            real = kinds - {"null"}
            if {"integer", "number"} <= real:
                real -= {"integer"}
            if not real:
                after[field] = "null"
            elif len(real) == 1:
                after[field] = next(iter(real))
            else:
                after[field] = "mixed:" + "|".join(sorted(real))
        return after

    def finish(self) -> list[str]:
        """Store the shape seen; the drift from earlier runs as human lines."""
        if not self.seen:
            return []
        after = self._after()
        lines = compare_schemas(self.before, after).describe() if self.before else []
        for line in lines:
            log.warning("%s: schema drift: %s", self.stream, line)
        self.con.execute(
            """INSERT INTO stream_schemas
               SELECT ?, ?, f, t, ?, ? FROM (SELECT unnest(?) AS f, unnest(?) AS t)
               ON CONFLICT (workspace_id, stream, field) DO UPDATE SET json_type = CASE
                   WHEN excluded.json_type = 'null' THEN stream_schemas.json_type
                   ELSE excluded.json_type END, last_run_id = excluded.last_run_id""",
            [
                self.workspace,
                self.stream,
                self.run_id,
                self.run_id,
                list(after),
                list(after.values()),
            ],
        )
        return lines
