"""Webhook events as real senders write them, a wrong secret that says so, and the quarantine's
life cycle: list, replay, purge."""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import orjson
import pytest

from convo_analytics.cli import main
from convo_analytics.warehouse._tables import SCHEMA_VERSION
from webhook_support import (
    OLD_SECRET,
    SECRET,
    delivery,
    event,
    rows,
    run,
    signed_body,
    signed_like,
    table_digest,
)

PYTHON = {"separators": (", ", ": ")}


def _mixed_archive() -> tuple[bytes, dict[str, Any]]:
    """Events as several senders write them, retries, re-serialised replays and hostile lines;
    with the counts an ingest must find."""
    e = [event(n) for n in range(12)]
    e[9]["data"]["text"] = "naïve café ✓"
    naive, future = event(40), event(41)
    naive["timestamp"] = "2026-09-21T14:13:20"
    future["timestamp"] = "2100-01-01T00:00:00Z"
    big = event(42)
    big["data"]["text"] = "y" * 70_000
    lines = [
        *(delivery(x) for x in e[:5]),  # the sandbox's form
        delivery(e[0], attempt=2),  # retries: the same bytes
        delivery(e[1], attempt=3),
        signed_like(e[5], position=0, **PYTHON),  # the member first, Python's separators
        signed_like(e[6], position=2, **PYTHON),  # in the middle
        signed_like(e[7], position=5, **PYTHON),  # last
        delivery(e[8], key="k8", header_sig=False, body=signed_like(e[8], position=3, indent=2)),
        signed_like(e[9], position=0, sort_keys=True, ensure_ascii=True),
        delivery(e[10], secret=OLD_SECRET),  # signed with the secret before the rotation
        signed_like(e[11], position=1, separators=(",", ":"), ensure_ascii=False),
        # re-serialised replays, no idempotency key: the same events, other bytes
        signed_like(e[5], position=3, separators=(",", ":"), sort_keys=True),
        signed_like(e[0], position=1, **PYTHON),
        # hostile and broken lines
        b'{"event":"x","event":"y","timestamp":"2026-09-21T14:13:20Z","signature":"s"}',
        signed_body(naive),
        signed_body(future),
        signed_body(big),
        signed_like(e[3], secret=b"somebody-else", position=0),
        orjson.dumps(event(43)),
        b'{"receivedAt": "x", "headers": {',
        b"",
    ]
    data = b"".join(line if line.endswith(b"\n") else line + b"\n" for line in lines)
    expected = {
        "read": len(lines),
        "loaded": 12,
        "duplicates": 4,
        "quarantined": {
            "duplicate_keys": 1,
            "timestamp_without_offset": 1,
            "future_timestamp": 1,
            "too_large": 1,
            "bad_signature": 1,
            "unsigned": 1,
            "malformed_json": 1,
            "empty_line": 1,
        },
    }
    return data, expected


def test_a_mixed_archive_has_exact_counts_and_ingesting_it_twice_changes_nothing(
    tmp_path: Path,
) -> None:
    data, expected = _mixed_archive()
    path = tmp_path / "mixed.jsonl"
    path.write_bytes(data)
    first = run(tmp_path, [path], max_line_bytes=65_536)
    got = {k: first[k] for k in expected}
    assert got == expected
    assert first["signatureReadings"] == {"stripped": 12}, "the member cut out of the text"
    db = tmp_path / "w.duckdb"
    assert rows(db, "SELECT secret_index, count(*) FROM events GROUP BY 1 ORDER BY 1") == [
        (0, 11),
        (1, 1),
    ]
    before = table_digest(db)
    again = run(tmp_path, [path], max_line_bytes=65_536, full=True)
    assert (again["loaded"], again["duplicates"]) == (0, expected["loaded"] + 4)
    assert again["quarantined"] == expected["quarantined"]
    assert table_digest(db) == before


