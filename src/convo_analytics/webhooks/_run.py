"""``convo webhooks ingest``: archive files into the warehouse, reading only what is new.

The files are planned first (``_files``: skip, read on, read again), then read
in order by the :class:`~convo_analytics.webhooks._ingest.Ingester`; chunks go to
DuckDB on a loader thread, each in one transaction with its file's new state,
so a run killed at any point resumes after the last chunk stored. A run where
every line, or more than the configured share, fails the signature check is
most likely verifying with the wrong secret: it says so in one line and counts
as failed (the lines stay quarantined for ``convo webhooks quarantine replay``).
"""

from __future__ import annotations

import gc
import queue
import secrets as _secrets
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson
import pyarrow as pa

from convo_analytics.privacy import PrivacyConfig
from convo_analytics.webhooks._files import (
    STATE_COLUMNS,
    load_states,
    plan_files,
    with_siblings,
)
from convo_analytics.webhooks._ingest import Ingester, IngestOptions, _Chunk
from convo_analytics.webhooks._scrub import DeliveryScrubber
from convo_analytics.webhooks._suppress import EventSuppression
from convo_analytics.webhooks._workspace import EndpointWorkspace, WorkspaceScope

#: Where the secrets come from, named by the signature alarm (never the secrets).
SECRET_HINT = "CONVO_WEBHOOK_SECRET"
#: DuckDB's row group: a chunk at least this long is written to the file at its commit.
ROW_GROUP = 122_880
#: Bodies of smaller chunks held in DuckDB's buffer pool before a checkpoint writes them.
SMALL_CHUNK_BYTES = 16 << 20
#: Seconds the reading thread holds the GIL while the loader thread waits for it (Python's
#: default is 5 ms) during a run.
SWITCH_INTERVAL = 0.0005


@dataclass
class IngestResult:
    run_id: str
    kind: str = "ingest"
    files: int = 0
    read: int = 0
    loaded: int = 0
    duplicates: int = 0
    quarantined: Counter[str] = field(default_factory=Counter)
    readings: Counter[str] = field(default_factory=Counter)
    types: Counter[str] = field(default_factory=Counter)
    seconds: float = 0.0
    bytes_read: int = 0
    skipped: int = 0
    resumed: int = 0
    changed: list[dict[str, str]] = field(default_factory=list)
    held_back: int = 0
    alarm: str | None = None
    #: Events left out: they name a person an erasure removed (D-ERASURE).
    suppressed: int = 0

    def to_json(self) -> dict[str, Any]:
        return {
            "runId": self.run_id,
            "files": self.files,
            "read": self.read,
            "loaded": self.loaded,
            "duplicates": self.duplicates,
            "suppressed": self.suppressed,
            "quarantined": dict(sorted(self.quarantined.items())),
            "signatureReadings": dict(sorted(self.readings.items())),
            "eventTypes": dict(sorted(self.types.items())),
            "durationSeconds": round(self.seconds, 3),
            "bytesRead": self.bytes_read,
            "filesSkipped": self.skipped,
            "filesResumed": self.resumed,
            "filesChanged": self.changed,
            "heldBack": self.held_back,
            "signatureAlarm": self.alarm,
        }


def signature_alarm(
    failed: int, total: int, secrets: int, share: float, noun: str = "lines",
    where: str = SECRET_HINT, since: str = "", whose: str = "",
) -> str | None:  # fmt: skip
    """The one line that says the secret is most likely wrong, or None.

    It names how many failed, how many secrets were tried (``whose``: a workspace's) and
    where they come from; never a secret.
    """
    if failed == 0 or total == 0 or (failed < total and failed / total <= share):
        return None
    plural = "" if secrets == 1 else "s"
    the = whose or "the "
    return (
        f"{failed} of {total} {noun}{since} failed the signature check with {the}{secrets} "
        f"configured secret{plural}: check {where}"
    )


