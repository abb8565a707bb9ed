"""``convo extract --check``: find out, in a few requests, how an unknown service answers.

For each list stream it asks for small pages and probes, with a bounded
number of requests paced by the same limiter as a run: which parameter sets
the page size (and the service's cap), how the list pages (verified on a
second page), where the records and their id and updated-at are, whether a
default parameter empties the list, which parameter filters by updated-at
and in which time format, where a detail keeps its record and transcript
(and which parameter embeds it), and which field fills each typed column in
the sampled records. The findings are a source description (``_source``
models) that ``--write-config`` writes as TOML: what the check finds is
exactly what a run reads.
"""

from __future__ import annotations

import statistics
from typing import Any

import httpx

from convo_analytics.contract import RateLimitPolicy
from convo_analytics.extract._check_summary import check_summary
from convo_analytics.extract._detail import find_record, find_transcript, unwrap
from convo_analytics.extract._fields import find_fields
from convo_analytics.extract._http import ExtractError, ServiceClient
from convo_analytics.extract._limiter import AdaptiveLimiter
from convo_analytics.extract._paging import (
    PageRequest,
    Paginator,
    PagingError,
    body_total,
    detect_paginator,
    header_total,
    link_params,
)
from convo_analytics.extract._probe import BUDGET, CheckReport, OutOfBudget, Probe, StreamCheck
from convo_analytics.extract._retry import RetryPolicy
from convo_analytics.extract._secrets import Redactor
from convo_analytics.extract._shapes import (
    STREAM_ID_KEYS,
    FieldMap,
    ShapeError,
    detect_fields,
    format_time,
    parse_timestamp,
    time_format_of,
    value_at,
)
from convo_analytics.extract._source import StreamPlan
from convo_analytics.extract._streams import ExtractConfig

__all__ = ["CheckReport", "StreamCheck", "run_check"]

#: Page-size parameter names services use.
SIZE_PARAMS = (
    "limit",
    "per_page",
    "perPage",
    "page_size",
    "pageSize",
    "size",
    "_limit",
    "take",
    "max",
    "count",
    "maxResults",
    "max_results",
    "top",
    "$top",
    "first",
    "n",
)
PAGE_PARAMS = ("page", "_page", "p", "pageNumber", "page_number", "pageNo", "page_no")
OFFSET_PARAMS = ("offset", "_start", "skip", "start", "from", "$skip")
CURSOR_PARAMS = (
    "cursor",
    "after",
    "page_token",
    "pageToken",
    "next",
    "starting_after",
    "continuation",
    "token",
    "next_cursor",
    "nextCursor",
    "page",
)
SINCE_PARAMS = (
    "updatedSince",
    "updated_since",
    "updatedAfter",
    "updated_after",
    "since",
    "modifiedSince",
    "modified_since",
    "changedSince",
    "changed_since",
    "updatedAt_gte",
    "updated_at_gte",
    "updatedAt[gte]",
    "updated_at[gte]",
    "filter[updated_since]",
    "updated_from",
    "since_ms",
    "sinceMs",
)
EMBEDS = (
    ("_embed", "messages"),
    ("embed", "messages"),
    ("include", "messages"),
    ("expand", "messages"),
    ("with", "messages"),
    ("include", "transcript"),
    ("expand", "transcript"),
    ("embed", "transcript"),
)
#: Records asked for per probe page; the field sample asks for up to SAMPLE.
SMALL, SAMPLE, DETAILS = 5, 50, 20


def _ids(records: list[dict[str, Any]], id_field: str) -> list[str]:
    return [str(value_at(r, id_field)) for r in records]


