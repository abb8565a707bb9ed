"""One extraction run: every configured stream, paged, detailed, loaded and bookmarked.

A list stream (``_list_stream``) is read page by page; the next page is
requested while the current page's new or changed conversations are being
detailed. Pages are loaded in batches (a few thousand records, or a few
seconds at a slow rate limit), each batch in one transaction together with
its bookmark, so a run killed at any moment resumes from its last committed
batch and nothing is loaded twice (raw versions are keyed by content, typed
rows merged on id). Batches are committed in a loader thread while the event
loop fetches on. Every error and warning a run records passes through one
redactor first, so no credential reaches a log, ``extract_runs`` or a snapshot.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import duckdb
import orjson
import pyarrow as pa

from convo_analytics._run_ids import new_run_id
from convo_analytics.contract import RateLimitPolicy
from convo_analytics.extract._http import ExtractError, ServiceClient, Unreachable
from convo_analytics.extract._limiter import AdaptiveLimiter
from convo_analytics.extract._list_stream import ListStreamRun
from convo_analytics.extract._paging import PagingError
from convo_analytics.extract._progress import NoProgress, ProgressSink
from convo_analytics.extract._results import ExtractResult, StreamResult, WorkspacesResult
from convo_analytics.extract._retry import RetryPolicy
from convo_analytics.extract._scrub import LoadScrubber
from convo_analytics.extract._secrets import Redactor
from convo_analytics.extract._shapes import ShapeError
from convo_analytics.extract._streams import RAW_TABLES, ExtractConfig
from convo_analytics.extract._summary import SummaryRun
from convo_analytics.extract._suppress import LoadSuppression
from convo_analytics.extract._workspace import WorkspaceIdentity
from convo_analytics.warehouse import defer_checkpoints, open_warehouse

__all__ = ["ExtractResult", "Extraction", "StreamResult", "run_extract", "run_extract_many"]

log = logging.getLogger("convo.extract")
FAILURES = (ExtractError, PagingError, ShapeError)
#: A run that died leaves its streams ``running``; the next run says so.
_INTERRUPTED = (
    "UPDATE extract_runs SET status = 'interrupted', error = 'the run stopped before "
    "finishing (killed or crashed)' WHERE status = 'running'"
)


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
        self,
        config: ExtractConfig,
        progress: ProgressSink | None = None,
        transport: Any = None,
        *,
        run_id: str | None = None,
        labelled: bool = False,
    ) -> None:
        self.config = config
        self.progress = progress or NoProgress()
        self.run_id = run_id or new_run_id()
        self.started = datetime.now(UTC)
        #: Streams are labelled ``WORKSPACE/STREAM`` in the progress when several run at once.
        self.prefix = f"{config.workspace}/" if labelled else ""
        self._transport = transport
        self.con: duckdb.DuckDBPyConnection | None = None
        #: Reads that the event loop makes while the loader thread writes (its own connection).
        self.reader: duckdb.DuckDBPyConnection | None = None
        self.loader = _Loader()
        self._secrets: list[str] = [config.api_key]
        #: Personal data out of every record before it is written (one scrubber per run).
        self.scrubber = LoadScrubber(config.privacy)
        #: Records of erased people left out (the suppression list, D-ERASURE).
        self.suppression = LoadSuppression(config.privacy)

    async def run(self, shared: duckdb.DuckDBPyConnection | None = None) -> ExtractResult:
        """Extract every stream of the workspace; with ``shared`` (several workspaces at
        once), on a connection of its own to that warehouse, which the caller checkpoints."""
        cfg = self.config
        clock = time.monotonic()
        if shared is None:
            self.con = open_warehouse(cfg.db_path)
            defer_checkpoints(self.con)
            self._mark_interrupted_runs()
        else:
            self.con = shared.cursor()
        self.reader = self.con.cursor()
        self.identity = WorkspaceIdentity(
            self.con,
            cfg.workspace,
            configured=cfg.workspace_id,
            implicit=cfg.implicit_workspace,
            base_url=cfg.base_url,
        )
        limiter = AdaptiveLimiter(RateLimitPolicy.parse(cfg.rate_limit))
        client = ServiceClient(
            cfg.base_url,
            cfg.credentials or cfg.api_key,
            limiter=limiter,
            retry=RetryPolicy(max_attempts=cfg.max_attempts, base_seconds=cfg.retry_base_seconds),
            connect_timeout=cfg.connect_timeout,
            read_timeout=cfg.read_timeout,
            max_connections=max(4, cfg.detail_concurrency * 2),
            transport=self._transport,
            allowed_origins=cfg.allowed_origins,
            reach_budget_seconds=cfg.reach_budget_seconds,
        )
        results: dict[str, StreamResult] = {}
        unreachable: str | None = None
        try:
            for name in cfg.streams:
                plan = cfg.plan(name)
                result = results[name] = StreamResult(name)
                if not plan.enabled:
                    result.status = "unavailable"
                    result.warnings.append(f"disabled by [extract.streams.{name}] enabled = false")
                    continue
                if unreachable is not None:  # already said once; nothing more to try
                    result.status, result.error = "failed", unreachable
                    self._record_run(result)
                    continue
                self._record_run(result, started=True)
                began = time.monotonic()
                self.progress.start(self.prefix + name)
                try:
                    if name == "summary":
                        await SummaryRun(self, client, plan, result).read()
                    else:
                        await ListStreamRun(self, client, plan, result).read()
                    result.finish(strict=cfg.strict)
                except FAILURES as exc:
                    result.status, result.error = "failed", self._where(name, exc)
                    if isinstance(exc, Unreachable):
                        unreachable = str(exc)
                except (duckdb.Error, pa.ArrowException) as exc:  # one line, never a traceback
                    log.debug("%s: loading failed", name, exc_info=True)
                    first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
                    result.status = "failed"
                    result.error = (
                        f"the warehouse could not load the {name} answers ({first[:300]}); "
                        "nothing of the failing batch was kept"
                    )
                result.error = self.redact(result.error) if result.error else None
                result.warnings = [self.redact(w) for w in result.warnings]
                result.gaps = [self.redact(g) for g in result.gaps]
                for line in (*result.gaps, *result.warnings):
                    log.warning("%s%s: %s", self.prefix, name, line)
                if result.status == "failed":
                    log.error("%s%s: %s", self.prefix, name, result.error)
                result.seconds = time.monotonic() - began
                self._record_run(result)
                self.progress.finish(self.prefix + name, result.summary())
        finally:
            await client.aclose()
            self.loader.close()
            try:
                if shared is None:
                    self._checkpoint()
            finally:
                self.reader.close()
                self.con.close()
        return ExtractResult(
            self.run_id, cfg.mode, results, time.monotonic() - clock,
            workspace=cfg.workspace, workspace_id=self.identity.id,
        )  # fmt: skip

    @property
    def workspace_id(self) -> str:
        """The id this run's rows are keyed by (settled by the first records at the latest)."""
        return self.identity.id or self.identity.learn(())

    def redact(self, text: str) -> str:
        """``text`` with every credential of the run masked (OAuth tokens change as they
        are refreshed, so the provider is asked each time)."""
        live = self.config.credentials.secrets() if self.config.credentials else []
        return Redactor([*self._secrets, *live])(text)

    @staticmethod
    def _where(name: str, exc: Exception) -> str:
        """The error, with the stream's table named when the fix is a setting of it."""
        text = str(exc)
        if isinstance(exc, PagingError | ShapeError):
            text += f" ([extract.streams.{name}])"
        return text

    def raw_tables(self, stream: str) -> tuple[str, str | None]:
        return RAW_TABLES[stream]

    def previous_shape(self, stream: str) -> dict[str, Any] | None:
        """How the last run that read ``stream`` found it (its detected fields, formats)."""
        assert self.con is not None
        if not self.identity.resolved:
            return None
        rows = self.con.execute(
            "SELECT shape FROM extract_runs WHERE workspace_id = ? AND stream = ? "
            "AND shape IS NOT NULL AND status IN ('ok', 'partial') "
            "ORDER BY started_at DESC LIMIT 1",
            [self.identity.id, stream],
        ).fetchall()
        if not rows or rows[0][0] is None:
            return None
        value = orjson.loads(rows[0][0])
        return value if isinstance(value, dict) else None

    def _checkpoint(self) -> None:
        """The run's one checkpoint (see ``defer_checkpoints``): the log goes into the file."""
        assert self.con is not None
        self.con.execute("CHECKPOINT")

    # -- the run log ---------------------------------------------------------------------

    def _mark_interrupted_runs(self) -> None:
        assert self.con is not None
        self.con.execute(
            "UPDATE extract_runs SET status = 'interrupted', error = 'the run stopped before "
            "finishing (killed or crashed)' WHERE status = 'running'"
        )

    def _record_run(self, result: StreamResult, started: bool = False) -> None:
        """The stream's row in ``extract_runs`` (a row begun before the workspace id was
        learned moves to it)."""
        assert self.con is not None
        s = result.stats
        workspace = self.identity.id or self.config.workspace
        if result.recorded_as not in (None, workspace):
            self.con.execute(
                "DELETE FROM extract_runs WHERE run_id = ? AND workspace_id = ? AND stream = ?",
                [self.run_id, result.recorded_as, result.stream],
            )
        result.recorded_as = workspace
        row = [
            self.run_id,
            workspace,
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
            orjson.dumps([*result.gaps, *result.warnings]).decode(),
            orjson.dumps(result.shape).decode() if result.shape else None,
        ]
        self.con.execute(
            f"INSERT OR REPLACE INTO extract_runs VALUES ({', '.join('?' * len(row))})", row
        )


