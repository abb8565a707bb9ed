"""The receiver under odd bodies, slow clients and many connections, over real HTTP.

Stalled clients are dropped within the header or body timeout while valid
deliveries are still acknowledged quickly; the connection cap holds; bodies the
ingest would quarantine are refused with 400 and kept in the quarantine archive;
a wrong secret is logged once a minute; credential headers are masked.
"""

from __future__ import annotations

import asyncio
import logging
import selectors
import socket
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest

from convo_analytics._serving import ServerThread
from convo_analytics.webhooks import parse_archive_line
from convo_analytics.webhooks._receiver import ReceiverSettings, create_receiver_app
from webhook_support import (
    SECRET,
    event,
    hostile_bodies,
    http_request,
    post_all,
    signed_body,
)

TEXT_SECRET = SECRET.decode()


@pytest.fixture
def receiver(tmp_path: Path) -> Iterator[Callable[..., ServerThread]]:
    servers: list[ServerThread] = []

    def start(**overrides: Any) -> ServerThread:
        options: dict[str, Any] = {"archive_dir": tmp_path / "hooks", "secrets": [TEXT_SECRET]}
        options.update(overrides)
        settings = ReceiverSettings(**options)
        server = ServerThread(create_receiver_app(settings), **settings.server_options())
        servers.append(server.start())
        return server

    yield start
    for server in servers:
        server.stop()


def _quarantined(root: Path) -> list[dict[str, Any]]:
    out = []
    for path in sorted((root / "quarantine").glob("quarantine-*.jsonl")):
        out += [parse_archive_line(line)[2] for line in path.read_bytes().splitlines()]
    return out


def test_bodies_the_ingest_would_quarantine_are_refused_with_400(
    receiver: Callable[..., ServerThread], tmp_path: Path
) -> None:
    server = receiver()
    cases = hostile_bodies()
    with httpx.Client(base_url=server.url, timeout=30) as client:
        for body, reason in cases.values():
            r = client.post("/webhooks", content=body, headers={"Content-Type": "application/json"})
            assert r.status_code == 400, (reason, r.text)
            assert r.json()["error"]["code"] == reason
        fine = client.post("/webhooks", content=signed_body(event(1)))
        assert fine.status_code == 200
    kept = _quarantined(tmp_path / "hooks")
    assert [r["reason"] for r in kept] == [reason for _, reason in cases.values()]
    assert all(r["status"] == 400 for r in kept)


def test_credential_headers_are_masked_in_the_archive(
    receiver: Callable[..., ServerThread], tmp_path: Path
) -> None:
    server = receiver()
    body = signed_body(event(1))
    headers = {
        "X-Api-Key": "k-1", "X-Auth-Token": "t-1", "X-Client-Secret": "s-1",
        "X-Custom-Key": "c-1", "Cookie": "session=1", "Idempotency-Key": "evt_1",
        "X-Convo-Signature": orjson.loads(body)["signature"], "X-Request-Id": "req-1",
    }  # fmt: skip
    assert httpx.post(server.url + "/webhooks", content=body, headers=headers).status_code == 200
    [line] = (tmp_path / "hooks").glob("deliveries-*.jsonl")
    _, archived, _ = parse_archive_line(line.read_bytes())
    for name in ("x-api-key", "x-auth-token", "x-client-secret", "x-custom-key", "cookie"):
        assert archived[name] == "***", name
    assert archived["idempotency-key"] == "evt_1" and archived["x-request-id"] == "req-1"
    assert archived["x-convo-signature"].startswith("sha256=")
    assert not any(v in line.read_text() for v in ("k-1", "t-1", "s-1", "c-1"))