class _ListCheck:
    """The checks of one list stream (see the module docstring)."""

    def __init__(self, probe: Probe, plan: StreamPlan, check: StreamCheck) -> None:
        self.probe, self.plan, self.check = probe, plan, check
        self.params = dict(plan.params)
        self.records_at = plan.records or None
        self.size_param: str | None = plan.paginator.limit_param
        self.fields: FieldMap | None = None
        self.sample: list[dict[str, Any]] = []
        self.page_size = plan.page_size
        #: The parameters of the links the service gave (``page[size]``, ``page[offset]``).
        self.linked: list[tuple[str, str]] = []

    async def run(self) -> None:
        first = await self._first_page()
        if first is None:
            return
        await self._page_size(first)
        await self._paging()
        await self._incremental()

    async def _first_page(self) -> tuple[httpx.Response, Any, list[dict[str, Any]]] | None:
        size = {self.size_param or "limit": str(SMALL)}
        found = await self.probe.page(self.plan.path, {**self.params, **size}, self.records_at)
        if found is None:
            found = await self.probe.page(self.plan.path, dict(self.params), self.records_at)
        if found is None:
            raise ExtractError(f"GET {self.plan.path} refused every request the check made")
        response, data, records, envelope = found
        self.linked = link_params(response, data)
        if not records and self.params and self.plan.default_params:
            for key in [*self.params, None]:
                fewer = {k: v for k, v in self.params.items() if key is not None and k != key}
                again = await self.probe.page(self.plan.path, {**fewer, **size}, self.records_at)
                if again and again[2]:
                    dropped = [key] if key is not None else list(self.params)
                    self.check.notes.append(
                        "the default parameter(s) "
                        + ", ".join(f"{k}={self.params[k]}" for k in dropped)
                        + " empty the list: left out"
                    )
                    self.params = fewer
                    response, data, records, envelope = again
                    break
        self.check.spec["path"] = self.plan.path
        self.check.spec["params"] = dict(self.params)
        self.check.spec["records"] = envelope or ""
        if not records:
            self.check.todo.append("the list is empty: nothing to learn its shape from")
            return None
        self.fields = detect_fields(
            records, envelope, _overrides(self.plan), STREAM_ID_KEYS[self.plan.name]
        )
        self.records_at = envelope or ""
        self.check.spec["id"] = self.fields.id
        if self.fields.updated:
            self.check.spec["updated"] = self.fields.updated
        if self.fields.created:
            self.check.spec["created"] = self.fields.created
        return response, data, records

    async def _page_size(self, first: tuple[httpx.Response, Any, list[dict[str, Any]]]) -> None:
        _, _, records = first
        if len(records) != SMALL:
            self.size_param = None
            for name in dict.fromkeys([*self._linked_sizes(len(records)), *SIZE_PARAMS]):
                got = await self.probe.page(
                    self.plan.path, {**self.params, name: str(SMALL)}, self.records_at
                )
                if got is not None and len(got[2]) == SMALL:
                    self.size_param = name
                    break
        else:
            self.size_param = self.size_param or "limit"
        asked = self.plan.page_size
        if self.size_param is None:
            self.check.notes.append(
                f"no page size parameter is honoured; the service serves {len(records)} a page"
            )
            self.page_size = len(records)
            return
        big = await self.probe.page(
            self.plan.path, {**self.params, self.size_param: str(asked)}, self.records_at
        )
        served = len(big[2]) if big else 0
        self.sample = big[2] if big else records
        self.page_size = asked
        self.served = served
        if big and served < asked and await self._more_after(big):
            self.page_size = served
            self.check.notes.append(f"the service caps pages at {served} records (asked {asked})")
        self.check.notes.append(f"page size parameter {self.size_param!r} is honoured")

    def _linked_sizes(self, served: int) -> list[str]:
        """Parameters of the service's own links that look like a page size: named so
        (``page[size]``, ``limit``), or carrying the size it served."""
        words = ("size", "limit", "per", "take", "count", "max", "top")
        return [
            name
            for name, value in self.linked
            if value.isdigit() and (int(value) == served or any(w in name.lower() for w in words))
            and not any(w in name.lower() for w in ("offset", "number", "skip", "start"))
        ]  # fmt: skip

    def _linked_positions(self) -> list[tuple[str, str]]:
        """Parameters of the service's links that look like a page number or an offset."""
        out = []
        for name, value in self.linked:
            low = name.lower()
            if not value.isdigit():
                continue
            if any(w in low for w in ("offset", "skip", "start", "from")):
                out.append(("offset", name))
            elif "page" in low or "number" in low:
                out.append(("page_number", name))
        return out

    async def _more_after(self, page: tuple[httpx.Response, Any, list[Any], str | None]) -> bool:
        """Whether a page shows that more records follow (a total above it, a next signal)."""
        response, data, records, _ = page
        total = header_total(response)
        if total and total[1] > len(records):
            return True
        try:
            paginator = detect_paginator(
                response,
                data,
                records,
                page_size=len(records) + 1,
                request=PageRequest(self.plan.path, {}),
            )
        except PagingError:
            return True
        return paginator.has_next_page

    async def _paging(self) -> None:
        """Find the paging style on small pages and verify it on a second page."""
        assert self.fields is not None
        size = {self.size_param: str(SMALL)} if self.size_param else {}
        page_size = SMALL if self.size_param else self.page_size
        first = await self.probe.page(self.plan.path, {**self.params, **size}, self.records_at)
        assert first is not None
        response, data, records, _ = first
        page1 = _ids(records, self.fields.id)
        request = PageRequest(self.plan.path, {**self.params, **size})
        try:
            paginator: Paginator | None = detect_paginator(
                response,
                data,
                records,
                page_size=page_size,
                request=request,
                options={"limit_param": self.size_param or ""},
            )
        except PagingError:
            paginator = None
        spec: dict[str, Any] | None = None
        if paginator is not None and paginator.style != "single":
            spec = await self._verify(paginator, request, page1)
        if spec is None:
            spec = await self._position(page1, size, page_size)
        if spec is None:
            if paginator is not None and paginator.style == "single" and len(records) < page_size:
                spec = {"type": "single"}
                self.check.notes.append("the whole list comes in one answer")
            else:
                spec = {"type": "auto"}
                self.check.todo.append(
                    "could not find how the list pages: set paginator (docs/configuration.md)"
                )
        if self.size_param is not None and spec["type"] != "single":
            spec.setdefault("limit_param", self.size_param)
        await self._silent_cap(spec)
        self._total(response, data, records, spec)
        self.check.spec["paginator"] = spec
        self.check.spec["page_size"] = self.page_size

    def _total(
        self, response: httpx.Response, data: Any, records: list[Any], spec: dict[str, Any]
    ) -> None:
        """Which total record count the service gives (a header, or a body path); a run
        compares the records it read with it (decision D-EXTRACT-TOTALS)."""
        header = header_total(response)
        if header is not None:
            shown = response.headers.get(header[0], "")
            spec["total_header"] = header[0]
            self.check.notes.append(
                f"the service reports a total of {header[1]} records in the {header[0]} header "
                f"({header[0]}: {shown}); runs compare the records read with it"
            )
            return
        found = body_total(data, records, len(records) + 1)
        if found is not None:
            spec["total_path"] = found[0]
            self.check.notes.append(
                f"the service reports a total of {found[1]} records at {found[0]!r} in the body; "
                "runs compare the records read with it"
            )
            return
        self.check.notes.append(
            "the service reports no total (no X-Total-Count, Content-Range or body count): "
            "runs cannot tell a listing that ends early"
        )

    async def _silent_cap(self, spec: dict[str, Any]) -> None:
        """A page or offset listing that served fewer than asked, with nothing saying so: the
        service's cap when the next position still holds records."""
        served, asked = getattr(self, "served", 0), self.plan.page_size
        if spec["type"] not in ("page_number", "offset") or not 0 < served < asked:
            return
        if self.page_size != asked or not self.size_param or self.fields is None:
            return
        if spec["type"] == "page_number":
            position = {spec["page_param"]: str(int(spec.get("base_page", 1)) + 1)}
        else:
            position = {spec["offset_param"]: str(served)}
        params = {**self.params, self.size_param: str(asked), **position}
        got = await self.probe.page(self.plan.path, params, self.records_at)
        if got and got[2]:
            self.page_size = served
            self.check.notes.append(f"the service caps pages at {served} records (asked {asked})")

    async def _verify(
        self, paginator: Paginator, request: PageRequest, page1: list[str]
    ) -> dict[str, Any] | None:
        """The detected style's second page holds other records: its spec, else None."""
        assert self.fields is not None
        style = paginator.style
        options = {
            k: v
            for k, v in vars(paginator).items()
            if isinstance(v, str)
            and v
            and k in ("cursor_path", "cursor_header", "cursor_param", "param")
        }
        if style == "cursor" and options.get("cursor_header"):
            cursor = getattr(paginator, "cursor", "")
            for name in dict.fromkeys([options.get("cursor_param") or "cursor", *CURSOR_PARAMS]):
                got = await self.probe.page(
                    self.plan.path, {**request.params, name: cursor}, self.records_at
                )
                if got and got[2] and not set(_ids(got[2], self.fields.id)) & set(page1):
                    return {
                        "type": "cursor",
                        "cursor_header": options["cursor_header"],
                        "cursor_param": name,
                    }
            self.check.todo.append(
                f"the next cursor comes in the {options['cursor_header']} header, but no "
                "parameter tried took it back: set paginator.cursor_param"
            )
            return None
        paginator.update_request(request)
        if request.url.startswith(("http://", "https://")):
            try:
                self.probe.client._check_target(request.url)
            except ExtractError as exc:
                self.check.todo.append(str(exc))
                return None
        got = await self.probe.page(request.url, dict(request.params), self.records_at)
        if not got or not got[2] or set(_ids(got[2], self.fields.id)) & set(page1):
            return None
        spec: dict[str, Any] = {"type": style}
        if style == "cursor":
            spec["cursor_path"] = getattr(paginator, "cursor_path", "") or None
            spec["cursor_param"] = getattr(paginator, "cursor_param", "") or "cursor"
        elif style in ("page_number", "offset"):
            spec["page_param" if style == "page_number" else "offset_param"] = options["param"]
        return {k: v for k, v in spec.items() if v is not None}

    async def _position(
        self, page1: list[str], size: dict[str, str], page_size: int
    ) -> dict[str, Any] | None:
        """No signal to follow: try the usual page-number and offset parameters."""
        assert self.fields is not None
        if not self.size_param:
            return None
        linked = self._linked_positions()
        tries = [(style, p, "2" if style == "page_number" else str(page_size))
                 for style, p in linked]  # fmt: skip
        tries += [("page_number", p, "2") for p in PAGE_PARAMS]
        tries += [("offset", p, str(page_size)) for p in OFFSET_PARAMS]
        for style, param, value in tries:
            got = await self.probe.page(
                self.plan.path, {**self.params, **size, param: value}, self.records_at
            )
            ids = _ids(got[2], self.fields.id) if got else []
            if got and len(ids) == page_size and not set(ids) & set(page1):
                name = "page_param" if style == "page_number" else "offset_param"
                spec: dict[str, Any] = {"type": style, name: param}
                if style == "page_number":
                    spec["base_page"] = 1
                self.check.notes.append(f"pages by {param!r} (found by trying the usual names)")
                return spec
        return None

    async def _incremental(self) -> None:
        """Which parameter filters by updated-at, and in what format."""
        assert self.fields is not None
        updated = self.fields.updated or ""
        sample = self.sample or []
        times = [t for r in sample if (t := parse_timestamp(value_at(r, updated))) is not None]
        if not updated or len(set(times)) < 2:
            self.check.todo.append("too few records with an updated-at to test incremental runs")
            return
        fmt = time_format_of(next(v for r in sample if (v := value_at(r, updated)) is not None))
        cut = statistics.median_low(sorted(set(times)))
        before = sum(t < cut for t in times)
        name = updated.rsplit(".", 1)[-1]  # JSON:API's attributes.updated filters as updated
        names = [
            self.plan.incremental.param or "",
            *SINCE_PARAMS,
            *(f"{name}{suffix}" for suffix in ("_gte", "Since", "_since", "_after", "[gte]")),
            *(f"filter[{name}]{op}" for op in ("[gte]", "[gt]", "[ge]", "[after]")),
            f"filter[{name}_since]",
            f"filter[{name}Since]",
            f"{name}[gt]",
        ]
        size = {self.size_param: str(len(sample))} if self.size_param else {}
        for param in dict.fromkeys(n for n in names if n):
            got = await self.probe.page(
                self.plan.path,
                {**self.params, **size, param: format_time(cut, fmt)},
                self.records_at,
            )
            if not got or not got[2]:
                continue
            seen = [parse_timestamp(value_at(r, updated)) for r in got[2]]
            if before and all(t is not None and t >= cut for t in seen):
                self.check.spec["incremental"] = {"param": param, "field": updated, "format": fmt}
                self.check.notes.append(f"incremental runs filter with {param!r} ({fmt})")
                return
        self.check.spec["incremental"] = {"param": ""}
        self.check.todo.append(
            "no parameter tried filters by updated-at: every run reads the whole list "
            "(set incremental.param if the service has one)"
        )


