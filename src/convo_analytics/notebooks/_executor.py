"""The limited query executor: notebook SQL runs in query processes it can stop.

A DuckDB call cannot always be interrupted (one ``list_sort`` over a list of
60 million items, one ``regexp_replace`` over a 300 MB string), and DuckDB's
``memory_limit`` covers its buffer manager, not every list or string it
allocates. So a query never runs in the app's process: an :class:`Executor`
keeps a small warm pool of query processes (``_worker``, started with
``subprocess``, never forked from the app's threads) and for each query

* hands one process the request and waits for its answer (the rows as Arrow
  IPC bytes, at most the row limit, and at most :data:`RESULT_CAP_MB`);
* kills it (SIGKILL) and reaps it at the time limit: "stopped after 10 s";
* kills it when its resident memory passes the limit (read from
  ``/proc/PID/statm`` while it runs; the process also caps its own address
  space, so an allocation past the limit fails in DuckDB): "needed more than
  1 GiB of memory"; a query that ran out of temporary disk says so too;
* starts a fresh process in place of a killed one, in the background, so the
  next query finds a warm one.

Every answer is a :class:`QueryResult`: rows, or one line saying why there
are none, and whether (and by which limit) the query was stopped. The pool's
processes are killed and reaped by :meth:`Executor.close`, at interpreter
exit, and end by themselves when the app is killed. Decision
D-EXPLORE-EXECUTOR.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import weakref
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import polars as pl

from convo_analytics.notebooks._params import encode_values

__all__ = [
    "RESULT_CAP_MB",
    "Executor",
    "Limits",
    "QueryResult",
    "StopReason",
    "describe_size",
]

StopReason = Literal["time", "memory", "disk", "crash"]
#: A result bigger than this (as Arrow IPC) is not handed to the page.
RESULT_CAP_MB = 64
#: SQL longer than this is refused before it reaches a query process.
SQL_CAP_BYTES = 1_000_000
_START_SECONDS = 60.0
_POLL_SECONDS = 0.05
_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096
#: Room over the limit the resident-memory watchdog leaves (the address-space cap acts first).
_WATCH_SLACK_MB = 32


def describe_size(mb: int) -> str:
    """``1 GiB`` for 1024, ``512 MiB`` for 512."""
    return f"{mb // 1024:g} GiB" if mb >= 1024 and mb % 1024 == 0 else f"{mb} MiB"


@dataclass(frozen=True, slots=True)
class Limits:
    """What a query may use: memory (MiB, the query process's resident memory as a whole,
    its own ~140 MiB included), DuckDB threads, temporary disk (MiB), and how many query
    processes run at once."""

    memory_mb: int = 1024
    threads: int = 1
    temp_mb: int = 1024
    workers: int = 2


@dataclass(frozen=True, slots=True)
class QueryResult:
    """A query's rows (at most the row limit), or the one-line reason it gave none;
    ``stopped`` says which limit stopped it (None: it was not stopped)."""

    frame: pl.DataFrame | None
    error: str | None = None
    truncated: bool = False
    seconds: float = 0.0
    stopped: StopReason | None = None
    #: The query process's peak resident memory (MiB), when known.
    peak_mib: float | None = None
    #: The query did not run (every process busy, the executor stopping): try again later.
    retry: bool = False


class _Gone(Exception):
    """The query process ended (or closed its channel) before it answered."""


class _Overtime(Exception):
    pass


class _OverMemory(Exception):
    pass


def _child_env(scratch: Path) -> dict[str, str]:
    """A bare environment: nothing of the app's (no secret) reaches a query process."""
    env = {k: v for k, v in os.environ.items() if k in ("PATH", "PYTHONPATH", "LANG", "LC_ALL")}
    env.update(
        HOME=str(scratch), TMPDIR=str(scratch), MALLOC_ARENA_MAX="2", PYTHONDONTWRITEBYTECODE="1"
    )
    return env


def _status_mib(pid: int, field_name: str) -> float | None:
    try:
        text = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    for line in text.splitlines():
        name, _, rest = line.partition(":")
        if name == field_name:
            return int(rest.split()[0]) / 1024
    return None


def _rss_mib(pid: int) -> float | None:
    try:
        fields = Path(f"/proc/{pid}/statm").read_text().split()
    except OSError:
        return None
    return int(fields[1]) * _PAGE / 2**20


