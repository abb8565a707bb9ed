"""Publishing the warehouse for readers: checked snapshots, swapped in atomically."""

from convo_analytics.publish._lake_copy import LAKE_PREFIX, lake_snapshot
from convo_analytics.publish._reader import current_snapshot
from convo_analytics.publish._snapshot import (
    SPACE_LIMIT_ENV,
    PublishFailed,
    free_space,
    publish_snapshot,
    remove_stale_partials,
    space_needed,
)
from convo_analytics.publish._snapshot_value import (
    UNREADABLE,
    Snapshot,
    SnapshotUnreadable,
    connect_snapshot,
)

__all__ = [
    "LAKE_PREFIX",
    "SPACE_LIMIT_ENV",
    "UNREADABLE",
    "PublishFailed",
    "Snapshot",
    "SnapshotUnreadable",
    "connect_snapshot",
    "current_snapshot",
    "free_space",
    "lake_snapshot",
    "publish_snapshot",
    "remove_stale_partials",
    "space_needed",
]
