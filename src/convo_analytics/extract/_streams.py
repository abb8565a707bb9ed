"""What one extraction run is told: the service, the warehouse, and each stream's plan."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from convo_analytics.auth import Credentials
from convo_analytics.config._endpoints import ALL_STREAMS, LIST_STREAMS, PaginatorSpec, SourceSpec
from convo_analytics.extract._source import StreamPlan, plan_stream
from convo_analytics.privacy import PrivacyConfig
from convo_analytics.warehouse._tables import (
    RAW_CONVERSATION_DETAILS,
    RAW_CONVERSATIONS,
    RAW_LEADS,
)

__all__ = ["ALL_STREAMS", "LIST_STREAMS", "RAW_TABLES", "ExtractConfig"]

#: Where each list stream keeps its raw versions: (listed, detailed).
RAW_TABLES: dict[str, tuple[str, str | None]] = {
    "conversations": (RAW_CONVERSATIONS.name, RAW_CONVERSATION_DETAILS.name),
    "leads": (RAW_LEADS.name, None),
}


@dataclass(frozen=True)
class ExtractConfig:
    """Everything one extraction run is told (see docs/cli.md, ``convo extract``).

    ``source`` is the configured description of the service's endpoints; the
    flat fields below it (``pagination``, ``envelope``, ``id_field``, ...) apply
    to every list stream whose description does not say otherwise.
    """

    base_url: str
    api_key: str
    db_path: Path
    #: The workspace's configured name, and the id its rows are keyed by when configured
    #: (else learned, decision D-WORKSPACE-ID); ``implicit``: a flat configuration's one.
    workspace: str = "default"
    workspace_id: str | None = None
    implicit_workspace: bool = True
    rate_limit: str = "600/min"
    streams: tuple[str, ...] = ALL_STREAMS
    #: Whether the user named the streams (then an unavailable one fails, not warns).
    streams_named: bool = False
    source: SourceSpec | None = None
    page_size: int = 200
    pagination: str = "auto"
    pagination_options: dict[str, str] = field(default_factory=dict)
    envelope: str | None = None
    id_field: str | None = None
    created_field: str | None = None
    updated_field: str | None = None
    updated_since_param: str = "updatedSince"
    updated_before_param: str = "updatedBefore"
    lookback_seconds: float = 300.0
    detail_concurrency: int = 16
    max_attempts: int = 8
    connect_timeout: float = 10.0
    read_timeout: float = 30.0
    #: How long this run may keep trying before the service has answered at all.
    reach_budget_seconds: float = 5.0
    allowed_origins: tuple[str, ...] = ()
    #: Warnings fail their stream.
    strict: bool = False
    #: Where requests get their Authorization (an OAuth grant); None: ``api_key``.
    credentials: Credentials | None = None
    #: ``page_size`` and ``pagination`` came from command-line flags: they beat the streams'
    #: own descriptions (a flag beats the config file).
    flags_win: frozenset[str] = frozenset()
    full_refresh: bool = False
    backfill_from: datetime | None = None
    backfill_to: datetime | None = None
    summary_days: int = 30
    summary_timezone: str = "UTC"
    #: Large enough that each statement of a commit has work for every core (at 100,000
    #: conversations, 20,000 loads 1.5 to 3 s faster than 5,000); ``batch_seconds`` still
    #: commits a slowly fetched batch within seconds.
    batch_records: int = 20000
    batch_seconds: float = 5.0
    retry_base_seconds: float = 0.5
    #: How personal data is scrubbed before anything is written (``[privacy]`` and the
    #: workspace's ``privacy_scrub``); None, as mode ``off``: stored as it came.
    privacy: PrivacyConfig | None = None

    @property
    def mode(self) -> str:
        if self.backfill_from is not None or self.backfill_to is not None:
            return "backfill"
        return "full-refresh" if self.full_refresh else "incremental"

    def plan(self, name: str) -> StreamPlan:
        """The stream's plan: its description over these run-wide values over the defaults."""
        source = self.source or SourceSpec()
        paginator = PaginatorSpec.model_validate(
            {**self.pagination_options, "type": self.pagination}
        )
        spec = getattr(source.streams, name)
        forced = {
            "page_size": self.page_size if "page_size" in self.flags_win else None,
            "paginator": paginator if "pagination" in self.flags_win else None,
        }
        if any(v is not None for v in forced.values()):
            spec = spec.model_copy(update={k: v for k, v in forced.items() if v is not None})
        return plan_stream(
            name,
            spec,
            source.fields,
            page_size=self.page_size,
            paginator=paginator,
            records=self.envelope,
            id_field=self.id_field,
            updated_field=self.updated_field,
            created_field=self.created_field,
            since_param=self.updated_since_param,
            before_param=self.updated_before_param,
        )

    def __repr__(self) -> str:  # never show the key
        return f"ExtractConfig(base_url={self.base_url!r}, db_path={self.db_path!r}, ...)"
