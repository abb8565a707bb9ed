"""Topics of any text, offline: records read from a JSONL or CSV file, topics written per record.

``convo topics discover --input FILE`` runs exactly the discovery of the warehouse path on an
analyst's own export (another tool's tickets, chats, survey answers) or on a labelled set
(the benchmark). It needs no warehouse and no configuration. Every problem with the file is
one :class:`UserError` naming the file, the line (or row) and the fix; nothing is written
then, and the output appears whole or not at all (written beside, then renamed).
"""

from __future__ import annotations

import csv
import os
import sys
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import orjson

from convo_analytics.errors import UserError

__all__ = ["FORMATS", "InputRecords", "discover_file", "read_records", "write_assignments"]

Format = Literal["jsonl", "csv"]
FORMATS: tuple[Format, ...] = ("jsonl", "csv")
_SUFFIXES: dict[str, Format] = {".jsonl": "jsonl", ".ndjson": "jsonl", ".csv": "csv"}
#: A CSV cell may hold a long message (the csv module's default cap is 128 KiB).
_CSV_FIELD_LIMIT = 64 << 20


@dataclass(frozen=True)
class InputRecords:
    """The records of an input file: their ids (as written, or the record's number when the
    file has no id field) and their texts (empty where the record's text is empty or null)."""

    ids: tuple[Any, ...]
    texts: tuple[str, ...]
    id_field: str | None


def _format_of(path: Path, given: str | None) -> Format:
    if given is not None:
        if given not in FORMATS:
            raise UserError(f"--format {given!r}: choose jsonl or csv")
        return given
    found = _SUFFIXES.get(path.suffix.lower())
    if found is None:
        raise UserError(
            f"--input {path}: cannot tell its format from '{path.suffix or 'no suffix'}'; "
            "add --format jsonl or --format csv"
        )
    return found


def _lookup(record: dict[str, Any], field: str) -> tuple[bool, Any]:
    """A (dotted) field of a record: ``message.text`` reads ``{"message": {"text": ...}}``."""
    if field in record:
        return True, record[field]
    value: Any = record
    for part in field.split("."):
        if not isinstance(value, dict) or part not in value:
            return False, None
        value = value[part]
    return True, value


def _text_of(value: Any, where: str, field: str) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, int | float) and not isinstance(value, bool):
        return str(value)
    raise UserError(
        f"{where}: field {field!r} is {type(value).__name__}, not text; "
        "name the field that holds the message with --text-field"
    )


def _jsonl(path: Path) -> Iterator[tuple[str, dict[str, Any]]]:
    with path.open("rb") as handle:
        for number, raw in enumerate(handle, start=1):
            if not raw.strip():
                continue
            where = f"{path}:{number}"
            try:
                record = orjson.loads(raw)
            except orjson.JSONDecodeError:
                raise UserError(
                    f"{where}: not a JSON object (a JSONL file holds one per line); "
                    "fix or remove the line, or give --format csv for a CSV file"
                ) from None
            if not isinstance(record, dict):
                raise UserError(
                    f"{where}: a JSON {type(record).__name__}, not an object; each line must "
                    'be an object such as {"id": 1, "text": "..."}'
                )
            yield where, record


def _csv(path: Path) -> Iterator[tuple[str, dict[str, Any]]]:
    csv.field_size_limit(_CSV_FIELD_LIMIT)
    with path.open(newline="", encoding="utf-8-sig") as handle:
        reader = csv.DictReader(handle)
        if not reader.fieldnames:
            return
        for row in reader:
            if None in row:  # more cells than the header names
                raise UserError(
                    f"{path}:{reader.line_num}: more cells than the header has columns; "
                    "quote cells that hold commas"
                )
            yield f"{path}:{reader.line_num}", dict(row)


