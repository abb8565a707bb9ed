"""Archive files as blocks of complete lines, without a Python object per line.

A block is the file's bytes and the offsets of its lines: splitting 2,000,000
lines into bytes objects cost about a second, and the ingest reads each line
through a memoryview of the block instead (orjson parses memoryviews).

Offsets are positions in the file's *stream*: its bytes for a plain file, the
decompressed bytes for a gzip file. A reader may start at a stream offset (an
incremental ingest resumes where the last one stopped, decision
D-INCREMENTAL-INGEST); a gzip file is then decompressed from its start and the
bytes before that offset are discarded, since a deflate stream cannot be
entered in the middle. A line longer than the limit is never held whole: it
comes as a :class:`LongLine` (its offset, size and first bytes) while the
reader skips to its end, so that one line cannot exhaust memory.
"""

from __future__ import annotations

import gzip
import hashlib
import os
import time
import zlib
from array import array
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import numpy as np

#: How much a read of the file asks for at a time (uncompressed, for a gzip file).
BLOCK = 1 << 22
#: The default longest line read (bytes, without its newline): webhooks.max_line_bytes.
MAX_LINE = 8 << 20
#: Lines over LARGE_LINE weigh on DuckDB's memory far more than their size (their text is
#: stored apart); a line over HUGE_LINE comes in a block of its own (see _complete).
LARGE_LINE = 8 << 10
HUGE_LINE = 1 << 20
#: Bytes of a line kept for the quarantine's excerpt, and of the stream kept to verify a
#: resume point (the stream's last bytes before it).
EXCERPT = 2000
TAIL = 4096


class Block:
    """Complete lines of a file: line ``i`` is ``data[offsets[i]:offsets[i + 1]]``.

    Each line keeps its newline, except the unterminated last line of a file, which
    comes alone in a block of its own with ``terminated`` false. ``start`` is the stream
    offset of ``data[0]``.
    """

    __slots__ = ("data", "large", "offsets", "start", "terminated")

    def __init__(
        self,
        data: bytes,
        offsets: array[int],
        terminated: bool = True,
        start: int = 0,
        large: int = 0,
    ) -> None:
        self.data = data
        self.offsets = offsets
        self.terminated = terminated
        self.start = start
        #: bytes of its lines over LARGE_LINE (a huge line comes alone: large = its size)
        self.large = large

    def __len__(self) -> int:
        return len(self.offsets) - 1

    @property
    def end(self) -> int:
        return self.start + len(self.data)

    def line(self, i: int) -> tuple[bytes, bytes]:
        """Line ``i`` without its newline, and the newline (empty when it had none)."""
        raw = self.data[self.offsets[i] : self.offsets[i + 1]]
        if self.terminated:
            return raw[:-1], b"\n"
        return raw, b""

    def lines(self) -> list[bytes]:
        return [self.line(i)[0] for i in range(len(self))]


@dataclass(slots=True)
class LongLine:
    """A line over the limit: where it starts, its size (without the newline), its first
    bytes, and the last bytes of the stream it ends (for the resume point's check)."""

    offset: int
    size: int
    head: bytes
    terminated: bool = True
    tail: bytes = b""

    @property
    def end(self) -> int:
        return self.offset + self.size + (1 if self.terminated else 0)


def _line_starts(data: bytes) -> array[int]:
    """Offsets of the lines of ``data`` (which ends with a newline), and its length."""
    offsets = array("q", [0])
    find, add = data.find, offsets.append
    at = find(b"\n")
    while at >= 0:
        add(at + 1)
        at = find(b"\n", at + 1)
    return offsets


def is_gzip(path: Path) -> bool:
    """By the magic; a .gz cut down to the magic's first byte is a (damaged) gzip too."""
    with path.open("rb") as probe:
        head = probe.read(2)
    return head == b"\x1f\x8b" or (head == b"\x1f" and path.name.endswith(".gz"))


