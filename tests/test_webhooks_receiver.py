"""The webhook receiver over real HTTP: verify, archive durably, acknowledge, or quarantine.

Ends with the sandbox delivering to the receiver while it is down for a
while: the retries land, and the archive matches the sandbox's delivery log.
"""

from __future__ import annotations

import asyncio
import gzip
import os
import secrets
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
import typer
from typer.testing import CliRunner

from conftest import RunningSandbox
from convo_analytics._serving import ServerThread, bind
from convo_analytics.cli._webhooks_serve import serve
from convo_analytics.errors import UserError
from convo_analytics.webhooks import append_signature, parse_archive_line, sign, verify_delivery
from convo_analytics.webhooks._archive_writer import ArchiveWriter
from convo_analytics.webhooks._receiver import ReceiverSettings, create_receiver_app
from process_support import OutputWatcher

SECRET = "whsec_receiver_test_0123456789"
OLD_SECRET = "whsec_receiver_old_secret_abc"
GITHUB_SECRET = "It's a Secret to Everybody"
GITHUB_SIGNATURE = "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"


# -- helpers --------------------------------------------------------------------------


def signed(secret: str = SECRET, n: int = 0, size: int = 0) -> tuple[bytes, dict[str, str]]:
    """A delivery as the sandbox sends it: the body signed without its signature member."""
    key = f"evt_{secrets.token_hex(8)}"
    envelope = {
        "event": "message.responded",
        "timestamp": "2026-11-18T10:00:00.000Z",
        "workspaceId": "ws_acme",
        "conversationId": f"conv_{n}",
        "data": {"n": n, "text": "x" * size},
    }
    unsigned = orjson.dumps(envelope)
    signature = sign(secret, unsigned)
    headers = {
        "Content-Type": "application/json",
        "X-Convo-Signature": signature,
        "Idempotency-Key": key,
        "X-Convo-Event": "message.responded",
        "X-Convo-Delivery": f"dlv_{secrets.token_hex(8)}",
        "X-Convo-Attempt": "1",
    }
    return append_signature(unsigned, signature), headers


def lines_of(directory: Path, pattern: str) -> list[bytes]:
    """Every archived line in ``directory`` (plain and gzip files)."""
    out: list[bytes] = []
    for path in sorted(directory.glob(pattern)):
        data = gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes()
        assert data.endswith(b"\n") or not data
        out.extend(data.splitlines())
    return out


def archived(root: Path) -> list[tuple[bytes, dict[str, str], dict[str, Any]]]:
    return [parse_archive_line(line) for line in lines_of(root, "deliveries-*.jsonl*")]


def quarantined(root: Path) -> list[tuple[bytes, dict[str, str], dict[str, Any]]]:
    return [parse_archive_line(line) for line in lines_of(root / "quarantine", "quarantine-*")]


class Clock:
    def __init__(self, start: datetime) -> None:
        self.now = start

    def __call__(self) -> datetime:
        return self.now


@pytest.fixture
def start_receiver(tmp_path: Path) -> Iterator[Callable[..., ServerThread]]:
    """Start a receiver on tmp_path/webhooks (or wherever asked); stopped after the test."""
    servers: list[ServerThread] = []

    def start(port: int = 0, **overrides: Any) -> ServerThread:
        options: dict[str, Any] = {"archive_dir": tmp_path / "webhooks", "secrets": [SECRET]}
        options.update(overrides)
        server = ServerThread(create_receiver_app(ReceiverSettings(**options)), port=port)
        servers.append(server.start())
        return server

    yield start
    for server in servers:
        if server.server.started and not server.server.should_exit:
            server.stop()


# -- accepted deliveries ----------------------------------------------------------------


