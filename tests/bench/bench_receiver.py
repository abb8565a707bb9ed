"""Benchmark of the webhook receiver, against the issue's claim about it.

"It verifies the signature, appends the delivery durably ..., fsyncs, and
only then answers 2xx, well within the 10-second acknowledgement window." So:
acknowledged deliveries per second and the p50/p99 acknowledgement latency at
concurrency 1, 16, 64 and 200, with real signed bodies of about 1 KB, then at
200 again while 300 stalled clients (headers begun, never finished) hold
connections open (issue 14). At concurrency 1 every delivery pays a whole
fsync; above it, group commit shares one fsync among all the deliveries
waiting, which is where throughput comes from. The archive is counted
afterwards: every acknowledged delivery must be a line in it.

The receiver runs in a child process (this file, run as a script), so that the
measuring client does not share a GIL or a core with it; on a 2-core machine
the client's own cost still weighs on the figures.
"""

from __future__ import annotations

import asyncio
import gzip
import os
import secrets
import socket
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path
from urllib.parse import urlsplit

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/, for webhook_support
from _common import (
    LOOPBACK,
    BenchContext,
    Child,
    Report,
    check_local,
    child_env,
    emit,
    memory_mib,
    percentile,
    rate,
)

from webhook_support import http_request, read_answer

THIS = Path(__file__).resolve()
SECRET_ENV = "BENCH_WEBHOOK_SECRET"
ACK_WINDOW_S = 10.0
BODY_BYTES = 1024
POOL = 4000


# -- the receiver child (``python bench_receiver.py serve ARCHIVE_DIR LIFETIME``) -------


def child_serve(archive_dir: str, lifetime: float) -> None:
    """Serve a receiver on 127.0.0.1 until EOF on stdin (or the lifetime ends)."""
    from convo_analytics._serving import ServerThread
    from convo_analytics.webhooks._receiver import ReceiverSettings, create_receiver_app

    settings = ReceiverSettings(archive_dir=Path(archive_dir), secrets=[os.environ[SECRET_ENV]])
    stdin_closed = threading.Event()

    def watch_stdin() -> None:
        sys.stdin.read()
        stdin_closed.set()

    with ServerThread(create_receiver_app(settings), **settings.server_options()) as server:
        emit({"ready": {"url": server.url, **memory_mib()}})
        threading.Thread(target=watch_stdin, daemon=True).start()
        stdin_closed.wait(lifetime)
    emit({"final": memory_mib()})


# -- load --------------------------------------------------------------------------------