def read_records(
    path: Path,
    *,
    fmt: str | None = None,
    text_field: str = "text",
    id_field: str | None = None,
) -> InputRecords:
    """The records of ``path`` (JSONL or CSV, from ``fmt`` or the suffix).

    ``id_field`` None: the ``id`` field when the records have one, else each record's
    number (1, 2, ...). Ids must be unique. Raises UserError, one line, for any problem.
    """
    if not path.is_file():
        what = "is a folder" if path.is_dir() else "does not exist"
        raise UserError(f"--input {path} {what}; name a JSONL or CSV file")
    kind = _format_of(path, fmt)
    rows = _jsonl(path) if kind == "jsonl" else _csv(path)
    ids: list[Any] = []
    texts: list[str] = []
    seen: dict[Any, str] = {}
    use_id = id_field
    try:
        for where, record in rows:
            if not texts and use_id is None and "id" in record:
                use_id = "id"
            found, value = _lookup(record, text_field)
            if not found:
                fields = ", ".join(list(record)[:12]) or "none"
                raise UserError(
                    f"{where}: no field {text_field!r} (fields: {fields}); name the one that "
                    "holds the message with --text-field"
                )
            texts.append(_text_of(value, where, text_field))
            if use_id is None:
                ids.append(len(texts))
                continue
            found, key = _lookup(record, use_id)
            if not found or key is None or isinstance(key, dict | list):
                raise UserError(
                    f"{where}: no usable id in field {use_id!r}; name the id field with "
                    "--id-field (or leave it out to number the records)"
                )
            marker = (type(key).__name__, key) if not isinstance(key, bool) else ("bool", key)
            if marker in seen:
                raise UserError(
                    f"{where}: id {key!r} was already used at {seen[marker]}; ids must be "
                    "unique (or leave --id-field out to number the records)"
                )
            seen[marker] = where
            ids.append(key)
    except UnicodeDecodeError:
        raise UserError(f"--input {path} is not UTF-8 text; save it as UTF-8") from None
    except csv.Error as exc:
        raise UserError(f"--input {path}: not readable as CSV ({exc}); fix the file") from None
    return InputRecords(tuple(ids), tuple(texts), use_id)


def write_assignments(
    out: Path | None,
    ids: Sequence[Any],
    topic_ids: Sequence[int],
    labels: dict[int, str],
) -> None:
    """One JSON line per record, ``{"id", "topic_id", "topic_label"}``, in input order, to
    ``out`` (written beside and renamed: whole or not at all) or to stdout when None."""
    lines = b"".join(
        orjson.dumps({"id": key, "topic_id": topic, "topic_label": labels[topic]}) + b"\n"
        for key, topic in zip(ids, topic_ids, strict=True)
    )
    if out is None:
        sys.stdout.buffer.write(lines)
        sys.stdout.flush()
        return
    if out.is_dir():
        raise UserError(f"--out {out} is a folder; name the file to write")
    folder = out.parent if str(out.parent) else Path(".")
    if not folder.is_dir():
        raise UserError(f"--out {out}: its folder {folder} does not exist; create it first")
    try:
        handle, temporary = tempfile.mkstemp(prefix=f".{out.name}.", dir=folder)
    except OSError as exc:
        raise UserError(f"--out {out}: cannot write in {folder} ({exc.strerror})") from None
    try:
        with os.fdopen(handle, "wb") as file:
            file.write(lines)
            file.flush()
            os.fsync(file.fileno())
        os.replace(temporary, out)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def discover_file(
    path: Path,
    out: Path | None,
    *,
    fmt: str | None = None,
    text_field: str = "text",
    id_field: str | None = None,
    seed: int = 0,
) -> dict[str, Any]:
    """Discover the topics of the records of ``path`` and write each record's topic to
    ``out`` (None: stdout). Returns the summary ``convo topics discover --json`` prints:
    records, topics (id, label, size, terms, examples) and where the lines went."""
    from convo_analytics.topics._discover import discover_topics

    records = read_records(path, fmt=fmt, text_field=text_field, id_field=id_field)
    discovery = discover_topics(records.texts, seed=seed)
    labels = {topic.id: topic.label for topic in discovery.topics}
    write_assignments(out, records.ids, discovery.assignments, labels)
    return {
        "input": str(path),
        "out": "-" if out is None else str(out),
        "records": len(records.ids),
        "id_field": records.id_field,
        "topics": [
            {
                "id": topic.id,
                "label": topic.label,
                "size": topic.size,
                "terms": list(topic.terms),
                "examples": list(topic.examples),
            }
            for topic in discovery.topics
        ],
    }
