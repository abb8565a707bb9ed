"""The service's endpoints that an extraction reads, described as data."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from convo_analytics.warehouse._tables import (
    RAW_CONVERSATION_DETAILS,
    RAW_CONVERSATIONS,
    RAW_LEADS,
)


@dataclass(frozen=True, slots=True)
class ListStream:
    """A paginated list endpoint, incremental on its records' updated-at."""

    name: str
    path: str
    raw_table: str
    typed_table: str
    params: dict[str, str] = field(default_factory=dict)
    detail_path: str | None = None  # "{id}" is replaced by the record's (quoted) id
    detail_raw_table: str | None = None


CONVERSATIONS = ListStream(
    name="conversations",
    path="/v1/conversations",
    raw_table=RAW_CONVERSATIONS.name,
    typed_table="conversations",
    params={"sort": "updatedAt"},
    detail_path="/v1/conversations/{id}",
    detail_raw_table=RAW_CONVERSATION_DETAILS.name,
)
LEADS = ListStream(
    name="leads",
    path="/v1/leads",
    raw_table=RAW_LEADS.name,
    typed_table="leads",
    params={"sort": "updatedAt", "status": "any"},
)
LIST_STREAMS = {s.name: s for s in (CONVERSATIONS, LEADS)}
SUMMARY_PATH = "/v1/analytics/summary"
ALL_STREAMS = ("conversations", "leads", "summary")


@dataclass(frozen=True)
class ExtractConfig:
    """Everything one extraction run is told (see docs/cli.md, ``convo extract``)."""

    base_url: str
    api_key: str
    db_path: Path
    rate_limit: str = "600/min"
    streams: tuple[str, ...] = ALL_STREAMS
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

    @property
    def mode(self) -> str:
        if self.backfill_from is not None or self.backfill_to is not None:
            return "backfill"
        return "full-refresh" if self.full_refresh else "incremental"

    def __repr__(self) -> str:  # never show the key
        return f"ExtractConfig(base_url={self.base_url!r}, db_path={self.db_path!r}, ...)"
