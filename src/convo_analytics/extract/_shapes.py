"""The shape of a list response: where its records are, which fields mean what, its schema.

The service's interface does not show its response envelope nor its field
names, so the extractor finds them in the first response (with the common
names real services use) and lets config override each guess. The schema of
the records is tracked too, so that a run can report drift (new, missing or
retyped fields) instead of silently loading something else than before.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from typing import Any

# fmt: off
__all__ = [
    "CREATED_KEYS", "ENVELOPE_KEYS", "ID_KEYS", "UPDATED_KEYS", "Drift", "FieldMap", "ShapeError",
    "bool_at", "compare_schemas", "detect_fields", "find_records", "format_time", "has_path",
    "int_at", "json_type", "parse_timestamp", "schema_of", "time_format_of", "value_at",
]
# fmt: on

# Common names, in order of preference.
# fmt: off
#: Keys that hold the records of a list response.
ENVELOPE_KEYS: tuple[str, ...] = (
    "data", "results", "items", "records", "conversations", "leads", "value", "entries",
    "objects", "rows", "hits", "elements", "content", "list",
)
ID_KEYS: tuple[str, ...] = (
    "id", "_id", "uuid", "ID", "Id", "guid", "key", "conversationId", "conversation_id",
    "leadId", "lead_id", "objectId", "object_id",
)
#: Per stream, its own record's id names first: a lead that also carries a
#: ``conversation_id`` is keyed by its ``lead_id``, and the other way round.
STREAM_ID_KEYS: dict[str, tuple[str, ...]] = {
    "conversations": (
        "id", "_id", "uuid", "ID", "Id", "guid", "conversationId", "conversation_id", "key",
        "objectId", "object_id",
    ),
    "leads": (
        "id", "_id", "uuid", "ID", "Id", "guid", "leadId", "lead_id", "key", "objectId",
        "object_id",
    ),
}
CREATED_KEYS: tuple[str, ...] = (
    "createdAt", "created_at", "created", "createdTime", "created_time", "createdDate",
    "created_date", "createdOn", "created_on", "creationTime", "creation_time", "dateCreated",
    "date_created", "insertedAt", "inserted_at", "startedAt", "started_at", "timestamp",
)
UPDATED_KEYS: tuple[str, ...] = (
    "updatedAt", "updated_at", "updated", "modifiedAt", "modified_at", "modified",
    "lastModified", "last_modified", "lastModifiedAt", "last_modified_at", "lastUpdated",
    "last_updated", "updatedTime", "updated_time", "updatedDate", "updated_date",
    "dateModified", "date_modified", "modifiedOn", "modified_on", "updatedOn", "updated_on",
)

# Where list responses say how they page (dotted: nested, see value_at); used by _paging.
#: Where services put the next cursor, and the query parameter that usually takes it back.
CURSOR_PATHS: dict[str, str] = {
    "nextCursor": "cursor", "next_cursor": "cursor", "cursor": "cursor",
    "next_page_token": "page_token", "nextPageToken": "pageToken",
    "pagination.next_cursor": "cursor", "pagination.nextCursor": "cursor",
    "meta.next_cursor": "cursor", "meta.nextCursor": "cursor",
    "response_metadata.next_cursor": "cursor", "paging.cursors.after": "after",
}
NEXT_URL_PATHS = (
    "next", "next_url", "nextUrl", "next_page_url", "links.next", "_links.next.href",
    "_links.next", "pagination.next", "pagination.next_url", "meta.next", "paging.next",
    "@odata.nextLink",
)
HAS_MORE_PATHS = (
    "hasMore", "has_more", "more", "pagination.hasMore", "pagination.has_more", "meta.hasMore",
    "meta.has_more",
)
PAGE_HINT_PATHS = (
    "page", "current_page", "currentPage", "page_number", "pageNumber", "total_pages",
    "totalPages", "meta.page", "meta.current_page", "meta.total_pages", "pagination.page",
    "pagination.current_page", "pagination.total_pages",
)
TOTAL_PAGES_PATHS = (
    "total_pages", "totalPages", "pages", "meta.total_pages", "meta.totalPages",
    "pagination.total_pages", "pagination.totalPages",
)
TOTAL_PATHS = (
    "total", "total_count", "totalCount", "totalRecords", "total_records", "totalResults",
    "total_results", "totalItems", "total_items", "totalElements", "total_elements", "count",
    "meta.total", "meta.total_count", "meta.totalCount", "pagination.total",
    "pagination.total_count", "pagination.totalCount", "page.totalElements",
)
OFFSET_HINT_PATHS = ("offset", "meta.offset", "pagination.offset")
#: A page size the body reports; it only ever lowers the size a full page is judged by.
PAGE_SIZE_PATHS = (
    "per_page", "perPage", "page_size", "pageSize", "limit", "meta.per_page", "meta.limit",
    "pagination.per_page", "pagination.limit",
)
# fmt: on

#: The config setting that overrides each guessed field (named in error messages).
_SETTING = {
    "id": "the stream's id",
    "created": "the stream's created",
    "updated": "the stream's updated",
}
_ENVELOPE_SETTING = "the stream's records"
_MISSING = object()


class ShapeError(Exception):
    """A response whose records or fields cannot be found; the message names the setting."""


@dataclass(frozen=True)
class FieldMap:
    """Where the records are and which of their fields are the id and the timestamps."""

    envelope: str | None  # None: the body is a bare list
    id: str
    created: str | None
    updated: str | None


def value_at(data: Any, path: str, default: Any = None) -> Any:
    """The value at a dotted path (``meta.next_cursor``), or ``default`` when it is absent.

    A key that itself contains dots (``@odata.nextLink``) is tried whole first,
    so such names need no escaping.
    """
    if not isinstance(data, Mapping) or not path:
        return default
    if path in data:
        return data[path]
    head, dot, rest = path.partition(".")
    while dot:
        if head in data:
            found = value_at(data[head], rest, _MISSING)
            if found is not _MISSING:
                return found
        more, dot, rest = rest.partition(".")
        head = f"{head}.{more}"
    return default


def has_path(data: Any, path: str) -> bool:
    """Whether the dotted path exists (its value may be null)."""
    return value_at(data, path, _MISSING) is not _MISSING


def int_at(data: Any, paths: Iterable[str]) -> tuple[str, int] | None:
    """The first of the paths holding a non-negative integer, and that integer."""
    for path in paths:
        value = value_at(data, path)
        if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
            return path, value
    return None


def bool_at(data: Any, paths: Iterable[str]) -> bool | None:
    """The first boolean at one of the paths."""
    return next((v for v in (value_at(data, p) for p in paths) if isinstance(v, bool)), None)


def _objects(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(v, dict) for v in value)


def find_records(data: Any, envelope: str | None = None) -> tuple[list[dict[str, Any]], str | None]:
    """The records of a list response and the key they were under (None: a bare list).

    The configured key wins; else a bare top-level list; else the first of
    :data:`ENVELOPE_KEYS` holding a list; else the only list of objects.
    """
    if envelope:
        value = value_at(data, envelope)
        if not isinstance(value, list):
            found = "nothing" if value is None else f"a JSON {json_type(value)}"
            raise ShapeError(
                f"the response has {found} at {envelope!r} where a list of records was "
                f"expected; check {_ENVELOPE_SETTING}"
            )
        if not _objects(value):
            raise ShapeError(
                f"the list at {envelope!r} holds non-objects; check {_ENVELOPE_SETTING}"
            )
        return value, envelope
    if isinstance(data, list):
        if not _objects(data):
            raise ShapeError("the response is a list of non-objects; records must be JSON objects")
        return data, None
    if not isinstance(data, dict):
        raise ShapeError(f"the response is a JSON {json_type(data)}, not a list or an object")
    for key in ENVELOPE_KEYS:
        if _objects(data.get(key)):
            return data[key], key
    lists = [k for k, v in data.items() if _objects(v) and v] or [
        k for k, v in data.items() if v == []
    ]
    if len(lists) == 1:
        return data[lists[0]], lists[0]
    keys = ", ".join(repr(k) for k in list(data)[:12]) or "none"
    raise ShapeError(
        f"cannot tell which key of the response holds the records (its keys: {keys}); "
        f"set {_ENVELOPE_SETTING} to that key"
    )


def _is_id(value: Any) -> bool:
    return isinstance(value, str | int) and not isinstance(value, bool) and value != ""


def _is_time(value: Any) -> bool:
    return parse_timestamp(value) is not None


def _pick(
    records: list[dict[str, Any]],
    role: str,
    candidates: tuple[str, ...],
    overrides: Mapping[str, str],
    accept: Callable[[Any], bool],
) -> str | None:
    """The configured field, or the first candidate most records carry a usable value in.

    Ids must also be distinct: a ``key`` field naming a kind of thing is no id.
    """
    chosen = overrides.get(role)
    if chosen:
        if records and not any(has_path(r, chosen) for r in records):
            raise ShapeError(
                f"{_SETTING[role]} is {chosen!r}, but no record has that field "
                f"(fields seen: {', '.join(sorted(_field_names(records))[:20])})"
            )
        return chosen
    for key in _nested_candidates(records, candidates):
        values = [str(v) for r in records if accept(v := value_at(r, key))]
        if 2 * len(values) > len(records) and (role != "id" or len(set(values)) == len(values)):
            return key
    return None


def _nested_candidates(records: list[dict[str, Any]], candidates: tuple[str, ...]) -> list[str]:
    """The candidates, then each under the objects most records carry (JSON:API's
    ``attributes.updated``, a ``fields`` or ``properties`` object), as dotted paths."""
    holders = [
        key
        for key in dict.fromkeys(k for r in records for k in r)
        if 2 * sum(isinstance(r.get(key), Mapping) for r in records) > len(records)
    ]
    return [*candidates, *(f"{h}.{c}" for h in holders for c in candidates)]


def _field_names(records: Iterable[dict[str, Any]]) -> set[str]:
    """The records' keys, and the keys of their objects as dotted paths."""
    names = set()
    for record in records:
        for key, value in record.items():
            names.add(key)
            if isinstance(value, Mapping):
                names.update(f"{key}.{inner}" for inner in value)
    return names


