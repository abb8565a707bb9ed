"""One extraction run: every configured stream, paged, detailed, loaded and bookmarked.

A list stream is read page by page; the next page is requested while the
current page's new or changed conversations are being detailed. Pages are
loaded in batches (a few thousand records, or a few seconds at a slow rate
limit), each batch in one transaction together with its bookmark, so a run
killed at any moment resumes from its last committed batch and nothing is
loaded twice (raw versions are keyed by content, typed rows merged on id).
Batches are committed in a loader thread while the event loop fetches on.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from typing import Any
from urllib.parse import quote

import duckdb
import orjson

from convo_analytics._run_ids import new_run_id
from convo_analytics.contract import RateLimitPolicy
from convo_analytics.extract._http import ExtractError, RequestStats, ServiceClient
from convo_analytics.extract._limiter import AdaptiveLimiter
from convo_analytics.extract._paging import (
    PageRequest,
    Paginator,
    PagingError,
    detect_paginator,
    init_probe_request,
    make_paginator,
)
from convo_analytics.extract._progress import NoProgress, ProgressSink
from convo_analytics.extract._retry import RetryPolicy
from convo_analytics.extract._schema_drift import SchemaTracker
from convo_analytics.extract._shapes import (
    FieldMap,
    ShapeError,
    detect_fields,
    find_records,
    parse_timestamp,
)
from convo_analytics.extract._streams import LIST_STREAMS, SUMMARY_PATH, ExtractConfig, ListStream
from convo_analytics.warehouse import (
    RecordPaths,
    defer_checkpoints,
    open_warehouse,
    read_bookmark,
    transaction,
    write_bookmark,
)
from convo_analytics.warehouse import _load as load

log = logging.getLogger("convo.extract")
FAILURES = (ExtractError, PagingError, ShapeError)


@dataclass
class StreamResult:
    stream: str
    status: str = "running"
    pagination: str | None = None
    pages: int = 0
    records: int = 0
    new: int = 0
    changed: int = 0
    unchanged: int = 0
    details: int = 0
    details_missing: int = 0
    stats: RequestStats = field(default_factory=RequestStats)
    bookmark_before: datetime | None = None
    bookmark_after: datetime | None = None
    drift: list[str] = field(default_factory=list)
    error: str | None = None
    seconds: float = 0.0

    def to_json(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "pagination": self.pagination,
            "requests": self.stats.requests,
            "pages": self.pages,
            "records": self.records,
            "new": self.new,
            "changed": self.changed,
            "unchanged": self.unchanged,
            "details": self.details,
            "detailsMissing": self.details_missing,
            "rateLimited": self.stats.rate_limited,
            "retries": self.stats.retries,
            "serverErrors": self.stats.server_errors,
            "transportErrors": self.stats.transport_errors,
            "durationSeconds": round(self.seconds, 3),
            "bookmarkBefore": self.bookmark_before.isoformat() if self.bookmark_before else None,
            "bookmarkAfter": self.bookmark_after.isoformat() if self.bookmark_after else None,
            "drift": self.drift,
            "error": self.error,
        }

    def summary(self) -> str:
        if self.status != "ok":
            return f"FAILED: {self.error}"
        return (
            f"{self.records} records ({self.new} new, {self.changed} changed), "
            f"{self.details} details, {self.stats.requests} requests, "
            f"{self.stats.rate_limited} answered 429, {self.stats.retries} retries"
        )


@dataclass
class ExtractResult:
    run_id: str
    mode: str
    streams: dict[str, StreamResult]
    seconds: float

    @property
    def ok(self) -> bool:
        return all(s.status == "ok" for s in self.streams.values())

    def to_json(self) -> dict[str, Any]:
        return {
            "runId": self.run_id,
            "status": "ok" if self.ok else "failed",
            "mode": self.mode,
            "durationSeconds": round(self.seconds, 3),
            "streams": {name: s.to_json() for name, s in self.streams.items()},
        }


@dataclass
class _Batch:
    """Fetched pages waiting to be committed together."""

    pages: list[bytes] = field(default_factory=list)
    details: list[bytes] = field(default_factory=list)
    records: int = 0
    max_updated: datetime | None = None
    opened: float = field(default_factory=time.monotonic)

    def add(
        self,
        body: bytes,
        details: list[bytes],
        records: list[dict[str, Any]],
        updated: list[datetime],
    ) -> None:
        self.pages.append(body)
        self.details.extend(details)
        self.records += len(records)
        if updated:
            newest = max(updated)
            self.max_updated = newest if self.max_updated is None else max(self.max_updated, newest)


class _Loader:
    """Commits batches in one worker thread while the event loop goes on fetching.

    DuckDB releases the GIL while it works, so pages and details keep arriving
    during a commit. Commits run one at a time, in order: handing over a batch
    first waits for the previous commit (and raises its error), so at most one
    batch is being committed while the next one is fetched.
    """

    def __init__(self) -> None:
        self._pool = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="convo-load")
        self._pending: concurrent.futures.Future[None] | None = None

    async def submit(self, commit: Callable[..., None], *args: Any) -> None:
        await self.drain()
        self._pending = self._pool.submit(commit, *args)

    async def drain(self) -> None:
        """Wait for the commit under way, raising its error."""
        pending = self._pending
        if pending is None:
            return
        try:
            await asyncio.wrap_future(pending)
        finally:
            if pending.done():
                self._pending = None

    def wait(self) -> None:
        """Block until a commit under way has ended (when leaving a stream on an error)."""
        pending, self._pending = self._pending, None
        if pending is None:
            return
        concurrent.futures.wait([pending])
        if not pending.cancelled() and (error := pending.exception()) is not None:
            log.error("a batch failed to commit while the stream was failing: %s", error)

    def close(self) -> None:
        self.wait()
        self._pool.shutdown()


class Extraction:
    def __init__(
        self, config: ExtractConfig, progress: ProgressSink | None = None, transport: Any = None
    ) -> None:
        self.config = config
        self.progress = progress or NoProgress()
        self.run_id = new_run_id()
        self.started = datetime.now(UTC)
        self._transport = transport
        self.con: duckdb.DuckDBPyConnection | None = None
        #: Reads that the event loop makes while the loader thread writes (its own connection).
        self.reader: duckdb.DuckDBPyConnection | None = None
        self._loader = _Loader()

    async def run(self) -> ExtractResult:
        cfg = self.config
        clock = time.monotonic()
        self.con = open_warehouse(cfg.db_path)
        defer_checkpoints(self.con)
        self.reader = self.con.cursor()
        limiter = AdaptiveLimiter(RateLimitPolicy.parse(cfg.rate_limit))
        client = ServiceClient(
            cfg.base_url,
            cfg.api_key,
            limiter=limiter,
            retry=RetryPolicy(max_attempts=cfg.max_attempts, base_seconds=cfg.retry_base_seconds),
            connect_timeout=cfg.connect_timeout,
            read_timeout=cfg.read_timeout,
            max_connections=max(4, cfg.detail_concurrency * 2),
            transport=self._transport,
        )
        results: dict[str, StreamResult] = {}
        self._mark_interrupted_runs()
        try:
            for name in cfg.streams:
                result = results[name] = StreamResult(name)
                self._record_run(result, started=True)
                began = time.monotonic()
                self.progress.start(name)
                try:
                    if name == "summary":
                        await self._summary(client, result)
                    else:
                        await self._list_stream(client, LIST_STREAMS[name], result)
                    result.status = "ok"
                except FAILURES as exc:
                    result.status, result.error = "failed", str(exc)
                    log.error("%s: %s", name, exc)
                result.seconds = time.monotonic() - began
                self._record_run(result)
                self.progress.finish(name, result.summary())
        finally:
            await client.aclose()
            self._loader.close()
            try:
                self._checkpoint()
            finally:
                self.reader.close()
                self.con.close()
        return ExtractResult(self.run_id, cfg.mode, results, time.monotonic() - clock)

    # -- list streams --------------------------------------------------------------------

    async def _list_stream(
        self, client: ServiceClient, stream: ListStream, result: StreamResult
    ) -> None:
        cfg = self.config
        assert self.con is not None
        incremental = cfg.mode == "incremental"
        advance = cfg.mode != "backfill"  # a backfill revisits the past; it moves no bookmark
        result.bookmark_before = read_bookmark(self.con, stream.name)
        params = dict(stream.params)
        if cfg.mode == "backfill":
            if cfg.backfill_from:
                params[cfg.updated_since_param] = _iso(cfg.backfill_from)
            if cfg.backfill_to:
                params[cfg.updated_before_param] = _iso(cfg.backfill_to)
        elif incremental and result.bookmark_before is not None:
            since = result.bookmark_before - timedelta(seconds=cfg.lookback_seconds)
            params[cfg.updated_since_param] = _iso(since)
        request = PageRequest(stream.path, params)
        paginator: Paginator | None = None
        if cfg.pagination == "auto":
            init_probe_request(request, page_size=cfg.page_size, options=cfg.pagination_options)
        else:
            paginator = make_paginator(
                cfg.pagination, page_size=cfg.page_size, options=cfg.pagination_options
            )
            paginator.init_request(request)
        fields: FieldMap | None = None
        paths: RecordPaths | None = None
        tracker = SchemaTracker(self.con, stream.name, self.run_id)
        ordered, previous_max = True, None
        batch = _Batch()
        fetch: asyncio.Task[Any] | None = asyncio.ensure_future(
            client.get(request.url, dict(request.params) or None, result.stats, stream.path)
        )
        try:
            while fetch is not None:
                response, data = await fetch
                fetch = None
                records, envelope = find_records(data, cfg.envelope)
                if fields is None and records:
                    fields = detect_fields(records, envelope, self._field_overrides())
                if paginator is None:
                    paginator = detect_paginator(
                        response,
                        data,
                        records,
                        page_size=cfg.page_size,
                        request=request,
                        options=cfg.pagination_options,
                    )
                    result.pagination = paginator.style
                else:
                    paginator.update_state(response, data, records)
                    result.pagination = paginator.style
                result.pages += 1
                if records and paginator.has_next_page:
                    paginator.update_request(request)
                    fetch = asyncio.ensure_future(
                        client.get(
                            request.url, dict(request.params) or None, result.stats, stream.path
                        )
                    )
                if not records:
                    continue
                assert fields is not None
                paths = paths or RecordPaths(envelope, fields.id, fields.updated, fields.created)
                updated = [t for r in records if (t := _updated(r, fields)) is not None]
                page_sorted = updated == sorted(updated) and (
                    not updated or previous_max is None or updated[0] >= previous_max
                )
                ordered = ordered and page_sorted and len(updated) == len(records)
                if updated:
                    previous_max = (
                        max(updated) if previous_max is None else max(previous_max, max(updated))
                    )
                details = await self._details(client, stream, records, fields, result)
                batch.add(response.content, details, records, updated)
                result.records += len(records)
                self.progress.update(
                    stream.name, records=result.records, requests=result.stats.requests
                )
                due = time.monotonic() - batch.opened >= cfg.batch_seconds
                if batch.records >= cfg.batch_records or due or fetch is None:
                    mark = batch.max_updated if ordered and advance else None
                    await self._loader.submit(
                        self._commit, stream, batch, paths, result, tracker, mark
                    )
                    batch = _Batch()
            if batch.pages and paths is not None:
                await self._loader.submit(self._commit, stream, batch, paths, result, tracker, None)
            await self._loader.drain()
        finally:
            self._loader.wait()  # a stream that fails leaves no commit running
        if advance and previous_max is not None:
            # Unordered listings can hide a record that changed behind our position: never
            # move the mark past the moment this run began (minus the lookback, next time).
            final = previous_max if ordered else min(previous_max, self.started)
            with transaction(self.con):
                write_bookmark(self.con, stream.name, final, self.run_id)
        result.bookmark_after = read_bookmark(self.con, stream.name)
        result.drift = tracker.finish()

    def _field_overrides(self) -> dict[str, str]:
        cfg = self.config
        named = {"id": cfg.id_field, "created": cfg.created_field, "updated": cfg.updated_field}
        return {k: v for k, v in named.items() if v}

    async def _details(
        self,
        client: ServiceClient,
        stream: ListStream,
        records: list[dict[str, Any]],
        fields: FieldMap,
        result: StreamResult,
    ) -> list[bytes]:
        """Fetch the details of the listed records that are new or changed."""
        if stream.detail_path is None:
            return []
        wanted = self._needing_detail(records, fields)
        semaphore = asyncio.Semaphore(self.config.detail_concurrency)

        async def one(record_id: str) -> bytes | None:
            async with semaphore:
                path = stream.detail_path.format(id=quote(record_id, safe=""))  # type: ignore[union-attr]
                response, data = await client.get(
                    path, None, result.stats, stream.detail_path or "", missing_ok=True
                )
                if data is None:
                    result.details_missing += 1
                    log.warning(
                        "%s: %s disappeared before its detail was read", stream.name, record_id
                    )
                    return None
                return response.content

        jobs: list[Awaitable[bytes | None]] = [one(rid) for rid in wanted]
        bodies = [b for b in await asyncio.gather(*jobs) if b is not None]
        result.details += len(bodies)
        return bodies

    def _needing_detail(self, records: list[dict[str, Any]], fields: FieldMap) -> list[str]:
        ids = [str(r[fields.id]) for r in records if r.get(fields.id) is not None]
        if self.config.mode != "incremental":
            return list(dict.fromkeys(ids))
        assert self.reader is not None
        have = dict(
            self.reader.execute(
                "SELECT id, detail_updated_at FROM conversations WHERE id IN (SELECT unnest(?))",
                [ids],
            ).fetchall()
        )
        out = []
        for record in records:
            rid = record.get(fields.id)
            if rid is None:
                continue
            known = have.get(str(rid))
            newest = _updated(record, fields)
            if known is None or newest is None or newest > known:
                out.append(str(rid))
        return list(dict.fromkeys(out))

    def _commit(
        self,
        stream: ListStream,
        batch: _Batch,
        paths: RecordPaths,
        result: StreamResult,
        tracker: SchemaTracker,
        mark: datetime | None,
    ) -> None:
        assert self.con is not None
        con, now = self.con, datetime.now(UTC)
        try:
            with transaction(con):
                load.stage_records(con, "listed", batch.pages, paths)
                counts = load.classify(con, "listed", stream.typed_table)
                load.insert_raw(con, stream.raw_table, "listed", self.run_id, now)
                detailed = None
                if stream.detail_raw_table and batch.details:
                    load.stage_details(con, "detailed", batch.details, paths)
                    load.insert_raw(con, stream.detail_raw_table, "detailed", self.run_id, now)
                    detailed = "detailed"
                if stream.name == "conversations":
                    load.merge_conversations(con, "listed", detailed, self.run_id, now)
                else:
                    load.merge_leads(con, "listed", self.run_id, now)
                for structure in load.record_structure(con, "listed", paths):
                    tracker.observe(structure)
                if mark is not None:
                    write_bookmark(con, stream.name, mark, self.run_id)
        finally:
            load.unstage(con, "listed", "detailed")
        result.new += counts.new
        result.changed += counts.changed
        result.unchanged += counts.unchanged

    def _checkpoint(self) -> None:
        """The run's one checkpoint (see ``defer_checkpoints``): the log goes into the file."""
        assert self.con is not None
        self.con.execute("CHECKPOINT")

    # -- the service's summary ----------------------------------------------------------

    async def _summary(self, client: ServiceClient, result: StreamResult) -> None:
        cfg = self.config
        assert self.con is not None
        today = datetime.now(UTC).date()
        first: date = (
            cfg.backfill_from.date()
            if cfg.backfill_from
            else today - timedelta(days=cfg.summary_days - 1)
        )
        last: date = cfg.backfill_to.date() if cfg.backfill_to else today
        params = {"from": first.isoformat(), "to": last.isoformat(), "tz": cfg.summary_timezone}
        response, _ = await client.get(SUMMARY_PATH, params, result.stats, SUMMARY_PATH)
        result.pagination, result.pages = "single", 1
        with transaction(self.con):
            _, days = load.merge_summary(self.con, response.content, self.run_id, datetime.now(UTC))
        result.records = days

    # -- the run log ---------------------------------------------------------------------

    def _mark_interrupted_runs(self) -> None:
        assert self.con is not None
        self.con.execute(
            "UPDATE extract_runs SET status = 'interrupted', error = 'the run stopped before "
            "finishing (killed or crashed)' WHERE status = 'running'"
        )

    def _record_run(self, result: StreamResult, started: bool = False) -> None:
        assert self.con is not None
        s = result.stats
        row = [
            self.run_id,
            result.stream,
            self.started,
            None if started else datetime.now(UTC),
            result.status,
            self.config.mode,
            result.pagination,
            s.requests,
            result.pages,
            result.records,
            result.new,
            result.changed,
            result.unchanged,
            result.details,
            s.rate_limited,
            s.retries,
            s.server_errors,
            s.transport_errors,
            round(result.seconds, 3),
            result.bookmark_before,
            result.bookmark_after,
            orjson.dumps(result.drift).decode(),
            result.error,
        ]
        self.con.execute(
            f"INSERT OR REPLACE INTO extract_runs VALUES ({', '.join('?' * len(row))})", row
        )


def _iso(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.") + (
        f"{moment.microsecond // 1000:03d}Z"
    )


def _updated(record: dict[str, Any], fields: FieldMap) -> datetime | None:
    return parse_timestamp(record.get(fields.updated)) if fields.updated else None


async def run_extract(
    config: ExtractConfig, progress: ProgressSink | None = None, transport: Any = None
) -> ExtractResult:
    return await Extraction(config, progress, transport).run()
