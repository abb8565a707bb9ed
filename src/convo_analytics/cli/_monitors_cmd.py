"""``convo monitors``: what the monitors watch, what they found, and trying one out."""

from __future__ import annotations

import logging
import sys
from datetime import UTC, datetime
from typing import Annotated, Any

import orjson
import typer
from rich.console import Console
from rich.table import Table
from rich.text import Text

from convo_analytics.cli._app import settings_from_context
from convo_analytics.cli._options import PLAIN_HELP, DbOption
from convo_analytics.cli._transform_cmd import open_existing
from convo_analytics.errors import UserError

__all__ = ["monitors_app"]

monitors_app = typer.Typer(
    rich_markup_mode=PLAIN_HELP,
    name="monitors",
    help="Monitors: metrics judged after every transform, alerting once per episode.",
    no_args_is_help=True,
)

JsonOption = Annotated[bool, typer.Option("--json", help="Print the result as JSON.")]
NameArgument = Annotated[str, typer.Argument(metavar="NAME", hidden=True)]


def _dumps(value: Any) -> str:
    return orjson.dumps(value, default=str).decode()


def _find(monitors: list[Any], name: str) -> Any:
    for monitor in monitors:
        if monitor.name == name:
            return monitor
    known = ", ".join(m.name for m in monitors) or "none configured"
    raise UserError(f"no monitor named {name!r} (monitors: {known}); see `convo monitors list`")


def _latest_states(settings: Any) -> dict[str, list[dict[str, Any]]]:
    """Each monitor's series' latest judged row (empty without a warehouse)."""
    from convo_analytics.warehouse import require_existing

    try:
        require_existing(settings.require_path("warehouse.path"))
    except UserError:
        return {}
    con = open_existing(settings, read_only=True)
    try:
        rows = con.execute(
            "SELECT monitor, definition_version, workspace_id, series, window_start, state, "
            "value FROM (SELECT *, row_number() OVER (PARTITION BY monitor, "
            "definition_version, workspace_id, series ORDER BY window_start DESC) n "
            "FROM monitor_evaluations) WHERE n = 1 ORDER BY monitor, workspace_id, series"
        ).fetchall()
    finally:
        con.close()
    out: dict[str, list[dict[str, Any]]] = {}
    names = ("monitor", "version", "workspace_id", "series", "window_start", "state", "value")
    for row in rows:
        found = dict(zip(names, row, strict=True))
        out.setdefault(found["monitor"], []).append(found)
    return out


@monitors_app.command("list")
def list_monitors(ctx: typer.Context, db: DbOption = None, as_json: JsonOption = False) -> None:
    """List every monitor ([[monitors]] and the dashboard's), what it judges, and the state
    of each of its series at its last judged window."""
    from convo_analytics.monitors import load_monitors

    settings = settings_from_context(ctx, {"warehouse.path": db})
    monitors = load_monitors(settings)
    states = _latest_states(settings)
    rows: list[dict[str, Any]] = []
    for m in monitors:
        series = [s for s in states.get(m.name, []) if s["version"] == m.version]
        rows.append({
            "name": m.name, "origin": m.origin, "enabled": m.spec.enabled,
            "version": m.version, "rule": m.describe(), "description": m.spec.description,
            "series": [{k: s[k] for k in ("workspace_id", "series", "window_start", "state",
                                          "value")} for s in series],
        })  # fmt: skip
    if as_json:
        sys.stdout.write(_dumps({"monitors": rows}) + "\n")
        return
    if not rows:
        sys.stderr.write(
            "no monitors: add [[monitors]] tables to convo.toml (docs/configuration.md)\n"
        )
        return
    table = Table("monitor", "from", "rule", "state")
    for r in rows:
        judged: list[dict[str, Any]] = r["series"]
        states_text = "; ".join(
            f"{s['workspace_id'] or '(default)'}{'/' + s['series'] if s['series'] else ''}: "
            f"{s['state']} ({s['window_start']})"
            for s in judged
        ) or ("disabled" if not r["enabled"] else "not judged yet")
        table.add_row(
            Text(str(r["name"])), str(r["origin"]), Text(str(r["rule"])), Text(states_text)
        )
    Console(highlight=False, soft_wrap=True).print(table, markup=False)


