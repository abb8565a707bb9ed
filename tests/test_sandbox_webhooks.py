"""Signed webhook deliveries with retries on schedule, over real HTTP both ways."""

from __future__ import annotations

import asyncio
import itertools
import threading
import time
from collections import defaultdict
from typing import Any

import httpx
import orjson
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from conftest import RunningSandbox
from convo_analytics._serving import ServerThread
from convo_analytics.contract import ALL_EVENT_TYPES
from convo_analytics.webhooks import strip_signature, verify

SECRET = "whsec_test_secret_0123456789abcdef"


class Receiver:
    """A receiver that fails the first ``failures`` attempts of every event."""

    def __init__(self, failures: int = 0, delay: float = 0.0) -> None:
        self.failures = failures
        self.delay = delay
        self.lock = threading.Lock()
        self.attempts: dict[str, list[tuple[float, bytes, dict[str, str]]]] = defaultdict(list)
        self.app = Starlette(routes=[Route("/hook", self.hook, methods=["POST"])])

    async def hook(self, request: Request) -> Response:
        body = await request.body()
        key = request.headers["idempotency-key"]
        with self.lock:
            self.attempts[key].append((time.monotonic(), body, dict(request.headers)))
            n = len(self.attempts[key])
        if self.delay:
            await asyncio.sleep(self.delay)
        return Response(status_code=500 if n <= self.failures else 204)

    def wait_for(self, predicate: Any, timeout: float = 20.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self.lock:
                if predicate(self.attempts):
                    return
            time.sleep(0.05)
        raise AssertionError("the receiver did not get the expected deliveries in time")


def _register(running: RunningSandbox, url: str, **extra: Any) -> dict[str, Any]:
    with running.client() as c:
        r = c.post("/v1/webhooks", json={"url": url, "secret": SECRET, **extra})
    assert r.status_code == 201, r.text
    created: dict[str, Any] = r.json()
    return created


def _simulate(running: RunningSandbox, new: int, progress: int = 0) -> dict[str, Any]:
    return running.admin(
        "/_sandbox/simulate",
        {"workspace": "acme", "newConversations": new, "progress": progress, "seed": 11},
    )


def test_deliveries_are_signed_enveloped_and_cover_the_catalogue(start_sandbox) -> None:  # type: ignore[no-untyped-def]
    running: RunningSandbox = start_sandbox(conversations=20)
    receiver = Receiver()
    with ServerThread(receiver.app) as hook_server:
        created = _register(running, hook_server.url + "/hook")
        assert created["secret"] == SECRET and created["events"] == ["*"]
        result = _simulate(running, new=60, progress=10)
        receiver.wait_for(lambda a: len(a) >= result["events"])
    assert len(receiver.attempts) == result["events"]
    kinds = set()
    for key, attempts in receiver.attempts.items():
        assert len(attempts) == 1
        _, body, headers = attempts[0]
        envelope = orjson.loads(body)
        assert list(envelope) == [
            "event",
            "timestamp",
            "workspaceId",
            "conversationId",
            "data",
            "signature",
        ]
        assert headers["x-convo-event"] == envelope["event"]
        assert headers["x-convo-signature"] == envelope["signature"]
        signed = strip_signature(body)
        assert signed is not None and verify(SECRET, signed, envelope["signature"])
        assert not verify(SECRET, body, envelope["signature"])
        assert headers["idempotency-key"] == key
        kinds.add(envelope["event"])
    assert {"conversation.created", "message.responded", "conversation.completed"} <= kinds
    assert kinds <= set(ALL_EVENT_TYPES)


def test_a_failing_receiver_gets_the_retries_on_schedule(start_sandbox) -> None:  # type: ignore[no-untyped-def]
    schedule = (0.4, 1.2, 2.4)
    running: RunningSandbox = start_sandbox(
        conversations=5, webhook_retry_schedule=",".join(map(str, schedule))
    )
    receiver = Receiver(failures=2)
    with ServerThread(receiver.app) as hook_server:
        hook = _register(running, hook_server.url + "/hook", events=["conversation.created"])
        _simulate(running, new=3)
        receiver.wait_for(lambda a: len(a) == 3 and all(len(v) == 3 for v in a.values()))
        with running.client() as c:
            log = c.get(f"/v1/webhooks/{hook['id']}/deliveries", params={"limit": 200}).json()
    for attempts in receiver.attempts.values():
        times = [t for t, _, _ in attempts]
        gaps = [b - a for a, b in itertools.pairwise(times)]
        assert gaps[0] == pytest.approx(schedule[0], abs=0.35)
        assert gaps[1] == pytest.approx(schedule[1], abs=0.35)
        bodies = {body for _, body, _ in attempts}
        assert len(bodies) == 1, "a retry must send the very same bytes"
        assert [h["x-convo-attempt"] for _, _, h in attempts] == ["1", "2", "3"]
    outcomes = [(e["attempt"], e["outcome"]) for e in log["data"]]
    assert sorted(outcomes).count((1, "retrying")) == 3
    assert sorted(outcomes).count((3, "succeeded")) == 3
    assert all(e["statusCode"] in (500, 204) for e in log["data"])


def test_a_receiver_that_never_acknowledges_fails_after_the_last_retry(start_sandbox) -> None:  # type: ignore[no-untyped-def]
    running: RunningSandbox = start_sandbox(
        conversations=5, webhook_retry_schedule="0.2,0.2", webhook_ack_timeout=0.3
    )
    receiver = Receiver(delay=1.0)  # slower than the acknowledgement window
    with ServerThread(receiver.app) as hook_server:
        hook = _register(running, hook_server.url + "/hook", events=["conversation.created"])
        _simulate(running, new=1)
        receiver.wait_for(lambda a: any(len(v) == 3 for v in a.values()))
        deadline = time.monotonic() + 10
        with running.client() as c:
            while time.monotonic() < deadline:
                log = c.get(f"/v1/webhooks/{hook['id']}/deliveries").json()["data"]
                if any(e["outcome"] == "failed" for e in log):
                    break
                time.sleep(0.1)
    assert [e["outcome"] for e in log] == ["retrying", "retrying", "failed"]
    assert all("no answer within" in e["error"] for e in log)
    assert log[-1]["nextAttemptAt"] is None


def test_registration_validates_and_is_per_workspace(start_sandbox) -> None:  # type: ignore[no-untyped-def]
    running: RunningSandbox = start_sandbox(conversations=5)
    hook = _register(running, "http://127.0.0.1:9/hook", events=["lead.qualified"])
    with running.client() as acme, running.client("sk_test_globex_987654321") as globex:
        assert [h["id"] for h in acme.get("/v1/webhooks").json()["data"]] == [hook["id"]]
        assert "secret" not in acme.get(f"/v1/webhooks/{hook['id']}").json()
        assert globex.get("/v1/webhooks").json()["data"] == []
        assert globex.get(f"/v1/webhooks/{hook['id']}").status_code == 404
        generated = globex.post("/v1/webhooks", json={"url": "https://hooks.example/x"}).json()
        assert generated["secret"].startswith("whsec_")
        assert acme.delete(f"/v1/webhooks/{hook['id']}").status_code == 204
        assert acme.get(f"/v1/webhooks/{hook['id']}").status_code == 404
    r = httpx.post(running.url + "/v1/webhooks", json={"url": "http://127.0.0.1/x"})
    assert r.status_code == 401


def test_simulate_at_a_time_with_a_seed_makes_the_same_activity_each_time(start_sandbox) -> None:  # type: ignore[no-untyped-def]
    """What `make demo` relies on for its restarts: two sandboxes of one history, the
    same seed and `at`, make the same conversations at the same times."""
    at = "2026-11-18T07:00:00Z"  # just before the history's end (conftest's UNTIL_MS)
    body = {"workspace": "acme", "newConversations": 4, "progress": 3, "seed": 5, "at": at}
    seen = []
    for _ in range(2):
        running: RunningSandbox = start_sandbox(conversations=30)
        result = running.admin("/_sandbox/simulate", body)
        with running.client() as c:
            times = [c.get(f"/v1/conversations/{cid}").json()["updatedAt"]
                     for cid in result["created"]]  # fmt: skip
        seen.append((result, times))
    assert seen[0] == seen[1] and len(seen[0][0]["created"]) == 4
    # at `at`, not now (a reply may land its latency after it)
    assert all("2026-11-18T06:49" <= t < "2026-11-18T07:01" for t in seen[0][1]), seen[0][1]
    r = httpx.post(f"{running.url}/_sandbox/simulate", json={**body, "at": "yesterday"},
                   headers={"Authorization": f"Bearer {running.sandbox.admin_token}"})  # fmt: skip
    assert r.status_code == 422 and "ISO 8601" in r.text
