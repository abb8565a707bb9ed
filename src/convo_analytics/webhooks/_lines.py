"""Archive files as blocks of complete lines, without a Python object per line.

A block is the file's bytes and the offsets of its lines: splitting 2,000,000
lines into bytes objects cost about a second, and the ingest reads each line
through a memoryview of the block instead (orjson parses memoryviews).
"""

from __future__ import annotations

import gzip
import zlib
from array import array
from collections.abc import Iterator
from pathlib import Path

#: How much a read of the file asks for at a time (uncompressed, for a gzip file).
BLOCK = 1 << 22
#: The last item of a file's blocks says this when its last line had no newline.
UNTERMINATED = "unterminated"


class Block:
    """Complete lines of a file: line ``i`` is ``data[offsets[i]:offsets[i + 1]]``.

    Each line keeps its newline, except the unterminated last line of a file, which
    comes alone in a block of its own with ``terminated`` false.
    """

    __slots__ = ("data", "offsets", "terminated")

    def __init__(self, data: bytes, offsets: array[int], terminated: bool = True) -> None:
        self.data = data
        self.offsets = offsets
        self.terminated = terminated

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def line(self, i: int) -> tuple[bytes, bytes]:
        """Line ``i`` without its newline, and the newline (empty when it had none)."""
        raw = self.data[self.offsets[i] : self.offsets[i + 1]]
        if self.terminated:
            return raw[:-1], b"\n"
        return raw, b""

    def lines(self) -> list[bytes]:
        return [self.line(i)[0] for i in range(len(self))]


def _line_starts(data: bytes) -> array[int]:
    """Offsets of the lines of ``data`` (which ends with a newline), and its length."""
    offsets = array("q", [0])
    find, add = data.find, offsets.append
    at = find(b"\n")
    while at >= 0:
        add(at + 1)
        at = find(b"\n", at + 1)
    return offsets


def read_blocks(path: Path) -> Iterator[tuple[Block | None, str | None]]:
    """The file's lines a block at a time, then how it ended.

    The last item has no block and says how the file ended: None when it ended
    cleanly, else what is wrong with the gzip stream (the line it broke off, if any,
    is dropped). An unterminated last line comes, with ``UNTERMINATED``, just before.
    """
    with path.open("rb") as probe:
        head = probe.read(2)
    # by its magic; a .gz cut down to the magic's first byte is a truncated gzip too
    gzipped = head == b"\x1f\x8b" or (head == b"\x1f" and path.name.endswith(".gz"))
    pending = b""
    try:
        with gzip.open(path, "rb") if gzipped else path.open("rb") as stream:
            read = stream.read1 if isinstance(stream, gzip.GzipFile) else stream.read
            while block := read(BLOCK):
                data = pending + block if pending else block
                cut = data.rfind(b"\n") + 1
                pending = data[cut:]
                if cut:
                    complete = data[:cut] if cut < len(data) else data
                    yield Block(complete, _line_starts(complete)), None
    except (EOFError, gzip.BadGzipFile, zlib.error) as exc:
        yield None, f"the gzip stream ends early or is damaged ({exc})"
        return
    if pending:
        yield Block(pending, array("q", [0, len(pending)]), terminated=False), UNTERMINATED
    yield None, None
