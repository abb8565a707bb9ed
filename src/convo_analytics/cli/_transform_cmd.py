"""``convo transform``, ``convo export summary|guardrails`` and ``convo serve``."""

from __future__ import annotations

import logging
import sys
from pathlib import Path
from typing import Annotated
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import duckdb
import orjson
import typer
from rich.console import Console

from convo_analytics.cli._app import settings_from_context
from convo_analytics.cli._errors import BehindTlsProxy, listening_socket, require_loopback
from convo_analytics.cli._lock import warehouse_writer
from convo_analytics.cli._options import PLAIN_HELP, DbOption, default_of
from convo_analytics.config import Settings
from convo_analytics.errors import UserError

__all__ = ["export_app", "serve", "transform"]

FromOption = Annotated[
    str, typer.Option("--from", metavar="DAY", help="First day, inclusive (YYYY-MM-DD).")
]
ToOption = Annotated[
    str, typer.Option("--to", metavar="DAY", help="Last day, inclusive (YYYY-MM-DD).")
]
TzOption = Annotated[
    str | None,
    typer.Option(
        "--tz",
        metavar="ZONE",
        help="IANA time zone days are cut in. [default: the first of transform.timezones]",
    ),
]

export_app = typer.Typer(
    rich_markup_mode=PLAIN_HELP,
    name="export",
    help="Write the summary (service-compatible) or the guardrail incident log.",
    no_args_is_help=True,
)


def checked_zone(flag: str, value: str) -> str:
    """``value`` when it names an IANA zone; else the user error naming ``flag``."""
    try:
        ZoneInfo(value)
    except (ZoneInfoNotFoundError, ValueError):
        raise UserError(
            f"{flag} {value!r} is not an IANA time zone (e.g. UTC, Europe/Berlin)"
        ) from None
    return value


def _warehouse(settings: Settings, *, read_only: bool) -> duckdb.DuckDBPyConnection:
    """The warehouse a command reads (or rebuilds marts in): it must exist already, since an
    empty one made here would only hide a wrong --db."""
    from convo_analytics.warehouse import open_warehouse

    db = settings.require_path("warehouse.path")
    return open_warehouse(db, read_only=read_only, must_exist=True)


def _warn(message: str | None) -> None:
    """``warning: ...`` on stderr (the export still succeeds)."""
    if message:
        sys.stderr.write(f"warning: {message}\n")
        sys.stderr.flush()


def _default_tz(settings: Settings, tz: str | None) -> str:
    return checked_zone("--tz", tz or (settings.get_list("transform.timezones") or ("UTC",))[0])


