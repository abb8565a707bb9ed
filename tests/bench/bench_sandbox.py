"""Benchmarks of the sandbox, against the issue's claim about it.

"It starts in under 5 s with 10,000 conversations and serves 100,000 without
trouble." So: how long building a history takes and how much memory it holds
(each size in its own child process, so that the peak RSS is that size's own);
how long ``convo sandbox serve`` takes from launch to answering; how fast a
100,000-conversation sandbox pages, fetches details and summarises over real
HTTP; and whether the rate limiter lets a client that paces itself at exactly
the allowed rate through (the edge where an inaccurate bucket shows).

Servers run in child processes (this file, run as a script with a role), so
the measuring client does not share a GIL or a core with the server it measures.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import orjson
from _common import (
    BenchContext,
    Child,
    Deadline,
    Report,
    child_env,
    emit,
    local_async_client,
    local_client,
    memory_mib,
    percentile,
    python_child,
    rate,
    timed,
)

THIS = Path(__file__).resolve()
KEY = "sk_bench_key_123456"
#: A fixed end of history, as in the tests, so that every run serves the same data.
UNTIL_MS = 1_795_000_000_000
DAYS = 30
START_TARGET_S = 5.0
PAGE_LIMIT = 200


def sandbox_settings(conversations: int, rate_limit: str, days: int = DAYS) -> dict[str, Any]:
    """Keyword arguments of SandboxSettings (JSON-able, for the serving child)."""
    return {
        "conversations": conversations,
        "days": days,
        "rate_limit": rate_limit,
        "workspaces": [["bench", KEY]],
        "until_ms": UNTIL_MS,
    }


# -- child roles (run as ``python bench_sandbox.py ROLE ...``) -------------------------


def child_build(conversations: int) -> None:
    """Build one sandbox and report generation and indexing times and memory.

    The two phases are timed by wrapping the functions the Sandbox calls (in
    this throwaway process only), so that a slow build says which half is slow.
    """
    from convo_analytics.sandbox import Sandbox, SandboxSettings
    from convo_analytics.sandbox import _service as service
    from convo_analytics.sandbox._workspace import Workspace

    after_import = memory_mib()
    phases: Counter[str] = Counter()
    generate, load = service.generate_history, Workspace.load_history

    def timed_generate(*args: Any, **kwargs: Any) -> Any:
        started = time.perf_counter()
        try:
            return generate(*args, **kwargs)
        finally:
            phases["generate"] += time.perf_counter() - started

    def timed_load(self: Workspace, history: Any) -> None:
        started = time.perf_counter()
        try:
            load(self, history)
        finally:
            phases["index"] += time.perf_counter() - started

    service.generate_history = timed_generate
    Workspace.load_history = timed_load  # type: ignore[method-assign]
    settings = sandbox_settings(conversations, "none")
    started = time.perf_counter()
    sandbox = Sandbox(SandboxSettings(**{**settings, "workspaces": [("bench", KEY)]}))
    seconds = time.perf_counter() - started
    ws = next(iter(sandbox.workspaces.values()))
    emit(
        {
            "build": {
                "seconds": seconds,
                "generate_seconds": phases["generate"],
                "index_seconds": phases["index"],
                "conversations": len(ws.conversations),
                "leads": len(ws.leads),
                "rss_after_import_mib": after_import["rss_mib"],
                **memory_mib(),
            }
        }
    )


def child_serve(settings_json: str, lifetime: float) -> None:
    """Build a sandbox, serve it on 127.0.0.1, and stop at EOF on stdin (or after lifetime)."""
    from convo_analytics._serving import ServerThread
    from convo_analytics.sandbox import Sandbox, SandboxSettings, create_app

    kwargs = json.loads(settings_json)
    kwargs["workspaces"] = [tuple(pair) for pair in kwargs["workspaces"]]
    started = time.perf_counter()
    sandbox = Sandbox(SandboxSettings(**kwargs))
    build_seconds = time.perf_counter() - started
    ws = next(iter(sandbox.workspaces.values()))
    stdin_closed = threading.Event()

    def watch_stdin() -> None:
        sys.stdin.read()
        stdin_closed.set()

    with ServerThread(create_app(sandbox)) as server:
        emit(
            {
                "ready": {
                    "url": server.url,
                    "build_seconds": build_seconds,
                    "conversations": len(ws.conversations),
                    "leads": len(ws.leads),
                    **memory_mib(),
                }
            }
        )
        threading.Thread(target=watch_stdin, daemon=True).start()
        stdin_closed.wait(lifetime)
    emit({"final": memory_mib()})


# -- serving helpers -------------------------------------------------------------------


@dataclass
class Served:
    url: str
    ready: dict[str, Any]
    final: dict[str, Any] = field(default_factory=dict)


@contextmanager
def served(settings: dict[str, Any], startup_timeout: float, lifetime: float) -> Iterator[Served]:
    """A sandbox served by a child process; its final memory figures are read at the end."""
    with (
        tempfile.TemporaryDirectory(prefix="convo-bench-") as tmp,
        python_child(THIS, ["serve", json.dumps(settings), str(lifetime)], Path(tmp)) as child,
    ):
        ready = child.json_line("ready", startup_timeout)["ready"]
        result = Served(url=ready["url"], ready=ready)
        try:
            yield result
        finally:
            child.stop(sig=0, timeout=15)
            for line in reversed(child.output):
                if line.startswith('{"final"'):
                    result.final = json.loads(line)["final"]
                    break


# -- 1. build time and memory ----------------------------------------------------------


def bench_build(ctx: BenchContext, report: Report) -> None:
    """History generation + indexing per size, each in a fresh process for a true peak RSS."""
    sizes = ctx.size([10_000, 100_000], [2_000, 10_000], [200])
    report.sizes.update({"conversations": "/".join(f"{n:,}" for n in sizes), "days": DAYS})
    report.sizes["workspaces"] = 1
    for n in sizes:
        with (
            tempfile.TemporaryDirectory(prefix="convo-bench-") as tmp,
            python_child(THIS, ["build", str(n)], Path(tmp)) as child,
        ):
            data = child.json_line("build", timeout=240)["build"]
            child.stop(sig=0, timeout=30)
        label = f"{n // 1000}k" if n >= 1000 else str(n)
        report.add(f"build {label}: total", data["seconds"], "s")
        report.add(f"build {label}: history generation", data["generate_seconds"], "s")
        report.add(f"build {label}: indexing", data["index_seconds"], "s")
        report.add(f"build {label}: conversations/s", rate(n, data["seconds"]), "conv/s")
        report.add(f"build {label}: leads", data["leads"], "")
        report.add(f"build {label}: peak RSS (child VmHWM)", data["peak_rss_mib"], "MiB")
        report.add(f"build {label}: RSS after imports", data["rss_after_import_mib"], "MiB")
        if data["conversations"] != n:
            report.note(f"asked for {n} conversations, got {data['conversations']}")


# -- 2. CLI start ----------------------------------------------------------------------


def _cli_start_once(conversations: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="convo-bench-") as tmp:
        key_file = Path(tmp) / "keys.json"
        argv = [sys.executable, "-m", "convo_analytics.cli", "sandbox", "serve"]
        argv += ["--port", "0", "--conversations", str(conversations), "--key-file", str(key_file)]
        with Child(argv, cwd=Path(tmp), env=child_env()) as child:
            listening, line = child.wait_for(lambda s: s.startswith("listening on "), timeout=60)
            match = re.search(r"http://127\.0\.0\.1:\d+", line)
            if match is None:
                raise RuntimeError(f"no 127.0.0.1 URL in {line!r}")
            deadline = Deadline(30)
            with local_client(match.group(0), timeout=30) as client:
                for _ in range(3000):
                    try:
                        r = client.get("/_sandbox/health")
                        if r.status_code == 200:
                            break
                    except httpx.TransportError:
                        pass
                    deadline.check("GET /_sandbox/health")
                    time.sleep(0.01)
                else:
                    raise TimeoutError("GET /_sandbox/health never answered 200")
            healthy = time.perf_counter() - child.started
            admin = orjson.loads(key_file.read_bytes())["adminToken"]
            with local_client(match.group(0), timeout=30) as client:
                details = client.get(
                    "/_sandbox/health", headers={"Authorization": f"Bearer {admin}"}
                ).json()  # the workspace counts are behind the admin token
            served_convs = sum(details["workspaces"].values())
            key_mode = oct(key_file.stat().st_mode & 0o777) if key_file.exists() else "missing"
            with timed() as stopping:
                code = child.stop(signal.SIGINT, timeout=15)
        built = next(
            (
                float(m.group(1))
                for s in child.output
                if (m := re.search(r"generated in ([\d.]+) s", s))
            ),
            float("nan"),
        )
    return {
        "listening": listening,
        "healthy": healthy,
        "built": built,
        "stop": stopping(),
        "exit": code,
        "served": served_convs,
        "key_mode": key_mode,
    }


def bench_cli_start(ctx: BenchContext, report: Report) -> None:
    """Launch of ``convo sandbox serve`` to a 200 from /_sandbox/health: the "under 5 s" claim."""
    conversations, runs = ctx.size(10_000, 10_000, 200), ctx.size(3, 1, 1)
    report.sizes.update({"conversations": conversations, "days": DAYS, "runs": runs})
    with tempfile.TemporaryDirectory(prefix="convo-bench-") as tmp, timed() as baseline:
        subprocess.run(
            [sys.executable, "-m", "convo_analytics.cli", "--help"],
            cwd=tmp,
            env=child_env(),
            capture_output=True,
            timeout=60,
            check=True,
        )
    outcomes = [_cli_start_once(conversations) for _ in range(runs)]
    healthy = [o["healthy"] for o in outcomes]
    median_healthy = percentile(healthy, 50)
    report.add(
        "launch -> health 200 (median)",
        median_healthy,
        "s",
        target=f"< {START_TARGET_S:g} s",
        ok=median_healthy < START_TARGET_S,
    )
    report.add(
        "launch -> health 200 (worst)",
        max(healthy),
        "s",
        target=f"< {START_TARGET_S:g} s",
        ok=max(healthy) < START_TARGET_S,
    )
    report.add(
        "launch -> 'listening on' line (median)",
        percentile([o["listening"] for o in outcomes], 50),
        "s",
    )
    report.add(
        "history build, as the CLI prints it (median)",
        percentile([o["built"] for o in outcomes], 50),
        "s",
    )
    report.add("`convo --help` (interpreter + CLI imports)", baseline(), "s")
    report.add("SIGINT -> exit (median)", percentile([o["stop"] for o in outcomes], 50), "s")
    report.add("exit codes", ",".join(str(o["exit"]) for o in outcomes))
    for o in outcomes:
        if o["served"] != conversations:
            report.note(f"health reported {o['served']} conversations, expected {conversations}")
        if o["key_mode"] != "0o600":
            report.note(f"key file mode is {o['key_mode']}, expected 0o600")


# -- 3. HTTP against 100,000 conversations ----------------------------------------------


@dataclass
class Paging:
    records: int = 0
    unique: int = 0
    requests: int = 0
    seconds: float = 0.0
    latencies: list[float] = field(default_factory=list)
    ids: list[str] = field(default_factory=list)


def page_through(
    client: httpx.Client, path: str, params: dict[str, Any], max_pages: int, deadline: Deadline
) -> Paging:
    """Every record of a list endpoint, following nextCursor; bounded in pages and time."""
    out = Paging()
    query = dict(params)
    seen: set[str] = set()
    started = time.perf_counter()
    for _ in range(max_pages):
        sent = time.perf_counter()
        r = client.get(path, params=query)
        out.latencies.append(time.perf_counter() - sent)
        out.requests += 1
        r.raise_for_status()
        body = orjson.loads(r.content)
        for record in body["data"]:
            out.ids.append(record["id"])
            seen.add(record["id"])
        if not body["hasMore"]:
            break
        query = {"cursor": body["nextCursor"], "limit": params["limit"]}
        deadline.check(f"paging {path}")
    else:
        raise RuntimeError(f"{path} did not finish within {max_pages} pages")
    out.seconds = time.perf_counter() - started
    out.records, out.unique = len(out.ids), len(seen)
    return out


async def fetch_details(
    url: str, ids: list[str], concurrency: int, timeout: float
) -> tuple[float, list[float], Counter[int]]:
    """GET each conversation with ``concurrency`` workers; total seconds, latencies, statuses."""
    latencies: list[float] = []
    statuses: Counter[int] = Counter()
    todo = iter(ids)
    async with local_async_client(url, KEY, concurrency) as client:

        async def worker() -> None:
            for conversation_id in todo:
                sent = time.perf_counter()
                r = await client.get(f"/v1/conversations/{conversation_id}")
                latencies.append(time.perf_counter() - sent)
                statuses[r.status_code] += 1

        started = time.perf_counter()
        await asyncio.wait_for(asyncio.gather(*(worker() for _ in range(concurrency))), timeout)
        return time.perf_counter() - started, latencies, statuses


#: Small answers: their latency shows per-request overhead (and any TCP send delays)
#: that large pages hide.
SMALL_RESPONSES = {
    "small page (limit=1)": "/v1/conversations?limit=1",
    "health": "/_sandbox/health",
}


def sequential_ms(client: httpx.Client, path: str, calls: int) -> list[float]:
    """Latencies in ms of ``calls`` one-after-another GETs of ``path``."""
    out: list[float] = []
    for _ in range(calls):
        sent = time.perf_counter()
        client.get(path).raise_for_status()
        out.append((time.perf_counter() - sent) * 1000)
    return out


def _add_paging(report: Report, label: str, paging: Paging, expected: int) -> None:
    report.add(f"{label}: records", paging.records)
    report.add(f"{label}: requests", paging.requests)
    report.add(f"{label}: total", paging.seconds, "s")
    report.add(f"{label}: records/s", rate(paging.records, paging.seconds), "rec/s")
    report.add(f"{label}: requests/s", rate(paging.requests, paging.seconds), "req/s")
    report.add(f"{label}: page p50", percentile(paging.latencies, 50) * 1000, "ms")
    report.add(f"{label}: page p99", percentile(paging.latencies, 99) * 1000, "ms")
    first, last = paging.latencies[0], paging.latencies[-1]
    report.add(f"{label}: first / last page", f"{first * 1000:.0f} / {last * 1000:.0f}", "ms")
    if paging.records != expected or paging.unique != expected:
        report.note(
            f"{label}: paged {paging.records} records ({paging.unique} distinct), "
            f"the sandbox holds {expected}"
        )


def bench_http(ctx: BenchContext, report: Report) -> None:
    """Paging, detail fetches and the summary over real HTTP against a large sandbox."""
    n = ctx.size(100_000, 10_000, 300)
    details, concurrency, summary_calls = ctx.size(2_000, 500, 20), 16, 5
    until = datetime.fromtimestamp(UNTIL_MS / 1000, UTC).date()
    frm = until - timedelta(days=DAYS - 1)
    report.sizes.update(
        {
            "conversations": n,
            "days": DAYS,
            "page limit": PAGE_LIMIT,
            "detail fetches": details,
            "concurrency": concurrency,
            "summary range": f"{frm}..{until}",
        }
    )
    settings = sandbox_settings(n, "none")
    with served(settings, startup_timeout=240, lifetime=600) as server:
        convs, leads = server.ready["conversations"], server.ready["leads"]
        report.sizes["leads"] = leads
        report.add("server build", server.ready["build_seconds"], "s")
        report.add("server RSS when ready", server.ready["rss_mib"], "MiB")
        with local_client(server.url, KEY, timeout=60) as client:
            conv_pages = page_through(
                client,
                "/v1/conversations",
                {"limit": PAGE_LIMIT},
                max_pages=convs // PAGE_LIMIT + 10,
                deadline=Deadline(240),
            )
            _add_paging(report, "conversations", conv_pages, convs)
            lead_pages = page_through(
                client,
                "/v1/leads",
                {"limit": PAGE_LIMIT, "status": "any"},
                max_pages=leads // PAGE_LIMIT + 10,
                deadline=Deadline(120),
            )
            _add_paging(report, "leads (status=any)", lead_pages, leads)

            ids = random.Random(0).sample(conv_pages.ids, min(details, len(conv_pages.ids)))
            seconds, latencies, statuses = asyncio.run(
                fetch_details(server.url, ids, concurrency, timeout=120)
            )
            report.add("details: requests/s", rate(len(ids), seconds), "req/s")
            report.add("details: p50 latency", percentile(latencies, 50) * 1000, "ms")
            report.add("details: p99 latency", percentile(latencies, 99) * 1000, "ms")
            report.add("details: total", seconds, "s")
            if statuses != Counter({200: len(ids)}):
                report.note(f"detail statuses: {dict(statuses)}")

            summary_ms: list[float] = []
            params = {"from": frm.isoformat(), "to": until.isoformat()}
            for _ in range(summary_calls):
                sent = time.perf_counter()
                r = client.get("/v1/analytics/summary", params=params)
                summary_ms.append((time.perf_counter() - sent) * 1000)
                r.raise_for_status()
            report.add("summary 30 days: p50", percentile(summary_ms, 50), "ms")
            report.add("summary 30 days: max", max(summary_ms), "ms")
            for label, path in SMALL_RESPONSES.items():
                small_ms = sequential_ms(client, path, calls=20)
                report.add(f"{label}: p50 latency (sequential)", percentile(small_ms, 50), "ms")
    report.add("server peak RSS after all traffic", server.final.get("peak_rss_mib"), "MiB")


# -- 4. rate limiter at the edge --------------------------------------------------------


@dataclass
class Paced:
    statuses: Counter[int] = field(default_factory=Counter)
    paced_statuses: Counter[int] = field(default_factory=Counter)
    retry_after: list[str] = field(default_factory=list)
    seconds: float = 0.0
    paced_seconds: float = 0.0
    burst_seconds: float = 0.0
    first_429_at: float | None = None
    #: When each paced request was sent (perf_counter), for the rate actually sent.
    paced_sent_at: list[float] = field(default_factory=list)
    #: X-RateLimit-Remaining of the last answer: how close to empty the bucket ran.
    last_remaining: str = "?"


async def drive_paced(url: str, burst: int, per_second: float, seconds: float) -> Paced:
    """Spend ``burst`` requests at once, then send on an exact schedule for the rest.

    Open loop: each paced request is started at its due time (start + i / rate)
    whether or not earlier answers are back, so the server sees the allowed rate
    even when an answer is slow; the burst goes out over 16 connections so that
    it is a burst and not a sequence of round trips.
    """
    out = Paced()
    started = time.perf_counter()

    async def send(client: httpx.AsyncClient, paced: bool) -> None:
        if paced:
            out.paced_sent_at.append(time.perf_counter())
        r = await client.get("/v1/conversations", params={"limit": 1})
        out.statuses[r.status_code] += 1
        out.last_remaining = r.headers.get("X-RateLimit-Remaining", "?")
        if paced:
            out.paced_statuses[r.status_code] += 1
        if r.status_code == 429:
            out.retry_after.append(r.headers.get("Retry-After", "?"))
            if out.first_429_at is None:
                out.first_429_at = time.perf_counter() - started

    async with local_async_client(url, KEY, concurrency=16) as client:
        await asyncio.wait_for(
            asyncio.gather(*(send(client, False) for _ in range(burst))), timeout=30
        )
        paced_start = time.perf_counter()
        out.burst_seconds = paced_start - started
        interval, offset = 1 / per_second, (1 if burst else 0)
        tasks: list[asyncio.Task[None]] = []
        for i in range(int(seconds * per_second) + 1):
            due = paced_start + (i + offset) * interval
            if due - started > seconds:
                break
            await asyncio.sleep(max(0.0, due - time.perf_counter()))
            tasks.append(asyncio.create_task(send(client, True)))
        await asyncio.wait_for(asyncio.gather(*tasks), timeout=30)
    ended = time.perf_counter()
    out.seconds, out.paced_seconds = ended - started, ended - paced_start
    return out


def bench_rate_limit(ctx: BenchContext, report: Report) -> None:
    """Drive each policy at exactly its allowed rate: a correct bucket answers 429 to none."""
    from convo_analytics.sandbox import RateLimitPolicy

    seconds, conversations = ctx.size(20.0, 6.0, 1.0), ctx.size(500, 500, 50)
    report.sizes.update({"conversations": conversations, "seconds per policy": seconds})
    for spec in ("600/min", "100/min"):
        policy = RateLimitPolicy.parse(spec)
        assert policy is not None
        burst = int(policy.capacity) if policy.scope == "key" else 0
        settings = sandbox_settings(conversations, spec, days=7)
        with served(settings, startup_timeout=60, lifetime=120) as server:
            run = asyncio.run(drive_paced(server.url, burst, policy.per_second, seconds))
        sent, ok, limited = sum(run.statuses.values()), run.statuses[200], run.statuses[429]
        report.sizes[spec] = f"bucket {policy.capacity:g}, per {policy.scope}" + (
            f", burst {burst} first" if burst else ""
        )
        report.add(f"{spec}: sent", sent)
        report.add(f"{spec}: 200", ok)
        report.add(f"{spec}: 429", limited, target="0", ok=limited == 0)
        if sent - ok - limited:
            report.add(f"{spec}: all statuses", str(dict(run.statuses)))
        if burst:
            report.add(f"{spec}: burst of {burst} took", run.burst_seconds, "s")
        report.add(f"{spec}: window", run.seconds, "s")
        allowed_total = policy.capacity + policy.per_second * run.seconds
        report.add(f"{spec}: most 200s the bucket allows in the window", int(allowed_total))
        times = run.paced_sent_at
        sent_rate = rate(len(times) - 1, times[-1] - times[0]) * 60 if len(times) > 1 else 0.0
        paced_sent = sum(run.paced_statuses.values())
        achieved = sent_rate * run.paced_statuses[200] / paced_sent if paced_sent else 0.0
        report.add(f"{spec}: paced send rate", sent_rate, "/min")
        report.add(
            f"{spec}: paced 200 rate vs allowed",
            f"{achieved:.1f} / {policy.per_minute:g}",
            "/min",
        )
        report.add(f"{spec}: X-RateLimit-Remaining at the end", run.last_remaining)
        if run.first_429_at is not None:
            report.note(
                f"{spec}: first 429 after {run.first_429_at:.2f} s; "
                f"Retry-After values {sorted(Counter(run.retry_after).items())}"
            )


BENCHES = [
    ("sandbox.build", bench_build),
    ("sandbox.cli-start", bench_cli_start),
    ("sandbox.http", bench_http),
    ("sandbox.rate-limit", bench_rate_limit),
]


if __name__ == "__main__":
    # Child roles; run.py is the entry point for people.
    role, *rest = sys.argv[1:] or ["help"]
    if role == "build":
        child_build(int(rest[0]))
    elif role == "serve":
        child_serve(rest[0], float(rest[1]))
    else:
        sys.exit(f"usage: {os.path.basename(__file__)} build N | serve SETTINGS_JSON SECONDS")
