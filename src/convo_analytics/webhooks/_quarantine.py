"""The quarantine's life cycle: list it, replay it, purge it.

Nothing quarantined is lost: each row keeps its whole line (or, for a line over
the size limit, where it stands in its file). ``replay`` reads the open rows'
lines again with the secrets configured now (a rotated secret added since,
say) and the same rules as the ingest: each ends loaded, duplicate or still
quarantined, exactly once, and a row that loads is closed with when and how
(``resolved_at``, ``resolution``). ``purge`` removes rows quarantined before a
day, on purpose and on record (``quarantine_purges``).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

import orjson

from convo_analytics.webhooks._ingest import Ingester, IngestOptions, _Chunk
from convo_analytics.webhooks._lines import ArchiveReader, Block, LongLine
from convo_analytics.webhooks._run import (
    SECRET_HINT,
    IngestResult,
    Loader,
    new_run_id,
    recorded_run,
)

log = logging.getLogger(__name__)

#: Open rows read per chunk of a replay.
_REPLAY_BATCH = 20_000


def quarantine_counts(con: Any, *, include_resolved: bool = False) -> list[dict[str, Any]]:
    """Rows by reason, file and day quarantined (open ones only unless asked). A warehouse
    of a schema before 4, read as it is, has no resolved rows (nor the columns)."""
    columns = con.execute(
        "SELECT column_name FROM information_schema.columns WHERE table_name = 'quarantine'"
    ).fetchall()
    resolution = (
        ""
        if ("resolved_at",) in columns
        else ", NULL::TIMESTAMPTZ AS resolved_at, NULL AS resolution"
    )
    con.execute(
        f"CREATE OR REPLACE TEMP VIEW quarantine_rows AS SELECT *{resolution} FROM quarantine"
    )
    where = "" if include_resolved else "WHERE resolved_at IS NULL"
    rows = con.execute(
        f"""SELECT reason, source_file, CAST(quarantined_at AS DATE) AS day,
                   count(*) FILTER (WHERE resolved_at IS NULL) AS open,
                   count(*) FILTER (WHERE resolution = 'loaded') AS loaded,
                   count(*) FILTER (WHERE resolution = 'duplicate') AS duplicate
            FROM quarantine_rows {where} GROUP BY ALL ORDER BY day, source_file, reason"""
    ).fetchall()
    out = []
    for reason, source, day, open_rows, loaded, duplicate in rows:
        entry = {"reason": reason, "file": source, "day": str(day), "open": open_rows}
        if include_resolved:
            entry.update(loaded=loaded, duplicate=duplicate)
        out.append(entry)
    return out


def replay(
    db_path: Path,
    secrets: Sequence[bytes],
    options: IngestOptions | None = None,
    *,
    reasons: Sequence[str] = (),
    source: str | None = None,
    secret_hint: str = SECRET_HINT,
) -> IngestResult:
    """Read the open quarantine rows' lines again and load what now can be; see the module
    docstring. ``reasons``/``source`` narrow it to some reasons or one file."""
    options = options or IngestOptions()
    result = IngestResult(new_run_id(), kind="replay")

    def read(con: Any, ingester: Ingester, loader: Loader) -> None:
        rows = _open_rows(con, reasons, source)
        for chunk in _chunks(ingester, rows, options):
            loader.put(chunk)
        result.files = len({row[0] for row in rows})

    return recorded_run(db_path, result, secrets, options, secret_hint, read)


def _open_rows(
    con: Any, reasons: Sequence[str], source: str | None
) -> list[tuple[str, int, int | None, bytes | None]]:
    where = ["resolved_at IS NULL"]
    params: list[Any] = []
    if reasons:
        where.append("reason IN (SELECT unnest(?))")
        params.append(list(reasons))
    if source is not None:
        where.append("source_file = ?")
        params.append(source)
    rows = con.execute(
        f"SELECT source_file, source_line, line_offset, line FROM quarantine "
        f"WHERE {' AND '.join(where)} ORDER BY source_file, source_line",
        params,
    ).fetchall()
    return [(str(r[0]), int(r[1]), r[2], r[3]) for r in rows]


def _chunks(
    ingester: Ingester,
    rows: list[tuple[str, int, int | None, bytes | None]],
    options: IngestOptions,
) -> Iterator[_Chunk]:
    """The rows' lines as chunks of one file each, in line order."""
    by_file: dict[str, list[tuple[int, int | None, bytes | None]]] = {}
    for source, line_no, offset, line in rows:
        by_file.setdefault(source, []).append((line_no, offset, line))
    for source, entries in by_file.items():
        missing = [(n, off) for n, off, line in entries if line is None]
        from_file = _lines_from_file(Path(source), missing, options) if missing else {}
        chunk = _Chunk(source, 0)
        for line_no, offset, line in entries:
            text = line if line is not None else from_file.get(line_no)
            chunk.count += 1
            if isinstance(text, LongLine):
                detail = f"the line is {text.size:,} bytes, over webhooks.max_line_bytes"
                chunk.reject(line_no, "too_large", detail, text.head, offset, False)
            elif text is None:
                reason, detail = "unreadable_file", f"the line is not stored and {source} "
                detail += "no longer holds it"
                if line_no in from_file:
                    reason, detail = "truncated_gzip", "the gzip stream still breaks off there"
                chunk.reject(line_no, reason, detail, b"", offset, False)
            else:
                body, newline = (text[:-1], b"\n") if text.endswith(b"\n") else (text, b"")
                ingester.read_line(chunk, line_no, body, newline, offset)
            if chunk.count >= _REPLAY_BATCH:
                yield chunk
                chunk = _Chunk(source, 0)
        if chunk.count:
            yield chunk