def transform(
    ctx: typer.Context,
    db: DbOption = None,
    tz: Annotated[
        list[str] | None,
        typer.Option(
            "--tz",
            metavar="ZONE",
            help=f"Cut days in this IANA zone (repeatable). {default_of('transform.timezones')}",
        ),
    ] = None,
    low_confidence_threshold: Annotated[
        float | None,
        typer.Option(
            "--low-confidence-threshold",
            min=0.0,
            max=1.0,
            metavar="X",
            help="Confidence below this is low. "
            + default_of("transform.low_confidence_threshold"),
        ),
    ] = None,
    reconcile: Annotated[
        bool,
        typer.Option("--reconcile/--no-reconcile", help="Compare with the service's own summary."),
    ] = True,
    tolerance: Annotated[
        float | None,
        typer.Option(
            "--tolerance",
            min=0.0,
            metavar="X",
            help=f"Relative difference tolerated. {default_of('transform.tolerance')}",
        ),
    ] = None,
    fail_on_mismatch: Annotated[
        bool,
        typer.Option("--fail-on-mismatch", help="Exit 1 when reconciliation finds differences."),
    ] = False,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print the run as one JSON object.")
    ] = False,
    full: Annotated[
        bool,
        typer.Option(
            "--full",
            help="Rebuild every partition (a month at a time, in bounded memory) instead of "
            "the ones changed since the last transform.",
        ),
    ] = False,
) -> None:
    """Bring the marts (facts, daily metrics, incidents) up to date, in one transaction.

    Only the partitions (workspace, zone, day) that what was loaded since the
    last transform touches are rewritten, unless --full asks for all of them
    (or the zones, the threshold or the definitions changed).

    Exit status 0 when done (1 with --fail-on-mismatch and differences from
    the service's summary), 75 when another writer holds the warehouse, 2 for
    usage errors.
    """
    settings = settings_from_context(
        ctx,
        {
            "warehouse.path": db,
            "transform.timezones": tz or None,
            "transform.low_confidence_threshold": low_confidence_threshold,
            "transform.tolerance": tolerance,
        },
    )
    zones = tuple(
        dict.fromkeys(checked_zone("--tz", z) for z in settings.get_list("transform.timezones"))
    )
    if not zones:
        raise UserError("--tz: name at least one time zone (transform.timezones is empty)")
    from convo_analytics.warehouse import require_existing

    require_existing(settings.require_path("warehouse.path"))  # before waiting for the lock
    from convo_analytics.transform import TransformConfig, run_transform

    config = TransformConfig(
        timezones=zones,
        low_confidence_threshold=settings.get_float("transform.low_confidence_threshold"),
        reconcile=reconcile,
        tolerance=settings.get_float("transform.tolerance"),
        full=full,
    )
    logging.basicConfig(
        level=logging.INFO,
        stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    with warehouse_writer(settings, "convo transform"):
        con = _warehouse(settings, read_only=False)
        try:
            result = run_transform(con, config)
        finally:
            con.close()
    if as_json:
        sys.stdout.write(orjson.dumps(result.as_json()).decode() + "\n")
    else:
        err = Console(stderr=True, highlight=False, soft_wrap=True)
        how = (
            f"full ({result.full_reason})"
            if result.mode == "full"
            else f"incremental, {result.changed_conversations} conversations changed"
        )
        err.print(
            f"transform {result.transform_run_id}: {how}; "
            f"{result.partitions['count']} partitions rewritten; {result.conversations} "
            f"conversations, {result.incidents} incidents, "
            f"{sum(result.mart_rows.values())} mart rows in {result.duration_seconds:.1f} s; "
            + (
                "no service summary to compare with"
                if result.reconciled_days == 0
                else f"{len(result.mismatches)} reconciliation differences"
            )
        )
    if fail_on_mismatch and result.mismatches:
        raise typer.Exit(1)


@export_app.command("summary")
def export_summary_cmd(
    ctx: typer.Context,
    from_: FromOption,
    to: ToOption,
    tz: TzOption = None,
    db: DbOption = None,
    out: Annotated[
        Path | None,
        typer.Option("--out", metavar="FILE", help="Write to FILE instead of stdout."),
    ] = None,
    low_confidence_threshold: Annotated[
        float | None,
        typer.Option(
            "--low-confidence-threshold",
            min=0.0,
            max=1.0,
            metavar="X",
            help="Confidence below this is low. [default: the marts' own]",
        ),
    ] = None,
    workspace_id: Annotated[
        str | None,
        typer.Option(
            "--workspace-id", metavar="ID", help="Workspace to report. [default: the only one]"
        ),
    ] = None,
) -> None:
    """Write the summary for a date range in exactly the shape of GET /v1/analytics/summary."""
    from convo_analytics.export import empty_range_warning, export_summary, parse_day

    settings = settings_from_context(ctx, {"warehouse.path": db})
    first, last = parse_day("--from", from_), parse_day("--to", to)
    zone = _default_tz(settings, tz)
    con = _warehouse(settings, read_only=True)
    try:
        body = export_summary(
            con,
            first,
            last,
            zone,
            low_confidence_threshold=low_confidence_threshold,
            workspace_id=workspace_id,
        )
        _warn(empty_range_warning(con, first, last, zone))
    finally:
        con.close()
    data = orjson.dumps(body, option=orjson.OPT_INDENT_2) + b"\n"
    if out is None:
        sys.stdout.buffer.write(data)
        sys.stdout.flush()
    else:
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = out.with_name(out.name + ".partial")
        tmp.write_bytes(data)
        tmp.replace(out)
        Console(stderr=True, highlight=False).print(f"summary {first}..{last} -> {out}")


@export_app.command("guardrails")
def export_guardrails_cmd(
    ctx: typer.Context,
    from_: FromOption,
    to: ToOption,
    fmt: Annotated[
        str,
        typer.Option(
            "--format", metavar="FORMAT", help="jsonl, csv or parquet.", case_sensitive=False
        ),
    ] = "jsonl",
    tz: TzOption = None,
    db: DbOption = None,
    out_dir: Annotated[
        Path | None,
        typer.Option(
            "--out-dir", metavar="DIR", help=f"Folder to write to. {default_of('export.dir')}"
        ),
    ] = None,
    redact: Annotated[
        bool,
        typer.Option(
            "--redact/--no-redact",
            help="Replace emails, card and phone numbers in excerpts (on by default; "
            "--no-redact exports personal data as received).",
        ),
    ] = True,
    as_json: Annotated[bool, typer.Option("--json", help="Print the manifest as JSON.")] = False,
) -> None:
    """Write the guardrail incident log of a date range for compliance review, with a manifest."""
    from convo_analytics.export import FORMATS, empty_range_warning, export_guardrails, parse_day

    fmt = fmt.lower()
    if fmt not in FORMATS:
        raise UserError(f"--format {fmt!r}: choose jsonl, csv or parquet")
    settings = settings_from_context(ctx, {"warehouse.path": db, "export.dir": out_dir})
    first, last = parse_day("--from", from_), parse_day("--to", to)
    directory = settings.require_path("export.dir")
    zone = _default_tz(settings, tz)
    con = _warehouse(settings, read_only=True)
    try:
        result = export_guardrails(
            con,
            first,
            last,
            directory,
            tz=zone,
            fmt=fmt,  # type: ignore[arg-type]
            redact=redact,
        )
        if not result.rows:
            _warn(
                empty_range_warning(con, first, last, zone)
                or f"no guardrail incident from {first} to {last} ({zone}): the log is empty"
            )
    finally:
        con.close()
    if as_json:
        sys.stdout.write(orjson.dumps(result.manifest).decode() + "\n")
    else:
        Console(stderr=True, highlight=False, soft_wrap=True).print(
            f"{result.rows} incidents -> {result.data_file} (manifest: {result.manifest_file})"
            + ("" if redact else "  [NOT REDACTED]")
        )


def serve(
    ctx: typer.Context,
    host: Annotated[
        str | None,
        typer.Option(
            "--host", metavar="HOST", help=f"Interface to listen on. {default_of('serve.host')}"
        ),
    ] = None,
    port: Annotated[
        int | None,
        typer.Option(
            "--port",
            metavar="PORT",
            help=f"TCP port (0 picks a free one). {default_of('serve.port')}",
        ),
    ] = None,
    db: DbOption = None,
    behind_tls_proxy: BehindTlsProxy = False,
) -> None:
    """Answer GET /v1/analytics/summary from the warehouse, behind a bearer token.

    The token comes from CONVO_SERVE_TOKEN or CONVO_SERVE_TOKEN_FILE.
    """
    settings = settings_from_context(
        ctx, {"serve.host": host, "serve.port": port, "warehouse.path": db}
    )
    bind_host = settings.get_str("serve.host")
    require_loopback(bind_host, behind_tls_proxy, "convo serve")
    token = settings.get_secret("serve.token")
    if token is None:
        raise UserError(
            "convo serve needs a token for its clients: set CONVO_SERVE_TOKEN or "
            "CONVO_SERVE_TOKEN_FILE"
        )
    db_path = settings.require_path("warehouse.path")
    from convo_analytics.serve import create_serve_app

    app = create_serve_app(db_path, token.reveal(), settings.get_path("publish.dir"))
    sock = listening_socket(bind_host, settings.get_int("serve.port"))
    shown = f"[{bind_host}]" if ":" in bind_host else bind_host
    Console(highlight=False, soft_wrap=True).print(
        f"serving GET /v1/analytics/summary on http://{shown}:{sock.getsockname()[1]} "
        f"from {db_path}"
    )
    import uvicorn

    server = uvicorn.Server(
        uvicorn.Config(app, log_level="warning", access_log=False, timeout_graceful_shutdown=5)
    )
    server.run(sockets=[sock])
