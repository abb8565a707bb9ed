"""What a record of the audit log is, and how its hash is made.

A record is one JSON object on one line. Its ``hash`` is the SHA-256 of the record
without ``hash`` written canonically (keys sorted, no spaces, UTF-8; the values are
strings, integers, booleans, nulls, lists and objects only, so any JSON library gives
the same bytes), and its ``prev`` is the hash of the record before it (``GENESIS`` for
the first): changing, removing or reordering a record breaks the chain at that point.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import orjson

__all__ = [
    "ACTIONS",
    "FIELDS",
    "GENESIS",
    "WHAT_MAX_CHARS",
    "Head",
    "canonical",
    "check_action",
    "cut",
    "now_text",
    "record_hash",
    "shape_problem",
]

#: ``prev`` of the first record.
GENESIS = "0" * 64

#: The fields of a record, in the order a line holds them.
FIELDS = (
    "seq", "when", "who", "action", "what", "rows", "workspace", "subjects", "detail",
    "prev", "hash",
)  # fmt: skip

#: The actions convo records (others of the form ``group.verb`` are accepted too).
ACTIONS = (
    "export.summary",
    "export.guardrails",
    "export.gaps",
    "explore.query",
    "dashboard.download",
    "serve.request",
    "erase",
    "export.person",
    "notebook.run",
    "report.sent",
    "audit.export",
    "retention",
)
_ACTION = re.compile(r"[a-z][a-z0-9_-]*(\.[a-z][a-z0-9_-]*)*")

#: ``what`` (a command line, a route, a query's text) is cut to this many characters.
WHAT_MAX_CHARS = 2000
#: Any other text of a record (who, workspace, a detail's text) is cut to this many.
TEXT_MAX_CHARS = 500

_HEX64 = re.compile(r"[0-9a-f]{64}")


@dataclass(frozen=True, slots=True)
class Head:
    """Where the chain ends: the last record's ``seq`` and ``hash`` (0 and GENESIS when
    there is none). Written ``SEQ:HASH``."""

    seq: int
    hash: str

    def __str__(self) -> str:
        return f"{self.seq}:{self.hash}"

    @classmethod
    def parse(cls, text: str) -> Head:
        """``SEQ:HASH`` (a ValueError saying what is wrong otherwise)."""
        seq, sep, digest = text.strip().partition(":")
        if not sep or not seq.isdigit() or not _HEX64.fullmatch(digest.lower()):
            raise ValueError(f"{text!r} is not SEQ:HASH (a record number and 64 hex digits)")
        return cls(int(seq), digest.lower())


def check_action(action: str) -> str:
    """``action`` when it is ``group.verb`` in lower case (ValueError otherwise: a bug)."""
    if not _ACTION.fullmatch(action):
        raise ValueError(f"audit action {action!r} is not of the form group.verb")
    return action


def cut(text: str, limit: int = TEXT_MAX_CHARS) -> str:
    """``text`` cut to ``limit`` characters, saying how long it was when it was cut."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}…[cut: {len(text)} characters]"


def plain(value: Any) -> Any:
    """``value`` as the JSON types a record may hold: floats become text (their canonical
    form differs between JSON libraries), tuples lists, other objects their text."""
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, Mapping):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    return str(value)


def canonical(record: Mapping[str, Any]) -> bytes:
    """The bytes a record's hash is taken over: the record without ``hash``, keys sorted,
    no spaces, UTF-8."""
    body = {k: v for k, v in record.items() if k != "hash"}
    return orjson.dumps(body, option=orjson.OPT_SORT_KEYS)


def record_hash(record: Mapping[str, Any]) -> str:
    return hashlib.sha256(canonical(record)).hexdigest()


def now_text() -> str:
    """Now in UTC, to the microsecond: ``2026-03-01T12:00:00.123456Z``."""
    return datetime.now(UTC).isoformat(timespec="microseconds").replace("+00:00", "Z")


def shape_problem(record: Any) -> str | None:
    """Why ``record`` (a parsed line) is not a record, or None when it has every field
    with its type."""
    if not isinstance(record, dict):
        return "not a JSON object"
    missing = [f for f in FIELDS if f not in record]
    if missing:
        return f"no {', '.join(missing)}"
    if not isinstance(record["seq"], int) or isinstance(record["seq"], bool) or record["seq"] < 1:
        return "seq is not a positive integer"
    for name in ("prev", "hash"):
        if not isinstance(record[name], str) or not _HEX64.fullmatch(record[name]):
            return f"{name} is not 64 hex digits"
    if not isinstance(record["action"], str) or not isinstance(record["when"], str):
        return "action or when is not text"
    return None