def _overrides(plan: StreamPlan) -> dict[str, str]:
    named = {"id": plan.id, "created": plan.created, "updated": plan.updated}
    return {k: v for k, v in named.items() if v}


async def _details(probe: Probe, plan: StreamPlan, check: StreamCheck, lc: _ListCheck) -> None:
    """Where a detail keeps its record and transcript, and how to ask for the transcript."""
    assert plan.detail is not None and plan.detail.path is not None and lc.fields is not None
    ids = _ids(lc.sample[:DETAILS], lc.fields.id)
    params = dict(plan.detail.params or {})
    bodies: list[dict[str, Any]] = []
    record: str | None = plan.detail.record

    async def fetch(extra: dict[str, str], few: bool = False) -> list[dict[str, Any]]:
        nonlocal record
        out = []
        for rid in ids[:2] if few else ids:
            path = plan.detail.path.format(id=rid)  # type: ignore[union-attr]
            _, data = await probe.get(path, {**params, **extra}, missing=(404,))
            if isinstance(data, dict):
                if record is None:
                    record = find_record(data, lc.fields.id, rid)  # type: ignore[union-attr]
                out.append(unwrap(data, record) if record else data)
        return out

    bodies = await fetch({}, few=True)
    key = plan.detail.messages or (
        "messages"
        if any(isinstance(b.get("messages"), list) for b in bodies)
        else find_transcript(bodies)
    )
    if key is None:
        for name, value in EMBEDS:
            trial = await fetch({name: value}, few=True)
            found = find_transcript(trial)
            if found is not None:
                params[name], key = value, found
                check.notes.append(f"details hold the transcript only with {name}={value}")
                break
    bodies = await fetch({})
    detail: dict[str, Any] = {"path": plan.detail.path}
    if params:
        detail["params"] = params
    if record:
        detail["record"] = record
    if key:
        detail["messages"] = key
    else:
        check.todo.append("no transcript found in the details: set detail.messages or params")
    check.spec["detail"] = detail
    conversations = [*bodies, *lc.sample]
    keys = [k for k in (lc.fields.id, lc.fields.updated, lc.fields.created) if k]
    check.fields.update(find_fields("conversations", conversations, plan.fields, keys=keys))
    lists = [v for b in bodies if key and isinstance(v := value_at(b, key), list)]
    items = [m for found in lists for m in found if isinstance(m, dict)]
    check.fields.update(find_fields("messages", items, plan.fields))


