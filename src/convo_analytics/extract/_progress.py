"""Showing an extraction's progress: a bar per stream on a terminal, log lines otherwise."""

from __future__ import annotations

import logging
import time
from types import TracebackType
from typing import Protocol

from rich.console import Console
from rich.progress import (
    BarColumn,
    Progress,
    SpinnerColumn,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

log = logging.getLogger("convo.extract")


class ProgressSink(Protocol):
    def start(self, stream: str, total: int | None = None) -> None: ...
    def update(self, stream: str, *, records: int, requests: int) -> None: ...
    def note(self, stream: str, line: str) -> None: ...
    def finish(self, stream: str, summary: str) -> None: ...


class NoProgress:
    def start(self, stream: str, total: int | None = None) -> None:
        pass

    def note(self, stream: str, line: str) -> None:
        pass

    def update(self, stream: str, *, records: int, requests: int) -> None:
        pass

    def finish(self, stream: str, summary: str) -> None:
        pass


class LogProgress:
    """Plain lines for logs and schedulers: at most one per stream every ``every`` seconds."""

    def __init__(self, every: float = 10.0) -> None:
        self.every = every
        self._started: dict[str, float] = {}
        self._last: dict[str, float] = {}

    def start(self, stream: str, total: int | None = None) -> None:
        self._started[stream] = self._last[stream] = time.monotonic()
        log.info("%s: started", stream)

    def update(self, stream: str, *, records: int, requests: int) -> None:
        now = time.monotonic()
        if now - self._last.get(stream, 0.0) >= self.every:
            self._last[stream] = now
            elapsed = max(1e-6, now - self._started.get(stream, now))
            log.info(
                "%s: %d records, %d requests (%.1f req/s)",
                stream,
                records,
                requests,
                requests / elapsed,
            )

    def note(self, stream: str, line: str) -> None:
        """One line worth saying once (the expected duration of a long stream)."""
        log.info("%s", line)

    def finish(self, stream: str, summary: str) -> None:
        log.info("%s: %s", stream, summary)


class BarProgress:
    """Rich progress bars: records, requests, request rate, elapsed and (with a total) ETA."""

    def __init__(self, console: Console) -> None:
        self._progress = Progress(
            SpinnerColumn(),
            TextColumn("[bold]{task.description:<13}"),
            BarColumn(),
            TextColumn("{task.completed:>8.0f} records"),
            TextColumn("{task.fields[requests]:>7} requests"),
            TextColumn("{task.fields[rate]:>6.1f} req/s"),
            TimeElapsedColumn(),
            TimeRemainingColumn(),
            console=console,
            transient=False,
        )
        self._tasks: dict[str, TaskID] = {}
        self._started: dict[str, float] = {}

    def __enter__(self) -> BarProgress:
        self._progress.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._progress.stop()

    def start(self, stream: str, total: int | None = None) -> None:
        self._started[stream] = time.monotonic()
        self._tasks[stream] = self._progress.add_task(stream, total=total, requests=0, rate=0.0)

    def update(self, stream: str, *, records: int, requests: int) -> None:
        elapsed = max(1e-6, time.monotonic() - self._started.get(stream, time.monotonic()))
        self._progress.update(
            self._tasks[stream], completed=records, requests=requests, rate=requests / elapsed
        )

    def note(self, stream: str, line: str) -> None:
        """Printed above the bars."""
        self._progress.console.print(line, markup=False, highlight=False)

    def finish(self, stream: str, summary: str) -> None:
        task = self._tasks.get(stream)
        if task is not None:
            self._progress.update(task, total=self._progress.tasks[task].completed or 1)
        self._progress.console.print(f"  {stream}: {summary}")