def test_accepted_deliveries_are_archived_with_their_verification(
    start_receiver: Callable[..., ServerThread], tmp_path: Path
) -> None:
    server = start_receiver(secrets=[SECRET, OLD_SECRET])
    sent = [signed(), signed(OLD_SECRET, n=1)]
    github_style, headers = signed(n=2)
    headers["X-Convo-Signature"] = sign(SECRET, github_style)  # the header signs the raw body
    sent.append((github_style, headers))
    with httpx.Client(base_url=server.url) as client:
        for body, headers in sent:
            r = client.post("/webhooks", content=body, headers=headers)
            assert r.status_code == 200, r.text
            assert r.json() == {"received": True, "deliveryId": headers["X-Convo-Delivery"]}
        assert client.get("/healthz").json() == {"status": "ok"}
    rows = archived(tmp_path / "webhooks")  # fsynced before the answer: readable at once
    assert [body for body, _, _ in rows] == [body for body, _ in sent]
    records = [record for _, _, record in rows]
    assert [r["verification"] for r in records] == ["stripped", "stripped", "raw"]
    assert [r["secretIndex"] for r in records] == [0, 1, 0]
    assert all(r["verified"] and r["signatureSource"] == "x-convo-signature" for r in records)
    assert [r["deliveryId"] for r in records] == [h["X-Convo-Delivery"] for _, h in sent]
    for (_, headers, record), (_, sent_headers) in zip(rows, sent, strict=True):
        assert headers["idempotency-key"] == sent_headers["Idempotency-Key"]
        assert record["receivedAt"].endswith("Z")
    assert quarantined(tmp_path / "webhooks") == []


def test_the_field_alone_verifies_and_credentials_are_masked(
    start_receiver: Callable[..., ServerThread], tmp_path: Path
) -> None:
    server = start_receiver()
    body, headers = signed()
    del headers["X-Convo-Signature"]  # only the payload's signature field remains
    headers["Authorization"] = "Bearer not-for-the-archive"
    r = httpx.post(server.url + "/webhooks", content=body, headers=headers)
    assert r.status_code == 200
    [(_, archived_headers, record)] = archived(tmp_path / "webhooks")
    assert record["signatureSource"] == "field" and record["verification"] == "stripped"
    assert archived_headers["authorization"] == "***"


# -- rejections, all kept in quarantine ------------------------------------------------------


def test_a_bad_or_missing_signature_is_401_and_quarantined(
    start_receiver: Callable[..., ServerThread], tmp_path: Path
) -> None:
    server = start_receiver()
    forged, headers = signed("whsec_somebody_else")
    unsigned = orjson.dumps({"event": "lead.qualified", "data": {}})
    with httpx.Client(base_url=server.url) as client:
        r = client.post("/webhooks", content=forged, headers=headers)
        assert r.status_code == 401
        assert r.json()["error"]["code"] == "invalid_signature"
        assert SECRET not in r.text
        r = client.post("/webhooks", content=unsigned, headers={"Content-Type": "application/json"})
        assert r.status_code == 401
        assert r.json()["error"] == {
            "code": "missing_signature",
            "message": "the delivery carries no signature",
        }
    assert archived(tmp_path / "webhooks") == []
    rows = quarantined(tmp_path / "webhooks")
    assert [body for body, _, _ in rows] == [forged, unsigned]
    assert [r["reason"] for _, _, r in rows] == ["bad_signature", "unsigned"]
    assert all(r["status"] == 401 and not r["verified"] and not r["truncated"] for _, _, r in rows)


def test_a_body_that_is_not_json_is_400_and_quarantined(
    start_receiver: Callable[..., ServerThread], tmp_path: Path
) -> None:
    """GitHub's test vector verifies, but its body is no JSON envelope: kept aside, with 400."""
    server = start_receiver(secrets=[GITHUB_SECRET])
    with httpx.Client(base_url=server.url) as client:
        r = client.post(
            "/webhooks", content=b"Hello, World!", headers={"X-Hub-Signature-256": GITHUB_SIGNATURE}
        )
        assert r.status_code == 400
        assert r.json()["error"]["code"] == "invalid_json"
        r = client.post("/webhooks", content=b'["an", "array"]')
        assert r.status_code == 400
        r = client.post("/webhooks", content=b"\xff\xfe not utf-8")
        assert r.status_code == 400
    rows = quarantined(tmp_path / "webhooks")
    assert [body for body, _, _ in rows] == [
        b"Hello, World!",
        b'["an", "array"]',
        b"\xff\xfe not utf-8",
    ]
    first = rows[0][2]
    assert first["reason"] == "not_json" and first["status"] == 400
    assert first["verified"] and first["verification"] == "raw"
    assert first["signatureSource"] == "x-hub-signature-256"
    assert "bodyBase64" in rows[2][2]
    assert archived(tmp_path / "webhooks") == []


