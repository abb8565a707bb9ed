"""Topic curations: the analysts' renames, merges, splits and pins, kept as data.

Curations live in the app's own state store (a JSON-lines file, by default
``data/app-state/topic_curations.jsonl``), never in the warehouse a run writes:
the dashboard and ``convo topics rename|merge|split|pin`` append to it, under
a lock of its own, and every transform reads it and applies it (decision
D-TOPICS-CURATION). A curation names a topic by its workspace and its id, and
ids survive a rediscovery (they are mapped by overlap), so curations do too.

The store is append-only: a later curation of the same topic wins (a rename
after a rename), ``unpin`` undoes ``pin``, ``unmerge`` undoes ``merge``. A line
a kill left half-written is skipped, and the next append starts a fresh line.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from convo_analytics._app_state import append_line, locked, read_lines
from convo_analytics.errors import UserError

__all__ = [
    "ACTIONS",
    "AppliedTopic",
    "Curation",
    "append_curation",
    "apply_curations",
    "read_curations",
    "split_regex",
]

Action = Literal["rename", "merge", "unmerge", "split", "pin", "unpin"]
ACTIONS: tuple[Action, ...] = ("rename", "merge", "unmerge", "split", "pin", "unpin")
#: Longest topic name accepted (a name is shown in tables, charts and alert lines).
MAX_LABEL = 80
MAX_PATTERN = 80


@dataclass(frozen=True, slots=True)
class Curation:
    """One curation as stored; ``sequence`` orders them (the store numbers them)."""

    workspace_id: str
    action: Action
    topic_id: int
    target_topic_id: int | None = None
    label: str | None = None
    pattern: str | None = None
    created_by: str = "cli"
    created_at: str = ""
    sequence: int = 0

    def as_json(self) -> dict[str, Any]:
        return {
            "sequence": self.sequence,
            "workspace_id": self.workspace_id,
            "action": self.action,
            "topic_id": self.topic_id,
            "target_topic_id": self.target_topic_id,
            "label": self.label,
            "pattern": self.pattern,
            "created_at": self.created_at,
            "created_by": self.created_by,
        }


def _clean_label(value: str | None, what: str) -> str:
    text = " ".join((value or "").split())
    if not text or not text.isprintable():
        raise UserError(f"{what}: give a non-empty name of printable characters")
    if len(text) > MAX_LABEL:
        raise UserError(f"{what}: a name of at most {MAX_LABEL} characters (got {len(text)})")
    return text


def checked(curation: Curation) -> Curation:
    """The curation with its name tidied; a :class:`UserError` naming what is wrong."""
    if curation.action not in ACTIONS:
        raise UserError(f"topic curation {curation.action!r}: one of {', '.join(ACTIONS)}")
    if not curation.workspace_id:
        raise UserError("topic curation: name the workspace (--workspace)")
    if curation.topic_id < 0:
        raise UserError(f"topic {curation.topic_id}: topic ids are 0 or more")
    if curation.action == "rename":
        return replace(curation, label=_clean_label(curation.label, "rename"))
    if curation.action == "merge":
        if curation.target_topic_id is None or curation.target_topic_id < 0:
            raise UserError("merge: name the topic to merge into (--into TOPIC)")
        if curation.target_topic_id == curation.topic_id:
            raise UserError(f"merge: topic {curation.topic_id} cannot be merged into itself")
        if 0 in (curation.topic_id, curation.target_topic_id):
            raise UserError("merge: topic 0 ('other') is not merged; rename or split it")
    if curation.action == "split":
        pattern = " ".join((curation.pattern or "").split())
        if not pattern or len(pattern) > MAX_PATTERN or not pattern.isprintable():
            raise UserError(
                f"split: give the word or phrase that splits off (--matching, 1 to "
                f"{MAX_PATTERN} printable characters)"
            )
        return replace(curation, pattern=pattern, label=_clean_label(curation.label, "split"))
    return curation


def _parse(row: Any) -> Curation | None:
    try:
        curation = Curation(
            workspace_id=str(row["workspace_id"]),
            action=row["action"],
            topic_id=int(row["topic_id"]),
            target_topic_id=(
                None if row.get("target_topic_id") is None else int(row["target_topic_id"])
            ),
            label=row.get("label"),
            pattern=row.get("pattern"),
            created_by=str(row.get("created_by") or ""),
            created_at=str(row.get("created_at") or ""),
            sequence=int(row["sequence"]),
        )
        return checked(curation)
    except (KeyError, TypeError, ValueError, UserError):
        return None


def read_curations(path: Path, workspace_id: str | None = None) -> list[Curation]:
    """The store's curations in order (one workspace's, when named); unreadable lines (a
    half-written last line, a hand edit gone wrong) are skipped. No file: none."""
    try:
        rows = read_lines(path)
    except OSError as exc:
        raise UserError(
            f"topics.curations_file {path}: cannot be read ({exc.strerror}); fix its "
            "permissions or point topics.curations_file elsewhere"
        ) from None
    out = []
    for row in rows:
        found = _parse(row)
        if found is not None and (workspace_id is None or found.workspace_id == workspace_id):
            out.append(found)
    return sorted(out, key=lambda c: c.sequence)


def append_curation(path: Path, curation: Curation) -> Curation:
    """Check ``curation``, number it after the store's last one and append it (durably)."""
    curation = checked(curation)
    with locked(path):
        existing = read_curations(path)
        sequence = max((c.sequence for c in existing), default=0) + 1
        stamped = replace(
            curation,
            sequence=sequence,
            created_at=curation.created_at or datetime.now(UTC).isoformat(timespec="seconds"),
        )
        append_line(path, stamped.as_json())
    return stamped


