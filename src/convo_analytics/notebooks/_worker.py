"""The query process: runs notebook queries one at a time for the executor that started it.

Started as ``python -m convo_analytics.notebooks._worker CONFIG`` (never
forked from the app's threads). It sets up, caps its own address space
(``RLIMIT_AS``: its address space once ready, plus what the memory limit leaves
over its resident size then), says it is
ready, then reads one request per line on stdin and answers each on its
protocol channel (the stdout it was started with; its own fd 1 then points at
/dev/null, so nothing DuckDB or a library prints can mix in):

* request: a JSON line ``{"snapshot", "sql", "row_limit", "workspaces",
  "keyed_only", "max_bytes", "params"}`` (``params``: the notebook's parameter
  values, checked by type (``_params.encode_values``); the ones the statement
  names are bound as prepared-statement parameters, never written into it);
* answer: a JSON line ``{"ok", "rows", "truncated", "bytes"}`` followed by
  ``bytes`` bytes of the result as an Arrow IPC stream, or ``{"error",
  "kind"}`` (kind: ``refused``, ``error``, ``memory``, ``disk``).

Each snapshot and set of workspaces gets an in-memory DuckDB (kept while the
requests that follow are for the same ones) with the configured ``threads``,
``memory_limit``, a private ``temp_directory`` capped by
``max_temp_directory_size``, no extension autoloading and no Python
replacement scans. It attaches the snapshot read-only, makes a view in the
in-memory database for each of the snapshot's tables (narrowed to the
request's workspaces), then turns off file and network access, locks the
configuration and checks the statement (``_guard``) before running it.

The process ends when stdin closes, and on its own when its parent goes away
(its parent id changes), so a killed app leaves no query process behind.
"""

from __future__ import annotations

import contextlib
import json
import os
import resource
import sys
import threading
import time
from pathlib import Path
from typing import IO, Any

__all__ = ["main"]

#: The snapshot's name in a query process (its tables are reached through views only).
ALIAS = "snapshot"
_PARENT_CHECK_SECONDS = 0.25


def _status_mib(field: str) -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        name, _, rest = line.partition(":")
        if name == field:
            return int(rest.split()[0]) / 1024
    return 0.0


def _watch_parent(parent: int) -> None:
    """End this process when the app that started it is gone (it is re-parented)."""

    def watch() -> None:
        while True:
            if os.getppid() != parent:
                os._exit(0)
            time.sleep(_PARENT_CHECK_SECONDS)

    threading.Thread(target=watch, name="watch-parent", daemon=True).start()