def new_run_id() -> str:
    return datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ-") + _secrets.token_hex(3)


def ingest(
    paths: Sequence[Path],
    secrets: Sequence[bytes],
    db_path: Path,
    options: IngestOptions | None = None,
    *,
    secret_hint: str = SECRET_HINT,
    endpoint: EndpointWorkspace | None = None,
    privacy: PrivacyConfig | None = None,
) -> IngestResult:
    """Ingest archives into the warehouse at ``db_path``; see the module docstring.

    ``endpoint``: the workspace whose archive folder these files are (its events are
    stored under its id, D-WEBHOOK-WORKSPACE); None, the flat endpoint's. ``privacy``: how
    events are scrubbed before they are stored, and the key of the archive's local seals
    (D-PRIVACY-SCRUB-AT-LOAD); None: stored as they are, sealed lines quarantined.

    Reading and verifying (Python, one core) and loading (DuckDB) overlap: a loader
    thread stores one chunk while the next is read, at most one chunk waiting between.
    """
    options = options or IngestOptions()
    result = IngestResult(new_run_id())

    def read(con: Any, began: datetime, loader: Loader) -> None:
        ingester = new_ingester(con, secrets, began, options, endpoint, privacy)
        states = load_states(con, with_siblings(str(p.resolve()) for p in paths))
        for plan in plan_files(paths, states, full=options.full):
            result.files += 1
            if not plan.reads:
                result.skipped += 1
                continue
            last: _Chunk | None = None
            for chunk in ingester.read_file(plan, result.run_id):
                loader.put(chunk)
                last = chunk
            _count_file(result, plan, last)

    return recorded_run(db_path, result, len(secrets), options, secret_hint, read, privacy)


def new_ingester(
    con: Any,
    secrets: Sequence[bytes],
    began: datetime,
    options: IngestOptions,
    endpoint: EndpointWorkspace | None,
    privacy: PrivacyConfig | None = None,
) -> Ingester:
    """An Ingester for one endpoint's files: its secrets, and its workspace as the config and
    the warehouse's bindings know it (a configured id the warehouse binds otherwise, or
    that another name holds, is a WorkspaceConflict naming both)."""
    from convo_analytics.warehouse._bindings import (
        WorkspaceConflict,
        bound_workspaces,
        check_binding,
    )

    endpoint = endpoint or EndpointWorkspace(None)
    bound = bound_workspaces(con)
    if endpoint.name is not None and endpoint.configured_id:
        problem = check_binding(bound, endpoint.name, endpoint.configured_id)
        if problem is not None:
            raise WorkspaceConflict(problem)
    scope = WorkspaceScope(endpoint, {name: wid for name, (wid, _) in bound.items()})
    return Ingester(secrets, began, options, scope=scope, scrub=DeliveryScrubber(privacy))


def recorded_run(
    db_path: Path,
    result: IngestResult,
    secret_count: int,
    options: IngestOptions,
    secret_hint: str,
    work: Callable[[Any, datetime, Loader], None],
    privacy: PrivacyConfig | None = None,
) -> IngestResult:
    """Run ``work`` (an ingest or a replay) as one ``ingest_runs`` row: begun, loaded through
    a Loader, judged by the signature alarm, recorded as ok or failed (and why)."""
    started = time.monotonic()
    con, began = begin_run(db_path, result)
    collecting = gc.isenabled()
    try:
        try:
            loader = Loader(
                con, result, replay=result.kind == "replay", suppression=EventSuppression(privacy)
            )
            # Each line makes a few JSON trees, freed by reference counting (they hold no
            # cycles): the cyclic collector would only scan them, a fifth of the reading time.
            gc.disable()
            # The loader thread needs the GIL between its statements (some 30 a chunk), and
            # the reading thread, busy in Python, hands it over only every switch interval:
            # at the default 5 ms that was 2 to 3 ms a statement spent waiting.
            interval = sys.getswitchinterval()
            sys.setswitchinterval(min(interval, SWITCH_INTERVAL))
            try:
                work(con, began, loader)
            finally:
                if collecting:
                    gc.enable()
                try:
                    loader.close()
                finally:
                    sys.setswitchinterval(interval)
            result.alarm = signature_alarm(
                result.quarantined["bad_signature"], result.read, secret_count,
                options.alarm_share, where=secret_hint,
            )  # fmt: skip
            result.seconds = time.monotonic() - started
            record_run(con, result, began, "failed" if result.alarm else "ok", result.alarm)
        except BaseException as exc:
            result.seconds = time.monotonic() - started
            record_run(con, result, began, "failed", f"{type(exc).__name__}: {exc}")
            raise
    finally:
        con.close()
    return result


