"""Versioned record collections with snapshot-consistent keyset paging.

A client paging through a list must never miss a record, even when records
change between its requests. Ordering by ``updatedAt`` alone would move a
changed record behind the client's position; ordering by ``createdAt`` alone
would hide the change. So each collection keeps the superseded versions of
changed records, and a listing is served as of the moment its first page was
requested (the snapshot sequence number travels in the cursor): every record
that existed then is returned exactly once, in the version it had then, and
later changes are seen by the next sync (their ``updatedAt`` is newer).
"""

from __future__ import annotations

import base64
import bisect
import hashlib
import hmac
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import orjson

R = TypeVar("R")
Key = tuple[int, str]


class CursorError(ValueError):
    """The cursor is malformed, forged, or does not belong to this query."""


@dataclass(frozen=True, slots=True)
class Ordering:
    """A sort order: the name clients use, and the record's timestamp for it."""

    name: str
    key: Callable[[Any], int]


@dataclass(frozen=True, slots=True)
class Filter:
    """A list filter: the query parameter, the list field it tests, and how."""

    param: str
    field: str
    op: str  # "ge", "lt", "eq", "min"
    doc: str


@dataclass(slots=True)
class _Version:
    valid_from: int
    valid_to: int
    keys: dict[str, Key]
    body: dict[str, Any]


class Collection(Generic[R]):
    """The records of one kind in one workspace."""

    def __init__(
        self,
        orderings: Iterable[Ordering],
        serialize: Callable[[R], dict[str, Any]],
        record_id: Callable[[R], str],
    ) -> None:
        self.orderings = {o.name: o for o in orderings}
        self.serialize = serialize
        self.record_id = record_id
        self.records: dict[str, R] = {}
        self.seq = 0
        self._version: dict[str, int] = {}
        self._index: dict[str, list[Key]] = {name: [] for name in self.orderings}
        self._keys: dict[str, dict[str, Key]] = {name: {} for name in self.orderings}
        self._history: dict[str, list[_Version]] = {}
        self._changes: list[tuple[int, str]] = []

    def __len__(self) -> int:
        return len(self.records)

    def load(self, records: Iterable[R]) -> None:
        """Bulk-load records as version 0 (the generated history)."""
        for record in records:
            rid = self.record_id(record)
            self.records[rid] = record
            self._version[rid] = 0
            for name, ordering in self.orderings.items():
                key = (ordering.key(record), rid)
                self._keys[name][rid] = key
                self._index[name].append(key)
        for index in self._index.values():
            index.sort()

    def before_change(self, rid: str) -> dict[str, Any] | None:
        """Capture a record's current version; pass the result to :meth:`after_change`."""
        if rid not in self.records:
            return None
        return self.serialize(self.records[rid])

    def after_change(self, record: R, previous: dict[str, Any] | None) -> None:
        """Publish a new or changed record as the next version."""
        rid = self.record_id(record)
        self.seq += 1
        if previous is not None:
            old_keys = {name: self._keys[name][rid] for name in self.orderings}
            self._history.setdefault(rid, []).append(
                _Version(self._version[rid], self.seq, old_keys, previous)
            )
            for name, key in old_keys.items():
                index = self._index[name]
                del index[bisect.bisect_left(index, key)]
        self.records[rid] = record
        self._version[rid] = self.seq
        self._changes.append((self.seq, rid))
        for name, ordering in self.orderings.items():
            key = (ordering.key(record), rid)
            self._keys[name][rid] = key
            bisect.insort(self._index[name], key)

    def page(
        self,
        ordering: str,
        after: Key | None,
        snapshot: int,
        accept: Callable[[dict[str, Any]], bool],
        limit: int,
        start: Key | None = None,
    ) -> tuple[list[dict[str, Any]], Key | None]:
        """Up to ``limit`` records after ``after`` as of ``snapshot``, and the next position."""
        out: list[dict[str, Any]] = []
        last: Key | None = None
        for key, body in self._as_of(ordering, after or start, snapshot, inclusive=after is None):
            if not accept(body):
                continue
            if len(out) == limit:
                return out, last
            out.append(body)
            last = key
        return out, None

    def _as_of(
        self, ordering: str, after: Key | None, snapshot: int, inclusive: bool
    ) -> Iterator[tuple[Key, dict[str, Any]]]:
        """Records in order as they stood at ``snapshot``: current ones merged with old versions."""
        index = self._index[ordering]
        if after is None:
            pos = 0
        elif inclusive:
            pos = bisect.bisect_left(index, after)
        else:
            pos = bisect.bisect_right(index, after)
        old = sorted(self._old_versions(ordering, snapshot, after, inclusive), key=lambda kv: kv[0])
        o = 0
        while pos < len(index) or o < len(old):
            if o < len(old) and (pos >= len(index) or old[o][0] < index[pos]):
                yield old[o]
                o += 1
                continue
            key = index[pos]
            pos += 1
            if self._version[key[1]] <= snapshot:
                yield key, self.serialize(self.records[key[1]])

    def _old_versions(
        self, ordering: str, snapshot: int, after: Key | None, inclusive: bool
    ) -> Iterator[tuple[Key, dict[str, Any]]]:
        first = bisect.bisect_right(self._changes, (snapshot, "\uffff"))
        seen: set[str] = set()
        for _, rid in self._changes[first:]:
            if rid in seen:
                continue
            seen.add(rid)
            for version in self._history.get(rid, ()):
                if version.valid_from <= snapshot < version.valid_to:
                    key = version.keys[ordering]
                    if after is None or key > after or (inclusive and key == after):
                        yield key, version.body
                    break


class CursorCodec:
    """Opaque, tamper-evident cursors that carry a query, its snapshot and its position."""

    def __init__(self, secret: bytes) -> None:
        self._secret = secret

    def encode(self, state: dict[str, Any]) -> str:
        payload = orjson.dumps(state, option=orjson.OPT_SORT_KEYS)
        mac = hmac.new(self._secret, payload, hashlib.sha256).digest()[:12]
        return base64.urlsafe_b64encode(mac + payload).rstrip(b"=").decode()

    def decode(self, cursor: str) -> dict[str, Any]:
        try:
            raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        except (ValueError, TypeError) as exc:
            raise CursorError("the cursor is not one this service issued") from exc
        mac, payload = raw[:12], raw[12:]
        expected = hmac.new(self._secret, payload, hashlib.sha256).digest()[:12]
        if len(raw) < 13 or not hmac.compare_digest(mac, expected):
            raise CursorError("the cursor is not one this service issued (or it expired)")
        state = orjson.loads(payload)
        if not isinstance(state, dict):
            raise CursorError("the cursor is not one this service issued")
        return state
