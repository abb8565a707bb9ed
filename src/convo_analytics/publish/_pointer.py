"""The ``CURRENT`` pointer's schema: what a publish writes and the only shape a reader accepts.

``CURRENT`` is a small JSON object naming the newest snapshot, its size and
SHA-256, and the older snapshots still kept (newest first), so that a reader
can check a snapshot before it uses it and fall back to the previous good one
when the newest is damaged. A snapshot is named by its id alone: the file name
is ``warehouse-<id>.duckdb`` with a fixed id pattern, so nothing in the pointer
can name a path outside the publish folder (no separators, no ``..``).
"""

from __future__ import annotations

import re
from typing import Annotated, Self

from pydantic import BaseModel, ConfigDict, Field, model_validator

POINTER = "CURRENT"
PREFIX = "warehouse-"
SUFFIX = ".duckdb"
#: A snapshot id: its publish time, e.g. 20261121T021503123456Z (sortable).
SNAPSHOT_ID = r"[0-9]{8}T[0-9]{12}Z"
SNAPSHOT_FILE = re.compile(rf"{re.escape(PREFIX)}{SNAPSHOT_ID}{re.escape(SUFFIX)}")
#: Most older snapshots a pointer lists (publish.keep beyond this keeps files, not entries).
MAX_PREVIOUS = 32
#: A pointer larger than this is not one a publish wrote.
MAX_POINTER_BYTES = 64 * 1024


class SnapshotEntry(BaseModel):
    """One published snapshot as the pointer records it."""

    model_config = ConfigDict(strict=True, frozen=True, extra="ignore")

    file: Annotated[str, Field(max_length=64)]
    snapshotId: Annotated[str, Field(pattern=rf"^{SNAPSHOT_ID}$")]
    publishedAt: Annotated[str, Field(pattern=r"^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:]{8}Z$")]
    size: Annotated[int, Field(gt=0)]
    sha256: Annotated[str, Field(pattern=r"^[0-9a-f]{64}$")]

    @model_validator(mode="after")
    def _file_is_the_ids(self) -> Self:
        if self.file != snapshot_file(self.snapshotId):
            raise ValueError(
                f"file must be {snapshot_file(self.snapshotId)!r}, a plain name in the publish "
                "folder"
            )
        return self


class Pointer(SnapshotEntry):
    """``CURRENT``: the newest snapshot, and the older ones still kept, newest first."""

    previous: Annotated[list[SnapshotEntry], Field(max_length=MAX_PREVIOUS)] = []

    def entries(self) -> list[SnapshotEntry]:
        """Every snapshot named, newest first."""
        newest = SnapshotEntry.model_validate(self.model_dump(exclude={"previous"}))
        return [newest, *self.previous]


def snapshot_file(snapshot_id: str) -> str:
    return f"{PREFIX}{snapshot_id}{SUFFIX}"
