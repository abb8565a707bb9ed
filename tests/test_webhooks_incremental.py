"""Incremental ingest: a run reads only what is new (decision D-INCREMENTAL-INGEST)."""

from __future__ import annotations

import gzip
import os
import time
from pathlib import Path

import duckdb
import pytest

from convo_analytics.webhooks._archive_writer import compress_file
from webhook_support import delivery, event, rows, run, signed_body, table_digest


def _lines(first: int, count: int) -> bytes:
    """Deliveries of events first..first+count-1, every third one retried."""
    out = b""
    for n in range(first, first + count):
        out += delivery(event(n))
        if n % 3 == 0:
            out += delivery(event(n), attempt=2)
    return out


def _events(db: Path) -> int:
    return int(rows(db, "SELECT count(*) FROM events")[0][0])


def test_appended_lines_are_the_only_ones_read_and_totals_stay_exact(tmp_path: Path) -> None:
    path = tmp_path / "deliveries.jsonl"
    first = _lines(0, 30)
    path.write_bytes(first)
    one = run(tmp_path, [path])
    assert (one["loaded"], one["bytesRead"]) == (30, len(first))
    more = _lines(30, 20) + delivery(event(5), attempt=3)  # a late retry of an old event
    with path.open("ab") as f:
        f.write(more)
    two = run(tmp_path, [path])
    assert (two["read"], two["bytesRead"], two["filesResumed"]) == (
        more.count(b"\n"),
        len(more),
        1,
    )
    assert (two["loaded"], two["duplicates"]) == (20, more.count(b"\n") - 20)
    three = run(tmp_path, [path])
    assert (three["read"], three["bytesRead"], three["filesSkipped"]) == (0, 0, 1)
    db = tmp_path / "w.duckdb"
    assert _events(db) == 50
    # line numbers go on from where the last read ended
    last_new = first.count(b"\n") + more.count(b"\n") - 1  # event 49; then the late retry
    assert rows(db, "SELECT max(source_line) FROM events") == [(last_new,)]


def test_an_unterminated_last_line_waits_while_the_file_may_still_grow(tmp_path: Path) -> None:
    path = tmp_path / "deliveries.jsonl"
    whole = delivery(event(1)) + delivery(event(2))
    path.write_bytes(whole[:-40])  # the second line half written
    first = run(tmp_path, [path], settle_seconds=600)
    assert (first["read"], first["loaded"], first["heldBack"]) == (1, 1, 1)
    path.write_bytes(whole)  # the writer finished the line
    second = run(tmp_path, [path], settle_seconds=600)
    assert (second["read"], second["loaded"], second["quarantined"]) == (1, 1, {})
    assert rows(tmp_path / "w.duckdb", "SELECT source_line FROM events ORDER BY 1") == [
        (1,),
        (2,),
    ]


def test_a_quiet_files_unterminated_line_is_read_and_its_later_newline_is_not_a_line(
    tmp_path: Path,
) -> None:
    """A line torn by a crash is read once the file is quiet; the receiver, restarted, ends it
    with a newline before appending: that newline is the torn line's, not an empty line."""
    path = tmp_path / "deliveries.jsonl"
    torn = delivery(event(1)) + delivery(event(2))[:50]
    path.write_bytes(torn)
    old = time.time() - 3600
    os.utime(path, (old, old))
    first = run(tmp_path, [path], settle_seconds=600)
    assert (first["read"], first["loaded"], first["quarantined"]) == (2, 1, {"malformed_json": 1})
    third = delivery(event(3))
    with path.open("ab") as f:  # the newline, then a line still being written
        f.write(b"\n" + third[:30])
    second = run(tmp_path, [path], settle_seconds=600)
    assert (second["read"], second["heldBack"], second["quarantined"]) == (0, 1, {})
    with path.open("ab") as f:
        f.write(third[30:])
    last = run(tmp_path, [path], settle_seconds=600)
    assert (last["read"], last["loaded"], last["quarantined"]) == (1, 1, {})
    assert rows(tmp_path / "w.duckdb", "SELECT max(source_line) FROM events") == [(3,)]


