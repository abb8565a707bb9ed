"""One list stream of a run: page it, detail it, load it in batches, and say what is missing.

The stream follows its plan (``_source.StreamPlan``): what is configured is
used as it is; the rest is detected from the first answers (paging style,
envelope, key fields, where a detail keeps its record and transcript, which
fields fill the typed columns). Its first answers are also checked for the
ways a service that differs from our guess can make a load silently short:
a default query parameter that empties the list, a page size ignored with no
next-page signal, a reported total not reached, details without transcripts,
an incremental parameter ignored, typed columns that nothing fills. Each is
a warning naming the setting that fixes it, or, when records may be
missing, a gap that makes the stream ``partial``.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

import httpx
import orjson

from convo_analytics.extract._detail import DetailReader
from convo_analytics.extract._estimate import ANNOUNCE_SECONDS, estimate_records, estimate_stream
from convo_analytics.extract._http import ServiceClient
from convo_analytics.extract._paging import (
    PageRequest,
    Paginator,
    detect_paginator,
    init_probe_request,
    make_paginator,
)
from convo_analytics.extract._results import StreamResult
from convo_analytics.extract._schema_drift import SchemaTracker
from convo_analytics.extract._shapes import (
    STREAM_ID_KEYS,
    FieldMap,
    ShapeError,
    detect_fields,
    find_records,
    format_time,
    parse_timestamp,
    value_at,
)
from convo_analytics.extract._source import StreamPlan
from convo_analytics.extract._typed import TypedFields, empty_columns
from convo_analytics.warehouse import (
    FindingRow,
    RecordPaths,
    hold_bookmark,
    read_bookmark,
    record_findings,
    transaction,
    write_bookmark,
)
from convo_analytics.warehouse import _load as load

if TYPE_CHECKING:
    from convo_analytics.extract._run_state import ExtractionState

log = logging.getLogger("convo.extract")

#: Response headers every HTTP server sends; the rest are named when paging is unclear.
_COMMON_HEADERS = frozenset(
    {
        "date",
        "server",
        "content-type",
        "content-length",
        "connection",
        "keep-alive",
        "transfer-encoding",
        "vary",
        "cache-control",
        "etag",
        "x-request-id",
        "content-encoding",
        "strict-transport-security",
        "expires",
        "pragma",
        "access-control-allow-origin",
        "x-ratelimit-limit",
        "x-ratelimit-remaining",
        "x-ratelimit-reset",
        "ratelimit-limit",
        "ratelimit-remaining",
        "ratelimit-reset",
    }
)
#: How far before the bookmark (minus the lookback) a record may be before the service is
#: taken to ignore the incremental parameter (clock steps, rounding to seconds).
_INCREMENTAL_SLACK = timedelta(seconds=1)


class _Batch:
    """Fetched pages waiting to be committed together."""

    def __init__(self) -> None:
        self.pages: list[bytes] = []
        self.details: list[bytes] = []
        #: Personal data scrubbed from the batch's records (``privacy_findings``).
        self.found: list[FindingRow] = []
        self.records = 0
        self.max_updated: datetime | None = None
        self.opened = time.monotonic()

    def add(
        self,
        body: bytes,
        details: list[bytes],
        count: int,
        updated: list[datetime],
        found: list[FindingRow],
    ) -> None:
        self.pages.append(body)
        self.found.extend(found)
        self.details.extend(details)
        self.records += count
        if updated:
            newest = max(updated)
            self.max_updated = newest if self.max_updated is None else max(self.max_updated, newest)


def _headers_seen(response: httpx.Response) -> str:
    names = [k for k in response.headers if k.lower() not in _COMMON_HEADERS]
    return ", ".join(names) or "none beyond the usual"


def _keys_seen(data: Any) -> str:
    if isinstance(data, dict):
        return ", ".join(list(data)[:12]) or "none"
    return "none (a bare array)"


class ListStreamRun:
    """Reads one list stream into the warehouse (see the module docstring)."""

    def __init__(
        self, run: ExtractionState, client: ServiceClient, plan: StreamPlan, result: StreamResult
    ) -> None:
        self.run, self.client, self.plan, self.result = run, client, plan, result
        self.cfg = run.config
        assert run.con is not None
        self.con = run.con
        self.name = plan.name
        self.where = f"[extract.streams.{plan.name}]"
        self.seen_ids: set[str] = set()
        self.older = 0  # records older than the incremental filter asked for
        self.since: datetime | None = None
        #: The listing asked for was filtered by updated-at (an incremental run, a backfill):
        #: a total the service reports may count the filtered listing or the whole collection.
        self.filtered = False
        #: A backfill revisits the past; it moves no bookmark.
        self.advance = self.cfg.mode != "backfill"
        self.typed = TypedFields(plan, run.previous_shape(plan.name))
        has_detail = plan.detail is not None and bool(plan.detail.path)
        self.details = DetailReader(self, plan) if has_detail else None
        #: What the details fetched for the page in hand were scrubbed of (``DetailReader``).
        self.detail_found: list[FindingRow] = []

    async def get(self, request: PageRequest, probing: bool = False) -> tuple[httpx.Response, Any]:
        """A page; when ``probing`` past a short page, a refusal answers ``(response, None)``."""
        return await self.client.get(
            request.url,
            dict(request.params) or None,
            self.result.stats,
            self.plan.path,
            missing=(400, 404, 416) if probing else (),
        )

    # -- the first page --------------------------------------------------------------

    def _first_request(self) -> tuple[PageRequest, Paginator | None]:
        cfg, plan, inc = self.cfg, self.plan, self.plan.incremental
        params = dict(plan.params)
        fmt = self.typed.time_format
        if cfg.mode == "backfill":
            if cfg.backfill_from and inc.param:
                params[inc.param] = format_time(cfg.backfill_from, fmt)
                self.filtered = True
            if cfg.backfill_to and inc.end_param:
                params[inc.end_param] = format_time(cfg.backfill_to, fmt)
                self.filtered = True
        elif cfg.mode == "incremental" and self.result.bookmark_before is not None and inc.param:
            self.since = self.result.bookmark_before - timedelta(seconds=cfg.lookback_seconds)
            params[inc.param] = format_time(self.since, fmt)
            self.filtered = True
        request = PageRequest(plan.path, params)
        spec = plan.paginator
        if spec.type == "auto":
            init_probe_request(request, page_size=plan.page_size, options=spec.options())
            return request, None
        paginator = make_paginator(spec.type, page_size=plan.page_size, options=spec.options())
        paginator.init_request(request)
        return request, paginator

    def _records(self, data: Any) -> tuple[list[dict[str, Any]], str | None]:
        if self.plan.records == "":
            if not isinstance(data, list):
                raise ShapeError(
                    f'records is "" (a bare array) but the answer is a JSON object with keys '
                    f"{_keys_seen(data)}; set records to the key of the list"
                )
            return find_records(data)
        return find_records(data, self.plan.records)

    async def _without_defaults(
        self, request: PageRequest
    ) -> tuple[httpx.Response, Any, list[dict[str, Any]], str | None] | None:
        """An empty first page asked with our default parameters: asked again without them.

        When the list is not empty without them, the parameters that emptied it
        (each tried alone first) are dropped for the run and reported.
        """
        defaults = [k for k in self.plan.params if k in request.params]
        if not defaults:
            return None
        bare = PageRequest(
            request.url, {k: v for k, v in request.params.items() if k not in defaults}
        )
        response, data = await self.get(bare)
        records, envelope = self._records(data)
        if not records:
            return None
        culprits = defaults
        for key in defaults if len(defaults) > 1 else ():
            one = PageRequest(request.url, {k: v for k, v in request.params.items() if k != key})
            r1, d1 = await self.get(one)
            got, env1 = self._records(d1)
            if got:
                culprits, response, data, records, envelope = [key], r1, d1, got, env1
                bare = one
                break
        shown = ", ".join(f"{k}={self.plan.params[k]}" for k in culprits)
        kept = {k: v for k, v in self.plan.params.items() if k not in culprits}
        self.result.warnings.append(
            f"the default query parameter {shown} turned the list into an empty one (without "
            f"it the first page holds {len(records)} records): it was dropped for this run; set "
            f"{self.where} params = {_inline(kept)} to send only what the service understands"
        )
        request.params = bare.params
        return response, data, records, envelope

    async def _verify_single(
        self, request: PageRequest, response: httpx.Response, data: Any, count: int
    ) -> None:
        """A detected single page shorter than asked: is it the whole list, or a page whose
        size the service chose? Ask for fewer: a service that honours the page size
        served the whole list."""
        limit = self.plan.paginator.limit_param
        limit = "limit" if limit is None else limit
        if count < 2 or not limit:
            return
        fewer = max(1, count // 2)
        probe = PageRequest(request.url, {**request.params, limit: str(fewer)})
        _, probed = await self.get(probe)
        records, _ = self._records(probed)
        if len(records) == fewer:
            return
        # A page size a service picks itself is a round number: such a count may be a full
        # page with more behind it (records missing); another count is the whole list.
        text = (
            f"its first answer held {count} records with no next-page signal understood, and "
            f"the service ignored the page size parameter {limit!r} (asked "
            f"{self.plan.page_size}, then {fewer}); headers seen: {_headers_seen(response)}; "
            f"body keys: {_keys_seen(data)}; set {self.where} paginator (`convo extract "
            '--check` finds it), or paginator = { type = "single" } if the service always '
            "returns whole lists"
        )
        if count % 5 == 0 or count & (count - 1) == 0:
            self.result.gaps.append(f"the list may be incomplete: {text}")
        else:
            self.result.warnings.append(f"the list was read as one page: {text}")

    # -- the stream ----------------------------------------------------------------------

    async def read(self) -> None:
        cfg, plan, result, con = self.cfg, self.plan, self.result, self.con
        advance = self.advance
        identity = self.run.identity
        if identity.resolved:  # a workspace never loaded has no bookmark yet
            result.bookmark_before = read_bookmark(con, self.name, self.run.workspace_id)
        request, paginator = self._first_request()
        response, data = await self.get(request)
        records, envelope = self._records(data)
        if not records and plan.default_params:
            found = await self._without_defaults(request)
            if found is not None:
                response, data, records, envelope = found
        fields: FieldMap | None = None
        paths: RecordPaths | None = None
        workspace = identity.learn(records)
        tracker = SchemaTracker(con, self.name, self.run.run_id, workspace)
        ordered, previous_max = True, None
        batch = _Batch()
        fetch: asyncio.Task[Any] | None = None
        first = True
        try:
            while True:
                if fields is None and records:
                    fields = detect_fields(
                        records, envelope, self._field_overrides(), STREAM_ID_KEYS[self.name]
                    )
                    self.typed.note_fields(fields, records)
                if paginator is None:
                    paginator = detect_paginator(
                        response,
                        data,
                        records,
                        page_size=plan.page_size,
                        request=request,
                        options=plan.paginator.options(),
                    )
                    if paginator.style == "single":
                        await self._verify_single(request, response, data, len(records))
                else:
                    paginator.update_state(response, data, records)
                result.pagination = paginator.style
                result.pages += 1
                if first:
                    self._note_page_size(paginator, len(records))
                    first = False
                if records and paginator.has_next_page:
                    paginator.update_request(request)
                    fetch = asyncio.ensure_future(self.get(request, paginator.probing))
                content, data, records, dropped = self.run.suppression.page(
                    self.run.reader or con, self.name, workspace, response.content, data, envelope,
                    records,
                )  # fmt: skip
                result.suppressed += dropped
                if records:
                    assert fields is not None
                    paths = paths or RecordPaths(
                        envelope, fields.id, fields.updated, fields.created
                    )
                    updated = self._observe(records, fields)
                    page_sorted = updated == sorted(updated) and (
                        not updated or previous_max is None or updated[0] >= previous_max
                    )
                    ordered = ordered and page_sorted and len(updated) == len(records)
                    if updated:
                        newest = max(updated)
                        previous_max = newest if previous_max is None else max(previous_max, newest)
                    wanted = self._needing_detail(records, fields) if self.details else []
                    if not result.records:  # the first page: is this stream a long one?
                        self._announce(paginator, len(records), len(wanted), updated)
                    details = await self._details(records, fields, wanted)
                    body, scrubbed = self.run.scrubber.page(
                        workspace, content, data, envelope, fields.id
                    )
                    scrubbed.extend(self.detail_found)
                    self.detail_found = []
                    batch.add(body, details, len(records), updated, scrubbed)
                    result.records += len(records)
                    self.run.progress.update(
                        self.run.prefix + self.name,
                        records=result.records,
                        requests=result.stats.requests,
                    )
                    due = time.monotonic() - batch.opened >= cfg.batch_seconds
                    if batch.records >= cfg.batch_records or due or fetch is None:
                        # a gap already known (the first page's) holds the bookmark
                        keep = ordered and advance and not result.gaps
                        mark = batch.max_updated if keep else None
                        await self.run.loader.submit(self._commit, batch, paths, tracker, mark)
                        batch = _Batch()
                if fetch is None:
                    break
                response, data = await fetch
                fetch = None
                if data is None:  # a page past a short one was refused: the list ended there
                    break
                records, envelope = self._records(data)
            if batch.pages and paths is not None:
                await self.run.loader.submit(self._commit, batch, paths, tracker, None)
            await self.run.loader.drain()
        finally:
            if fetch is not None:
                fetch.cancel()
            self.run.loader.wait()  # a stream that fails leaves no commit running
        self._check_end(paginator)
        if advance and previous_max is not None and not result.gaps:
            # Unordered listings can hide a record that changed behind our position: never
            # move the mark past the moment this run began (minus the lookback, next time).
            final = previous_max if ordered else min(previous_max, self.run.started)
            with transaction(con):
                write_bookmark(con, self.name, final, self.run.run_id, workspace)
        elif advance and result.gaps:  # records may be missing: the next run reads them again
            with transaction(con):
                hold_bookmark(con, self.name, result.bookmark_before, self.run.run_id, workspace)
        result.bookmark_after = read_bookmark(con, self.name, workspace)
        result.drift = tracker.finish()
        self._check_columns()
        result.shape = self.typed.describe(paginator, fields, envelope, self.details)

    def _announce(
        self, paginator: Paginator, served: int, detailed: int, updated: list[datetime]
    ) -> None:
        """After the first page: the line saying how long the stream will take, when its
        rate limit makes it long (``_estimate``; decision D-EXTRACT-ESTIMATE)."""
        until = self.run.started
        if self.cfg.mode == "backfill" and self.cfg.backfill_to is not None:
            until = min(until, self.cfg.backfill_to)
        found = estimate_records(served, paginator.has_next_page, paginator.total,
                                 paginator.total_source, updated, until)  # fmt: skip
        if found is None:
            return
        estimate = estimate_stream(
            *found,
            page_records=served,
            detail_share=detailed / served if served else 0.0,
            seconds_for=self.client.limiter.seconds_for,
        )
        if estimate is not None and estimate.seconds >= ANNOUNCE_SECONDS:
            stream = self.run.prefix + self.name
            self.run.progress.note(stream, estimate.line(stream, self.cfg.rate_limit))

    def _field_overrides(self) -> dict[str, str]:
        plan = self.plan
        named = {
            "id": plan.id,
            "created": plan.created,
            "updated": plan.updated or plan.incremental.field,
        }
        return {k: v for k, v in named.items() if v}

    def _observe(self, records: list[dict[str, Any]], fields: FieldMap) -> list[datetime]:
        """The page's updated-at times; counts distinct ids and records older than asked."""
        updated = []
        for record in records:
            rid = value_at(record, fields.id)
            if rid is not None:
                self.seen_ids.add(str(rid))
            moment = parse_timestamp(value_at(record, fields.updated)) if fields.updated else None
            if moment is not None:
                updated.append(moment)
                if self.since is not None and moment < self.since - _INCREMENTAL_SLACK:
                    self.older += 1
        return updated

    def _note_page_size(self, paginator: Paginator, served: int) -> None:
        asked = self.plan.page_size
        self.typed.page_size = {"asked": asked, "served": served}
        if paginator.has_next_page and served != asked:
            how = "caps pages at" if served < asked else "ignores the page size and serves"
            log.info("%s: the service %s %d records (asked %d)", self.name, how, served, asked)

    def _check_end(self, paginator: Paginator | None) -> None:
        result, read = self.result, len(self.seen_ids)
        total = paginator.total if paginator is not None else None
        if paginator is not None and total is not None and read < total:
            self._short_of(total, paginator.total_source, read)
        options = self.plan.paginator.options()
        configured = options.get("total_path") or options.get("total_header")
        if configured and paginator is not None and paginator.pages and not paginator.total_found:
            key = "total_path" if options.get("total_path") else "total_header"
            result.warnings.append(
                f"the paginator's {key} {configured!r} was in none of the {paginator.pages} "
                f"answers, so the records read were compared with no total; check {self.where} "
                "paginator (`convo extract --check` reports the total the service gives)"
            )
        if self.older:
            param = self.plan.incremental.param
            result.warnings.append(
                f"the service ignored the incremental parameter {param!r}: {self.older} records "
                f"updated before {format_time(self.since or datetime.now(UTC), 'iso')} came "
                f"back, so every run reads the whole list; set {self.where} incremental = "
                "{ param = ..., format = ... } (`convo extract --check` finds them)"
            )
        if self.details is not None:
            self.details.check_end()

    def _short_of(self, total: int, source: str, read: int) -> None:
        """Fewer distinct records read than the service's total: a gap (decision
        D-EXTRACT-TOTALS), except on a filtered listing whose total counts the whole
        collection, which the warehouse then holds."""
        held = ""
        if self.filtered:
            table = "conversations" if self.name == "conversations" else "leads"
            rows = self.con.execute(
                f"SELECT count(*) FROM {table} WHERE workspace_id = ?", [self.run.workspace_id]
            ).fetchall()
            count = int(rows[0][0])
            if count >= total:
                log.info(
                    "%s: the service counts %d records (%s) and this filtered run read %d; the "
                    "warehouse holds %d, so the count is the whole collection's: nothing missing",
                    self.name, total, source, read, count,
                )  # fmt: skip
                return
            held = f", and the warehouse holds {count} in all"
        again = "; the bookmark is held, so the next run reads them again" * self.advance
        self.result.gaps.append(
            f"the service reported {total} records ({source}) but {read} distinct records were "
            f"read{held}{again}; check {self.where} paginator (`convo extract --check` shows "
            "how the list pages)"
        )

    def _check_columns(self) -> None:
        """Typed columns that stayed NULL in every row of the run, though the records may
        name their field otherwise: a warning naming the setting (see ``TypedFields``)."""
        for table in self.typed.tables():
            counts = empty_columns(self.con, table, self.run.run_id, self.run.workspace_id)
            self.result.warnings.extend(self.typed.null_warnings(table, counts))

    # -- details ---------------------------------------------------------------------

    async def _details(
        self, records: list[dict[str, Any]], fields: FieldMap, wanted: list[str]
    ) -> list[bytes]:
        """Fetch the details of the listed records that are new or changed (``wanted``)."""
        if self.details is None:
            if not self.typed.decided:
                self.typed.decide(records, [])
            return []
        semaphore = asyncio.Semaphore(self.cfg.detail_concurrency)
        reader = self.details

        async def one(record_id: str) -> bytes | None:
            async with semaphore:
                return await reader.fetch(self.client, record_id, self.result)

        jobs: list[Awaitable[bytes | None]] = [one(rid) for rid in wanted]
        bodies = [b for b in await asyncio.gather(*jobs) if b is not None]
        self.result.details += len(bodies)
        if not self.typed.decided:
            self.typed.decide(records, reader.samples)
            reader.settle()
        return bodies

    def _needing_detail(self, records: list[dict[str, Any]], fields: FieldMap) -> list[str]:
        ids = [str(v) for r in records if (v := value_at(r, fields.id)) is not None]
        if self.cfg.mode != "incremental":
            return list(dict.fromkeys(ids))
        reader = self.run.reader
        assert reader is not None
        have = dict(
            reader.execute(
                "SELECT id, detail_updated_at FROM conversations "
                "WHERE workspace_id = ? AND id IN (SELECT unnest(?))",
                [self.run.workspace_id, ids],
            ).fetchall()
        )
        out = []
        for record in records:
            rid = value_at(record, fields.id)
            if rid is None:
                continue
            known = have.get(str(rid))
            newest = parse_timestamp(value_at(record, fields.updated)) if fields.updated else None
            if known is None or newest is None or newest > known:
                out.append(str(rid))
        return list(dict.fromkeys(out))

    def detail_url(self, record_id: str) -> str:
        assert self.plan.detail is not None and self.plan.detail.path is not None
        return self.plan.detail.path.format(id=quote(record_id, safe=""))

    def scrub_detail(self, body: bytes, data: Any, record_id: str) -> bytes:
        """A detail's body scrubbed (``_scrub``); its findings go with the page's batch."""
        run = self.run
        body, found = run.scrubber.detail(
            run.workspace_id, body, data, record_id, self.typed.id_field
        )
        self.detail_found.extend(found)
        return body

    # -- commits ---------------------------------------------------------------------

    def _commit(
        self,
        batch: _Batch,
        paths: RecordPaths,
        tracker: SchemaTracker,
        mark: datetime | None,
    ) -> None:
        con, now, run_id = self.con, datetime.now(UTC), self.run.run_id
        shape = self.typed.shape
        listed_raw, detail_raw = self.run.raw_tables(self.name)
        try:
            with transaction(con):
                workspace = self.run.workspace_id
                self.run.identity.record(con, run_id)
                load.stage_records(con, "listed", batch.pages, paths, workspace=workspace)
                counts = load.classify(con, "listed", self.name)
                load.insert_raw(con, listed_raw, "listed", run_id, now)
                record_findings(con, workspace, self.name, batch.found, run_id, now)
                detailed = None
                if detail_raw and batch.details:
                    load.stage_details(con, "detailed", batch.details, paths, shape, workspace)
                    load.insert_raw(con, detail_raw, "detailed", run_id, now)
                    detailed = "detailed"
                if self.name == "conversations":
                    load.merge_conversations(con, "listed", detailed, run_id, now, shape, workspace)
                else:
                    load.merge_leads(con, "listed", run_id, now, shape, workspace)
                for structure in load.record_structure(con, "listed", paths):
                    tracker.observe(structure)
                if mark is not None:
                    write_bookmark(con, self.name, mark, run_id, workspace)
        finally:
            load.unstage(con, "listed", "detailed")
        self.result.new += counts.new
        self.result.changed += counts.changed
        self.result.unchanged += counts.unchanged


def _inline(params: dict[str, str]) -> str:
    """A TOML inline table of text values."""
    return "{ " + ", ".join(f"{k} = {orjson.dumps(v).decode()}" for k, v in params.items()) + " }"
