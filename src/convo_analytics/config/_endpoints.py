"""The service's endpoints as data: ``[extract.streams.NAME]`` and ``[extract.fields]``.

The interface shows neither paging, envelope, field names nor query
parameters, so every one of them is a value here, as a dlt ``rest_api``
source describes a REST API. Per stream (``[extract.streams.NAME]`` in
convo.toml, ``CONVO_EXTRACT__STREAMS__NAME__KEY`` in the environment) these
models say where the list is, how it pages, which fields are the id and the
updated-at, how an incremental run filters and where a detail lives;
``[extract.fields]`` maps typed columns to field paths. They are part of the
one configuration model (``Settings.endpoints``), read as the configuration is
loaded; the extractor plans its streams from them (``extract._source``) and
checks the ``[extract.fields]`` keys against the warehouse's typed columns.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, ValidationError, field_validator
from pydantic_settings import (
    BaseSettings,
    EnvSettingsSource,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
)

from convo_analytics.config._model import SourcedSettings

__all__ = [
    "ALL_STREAMS",
    "ENDPOINTS_ENV_PREFIX",
    "LIST_STREAMS",
    "DetailSpec",
    "IncrementalSpec",
    "PaginatorSpec",
    "RangeSpec",
    "SourceSpec",
    "StreamSpec",
    "StreamsSpec",
    "load_source",
    "source_errors",
]

ALL_STREAMS = ("conversations", "leads", "summary")
LIST_STREAMS = ("conversations", "leads")
PAGING_STYLES = ("auto", "cursor", "next_url", "link_header", "page_number", "offset", "single")
#: The environment prefix of the source description (``CONVO_EXTRACT__FIELDS``, ...).
ENDPOINTS_ENV_PREFIX = "CONVO_EXTRACT__"


def _text(value: Any) -> Any:
    """Query parameter values as the text they are sent as (TOML may give numbers, booleans)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    return value


class _Spec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class PaginatorSpec(_Spec):
    """How a list pages; ``type = "auto"`` detects the style from the first answer."""

    type: Literal["auto", "cursor", "next_url", "link_header", "page_number", "offset", "single"]
    limit_param: str | None = Field(None, description='page size parameter; "": send none')
    page_param: str | None = Field(None, description="page_number: the page parameter")
    base_page: int | None = Field(
        None, validation_alias=AliasChoices("base_page", "first_page"), ge=0
    )
    offset_param: str | None = Field(None, description="offset: the offset parameter")
    end_param: str | None = Field(None, description="offset: an end index (exclusive) parameter")
    cursor_param: str | None = Field(None, description="cursor: the parameter it is sent in")
    cursor_path: str | None = Field(None, description="cursor: its key path in the body")
    cursor_header: str | None = Field(None, description="cursor: the response header with it")
    next_path: str | None = Field(
        None, validation_alias=AliasChoices("next_path", "next_url_path"), description="next_url"
    )
    total_path: str | None = Field(None, description="key path of a total record count")
    total_header: str | None = Field(None, description="header with a total (X-Total-Count)")
    max_pages: int | None = Field(None, ge=1)

    def options(self) -> dict[str, str]:
        """The options the paginators take (see ``extract._paging``), as text."""
        return {
            name: str(value)
            for name, value in self.model_dump(exclude={"type"}).items()
            if value is not None
        }


class IncrementalSpec(_Spec):
    """How a re-run asks only for what changed."""

    param: str | None = Field(
        None, description='"updated since" parameter; "": the service has none'
    )
    end_param: str | None = Field(None, description='"updated before" parameter (backfills)')
    field: str | None = Field(None, description="the records' updated-at field it filters on")
    format: Literal["auto", "iso", "epoch_s", "epoch_ms"] = "auto"


class RangeSpec(_Spec):
    """How the summary is asked for a range of days (dates ``YYYY-MM-DD``, both inclusive)."""

    from_param: str | None = Field(None, description='the first day\'s parameter; "": none')
    to_param: str | None = Field(None, description='the last day\'s parameter; "": none')
    tz_param: str | None = Field(None, description='the time zone\'s parameter; "": none')

    def names(self) -> dict[str, str]:
        """The parameters sent (the sandbox's ``from``, ``to``, ``tz`` where not given)."""
        given = {"from": self.from_param, "to": self.to_param, "tz": self.tz_param}
        return {role: role if name is None else name for role, name in given.items()}