def test_a_file_changed_in_place_is_reported_and_read_again(tmp_path: Path) -> None:
    path = tmp_path / "export.jsonl"
    path.write_bytes(_lines(0, 10))
    run(tmp_path, [path])
    # rewritten: another first line, the rest the same events (duplicates recognised)
    path.write_bytes(delivery(event(99)) + _lines(0, 10))
    counts = run(tmp_path, [path])
    assert [c["path"] for c in counts["filesChanged"]] == [str(path.resolve())]
    assert "first bytes" in counts["filesChanged"][0]["why"]
    assert (counts["loaded"], counts["duplicates"]) == (1, counts["read"] - 1)
    # a change further in, after the first 64 KiB, is seen by the bytes before the offset
    long = _lines(100, 400)
    path.write_bytes(long)
    run(tmp_path, [path])
    changed = long[:-200] + long[-200:].replace(b"msg_", b"MSG_")
    path.write_bytes(changed + _lines(600, 2))
    again = run(tmp_path, [path])
    assert (
        again["filesChanged"]
        and "before where the last read ended" in (again["filesChanged"][0]["why"])
    )


def test_a_gzip_copy_of_a_plain_file_continues_where_that_one_was_read_to(
    tmp_path: Path,
) -> None:
    """The receiver compresses a day's file when the day is over: the copy is not read again."""
    day = tmp_path / "deliveries-2026-11-17.jsonl"
    day.write_bytes(_lines(0, 40))
    run(tmp_path, [day])
    late = _lines(40, 5)
    with day.open("ab") as f:  # deliveries after the last ingest, before midnight
        f.write(late)
    gz = compress_file(day)
    assert not day.exists()
    counts = run(tmp_path, [gz])
    assert (counts["read"], counts["loaded"], counts["bytesRead"]) == (
        late.count(b"\n"),
        5,
        len(late),
    )
    assert run(tmp_path, [gz])["filesSkipped"] == 1
    state = rows(tmp_path / "w.duckdb", "SELECT continues, complete FROM ingest_files "
                 "WHERE path = ?", [str(gz.resolve())])  # fmt: skip
    assert state == [(str(day.resolve()), True)]


def test_a_growing_gzip_is_read_on_from_its_decompressed_offset(tmp_path: Path) -> None:
    path = tmp_path / "export.jsonl.gz"
    path.write_bytes(gzip.compress(_lines(0, 20)))
    run(tmp_path, [path])
    with path.open("ab") as f:  # a second gzip member appended (``cat a.gz b.gz``)
        f.write(gzip.compress(_lines(20, 7)))
    counts = run(tmp_path, [path])
    assert (counts["loaded"], counts["filesResumed"]) == (7, 1)
    assert counts["read"] == _lines(20, 7).count(b"\n")


def test_a_run_killed_between_chunks_resumes_after_the_last_one_stored(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from convo_analytics.warehouse import _events as loading
    from convo_analytics.webhooks import _lines as reader

    monkeypatch.setattr(reader, "BLOCK", 2048)  # a few lines a block, so chunks of 16 lines
    path = tmp_path / "a.jsonl"
    path.write_bytes(_lines(0, 60))
    real, calls = loading.load_events, [0]

    def dies_on_the_third(*args: object, **kwargs: object) -> object:
        calls[0] += 1
        if calls[0] == 3:
            raise KeyboardInterrupt  # as a kill between two chunks would leave it
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(loading, "load_events", dies_on_the_third)
    with pytest.raises(KeyboardInterrupt):
        run(tmp_path, [path], chunk_lines=16)
    monkeypatch.setattr(loading, "load_events", real)
    db = tmp_path / "w.duckdb"
    stored = _events(db)
    assert 0 < stored < 60
    [(done,)] = rows(db, "SELECT lines FROM ingest_files")
    assert done >= 32, "the two chunks stored before the kill are remembered"
    rest = run(tmp_path, [path], chunk_lines=16)
    total = path.read_bytes().count(b"\n")
    assert rest["read"] == total - done, "nothing stored is read again"
    assert _events(db) == 60
    fresh = tmp_path / "fresh"
    fresh.mkdir()
    run(fresh, [path])
    assert table_digest(fresh / "w.duckdb") == table_digest(db)


def test_a_run_left_running_by_a_kill_is_marked_interrupted(tmp_path: Path) -> None:
    path = tmp_path / "a.jsonl"
    path.write_bytes(signed_body(event(1)) + b"\n")
    first = run(tmp_path, [path])
    db = tmp_path / "w.duckdb"
    con = duckdb.connect(str(db))
    con.execute("UPDATE ingest_runs SET status = 'running', finished_at = NULL")
    con.close()
    second = run(tmp_path, [path])
    got = dict(rows(db, "SELECT ingest_run_id, status FROM ingest_runs"))
    assert got == {first["runId"]: "interrupted", second["runId"]: "ok"}
