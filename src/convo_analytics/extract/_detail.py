"""A conversation's detail: fetched, its record unwrapped, its transcript found.

The sandbox's detail is the conversation itself with ``messages``. Other
services wrap it (``{"conversation": {...}}``), keep the transcript under
another key (``transcript``), or add it only when asked
(``?_embed=messages``). The record's place and the transcript's key are
configured (``detail.record``, ``detail.messages``) or detected from the
first details; a wrapped record is stored with its wrapper's other members
merged in, so a transcript beside it is found too. Details that hold no
transcript are counted: when none does, the stream is partial.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Protocol

import orjson

from convo_analytics.extract._http import ServiceClient
from convo_analytics.extract._results import StreamResult
from convo_analytics.extract._shapes import value_at
from convo_analytics.extract._source import StreamPlan

if TYPE_CHECKING:
    from convo_analytics.warehouse._shape import LoadShape

log = logging.getLogger("convo.extract")

__all__ = [
    "TRANSCRIPT_KEYS",
    "DetailReader",
    "DetailStream",
    "find_record",
    "find_transcript",
    "list_paths",
]

#: Keys that hold a transcript in services we know of, after the sandbox's ``messages``.
TRANSCRIPT_KEYS = (
    "messages",
    "transcript",
    "turns",
    "dialog",
    "dialogue",
    "history",
    "conversationMessages",
    "conversation_messages",
    "utterances",
    "entries",
    "chat",
    "thread",
    "exchanges",
    "included",  # JSON:API: the related resources of a compound document
)
#: Parsed details kept to detect fields from.
_SAMPLES = 50


def find_record(body: Any, id_field: str, record_id: str) -> str | None:
    """The key of the member holding the record in a wrapped detail (None: the body is it)."""
    if not isinstance(body, Mapping) or str(value_at(body, id_field, "")) == record_id:
        return None
    holders = [
        key
        for key, value in body.items()
        if isinstance(value, Mapping) and str(value_at(value, id_field, "")) == record_id
    ]
    return holders[0] if len(holders) == 1 else None


def unwrap(body: Mapping[str, Any], record: str) -> dict[str, Any]:
    """The record at the key path ``record`` with the wrapper's other members beside it (the
    record's own win): JSON:API's ``data`` with the ``included`` list beside it."""
    inner = value_at(body, record)
    if not isinstance(inner, Mapping):
        return dict(body)
    head = record if record in body else record.split(".", 1)[0]
    return {**{k: v for k, v in body.items() if k != head}, **inner}


def list_paths(data: Any, depth: int = 3) -> frozenset[str]:
    """The key paths (dotted, objects opened ``depth`` levels deep) that hold a list."""
    found: set[str] = set()

    def walk(value: Mapping[str, Any], prefix: str, level: int) -> None:
        for key, item in value.items():
            if isinstance(item, list):
                found.add(prefix + key)
            elif isinstance(item, Mapping) and level < depth:
                walk(item, f"{prefix}{key}.", level + 1)

    if isinstance(data, Mapping):
        walk(data, "", 1)
    return frozenset(found)


def _objects(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(v, Mapping) for v in value)


def find_transcript(records: list[Any]) -> str | None:
    """The key holding a transcript in (most of) these detail records, or None."""
    for key in TRANSCRIPT_KEYS:
        if any(isinstance(r, Mapping) and _objects(r.get(key)) and r.get(key) for r in records):
            return key
    lists = {
        key
        for r in records
        if isinstance(r, Mapping)
        for key, value in r.items()
        if _objects(value) and value
    }
    return next(iter(lists)) if len(lists) == 1 else None


class _StreamFields(Protocol):
    """What a detail reader reads of its stream's typed fields (``_typed.TypedFields``)."""

    @property
    def shape(self) -> LoadShape: ...

    @property
    def id_field(self) -> str | None: ...

    @property
    def decided(self) -> bool: ...


class DetailStream(Protocol):
    """The list stream whose details are read (``_list_stream.ListStreamRun``), as a
    protocol: that stream makes its reader, so the reader does not import it."""

    @property
    def result(self) -> StreamResult: ...

    @property
    def where(self) -> str: ...

    @property
    def typed(self) -> _StreamFields: ...

    def detail_url(self, record_id: str) -> str: ...

    def scrub_detail(self, body: bytes, data: Any, record_id: str) -> bytes:
        """The detail's body with its personal data scrubbed (what was found, kept)."""
        ...


class DetailReader:
    """Fetches details for one stream and learns their shape from the first ones."""

    def __init__(self, stream: DetailStream, plan: StreamPlan) -> None:
        assert plan.detail is not None
        self.stream = stream
        self.spec = plan.detail
        self.params = dict(self.spec.params or {})
        #: Where the record sits: configured, or None until a detail shows it.
        self.record: str | None = self.spec.record
        self.record_origin = "configured" if self.spec.record is not None else "default"
        self.samples: list[dict[str, Any]] = []
        self.fetched = 0
        self.without_transcript = 0
        #: Before the transcript's key is decided: the list keys of each detail fetched.
        self._pending: Counter[frozenset[str]] = Counter()

    @property
    def transcript_key(self) -> str:
        return self.stream.typed.shape.list_key("messages")

    async def fetch(
        self, client: ServiceClient, record_id: str, result: StreamResult
    ) -> bytes | None:
        path = self.stream.detail_url(record_id)
        assert self.spec.path is not None
        response, data = await client.get(
            path, self.params or None, result.stats, self.spec.path, missing=(404,)
        )
        if data is None:
            result.details_missing += 1
            log.warning("%s: %s disappeared before its detail was read", result.stream, record_id)
            return None
        if self.record is None and isinstance(data, Mapping):
            id_field = self.stream.typed.id_field or "id"
            found = find_record(data, id_field, record_id)
            if found is not None:
                self.record, self.record_origin = found, "detected"
        body = response.content
        if self.record and isinstance(data, Mapping):
            data = unwrap(data, self.record)
            body = orjson.dumps(data)
        body = self.stream.scrub_detail(body, data, record_id)
        self.fetched += 1
        if len(self.samples) < _SAMPLES and isinstance(data, dict):
            self.samples.append(data)
        lists = list_paths(data)
        if self.stream.typed.decided:
            self.without_transcript += self.transcript_key not in lists
        else:
            self._pending[lists] += 1
        return body

    def settle(self) -> None:
        """Count the details fetched before the transcript's key was decided."""
        key = self.transcript_key
        self.without_transcript += sum(n for lists, n in self._pending.items() if key not in lists)
        self._pending.clear()

    def check_end(self) -> None:
        """Details that held no transcript: a gap when none did, else a warning."""
        if not self.fetched or not self.without_transcript:
            return
        result, where = self.stream.result, self.stream.where
        key = self.transcript_key or "(none configured)"
        fix = (
            f"set {where} detail = {{ params = {{ ... }} }} if the service adds the transcript "
            f"only when asked (e.g. _embed=messages), or detail.messages to its key "
            "(`convo extract --check` finds both)"
        )
        if self.without_transcript >= self.fetched:
            result.gaps.append(
                f"none of the {self.fetched} details fetched held a transcript at {key!r}, so "
                f"no message was loaded; {fix}"
            )
        else:
            result.warnings.append(
                f"{self.without_transcript} of {self.fetched} details held no transcript at "
                f"{key!r}; {fix}"
            )

    def describe(self) -> dict[str, Any]:
        return {
            "path": self.spec.path,
            "params": self.params,
            "record": {"value": self.record or "", "origin": self.record_origin},
            "details": self.fetched,
            "withoutTranscript": self.without_transcript,
        }