class ArchiveReader:
    """``for item in ArchiveReader(path).items()``: Blocks and LongLines in file order.

    After the items, ``problem`` says what is wrong with a damaged gzip stream (None
    when the file ended cleanly; the line it broke off is dropped), ``position`` is
    the stream offset after the last line given, ``raw_position`` how far the file
    itself was read, and ``held_back`` the size of an unterminated last line left for a
    later run (``hold_unterminated``: the file may still be being written).
    """

    def __init__(
        self,
        path: Path,
        *,
        start: int = 0,
        max_line: int = MAX_LINE,
        settle_seconds: float = 0.0,
        skip_newline: bool = False,
    ) -> None:
        self.path = path
        self.start = start
        #: The line before ``start`` was read without its newline: a newline written after
        #: it since ends that line, it is not an empty line of its own.
        self.skip_newline = skip_newline
        self.max_line = max_line
        self.gzipped = is_gzip(path)
        self.raw: IO[bytes] = path.open("rb")
        # A plain file changed within settle_seconds may still be being written to: its
        # unterminated last line waits (D-INCREMENTAL-INGEST). A gzip stream is whole.
        modified = os.fstat(self.raw.fileno()).st_mtime
        self.hold_unterminated = not self.gzipped and time.time() - modified < settle_seconds
        self.stream: IO[bytes] = (
            gzip.GzipFile(fileobj=self.raw) if self.gzipped else self.raw  # type: ignore[assignment]
        )
        self.position = start
        self.raw_position = 0
        self.problem: str | None = None
        self.held_back = 0
        self._prefix: tuple[str, str] | None = None
        #: The stream's last TAIL bytes before ``start`` (known once :meth:`prefix` ran).
        self.prefix_tail = b""

    def close(self) -> None:
        if self.stream is not self.raw:
            self.stream.close()
        self.raw.close()

    def __enter__(self) -> ArchiveReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def prefix(self, head_bytes: int) -> tuple[str, str] | None:
        """SHA-256 of the stream's first ``head_bytes`` bytes and of its last TAIL bytes before
        ``start``: what a resume point is checked against (None when the stream is shorter,
        or, for gzip, when the head runs past the start). Reading starts at ``start`` after."""
        if self._prefix is not None:
            return self._prefix
        head, tail = hashlib.sha256(), b""
        try:
            if not self.gzipped:
                head.update(os.pread(self.raw.fileno(), head_bytes, 0))
                low = max(0, self.start - TAIL)
                tail = os.pread(self.raw.fileno(), self.start - low, low)
                self.raw.seek(self.start)
            elif head_bytes > self.start:
                return None
            else:
                left, seen = self.start, 0
                while left:
                    chunk = self.stream.read(min(left, BLOCK))
                    if not chunk:
                        return None
                    if seen < head_bytes:
                        head.update(chunk[: head_bytes - seen])
                    seen += len(chunk)
                    left -= len(chunk)
                    tail = chunk[-TAIL:] if len(chunk) >= TAIL else (tail + chunk)[-TAIL:]
        except (EOFError, gzip.BadGzipFile, zlib.error, OSError):
            return None
        if len(tail) != min(self.start, TAIL):
            return None
        self.prefix_tail = tail
        self._prefix = (head.hexdigest(), hashlib.sha256(tail).hexdigest())
        return self._prefix

    def items(self) -> Iterator[Block | LongLine]:
        """The lines from ``start`` on (call :meth:`prefix` first when ``start`` is not 0)."""
        if self.start and self._prefix is None and self.prefix(0) is None:
            self.problem = "the file is shorter than where the last read ended"
            return
        read = self.stream.read1 if isinstance(self.stream, gzip.GzipFile) else self.stream.read
        pending, pending_start = b"", self.start
        long: LongLine | None = None
        try:
            while block := read(BLOCK):
                if self.skip_newline:
                    self.skip_newline = False
                    if block.startswith(b"\n"):
                        block = block[1:]
                        pending_start += 1
                        self.position = pending_start
                        self.prefix_tail = (self.prefix_tail + b"\n")[-TAIL:]
                        if not block:
                            continue
                if long is not None:  # skipping the rest of a line over the limit
                    newline = block.find(b"\n")
                    if newline < 0:
                        long.size += len(block)
                        long.tail = (long.tail + block)[-TAIL:]
                        continue
                    long.size += newline
                    long.tail = (long.tail + block[: newline + 1])[-TAIL:]
                    pending_start = long.end
                    self.position = long.end
                    yield long
                    long = None
                    block = block[newline + 1 :]
                    if not block:
                        continue
                data = pending + block if pending else block
                cut = data.rfind(b"\n") + 1
                pending = data[cut:]
                if cut:
                    complete = data[:cut] if cut < len(data) else data
                    yield from self._complete(complete, pending_start)
                    pending_start += cut
                if len(pending) > self.max_line:
                    long = LongLine(pending_start, len(pending), pending[:EXCERPT], True, b"")
                    long.tail = pending[-TAIL:]
                    pending = b""
        except (EOFError, gzip.BadGzipFile, zlib.error) as exc:
            self.problem = f"the gzip stream ends early or is damaged ({exc})"
            self.raw_position = self.raw.tell()
            return
        self.raw_position = self.raw.tell()
        if long is not None:
            long.terminated = False
            if self.hold_unterminated:
                self.held_back = long.size
            else:
                self.position = long.end
                yield long
        elif pending:
            if self.hold_unterminated:
                self.held_back = len(pending)
            else:
                self.position = pending_start + len(pending)
                large = len(pending) if len(pending) > LARGE_LINE else 0
                yield Block(pending, array("q", [0, len(pending)]), False, pending_start, large)

    def _complete(self, data: bytes, start: int) -> Iterator[Block | LongLine]:
        """Complete lines as blocks; a line over the limit as a LongLine, and a huge line
        (over HUGE_LINE) as a block of its own, so that the ingest can give it a chunk of
        its own (DuckDB's memory for a chunk grows with its long strings, D-LINE-LIMIT)."""
        offsets = _line_starts(data)
        sizes = np.diff(np.frombuffer(offsets, dtype=np.int64)) - 1
        apart = min(HUGE_LINE, self.max_line)
        if len(data) <= apart + 1 or not (sizes > apart).any():
            self.position = start + len(data)
            yield Block(data, offsets, True, start, int(sizes[sizes > LARGE_LINE].sum()))
            return
        run = 0
        for i in np.flatnonzero(sizes > apart).tolist():
            if run < i:
                yield self._part(data, offsets, run, i, start)
            line = data[offsets[i] : offsets[i + 1]]
            self.position = start + offsets[i + 1]
            if sizes[i] > self.max_line:
                yield LongLine(
                    start + offsets[i], int(sizes[i]), line[:EXCERPT], True, line[-TAIL:]
                )
            else:
                large = len(line) if len(line) > LARGE_LINE else 0
                yield Block(line, array("q", [0, len(line)]), True, start + offsets[i], large)
            run = i + 1
        if run < len(offsets) - 1:
            yield self._part(data, offsets, run, len(offsets) - 1, start)

    def _part(self, data: bytes, offsets: array[int], first: int, end: int, start: int) -> Block:
        """Lines ``first`` to ``end`` (excluded) of ``data`` as a block of their own."""
        part = data[offsets[first] : offsets[end]]
        self.position = start + offsets[end]
        starts = _line_starts(part)
        sizes = np.diff(np.frombuffer(starts, dtype=np.int64)) - 1
        return Block(
            part, starts, True, start + offsets[first], int(sizes[sizes > LARGE_LINE].sum())
        )


def read_blocks(path: Path) -> Iterator[tuple[Block | None, str | None]]:
    """The file's lines a block at a time, then how it ended (the whole file, no limit).

    The last item has no block and says how the file ended: None when it ended
    cleanly, else what is wrong with the gzip stream. An unterminated last line comes,
    with ``UNTERMINATED``, just before.
    """
    with ArchiveReader(path, max_line=1 << 62) as reader:
        for item in reader.items():
            assert isinstance(item, Block)
            yield item, (None if item.terminated else UNTERMINATED)
        yield None, reader.problem


#: read_blocks says this with a file's unterminated last line.
UNTERMINATED = "unterminated"