class _Process:
    """One query process: its pipes, its scratch folder, and how to stop it."""

    def __init__(self, limits: Limits, hide: dict[str, str], cap_address_space: bool) -> None:
        self.scratch = Path(tempfile.mkdtemp(prefix="convo-query-"))
        (self.scratch / "spill").mkdir()
        config = {
            "parent": os.getpid(),
            "scratch": str(self.scratch),
            "memory_mb": limits.memory_mb,
            "threads": limits.threads,
            "temp_mb": limits.temp_mb,
            "hide": {**hide, str(self.scratch): "<scratch>"},
            "cap_address_space": cap_address_space,
        }
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "convo_analytics.notebooks._worker", json.dumps(config)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            cwd=self.scratch,
            env=_child_env(self.scratch),
            close_fds=True,
        )
        assert self.proc.stdout is not None
        self._fd = self.proc.stdout.fileno()
        os.set_blocking(self._fd, False)
        self._buffer = bytearray()
        self.peak_mib = 0.0
        try:
            ready, _ = self.receive(time.monotonic() + _START_SECONDS)
        except BaseException:
            self.kill()
            raise
        self.base_mib = float(ready.get("rss_mib", 0.0))

    @property
    def pid(self) -> int:
        return self.proc.pid

    def send(self, request: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        try:
            self.proc.stdin.write(json.dumps(request).encode() + b"\n")
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError) as exc:
            raise _Gone from exc

    def receive(
        self, deadline: float, watch_mib: float | None = None
    ) -> tuple[dict[str, Any], bytes]:
        """The next answer (its header and payload); _Overtime past ``deadline``,
        _OverMemory when the process's resident memory passes ``watch_mib``."""
        while True:
            end = self._buffer.find(b"\n")
            if end >= 0:
                header = json.loads(bytes(self._buffer[:end]))
                need = int(header.get("bytes", 0))
                if len(self._buffer) - end - 1 >= need:
                    payload = bytes(self._buffer[end + 1 : end + 1 + need])
                    del self._buffer[: end + 1 + need]
                    return header, payload
            left = deadline - time.monotonic()
            if left <= 0:
                raise _Overtime
            readable, _, _ = select.select([self._fd], [], [], min(left, _POLL_SECONDS))
            if watch_mib is not None:
                rss = _rss_mib(self.pid)
                if rss is not None:
                    self.peak_mib = max(self.peak_mib, rss)
                    if rss > watch_mib:
                        raise _OverMemory
            if readable:
                try:
                    chunk = os.read(self._fd, 1 << 20)
                except BlockingIOError:
                    continue
                if not chunk:
                    raise _Gone
                self._buffer += chunk

    def peak(self) -> float | None:
        """The process's peak resident memory so far (VmHWM), in MiB."""
        hwm = _status_mib(self.pid, "VmHWM")
        return max(hwm or 0.0, self.peak_mib) or None

    def alive(self) -> bool:
        return self.proc.poll() is None

    def stop(self) -> None:
        """SIGKILL, reap, remove the scratch folder; the pipes are left to the thread that
        reads them."""
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                self.proc.send_signal(signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=10)
        shutil.rmtree(self.scratch, ignore_errors=True)

    def kill(self) -> None:
        """SIGKILL, reap, close the pipes, remove the scratch folder (safe to call twice)."""
        self.stop()
        for stream in (self.proc.stdin, self.proc.stdout):
            with contextlib.suppress(OSError):
                if stream is not None:
                    stream.close()


@dataclass
class _Pool:
    idle: list[_Process] = field(default_factory=list)
    busy: set[_Process] = field(default_factory=set)
    starting: int = 0
    start_error: str | None = None
    closed: bool = False
    started: int = 0
    killed: int = 0


