"""Webhook archive ingest: every line ends in exactly one outcome, and twice changes nothing."""

from __future__ import annotations

import gzip
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import duckdb
import orjson
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from convo_analytics.sandbox._model import iso
from convo_analytics.webhooks import archive_line, sign
from convo_analytics.webhooks._body import content_hash
from webhook_support import (
    OLD_SECRET,
    SECRET,
    delivery,
    event,
    run,
    signed_body,
    table_digest,
)


def test_both_line_shapes_load_and_retries_are_recognised(tmp_path: Path) -> None:
    archive = tmp_path / "a.jsonl"
    bare = tmp_path / "export.jsonl.gz"
    archive.write_bytes(delivery(event(1)) + delivery(event(1), attempt=2) + delivery(event(2)))
    bare.write_bytes(gzip.compress(signed_body(event(3)) + b"\n" + signed_body(event(2)) + b"\n"))
    counts = run(tmp_path, [archive, bare])
    assert counts["read"] == 5
    assert (counts["loaded"], counts["duplicates"], counts["quarantined"]) == (3, 2, {})
    assert counts["signatureReadings"] == {"stripped": 3}


def test_set_a_and_set_b_names_and_escalation_pairs_reconcile(tmp_path: Path) -> None:
    lead_a = event(
        10,
        "lead.qualified",
        leadId="lead_1",
        leadScore=81.5,
        intent="pricing",
        contactFields={"email": "a@x.example"},
        transcriptUrl="https://t",
    )
    lead_b = event(
        11,
        "lead.qualified",
        leadId="lead_2",
        qualificationScore=77.0,
        intent="demo",
        email="b@x.example",
        conversationUrl="https://c",
    )
    created = event(
        12,
        "escalation.created",
        escalationId="esc_1",
        reasonCode="complaint",
        destination="helpdesk",
        owner="tier2",
        priority="urgent",
        origin="manual",
    )
    escalated = event(
        12,
        "conversation.escalated",
        escalationId="esc_1",
        reason="complaint",
        destination="helpdesk",
    )
    escalated["data"]["messageId"] = "x12"
    lone = event(13, "conversation.escalated", reason="user_requested", destination="crm")
    lone["data"].pop("messageId")
    unknown = event(14, "conversation.transferred", note="kept")
    path = tmp_path / "a.jsonl"
    path.write_bytes(
        b"".join(
            delivery(e, key=f"k{i}")
            for i, e in enumerate((lead_a, lead_b, created, escalated, lone, unknown))
        )
    )
    assert run(tmp_path, [path])["loaded"] == 6
    con = duckdb.connect(str(tmp_path / "w.duckdb"), read_only=True)
    leads = con.execute(
        "SELECT lead_id, score, email, conversation_url FROM lead_qualifications ORDER BY lead_id"
    ).fetchall()
    assert leads == [
        ("lead_1", 81.5, "a@x.example", "https://t"),
        ("lead_2", 77.0, "b@x.example", "https://c"),
    ]
    esc = {
        row[0]: row[1:]
        for row in con.execute(
            "SELECT escalation_key, reason_code, owner, seen_created, seen_escalated "
            "FROM escalations"
        ).fetchall()
    }
    assert len(esc) == 2, "one fact per escalation"
    assert esc.pop("esc_1") == ("complaint", "tier2", True, True)
    ((fallback_key, lone_row),) = esc.items()
    assert fallback_key.startswith("conv_6|"), "no escalationId: keyed by conversation and time"
    assert lone_row == ("user_requested", None, False, True)
    kept = con.execute("SELECT count(*) FROM events WHERE event_type = 'conversation.transferred'")
    assert kept.fetchone() == (1,)


