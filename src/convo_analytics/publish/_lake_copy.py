"""Readers on the lake: a local DuckDB copy of the lake, as a snapshot.

With ``read.source = "lake"`` the one reader (``current_snapshot``) answers
with a DuckDB file under the publish folder, ``lake-<state>.duckdb``, built
from the lake's tables as its complete publishes left them
(``lake.materialise_lake``): the dashboard, ``convo serve`` and anything else
that reads a snapshot work unchanged (decision D-LAKE-READERS). A publish in
progress, or stopped, is not in the copy; the copy says so
(``Snapshot.unfinished``, D-LAKE-VISIBLE). ``<state>`` digests every lake table's
current metadata location, so a commit to any table gives a new name: the
file is built again (under a temporary name, then renamed) and the readers'
caches, keyed by the snapshot id, move on. The newest two copies are kept; a
reader holding an older one open keeps reading it (Linux keeps the file until
it is closed).

When the lake cannot be reached, the newest copy already made is used and the
reader is told so (``Snapshot.passed_over``), as with a damaged snapshot.
"""

from __future__ import annotations

import logging
import threading
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from convo_analytics.lake import LakeConfig
    from convo_analytics.publish._snapshot_value import Snapshot

__all__ = ["LAKE_PREFIX", "lake_snapshot", "lake_source"]

log = logging.getLogger(__name__)

LAKE_PREFIX = "lake-"
_KEEP = 2
_building = threading.Lock()
#: Catalogs opened by this process, one per lake (opening one connects and checks its tables).
_catalogs: dict[LakeConfig, Any] = {}


def lake_source() -> LakeConfig | None:
    """The lake to read when the settings say ``read.source = "lake"`` (from the
    environment and the config file a command would find), else None."""
    from convo_analytics.config import load_settings
    from convo_analytics.errors import UserError
    from convo_analytics.publish._snapshot_value import SnapshotUnreadable

    try:
        settings = load_settings(None, {})
        if settings.get_str("read.source") != "lake":
            return None
        from convo_analytics.lake import LakeConfig

        return LakeConfig.from_settings(settings)
    except UserError as exc:  # a bad setting: every reader says so, as for a bad snapshot
        raise SnapshotUnreadable(f"the settings cannot be used: {exc}") from None


def lake_snapshot(config: LakeConfig, published_dir: Path) -> Snapshot | None:
    """The local copy of the lake as it is now (made when the lake changed), or None when
    the lake has no tables yet. SnapshotUnreadable when the lake cannot be read and no
    copy was made before."""
    from convo_analytics.lake import copy_notice, lake_state, materialise_lake
    from convo_analytics.publish._snapshot_value import Snapshot, SnapshotUnreadable

    try:
        catalog = _catalogs.get(config) or _catalogs.setdefault(config, config.open_catalog())
        if not catalog.list_tables(config.namespace):
            return None
        state = lake_state(config, catalog)
        path = published_dir / f"{LAKE_PREFIX}{state}.duckdb"
        with _building:
            if not path.exists():
                materialise_lake(config, path)
                _prune(published_dir, path)
    except Exception as exc:  # whatever stops the lake being read is the reason shown
        _catalogs.pop(config, None)
        reason = f"the lake at {config.display_uri} cannot be read: {_one_line(exc)}"
        previous = _copies(published_dir)
        if not previous:
            raise SnapshotUnreadable(reason) from None
        log.warning("reading the previous copy of the lake %s: %s", previous[0].name, reason)
        return Snapshot(previous[0], _state_of(previous[0]), _made_at(previous[0]), reason,
                        copy_notice(previous[0]))  # fmt: skip
    return Snapshot(path, state, _made_at(path), unfinished=copy_notice(path))


def _copies(published_dir: Path) -> list[Path]:
    """The lake copies made, newest first."""
    found = [p for p in published_dir.glob(f"{LAKE_PREFIX}*.duckdb") if p.is_file()]
    return sorted(found, key=lambda p: p.stat().st_mtime_ns, reverse=True)


def _prune(published_dir: Path, current: Path) -> None:
    for old in [p for p in _copies(published_dir) if p != current][_KEEP - 1 :]:
        old.unlink(missing_ok=True)
        old.with_name(f"{old.name}.json").unlink(missing_ok=True)  # its notice


def _state_of(path: Path) -> str:
    return path.name.removeprefix(LAKE_PREFIX).removesuffix(".duckdb")


def _made_at(path: Path) -> str:
    made = datetime.fromtimestamp(path.stat().st_mtime, UTC)
    return made.isoformat(timespec="seconds").replace("+00:00", "Z")


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split())[:300] or type(exc).__name__