async def run_extract(
    config: ExtractConfig, progress: ProgressSink | None = None, transport: Any = None
) -> ExtractResult:
    return await Extraction(config, progress, transport).run()


async def run_extract_many(
    configs: list[ExtractConfig], progress: ProgressSink | None = None, transport: Any = None
) -> WorkspacesResult:
    """Extract several workspaces at once into one warehouse, each at its own rate limit
    with its own credentials and bookmarks; one failing leaves the others loaded."""
    if not configs:
        raise ValueError("no workspace to extract")
    clock = time.monotonic()
    run_id = new_run_id()
    shared = open_warehouse(configs[0].db_path)
    defer_checkpoints(shared)
    shared.execute(_INTERRUPTED)
    many = len(configs) > 1
    try:
        runs = [
            Extraction(cfg, progress, transport, run_id=run_id, labelled=many).run(shared)
            for cfg in configs
        ]
        done = await asyncio.gather(*runs, return_exceptions=True)
    finally:
        try:
            shared.execute("CHECKPOINT")
        finally:
            shared.close()
    results: dict[str, ExtractResult] = {}
    for cfg, outcome in zip(configs, done, strict=True):
        if isinstance(outcome, BaseException):
            raise outcome  # a bug, not a workspace's failure: the others have finished
        results[cfg.workspace] = outcome
    return WorkspacesResult(run_id, configs[0].mode, results, time.monotonic() - clock)