@monitors_app.command("history")
def history(
    ctx: typer.Context,
    name: NameArgument,
    db: DbOption = None,
    workspace: Annotated[
        str | None, typer.Option("--workspace", metavar="ID", help="Only this workspace id.")
    ] = None,
    limit: Annotated[
        int, typer.Option("--limit", metavar="N", min=1, help="The N latest windows.")
    ] = 30,
    every_version: Annotated[
        bool, typer.Option("--all-versions", help="Include earlier definitions' windows.")
    ] = False,
    as_json: JsonOption = False,
) -> None:
    """Show a monitor's judged windows, newest first: value, baseline, bounds, sample,
    state (the monitor_evaluations table)."""
    from convo_analytics.monitors import load_monitors

    settings = settings_from_context(ctx, {"warehouse.path": db})
    monitor = _find(load_monitors(settings), name)
    con = open_existing(settings, read_only=True)
    try:
        sql = "SELECT * FROM monitor_evaluations WHERE monitor = ?"
        params: list[Any] = [name]
        if not every_version:
            sql += " AND definition_version = ?"
            params.append(monitor.version)
        if workspace is not None:
            sql += " AND workspace_id = ?"
            params.append(workspace)
        cur = con.execute(sql + " ORDER BY window_start DESC, workspace_id, series LIMIT ?",
                          [*params, limit])  # fmt: skip
        names = [d[0] for d in cur.description or ()]
        rows = [dict(zip(names, r, strict=True)) for r in cur.fetchall()]
    finally:
        con.close()
    for row in rows:
        if isinstance(row.get("explanation"), str):
            row["explanation"] = orjson.loads(row["explanation"])
    if as_json:
        sys.stdout.write(_dumps({"monitor": name, "version": monitor.version, "rows": rows}) + "\n")
        return
    _print_rows(rows)


def _print_rows(rows: list[dict[str, Any]]) -> None:
    """The windows as a table; the workspace and note columns only when they say something."""
    from convo_analytics.monitors import format_value

    places = {(r["workspace_id"], r["series"]) for r in rows}
    noted = any(r["reason"] for r in rows)
    table = Table()
    table.add_column("window", no_wrap=True)
    if len(places) > 1:
        table.add_column("series")
    for name in ("value", "expected", "normal range"):
        table.add_column(name, no_wrap=True)
    table.add_column("sample", no_wrap=True, justify="right")
    table.add_column("state", no_wrap=True)
    if noted:
        table.add_column("note")
    for r in rows:
        metric = r["metric"]
        bounds = " to ".join(
            format_value(metric, b) if b is not None else "…"
            for b in (r["lower_bound"], r["upper_bound"])
        )
        cells: list[Any] = [str(r["window_start"])]
        if len(places) > 1:
            cells.append(Text((r["workspace_id"] or "(default)")
                              + (f"/{r['series']}" if r["series"] else "")))  # fmt: skip
        cells += [format_value(metric, r["value"]), format_value(metric, r["baseline"]), bounds,
                  f"{r['sample']:,}", r["state"]]  # fmt: skip
        if noted:
            cells.append(Text(r["reason"] or ""))
        table.add_row(*cells)
    Console(highlight=False, soft_wrap=True).print(table, markup=False)