def test_the_first_event_of_a_subject_fills_its_row_in_a_file_and_across_runs(
    tmp_path: Path,
) -> None:
    """Other events about the same message (other content and key) are stored, not typed."""

    def about_msg_1(n: int) -> dict[str, Any]:
        e = event(n)
        e["data"]["messageId"] = "msg_1"
        return e

    first = tmp_path / "a.jsonl"
    first.write_bytes(b"".join(delivery(about_msg_1(n), key=f"k{n}") for n in range(1, 6)))
    later = tmp_path / "b.jsonl"
    later.write_bytes(delivery(about_msg_1(0), key="k0") + delivery(event(7)))
    assert run(tmp_path, [first])["loaded"] == 5
    assert run(tmp_path, [later])["loaded"] == 2
    con = duckdb.connect(str(tmp_path / "w.duckdb"), read_only=True)
    rows = con.execute(
        "SELECT message_id, event_id, latency_ms FROM message_traces ORDER BY 1"
    ).fetchall()
    assert rows == [("msg_1", "k1", 101), ("msg_7", "evt_msg_7", 107)]
    assert con.execute("SELECT count(*) FROM events").fetchone() == (7,)


def test_timestamps_with_any_offset_become_utc(tmp_path: Path) -> None:
    e = event(20)
    e["timestamp"] = "2026-11-21T01:30:00.250-05:00"
    path = tmp_path / "a.jsonl"
    path.write_bytes(delivery(e, received="2026-11-21T06:30:01.000Z"))
    assert run(tmp_path, [path])["loaded"] == 1
    con = duckdb.connect(str(tmp_path / "w.duckdb"), read_only=True)
    got = con.execute("SELECT strftime(occurred_at, '%Y-%m-%dT%H:%M:%S.%g') FROM events")
    assert got.fetchone() == ("2026-11-21T06:30:00.250",)


def test_the_raw_body_reading_and_rotated_secrets_verify(tmp_path: Path) -> None:
    body = orjson.dumps(event(30))  # a service that signs the raw body, header only
    line = archive_line(
        body,
        {"x-hub-signature-256": sign(OLD_SECRET, body), "idempotency-key": "k30"},
        iso(1_790_000_000_000),
    )
    path = tmp_path / "a.jsonl"
    path.write_bytes(line)
    counts = run(tmp_path, [path])
    assert counts["loaded"] == 1 and counts["signatureReadings"] == {"raw": 1}
    con = duckdb.connect(str(tmp_path / "w.duckdb"), read_only=True)
    assert con.execute("SELECT secret_index, signature_source FROM events").fetchone() == (
        1,
        "x-hub-signature-256",
    )


def test_bad_lines_are_quarantined_with_file_and_line_and_the_rest_loads(tmp_path: Path) -> None:
    forged = delivery(event(41), secret=b"not-our-secret-at-all")
    unsigned = archive_line(orjson.dumps(event(42)), {"idempotency-key": "k42"}, "x")
    lines = [
        delivery(event(40)),
        b"{not json\n",
        b"\xff\xfe garbage\n",
        forged,
        unsigned,
        b"[1, 2]\n",
        b"\n",
        delivery(event(43)),
    ]
    path = tmp_path / "mixed.jsonl"
    path.write_bytes(b"".join(lines))
    counts = run(tmp_path, [path])
    assert counts["loaded"] == 2 and counts["read"] == 8
    assert counts["quarantined"] == {
        "bad_encoding": 1,
        "bad_signature": 1,
        "empty_line": 1,
        "malformed_json": 1,
        "not_an_event": 1,
        "unsigned": 1,
    }
    con = duckdb.connect(str(tmp_path / "w.duckdb"), read_only=True)
    rows = con.execute("SELECT source_file, source_line, reason FROM quarantine ORDER BY 2")
    assert [(r[1], r[2]) for r in rows.fetchall()] == [
        (2, "malformed_json"),
        (3, "bad_encoding"),
        (4, "bad_signature"),
        (5, "unsigned"),
        (6, "not_an_event"),
        (7, "empty_line"),
    ]
    assert path.read_bytes() == b"".join(lines), "archives are never modified"


