"""What each stream asks for and how its answers are read: the endpoints as data, planned.

The description itself (``[extract.streams.NAME]``, ``[extract.fields]``) is part of the
configuration model (``convo_analytics.config._endpoints``, ``Settings.endpoints``); here it
meets the run-wide settings and the sandbox's shape in each stream's :class:`StreamPlan`,
and its ``[extract.fields]`` keys are checked against the warehouse's typed columns. What is
not configured keeps the sandbox's shape (the default) or is detected from the first
answers; :class:`StreamPlan` records which, for the run log.

``convo extract --check`` writes these same tables, so what it finds is
exactly what a run reads.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from dataclasses import dataclass, field

from convo_analytics.config._endpoints import (
    DetailSpec,
    IncrementalSpec,
    PaginatorSpec,
    RangeSpec,
    SourceSpec,
    StreamSpec,
)
from convo_analytics.warehouse._shape import DETAIL_LISTS, FIELD_TABLES, field_key

__all__ = ["StreamPlan", "field_problems", "plan_stream"]


def field_problems(source: SourceSpec) -> list[str]:
    """One line per ``[extract.fields]`` key that names no typed column of the warehouse
    (``extract.fields.KEY: ...``), with the nearest one."""
    known = [
        field_key(t, c.name)
        for t, table in FIELD_TABLES.items()
        for c in table.columns
        if c.source is not None
    ]
    problems = []
    for key in source.fields:
        if key not in known:
            hint = difflib.get_close_matches(key, known, n=1)
            problems.append(
                f"extract.fields: {key!r} is not a typed column"
                + (f"; did you mean {hint[0]!r}?" if hint else "")
                + " (keys are TABLE.COLUMN, e.g. 'messages.created_at'; docs/warehouse.md)"
            )
    return problems


@dataclass(frozen=True)
class StreamPlan:
    """What a stream will ask for and read, each value configured, default or to be detected.

    ``configured`` names the values the user gave (for the run log and
    ``--check``); a value of None is detected from the first answers.
    """

    name: str
    path: str
    params: dict[str, str]
    paginator: PaginatorSpec
    page_size: int
    records: str | None
    id: str | None
    updated: str | None
    created: str | None
    incremental: IncrementalSpec
    detail: DetailSpec | None
    enabled: bool = True
    #: The summary's range parameters (None for the list streams).
    range: RangeSpec | None = None
    configured: frozenset[str] = frozenset()
    fields: Mapping[str, str] = field(default_factory=dict)

    @property
    def default_params(self) -> bool:
        """Whether the params sent are our defaults (which a service may misread)."""
        return "params" not in self.configured

    @property
    def lists(self) -> dict[str, str]:
        return self.detail.lists() if self.detail else {}


#: The sandbox's shape: the defaults every stream starts from.
_DEFAULT_PATHS = {
    "conversations": "/v1/conversations",
    "leads": "/v1/leads",
    "summary": "/v1/analytics/summary",
}
_DEFAULT_PARAMS = {
    "conversations": {"sort": "updatedAt"},
    # the sandbox lists qualified leads unless asked for all (decision D-LEADS)
    "leads": {"sort": "updatedAt", "status": "any"},
    "summary": {},
}
_DEFAULT_DETAIL = DetailSpec(path="/v1/conversations/{id}", params={})


def plan_stream(
    name: str,
    spec: StreamSpec,
    fields: Mapping[str, str],
    *,
    page_size: int,
    paginator: PaginatorSpec,
    records: str | None,
    id_field: str | None,
    updated_field: str | None,
    created_field: str | None,
    since_param: str,
    before_param: str,
) -> StreamPlan:
    """A stream's plan: its spec over the run-wide settings over the sandbox's shape."""
    given = spec.model_fields_set
    detail = None
    if name == "conversations":
        configured = spec.detail or DetailSpec()
        detail = _DEFAULT_DETAIL.model_copy(
            update={k: getattr(configured, k) for k in configured.model_fields_set}
        )
    incremental = IncrementalSpec(param=since_param, end_param=before_param)
    if spec.incremental is not None:
        incremental = incremental.model_copy(
            update={k: getattr(spec.incremental, k) for k in spec.incremental.model_fields_set}
        )
    return StreamPlan(
        name=name,
        path=spec.path or _DEFAULT_PATHS[name],
        params=dict(spec.params if spec.params is not None else _DEFAULT_PARAMS[name]),
        paginator=spec.paginator or paginator,
        page_size=spec.page_size or page_size,
        records=spec.records if spec.records is not None or name == "summary" else records,
        id=spec.id or id_field,
        updated=spec.updated or updated_field,
        created=spec.created or created_field,
        incremental=incremental,
        detail=detail,
        enabled=spec.enabled is not False,
        configured=frozenset(given),
        fields={k: v for k, v in fields.items() if k.split(".")[0] in _TABLES_OF[name]},
        range=(spec.range or RangeSpec()) if name == "summary" else None,
    )


#: The typed tables each stream fills (their ``[extract.fields]`` keys start with these).
_TABLES_OF = {
    "conversations": ("conversations", *DETAIL_LISTS),
    "leads": ("leads",),
    "summary": ("service_summaries",),
}
