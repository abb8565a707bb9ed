"""Events of people an erasure removed, dropped before they are stored (issue 30,
D-ERASURE).

A verified event whose ``conversationId``, ``externalUserId``, ``email`` or ``leadId``
(anywhere in it) is on its workspace's suppression list (``erasure_suppressions``,
salted subject hashes) is not stored: neither the event nor its findings. It is
counted as ``suppressed``, the fourth way a line can end (loaded, duplicate,
quarantined, suppressed), and never quarantined (a quarantined line keeps its text).
A re-ingested archive, or a replay, so cannot bring an erased person back. Nothing is
parsed when nobody in the chunk's workspaces was erased.
"""

from __future__ import annotations

from typing import Any

import duckdb
import orjson
import pyarrow as pa

from convo_analytics.errors import UserError
from convo_analytics.privacy import PrivacyConfig, SubjectHasher, names_suppressed

__all__ = ["EventSuppression"]


class EventSuppression:
    """One ingest run's check of the suppression lists of the workspaces it stores."""

    def __init__(self, privacy: PrivacyConfig | None) -> None:
        self.privacy = privacy
        self._lists: dict[str, dict[str, frozenset[str]]] = {}
        self._hashers: dict[str, SubjectHasher] = {}

    def _of(self, con: duckdb.DuckDBPyConnection, workspace: str) -> dict[str, frozenset[str]]:
        if workspace not in self._lists:
            from convo_analytics.warehouse._erasure_tables import suppressed

            found = suppressed(con, workspace)
            if found and self.privacy is None:
                raise UserError(
                    f"workspace {workspace} has erased people to keep out, but this ingest "
                    "has no [privacy] settings to recognise them by; run it with them"
                )
            self._lists[workspace] = found
        return self._lists[workspace]

    def filter(
        self, con: duckdb.DuckDBPyConnection, staged: pa.Table, found: list[Any]
    ) -> tuple[pa.Table, list[Any], int]:
        """``staged`` without the events of suppressed people, ``found`` (findings:
        workspace, event id, kind, hash) without theirs, and how many were dropped."""
        if staged.num_rows == 0:
            return staged, found, 0
        workspaces = staged.column("workspace_id").to_pylist()
        if not any(self._of(con, w) for w in set(workspaces) if w is not None):
            return staged, found, 0
        keep: list[bool] = []
        dropped_ids: set[tuple[str, str]] = set()
        for workspace, body in zip(workspaces, staged.column("body").to_pylist(), strict=True):
            lists = self._of(con, workspace) if workspace is not None else {}
            if not lists:
                keep.append(True)
                continue
            try:
                event = orjson.loads(body)
            except orjson.JSONDecodeError:
                keep.append(True)  # the load quarantines it, with its reason
                continue
            hasher = self._hasher(workspace)
            gone = names_suppressed(event, hasher, lists, None)
            keep.append(not gone)
            if gone and isinstance(event, dict):
                dropped_ids.add((workspace, str(event.get("id") or "")))
        dropped = keep.count(False)
        if not dropped:
            return staged, found, 0
        kept_found = [f for f in found if (f[0], f[1]) not in dropped_ids]
        return staged.filter(pa.array(keep)), kept_found, dropped

    def _hasher(self, workspace: str) -> SubjectHasher:
        if workspace not in self._hashers:
            assert self.privacy is not None
            self._hashers[workspace] = SubjectHasher(self.privacy, workspace)
        return self._hashers[workspace]