def _lines_from_file(
    path: Path, wanted: list[tuple[int, int | None]], options: IngestOptions
) -> dict[int, bytes | LongLine | None]:
    """The lines a quarantine did not keep (over the size limit, or where a gzip stream broke
    off), read from their file by line number: a line still over the limit comes back as
    its LongLine; the line where a gzip stream still breaks off, as None; a line the file
    no longer has is left out."""
    if not path.is_file():
        return {}
    numbers = {n for n, _ in wanted}
    last = max(numbers)
    found: dict[int, bytes | LongLine | None] = {}
    line_no = 0
    with ArchiveReader(path, max_line=options.max_line_bytes) as reader:
        for item in reader.items():
            if isinstance(item, Block):
                for i in range(len(item)):
                    line_no += 1
                    if line_no in numbers:
                        text, newline = item.line(i)
                        found[line_no] = text + newline
            else:
                line_no += 1
                if line_no in numbers:
                    found[line_no] = item
            if line_no >= last:
                break
        if reader.problem is not None and line_no + 1 in numbers:
            found[line_no + 1] = None
    return found


def purge(con: Any, before: date) -> dict[str, Any]:
    """Remove quarantine rows quarantined before ``before`` (UTC), open or resolved, and
    record what went in ``quarantine_purges``."""
    from convo_analytics.warehouse import transaction

    cutoff = datetime(before.year, before.month, before.day, tzinfo=UTC)
    with transaction(con):
        by_reason = dict(
            con.execute(
                "SELECT reason, count(*) FROM quarantine WHERE quarantined_at < ? GROUP BY 1",
                [cutoff],
            ).fetchall()
        )
        [(open_rows,)] = con.execute(
            "SELECT count(*) FROM quarantine WHERE quarantined_at < ? AND resolved_at IS NULL",
            [cutoff],
        ).fetchall()
        con.execute("DELETE FROM quarantine WHERE quarantined_at < ?", [cutoff])
        removed = sum(by_reason.values())
        con.execute(
            "INSERT INTO quarantine_purges VALUES (?, ?, ?, ?, ?)",
            [datetime.now(UTC), before, removed, open_rows, orjson.dumps(by_reason).decode()],
        )
    log.warning(
        "quarantine purge: removed %d rows quarantined before %s (%d of them open)",
        removed, before, open_rows,
    )  # fmt: skip
    return {"before": str(before), "removed": removed, "open": open_rows, "byReason": by_reason}