def detect_fields(
    records: list[dict[str, Any]],
    envelope: str | None,
    overrides: Mapping[str, str] | None = None,
    id_keys: tuple[str, ...] = ID_KEYS,
) -> FieldMap:
    """Which fields are the id and the created/updated timestamps.

    ``overrides`` maps ``id``/``created``/``updated`` to configured names. A
    candidate counts when more than half of the records carry a usable value in
    it (an id: a non-empty string or integer; a timestamp: something
    :func:`parse_timestamp` reads). With no records there is nothing to look at,
    so the id defaults to ``id`` and the timestamps to None (unless configured).
    """
    given = dict(overrides or {})
    if unknown := set(given) - set(_SETTING):
        raise ValueError(f"unknown field roles {sorted(unknown)}; use id, created, updated")
    if not records:
        return FieldMap(
            envelope, given.get("id") or ID_KEYS[0], given.get("created"), given.get("updated")
        )
    id_field = _pick(records, "id", id_keys, given, _is_id)
    if id_field is None:
        raise ShapeError(
            f"cannot find the records' id field (tried {', '.join(id_keys)}; "
            f"fields seen: {', '.join(sorted(_field_names(records))[:20])}); "
            f"set {_SETTING['id']}"
        )
    created = _pick(records, "created", CREATED_KEYS, given, _is_time)
    updated = _pick(records, "updated", UPDATED_KEYS, given, _is_time)
    return FieldMap(envelope, id_field, created, updated)


