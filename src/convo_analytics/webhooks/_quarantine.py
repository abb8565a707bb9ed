"""The quarantine's life cycle: list it, replay it, purge it.

Nothing quarantined is lost: each row keeps its whole line (or, for a line over
the size limit, where it stands in its file). ``replay`` reads the open rows'
lines again with the secrets configured now (a rotated secret added since,
say) and the same rules as the ingest, each line with the secrets and the
workspace of the endpoint it came from (the row's ``workspace``, else its
file's archive folder), never one secret for all: each ends loaded, duplicate or still
quarantined, exactly once, and a row that loads is closed with when and how
(``resolved_at``, ``resolution``). ``purge`` removes rows quarantined before a
day, on purpose and on record (``quarantine_purges``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Sequence
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

import orjson

from convo_analytics.errors import UserError
from convo_analytics.webhooks._endpoints import EndpointKeys
from convo_analytics.webhooks._ingest import Ingester, IngestOptions, _Chunk
from convo_analytics.webhooks._lines import ArchiveReader, Block, LongLine
from convo_analytics.webhooks._run import (
    IngestResult,
    Loader,
    new_ingester,
    new_run_id,
    recorded_run,
)
from convo_analytics.webhooks._workspace import EndpointWorkspace

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


#: An open row: its file, line number, offset, kept line, and the workspace it was read for.
_Row = tuple[str, int, int | None, bytes | None, str | None]


def replay(
    db_path: Path,
    keys_for: Callable[[str | None], EndpointKeys | None] | Sequence[bytes],
    options: IngestOptions | None = None,
    *,
    reasons: Sequence[str] = (),
    source: str | None = None,
    workspace_of: Callable[[str], str | None] = lambda source: None,
    only: Sequence[str | None] | None = None,
) -> IngestResult:
    """Read the open quarantine rows' lines again and load what now can be; see the module
    docstring. ``reasons``/``source`` narrow it to some reasons or one file, ``only`` to some
    endpoints (workspace names; None: the flat one).

    Each row is read for the endpoint it came from: its ``workspace``, else
    ``workspace_of(file)`` (rows from before schema 7), verified with ``keys_for`` that
    endpoint; rows of an endpoint without secrets are a UserError before anything runs
    (:func:`check_replay` says so without the writers' lock).
    ``keys_for`` given as secrets: the flat endpoint's (no workspace's rows replay).
    """
    options = options or IngestOptions()
    keys_for = _keyring(keys_for)
    groups, keys = _plan(db_path, keys_for, reasons, source, workspace_of, only, read_only=False)
    result = IngestResult(new_run_id(), kind="replay")

    def read(con: Any, began: datetime, loader: Loader) -> None:
        for name, entries in groups.items():
            endpoint = keys[name]
            ingester = new_ingester(
                con, endpoint.secrets, began, options, endpoint.endpoint, endpoint.privacy
            )
            for chunk in _chunks(ingester, entries, options):
                loader.put(chunk)
        result.files = len({row[0] for entries in groups.values() for row in entries})

    secret_count = sum(len(k.secrets) for k in keys.values())
    hint = "; ".join(dict.fromkeys(k.hint for k in keys.values())) or "the configured secrets"
    privacy = next((k.privacy for k in keys.values() if k.privacy is not None), None)
    return recorded_run(db_path, result, secret_count, options, hint, read, privacy)


def check_replay(
    db_path: Path,
    keys_for: Callable[[str | None], EndpointKeys | None],
    *,
    reasons: Sequence[str] = (),
    source: str | None = None,
    workspace_of: Callable[[str], str | None] = lambda source: None,
    only: Sequence[str | None] | None = None,
) -> None:
    """The UserError a replay would stop with (no warehouse; open rows of an endpoint with
    no secrets), found reading the warehouse only, before the writers' lock is taken."""
    _plan(db_path, keys_for, reasons, source, workspace_of, only, read_only=True)


