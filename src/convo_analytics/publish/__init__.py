"""Publishing the warehouse for readers: consistent snapshots, swapped in atomically."""

from convo_analytics.publish._snapshot import Snapshot, current_snapshot, publish_snapshot

__all__ = ["Snapshot", "current_snapshot", "publish_snapshot"]