class _Worker:
    def __init__(self, config: dict[str, Any], channel: IO[bytes]) -> None:
        import duckdb

        from convo_analytics.notebooks._guard import system_names

        self.config = config
        self.channel = channel
        #: The database of the last request: (its key, the connection, its views' names).
        self.kept: tuple[Any, Any, frozenset[str]] | None = None
        self.duckdb = duckdb
        self.scratch = Path(config["scratch"])
        self.hidden = sorted(
            ((str(p), label) for p, label in config.get("hide", {}).items() if len(str(p)) > 1),
            key=lambda item: -len(item[0]),
        )
        #: MiB a query may add to the process once ready (set by main(), once ready).
        self.budget_mb = float(config["memory_mb"])
        con = self._connect()
        try:
            con.sql("SELECT 42").to_arrow_table()  # warm: what every query then needs
            self.system = system_names(con)
        finally:
            con.close()

    def _connect(self) -> Any:
        cfg = self.config
        duckdb_memory = max(32, int(self.budget_mb * 3 // 4))
        con = self.duckdb.connect(
            ":memory:",
            config={
                "autoinstall_known_extensions": False,
                "autoload_known_extensions": False,
                "threads": int(cfg["threads"]),
                "memory_limit": f"{duckdb_memory}MB",
                "temp_directory": str(self.scratch / "spill"),
                "max_temp_directory_size": f"{int(cfg['temp_mb'])}MB",
                "python_enable_replacements": False,
            },
        )
        con.execute("SET enable_progress_bar = false")
        return con

    def _plain(self, text: str) -> str:
        """One line, without the snapshot's path, the scratch folder or the app's folder."""
        for path, label in self.hidden:
            text = text.replace(path, label)
        return " ".join(text.split())[:400]

    def _views(self, con: Any, request: dict[str, Any]) -> frozenset[str]:
        """A view in the in-memory database per snapshot table, narrowed to the request's
        workspaces (a table without ``workspace_id``: whole, or left out with
        ``keyed_only``); the views' names."""
        rows = con.execute(
            "SELECT table_name, bool_or(column_name = 'workspace_id') FROM duckdb_columns() "
            "WHERE database_name = ? AND schema_name = 'main' GROUP BY 1 ORDER BY 1",
            [ALIAS],
        ).fetchall()
        workspaces = request.get("workspaces")
        keep = None
        if workspaces is not None:
            keep = ", ".join("'" + str(ws).replace("'", "''") + "'" for ws in workspaces)
        names = []
        for name, keyed in rows:
            where = ""
            if keep is not None and keyed:
                where = f" WHERE workspace_id IN ({keep})" if keep else " WHERE false"
            elif keep is not None and request.get("keyed_only"):
                continue
            quoted = '"' + str(name).replace('"', '""') + '"'
            con.execute(
                f"CREATE VIEW memory.main.{quoted} AS SELECT * FROM {ALIAS}.main.{quoted}{where}"
            )
            names.append(str(name).lower())
        return frozenset(names)

    def _answer(self, header: dict[str, Any], payload: bytes = b"") -> None:
        self.channel.write(json.dumps(header).encode() + b"\n" + payload)
        self.channel.flush()

    def _database(self, request: dict[str, Any]) -> tuple[Any, frozenset[str]]:
        """The locked database of the request's snapshot and workspaces, and its views'
        names: kept for the next request of the same ones (a query cannot change it: it
        is one SELECT, and the configuration is locked), made anew otherwise."""
        workspaces = request.get("workspaces")
        key = (
            request["snapshot"],
            tuple(workspaces) if workspaces is not None else None,
            bool(request.get("keyed_only")),
        )
        if self.kept is not None and self.kept[0] == key:
            return self.kept[1], self.kept[2]
        self.forget()
        con = self._connect()
        try:
            con.execute(f"ATTACH ? AS {ALIAS} (READ_ONLY)", [request["snapshot"]])
            tables = self._views(con, request)
            con.execute("SET TimeZone = 'UTC'")
            con.execute("SET enable_external_access = false")
            con.execute("SET lock_configuration = true")
        except BaseException:
            con.close()
            raise
        self.kept = (key, con, tables)
        return con, tables

    def forget(self) -> None:
        """Close the kept database (after an error, or for another snapshot)."""
        if self.kept is not None:
            with contextlib.suppress(Exception):
                self.kept[1].close()
            self.kept = None

    def run(self, request: dict[str, Any]) -> None:
        import pyarrow as pa
        import pyarrow.ipc

        from convo_analytics.notebooks._guard import parameter_names, refusal
        from convo_analytics.notebooks._params import decode_values

        duckdb = self.duckdb
        failed = True
        try:
            con, tables = self._database(request)
            refused = refusal(
                con,
                request["sql"],
                tables,
                self.system,
                cells=request.get("cells") or (),
                reads=request.get("reads") or (),
            )
            if refused is not None:
                self._answer({"error": self._plain(refused), "kind": "refused"})
                failed = False
                return
            given = request.get("params") or {}
            used = parameter_names(con, request["sql"])
            missing = [name for name in used if name not in given]
            if missing:
                self._answer(
                    {
                        "error": f"${missing[0]} is not a parameter of this notebook; declare it "
                        f"in the header (-- param: {missing[0]} text = ...)",
                        "kind": "refused",
                    }
                )
                failed = False
                return
            bound = decode_values(given, used)
            limit = int(request["row_limit"])
            relation = con.sql(request["sql"], params=bound) if bound else con.sql(request["sql"])
            relation = _readable(relation)
            table = relation.limit(limit + 1).to_arrow_table()
            truncated = table.num_rows > limit
            table = table.slice(0, limit)
            sink = pa.BufferOutputStream()
            with pyarrow.ipc.new_stream(sink, table.schema) as writer:
                writer.write_table(table)
            data = sink.getvalue().to_pybytes()
            if len(data) > int(request["max_bytes"]):
                cap = int(request["max_bytes"]) // 2**20
                self._answer(
                    {
                        "error": f"the result is {len(data) / 2**20:,.0f} MiB, more than the "
                        f"{cap} MiB a cell shows; select fewer or narrower columns",
                        "kind": "error",
                    }
                )
                return
            header = {"ok": True, "rows": table.num_rows, "truncated": truncated}
            self._answer({**header, "bytes": len(data)}, data)
            failed = False
        except (MemoryError, duckdb.OutOfMemoryException) as exc:
            self._answer({"error": self._plain(str(exc)), "kind": _memory_kind(str(exc))})
        except duckdb.Error as exc:
            text = str(exc)
            kind = "disk" if "max_temp_directory_size" in text else "error"
            self._answer({"error": self._plain(text), "kind": kind})
        finally:
            if failed:  # a query's error may leave the database in any state: a fresh one next
                self.forget()


def _readable(relation: Any) -> Any:
    """``relation`` with each column holding an INTERVAL (alone, in a list or a struct)
    as its text: Arrow's month-day-nano interval is a type polars cannot read (it panics),
    and ``1 day 02:00:00`` is what a person reads anyway."""
    types = [str(t) for t in relation.types]
    if not any("INTERVAL" in t for t in types):
        return relation
    columns = []
    for name, kind in zip(relation.columns, types, strict=True):
        quoted = '"' + str(name).replace('"', '""') + '"'
        columns.append(f"CAST({quoted} AS VARCHAR) AS {quoted}" if "INTERVAL" in kind else quoted)
    return relation.select(", ".join(columns))


def _memory_kind(text: str) -> str:
    return "disk" if "max_temp_directory_size" in text or "temporary" in text.lower() else "memory"


def main(argv: list[str] | None = None) -> int:
    config = json.loads((argv or sys.argv[1:])[0])
    _watch_parent(int(config["parent"]))
    channel = os.fdopen(os.dup(1), "wb")
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    os.close(devnull)
    worker = _Worker(config, channel)
    rss = _status_mib("VmRSS")
    worker.budget_mb = max(32.0, config["memory_mb"] - rss)  # the limit holds the process whole
    if config.get("cap_address_space", True):
        room = int((_status_mib("VmSize") + worker.budget_mb) * 2**20)
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_AS, (room, room))
    worker._answer({"ready": True, "pid": os.getpid(), "rss_mib": rss})
    for line in sys.stdin.buffer:
        if not line.strip():
            continue
        worker.run(json.loads(line))
    return 0


if __name__ == "__main__":
    sys.exit(main())
