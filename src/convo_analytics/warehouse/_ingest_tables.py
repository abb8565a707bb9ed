"""The ingest's own tables: its runs, how far each archive file was read, the quarantine.

Kept apart from the loaded data's tables (``_tables.py``) as the nightly run's log
is (``_runs.py``); docs/warehouse.md describes every column.
"""

from __future__ import annotations

from convo_analytics.warehouse._tables import Column, Table

_TS = "TIMESTAMPTZ"
#: Whole quarantined lines are large, distinct text: zstd, as the events' bodies.
_ZSTD = "zstd"

QUARANTINE = Table(
    "quarantine",
    (
        Column("source_file", "VARCHAR NOT NULL", doc="the archive file"),
        Column("source_line", "BIGINT NOT NULL", doc="1-based line number"),
        Column(
            "reason",
            "VARCHAR",
            doc="malformed_json, bad_encoding, truncated_gzip, too_large, empty_line, "
            "not_an_event, malformed_body, duplicate_keys, non_finite_number, unsigned, "
            "bad_signature, timestamp_without_offset, future_timestamp, bad_timestamp, "
            "unreadable_file, invalid_workspace, workspace_mismatch, workspace_unknown",
        ),
        Column("detail", "VARCHAR", doc="what exactly was wrong"),
        Column("excerpt", "VARCHAR", doc="the start of the line (at most 2,000 characters)"),
        Column("ingest_run_id", "VARCHAR", doc="the run that quarantined it"),
        Column("quarantined_at", _TS),
        Column(
            "line_offset",
            "BIGINT",
            doc="where the line starts in the file (in the decompressed stream of a gzip file)",
        ),
        Column(
            "line",
            "BLOB",
            doc="the whole line as read, for `convo webhooks quarantine replay`; NULL for a "
            "line over webhooks.max_line_bytes (replay reads it from the file)",
            compression=_ZSTD,
        ),
        Column("resolved_at", _TS, doc="when a replay or a later read loaded it; NULL while open"),
        Column(
            "resolution",
            "VARCHAR",
            doc="loaded (a new event) or duplicate (an event already stored); NULL while open",
        ),
        Column("resolved_by", "VARCHAR", doc="the ingest or replay run that resolved it"),
        Column(
            "workspace",
            "VARCHAR",
            doc="the [[workspaces]] name whose archive folder (endpoint) the line was read "
            "for, whose secrets a replay verifies it with; NULL for the flat endpoint's "
            "(webhooks.secret) and rows from before schema 7",
        ),
    ),
    ("source_file", "source_line"),
    "Input lines that could not be loaded, with the reason; re-ingesting a file does not "
    "add them again. A row is open until a replay (or a later read of its file) loads its "
    "line; `convo webhooks quarantine purge` removes rows.",
)

INGEST_RUNS = Table(
    "ingest_runs",
    (
        Column("ingest_run_id", "VARCHAR NOT NULL"),
        Column("started_at", _TS),
        Column("finished_at", _TS),
        Column(
            "status",
            "VARCHAR",
            doc="running, ok, failed (an error, or the signature alarm), or interrupted "
            "(killed; found by the next run)",
        ),
        Column("files", "INTEGER", doc="archive files considered"),
        Column("lines_read", "BIGINT", doc="input lines read"),
        Column("loaded", "BIGINT", doc="new events stored"),
        Column("duplicates", "BIGINT", doc="retries and replays recognised"),
        Column("quarantined", "BIGINT"),
        Column("quarantined_by_reason", "JSON"),
        Column("readings", "JSON", doc="loaded events by signature reading"),
        Column("duration_seconds", "DOUBLE"),
        Column("error", "VARCHAR", doc="why it failed (the signature alarm's line, or the error)"),
        Column("kind", "VARCHAR", doc="ingest, or replay (`convo webhooks quarantine replay`)"),
        Column("bytes_read", "BIGINT", doc="bytes of new lines read (decompressed)"),
        Column("files_skipped", "INTEGER", doc="files already read to their end, not read again"),
        Column("files_changed", "JSON", doc="files changed in place since read, read again"),
        Column("held_back", "BIGINT", doc="unterminated last lines left for a later run"),
    ),
    ("ingest_run_id",),
    "One row per `convo webhooks ingest` (or quarantine replay) run.",
)

INGEST_FILES = Table(
    "ingest_files",
    (
        Column("path", "VARCHAR NOT NULL", doc="the archive file (absolute)"),
        Column("size", "BIGINT", doc="its size in bytes when last read"),
        Column("head_bytes", "INTEGER", doc="how many of its first bytes head_hash covers"),
        Column("head_hash", "VARCHAR", doc="sha256 of its first bytes (at most 64 KiB)"),
        Column("tail_hash", "VARCHAR", doc="sha256 of the 4 KiB before `size`"),
        Column(
            "stream_offset",
            "BIGINT",
            doc="bytes of its stream read so far (decompressed for gzip): the next run starts "
            "there",
        ),
        Column("lines", "BIGINT", doc="lines read so far (the next line's number is lines + 1)"),
        Column("stream_tail_hash", "VARCHAR", doc="sha256 of the 4 KiB before stream_offset"),
        Column("complete", "BOOLEAN", doc="read to its end, with nothing held back"),
        Column(
            "ended_unterminated",
            "BOOLEAN",
            doc="its last line read had no newline (a newline written after it later is "
            "that line's, not an empty line)",
        ),
        Column("held_back", "BIGINT", doc="bytes of an unterminated last line left for later"),
        Column(
            "continues",
            "VARCHAR",
            doc="the plain file this gzip file is the compressed copy of, when it was "
            "resumed where that one was read to",
        ),
        Column("first_run_id", "VARCHAR"),
        Column("last_run_id", "VARCHAR"),
        Column("read_at", _TS, doc="when it was last read"),
    ),
    ("path",),
    "How far each webhook archive file was read, and what it looked like then, so that a "
    "run reads only what is new (decision D-INCREMENTAL-INGEST).",
)

QUARANTINE_PURGES = Table(
    "quarantine_purges",
    (
        Column("purged_at", _TS),
        Column("before_date", "DATE", doc="rows quarantined before this day were removed"),
        Column("rows_removed", "BIGINT"),
        Column("open_rows_removed", "BIGINT", doc="of which were still open (never loaded)"),
        Column("by_reason", "JSON", doc="rows removed per reason"),
    ),
    ("purged_at",),
    "Each `convo webhooks quarantine purge`, so that what was removed stays on record.",
)

INGEST_TABLES = (QUARANTINE, INGEST_RUNS, INGEST_FILES, QUARANTINE_PURGES)
