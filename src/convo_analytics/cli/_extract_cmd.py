"""``convo extract``: read the service's API into the warehouse."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any

import orjson
import typer
from rich.console import Console

from convo_analytics.cli._app import settings_from_context
from convo_analytics.cli._options import DbOption, default_of
from convo_analytics.config import Secret, Settings
from convo_analytics.errors import UserError

__all__ = ["extract", "extract_config"]

JsonFlag = Annotated[
    bool, typer.Option("--json", help="Print the run's counts as one JSON object.")
]


def _date(flag: str, value: str | None) -> datetime | None:
    if value is None:
        return None
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise UserError(f"{flag} {value!r} is not a date; use YYYY-MM-DD") from None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def _pagination(text: str) -> tuple[str, dict[str, str]]:
    """``STYLE[:option=value,...]`` (the ``extract.pagination`` setting) split up."""
    style, _, rest = text.partition(":")
    options = dict(item.split("=", 1) for item in rest.split(",") if item)
    return style, options


def _source(settings: Settings) -> Any:
    """The ``[extract.streams.*]`` and ``[extract.fields]`` description (validated as the
    settings were loaded), its typed-column keys checked against the warehouse."""
    from convo_analytics.extract import field_problems

    if problems := field_problems(settings.endpoints):
        where = settings.locate("extract.fields")
        raise UserError(
            "\n".join(f"{where}: {p}" if where else p for p in problems)
            + "\n(docs/configuration.md, 'The service's endpoints', describes every key)"
        )
    return settings.endpoints


def source_description(settings: Settings) -> dict[str, Any]:
    """What the file and environment configure of the service's endpoints (validated)."""
    spec = _source(settings)
    described: dict[str, Any] = spec.model_dump(exclude_unset=True, exclude_none=True)
    return described


def extract_configs(
    settings: Settings, workspaces: tuple[str, ...] = (), **flags: object
) -> list[Any]:
    """One ExtractConfig per workspace to extract (``workspaces``: ``--workspace`` names,
    else every configured one); every user error raised before any request."""
    from convo_analytics.auth import OAuthCredentials, TokenStore, credentials_for
    from convo_analytics.config import load_workspaces, select_workspaces
    from convo_analytics.contract import RateLimitPolicy
    from convo_analytics.extract._secrets import check_base_url, check_header_value

    chosen = select_workspaces(load_workspaces(settings), list(workspaces))
    if len(chosen) == 1 and chosen[0].implicit:
        return [extract_config(settings, flags)]
    base = extract_config(settings, flags, key_required=False)
    store = TokenStore.from_settings(settings)
    configs = []
    for ws in chosen:
        where = f"workspace {ws.name!r}"
        try:
            check_base_url(ws.base_url)
            RateLimitPolicy.parse(ws.rate_limit)
            if ws.api_key is not None and not ws.uses_oauth:
                check_header_value(ws.api_key.reveal(), f"{where}'s API key")
        except ValueError as exc:
            raise UserError(f"{where}: {exc}") from None
        credentials = credentials_for(ws, store) if ws.uses_oauth else None
        if isinstance(credentials, OAuthCredentials):
            credentials.check()  # the token store and its endpoints, before any request
        configs.append(
            dataclasses.replace(
                base,
                base_url=ws.base_url.rstrip("/"),
                api_key=ws.api_key.reveal() if ws.api_key and not ws.uses_oauth else "",
                credentials=credentials,
                rate_limit=ws.rate_limit,
                workspace=ws.name,
                workspace_id=ws.workspace_id,
                implicit_workspace=False,
            )
        )
    for cfg in configs:
        if not cfg.api_key and cfg.credentials is None:
            raise UserError(
                f"workspace {cfg.workspace!r} has no API key: give it auth = {{ type = "
                '"api_key", key_env = "VAR" }, or set CONVO_API_KEY'
            )
    return configs