class Executor:
    """A warm pool of query processes with the same limits; thread-safe (each Streamlit
    session runs its script on a thread of its own)."""

    def __init__(
        self,
        limits: Limits | None = None,
        *,
        hide: dict[str, str] | None = None,
        cap_address_space: bool = True,
    ) -> None:
        """``hide``: text no message may show (a folder), with what it shows instead;
        ``cap_address_space`` off leaves only the resident-memory watchdog (for its test)."""
        self.limits = limits or Limits()
        self._cap = cap_address_space
        #: Text a message must not show, with what it shows instead (the app's folder).
        self._hide = {os.getcwd(): "."} | dict(hide or {})
        self._pool = _Pool()
        self._changed = threading.Condition()
        for _ in range(max(1, self.limits.workers)):
            self._start_one()
        #: Run by close(), when the executor is collected, and at interpreter exit.
        self._finalizer = weakref.finalize(self, Executor._close_pool, self._pool, self._changed)

    # -- the pool -------------------------------------------------------------------------

    def _start_one(self) -> None:
        """Start a query process in the background (the caller holds no lock)."""
        with self._changed:
            if self._pool.closed:
                return
            self._pool.starting += 1
        threading.Thread(target=self._spawn, name="query-process-start", daemon=True).start()

    def _spawn(self) -> None:
        try:
            process: _Process | None = _Process(self.limits, self._hide, self._cap)
            error = None
        except Exception as exc:  # reported to the query that waits for a process
            process, error = None, f"a query process could not start: {type(exc).__name__}"
        with self._changed:
            self._pool.starting -= 1
            if process is not None and self._pool.closed:
                process.kill()
            elif process is not None:
                self._pool.idle.append(process)
                self._pool.started += 1
                self._pool.start_error = None
            else:
                self._pool.start_error = error
            self._changed.notify_all()

    def _acquire(self, wait: float) -> _Process | str:
        """An idle process, or why there is none within ``wait`` seconds."""
        deadline = time.monotonic() + wait
        pool = self._pool
        with self._changed:
            while True:
                if pool.closed:
                    return "Explore is stopping; reload the page"
                while pool.idle:
                    process = pool.idle.pop()
                    if process.alive():
                        pool.busy.add(process)
                        return process
                    process.kill()
                    pool.killed += 1
                if pool.start_error is not None and pool.starting == 0:
                    error, pool.start_error = pool.start_error, None  # the next query retries
                    return error
                running = len(pool.busy) + pool.starting
                if running < max(1, self.limits.workers):
                    pool.starting += 1
                    threading.Thread(target=self._spawn, daemon=True).start()
                    continue
                left = deadline - time.monotonic()
                if left <= 0:
                    return (
                        f"Explore is busy ({len(pool.busy)} queries running); "
                        "run the cell again in a moment"
                    )
                self._changed.wait(min(left, 1.0))

    def _release(self, process: _Process, keep: bool) -> None:
        replace = False
        with self._changed:
            self._pool.busy.discard(process)
            if keep and process.alive() and not self._pool.closed:
                self._pool.idle.append(process)
            else:
                self._pool.killed += 1
                replace = not self._pool.closed
            self._changed.notify_all()
        if not keep or not process.alive():
            process.kill()
        if replace:
            self._start_one()

    # -- queries --------------------------------------------------------------------------

    def run(
        self,
        snapshot: Path,
        sql: str,
        *,
        timeout: float = 10.0,
        row_limit: int = 10_000,
        workspaces: Sequence[str] | None = None,
        keyed_only: bool = False,
        params: Mapping[str, Any] | None = None,
        cells: Sequence[str] = (),
        reads: Sequence[str] = (),
    ) -> QueryResult:
        """Run one read-only query over the snapshot's views (of ``workspaces``' rows only,
        if given; tables without ``workspace_id`` left out with ``keyed_only``), stopped
        after ``timeout`` seconds or past the memory limit, at most ``row_limit`` rows.
        ``params``: the notebook's parameter values, converted by type (``_params.convert``);
        those the query names (``$name``) are bound as prepared-statement parameters.
        ``cells``: the names of the notebook's cells above this one, ``reads``: those the
        statement reads as CTEs (``_cells.compose``), for the statement check."""
        if len(sql.encode("utf-8", "replace")) > SQL_CAP_BYTES:
            return QueryResult(None, f"a cell holds at most {SQL_CAP_BYTES:,} bytes of SQL")
        got = self._acquire(wait=timeout + _START_SECONDS)
        if isinstance(got, str):
            return QueryResult(None, got, retry=True)
        process = got
        request = {
            "snapshot": str(snapshot),
            "sql": sql,
            "row_limit": row_limit,
            "workspaces": list(workspaces) if workspaces is not None else None,
            "keyed_only": keyed_only,
            "max_bytes": RESULT_CAP_MB * 2**20,
            "params": encode_values(params or {}),
            "cells": [str(name) for name in cells],
            "reads": [str(name) for name in reads],
        }
        keep = False
        try:
            result = self._ask(process, request, timeout)
            keep = result.stopped is None
        finally:
            self._release(process, keep)
        if result.stopped == "crash" and self._pool.closed:  # killed by close(), not a crash
            return QueryResult(None, "Explore is stopping; reload the page", retry=True)
        return result

    def _ask(self, process: _Process, request: dict[str, Any], timeout: float) -> QueryResult:
        limits = self.limits
        started = time.perf_counter()
        watch = max(limits.memory_mb, process.base_mib + 32) + _WATCH_SLACK_MB
        memory = f"needed more than {describe_size(limits.memory_mb)} of memory"

        def spent() -> float:
            return time.perf_counter() - started

        try:
            process.send(request)
            header, payload = process.receive(time.monotonic() + timeout, watch)
        except _Overtime:
            peak = process.peak()
            process.kill()
            return QueryResult(
                None,
                f"stopped after {timeout:g} s (the time limit of a query); narrow it down",
                seconds=spent(),
                stopped="time",
                peak_mib=peak,
            )
        except _OverMemory:
            peak = process.peak()
            process.kill()
            return QueryResult(
                None, f"{memory} (the limit of a query); narrow it down", seconds=spent(),
                stopped="memory", peak_mib=peak,
            )  # fmt: skip
        except _Gone:
            peak = process.peak() or process.peak_mib
            process.kill()
            code = process.proc.returncode
            if peak is not None and peak >= 0.8 * limits.memory_mb:
                return QueryResult(
                    None, f"{memory} (the limit of a query); narrow it down", seconds=spent(),
                    stopped="memory", peak_mib=peak,
                )  # fmt: skip
            how = f"signal {-code}" if code is not None and code < 0 else f"status {code}"
            return QueryResult(
                None, f"the query's process ended unexpectedly ({how}); narrow the query down",
                seconds=spent(), stopped="crash", peak_mib=peak,
            )  # fmt: skip
        seconds = spent()
        peak = process.peak()
        if "error" in header:
            kind = header.get("kind")
            if kind == "memory":
                return QueryResult(
                    None, f"{memory} (the limit of a query); narrow it down", seconds=seconds,
                    stopped="memory", peak_mib=peak,
                )  # fmt: skip
            if kind == "disk":
                disk = describe_size(limits.temp_mb)
                return QueryResult(
                    None,
                    f"needed more than {disk} of temporary disk (the limit of a query); "
                    "narrow it down",
                    seconds=seconds,
                    stopped="disk",
                    peak_mib=peak,
                )
            return QueryResult(None, str(header["error"]), seconds=seconds, peak_mib=peak)
        frame = pl.read_ipc_stream(payload)
        return QueryResult(frame, None, bool(header.get("truncated")), seconds, None, peak)

    # -- state and shutdown ----------------------------------------------------------------

    def pids(self) -> list[int]:
        """The query processes' ids (idle and busy)."""
        with self._changed:
            return sorted(p.pid for p in (*self._pool.idle, *self._pool.busy))

    def wait_ready(self, timeout: float = _START_SECONDS) -> bool:
        """Whether every process of the pool is up (False after ``timeout`` seconds)."""
        deadline = time.monotonic() + timeout
        with self._changed:
            while len(self._pool.idle) + len(self._pool.busy) < max(1, self.limits.workers):
                left = deadline - time.monotonic()
                if left <= 0 or self._pool.closed:
                    return False
                self._changed.wait(min(left, 1.0))
            return True

    @property
    def counts(self) -> dict[str, int]:
        """Processes started and killed so far."""
        with self._changed:
            return {"started": self._pool.started, "killed": self._pool.killed}

    def close(self) -> None:
        """Kill and reap every query process (queries running end as "stopping")."""
        self._finalizer()

    @staticmethod
    def _close_pool(pool: _Pool, changed: threading.Condition) -> None:
        with changed:
            pool.closed = True
            idle, busy = list(pool.idle), list(pool.busy)
            pool.idle.clear()
            changed.notify_all()
        for process in idle:
            process.kill()
        for process in busy:  # its query's thread closes the pipes when it sees the end
            process.stop()

    def __enter__(self) -> Executor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
