"""``convo extract``: read the service's API into the warehouse."""

from __future__ import annotations

import asyncio
import logging
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated

import orjson
import typer
from rich.console import Console

from convo_analytics.cli._app import settings_from_context
from convo_analytics.config import Settings
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


def extract_config(settings: Settings, **flags: object) -> object:
    from convo_analytics.contract import RateLimitPolicy
    from convo_analytics.extract import ALL_STREAMS, ExtractConfig
    from convo_analytics.extract._http import check_base_url

    base_url = settings.get_str("service.base_url")
    try:
        check_base_url(base_url)
    except ValueError as exc:
        raise UserError(f"--base-url: {exc}") from None
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
    return ExtractConfig(
        base_url=base_url,
        api_key=settings.require_secret("service.api_key").reveal(),
        db_path=db,
        rate_limit=settings.get_str("service.rate_limit"),
        streams=streams,
        page_size=settings.get_int("extract.page_size"),
        pagination=settings.get_str("extract.pagination"),
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
        str | None, typer.Option("--base-url", help="The service, e.g. https://api.example.com")
    ] = None,
    api_key: Annotated[
        str | None,
        typer.Option(
            "--api-key",
            help="Workspace API key. Prefer CONVO_API_KEY or "
            "CONVO_API_KEY_FILE: a flag shows in process listings.",
        ),
    ] = None,
    db: Annotated[Path | None, typer.Option("--db", help="Warehouse file (DuckDB).")] = None,
    rate_limit: Annotated[
        str | None, typer.Option("--rate-limit", help="600/min, 100/min, none, or RATE[,burst=N]")
    ] = None,
    streams: Annotated[
        str | None, typer.Option("--streams", help="Comma-separated: conversations,leads,summary")
    ] = None,
    full_refresh: Annotated[
        bool, typer.Option("--full-refresh", help="Ignore bookmarks; re-read and re-detail all.")
    ] = False,
    backfill_from: Annotated[
        str | None, typer.Option("--backfill-from", help="Re-read records updated since DATE.")
    ] = None,
    backfill_to: Annotated[
        str | None, typer.Option("--backfill-to", help="... and before DATE (exclusive).")
    ] = None,
    page_size: Annotated[int | None, typer.Option("--page-size", help="Records per page.")] = None,
    pagination: Annotated[
        str | None, typer.Option("--pagination", help="auto (default) or a paging style.")
    ] = None,
    as_json: JsonFlag = False,
) -> None:
    """Page the service's conversations (with details), leads and summary into the warehouse.

    Incremental: each stream resumes from its bookmark, and details are fetched
    only for new or changed conversations. Exit status 0 when every stream
    succeeded, 1 when one failed (the others still load), 2 for usage errors.
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
    config = extract_config(
        settings, full_refresh=full_refresh, backfill_from=backfill_from, backfill_to=backfill_to
    )
    from convo_analytics.extract import BarProgress, ExtractConfig, LogProgress, run_extract

    assert isinstance(config, ExtractConfig)
    err = Console(stderr=True, highlight=False, soft_wrap=True)
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
                result = asyncio.run(run_extract(config, bars))
        else:
            result = asyncio.run(run_extract(config, LogProgress()))
    if as_json:
        sys.stdout.write(orjson.dumps(result.to_json()).decode() + "\n")
    else:
        status = "ok" if result.ok else "FAILED"
        err.print(
            f"extract {result.run_id}: {status} in {result.seconds:.1f} s -> {config.db_path}"
        )
    if not result.ok:
        raise typer.Exit(1)
