"""The summary agrees with the conversation details it is made from."""

from __future__ import annotations

import statistics
from collections import Counter
from datetime import date, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from conftest import RunningSandbox, page_all

COUNTS = (
    "conversations",
    "engagedConversations",
    "resolved",
    "abandoned",
    "open",
    "escalatedConversations",
    "containedConversations",
    "leadsQualified",
    "feedbackCount",
    "positiveFeedback",
    "ratingSum",
    "userMessages",
    "assistantResponses",
    "escalations",
    "guardrailTriggers",
    "lowConfidenceResponses",
)


def _day(ts: str, tz: str) -> str:
    return (
        datetime.fromisoformat(ts.replace("Z", "+00:00"))
        .astimezone(ZoneInfo(tz))
        .date()
        .isoformat()
    )


def _expected(details: list[dict[str, Any]], first: str, last: str, tz: str) -> dict[str, Any]:
    """An independent computation of the totals from conversation details."""
    inside = lambda ts: first <= _day(ts, tz) <= last  # noqa: E731
    counts: Counter[str] = Counter()
    latencies: list[int] = []
    flags: Counter[str] = Counter()
    for d in details:
        if inside(d["createdAt"]):
            counts["conversations"] += 1
            counts[d["status"]] += 1
            counts["engagedConversations"] += any(m["role"] == "user" for m in d["messages"])
            counts["escalatedConversations"] += bool(d["escalations"])
            counts["containedConversations"] += not d["escalations"] and d["status"] != "open"
            counts["leadsQualified"] += bool(d["lead"] and d["lead"]["qualifiedAt"])
            if d["feedback"]:
                counts["feedbackCount"] += 1
                counts["ratingSum"] += d["feedback"]["rating"]
                counts["positiveFeedback"] += d["feedback"]["rating"] >= 4
        for m in d["messages"]:
            if inside(m["createdAt"]):
                if m["role"] == "user":
                    counts["userMessages"] += 1
                if m["role"] == "assistant":
                    counts["assistantResponses"] += 1
                    latencies.append(m["latencyMs"])
                    counts["lowConfidenceResponses"] += m["confidence"] < 0.5
        counts["escalations"] += sum(inside(e["createdAt"]) for e in d["escalations"])
        for g in d["guardrailEvents"]:
            if inside(g["triggeredAt"]):
                counts["guardrailTriggers"] += 1
                flags[g["flag"]] += 1
    return {"counts": counts, "latencies": sorted(latencies), "flags": flags}


@pytest.fixture(scope="module")
def details(shared_sandbox: RunningSandbox) -> list[dict[str, Any]]:
    with shared_sandbox.client() as c:
        listed = page_all(c, "/v1/conversations", {"limit": 200})
        return [c.get(f"/v1/conversations/{r['id']}").json() for r in listed]


@pytest.mark.parametrize("tz", ["UTC", "America/Los_Angeles", "Asia/Kolkata"])
def test_summary_totals_match_the_details(
    shared_sandbox: RunningSandbox, details: list[dict[str, Any]], tz: str
) -> None:
    first, last = "2026-11-08", "2026-11-15"
    with shared_sandbox.client() as c:
        summary = c.get(
            "/v1/analytics/summary", params={"from": first, "to": last, "tz": tz}
        ).json()
    want = _expected(details, first, last, tz)
    totals = summary["totals"]
    for name in COUNTS:
        assert totals[name] == want["counts"][name], name
    assert totals["conversations"] > 50
    assert totals["guardrailTriggersByFlag"] == dict(want["flags"])
    assert totals["latencyMs"]["p50"] == pytest.approx(statistics.median(want["latencies"]))
    qs = statistics.quantiles(want["latencies"], n=100, method="inclusive")
    assert totals["latencyMs"]["p90"] == pytest.approx(qs[89])
    assert totals["latencyMs"]["p99"] == pytest.approx(qs[98])
    assert totals["resolutionRate"] == pytest.approx(totals["resolved"] / totals["conversations"])
    assert totals["csat"] == pytest.approx(totals["positiveFeedback"] / totals["feedbackCount"])


def test_totals_equal_the_sum_of_the_daily_series(shared_sandbox: RunningSandbox) -> None:
    with shared_sandbox.client() as c:
        s = c.get(
            "/v1/analytics/summary",
            params={"from": "2026-11-01", "to": "2026-11-20", "tz": "Europe/Berlin"},
        ).json()
    days = [d["date"] for d in s["daily"]]
    start = date(2026, 11, 1)
    assert days == [(start + timedelta(days=i)).isoformat() for i in range(20)]
    for name in COUNTS:
        assert s["totals"][name] == sum(d[name] for d in s["daily"]), name
    flags: Counter[str] = Counter()
    for d in s["daily"]:
        flags.update(d["guardrailTriggersByFlag"])
    assert s["totals"]["guardrailTriggersByFlag"] == dict(flags)


def test_an_empty_range_has_zero_counts_and_null_rates(shared_sandbox: RunningSandbox) -> None:
    with shared_sandbox.client() as c:
        s = c.get("/v1/analytics/summary", params={"from": "2020-01-01", "to": "2020-01-01"}).json()
    assert s["totals"]["conversations"] == 0
    assert s["totals"]["resolutionRate"] is None
    assert s["totals"]["latencyMs"] == {"p50": None, "p90": None, "p95": None, "p99": None}
