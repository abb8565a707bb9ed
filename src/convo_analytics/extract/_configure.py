"""An extraction's configuration built from the settings: the one way to make an ExtractConfig.

`convo extract` and the nightly run's ``extract`` step (pipelines/nightly.py)
both call :func:`extract_configs`, so a run extracts exactly what the command
would with the same settings, and every user error (a URL without a scheme, a
key that cannot be sent, an endpoint description that does not validate) is
raised before any request. The command's own flags arrive as keyword
arguments; the CLI only parses them (decision D-CONFIG-BUILDERS).
"""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime
from typing import Any

from convo_analytics.config import Secret, Settings
from convo_analytics.config._endpoints import SourceSpec
from convo_analytics.errors import UserError
from convo_analytics.extract._secrets import check_base_url, check_header_value
from convo_analytics.extract._source import field_problems
from convo_analytics.extract._streams import ALL_STREAMS, ExtractConfig
from convo_analytics.privacy import privacy_config

__all__ = ["extract_config", "extract_configs", "flag_date", "source_description"]


def flag_date(flag: str, value: str | None) -> datetime | None:
    """``value`` (``YYYY-MM-DD`` or an ISO 8601 moment, UTC unless it says) as a moment;
    ``None`` when not given; else the user error naming ``flag``."""
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


def _source(settings: Settings) -> SourceSpec:
    """The ``[extract.streams.*]`` and ``[extract.fields]`` description (validated as the
    settings were loaded), its typed-column keys checked against the warehouse."""
    if problems := field_problems(settings.endpoints):
        where = settings.locate("extract.fields")
        raise UserError(
            "\n".join(f"{where}: {p}" if where else p for p in problems)
            + "\n(docs/configuration.md, 'The service's endpoints', describes every key)"
        )
    return settings.endpoints


def source_description(settings: Settings) -> dict[str, Any]:
    """What the file and environment configure of the service's endpoints (validated)."""
    described: dict[str, Any] = _source(settings).model_dump(exclude_unset=True, exclude_none=True)
    return described


def extract_configs(
    settings: Settings,
    workspaces: tuple[str, ...] = (),
    *,
    full_refresh: bool = False,
    backfill_from: str | None = None,
    backfill_to: str | None = None,
    strict: bool = False,
) -> list[ExtractConfig]:
    """One ExtractConfig per workspace to extract (``workspaces``: ``--workspace`` names,
    else every configured one); every user error raised before any request.

    The keyword arguments are `convo extract`'s flags (see :func:`extract_config`).
    """
    from convo_analytics.auth import OAuthCredentials, TokenStore, credentials_for
    from convo_analytics.config import load_workspaces, select_workspaces
    from convo_analytics.contract import RateLimitPolicy

    def flat(key_required: bool) -> ExtractConfig:
        return extract_config(settings, full_refresh=full_refresh, backfill_from=backfill_from,
                              backfill_to=backfill_to, strict=strict,
                              key_required=key_required)  # fmt: skip

    chosen = select_workspaces(load_workspaces(settings), list(workspaces))
    if len(chosen) == 1 and chosen[0].implicit:
        return [flat(key_required=True)]
    base = flat(key_required=False)
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
                privacy=privacy_config(settings, ws.workspace_id or ws.name),
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
    settings: Settings,
    *,
    full_refresh: bool = False,
    backfill_from: str | None = None,
    backfill_to: str | None = None,
    strict: bool = False,
    key_required: bool = True,
) -> ExtractConfig:
    """The run's ExtractConfig from the settings; every user error raised before any request.

    ``full_refresh`` ignores the bookmarks; ``backfill_from`` / ``backfill_to`` (dates as
    given to ``--backfill-from`` / ``--backfill-to``) re-read a range; ``strict`` (or
    ``extract.strict``) fails a stream on any warning. ``key_required``: the flat API key
    must be set (several ``[[workspaces]]`` bring their own, so it is only a default then).
    """
    from convo_analytics.contract import RateLimitPolicy

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
    since = flag_date("--backfill-from", backfill_from)
    before = flag_date("--backfill-to", backfill_to)
    if full_refresh and (since or before):
        raise UserError("--full-refresh and --backfill-from/--backfill-to exclude each other")
    if since and before and before <= since:
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
    style, options = _pagination(settings.get_str("extract.pagination"))
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
        strict=strict or settings.get_bool("extract.strict"),
        flags_win=frozenset(
            name.split(".")[1]
            for name in ("extract.page_size", "extract.pagination")
            if settings.source(name).value == "flag"
        ),
        full_refresh=full_refresh,
        backfill_from=since,
        backfill_to=before,
        summary_days=settings.get_int("extract.summary_days"),
        summary_timezone=settings.get_str("extract.summary_timezone"),
        batch_records=settings.get_int("extract.batch_records"),
        batch_seconds=settings.get_float("extract.batch_seconds"),
        privacy=privacy_config(settings),
    )
