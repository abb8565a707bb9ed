"""What a stream's reader needs of the extraction it belongs to, as a protocol.

The run (``_runner.Extraction``) makes the stream readers (``_list_stream``, ``_summary``),
and they read the run's state back: its connections, its commit loader, the workspace's
identity. Typed against this protocol rather than the class, the readers never import the
runner that imports them.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    import duckdb

    from convo_analytics.extract._progress import ProgressSink
    from convo_analytics.extract._scrub import LoadScrubber
    from convo_analytics.extract._streams import ExtractConfig
    from convo_analytics.extract._suppress import LoadSuppression
    from convo_analytics.extract._workspace import WorkspaceIdentity

__all__ = ["CommitLoader", "ExtractionState"]


class CommitLoader(Protocol):
    """Commits batches one at a time beside the fetching (``_runner._Loader``)."""

    async def submit(self, commit: Callable[..., None], *args: Any) -> None: ...

    async def drain(self) -> None: ...

    def wait(self) -> None: ...


class ExtractionState(Protocol):
    """The run a stream belongs to, as the stream readers see it."""

    config: ExtractConfig
    progress: ProgressSink
    run_id: str
    started: datetime
    prefix: str
    con: duckdb.DuckDBPyConnection | None
    reader: duckdb.DuckDBPyConnection | None
    identity: WorkspaceIdentity
    scrubber: LoadScrubber
    suppression: LoadSuppression

    @property
    def loader(self) -> CommitLoader: ...

    @property
    def workspace_id(self) -> str: ...

    def raw_tables(self, stream: str) -> tuple[str, str | None]: ...

    def previous_shape(self, stream: str) -> dict[str, Any] | None: ...
