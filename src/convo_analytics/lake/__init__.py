"""The shared Apache Iceberg lake: the one place that writes Iceberg (and reads it back).

A worker publishes the typed tables and marts of the workspaces it owns with
:func:`publish_lake`, partitioned by workspace and day, one commit per table,
retried when another worker committed first, the lake's record of it last;
readers get the lake as a DuckDB file shaped like the warehouse
(:func:`materialise_lake`, :func:`read_lake`), each workspace's rows as its
last complete publish left them; an erasure takes one person out of it, old
snapshots and files included (:func:`erase_from_lake`).
See docs/warehouse.md ("The lake") and docs/decisions.md (D-LAKE-*).
"""

from convo_analytics.lake._config import LakeConfig, LakeUnavailable, redact_url
from convo_analytics.lake._erase import (
    LakeErasure,
    LakeErasureIncomplete,
    LakePerson,
    erase_from_lake,
    lake_present,
    person_rows,
)
from convo_analytics.lake._publish import (
    LakeCommitFailed,
    LakePublishResult,
    TablePublish,
    publish_lake,
    resolve_workspaces,
)
from convo_analytics.lake._read import copy_notice, lake_state, materialise_lake, read_lake
from convo_analytics.lake._tables import LAKE_TABLES, LakeTable, lake_key, lake_table

__all__ = [
    "LAKE_TABLES",
    "LakeCommitFailed",
    "LakeConfig",
    "LakeErasure",
    "LakeErasureIncomplete",
    "LakePerson",
    "LakePublishResult",
    "LakeTable",
    "LakeUnavailable",
    "TablePublish",
    "copy_notice",
    "erase_from_lake",
    "lake_key",
    "lake_present",
    "lake_state",
    "lake_table",
    "materialise_lake",
    "person_rows",
    "publish_lake",
    "read_lake",
    "redact_url",
    "resolve_workspaces",
]