def test_the_github_test_vector_verifies() -> None:
    headers = {"x-hub-signature-256": GITHUB_SIGNATURE}
    result = verify_delivery(b"Hello, World!", headers, [GITHUB_SECRET.encode()])
    assert (
        result.ok and result.reading == "raw" and result.signature_source == "x-hub-signature-256"
    )
    assert not verify_delivery(b"Hello, World!", headers, [b"another secret"]).ok


def test_an_oversized_body_is_413_and_kept_truncated(
    start_receiver: Callable[..., ServerThread], tmp_path: Path
) -> None:
    cap = 4096
    server = start_receiver(max_body_bytes=cap)
    big, headers = signed(size=10_000)
    fits, fits_headers = signed(size=cap - 400)
    assert len(fits) <= cap < len(big)

    def chunked() -> Iterator[bytes]:  # no Content-Length: the cap must hold anyway
        for i in range(0, len(big), 1000):
            yield big[i : i + 1000]

    with httpx.Client(base_url=server.url) as client:
        r = client.post("/webhooks", content=big, headers=headers)
        assert r.status_code == 413
        assert r.json()["error"]["code"] == "payload_too_large"
        r = client.post("/webhooks", content=chunked(), headers=headers)
        assert r.status_code == 413
        assert client.post("/webhooks", content=fits, headers=fits_headers).status_code == 200
    rows = quarantined(tmp_path / "webhooks")
    assert len(rows) == 2
    for body, _, record in rows:
        assert body == big[:cap]
        assert record["truncated"] and record["reason"] == "too_large" and record["status"] == 413
    assert [body for body, _, _ in archived(tmp_path / "webhooks")] == [fits]


def test_errors_are_json(start_receiver: Callable[..., ServerThread]) -> None:
    server = start_receiver()
    with httpx.Client(base_url=server.url) as client:
        assert client.get("/nope").json()["error"]["code"] == "not_found"
        r = client.get("/webhooks")
        assert r.status_code == 405 and r.json()["error"]["code"] == "method_not_allowed"


def test_settings_never_show_the_secret(tmp_path: Path) -> None:
    settings = ReceiverSettings(archive_dir=tmp_path, secrets=[SECRET])
    assert SECRET not in repr(settings)
    with pytest.raises(ValueError, match="secret"):
        create_receiver_app(ReceiverSettings(archive_dir=tmp_path, secrets=[""]))


# -- concurrency, days and restarts -------------------------------------------------------------


async def _post_all(
    url: str, deliveries: list[tuple[bytes, dict[str, str]]], workers: int
) -> list[int]:
    todo = iter(deliveries)
    statuses: list[int] = []
    limits = httpx.Limits(max_connections=workers, max_keepalive_connections=workers)
    async with httpx.AsyncClient(base_url=url, limits=limits, timeout=30) as client:

        async def worker() -> None:
            for body, headers in todo:
                r = await client.post("/webhooks", content=body, headers=headers)
                statuses.append(r.status_code)

        await asyncio.wait_for(asyncio.gather(*(worker() for _ in range(workers))), 60)
    return statuses


def test_concurrent_deliveries_never_interleave(
    start_receiver: Callable[..., ServerThread], tmp_path: Path
) -> None:
    server = start_receiver()
    deliveries = [signed(n=i, size=i * 7 % 3000) for i in range(300)]
    statuses = asyncio.run(_post_all(server.url, deliveries, workers=50))
    assert statuses == [200] * 300
    lines = lines_of(tmp_path / "webhooks", "deliveries-*.jsonl")
    assert len(lines) == 300
    rows = [parse_archive_line(line) for line in lines]  # every line is whole JSON
    assert {body for body, _, _ in rows} == {body for body, _ in deliveries}
    assert all(record["verified"] for _, _, record in rows)


