"""Reading a child process's output in tests: wait on what it prints, never on timing.

A test that sends a signal, or a request, as soon as a process has printed
its first line races the rest of its start-up: under load the second line may
come seconds later. :class:`OutputWatcher` reads the stream on a thread, keeps
every line, and lets the test wait (bounded in time) until a pattern shows or
the stream ends, so that each step follows a condition the process announced.
"""

from __future__ import annotations

import re
import socket
import subprocess
import threading
import time
from typing import IO

__all__ = ["OutputWatcher", "free_port"]


class OutputWatcher:
    """Collect a text stream's lines on a thread; wait for patterns with a deadline."""

    def __init__(self, stream: IO[str] | None, name: str = "the process") -> None:
        assert stream is not None, "start the process with stdout=subprocess.PIPE, text=True"
        self._stream = stream
        self._name = name
        self._lines: list[str] = []
        self._ended = False
        self._changed = threading.Condition()
        self._thread = threading.Thread(target=self._read, name=f"watch {name}", daemon=True)
        self._thread.start()

    def _read(self) -> None:
        try:
            for line in self._stream:
                with self._changed:
                    self._lines.append(line)
                    self._changed.notify_all()
        finally:
            with self._changed:
                self._ended = True
                self._changed.notify_all()

    @property
    def text(self) -> str:
        """Everything read so far."""
        with self._changed:
            return "".join(self._lines)

    def wait_for(self, pattern: str, timeout: float = 60) -> re.Match[str]:
        """The first match of ``pattern`` (a regex) in a line; fails when the stream ends
        or ``timeout`` seconds pass first, with what was printed."""
        regex = re.compile(pattern)
        deadline = time.monotonic() + timeout
        seen = 0
        with self._changed:
            while True:
                for line in self._lines[seen:]:
                    if m := regex.search(line):
                        return m
                seen = len(self._lines)
                if self._ended:
                    raise AssertionError(
                        f"{self._name} ended before printing {pattern!r}:\n{''.join(self._lines)}"
                    )
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(
                        f"{self._name} did not print {pattern!r} within {timeout} s:\n"
                        + "".join(self._lines)
                    )
                self._changed.wait(left)

    def wait_end(self, proc: subprocess.Popen[str], timeout: float = 30) -> str:
        """Wait for the process to exit and its stream to end; all it printed."""
        proc.wait(timeout=timeout)
        self._thread.join(timeout=timeout)
        assert not self._thread.is_alive(), f"{self._name}'s output did not end"
        return self.text


def free_port() -> int:
    """A loopback port free now, for a child process told which port to listen on."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