def _count_file(result: IngestResult, plan: Any, last: _Chunk | None) -> None:
    if plan.action == "changed":
        result.changed.append({"path": plan.source, "why": plan.why})
    elif plan.action in ("resume", "continue"):
        result.resumed += 1
    if last is not None and last.state is not None:
        result.bytes_read += max(0, last.state.stream_offset - plan.start)
        result.held_back += 1 if last.state.held_back else 0


def begin_run(db_path: Path, result: IngestResult) -> tuple[Any, datetime]:
    """Open the warehouse for a run: runs left ``running`` by a killed process are marked
    ``interrupted`` (one process writes the warehouse at a time, so none is still going)."""
    from convo_analytics.warehouse import open_warehouse

    con = open_warehouse(db_path)
    try:
        # Chunks are independent: bound DuckDB's buffer pool so that a 2,000,000-event
        # archive ingests in well under a gigabyte.
        con.execute("SET memory_limit = '256MB'")
        con.execute("SET preserve_insertion_order = false")
        # A checkpoint rewrites the tables' key indexes: at the default threshold (16 MB
        # of write-ahead log) that happened after almost every chunk and took most of the
        # time. Chunks of more than a row group are written to the database file
        # directly, so the log stays small; the checkpoint runs once, when the file closes.
        con.execute("SET checkpoint_threshold = '256MB'")
        con.execute("UPDATE ingest_runs SET status = 'interrupted' WHERE status = 'running'")
        began = datetime.now(UTC)
        record_run(con, result, began, "running")
    except BaseException:
        con.close()
        raise
    return con, began


