"""A notebook run without a browser: every cell through the one limited executor.

``convo notebook run`` and the ``[[reports]]`` of ``convo run`` run a notebook
the way Explore does, with nobody at the page: the same files (a saved
notebook over a starter), the same parameters (given as ``NAME=VALUE`` text,
converted and checked by type; the built-ins from the run: the workspace, the
last 30 days with data, the first of ``transform.timezones``, every channel),
the same cell references (``_cells.compose``) and the same query processes
with the same limits (``dashboard.query_*``) over the current published
snapshot, narrowed to the workspace's rows when one is named (decision
D-NOTEBOOK-REPORTS).

A value that cannot be used, an unknown parameter or notebook is a
:class:`UserError` (one line; the command exits 2) before any cell runs. A
cell that fails is recorded in its :class:`CellRun`; the run goes on with the
next cell, and :attr:`NotebookRun.ok` is False.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

import polars as pl

from convo_analytics.config import Settings
from convo_analytics.errors import UserError
from convo_analytics.notebooks._cells import cell_name, compose
from convo_analytics.notebooks._executor import Executor, Limits, QueryResult
from convo_analytics.notebooks._files import list_notebooks, load_notebook
from convo_analytics.notebooks._format import Cell, Notebook, notebook_name
from convo_analytics.notebooks._params import BUILTINS, ParamError, ParamSpec, convert, referenced
from convo_analytics.publish import Snapshot, current_snapshot

__all__ = [
    "CellRun",
    "NotebookRun",
    "RunScope",
    "parse_param_args",
    "run_notebook",
]

#: Rows a headless cell may return (its CSV holds them all): far above Explore's page limit,
#: still under the executor's result cap for narrow results.
HEADLESS_ROW_LIMIT = 1_000_000
_DEFAULT_DAYS = 30


@dataclass(frozen=True, slots=True)
class RunScope:
    """Whose rows a run reads: one workspace (id and name) or, without one, every row."""

    workspace_id: str | None = None
    workspace_name: str | None = None


@dataclass(frozen=True, slots=True)
class CellRun:
    """One cell of a run: a markdown cell (no result), or a SQL cell's result or error."""

    position: int
    cell: Cell
    name: str
    result: QueryResult | None = None

    @property
    def frame(self) -> pl.DataFrame | None:
        return self.result.frame if self.result is not None else None

    @property
    def error(self) -> str | None:
        return self.result.error if self.result is not None else None


@dataclass(frozen=True, slots=True)
class NotebookRun:
    """A notebook's run: what ran, with which values, over which data, and each cell."""

    name: str
    notebook: Notebook
    specs: tuple[ParamSpec, ...]
    values: Mapping[str, Any]
    scope: RunScope
    snapshot_id: str
    published_at: str
    #: The latest conversation start in the rows the run read (ISO 8601 UTC), if any.
    data_through: str | None
    generated_at: str
    cells: tuple[CellRun, ...] = field(default_factory=tuple)

    @property
    def ok(self) -> bool:
        """Every SQL cell ran (and none was cut by the row limit)."""
        return all(
            c.result is not None and c.result.error is None and not c.result.truncated
            for c in self.cells
            if c.cell.kind == "sql"
        )

    @property
    def failures(self) -> list[str]:
        """One line per cell that did not run: ``cell N (title): why``."""
        out = []
        for c in self.cells:
            if c.cell.kind != "sql" or c.result is None:
                continue
            if c.result.error is not None:
                out.append(f"cell {c.position} ({c.cell.title}): {c.result.error}")
            elif c.result.truncated:
                out.append(
                    f"cell {c.position} ({c.cell.title}): more than {HEADLESS_ROW_LIMIT:,} rows; "
                    "aggregate or filter in the SQL"
                )
        return out