def test_a_new_day_compresses_the_previous_days_file(
    start_receiver: Callable[..., ServerThread], tmp_path: Path
) -> None:
    clock = Clock(datetime(2026, 11, 17, 23, 59, 59, 500_000, tzinfo=UTC))
    server = start_receiver(clock=clock)
    root = tmp_path / "webhooks"
    first = [signed(n=i) for i in range(3)]
    second = [signed(n=10 + i) for i in range(2)]
    with httpx.Client(base_url=server.url) as client:
        for body, headers in first:
            assert client.post("/webhooks", content=body, headers=headers).status_code == 200
        clock.now += timedelta(seconds=1)
        for body, headers in second:
            assert client.post("/webhooks", content=body, headers=headers).status_code == 200
    server.stop()  # waits for the compression to finish
    names = sorted(p.name for p in root.iterdir() if p.is_file())
    assert names == ["deliveries-2026-11-17.jsonl.gz", "deliveries-2026-11-18.jsonl"]
    day1 = gzip.decompress((root / names[0]).read_bytes()).splitlines()
    assert [parse_archive_line(line)[0] for line in day1] == [body for body, _ in first]
    assert parse_archive_line(day1[0])[2]["receivedAt"] == "2026-11-17T23:59:59.500Z"
    day2 = (root / names[1]).read_bytes().splitlines()
    assert [parse_archive_line(line)[0] for line in day2] == [body for body, _ in second]


def test_the_writer_tidies_up_after_a_crash(tmp_path: Path) -> None:
    """Past days' plain files are compressed at start; a torn tail is closed, never rewritten."""
    (tmp_path / "deliveries-2026-11-15.jsonl").write_bytes(b'{"a":1}\n{"a":2}\n')
    # A crash after the rename but before the plain file was removed: same content twice.
    (tmp_path / "deliveries-2026-11-16.jsonl").write_bytes(b'{"b":1}\n')
    (tmp_path / "deliveries-2026-11-16.jsonl.gz").write_bytes(gzip.compress(b'{"b":1}\n'))
    (tmp_path / "deliveries-2026-11-17.jsonl.gz.partial").write_bytes(b"half")
    (tmp_path / "deliveries-2026-11-17.jsonl").write_bytes(b'{"c":1}\n')
    (tmp_path / "deliveries-2026-11-18.jsonl").write_bytes(b'{"d":1}\n{"d":')  # torn
    clock = Clock(datetime(2026, 11, 18, 12, tzinfo=UTC))

    async def run() -> None:
        async with ArchiveWriter(tmp_path, "deliveries", clock) as writer:
            await asyncio.gather(
                *(writer.append(b'{"e":%d}\n' % i, date(2026, 11, 18)) for i in range(5))
            )
            # A line stamped on a day already rotated out goes to the current file.
            await writer.append(b'{"late":1}\n', date(2026, 11, 17))

    asyncio.run(run())
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == [
        "deliveries-2026-11-15.jsonl.gz",
        "deliveries-2026-11-16.jsonl.gz",
        "deliveries-2026-11-17.jsonl.gz",
        "deliveries-2026-11-18.jsonl",
    ]
    assert gzip.decompress((tmp_path / names[0]).read_bytes()) == b'{"a":1}\n{"a":2}\n'
    assert gzip.decompress((tmp_path / names[1]).read_bytes()) == b'{"b":1}\n'
    assert gzip.decompress((tmp_path / names[2]).read_bytes()) == b'{"c":1}\n'
    today = (tmp_path / names[3]).read_bytes().splitlines()
    assert today[:2] == [b'{"d":1}', b'{"d":']
    assert sorted(today[2:7]) == [b'{"e":%d}' % i for i in range(5)]
    assert today[7:] == [b'{"late":1}']