def signed_deliveries(secret: str, count: int) -> list[tuple[bytes, dict[str, str]]]:
    """Deliveries as the sandbox sends them, each body about BODY_BYTES long."""
    from convo_analytics.webhooks import append_signature, sign

    out = []
    for i in range(count):
        data = {"messageId": f"msg_{i:08d}", "role": "assistant", "text": ""}
        envelope = {
            "event": "message.responded",
            "timestamp": "2026-11-18T10:00:00.000Z",
            "workspaceId": "ws_bench",
            "conversationId": f"conv_{i:08d}",
            "data": data,
        }
        pad = BODY_BYTES - len(orjson.dumps(envelope)) - 83  # the signature member's length
        data["text"] = "lorem ipsum " * (pad // 12) + "x" * (pad % 12)
        unsigned = orjson.dumps(envelope)
        signature = sign(secret, unsigned)
        headers = {
            "Content-Type": "application/json",
            "X-Convo-Signature": signature,
            "Idempotency-Key": f"evt_{secrets.token_hex(8)}",
            "X-Convo-Event": "message.responded",
            "X-Convo-Delivery": f"dlv_{secrets.token_hex(8)}",
            "X-Convo-Attempt": "1",
        }
        out.append((append_signature(unsigned, signature), headers))
    return out


async def drive(
    url: str,
    deliveries: list[tuple[bytes, dict[str, str]]],
    concurrency: int,
    seconds: float,
) -> tuple[float, list[float], Counter[int]]:
    """POST deliveries round-robin over ``concurrency`` keep-alive connections for ``seconds``.

    A minimal HTTP/1.1 client on asyncio streams rather than httpx: on this
    machine httpx's async client costs more CPU per request than the receiver
    does, and at 64 connections it falls to about 100 requests/s against any
    server, so it would measure itself.
    """
    parts = urlsplit(check_local(url))
    host, port = parts.hostname or LOOPBACK, parts.port or 80
    requests = [http_request("/webhooks", body, headers) for body, headers in deliveries]
    latencies: list[float] = []
    statuses: Counter[int] = Counter()
    started = time.perf_counter()
    end = started + seconds

    async def worker(offset: int) -> None:
        reader, writer = await asyncio.open_connection(host, port)
        try:
            i = offset
            while time.perf_counter() < end:
                sent = time.perf_counter()
                writer.write(requests[i % len(requests)])
                await writer.drain()
                statuses[await read_answer(reader)] += 1
                latencies.append(time.perf_counter() - sent)
                i += concurrency
        finally:
            writer.close()

    await asyncio.wait_for(asyncio.gather(*(worker(k) for k in range(concurrency))), seconds + 60)
    return time.perf_counter() - started, latencies, statuses


def fsync_ms(directory: Path, samples: int = 50) -> float:
    """The median time of one 1 KB append plus fsync here: the floor at concurrency 1."""
    path = directory / "fsync-probe"
    times = []
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        for _ in range(samples):
            started = time.perf_counter()
            os.write(fd, b"x" * BODY_BYTES)
            os.fsync(fd)
            times.append((time.perf_counter() - started) * 1000)
    finally:
        os.close(fd)
        path.unlink()
    return percentile(times, 50)


def count_lines(directory: Path) -> int:
    total = 0
    for path in directory.glob("deliveries-*.jsonl*"):
        data = path.read_bytes()
        total += (gzip.decompress(data) if path.suffix == ".gz" else data).count(b"\n")
    return total


def bench_receiver(ctx: BenchContext, report: Report) -> None:
    """Acknowledged deliveries/s and p50/p99 acknowledgement latency at 1, 16 and 64."""
    seconds = ctx.size(10.0, 3.0, 0.5)
    levels = (1, 16, 64, 200)
    secret = f"whsec_bench_{secrets.token_hex(12)}"
    deliveries = signed_deliveries(secret, POOL)
    report.sizes.update(
        {
            "body bytes": len(deliveries[0][0]),
            "distinct deliveries": POOL,
            "concurrency": "/".join(map(str, levels)),
            "seconds per level": seconds,
        }
    )
    acknowledged = 0
    with tempfile.TemporaryDirectory(prefix="convo-bench-") as tmp:
        archive = Path(tmp) / "webhooks"
        report.add("fsync of a 1 KB append (median, this disk)", fsync_ms(Path(tmp)), "ms")
        argv = [sys.executable, str(THIS), "serve", str(archive), str(seconds * 10 + 120)]
        with Child(argv, cwd=Path(tmp), env=child_env(**{SECRET_ENV: secret})) as child:
            ready = child.json_line("ready", timeout=60)["ready"]
            report.add("receiver RSS when ready", ready["rss_mib"], "MiB")
            for concurrency in levels:
                elapsed, latencies, statuses = asyncio.run(
                    drive(ready["url"], deliveries, concurrency, seconds)
                )
                ok = statuses[200]
                acknowledged += ok
                p99 = percentile(latencies, 99)
                label = f"c={concurrency}"
                report.add(f"{label}: acknowledged/s", rate(ok, elapsed), "dlv/s")
                report.add(f"{label}: ack p50", percentile(latencies, 50) * 1000, "ms")
                report.add(
                    f"{label}: ack p99",
                    p99 * 1000,
                    "ms",
                    target=f"< {ACK_WINDOW_S * 1000:g} ms (ack window)",
                    ok=p99 < ACK_WINDOW_S,
                )
                if set(statuses) != {200}:
                    report.note(f"{label}: statuses {dict(statuses)}")
            stalled = (
                ctx.size(STALLED, STALLED, 20),
                ctx.size(STALLED_SECONDS, STALLED_SECONDS, 1.0),
            )
            acknowledged += _with_stalled_clients(ready["url"], deliveries, report, *stalled)
            child.stop(sig=0, timeout=30)
        final = next(
            (orjson.loads(s)["final"] for s in reversed(child.output) if s.startswith('{"final"')),
            {},
        )
        report.add("receiver peak RSS", final.get("peak_rss_mib"), "MiB")
        lines = count_lines(archive)
        report.add("archived lines", lines)
        report.add("acknowledged deliveries", acknowledged)
        report.add(
            "archived == acknowledged",
            lines == acknowledged,
            target="True",
            ok=lines == acknowledged,
        )


STALLED = 300
#: Shorter than the receiver's header timeout (5 s), so the stalled clients stay connected.
STALLED_SECONDS = 4.0


def _with_stalled_clients(
    url: str,
    deliveries: list[tuple[bytes, dict[str, str]]],
    report: Report,
    count: int = STALLED,
    seconds: float = STALLED_SECONDS,
) -> int:
    """Concurrency 200 while ``count`` clients hold connections with half-sent headers."""
    parts = urlsplit(check_local(url))
    stalled = []
    try:
        for _ in range(count):
            sock = socket.create_connection((parts.hostname, parts.port), timeout=10)
            sock.sendall(b"POST /webhooks HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Ty")
            stalled.append(sock)
        elapsed, latencies, statuses = asyncio.run(drive(url, deliveries, 200, seconds))
    finally:
        for sock in stalled:
            sock.close()
    label = f"c=200, {count} stalled clients connected"
    p99 = percentile(latencies, 99)
    report.add(f"{label}: acknowledged/s", rate(statuses[200], elapsed), "dlv/s")
    report.add(f"{label}: ack p99", p99 * 1000, "ms", target="< 2000 ms (issue 14)", ok=p99 < 2.0)
    if set(statuses) != {200}:
        report.note(f"{label}: statuses {dict(statuses)}")
    return statuses[200]


BENCHES = [("receiver", bench_receiver)]


if __name__ == "__main__":
    role, *rest = sys.argv[1:] or ["help"]
    if role == "serve":
        child_serve(rest[0], float(rest[1]))
    else:
        sys.exit(f"usage: {os.path.basename(__file__)} serve ARCHIVE_DIR SECONDS")