def _keyring(
    keys_for: Callable[[str | None], EndpointKeys | None] | Sequence[bytes],
) -> Callable[[str | None], EndpointKeys | None]:
    if callable(keys_for):
        return keys_for
    flat = EndpointKeys(EndpointWorkspace(None), list(keys_for), "the given secrets")
    return lambda name: flat if name is None else None


def _plan(
    db_path: Path,
    keys_for: Callable[[str | None], EndpointKeys | None],
    reasons: Sequence[str],
    source: str | None,
    workspace_of: Callable[[str], str | None],
    only: Sequence[str | None] | None,
    *,
    read_only: bool,
) -> tuple[dict[str | None, list[_Row]], dict[str | None, EndpointKeys]]:
    """The open rows by the endpoint they came from, and each endpoint's keys."""
    from convo_analytics.warehouse import open_warehouse

    con = open_warehouse(db_path, must_exist=True, read_only=read_only)
    try:
        rows = _open_rows(con, reasons, source)
    finally:
        con.close()
    groups: dict[str | None, list[_Row]] = {}
    for row in rows:
        name = row[4] if row[4] is not None else workspace_of(row[0])
        if only is None or name in only:
            groups.setdefault(name, []).append(row)
    keys = {name: keys_for(name) for name in groups}
    if missing := [name for name, found in keys.items() if found is None]:
        raise UserError(_no_secrets(missing, groups))
    return groups, {name: found for name, found in keys.items() if found is not None}


def _no_secrets(missing: list[str | None], groups: dict[str | None, list[_Row]]) -> str:
    """The one line for open rows whose endpoint has no secrets configured."""
    parts = []
    for name in missing:
        n, first = len(groups[name]), groups[name][0]
        where = f"{first[0]}:{first[1]}"
        if name is None:
            parts.append(
                f"{n} open row(s) came to the flat endpoint (e.g. {where}) and no webhook "
                "secret is set: set CONVO_WEBHOOK_SECRET or CONVO_WEBHOOK_SECRET_FILE, or "
                "pass --secret"
            )
        else:
            parts.append(
                f"{n} open row(s) came to workspace {name!r} (e.g. {where}), which has no "
                "webhook secrets configured now: set its webhook_secrets_env or "
                "webhook_secrets_file in [[workspaces]]"
            )
    return "; ".join(parts) + " (or narrow the replay with --workspace or --file)"


def _open_rows(con: Any, reasons: Sequence[str], source: str | None) -> list[_Row]:
    where = ["resolved_at IS NULL"]
    params: list[Any] = []
    if reasons:
        where.append("reason IN (SELECT unnest(?))")
        params.append(list(reasons))
    if source is not None:
        where.append("source_file = ?")
        params.append(source)
    columns = {
        name
        for (name,) in con.execute(
            "SELECT column_name FROM information_schema.columns WHERE table_name = 'quarantine'"
        ).fetchall()
    }
    if "resolved_at" not in columns:  # read as it is, a warehouse from before schema 4
        where[0] = "true"
    workspace = "workspace" if "workspace" in columns else "NULL"  # before schema 7
    rows = con.execute(
        f"SELECT source_file, source_line, line_offset, line, {workspace} FROM quarantine "
        f"WHERE {' AND '.join(where)} ORDER BY source_file, source_line",
        params,
    ).fetchall()
    return [(str(r[0]), int(r[1]), r[2], r[3], r[4]) for r in rows]


def _chunks(ingester: Ingester, rows: list[_Row], options: IngestOptions) -> Iterator[_Chunk]:
    """The rows' lines as chunks of one file each, in line order."""
    by_file: dict[str, list[tuple[int, int | None, bytes | None]]] = {}
    for source, line_no, offset, line, _ in rows:
        by_file.setdefault(source, []).append((line_no, offset, line))
    for source, entries in by_file.items():
        missing = [(n, off) for n, off, line in entries if line is None]
        from_file = _lines_from_file(Path(source), missing, options) if missing else {}
        chunk = ingester.new_chunk(source, 0)
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
                chunk = ingester.new_chunk(source, 0)
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