def test_a_failed_write_is_503_and_cannot_corrupt_the_next_line(
    start_receiver: Callable[..., ServerThread], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    server = start_receiver()
    real_write, failures = os.write, [1]

    def write_half_then_fail(fd: int, data: Any) -> int:
        if failures:
            failures.pop()
            real_write(fd, bytes(data[:20]))
            raise OSError(28, "No space left on device")
        return real_write(fd, data)

    lost, lost_headers = signed(n=1)
    kept, kept_headers = signed(n=2)
    monkeypatch.setattr("convo_analytics.webhooks._archive_writer.os.write", write_half_then_fail)
    with httpx.Client(base_url=server.url) as client:
        r = client.post("/webhooks", content=lost, headers=lost_headers)
        assert r.status_code == 503 and r.json()["error"]["code"] == "archive_unavailable"
        assert client.post("/webhooks", content=kept, headers=kept_headers).status_code == 200
    torn, whole = lines_of(tmp_path / "webhooks", "deliveries-*.jsonl")
    assert len(torn) == 20
    assert parse_archive_line(whole)[0] == kept


def test_a_restart_keeps_everything_acknowledged(
    start_receiver: Callable[..., ServerThread], tmp_path: Path
) -> None:
    before = [signed(n=i) for i in range(40)]
    after = [signed(n=100 + i) for i in range(25)]
    first = start_receiver()
    assert asyncio.run(_post_all(first.url, before, workers=8)) == [200] * 40
    first.stop()
    second = start_receiver()
    assert asyncio.run(_post_all(second.url, after, workers=8)) == [200] * 25
    rows = archived(tmp_path / "webhooks")
    assert len(rows) == 65
    assert {body for body, _, _ in rows} == {body for body, _ in before + after}
    assert len(list((tmp_path / "webhooks").glob("deliveries-*.jsonl"))) == 1


# -- the command ---------------------------------------------------------------------------------


def _cli() -> typer.Typer:
    app = typer.Typer()
    app.command()(serve)
    return app


def test_the_command_refuses_a_public_host_and_a_missing_secret(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    for name in ("CONVO_CONFIG", "CONVO_WEBHOOK_SECRET", "CONVO_WEBHOOK_SECRET_FILE"):
        monkeypatch.delenv(name, raising=False)
    runner = CliRunner()
    result = runner.invoke(_cli(), ["--host", "0.0.0.0"], env={"CONVO_WEBHOOK_SECRET": SECRET})
    assert isinstance(result.exception, UserError)
    assert "--behind-tls-proxy" in str(result.exception) and SECRET not in result.output
    result = runner.invoke(_cli(), ["--port", "0"])
    assert isinstance(result.exception, UserError)
    assert "CONVO_WEBHOOK_SECRET" in str(result.exception)


SERVE_SCRIPT = (
    "import typer\n"
    "from convo_analytics.cli._webhooks_serve import serve\n"
    "app = typer.Typer()\n"
    "app.command()(serve)\n"
    "app()\n"
)


def test_the_command_serves_archives_and_stops_cleanly(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CONVO_")}
    env["CONVO_WEBHOOK_SECRET"] = f"{OLD_SECRET}, {SECRET}"
    argv = [sys.executable, "-c", SERVE_SCRIPT, "--port", "0", "--archive-dir", "archive"]
    proc = subprocess.Popen(
        argv, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    watch = OutputWatcher(proc.stdout, "convo webhooks serve")
    try:
        match = watch.wait_for(r"http://127\.0\.0\.1:\d+/webhooks")
        watch.wait_for(r"configured secret")  # its last start-up line: then it serves
        body, headers = signed()
        r = httpx.post(match.group(0), content=body, headers=headers, timeout=10)
        assert r.status_code == 200
        proc.send_signal(signal.SIGINT)
        output = watch.wait_end(proc, timeout=20)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=5)
    assert proc.returncode in (0, 130) and "Traceback" not in output, output  # 130: Ctrl-C
    assert SECRET not in output and OLD_SECRET not in output
    assert "2 configured secrets" in output
    [(archived_body, _, record)] = archived(tmp_path / "archive")
    # privacy.scrub is "mask" by default: the verified event is archived scrubbed, without
    # the signature that no longer fits it, and sealed (D-PRIVACY-SCRUB-AT-LOAD)
    sent = {k: v for k, v in orjson.loads(body).items() if k != "signature"}
    assert orjson.loads(archived_body) == sent and record["secretIndex"] == 1
    assert record["scrub"]["mode"] == "mask" and record["localMac"].startswith("hmac-sha256=")


# -- end to end: the sandbox delivers, with the receiver down for a while --------------------------


def _delivery_log(running: RunningSandbox, hook_id: str) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    params: dict[str, Any] = {"limit": 200}
    with running.client() as client:
        for _ in range(1000):
            page = client.get(f"/v1/webhooks/{hook_id}/deliveries", params=params).json()
            out.extend(page["data"])
            if not page["hasMore"]:
                return out
            params = {"limit": 200, "cursor": page["nextCursor"]}
    raise AssertionError("the delivery log did not end")


def test_the_sandbox_delivers_through_an_outage(
    start_sandbox: Callable[..., RunningSandbox],
    start_receiver: Callable[..., ServerThread],
    tmp_path: Path,
) -> None:
    running = start_sandbox(
        conversations=20, webhook_retry_schedule="0.5,1,2", webhook_ack_timeout=2
    )
    reserved = bind("127.0.0.1", 0)
    port = reserved.getsockname()[1]
    reserved.close()  # nothing listens there until the receiver starts
    with running.client() as client:
        r = client.post(
            "/v1/webhooks", json={"url": f"http://127.0.0.1:{port}/webhooks", "secret": SECRET}
        )
    assert r.status_code == 201, r.text
    hook_id = r.json()["id"]
    result = running.admin(
        "/_sandbox/simulate",
        {"workspace": "acme", "newConversations": 25, "progress": 5, "seed": 3},
    )
    assert result["events"] > 0
    time.sleep(0.7)
    receiver = start_receiver(port=port)

    deadline = time.monotonic() + 30
    while True:
        log = _delivery_log(running, hook_id)
        keys = {e["idempotencyKey"] for e in log}
        done = {e["idempotencyKey"] for e in log if e["outcome"] == "succeeded"}
        if len(keys) == result["events"] and done == keys:
            break
        assert time.monotonic() < deadline, f"{len(done)} of {result['events']} delivered"
        time.sleep(0.2)
    receiver.stop()

    succeeded = [e for e in log if e["outcome"] == "succeeded"]
    assert not [e for e in log if e["outcome"] == "failed"]
    assert any(e["attempt"] > 1 for e in succeeded), "the outage should have needed retries"
    rows = archived(tmp_path / "webhooks")
    assert len(rows) == len(succeeded)
    assert all(record["verified"] for _, _, record in rows)
    assert {headers["idempotency-key"] for _, headers, _ in rows} == keys
    by_key = {e["idempotencyKey"]: e["payload"].encode() for e in succeeded}
    assert all(body == by_key[headers["idempotency-key"]] for body, headers, _ in rows)
    assert quarantined(tmp_path / "webhooks") == []

    # The archive ingests with counts that match the delivery log exactly.
    from convo_analytics.webhooks import archive_files, ingest

    files = archive_files([tmp_path / "webhooks"])
    counts = ingest(files, [SECRET.encode()], tmp_path / "w.duckdb").to_json()
    assert counts["read"] == len(succeeded)
    assert counts["loaded"] == len(keys) == result["events"]
    assert counts["duplicates"] == len(succeeded) - len(keys)
    assert counts["quarantined"] == {}
    by_type: dict[str, int] = {}
    for e in succeeded:
        by_type[e["eventType"]] = by_type.get(e["eventType"], 0) + 1
    assert counts["eventTypes"] == by_type