class Loader:
    """Stores chunks in DuckDB on a thread of its own, each in one transaction, in order.

    DuckDB releases the GIL while it works, so the next chunk is read and verified
    meanwhile. An error in the thread is raised again in the caller at its next put or
    at close; close waits until every chunk handed over is committed (or failed).
    ``replay``: quarantined lines read again update their rows instead of being added.
    """

    def __init__(
        self,
        con: Any,
        result: IngestResult,
        *,
        replay: bool = False,
        suppression: EventSuppression | None = None,
    ) -> None:
        self.con = con
        self.result = result
        self.replay = replay
        #: Events of erased people left out before they are stored (D-ERASURE).
        self.suppression = suppression or EventSuppression(None)
        self.ord = 0
        self.error: BaseException | None = None
        self.queue: queue.Queue[
            tuple[pa.Table, pa.Table, int, Any, tuple[str, str] | None, list[Any]] | None
        ] = queue.Queue()
        self.busy = False
        self.small_bytes = 0  # bodies of small chunks stored since the last checkpoint
        self.idle = threading.Condition()
        self.thread = threading.Thread(target=self._run, name="ingest-loader", daemon=True)
        self.thread.start()

    def put(self, chunk: _Chunk) -> None:
        staged, rejected = chunk.tables(self.ord + 1)
        self.ord += staged.num_rows
        self._wait()  # the previous chunk is stored: at most one in memory besides this one
        if self.thread.is_alive():
            self.queue.put((staged, rejected, chunk.count, chunk.state, chunk.binding, chunk.found))
        self._raise()

    def _wait(self) -> None:
        with self.idle:
            while self.busy and self.thread.is_alive():
                self.idle.wait(0.5)
            self.busy = self.thread.is_alive()

    def close(self) -> None:
        if self.thread.is_alive():
            self.queue.put(None)
        self.thread.join()
        self._raise()

    def _raise(self) -> None:
        if self.error is not None:
            raise self.error

    def _checkpoint_if_needed(self, staged: pa.Table) -> None:
        """Checkpoint when small chunks (of long lines: D-LINE-LIMIT) have piled up.

        A chunk of a row group or more is written to the database file at its commit; a
        smaller one stays in the buffer pool until a checkpoint, so chunks cut short by long
        lines would fill the 256 MB pool within a few dozen: their bodies are counted, and
        past SMALL_CHUNK_BYTES the pending ones are checkpointed (before the next commit).
        """
        if staged.num_rows >= ROW_GROUP:
            return
        self.small_bytes += staged.column("body").nbytes
        if self.small_bytes > SMALL_CHUNK_BYTES:
            self.con.execute("CHECKPOINT")
            self.small_bytes = staged.column("body").nbytes

    def _run(self) -> None:
        from convo_analytics.warehouse import record_findings, transaction
        from convo_analytics.warehouse._bindings import bind_workspace
        from convo_analytics.warehouse._events import load_events, quarantine

        result, con, run_id = self.result, self.con, self.result.run_id
        try:
            while (item := self.queue.get()) is not None:
                staged, rejected, lines, state, binding, found = item
                now = datetime.now(UTC)
                self._checkpoint_if_needed(staged)
                staged, found, suppressed = self.suppression.filter(con, staged, found)
                with transaction(con):
                    if binding is not None:  # learned from this chunk's first claim
                        bind_workspace(con, *binding, "webhook", None, run_id)
                    counts = load_events(
                        con, staged, run_id, now, resolve=True, stored_lines=self.replay
                    )
                    quarantine(con, rejected, run_id, now, replace=self.replay)
                    for workspace, rows in _by_workspace(found).items():
                        record_findings(con, workspace, "events", rows, run_id, now)
                    if state is not None:
                        marks = ", ".join("?" for _ in STATE_COLUMNS)
                        con.execute(f"INSERT OR REPLACE INTO ingest_files VALUES ({marks})",
                                    state.row())  # fmt: skip
                result.read += lines
                result.loaded += counts.loaded
                result.duplicates += counts.duplicates
                result.suppressed += suppressed
                result.quarantined.update(counts.quarantined)
                result.quarantined.update(rejected.column("reason").to_pylist())
                result.readings.update(counts.readings)
                result.types.update(counts.types)
                with self.idle:
                    self.busy = False
                    self.idle.notify()
        except BaseException as exc:  # handed to the caller
            self.error = exc


def _by_workspace(found: list[Any]) -> dict[str, list[Any]]:
    """Findings ``(workspace, event id, kind, hash)`` grouped by workspace."""
    out: dict[str, list[Any]] = {}
    for workspace, event_id, kind, digest in found:
        out.setdefault(workspace or "default", []).append((event_id, kind, digest))
    return out


def record_run(
    con: Any, result: IngestResult, began: datetime, status: str, error: str | None = None
) -> None:
    con.execute(
        "INSERT OR REPLACE INTO ingest_runs VALUES "
        "(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        [
            result.run_id, began, None if status == "running" else datetime.now(UTC), status,
            result.files, result.read, result.loaded, result.duplicates,
            sum(result.quarantined.values()), orjson.dumps(result.quarantined).decode(),
            orjson.dumps(result.readings).decode(), round(result.seconds, 3), error,
            result.kind, result.bytes_read, result.skipped,
            orjson.dumps(result.changed).decode(), result.held_back,
        ],
    )  # fmt: skip
