"""Paging returns every record exactly once, also while records change."""

from __future__ import annotations

from collections import Counter
from typing import Any

from conftest import RunningSandbox, page_all


def test_every_conversation_exactly_once_in_both_orders(shared_sandbox: RunningSandbox) -> None:
    expected = set(shared_sandbox.sandbox.workspaces["ws_acme"].conversations.records)
    with shared_sandbox.client() as c:
        for sort in ("updatedAt", "createdAt"):
            rows = page_all(c, "/v1/conversations", {"limit": 37, "sort": sort})
            ids = [r["id"] for r in rows]
            assert len(ids) == len(set(ids)) == len(expected)
            assert set(ids) == expected
            keys = [(r[sort], r["id"]) for r in rows]
            assert keys == sorted(keys)


def test_filters_select_exactly_the_matching_records(shared_sandbox: RunningSandbox) -> None:
    with shared_sandbox.client() as c:
        everything = page_all(c, "/v1/conversations", {"limit": 200})
        since = sorted(r["updatedAt"] for r in everything)[len(everything) // 2]
        cases: list[tuple[dict[str, Any], Any]] = [
            ({"channel": "web"}, lambda r: r["channel"] == "web"),
            ({"status": "open"}, lambda r: r["status"] == "open"),
            ({"escalated": "true"}, lambda r: r["escalated"]),
            ({"updatedSince": since}, lambda r: r["updatedAt"] >= since),
            ({"createdBefore": since}, lambda r: r["createdAt"] < since),
        ]
        for params, predicate in cases:
            got = {r["id"] for r in page_all(c, "/v1/conversations", {"limit": 50, **params})}
            want = {r["id"] for r in everything if predicate(r)}
            assert got == want, params
            assert want, f"the generated history should have records for {params}"


def test_leads_list_qualified_by_default_with_score_and_intent_filters(
    shared_sandbox: RunningSandbox,
) -> None:
    with shared_sandbox.client() as c:
        qualified = page_all(c, "/v1/leads", {"limit": 25})
        every = page_all(c, "/v1/leads", {"limit": 25, "status": "any"})
        high = page_all(c, "/v1/leads", {"limit": 25, "status": "any", "minScore": 80})
        pricing = page_all(c, "/v1/leads", {"limit": 25, "status": "any", "intent": "pricing"})
    assert qualified and {r["status"] for r in qualified} == {"qualified"}
    assert len(every) > len(qualified)
    assert {r["id"] for r in high} == {r["id"] for r in every if r["score"] >= 80}
    assert {r["id"] for r in pricing} == {r["id"] for r in every if r["intent"] == "pricing"}


def test_a_cursor_must_be_sent_with_the_same_filters(shared_sandbox: RunningSandbox) -> None:
    with shared_sandbox.client() as c:
        first = c.get("/v1/conversations", params={"limit": 5, "channel": "web"}).json()
        r = c.get("/v1/conversations", params={"cursor": first["nextCursor"], "channel": "sms"})
        assert r.status_code == 400 and r.json()["error"]["code"] == "cursor_mismatch"
        same = c.get("/v1/conversations", params={"cursor": first["nextCursor"], "channel": "web"})
        bare = c.get("/v1/conversations", params={"cursor": first["nextCursor"]})
        assert same.json()["data"] == bare.json()["data"]
        leads = c.get("/v1/leads", params={"cursor": first["nextCursor"]})
        assert leads.status_code == 400


def test_records_changing_while_paging_are_neither_skipped_nor_repeated(
    start_sandbox,  # type: ignore[no-untyped-def]
) -> None:
    running: RunningSandbox = start_sandbox(conversations=400)
    ws = running.sandbox.workspaces["ws_acme"]
    existing = set(ws.conversations.records)
    seen: Counter[str] = Counter()
    changed: set[str] = set()
    with running.client() as c:
        body = c.get("/v1/conversations", params={"limit": 40}).json()
        seen.update(r["id"] for r in body["data"])
        rounds = 0
        while body["hasMore"]:
            rounds += 1
            assert rounds < 100
            # open conversations move to the end of the updatedAt order; new ones appear
            result = running.admin(
                "/_sandbox/simulate",
                {"workspace": "acme", "progress": 5, "newConversations": 2, "seed": rounds},
            )
            changed.update(result["changed"])
            body = c.get("/v1/conversations", params={"cursor": body["nextCursor"]}).json()
            seen.update(r["id"] for r in body["data"])
        assert changed, "the simulation should have changed some records"
        assert set(seen) == existing
        assert max(seen.values()) == 1
        # the next incremental sync picks up every change and every new record
        sync = page_all(c, "/v1/conversations", {"limit": 200})
    assert {r["id"] for r in sync} == set(ws.conversations.records)