def parse_param_args(items: Sequence[str]) -> dict[str, list[str]]:
    """``--param NAME=VALUE`` items by name (a name given twice: a list, for ``choices``)."""
    out: dict[str, list[str]] = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not name.strip():
            raise UserError(f"--param {item!r}: write NAME=VALUE, e.g. --param from=2026-01-01")
        out.setdefault(name.strip(), []).append(value)
    return out


def _limits(settings: Settings) -> Limits:
    return Limits(
        memory_mb=settings.get_int("dashboard.query_memory_mb"),
        threads=settings.get_int("dashboard.query_threads"),
        temp_mb=settings.get_int("dashboard.query_temp_mb"),
        workers=1,
    )


def _scope(snap: Snapshot, workspace: str | None) -> RunScope:
    if workspace is None:
        return RunScope()
    con = snap.connect()
    try:
        rows = con.execute("SELECT workspace_id, name FROM workspaces ORDER BY name").fetchall()
    finally:
        con.close()
    for wanted in ((r for r in rows if r[1] == workspace), (r for r in rows if r[0] == workspace)):
        found = next(wanted, None)
        if found is not None:
            return RunScope(str(found[0]), str(found[1]))
    known = ", ".join(str(r[1]) for r in rows) or "none"
    raise UserError(
        f"--workspace {workspace!r}: no such workspace in the published snapshot; it holds: {known}"
    )


