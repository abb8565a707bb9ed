"""Hostile and odd bodies never block an ingest and never lie: each is quarantined with its
reason, and the rest of the file loads (decisions D-ONE-READING and D-EVENT-TIME)."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from convo_analytics.sandbox._model import iso
from convo_analytics.webhooks import IngestOptions
from convo_analytics.webhooks._body import read_body, timestamp_problem
from webhook_support import SECRET, delivery, event, hostile_bodies, rows, run, signed_body

MIB = 1 << 20


def _big_event(n: int, size: int) -> bytes:
    """A bare event body of about ``size`` bytes, signed as the sandbox signs."""
    e = event(n)
    e["data"]["text"] = "x" * size
    return signed_body(e)


@pytest.mark.parametrize("gzipped", [False, True])
def test_events_of_16_and_50_mib_are_quarantined_too_large_and_the_rest_loads(
    tmp_path: Path, gzipped: bool
) -> None:
    lines = [
        delivery(event(1)),
        _big_event(2, 16 * MIB) + b"\n",
        delivery(event(3)),
        _big_event(4, 50 * MIB) + b"\n",
        delivery(event(5)),
    ]
    data = b"".join(lines)
    path = tmp_path / ("big.jsonl.gz" if gzipped else "big.jsonl")
    path.write_bytes(gzip.compress(data, compresslevel=1) if gzipped else data)
    counts = run(tmp_path, [path])
    assert (counts["read"], counts["loaded"], counts["quarantined"]) == (5, 3, {"too_large": 2})
    db = tmp_path / "w.duckdb"
    quarantined = rows(db, "SELECT source_line, line IS NULL, length(excerpt), detail "
                       "FROM quarantine ORDER BY 1")  # fmt: skip
    assert [(r[0], r[1], r[2]) for r in quarantined] == [(2, True, 2000), (4, True, 2000)]
    assert "16,777," in quarantined[0][3] and "webhooks.max_line_bytes" in quarantined[0][3]
    # the next run reads nothing again; a replay with a higher limit loads them from the file
    assert run(tmp_path, [path])["read"] == 0


def test_events_just_under_the_line_limit_and_many_long_ones_load(tmp_path: Path) -> None:
    """DuckDB's memory for a chunk grows with its long strings: a line over 1 MiB goes to it
    alone and long lines in small chunks (D-LINE-LIMIT), so that none of these fails."""
    lines = [_big_event(n, 8 * MIB - 400) + b"\n" for n in range(3)]
    lines += [_big_event(10 + n, 30_000) + b"\n" for n in range(400)]
    lines += [signed_body(event(500 + n)) + b"\n" for n in range(50)]
    path = tmp_path / "a.jsonl"
    path.write_bytes(b"".join(lines))
    counts = run(tmp_path, [path])
    assert (counts["read"], counts["loaded"], counts["quarantined"]) == (453, 453, {})
    length = rows(tmp_path / "w.duckdb", "SELECT max(length(payload::VARCHAR)) FROM events")
    assert length[0][0] > 8 * MIB - 400


def test_duplicate_keys_non_finite_numbers_and_bad_times_are_quarantined_at_ingest(
    tmp_path: Path,
) -> None:
    cases = hostile_bodies()
    lines = [delivery(event(1))]
    for body, _ in cases.values():
        # each as a bare body and as an archived delivery
        lines.append(body + b"\n")
        lines.append(delivery(event(0), key=f"k{len(lines)}", body=body, header_sig=False))
    lines.append(delivery(event(2)))
    path = tmp_path / "hostile.jsonl"
    path.write_bytes(b"".join(lines))
    counts = run(tmp_path, [path])
    expected: dict[str, int] = {}
    for _, reason in cases.values():
        expected[reason] = expected.get(reason, 0) + 2
    assert counts["quarantined"] == expected
    assert counts["loaded"] == 2 and counts["read"] == len(lines)
    db = tmp_path / "w.duckdb"
    assert rows(db, "SELECT count(*) FROM events WHERE workspace_id = 'ws_evil'") == [(0,)]
    assert rows(db, "SELECT count(*) FROM guardrail_events") == [(0,)]
    assert rows(db, "SELECT count(*) FROM message_traces WHERE NOT isfinite(confidence)") == [(0,)]
    got = rows(db, "SELECT reason, count(*) FROM quarantine WHERE line IS NOT NULL GROUP BY 1")
    assert dict(got) == expected, "every quarantined line is kept whole for a replay"


def test_an_event_is_measured_against_its_receipt_not_the_ingest() -> None:
    """An event dated two days after its receipt is in the future even when ingested later."""
    e = event(1)
    e["timestamp"] = "2026-09-23T15:00:00.000Z"
    path_received = iso(1_790_000_000_500)  # 2026-09-21T14:13:20.500Z
    from datetime import UTC, datetime, timedelta

    from convo_analytics.webhooks._body import received_reference

    reference = received_reference(path_received, datetime.now(UTC))
    assert timestamp_problem(e, reference, timedelta(hours=24))[0] == "future_timestamp"  # type: ignore[index]
    assert timestamp_problem(e, reference, timedelta(hours=49)) is None
    e["timestamp"] = 1_790_000_000  # epoch seconds: UTC by definition
    assert timestamp_problem(e, reference, timedelta(hours=24)) is None


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        (b'{"a":1,"b":{"c":[{"d":1,"d":1}]}}', "duplicate_keys"),
        (b'{"a":1,"\\u0061":1}', "duplicate_keys"),
        (b'{"a":[1e400]}', "non_finite_number"),
        (b'{"a":' + b"9" * 400 + b"}", "non_finite_number"),
        (b'{"a":NaN}', "non_finite_number"),
        (b'{"a":"\xff"}', "bad_encoding"),
        (b'{"a":"\\ud800"}', "malformed_body"),
        (b'{"a":1', "malformed_body"),
        (b'{"a": 1, "b": [1.5, "\\u00e9"]}', None),
    ],
)
def test_the_strict_reading_of_a_body(text: bytes, reason: str | None) -> None:
    check = read_body(text)
    assert check.problem == reason
    if reason is None:
        assert check.parsed == json.loads(text)


def test_the_options_limit_applies_and_a_replay_with_a_higher_one_loads(tmp_path: Path) -> None:
    from convo_analytics.webhooks._quarantine import replay

    path = tmp_path / "a.jsonl"
    path.write_bytes(_big_event(1, 5000) + b"\n" + signed_body(event(2)) + b"\n")
    counts = run(tmp_path, [path], max_line_bytes=4096)
    assert counts["quarantined"] == {"too_large": 1}
    db = tmp_path / "w.duckdb"
    same = replay(db, [SECRET], IngestOptions(max_line_bytes=4096)).to_json()
    assert (same["read"], same["quarantined"]) == (1, {"too_large": 1})
    more = replay(db, [SECRET], IngestOptions(max_line_bytes=8192)).to_json()
    assert (more["read"], more["loaded"], more["quarantined"]) == (1, 1, {})
    assert rows(db, "SELECT resolution FROM quarantine") == [("loaded",)]