def test_a_truncated_gzip_keeps_what_came_before(tmp_path: Path) -> None:
    whole = gzip.compress(b"".join(delivery(event(i)) for i in range(200)))
    path = tmp_path / "cut.jsonl.gz"
    path.write_bytes(whole[: len(whole) * 2 // 3])
    counts = run(tmp_path, [path])
    assert counts["quarantined"] == {"truncated_gzip": 1}
    assert 0 < counts["loaded"] < 200
    assert counts["read"] == counts["loaded"] + 1


# -- the property: any mix of lines ------------------------------------------------------

LINE_KINDS = st.sampled_from(
    ["valid", "retry", "resigned", "replay", "malformed", "truncated", "forged"]
)


def _line(kind: str, n: int) -> tuple[bytes, str]:
    e = event(n)
    if kind == "valid":
        return delivery(e), "new"
    if kind == "retry":  # the same delivery again, a later attempt
        return delivery(e, attempt=2), "dup"
    if kind == "resigned":  # the same event signed with the previous secret, as a bare body
        return signed_body(e, OLD_SECRET) + b"\n", "dup"
    if kind == "replay":  # same content, another idempotency key
        return delivery(e, key=f"replay-{n}"), "dup"
    if kind == "forged":
        return delivery(e, secret=b"intruder-secret-xyz"), "quarantine"
    whole = delivery(e)
    if kind == "truncated":
        return whole[: len(whole) // 2] + b"\n", "quarantine"
    return b'{"receivedAt": "x", "headers": {' + str(n).encode() + b"\n", "quarantine"


#: Every kind of line, each where it meets the others: after an event was loaded (a
#: duplicate, or quarantined), before it (a retry or a replay read first loads it), a
#: forgery before the genuine one; plain and gzipped.
EVERY_KIND = [("valid", 1), ("retry", 1), ("resigned", 1), ("replay", 1), ("forged", 1),
              ("truncated", 1), ("malformed", 1), ("retry", 2), ("valid", 2), ("replay", 3),
              ("resigned", 3), ("forged", 4), ("valid", 4), ("resigned", 5),
              ("valid", 5)]  # fmt: skip


@settings(max_examples=8, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    plan=st.lists(st.tuples(LINE_KINDS, st.integers(0, 12)), min_size=1, max_size=40),
    gzipped=st.booleans(),
)
@example(plan=EVERY_KIND, gzipped=False)
@example(plan=EVERY_KIND[::-1], gzipped=True)
def test_any_mix_of_lines_ends_in_exactly_one_outcome_and_twice_changes_nothing(
    tmp_path_factory: pytest.TempPathFactory, plan: list[tuple[str, int]], gzipped: bool
) -> None:
    tmp = tmp_path_factory.mktemp("mix")
    seen: set[int] = set()
    data = b""
    expected = {"new": 0, "dup": 0, "quarantine": 0}
    for kind, n in plan:
        line, outcome = _line(kind, n)
        if outcome != "quarantine":
            outcome = "dup" if n in seen else "new"
            seen.add(n)
        expected[outcome] += 1
        data += line
    path = tmp / ("mix.jsonl.gz" if gzipped else "mix.jsonl")
    path.write_bytes(gzip.compress(data) if gzipped else data)
    first = run(tmp, [path])
    assert first["read"] == len(plan)
    assert first["read"] == first["loaded"] + first["duplicates"] + sum(
        first["quarantined"].values()
    )
    assert (first["loaded"], first["duplicates"], sum(first["quarantined"].values())) == (
        expected["new"],
        expected["dup"],
        expected["quarantine"],
    )
    before = table_digest(tmp / "w.duckdb")
    second = run(tmp, [path])  # the file is remembered: nothing new to read
    assert (second["read"], second["bytesRead"], second["filesSkipped"]) == (0, 0, 1)
    again = run(tmp, [path], full=True)  # read whole again: every event recognised
    assert again["loaded"] == 0
    assert again["duplicates"] == expected["new"] + expected["dup"]
    assert sum(again["quarantined"].values()) == expected["quarantine"]
    assert table_digest(tmp / "w.duckdb") == before


# -- the common-case shortcut and the block reader ---------------------------------------


def _shapes() -> bytes:
    """Lines of every shape the general path decides: other readings, secrets and headers."""
    e = [event(100 + n) for n in range(8)]
    raw_body = orjson.dumps(e[0])
    b1, b2, b3 = (signed_body(event(200 + n)) for n in range(3))
    rest = dict(e[2])
    canonical = orjson.dumps(
        {"signature": sign(SECRET, orjson.dumps(rest, option=orjson.OPT_SORT_KEYS)), **rest}
    )
    return b"".join(
        [
            delivery(e[3]),  # the common case
            delivery(e[3], attempt=2),
            signed_body(e[4]) + b"\r\n",  # bare body, CRLF
            delivery(e[5], secret=OLD_SECRET),  # rotated secret
            delivery(e[6], header_sig=False),  # field only
            archive_line(raw_body, {"x-signature": sign(SECRET, raw_body)}, "t"),
            archive_line(b1, {"X-Convo-Signature": orjson.loads(b1)["signature"]}, "t"),
            archive_line(b2, {"x-convo-signature": "sha256=" + "0" * 64}, "t"),
            archive_line(b3, {"x-signature": orjson.loads(b3)["signature"] + " "}, "t"),
            canonical + b"\n",
            delivery(e[7], secret=b"forged-secret"),
            *_odd_members(),
            signed_body(e[7]),  # last line, no newline
        ]
    )


_NULL_MEMBERS = {**event(301), "headers": None, "body": None}


def _odd_members() -> list[bytes]:
    """Lines other archives may hold: null members, headers whose values are not text."""
    b4 = signed_body(event(300))
    sig4 = orjson.loads(b4)["signature"]
    numbers = {"x-convo-signature": sig4, "idempotency-key": 77, "x-convo-attempt": 3}
    return [
        orjson.dumps({"receivedAt": 5, "headers": numbers, "body": b4.decode()}) + b"\n",
        # null headers and body members: a bare event body, as if they were absent
        signed_body(_NULL_MEMBERS) + b"\n",
    ]


def test_the_common_case_shortcut_stores_what_the_general_path_stores(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from convo_analytics.webhooks._ingest import Ingester

    path = tmp_path / "shapes.jsonl"
    path.write_bytes(_shapes())
    fast = run(tmp_path / "fast", [path])
    assert fast["signatureReadings"] == {"canonical": 1, "raw": 1, "stripped": 10}
    assert (fast["duplicates"], fast["quarantined"]) == (1, {"bad_signature": 1})
    monkeypatch.setattr(Ingester, "shortcut", False)
    general = run(tmp_path / "general", [path])
    assert {**fast, "runId": "", "durationSeconds": 0} == {
        **general,
        "runId": "",
        "durationSeconds": 0,
    }
    assert table_digest(tmp_path / "fast" / "w.duckdb") == table_digest(
        tmp_path / "general" / "w.duckdb"
    )
    with duckdb.connect(str(tmp_path / "fast" / "w.duckdb"), read_only=True) as con:
        odd = con.execute(
            "SELECT idempotency_key, attempt, signature_source, received_at IS NULL "
            "FROM events WHERE event_id IN ('77', 'sha256:' || ?) ORDER BY 1 NULLS LAST",
            [content_hash(_NULL_MEMBERS)],
        ).fetchall()
    assert odd == [("77", 3, "x-convo-signature", True), (None, None, "field", True)]


@settings(max_examples=30, deadline=None)
@given(cut=st.floats(0.0, 1.0), crlf=st.booleans(), ends=st.booleans())
def test_the_block_reader_gives_the_lines_a_line_by_line_read_gives(
    tmp_path_factory: pytest.TempPathFactory, cut: float, crlf: bool, ends: bool
) -> None:
    from convo_analytics.webhooks import _lines

    lines = [delivery(event(i)).replace(b"\n", b"\r\n" if crlf else b"\n") for i in range(300)]
    data = b"".join(lines) if ends else b"".join(lines)[:-1]
    whole = gzip.compress(data)
    path = tmp_path_factory.mktemp("cut") / "a.jsonl.gz"
    path.write_bytes(whole[: int(len(whole) * cut)])
    expected: list[bytes] = []
    problem = None
    try:
        with gzip.open(path, "rb") as f:
            expected.extend(raw.removesuffix(b"\n") for raw in f)
    except (EOFError, gzip.BadGzipFile) as exc:
        problem = f"the gzip stream ends early or is damaged ({exc})"
    got: list[bytes] = []
    ended = []
    for block, end in _lines.read_blocks(path):
        got.extend(block.lines() if block is not None else [])
        ended.append(end)
    assert got == expected
    assert ended[-1] == problem


def test_a_gzip_cut_to_its_first_byte_is_a_damaged_gzip(tmp_path: Path) -> None:
    """Not a one-line plain file: the name and the magic's first byte say what it was."""
    from convo_analytics.webhooks import _lines

    cut = tmp_path / "a.jsonl.gz"
    cut.write_bytes(gzip.compress(b'{"event": "x"}\n')[:1])
    blocks = list(_lines.read_blocks(cut))
    assert [block for block, _ in blocks] == [None]
    assert "gzip" in str(blocks[-1][1])
    plain = tmp_path / "b.jsonl.gz"  # plain text misnamed .gz still reads as text
    plain.write_bytes(b'{"a": 1}\n')
    read = [(block.lines() if block else None, end) for block, end in _lines.read_blocks(plain)]
    assert read == [([b'{"a": 1}'], None), (None, None)]


def test_a_run_hands_the_gil_over_often_and_restores_the_interval(tmp_path: Path) -> None:
    """While a run reads, the loader thread waits at most SWITCH_INTERVAL for the GIL
    between its statements; the interval is Python's again afterwards, also after a
    failure."""
    import sys

    from convo_analytics.webhooks import IngestOptions, _run

    before = sys.getswitchinterval()
    seen: list[float] = []

    def work(con: Any, began: Any, loader: Any) -> None:
        seen.append(sys.getswitchinterval())
        raise RuntimeError("stopped")

    result = _run.IngestResult(_run.new_run_id())
    with pytest.raises(RuntimeError, match="stopped"):
        _run.recorded_run(tmp_path / "w.duckdb", result, 1, IngestOptions(), "HINT", work)
    assert seen and seen[0] <= _run.SWITCH_INTERVAL < before
    assert sys.getswitchinterval() == before


def test_a_chunks_columns_come_from_the_c_librarys_allocator(tmp_path: Path) -> None:
    """The staged Arrow columns are allocated by the system pool (freed on the loader
    thread, mimalloc's would keep them: D-INGEST-MEMORY), not pyarrow's default."""
    import pyarrow as pa

    from convo_analytics.webhooks._files import plan_files
    from convo_analytics.webhooks._ingest import Ingester

    path = tmp_path / "a.jsonl"
    path.write_bytes(b"".join(delivery(event(i)) for i in range(2_000)))
    system, default = pa.system_memory_pool(), pa.default_memory_pool()
    if system.backend_name == default.backend_name:  # pragma: no cover - platform default
        default = pa.mimalloc_memory_pool()
    before = (system.bytes_allocated(), default.bytes_allocated())
    ingester = Ingester([SECRET], datetime.now(UTC))
    (plan,) = plan_files([path], {}, full=True)
    chunks = list(ingester.read_file(plan, "run"))
    staged = [chunk.tables(1)[0] for chunk in chunks]
    body = sum(t.column("body").nbytes for t in staged)
    assert body > 400_000
    assert system.bytes_allocated() - before[0] >= body
    assert default.bytes_allocated() - before[1] < body // 10


def test_duplicates_across_overlapped_chunks_are_counted_as_in_one_chunk(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Chunks of 16 lines stored on the loader thread while the next ones are read: a
    retry 20 lines after its first delivery (always in a later chunk, often one still
    waiting to be stored) is a duplicate, and the tables are those of one chunk."""
    from convo_analytics.webhooks import _lines as reader

    lines = []
    for i in range(80):
        lines.append(delivery(event(i)))
        if i >= 20:
            lines.append(delivery(event(i - 20), attempt=2))
    path = tmp_path / "a.jsonl"
    path.write_bytes(b"".join(lines))
    whole = run(tmp_path / "one", [path])
    monkeypatch.setattr(reader, "BLOCK", 2048)  # a few lines a block, so chunks of 16 lines
    chunked = run(tmp_path / "many", [path], chunk_lines=16)
    assert (chunked["read"], chunked["loaded"], chunked["duplicates"]) == (140, 80, 60)
    assert {**chunked, "runId": "", "durationSeconds": 0} == {
        **whole,
        "runId": "",
        "durationSeconds": 0,
    }
    assert table_digest(tmp_path / "one" / "w.duckdb") == table_digest(
        tmp_path / "many" / "w.duckdb"
    )
