"""Data files no snapshot references: removed by the publish itself (D-LAKE-ORPHANS).

A commit writes its Parquet files before the catalog accepts it. When it loses to
another writer the files of that attempt are removed at once (``discard``); when the
process is killed between writing and committing they stay on storage, referenced by
no snapshot: orphans. Spark's ``remove_orphan_files`` is what Iceberg offers; we
do not ask an operator for a Spark cluster, so each publish removes the orphans of the
partitions it publishes:

* **Its own host's dead writers at once.** Before writing, a commit leaves a marker
  ``<table>/metadata/convo-inflight/<commit uuid>.json`` (host, pid, start); the files
  it writes carry the commit uuid in their names (pyiceberg's ``write_uuid``). The
  marker goes when the commit lands or its files were discarded. A marker whose writer
  was this host's and is no longer running names a killed commit: its files that no
  snapshot references go, and the marker with them.
* **Anything else only past a safety age** (``lake.orphan_min_age_minutes``): a file
  under the workspace's partitions that no retained snapshot references and is older
  than that. A concurrent worker's files in flight are younger, and a reader's snapshot
  is retained (the publish never expires a pinned one), so neither is touched.

Only data files are removed here; manifests and manifest lists of lost commits are
small, and the metadata log is bounded by ``write.metadata.previous-versions-max``.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import time
from collections.abc import Iterable
from typing import TYPE_CHECKING
from urllib.parse import quote_plus

if TYPE_CHECKING:
    from pyiceberg.manifest import DataFile
    from pyiceberg.table import Table as IcebergTable

__all__ = ["InFlight", "discard", "remove_orphans"]

_MARKERS = "metadata/convo-inflight"


def _fs(table: IcebergTable) -> tuple[object, str]:
    io = table.io
    scheme, netloc, base = io.parse_location(table.location())  # type: ignore[attr-defined]
    return io.fs_by_scheme(scheme, netloc), str(base).rstrip("/")  # type: ignore[attr-defined]


def _path(table: IcebergTable, location: str) -> str:
    return str(table.io.parse_location(location)[2])  # type: ignore[attr-defined]


class InFlight:
    """The marker of one commit's files while they are written and committed."""

    def __init__(self, table: IcebergTable, commit_uuid: str, workspaces: list[str]) -> None:
        self.fs, base = _fs(table)
        self.path = f"{base}/{_MARKERS}/{commit_uuid}.json"
        self.workspaces = workspaces

    def __enter__(self) -> InFlight:
        body = {"host": socket.gethostname(), "pid": os.getpid(), "started": time.time(),
                "workspaces": self.workspaces}  # fmt: skip
        fs = self.fs
        fs.create_dir(self.path.rsplit("/", 1)[0], recursive=True)  # type: ignore[attr-defined]
        with fs.open_output_stream(self.path) as out:  # type: ignore[attr-defined]
            out.write(json.dumps(body).encode())
        return self

    def __exit__(self, *exc: object) -> None:
        with contextlib.suppress(FileNotFoundError, OSError):
            self.fs.delete_file(self.path)  # type: ignore[attr-defined]


def discard(table: IcebergTable, files: Iterable[DataFile]) -> int:
    """Remove the files of a commit that did not land; how many."""
    fs, _ = _fs(table)
    removed = 0
    for data_file in files:
        try:
            fs.delete_file(_path(table, data_file.file_path))  # type: ignore[attr-defined]
            removed += 1
        except (FileNotFoundError, OSError):
            continue
    return removed


def _referenced(table: IcebergTable) -> set[str]:
    """Every data file a retained snapshot references (normalised paths)."""
    seen: set[str] = set()
    files: set[str] = set()
    for snapshot in table.metadata.snapshots:
        for manifest in snapshot.manifests(table.io):
            if manifest.manifest_path in seen:
                continue
            seen.add(manifest.manifest_path)
            for entry in manifest.fetch_manifest_entry(table.io, discard_deleted=False):
                files.add(_path(table, entry.data_file.file_path))
    return files


def _dead_commits(table: IcebergTable, min_age_seconds: float) -> dict[str, tuple[str, list[str]]]:
    """Markers of commits whose writer is gone: commit uuid -> (marker path, the
    workspaces it wrote)."""
    from pyarrow.fs import FileSelector, FileType

    fs, base = _fs(table)
    infos = fs.get_file_info(  # type: ignore[attr-defined]
        FileSelector(f"{base}/{_MARKERS}", recursive=False, allow_not_found=True)
    )
    host, dead = socket.gethostname(), {}
    for info in infos:
        if info.type != FileType.File or not info.path.endswith(".json"):
            continue
        try:
            with fs.open_input_stream(info.path) as f:  # type: ignore[attr-defined]
                marker = json.loads(f.read())
        except (OSError, ValueError):
            continue
        started = float(marker.get("started", 0))
        gone = marker.get("host") == host and not _running(int(marker.get("pid", 0)))
        if gone or time.time() - started > min_age_seconds:
            commit = info.path.rsplit("/", 1)[-1].removesuffix(".json")
            dead[commit] = (info.path, [str(w) for w in marker.get("workspaces", [])])
    return dead


def _running(pid: int) -> bool:
    if pid <= 0:
        return False
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def remove_orphans(table: IcebergTable, workspaces: Iterable[str], min_age_seconds: float) -> int:
    """Remove the data files under the workspaces' partitions that no retained snapshot
    references: a dead commit's of this host at once, others past ``min_age_seconds``
    (see the module); how many."""
    from pyarrow.fs import FileSelector, FileType

    fs, base = _fs(table)
    dead = _dead_commits(table, min_age_seconds)
    referenced: set[str] | None = None
    removed = 0
    now = time.time()
    every = set(workspaces) | {w for _, wrote in dead.values() for w in wrote}
    for workspace in sorted(every):
        folder = f"{base}/data/workspace_id={quote_plus(workspace, safe='')}"
        infos = fs.get_file_info(  # type: ignore[attr-defined]
            FileSelector(folder, recursive=True, allow_not_found=True)
        )
        for info in infos:
            if info.type != FileType.File or not info.path.endswith(".parquet"):
                continue
            name = info.path.rsplit("/", 1)[-1]
            killed = any(commit in name for commit in dead)
            mtime = info.mtime.timestamp() if info.mtime is not None else now
            if not killed and now - mtime <= min_age_seconds:
                continue
            if referenced is None:
                referenced = _referenced(table)
            if info.path in referenced:
                continue
            try:
                fs.delete_file(info.path)  # type: ignore[attr-defined]
                removed += 1
            except (FileNotFoundError, OSError):
                continue
    for marker, _ in dead.values():
        try:
            fs.delete_file(marker)  # type: ignore[attr-defined]
        except (FileNotFoundError, OSError):
            continue
    return removed