def _data_facts(snap: Snapshot, scope: RunScope) -> tuple[date | None, str | None, list[str]]:
    """The last day with conversations, the latest start (ISO) and the channels, in scope."""
    where, args = (
        ("WHERE workspace_id = ?", [scope.workspace_id]) if scope.workspace_id else ("", [])
    )
    con = snap.connect()
    try:
        latest = con.execute(f"SELECT max(started_at) FROM mart_conversations {where}", args)
        (last,) = latest.fetchone() or (None,)
        channels = con.execute(
            f"SELECT DISTINCT channel FROM mart_conversations {where} ORDER BY 1", args
        ).fetchall()
    finally:
        con.close()
    if last is None:
        return None, None, [str(c[0]) for c in channels if c[0] is not None]
    stamp = last if last.tzinfo else last.replace(tzinfo=UTC)
    iso = stamp.astimezone(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")
    return stamp.date(), iso, [str(c[0]) for c in channels if c[0] is not None]


def _used(notebook: Notebook) -> set[str]:
    """The parameter names the cells write (``$name``; inside strings too: a superset)."""
    return referenced(c.sql for c in notebook.cells if c.kind == "sql")


def _values(
    notebook: Notebook,
    given: Mapping[str, list[str]],
    scope: RunScope,
    facts: tuple[date | None, str | None, list[str]],
    settings: Settings,
) -> tuple[tuple[ParamSpec, ...], dict[str, Any]]:
    used = _used(notebook)
    specs = tuple(p for p in BUILTINS if p.name in used or p.name in given) + tuple(notebook.params)
    known = {p.name for p in BUILTINS} | {p.name for p in notebook.params}
    for name in given:
        if name not in known:
            names = ", ".join(p.name for p in (*BUILTINS, *notebook.params))
            raise UserError(f"--param {name}: the notebook has no such parameter (it has: {names})")
    last = facts[0] or datetime.now(UTC).date()
    timezones = settings.get_list("transform.timezones")
    builtin = {
        "workspace": scope.workspace_id or "",
        "from": last - timedelta(days=_DEFAULT_DAYS - 1),
        "to": last,
        "tz": timezones[0] if timezones else "UTC",
        "channel": list(facts[2]),
    }
    values: dict[str, Any] = {}
    for spec in specs:
        raw = given.get(spec.name)
        if spec.name == "workspace" and raw is not None and raw[-1] != (scope.workspace_id or ""):
            raise UserError(
                "--param workspace: the workspace is chosen with --workspace NAME, not a parameter"
            )
        try:
            if raw is not None:
                value = convert(spec, raw if spec.type == "choices" else raw[-1])
            elif spec.builtin:
                value = builtin[spec.name]
            elif spec.default is None or (spec.default == "" and spec.type in ("date", "number")):
                value = None
            else:
                value = convert(spec, spec.default)
        except ParamError as exc:
            raise UserError(f"--param {spec.name}: {exc}") from None
        if value is None and spec.name in used:
            raise UserError(
                f"--param {spec.name}: the notebook uses it and declares no default; give "
                f"--param {spec.name}=VALUE ({spec.type})"
            )
        values[spec.name] = value
    return specs, values


def find_notebook(saved_dir: Path, name: str) -> Notebook:
    """The notebook called ``name`` (saved, else starter); a UserError naming the known ones."""
    if notebook_name(name) is None:
        raise UserError(
            f"notebook {name!r}: a notebook's name is its file's stem (lower-case letters, "
            "digits, - and _)"
        )
    notebook = load_notebook(saved_dir, name)
    if notebook is None:
        known = ", ".join(list_notebooks(saved_dir)) or "none"
        raise UserError(f"notebook {name!r}: there is no such notebook (there are: {known})")
    if notebook.problems:
        raise UserError(f"notebook {name!r}: {notebook.problems[0]}; fix its header")
    return notebook


def run_notebook(
    settings: Settings,
    name: str,
    *,
    params: Mapping[str, list[str]] | None = None,
    workspace: str | None = None,
    executor: Executor | None = None,
    timeout: float | None = None,
) -> NotebookRun:
    """Run notebook ``name`` over the current published snapshot (one workspace's rows
    with ``workspace``); a :class:`UserError` before any cell runs when it cannot start."""
    saved_dir = settings.require_path("dashboard.notebooks_dir")
    notebook = find_notebook(saved_dir, name)
    published = settings.require_path("publish.dir")
    snap = current_snapshot(published)
    if snap is None:
        raise UserError(
            f"nothing is published in {published} yet; run `convo run` (or `convo publish`) first"
        )
    scope = _scope(snap, workspace)
    facts = _data_facts(snap, scope)
    specs, values = _values(notebook, params or {}, scope, facts, settings)
    own = executor is None
    runner = executor or Executor(_limits(settings), hide={str(published.resolve()): "<published>"})
    limit = (
        timeout if timeout is not None else settings.get_float("dashboard.query_timeout_seconds")
    )
    try:
        cells = tuple(_cells(runner, snap, notebook, values, scope, limit))
    finally:
        if own:
            runner.close()
    return NotebookRun(
        name=name,
        notebook=notebook,
        specs=specs,
        values=values,
        scope=scope,
        snapshot_id=snap.snapshot_id,
        published_at=snap.published_at,
        data_through=facts[1],
        generated_at=datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z"),
        cells=cells,
    )


def _cells(
    runner: Executor,
    snap: Snapshot,
    notebook: Notebook,
    values: Mapping[str, Any],
    scope: RunScope,
    timeout: float,
) -> list[CellRun]:
    runs: list[CellRun] = []
    workspaces = (scope.workspace_id,) if scope.workspace_id else None
    for at, cell in enumerate(notebook.cells):
        name = cell_name(cell.title) if cell.kind == "sql" else ""
        if cell.kind != "sql":
            runs.append(CellRun(at + 1, cell, name))
            continue
        composed = compose(notebook.cells, at)
        if composed.error is not None:
            runs.append(CellRun(at + 1, cell, name, QueryResult(None, composed.error)))
            continue
        earlier = [cell_name(c.title) for c in notebook.cells[:at] if c.kind == "sql"]
        result = runner.run(
            snap.path.resolve(),
            composed.sql,
            timeout=timeout,
            row_limit=HEADLESS_ROW_LIMIT,
            workspaces=workspaces,
            keyed_only=workspaces is not None,
            params={k: v for k, v in values.items() if v is not None},
            cells=[n for n in earlier if n],
            reads=composed.reads,
        )
        runs.append(CellRun(at + 1, cell, name, result))
    return runs