def extract_config(
    settings: Settings, flags: dict[str, object] | None = None, *, key_required: bool = True
) -> Any:
    """The run's ExtractConfig from the settings; every user error raised before any request."""
    from convo_analytics.contract import RateLimitPolicy
    from convo_analytics.extract import ALL_STREAMS, ExtractConfig, SourceSpec

    flags = flags or {}
    from convo_analytics.extract._secrets import check_base_url, check_header_value

    base_url = settings.get_str("service.base_url")
    try:
        check_base_url(base_url)
    except ValueError as exc:
        raise UserError(
            f"service.base_url ({settings.resolved('service.base_url').origin}): {exc}"
        ) from None
    try:
        RateLimitPolicy.parse(settings.get_str("service.rate_limit"))
    except ValueError as exc:
        raise UserError(f"--rate-limit: {exc}") from None
    streams = tuple(settings.get_list("extract.streams"))
    if unknown := sorted(set(streams) - set(ALL_STREAMS)):
        raise UserError(f"--streams: unknown {unknown}; choose from {', '.join(ALL_STREAMS)}")
    backfill_from = _date("--backfill-from", flags.get("backfill_from"))  # type: ignore[arg-type]
    backfill_to = _date("--backfill-to", flags.get("backfill_to"))  # type: ignore[arg-type]
    if flags.get("full_refresh") and (backfill_from or backfill_to):
        raise UserError("--full-refresh and --backfill-from/--backfill-to exclude each other")
    if backfill_from and backfill_to and backfill_to <= backfill_from:
        raise UserError("--backfill-to must be after --backfill-from")
    db = settings.require_path("warehouse.path")
    # Several [[workspaces]] bring their own keys: the flat one is then only a default.
    key = settings.require_secret("service.api_key") if key_required else None
    key = key or settings.get_secret("service.api_key") or Secret("")
    try:
        check_header_value(
            key.reveal() or "-", f"the API key ({settings.resolved('service.api_key').origin})"
        )
    except ValueError as exc:
        raise UserError(str(exc)) from None
    source = _source(settings)
    assert isinstance(source, SourceSpec)
    style, options = _pagination(settings.get_str("extract.pagination"))
    strict = bool(flags.get("strict")) or settings.get_bool("extract.strict")
    return ExtractConfig(
        base_url=base_url,
        api_key=key.reveal(),
        db_path=db,
        rate_limit=settings.get_str("service.rate_limit"),
        streams=streams,
        streams_named=settings.source("extract.streams").value != "default",
        source=source,
        page_size=settings.get_int("extract.page_size"),
        pagination=style,
        pagination_options=options,
        envelope=settings.get_str("extract.envelope") or None,
        id_field=settings.get_str("extract.id_field") or None,
        created_field=settings.get_str("extract.created_field") or None,
        updated_field=settings.get_str("extract.updated_field") or None,
        updated_since_param=settings.get_str("extract.updated_since_param"),
        updated_before_param=settings.get_str("extract.updated_before_param"),
        lookback_seconds=settings.get_float("extract.lookback_seconds"),
        detail_concurrency=settings.get_int("extract.detail_concurrency"),
        max_attempts=settings.get_int("extract.max_attempts"),
        connect_timeout=settings.get_float("service.connect_timeout_seconds"),
        read_timeout=settings.get_float("service.timeout_seconds"),
        reach_budget_seconds=settings.get_float("service.reach_budget_seconds"),
        allowed_origins=settings.get_list("extract.allowed_origins"),
        strict=strict,
        flags_win=frozenset(
            name.split(".")[1]
            for name in ("extract.page_size", "extract.pagination")
            if settings.source(name).value == "flag"
        ),
        full_refresh=bool(flags.get("full_refresh")),
        backfill_from=backfill_from,
        backfill_to=backfill_to,
        summary_days=settings.get_int("extract.summary_days"),
        summary_timezone=settings.get_str("extract.summary_timezone"),
        batch_records=settings.get_int("extract.batch_records"),
        batch_seconds=settings.get_float("extract.batch_seconds"),
    )


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
    from convo_analytics.cli._lock import warehouse_writer

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