class DetailSpec(_Spec):
    """Where a conversation's detail (its transcript) is fetched and found."""

    path: str | None = Field(None, description="with {id} for the record's id")
    params: dict[str, str] | None = None
    record: str | None = Field(None, description='key path of the record in the body; "": the body')
    messages: str | None = Field(None, description='the transcript list\'s key; "": none')
    escalations: str | None = None
    guardrail_events: str | None = None

    _params_text = field_validator("params", mode="before")(
        lambda v: {k: _text(x) for k, x in v.items()} if isinstance(v, dict) else v
    )

    def lists(self) -> dict[str, str]:
        """The configured list keys, by child table."""
        named = {
            "messages": self.messages,
            "conversation_escalations": self.escalations,
            "conversation_guardrail_events": self.guardrail_events,
        }
        return {child: key for child, key in named.items() if key is not None}


class StreamSpec(_Spec):
    """One endpoint's description; every key is optional (the sandbox's shape, or detected)."""

    enabled: bool | None = None
    path: str | None = None
    params: dict[str, str] | None = Field(None, description="sent on the first page")
    records: str | None = Field(None, description='key path of the list; "": a bare array')
    paginator: PaginatorSpec | None = None
    page_size: int | None = Field(None, ge=1, le=10000)
    id: str | None = None
    updated: str | None = None
    created: str | None = None
    incremental: IncrementalSpec | None = None
    detail: DetailSpec | None = None
    range: RangeSpec | None = Field(None, description="the summary: its range parameters")

    _params_text = field_validator("params", mode="before")(
        lambda v: {k: _text(x) for k, x in v.items()} if isinstance(v, dict) else v
    )


class StreamsSpec(_Spec):
    conversations: StreamSpec = StreamSpec()
    leads: StreamSpec = StreamSpec()
    summary: StreamSpec = StreamSpec()

    @field_validator("conversations", "leads")
    @classmethod
    def _no_range(cls, value: StreamSpec) -> StreamSpec:
        if value.range is not None:
            raise ValueError("range is a key of [extract.streams.summary] only")
        return value


class SourceSpec(SourcedSettings):
    """The source description: ``[extract.streams.*]`` and ``[extract.fields]``.

    Built by :func:`load_source` with pydantic-settings: flags (init values) >
    environment (``CONVO_EXTRACT__...``, JSON for tables) > convo.toml > the
    sandbox's shape.
    """

    model_config = SettingsConfigDict(
        env_prefix=ENDPOINTS_ENV_PREFIX, env_nested_delimiter="__", extra="forbid", frozen=True
    )

    streams: StreamsSpec = StreamsSpec()
    fields: dict[str, str] = Field(default_factory=dict)


class _TableSource(PydanticBaseSettingsSource):
    """The ``[extract]`` tables of convo.toml, as the TOML loader read them."""

    def __init__(self, settings_cls: type[BaseSettings], data: Mapping[str, Any]) -> None:
        super().__init__(settings_cls)
        self._data = dict(data)

    def get_field_value(self, field: Any, field_name: str) -> tuple[Any, str, bool]:
        return self._data.get(field_name), field_name, False

    def __call__(self) -> dict[str, Any]:
        return self._data


class _Environment(EnvSettingsSource):
    """The environment the settings were read with (not necessarily ``os.environ``)."""

    def __init__(self, settings_cls: type[BaseSettings], environ: Mapping[str, str]) -> None:
        self._environ = {k.lower(): v for k, v in environ.items() if v != ""}
        super().__init__(settings_cls)

    def _load_env_vars(self) -> Mapping[str, str | None]:
        return self._environ


def load_source(
    file_tables: Mapping[str, Any],
    environ: Mapping[str, str],
    flags: Mapping[str, Any] | None = None,
) -> SourceSpec:
    """The source description from flags, ``environ`` and the file's ``[extract]`` tables.

    Raises pydantic's ValidationError (see :func:`source_errors` for one line each).
    """

    sources = (_Environment(SourceSpec, environ), _TableSource(SourceSpec, file_tables))
    return SourceSpec.build(sources, **dict(flags or {}))


def source_errors(exc: ValidationError) -> list[str]:
    """One line per problem: where (``extract.streams.leads.paginator.type``) and what."""
    lines = []
    for error in exc.errors():
        where = ".".join(str(part) for part in error["loc"])
        lines.append(f"extract.{where}: {error['msg']}")
    return lines
