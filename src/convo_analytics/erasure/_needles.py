"""What marks a row or a value outside the warehouse as the person's, and how it goes.

The stores an erasure rewrites outside the warehouse (exports, reports, the alert
deliveries, the monitors' explanations) hold rows copied out of it, in their own shapes:
a CSV line, a JSON object, an HTML table row (D-ERASURE, "files").

* A row is the person's (:meth:`Needles.owns`) when one of its values is one of their
  ids or identifier forms (a conversation's, a lead's, an event's id; the identifier as
  given or as scrubbing stored it), or when a value under a key naming a kind of subject
  (``conversation_id``, ``externalUserId``, ``email``, ...) hashes to the workspace's
  suppression list: a re-run after a kill, when the warehouse no longer holds their ids,
  still finds them, and so do rows of anyone erased before. Such a row goes.
* A row that only mentions them (an aggregate's example question they typed, an alert's
  text naming their conversation) stays, the mention replaced by ``[erased]``
  (:meth:`Needles.scrub`): inside a longer value only for strings of at least ``_SHORT``
  characters, so that "yes" typed by them does not take "yes" from everyone.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from convo_analytics.privacy import SubjectHasher, names_suppressed

__all__ = ["DROP", "ERASED", "Needles"]

#: What a value of the person's becomes where the row holding it stays.
ERASED = "[erased]"
#: :meth:`Needles.prune`'s answer for an object that is the person's.
DROP: Any = object()

#: Strings shorter than this match a whole value only.
_SHORT = 8
#: The keys by which a row names its workspace.
_WORKSPACE_KEYS = ("workspace_id", "workspaceId", "workspace_name", "workspace", "tenantId")
#: A JSON tree is walked this deep at most.
_DEPTH = 12


@dataclass(frozen=True)
class Needles:
    """The person's strings and texts, and the workspace's suppression list."""

    strings: frozenset[str] = frozenset()
    texts: frozenset[str] = frozenset()
    hasher: SubjectHasher | None = None
    lists: Mapping[str, frozenset[str]] = field(default_factory=dict)
    #: The workspace's id and name: a row naming another workspace is left as it is (the
    #: same identifier there is another person).
    workspace: frozenset[str] = frozenset()

    @classmethod
    def of(
        cls,
        strings: Iterable[str],
        texts: Iterable[str],
        hasher: SubjectHasher | None = None,
        lists: Mapping[str, frozenset[str]] | None = None,
        workspace: Iterable[str] = (),
    ) -> Needles:
        return cls(
            frozenset(s for s in strings if s and s.strip()),
            frozenset(t for t in texts if t and t.strip()),
            hasher,
            dict(lists or {}),
            frozenset(w for w in workspace if w),
        )

    def elsewhere(self, row: Mapping[str, Any]) -> bool:
        """Whether the row names a workspace, and not this one."""
        named = [row[k] for k in _WORKSPACE_KEYS if isinstance(row.get(k), str) and row[k]]
        return bool(named) and bool(self.workspace) and not (set(named) & self.workspace)

    def empty(self) -> bool:
        return not (self.strings or self.texts or any(self.lists.values()))

    def owns(self, row: Mapping[str, Any]) -> bool:
        """Whether a row (column -> value, or a JSON object's scalars) is the person's: a
        value that is one of their ids or identifier forms, or an id on the suppression
        list under a key naming its kind."""
        if self.elsewhere(row):
            return False
        if any(isinstance(v, str) and v in self.strings for v in row.values()):
            return True
        scalars = {k: v for k, v in row.items() if isinstance(v, str | int)}
        return self.hashed(scalars)

    def holds(self, value: object) -> bool:
        """Whether one value is or holds one of the person's strings or texts."""
        if not isinstance(value, str) or not value:
            return False
        return any(
            value == needle or (len(needle) >= _SHORT and needle in value)
            for needle in (*self.strings, *self.texts)
        )

    def scrub(self, value: str) -> str:
        """``value`` with each of the person's strings and texts in it replaced by
        ``[erased]`` (one that is the whole value: the whole value)."""
        if value in self.strings or value in self.texts:
            return ERASED
        longest_first = sorted((*self.strings, *self.texts), key=len, reverse=True)
        for needle in longest_first:
            if len(needle) >= _SHORT and needle in value:
                value = value.replace(needle, ERASED)
        return value

    def text(self, whole: str) -> bool:
        """Whether a whole file's text still holds one of the person's strings or longer
        texts (a file that names them after its rows went goes whole)."""
        return any(
            needle in whole for needle in (*self.strings, *self.texts) if len(needle) >= _SHORT
        ) or any(needle in whole for needle in self.strings)

    def hashed(self, tree: Any) -> bool:
        """Whether a JSON tree names someone on the suppression list under a known key."""
        if self.hasher is None or not any(self.lists.values()):
            return False
        return names_suppressed(tree, self.hasher, self.lists, None)

    def prune(self, tree: Any, depth: int = 0) -> Any:
        """A JSON tree without the person: an object that is theirs (:meth:`owns`) is
        ``DROP`` (left out of the list or object holding it), an id of theirs in a list of
        strings is left out, and any other string holding theirs is scrubbed."""
        if isinstance(tree, dict):
            if self.owns(tree):
                return DROP
            if depth >= _DEPTH or self.elsewhere(tree):
                return tree
            out = {}
            for key, value in tree.items():
                kept = self.prune(value, depth + 1)
                out[key] = None if kept is DROP else kept
            return out
        if isinstance(tree, list):
            if depth >= _DEPTH:
                return tree
            items = (
                self.prune(v, depth + 1)
                for v in tree
                if not (isinstance(v, str) and v in self.strings)
            )
            return [v for v in items if v is not DROP]
        if isinstance(tree, str):
            return self.scrub(tree)
        return tree
