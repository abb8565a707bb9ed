"""``convo extract``: read the service's API into the warehouse."""

from __future__ import annotations

import asyncio
import logging
import sys
from pathlib import Path
from typing import Annotated, Any

import orjson
import typer
from rich.console import Console

from convo_analytics.cli._app import settings_from_context
from convo_analytics.cli._options import DbOption, default_of
from convo_analytics.errors import UserError

__all__ = ["extract"]

JsonFlag = Annotated[
    bool, typer.Option("--json", help="Print the run's counts as one JSON object.")
]


def extract(
    ctx: typer.Context,
    base_url: Annotated[
        str | None,
        typer.Option(
            "--base-url",
            metavar="URL",
            help=f"The service, e.g. https://api.example.com {default_of('service.base_url')}",
        ),
    ] = None,
    api_key: Annotated[
        str | None,
        typer.Option(
            "--api-key",
            metavar="KEY",
            help="Workspace API key. Prefer CONVO_API_KEY or "
            "CONVO_API_KEY_FILE: a flag shows in process listings.",
        ),
    ] = None,
    db: DbOption = None,
    rate_limit: Annotated[
        str | None,
        typer.Option(
            "--rate-limit",
            metavar="RATE",
            help=f"600/min, 100/min, none, or RATE[,burst=N]. {default_of('service.rate_limit')}",
        ),
    ] = None,
    streams: Annotated[
        str | None,
        typer.Option(
            "--streams",
            metavar="LIST",
            help=f"Comma-separated, in order. {default_of('extract.streams')}",
        ),
    ] = None,
    full_refresh: Annotated[
        bool, typer.Option("--full-refresh", help="Ignore bookmarks; re-read and re-detail all.")
    ] = False,
    backfill_from: Annotated[
        str | None,
        typer.Option("--backfill-from", metavar="DATE", help="Re-read records updated since DATE."),
    ] = None,
    backfill_to: Annotated[
        str | None,
        typer.Option("--backfill-to", metavar="DATE", help="... and before DATE (exclusive)."),
    ] = None,
    page_size: Annotated[
        int | None,
        typer.Option(
            "--page-size", metavar="N", help=f"Records per page. {default_of('extract.page_size')}"
        ),
    ] = None,
    pagination: Annotated[
        str | None,
        typer.Option(
            "--pagination",
            metavar="STYLE",
            help=f"auto, or STYLE[:option=value,...]. {default_of('extract.pagination')}",
        ),
    ] = None,
    strict: Annotated[
        bool, typer.Option("--strict", help="Fail a stream (exit 1) on any warning.")
    ] = False,
    check: Annotated[
        bool,
        typer.Option(
            "--check",
            help="Load nothing: probe how the service pages, names fields and filters, in a "
            "few requests per endpoint, and report.",
        ),
    ] = False,
    write_config: Annotated[
        Path | None,
        typer.Option(
            "--write-config",
            metavar="FILE",
            help="With --check: write the findings as convo.toml tables to FILE.",
        ),
    ] = None,
    workspace: Annotated[
        list[str] | None,
        typer.Option(
            "--workspace",
            "-w",
            metavar="NAME",
            help="Only this [[workspaces]] workspace (repeatable); default: every one.",
        ),
    ] = None,
    as_json: JsonFlag = False,
) -> None:
    """Page the service's conversations (with details), leads and summary into the warehouse.

    Incremental: each stream resumes from its bookmark, and details are fetched
    only for new or changed conversations. A stream whose records may be
    incomplete is reported partial; warnings name the setting that fixes them.
    Exit status 0 when every stream succeeded, 1 when one failed or is partial
    (the others still load), 2 for usage errors.

    With --check, nothing is loaded: the service is probed and described, and
    --write-config writes what was found as the [extract.streams.*] and
    [extract.fields] tables a run reads.
    """
    settings = settings_from_context(
        ctx,
        {
            "service.base_url": base_url,
            "service.api_key": api_key,
            "service.rate_limit": rate_limit,
            "warehouse.path": db,
            "extract.streams": streams.split(",") if streams else None,
            "extract.page_size": page_size,
            "extract.pagination": pagination,
        },
    )
    if write_config is not None and not check:
        raise UserError("--write-config goes with --check (it writes what the check found)")
    from convo_analytics.extract import extract_configs

    configs = extract_configs(
        settings,
        tuple(workspace or ()),
        full_refresh=full_refresh,
        backfill_from=backfill_from,
        backfill_to=backfill_to,
        strict=strict,
    )
    from convo_analytics.extract import BarProgress, LogProgress, run_extract_many

    err = Console(stderr=True, highlight=False, soft_wrap=True)
    if check:
        if len(configs) > 1:
            raise UserError("--check probes one workspace: name it with --workspace NAME")
        _check(configs[0], write_config, as_json, err)
        return
    logging.basicConfig(
        level=logging.INFO,
        stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    logging.getLogger("httpx").setLevel(logging.WARNING)  # a line per request is noise
    from convo_analytics.pipeline import warehouse_writer

    with warehouse_writer(settings, "convo extract"):
        if err.is_terminal and not as_json:
            with BarProgress(err) as bars:
                result = asyncio.run(run_extract_many(configs, bars))
        else:
            result = asyncio.run(run_extract_many(configs, LogProgress()))
    if as_json:
        sys.stdout.write(orjson.dumps(result.to_json()).decode() + "\n")
    else:
        status = {"ok": "ok", "partial": "PARTIAL"}.get(result.status, "FAILED")
        reasons = {
            s.error
            for r in result.workspaces.values()
            for s in r.streams.values()
            if s.error and s.status != "ok"
        }
        why = f" ({reasons.pop()})" if len(reasons) == 1 else ""
        failing = result.failing()
        named = f"; failing: {', '.join(failing)}" if failing and len(configs) > 1 else ""
        err.print(
            f"extract {result.run_id}: {status}{why}{named} in {result.seconds:.1f} s -> "
            f"{configs[0].db_path}",
            markup=False,
        )
    if not result.ok:
        raise typer.Exit(1)


def _check(config: Any, write_config: Path | None, as_json: bool, err: Console) -> None:
    """``--check``: probe the service, report, and write the findings when asked."""
    from convo_analytics.extract._check import run_check

    report = asyncio.run(run_check(config))
    done = None
    if write_config is not None:
        from convo_analytics.extract._write_config import write_config as write

        done = write(report, write_config)
    if as_json:
        body = report.to_json()
        body["wroteConfig"] = str(write_config) if done else None
        sys.stdout.write(orjson.dumps(body).decode() + "\n")
    else:
        out = Console(highlight=False, soft_wrap=True)
        for line in _check_lines(report):
            out.print(line, markup=False)
        if done:
            err.print(f"{done}; run: convo --config {write_config} extract", markup=False)
    if not report.ok:
        raise typer.Exit(1)


def _check_lines(report: Any) -> list[str]:
    """The check's report as text: per stream its findings, then what needs a decision."""
    lines = [f"service: {report.base_url}"]
    for name, stream in report.streams.items():
        lines.append("")
        lines.append(f"{name}: {stream.status} ({stream.requests} requests) GET {stream.path}")
        if stream.error:
            lines.append(f"  error: {stream.error}")
        for key, value in stream.spec.items():
            lines.append(f"  {key:<12} {orjson.dumps(value).decode()}")
        lines += [f"  - {note}" for note in stream.notes]
        if stream.fields:
            lines.append("  typed columns (share of sampled records with a value):")
            for key, found in stream.fields.items():
                where = found.path if found.path else "(not found)"
                lines.append(f"    {key:<40} {found.share:>4.0%}  {where} [{found.origin}]")
        lines += [f"  TODO: {todo}" for todo in stream.todo]
    return lines
