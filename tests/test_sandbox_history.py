"""The generated history: reproducible, realistic, and consistent across views."""

from __future__ import annotations

import gzip
from collections import Counter
from pathlib import Path

import orjson

from conftest import UNTIL_MS, make_settings
from convo_analytics.contract import ALL_EVENT_TYPES
from convo_analytics.sandbox import HistorySpec, Sandbox, generate_history, write_history_archive
from convo_analytics.sandbox._model import EventFactory
from convo_analytics.webhooks import parse_archive_line, strip_signature, verify

DAY_MS = 86_400_000


def _history(seed: int, n: int = 600) -> list[dict[str, object]]:
    spec = HistorySpec("ws_t", seed=seed, conversations=n, days=20, until_ms=UNTIL_MS)
    return [
        c.detail_json("https://app") for c in generate_history(spec, EventFactory("https://app"))
    ]


def test_the_same_seed_gives_the_same_history_and_another_seed_does_not() -> None:
    assert orjson.dumps(_history(3)) == orjson.dumps(_history(3))
    assert _history(3) != _history(4)


def test_the_history_is_as_varied_and_awkward_as_a_real_workspace() -> None:
    convs = _history(5, n=2000)
    assert len(convs) == 2000
    assert len({c["channel"] for c in convs}) >= 4
    assert len({c["locale"] for c in convs}) >= 8 and None in {c["locale"] for c in convs}
    assert len({c["metadata"].get("source") for c in convs}) >= 6
    statuses = Counter(c["status"] for c in convs)
    assert statuses["resolved"] > statuses["abandoned"] > statuses["open"] > 0
    spanning = [
        c for c in convs if c["status"] == "open" and c["updatedAt"][:10] != c["createdAt"][:10]
    ]
    assert spanning, "some conversations stay open across days"
    assert any(c["escalationCount"] == 2 for c in convs), "some are escalated twice"
    assert any(c["messageCount"] == 0 for c in convs), "some never engage"
    flags = Counter(g["flag"] for c in convs for g in c["guardrailEvents"])
    assert {"pii.email", "pii.phone", "prompt_injection", "blocked_term"} <= set(flags)
    assert any(g["category"] is None for c in convs for g in c["guardrailEvents"])
    leads = [c["lead"] for c in convs if c["lead"]]
    assert any(lead["email"] for lead in leads) and any(not lead["email"] for lead in leads)
    assert {lead["status"] for lead in leads} == {"scored", "qualified"}
    ratings = Counter(c["feedback"]["rating"] for c in convs if c["feedback"])
    assert set(ratings) == {1, 2, 3, 4, 5}
    tiers = Counter(m["modelTier"] for c in convs for m in c["messages"] if m["modelTier"])
    assert set(tiers) == {"fast", "standard", "premium"}
    latencies = sorted(m["latencyMs"] for c in convs for m in c["messages"] if m["latencyMs"])
    assert latencies[len(latencies) // 2] < latencies[int(len(latencies) * 0.99)] / 3  # long tail
    roles = Counter(m["role"] for c in convs for m in c["messages"])
    assert roles["agent"] > 0
    assert any(ord(ch) > 0x3000 for c in convs for m in c["messages"] for ch in m["text"])
    users = Counter(c["externalUserId"] for c in convs)
    assert users.most_common(1)[0][1] >= 5, "some end users come back often"
    for c in convs:
        times = [m["createdAt"] for m in c["messages"]]
        assert times == sorted(times)
        assert c["updatedAt"] >= c["createdAt"]
        assert c["createdAt"] <= "2026-11-18T11:06:40.000Z"


def test_the_archive_holds_every_event_signed_with_retries_marked(tmp_path: Path) -> None:
    sandbox = Sandbox(make_settings(conversations=150))
    workspaces = list(sandbox.workspaces.values())
    path = tmp_path / "history.jsonl.gz"
    counts = write_history_archive(
        path, workspaces, "whsec_archive_secret_123", seed=1, retry_rate=0.05
    )
    lines = gzip.decompress(path.read_bytes()).splitlines()
    assert len(lines) == counts["lines"] == counts["events"] + counts["retries"]
    assert counts["retries"] > 0
    expected = Counter()
    for ws in workspaces:
        for conv in ws.conversations.records.values():
            expected.update(e.key for e in ws.events.history(conv))
    seen: Counter[str] = Counter()
    kinds: set[str] = set()
    times = []
    for line in lines:
        body, headers, record = parse_archive_line(line)
        signed = strip_signature(body)
        assert signed is not None
        assert verify("whsec_archive_secret_123", signed, headers["x-convo-signature"])
        seen[headers["idempotency-key"]] += 1
        kinds.add(headers["x-convo-event"])
        if headers["x-convo-attempt"] == "1":
            times.append(orjson.loads(body)["timestamp"])
        assert record["receivedAt"] >= orjson.loads(body)["timestamp"]
    assert set(seen) == set(expected)
    assert kinds == set(ALL_EVENT_TYPES), "the history covers both event sets"
    assert sum(seen.values()) - len(seen) == counts["retries"]
    assert times == sorted(times)