def json_type(value: Any) -> str:
    """The JSON type name of a parsed JSON value."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, Mapping):
        return "object"
    if isinstance(value, list | tuple):
        return "array"
    raise TypeError(f"{type(value).__name__} is not a JSON value")


def _merge(types: set[str]) -> str:
    """One name for the non-null types a field had: integer and number widen to number."""
    if {"integer", "number"} <= types:
        types = types - {"integer"}
    if not types:
        return "null"
    if len(types) == 1:
        return next(iter(types))
    return "mixed:" + "|".join(sorted(types))


def schema_of(records: Iterable[dict[str, Any]]) -> dict[str, str]:
    """Top-level field -> JSON type over the records (``null`` only if always null)."""
    seen: dict[str, set[str]] = {}
    for record in records:
        for key, value in record.items():
            kinds = seen.setdefault(key, set())
            if value is not None:
                kinds.add(json_type(value))
    return {key: _merge(kinds) for key, kinds in seen.items()}


@dataclass(frozen=True)
class Drift:
    """How a stream's schema changed between two runs (or two pages)."""

    new: dict[str, str]
    missing: dict[str, str]
    retyped: dict[str, tuple[str, str]]

    def is_empty(self) -> bool:
        return not (self.new or self.missing or self.retyped)

    def describe(self) -> list[str]:
        """One human line per change, for the run log."""
        lines = [f"new field {k!r} ({t})" for k, t in sorted(self.new.items())]
        lines += [f"missing field {k!r} (was {t})" for k, t in sorted(self.missing.items())]
        lines += [
            f"field {k!r} changed type: {a} -> {b}" for k, (a, b) in sorted(self.retyped.items())
        ]
        return lines


