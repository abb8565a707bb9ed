"""Reading an event body strictly, so that every parser gives it the same meaning.

The verifier (orjson) keeps the last of two equal keys, DuckDB the first; orjson
refuses ``NaN`` and numbers beyond a double, DuckDB reads them. A body either
side could read differently is therefore refused before it is stored
(decision D-ONE-READING): what is stored is what was verified. The same rules
run at the receiver (an answer of 400) and in the ingest (a quarantine
reason), and so do the rules on an event's time: a timestamp needs its UTC
offset (D-EVENT-TIME) and may not lie further in the future than the
configured skew.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import orjson

#: Reasons a body is refused, and what each means (also docs/warehouse.md, "quarantine").
DUPLICATE_KEYS = "duplicate_keys"
NON_FINITE = "non_finite_number"
MALFORMED_BODY = "malformed_body"
BAD_ENCODING = "bad_encoding"
NO_OFFSET = "timestamp_without_offset"
FUTURE = "future_timestamp"

#: A date and time as ISO 8601 writes it, with its offset when it has one.
_ISO = re.compile(
    r"\d{4}-\d{2}-\d{2}(?:[Tt ]\d{2}:\d{2}(?::\d{2}(?:[.,]\d+)?)?"
    r"(?P<offset>[Zz]|[+-]\d{2}(?::?\d{2})?)?)?"
)
_EPOCH = re.compile(r"-?\d+(?:\.\d+)?")
#: Epoch numbers above this are milliseconds (as the warehouse's _ts reads them).
_MILLIS = 1e11


class _Refused(Exception):
    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(detail)
        self.reason = reason
        self.detail = detail


def _pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise _Refused(DUPLICATE_KEYS, f"the key {key[:80]!r} appears twice in one object")
        out[key] = value
    return out


def _constant(name: str) -> float:
    raise _Refused(NON_FINITE, f"the number {name} is not finite")


def _float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise _Refused(NON_FINITE, f"the number {text[:40]} is beyond a double")
    return value


def _int(text: str) -> int:
    value = int(text)
    if abs(value) > 1.7976931348623157e308:
        raise _Refused(NON_FINITE, f"the number {text[:40]}... is beyond a double")
    return value


@dataclass(frozen=True, slots=True)
class BodyCheck:
    """A body read once: its JSON value (orjson's), or why it was refused."""

    parsed: Any = None
    problem: str | None = None  # malformed_body, bad_encoding, non_finite_number, duplicate_keys
    detail: str = ""


def read_body(body: bytes) -> BodyCheck:
    """Parse ``body`` strictly: JSON, no repeated key in any object, every number finite.

    orjson parses; a body it writes back byte for byte has no repeated key (the
    common, compact case costs one parse and one serialisation). Any other body is
    read again by the standard library with hooks that see every key and number.
    """
    try:
        parsed = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        return _explain(body, str(exc))
    if orjson.dumps(parsed) == body:
        return BodyCheck(parsed)
    try:
        json.loads(body, object_pairs_hook=_pairs)
    except _Refused as refused:
        return BodyCheck(None, refused.reason, refused.detail)
    except (ValueError, RecursionError) as exc:
        return BodyCheck(None, MALFORMED_BODY, f"the body is not strict JSON ({exc})"[:200])
    return BodyCheck(parsed)


def _explain(body: bytes, orjson_error: str) -> BodyCheck:
    """Why orjson refused a body: not UTF-8, a number that is not finite, a repeated key,
    or else."""
    try:
        body.decode("utf-8")
    except UnicodeDecodeError:
        return BodyCheck(None, BAD_ENCODING, "the body is not UTF-8")
    try:
        json.loads(
            body,
            object_pairs_hook=_pairs,
            parse_constant=_constant,
            parse_float=_float,
            parse_int=_int,
        )
    except _Refused as refused:
        return BodyCheck(None, refused.reason, refused.detail)
    except (ValueError, RecursionError):
        pass
    return BodyCheck(None, MALFORMED_BODY, f"the body is not JSON ({orjson_error})"[:200])


def canonical_text(event: dict[str, Any]) -> bytes:
    """The event without its ``signature`` member, compact, keys sorted at every level:
    the same for every serialisation of one event (its identity, D-EVENT-IDENTITY)."""
    if "signature" in event:
        event = {k: v for k, v in event.items() if k != "signature"}
    return orjson.dumps(event, option=orjson.OPT_SORT_KEYS)


def content_hash(event: dict[str, Any]) -> str:
    return hashlib.sha256(canonical_text(event)).hexdigest()


def stamp(moment: datetime) -> str:
    """ISO 8601 UTC with milliseconds (``2026-11-18T10:00:00.000Z``): the sandbox's form, which
    compares as text in time order."""
    utc = moment.astimezone(UTC)
    return utc.strftime("%Y-%m-%dT%H:%M:%S.") + f"{utc.microsecond // 1000:03d}Z"


def parse_time(value: Any) -> datetime | str | None:
    """An event time as the warehouse reads it: a datetime, ``NO_OFFSET`` when it is a date
    or time without its UTC offset, or None when it is not a time we can read (the
    warehouse then quarantines it as ``bad_timestamp`` if it cannot either)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, str):
        text = value.strip()
        if _EPOCH.fullmatch(text):
            value = float(text)
        else:
            found = _ISO.fullmatch(text)
            if found is None:
                return None
            if found.group("offset") is None:
                return NO_OFFSET
            try:
                return datetime.fromisoformat(text.replace("z", "Z").replace("t", "T"))
            except ValueError:
                return None
    if isinstance(value, int | float):
        seconds = value / 1000 if value > _MILLIS else value
        try:
            return datetime.fromtimestamp(seconds, UTC)
        except (OverflowError, OSError, ValueError):
            return None
    return None


def timestamp_problem(
    event: dict[str, Any], reference: datetime, skew: timedelta
) -> tuple[str, str] | None:
    """Why an event's ``timestamp`` cannot be stored as it stands, or None.

    ``reference`` is when the event was received (or now); an event more than
    ``skew`` after it did not happen yet.
    """
    value = event.get("timestamp")
    when = parse_time(value)
    if when == NO_OFFSET:
        return NO_OFFSET, f"timestamp {str(value)[:60]!r} has no UTC offset"
    if isinstance(when, datetime) and when > reference + skew:
        ahead = (when - reference).total_seconds() / 3600
        return FUTURE, (
            f"timestamp {str(value)[:60]!r} is {ahead:,.1f} h after the event was received "
            f"(more than the {skew.total_seconds() / 3600:g} h allowed)"
        )
    return None


def received_reference(received_at: Any, now: datetime) -> datetime:
    """The moment an archived event must not lie in the future of: its time of receipt when
    the line has one as ISO 8601 with an offset (not itself in the future), else now."""
    readable = isinstance(received_at, str) and _ISO.fullmatch(received_at.strip())
    when = parse_time(received_at) if readable else None
    return when if isinstance(when, datetime) and when < now else now
