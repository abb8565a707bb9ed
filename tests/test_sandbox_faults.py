"""Fault injection: 5xx answers, dropped connections and slow answers."""

from __future__ import annotations

import time

import httpx
import pytest

from conftest import RunningSandbox
from convo_analytics.sandbox import FaultSettings


def test_error_faults_answer_5xx_with_the_error_body(start_sandbox) -> None:  # type: ignore[no-untyped-def]
    running: RunningSandbox = start_sandbox(conversations=5, faults=FaultSettings(error_rate=1.0))
    with running.client() as c:
        r = c.get("/v1/leads")
    assert r.status_code in (500, 502, 503)
    assert r.json()["error"]["code"] == "injected_fault"
    assert httpx.get(running.url + "/_sandbox/health").status_code == 200  # control is spared


def test_dropped_connections_break_the_response(start_sandbox) -> None:  # type: ignore[no-untyped-def]
    running: RunningSandbox = start_sandbox(conversations=5, faults=FaultSettings(drop_rate=1.0))
    with running.client() as c, pytest.raises(httpx.RemoteProtocolError):
        c.get("/v1/conversations")


def test_faults_can_be_set_while_serving_and_a_share_is_injected(start_sandbox) -> None:  # type: ignore[no-untyped-def]
    running: RunningSandbox = start_sandbox(conversations=5)
    running.admin(
        "/_sandbox/faults", {"errorRate": 0.3, "slowRate": 0.2, "slowSeconds": 0.05}, method="PUT"
    )
    with running.client() as c:
        started = time.monotonic()
        codes = [c.get("/v1/leads").status_code for _ in range(200)]
        elapsed = time.monotonic() - started
    errors = sum(code >= 500 for code in codes)
    assert 30 <= errors <= 95  # about 30 % of 200
    assert elapsed >= 0.05 * 10  # some answers were slowed
    running.admin("/_sandbox/faults", {}, method="PUT")
    with running.client() as c:
        assert all(c.get("/v1/leads").status_code == 200 for _ in range(20))