@monitors_app.command("test")
def test_monitor(
    ctx: typer.Context,
    name: NameArgument,
    db: DbOption = None,
    days: Annotated[
        int | None,
        typer.Option(
            "--days",
            metavar="N",
            min=1,
            max=3660,
            help="Judge the last N days (default: monitoring.lookback_days).",
        ),
    ] = None,
    send: Annotated[
        bool, typer.Option("--send", help="Also send a test notification to every channel.")
    ] = False,
    as_json: JsonOption = False,
) -> None:
    """Judge a monitor over the recent past from a clean state, without storing anything:
    each window's value, bounds and state, and the alerts it would have sent. --send also
    sends a test notification (kind monitor.test) through every configured channel."""
    from dataclasses import replace

    from convo_analytics.monitors import evaluate, load_monitors, monitors_settings

    settings = settings_from_context(ctx, {"warehouse.path": db})
    monitor = _find(load_monitors(settings), name)
    chosen = monitors_settings(settings)
    config = chosen.evaluation
    if days is not None:
        config = replace(config, lookback_days=days)
    con = open_existing(settings, read_only=True)
    try:
        result = evaluate(con, [replace(monitor, spec=monitor.spec.model_copy(
            update={"enabled": True}))], config, stored_state=False)  # fmt: skip
    finally:
        con.close()
    rows = result.rows
    alerts = [r for r in rows if r["notification_key"] and r["state"] == "alerting"]
    delivery = _send_test(settings, monitor, rows) if send else None
    if as_json:
        sys.stdout.write(_dumps({"monitor": name, "version": monitor.version,
                                 "rule": monitor.describe(), "counts": result.counts(),
                                 "rows": rows, "delivery": delivery}) + "\n")  # fmt: skip
        return
    err = Console(stderr=True, highlight=False, soft_wrap=True)
    err.print(f"{name}: {monitor.describe()}", markup=False)
    _print_rows(list(reversed(rows))[:30])
    counts = result.counts()
    err.print(
        f"{counts['windows']} windows, {counts['judged']} judged, {counts['alerts']} alerts, "
        f"{counts['resolved']} resolved" + (f"; last alert {alerts[-1]['window_start']}"
                                            if alerts else ""),
        markup=False,
    )  # fmt: skip
    if delivery is not None:
        err.print(f"test notification: {_dumps(delivery)}", markup=False)


def _send_test(settings: Any, monitor: Any, rows: list[dict[str, Any]]) -> dict[str, Any]:
    from convo_analytics.notify import Notification, notify_config, send

    config = notify_config(settings)
    if not config.channels:
        raise UserError(
            "--send: no notification channel is configured; set notify.webhook_url, "
            "notify.slack_webhook_url, notify.smtp_host or run.alert_command"
        )
    latest = rows[-1] if rows else None
    at = datetime.now(UTC).isoformat(timespec="seconds")
    text = f"Test of monitor {monitor.name}: {monitor.describe()}."
    if latest is not None:
        text += f" Latest window {latest['window_start']}: state {latest['state']}."
    notice = Notification.create(
        source="monitor-test", subject_id=f"{monitor.name}\x1f{at}", kind="monitor.test",
        subject=f"[test] monitor {monitor.name}", text=text,
        fields={"monitor": monitor.name, "definitionVersion": monitor.version, "at": at},
    )  # fmt: skip
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    return send(config, notice).as_json()


@monitors_app.command("evaluate")
def evaluate_now(ctx: typer.Context, db: DbOption = None, as_json: JsonOption = False) -> None:
    """Judge every monitor's new windows, store them and send their notices now (what the
    nightly run's monitors step does after its transform)."""
    from convo_analytics.monitors import run_monitors
    from convo_analytics.pipeline import warehouse_writer
    from convo_analytics.warehouse import require_existing

    settings = settings_from_context(ctx, {"warehouse.path": db})
    db_path = settings.require_path("warehouse.path")
    require_existing(db_path)
    with warehouse_writer(settings, "convo monitors evaluate"):
        counts = run_monitors(settings, db_path)
    if as_json:
        sys.stdout.write(_dumps(counts) + "\n")
        return
    Console(stderr=True, highlight=False, soft_wrap=True).print(
        ", ".join(f"{k} {v}" for k, v in counts.items()), markup=False
    )


@monitors_app.command("delete")
def delete(ctx: typer.Context, name: NameArgument) -> None:
    """Delete a monitor made in the dashboard (from its store; its evaluations stay).
    Monitors of convo.toml are removed by editing it."""
    from convo_analytics.monitors import delete_monitor

    settings = settings_from_context(ctx, {})
    if any(spec.name == name for spec in settings.monitors):
        raise UserError(f"monitor {name!r} is in convo.toml's [[monitors]]; remove its table there")
    path = settings.require_path("monitoring.store_file")
    if not delete_monitor(path, name):
        raise UserError(f"no monitor named {name!r} in the dashboard's store ({path})")
    sys.stderr.write(f"deleted monitor {name}\n")