def _kinds(type_name: str) -> frozenset[str]:
    names = type_name.removeprefix("mixed:").split("|")
    return frozenset("number" if n == "integer" else n for n in names)


def compare_schemas(before: Mapping[str, str], after: Mapping[str, str]) -> Drift:
    """The drift from ``before`` to ``after``.

    A field that was or became ``null`` is not retyped (we only saw nulls on one
    side), nor is integer <-> number (JSON does not distinguish them reliably).
    """
    new = {k: t for k, t in after.items() if k not in before}
    missing = {k: t for k, t in before.items() if k not in after}
    retyped: dict[str, tuple[str, str]] = {}
    for key in before.keys() & after.keys():
        old, now = before[key], after[key]
        if "null" in (old, now) or _kinds(old) == _kinds(now):
            continue
        retyped[key] = (old, now)
    return Drift(new, missing, retyped)


_NUMERIC = re.compile(r"-?\d{9,}(\.\d+)?")
#: Epoch numbers from here on are milliseconds: as seconds they would be after the year
#: 5138; milliseconds below it (before March 1973) are read as seconds.
_EPOCH_MS_FROM = 100_000_000_000
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def _from_epoch(number: float) -> datetime | None:
    ms = abs(number) >= _EPOCH_MS_FROM
    try:
        return _EPOCH + (timedelta(milliseconds=number) if ms else timedelta(seconds=number))
    except (OverflowError, ValueError):  # too far, or NaN / infinity
        return None


def parse_timestamp(value: Any) -> datetime | None:
    """An aware UTC datetime from what services put in timestamp fields, or None.

    Reads ISO 8601 with any offset or ``Z`` (a naive time is taken as UTC), a
    date alone (UTC midnight), and epoch seconds or milliseconds (numbers, or
    strings of at least 9 digits, so that ``20240131`` stays a date).
    """
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int | float):
        return _from_epoch(value)
    if isinstance(value, datetime):
        return _to_utc(value)
    if isinstance(value, date):
        return datetime(value.year, value.month, value.day, tzinfo=UTC)
    if not isinstance(value, str):
        return None
    text = value.strip()
    if _NUMERIC.fullmatch(text):
        return _from_epoch(float(text) if "." in text else int(text))
    if text[-1:] in ("z", "Z"):
        text = text[:-1] + "+00:00"
    try:
        parsed = datetime.fromisoformat(text.replace("t", "T"))
    except ValueError:
        return None
    return _to_utc(parsed)


def _to_utc(value: datetime) -> datetime | None:
    try:
        if value.tzinfo is None or value.utcoffset() is None:
            return value.replace(tzinfo=UTC)
        return value.astimezone(UTC)
    except (OverflowError, ValueError):
        return None


def format_time(moment: datetime, fmt: str) -> str:
    """A time as the incremental parameter wants it."""
    if fmt == "epoch_ms":
        return str(int(moment.timestamp() * 1000))
    if fmt == "epoch_s":
        return str(int(moment.timestamp()))
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.") + (
        f"{moment.microsecond // 1000:03d}Z"
    )


def time_format_of(value: Any) -> str:
    """How a record writes its times: iso, epoch_s or epoch_ms (numbers, or digit strings)."""
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():
        value = int(value)
    if isinstance(value, int | float) and not isinstance(value, bool):
        return "epoch_ms" if abs(value) >= 100_000_000_000 else "epoch_s"
    return "iso"
