"""``convo export summary|guardrails``: the marts handed out, per workspace or rolled up.

A workspace is named as users know it (its ``[[workspaces]]`` name) or by the
service's id of it; the warehouse's ``workspaces`` table and the config say
which is which (decision D-EXPORT-WORKSPACE). Exports read names and ids
only, so they run without the service's credentials.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import orjson
import typer
from rich.console import Console

from convo_analytics.cli._app import settings_from_context
from convo_analytics.cli._options import PLAIN_HELP, DbOption, default_of
from convo_analytics.cli._transform_cmd import (
    FromOption,
    ToOption,
    TzOption,
    default_tz,
    open_existing,
    warn,
)
from convo_analytics.config import Settings, WorkspaceConfig, load_workspaces
from convo_analytics.errors import UserError

__all__ = ["export_app"]

export_app = typer.Typer(
    rich_markup_mode=PLAIN_HELP,
    name="export",
    help="Write the summary (service-compatible) or the guardrail incident log.",
    no_args_is_help=True,
)


def configured_workspaces(settings: Settings) -> list[WorkspaceConfig]:
    """The ``[[workspaces]]`` names and ids (no secret read: readers need none)."""
    return load_workspaces(settings, resolve_secrets=False)


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
    workspace: Annotated[
        str | None,
        typer.Option(
            "--workspace",
            "-w",
            metavar="NAME",
            help="The workspace to report: its [[workspaces]] name or its id. "
            "[default: the only one]",
        ),
    ] = None,
    all_workspaces: Annotated[
        bool,
        typer.Option(
            "--all-workspaces",
            help='Every workspace rolled up into one summary (workspaceId "*").',
        ),
    ] = False,
) -> None:
    """Write the summary for a date range in exactly the shape of GET /v1/analytics/summary.

    A warehouse of several workspaces needs --workspace NAME (one of them) or
    --all-workspaces (all together).
    """
    from convo_analytics.export import (
        choose_summary,
        empty_range_warning,
        parse_day,
        workspace_summary,
    )

    settings = settings_from_context(ctx, {"warehouse.path": db})
    first, last = parse_day("--from", from_), parse_day("--to", to)
    zone = default_tz(settings, tz)
    configured = configured_workspaces(settings)
    con = open_existing(settings, read_only=True)
    try:
        scope = choose_summary(con, workspace, all_workspaces, configured)
        body = workspace_summary(
            con,
            first,
            last,
            zone,
            workspace_id=scope.label,
            ids=scope.ids,
            low_confidence_threshold=low_confidence_threshold,
        )
        warn(empty_range_warning(con, first, last, zone, scope.ids))
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
    workspaces: Annotated[
        list[str] | None,
        typer.Option(
            "--workspace",
            "-w",
            metavar="NAME",
            help="Only this workspace's incidents: a [[workspaces]] name or an id "
            "(repeatable). [default: every workspace]",
        ),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the manifest as JSON.")] = False,
) -> None:
    """Write the guardrail incident log of a date range for compliance review, with a manifest.

    Every row names its workspace (workspace_id, workspace_name); the manifest
    counts the rows of each.
    """
    from convo_analytics.export import (
        FORMATS,
        empty_range_warning,
        export_guardrails,
        find_workspace,
        parse_day,
        warehouse_workspaces,
    )

    fmt = fmt.lower()
    if fmt not in FORMATS:
        raise UserError(f"--format {fmt!r}: choose jsonl, csv or parquet")
    settings = settings_from_context(ctx, {"warehouse.path": db, "export.dir": out_dir})
    first, last = parse_day("--from", from_), parse_day("--to", to)
    directory = settings.require_path("export.dir")
    zone = default_tz(settings, tz)
    configured = configured_workspaces(settings)
    con = open_existing(settings, read_only=True)
    try:
        chosen = None
        if workspaces:
            known = warehouse_workspaces(con, configured)
            chosen = list(dict.fromkeys(find_workspace(known, w, configured) for w in workspaces))
        result = export_guardrails(
            con,
            first,
            last,
            directory,
            tz=zone,
            fmt=fmt,  # type: ignore[arg-type]
            redact=redact,
            workspaces=chosen,
            configured=configured,
        )
        if not result.rows:
            ids = None if chosen is None else [w.workspace_id for w in chosen]
            warn(
                empty_range_warning(con, first, last, zone, ids)
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