async def _check_list(probe: Probe, plan: StreamPlan, check: StreamCheck) -> None:
    lc = _ListCheck(probe, plan, check)
    await lc.run()
    if lc.fields is None:
        return
    if plan.detail is not None:
        await _details(probe, plan, check, lc)
    else:
        keys = [k for k in (lc.fields.id, lc.fields.updated, lc.fields.created) if k]
        check.fields.update(find_fields(plan.name, lc.sample, plan.fields, keys=keys))
    for key, found in check.fields.items():
        if found.origin == "missing":
            seen = ", ".join(found.candidates) or "none that fit"
            check.todo.append(
                f'"{key}" found in no sampled record (keys that could fill it: {seen}): '
                'set it in [extract.fields], or leave "" if the service has none'
            )


async def run_check(config: ExtractConfig, transport: Any = None) -> CheckReport:
    """Check every configured stream of the service (bounded, paced); see the module doc."""
    redact = Redactor([config.api_key])
    client = ServiceClient(
        config.base_url,
        config.api_key,
        limiter=AdaptiveLimiter(RateLimitPolicy.parse(config.rate_limit)),
        retry=RetryPolicy(max_attempts=min(config.max_attempts, 3)),
        connect_timeout=config.connect_timeout,
        read_timeout=config.read_timeout,
        transport=transport,
        allowed_origins=config.allowed_origins,
        reach_budget_seconds=config.reach_budget_seconds,
    )
    streams: dict[str, StreamCheck] = {}
    try:
        for name in config.streams:
            plan = config.plan(name)
            check = streams[name] = StreamCheck(name, plan.path)
            probe = Probe(client, check)
            try:
                if name == "summary":
                    await check_summary(probe, plan, check)
                else:
                    await _check_list(probe, plan, check)
            except OutOfBudget:
                check.todo.append(f"stopped after {BUDGET} requests")
            except (ExtractError, PagingError, ShapeError) as exc:
                check.status, check.error = "failed", redact(str(exc))
                if "cannot reach" in check.error:
                    break
    finally:
        await client.aclose()
    return CheckReport(config.base_url, streams)