class _Clock:
    def __init__(self) -> None:
        self.now = datetime(2026, 9, 21, 14, 13, 30, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now


def test_a_wrong_secret_is_logged_once_a_minute_while_it_lasts(
    receiver: Callable[..., ServerThread], caplog: pytest.LogCaptureFixture
) -> None:
    clock = _Clock()
    server = receiver(secrets=["whsec_not_the_senders"], clock=clock)
    caplog.set_level(logging.ERROR, logger="convo_analytics.webhooks._receiver")
    bodies = [signed_body(event(n)) for n in range(5)]
    with httpx.Client(base_url=server.url) as client:
        for body in bodies[:3]:
            assert client.post("/webhooks", content=body).status_code == 401
        clock.now += timedelta(seconds=61)
        for body in bodies[3:]:
            assert client.post("/webhooks", content=body).status_code == 401
    alarms = [r.getMessage() for r in caplog.records if "signature check" in r.getMessage()]
    assert alarms == [
        "receiver: 1 of 1 deliveries since 2026-09-21T14:13:30.000Z failed the signature "
        "check with the 1 configured secret: check CONVO_WEBHOOK_SECRET",
        "receiver: 1 of 1 deliveries since 2026-09-21T14:14:31.000Z failed the signature "
        "check with the 1 configured secret: check CONVO_WEBHOOK_SECRET",
    ]
    assert "whsec_not_the_senders" not in caplog.text


def _wait_closed(sockets: list[tuple[socket.socket, float]], until: float) -> list[float]:
    """How long after it was opened each socket was closed by the server (inf: it was not)."""
    closed = [float("inf")] * len(sockets)
    with selectors.DefaultSelector() as sel:
        for i, (sock, _) in enumerate(sockets):
            sock.setblocking(False)
            sel.register(sock, selectors.EVENT_READ, i)
        left = len(sockets)
        while left and time.monotonic() < until:
            for key, _ in sel.select(timeout=max(0.0, until - time.monotonic())):
                sock, opened = sockets[key.data]
                try:
                    data = sock.recv(65536)
                except BlockingIOError:
                    continue
                except ConnectionResetError:
                    data = b""
                if not data:
                    closed[key.data] = time.monotonic() - opened
                    sel.unregister(sock)
                    left -= 1
    return closed


def test_stalled_clients_are_dropped_while_valid_deliveries_are_acknowledged(
    receiver: Callable[..., ServerThread],
) -> None:
    timeout = 3.0
    server = receiver(header_timeout=timeout, body_timeout=timeout)
    stalled: list[tuple[socket.socket, float]] = []
    try:
        for i in range(300):
            sock = socket.create_connection((server.host, server.port), timeout=10)
            if i % 2:  # headers begun, never finished
                sock.sendall(b"POST /webhooks HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Ty")
            else:  # headers whole, the body never comes
                sock.sendall(b"POST /webhooks HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                             b'Content-Length: 900\r\n\r\n{"event"')  # fmt: skip
            stalled.append((sock, time.monotonic()))
        deadline = time.monotonic() + 10
        while len(server.server.server_state.connections) < 300:  # all held open
            assert time.monotonic() < deadline, "the stalled connections were not accepted"
            time.sleep(0.02)
        requests = []
        for n in range(500):
            body = signed_body(event(n))
            requests.append(http_request("/webhooks", body, {"Idempotency-Key": f"evt_{n}"}))
        statuses, latencies = asyncio.run(post_all(server.host, server.port, requests, 20))
        assert statuses == [200] * 500
        p99 = sorted(latencies)[int(len(latencies) * 0.99) - 1]
        assert p99 < 2.0, f"p99 {p99:.3f} s with 300 stalled connections open"
        closed = _wait_closed(stalled, time.monotonic() + timeout + 10)
        late = [round(t, 2) for t in closed if t > timeout + 2.0]
        assert not late, f"{len(late)} stalled connections outlived the timeout: {late[:5]}"
    finally:
        for sock, _ in stalled:
            sock.close()


def test_connections_beyond_the_cap_are_answered_503_and_logged(
    receiver: Callable[..., ServerThread], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="convo_analytics.webhooks._server")
    server = receiver(max_connections=20, header_timeout=30)
    held = [socket.create_connection((server.host, server.port)) for _ in range(20)]
    try:
        deadline = time.monotonic() + 10
        while len(server.server.server_state.connections) < 20:
            assert time.monotonic() < deadline, "the connections were not accepted"
            time.sleep(0.02)
        with socket.create_connection((server.host, server.port), timeout=10) as extra:
            answer = b""
            while chunk := extra.recv(4096):
                answer += chunk
        assert answer.startswith(b"HTTP/1.1 503 ") and b"retry-after: 1" in answer
        assert "20 connections open, the cap (webhooks.max_connections" in caplog.text
    finally:
        for sock in held:
            sock.close()
    body = signed_body(event(1))
    deadline = time.monotonic() + 10
    while True:  # the held ones are gone: deliveries are taken again
        try:
            r = httpx.post(server.url + "/webhooks", content=body, timeout=10)
        except httpx.TransportError:
            r = None
        if r is not None and r.status_code == 200:
            break
        assert time.monotonic() < deadline, "the receiver did not recover"
        time.sleep(0.05)
