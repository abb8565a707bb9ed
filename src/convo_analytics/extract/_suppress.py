"""Records of people an erasure removed, dropped before they reach a batch (issue 30,
D-ERASURE).

``convo erase`` adds the person to ``erasure_suppressions``: their identifier and the
ids of their conversations and leads, each as a salted subject hash. A run reads the
workspace's list once; each record of a list page is then checked: its own id (a
conversation's, a lead's), and any ``externalUserId``, ``email``, ``conversationId``
or ``leadId`` in it, hashed as the erasure hashed them. A record that names an erased
person is left out of the page (and so of its details, the raw tables, the typed
tables and the findings) and counted as ``suppressed``; the rest of the page loads as
usual. An empty list (nobody erased) costs nothing.
"""

from __future__ import annotations

from typing import Any

import duckdb
import orjson

from convo_analytics.errors import UserError
from convo_analytics.extract._scrub import replaced_at
from convo_analytics.privacy import PrivacyConfig, SubjectHasher, SubjectKind, names_suppressed
from convo_analytics.warehouse._erasure_tables import suppressed

__all__ = ["LoadSuppression"]

#: What a stream's own record id names.
_OWN: dict[str, SubjectKind] = {"conversations": "conversation", "leads": "lead"}


class LoadSuppression:
    """One run's check of the suppression list, per workspace."""

    def __init__(self, privacy: PrivacyConfig | None) -> None:
        self.privacy = privacy
        self._workspace: str | None = None
        self._lists: dict[str, frozenset[str]] = {}
        self._hasher: SubjectHasher | None = None

    def _for(self, con: duckdb.DuckDBPyConnection, workspace: str) -> bool:
        """Load the workspace's list (once); whether anybody is on it."""
        if self._workspace != workspace:
            self._workspace = workspace
            self._lists = suppressed(con, workspace)
            self._hasher = None
            if self._lists:
                if self.privacy is None:
                    raise UserError(
                        f"workspace {workspace} has erased people to keep out, but this run "
                        "has no [privacy] settings to recognise them by; run it with them"
                    )
                self._hasher = SubjectHasher(self.privacy, workspace)
        return bool(self._lists)

    def page(
        self,
        con: duckdb.DuckDBPyConnection,
        stream: str,
        workspace: str,
        body: bytes,
        data: Any,
        envelope: str | None,
        records: list[Any],
    ) -> tuple[bytes, Any, list[Any], int]:
        """The page without the records of suppressed people: (body, data, records,
        how many were dropped); the page as it came when none was."""
        if not records or not self._for(con, workspace):
            return body, data, records, 0
        assert self._hasher is not None
        own = _OWN.get(stream)
        kept = [r for r in records if not names_suppressed(r, self._hasher, self._lists, own)]
        dropped = len(records) - len(kept)
        if not dropped:
            return body, data, records, 0
        data = kept if envelope is None else replaced_at(data, envelope, kept)
        return orjson.dumps(data), data, kept, dropped