def split_regex(pattern: str) -> str:
    """What a split matches, as a regular expression DuckDB (RE2) runs: the words of
    ``pattern`` in order, as whole words (letters, digits and _ make a word), any case."""
    words = [re.escape(w) for w in pattern.split()]
    edge = r"[^\pL\pN_]"
    return f"(?i)(^|{edge})" + rf"{edge}+".join(words) + f"({edge}|$)"


@dataclass(slots=True)
class AppliedTopic:
    """A topic as analysts see it, curations applied (a row of ``mart_topics``)."""

    topic_id: int
    label: str
    retired: bool = False
    renamed: bool = False
    pinned: bool = False
    merged_into: int | None = None
    split_from: int | None = None
    effective_topic_id: int = -1
    effective_label: str = ""
    applied: dict[int, bool] = field(default_factory=dict)


def apply_curations(
    topics: Iterable[tuple[int, str, bool, int | None]], curations: Sequence[Curation]
) -> tuple[dict[int, AppliedTopic], dict[int, bool]]:
    """One workspace's topics (id, discovered label, retired, split_from) with its
    curations applied in order; and, per curation sequence, whether it applied (it names
    topics that exist, and a merge would not make a cycle). Splits must already be topics
    (the transform makes them); here they are only recognised."""
    out = {
        tid: AppliedTopic(tid, label, retired=retired, split_from=split_from)
        for tid, label, retired, split_from in topics
    }
    applied: dict[int, bool] = {}
    for c in curations:
        topic = out.get(c.topic_id)
        ok = topic is not None
        if ok and topic is not None:
            if c.action == "rename" and c.label:
                topic.label, topic.renamed = c.label, True
            elif c.action == "merge":
                ok = c.target_topic_id in out and not _reaches(out, c.target_topic_id, c.topic_id)
                if ok:
                    topic.merged_into = c.target_topic_id
            elif c.action == "unmerge":
                topic.merged_into = None
            elif c.action in ("pin", "unpin"):
                topic.pinned = c.action == "pin"
            elif c.action == "split":
                ok = any(t.split_from == c.topic_id for t in out.values())
        applied[c.sequence] = ok
    for topic in out.values():
        root = topic
        for _ in range(len(out)):  # bounded: merges never make a cycle (checked above)
            if root.merged_into is None or root.merged_into not in out:
                break
            root = out[root.merged_into]
        topic.effective_topic_id, topic.effective_label = root.topic_id, root.label
    return out, applied


def _reaches(topics: dict[int, AppliedTopic], start: int | None, goal: int) -> bool:
    """Whether following merges from ``start`` arrives at ``goal``."""
    seen: set[int] = set()
    while start is not None and start not in seen:
        if start == goal:
            return True
        seen.add(start)
        start = topics[start].merged_into if start in topics else None
    return False