def _cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_a_wrong_secret_exits_1_with_one_line_and_a_replay_with_the_right_one_loads_all(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    for name in ("CONVO_CONFIG", "CONVO_WEBHOOK_SECRET_FILE", "CONVO_DB"):
        monkeypatch.delenv(name, raising=False)
    events = [event(n) for n in range(30)]
    lines = [delivery(e) for e in events] + [delivery(e, attempt=2) for e in events[:5]]
    lines += [signed_like(e, position=0, **PYTHON) + b"\n" for e in events[5:8]]
    (tmp_path / "archive").mkdir()
    (tmp_path / "archive" / "deliveries-2026-09-21.jsonl").write_bytes(b"".join(lines))
    db = str(tmp_path / "w.duckdb")
    wrong = "whsec_this_is_not_the_secret"
    monkeypatch.setenv("CONVO_WEBHOOK_SECRET", wrong)
    code, out, err = _cli(capsys, "webhooks", "ingest", "archive", "--db", db, "--json")
    assert code == 1
    assert err.splitlines() == [
        "error: 38 of 38 lines failed the signature check with the 1 configured secret: "
        "check CONVO_WEBHOOK_SECRET"
    ]
    assert wrong not in out + err and SECRET.decode() not in out + err
    assert orjson.loads(out)["quarantined"] == {"bad_signature": 38}
    assert rows(Path(db), "SELECT status, error FROM ingest_runs")[0][0] == "failed"

    code, out, err = _cli(capsys, "webhooks", "quarantine", "list", "--db", db, "--json")
    listed = orjson.loads(out)
    assert code == 0 and listed["open"] == 38
    assert {(r["reason"], r["file"].rsplit("/", 1)[-1]) for r in listed["rows"]} == {
        ("bad_signature", "deliveries-2026-09-21.jsonl")
    }

    monkeypatch.setenv("CONVO_WEBHOOK_SECRET", f"{wrong},{SECRET.decode()}")  # the rotation
    code, out, err = _cli(capsys, "webhooks", "quarantine", "replay", "--db", db, "--json")
    replayed = orjson.loads(out)
    assert code == 0, err
    assert (replayed["read"], replayed["loaded"], replayed["duplicates"]) == (38, 30, 8)
    assert replayed["quarantined"] == {}
    assert rows(Path(db), "SELECT count(*) FROM events") == [(30,)]
    assert rows(Path(db), "SELECT resolution, count(*) FROM quarantine GROUP BY 1 ORDER BY 1") == [
        ("duplicate", 8),
        ("loaded", 30),
    ]
    code, out, err = _cli(capsys, "webhooks", "quarantine", "list", "--db", db, "--json")
    assert orjson.loads(out) == {"rows": [], "open": 0}
    again = _cli(capsys, "webhooks", "quarantine", "replay", "--db", db, "--json")
    assert orjson.loads(again[1])["read"] == 0, "a resolved row is never replayed again"

    from convo_analytics.dashboard._queries import pipeline_status
    from convo_analytics.warehouse import open_warehouse

    con = open_warehouse(Path(db), read_only=True)
    try:
        assert pipeline_status(con)["quarantine"].height == 0, "the Pipeline page: none open"
    finally:
        con.close()

    tomorrow = (datetime.now(UTC) + timedelta(days=1)).date().isoformat()
    code, out, err = _cli(capsys, "webhooks", "quarantine", "purge", "--before", "soon",
                          "--db", db)  # fmt: skip
    assert code == 2 and "YYYY-MM-DD" in err
    code, out, err = _cli(capsys, "webhooks", "quarantine", "purge", "--before", tomorrow,
                          "--db", db, "--json")  # fmt: skip
    assert orjson.loads(out) == {
        "before": tomorrow, "removed": 38, "open": 0, "byReason": {"bad_signature": 38}
    }  # fmt: skip
    assert rows(Path(db), "SELECT count(*) FROM quarantine") == [(0,)]
    assert rows(Path(db), "SELECT rows_removed, open_rows_removed FROM quarantine_purges") == [
        (38, 0)
    ]


def test_a_few_bad_signatures_are_quarantined_without_the_alarm(tmp_path: Path) -> None:
    path = tmp_path / "a.jsonl"
    path.write_bytes(
        delivery(event(1)) + delivery(event(2)) + delivery(event(3), secret=b"another-one")
    )
    counts = run(tmp_path, [path])
    assert counts["signatureAlarm"] is None and counts["quarantined"] == {"bad_signature": 1}
    share = run(tmp_path / "strict", [path], alarm_share=0.2)
    assert share["signatureAlarm"] == (
        "1 of 3 lines failed the signature check with the 2 configured secrets: "
        "check CONVO_WEBHOOK_SECRET"
    )


def test_the_nightly_ingest_step_fails_on_a_wrong_secret(tmp_path: Path) -> None:
    from convo_analytics.config import load_settings
    from convo_analytics.pipeline import RunContext, StepFailed, load_steps

    archive = tmp_path / "hooks"
    archive.mkdir()
    (archive / "deliveries-2026-09-21.jsonl").write_bytes(
        b"".join(delivery(event(n)) for n in range(4))
    )
    steps = {s.name: s for s in load_steps(Path(__file__).parents[1] / "pipelines/nightly.py")}
    env = {"CONVO_WEBHOOK_SECRET": "whsec_wrong_one", "CONVO_WEBHOOK_ARCHIVE_DIR": str(archive)}
    settings = load_settings(None, {}, env)
    ctx = RunContext(settings=settings, run_id="r1", db_path=tmp_path / "w.duckdb")
    with pytest.raises(StepFailed, match="4 of 4 lines failed the signature check") as failed:
        steps["webhook_ingest"].run(ctx)
    assert "whsec_wrong_one" not in str(failed.value)
    env["CONVO_WEBHOOK_SECRET"] = SECRET.decode()
    ok = steps["webhook_ingest"].run(RunContext(load_settings(None, {}, env), "r2", ctx.db_path))
    assert (ok["read"], ok["skipped"], ok["quarantine_open"]) == (0, 1, 4)


def test_a_schema_3_warehouse_upgrades_in_place(tmp_path: Path) -> None:
    """Events stored under their signed bytes' hash are still recognised after the upgrade;
    quarantine rows made before keep their place and replay from their file."""
    import duckdb

    from convo_analytics.warehouse import open_warehouse
    from convo_analytics.webhooks import strip_signature
    from convo_analytics.webhooks._body import content_hash
    from convo_analytics.webhooks._quarantine import replay

    other = b"whsec_rotated_in_later"
    bodies = [signed_body(event(n)) for n in range(5)]
    late = signed_body(event(5), secret=other)
    path = tmp_path / "export.jsonl"
    path.write_bytes(b"".join(b + b"\n" for b in [*bodies, late]))
    assert run(tmp_path, [path], secrets=(SECRET,))["loaded"] == 5
    db = tmp_path / "w.duckdb"
    con = duckdb.connect(str(db))  # as schema 3 left it
    for body in bodies:
        canonical = content_hash(orjson.loads(body))
        old = hashlib.sha256(strip_signature(body) or b"").hexdigest()
        con.execute("UPDATE event_keys SET key = ? WHERE key = ?", [old, canonical])
    for column in ("line_offset", "line", "resolved_at", "resolution", "resolved_by"):
        con.execute(f"ALTER TABLE quarantine DROP COLUMN {column}")
    con.execute("DROP TABLE ingest_files")
    con.execute("DELETE FROM schema_version")
    con.execute("INSERT INTO schema_version VALUES (3, now())")
    con.close()
    open_warehouse(db).close()
    assert rows(db, "SELECT max(version) FROM schema_version") == [(SCHEMA_VERSION,)]
    assert rows(db, "SELECT count(*) FROM event_keys") == [(10,)], "old and canonical keys"
    assert rows(db, "SELECT source_line, line IS NULL, resolved_at FROM quarantine") == [
        (6, True, None)
    ]
    again = run(tmp_path, [path], secrets=(SECRET,))  # no record of the file: read whole
    assert (again["loaded"], again["duplicates"]) == (0, 5)
    replayed = replay(db, [SECRET, other]).to_json()
    assert (replayed["read"], replayed["loaded"]) == (1, 1)
    assert rows(db, "SELECT count(*) FROM quarantine WHERE resolved_at IS NULL") == [(0,)]
