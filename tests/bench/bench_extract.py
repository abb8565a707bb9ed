"""Benchmarks of ``convo extract``, against the issue's aims for it.

"`make bench` reports, for a sandbox workspace of 100,000 conversations with
the rate limit lifted: records loaded per second and peak memory; and, at each
rate limit, the request rate achieved over the rate allowed and the share of
429s. It also runs dlt's REST API source (a bench-only extra) against the same
sandbox into DuckDB and prints the ratio. On this 2-core machine, DuckDB alone
reads about 1,000,000 JSON records/s and dlt with default settings loads about
25,000/s: aim to load at least 200,000 records/s."

So: a whole extraction of a 100,000-conversation sandbox, end to end, and the
time its load stage took (extract-100k); the load stage alone on the same kind
of records built in memory, with no HTTP (extract-load-only); extractions at
600/min and 100/min against a sandbox that enforces them (extract-rate-limits);
and dlt's rest_api source against a 100,000-conversation sandbox, next to our
extractor on the same lists (dlt-rest-api).

What "records" counts here, everywhere: what the load stage takes in, that is
listed conversations + conversation details + the messages inside those
details + listed leads. End-to-end figures also give the rows landed in the
typed tables conversations + messages + leads (the issue's wording).

Sandboxes are served by bench_sandbox.py's serving child; extractions, loads
and dlt run in children of this file (run as a script with a role), so that
each one's peak RSS (VmHWM) is its own and no client shares a GIL with the
server it measures.
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import orjson
from _common import (
    BenchContext,
    Child,
    Deadline,
    Report,
    check_local,
    child_env,
    emit,
    local_client,
    memory_mib,
    rate,
)
from bench_sandbox import KEY, PAGE_LIMIT, sandbox_settings, served

from convo_analytics.extract._streams import ExtractConfig

THIS = Path(__file__).resolve()
#: The issue's aim for loading, and the two reference points it gives.
LOAD_AIM = 200_000
DUCKDB_READS = 1_000_000
DLT_LOADS = 25_000
#: The rate-limit aims: at least this share of the allowed rate, at most this share of 429s.
RATE_SHARE_AIM = 0.95
LIMITED_SHARE_AIM = 0.01
#: Records per committed batch, as ExtractConfig.batch_records defaults to.
BATCH_RECORDS = ExtractConfig.batch_records
#: The tables whose rows the figures count: typed rows landed, and raw versions stored.
TYPED_TABLES = ("conversations", "messages", "leads")
RAW_TABLES = ("raw_conversations", "raw_conversation_details", "raw_leads")
#: dlt must not phone home (telemetry) nor read a developer's ~/.dlt; set for its child.
DLT_ENV = {
    "RUNTIME__DLTHUB_TELEMETRY": "false",
    "RUNTIME__SENTRY_DSN": "",
    "NO_PROXY": "127.0.0.1",
    "no_proxy": "127.0.0.1",
}


def dlt_missing() -> str | None:
    """Why dlt cannot run here (None when it can): it is the bench dependency group."""
    try:
        import dlt  # noqa: F401
        from dlt.sources.rest_api import rest_api_source  # noqa: F401
    except ImportError as exc:
        return (
            f"dlt is not installed ({exc}); it is the 'bench' dependency group: "
            "uv sync --group bench (make bench does this)"
        )
    return None


# -- counting what the load stage does -----------------------------------------------


#: The load functions the runner calls (``load.NAME(...)``), timed one by one.
LOAD_STEPS = (
    "stage_records",
    "classify",
    "insert_raw",
    "merge_conversations",
    "_replace_detail_children",
    "merge_leads",
    "record_structure",
)


class LoadClock:
    """Time spent in ListStreamRun._commit (in the loader thread), in each load function it
    calls, and in the run's final checkpoint (Extraction._checkpoint).

    Installed by wrapping module attributes in the child process only: the
    runner calls ``load.stage_records(...)`` and so on through the module, so
    the wrappers see every call. ``_replace_detail_children`` (the transcripts) runs inside
    ``merge_conversations``; its time is taken out of the merge's.
    """

    def __init__(self) -> None:
        self.seconds: Counter[str] = Counter()
        self.calls: Counter[str] = Counter()
        self.commits = 0
        self.commit_seconds = 0.0
        self.checkpoint_seconds = 0.0
        self.listed = 0
        self.details = 0

    def install(self) -> None:
        from convo_analytics.extract._list_stream import ListStreamRun
        from convo_analytics.extract._runner import Extraction
        from convo_analytics.warehouse import _load as load

        for name in LOAD_STEPS:
            fn = getattr(load, name, None)
            if fn is not None:  # a step renamed in the loader is left out, not an error
                setattr(load, name, self._wrap(name, fn))
        commit = ListStreamRun._commit

        def timed_commit(ext: Any, batch: Any, *args: Any, **kwargs: Any) -> None:
            started = time.perf_counter()
            try:
                commit(ext, batch, *args, **kwargs)
            finally:
                self.commit_seconds += time.perf_counter() - started
                self.commits += 1
                self.listed += batch.records
                self.details += len(batch.details)

        ListStreamRun._commit = timed_commit  # type: ignore[method-assign]
        checkpoint = Extraction._checkpoint

        def timed_checkpoint(ext: Any) -> None:
            started = time.perf_counter()
            try:
                checkpoint(ext)
            finally:
                self.checkpoint_seconds += time.perf_counter() - started

        Extraction._checkpoint = timed_checkpoint  # type: ignore[method-assign]

    def _wrap(self, name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        def timed(*args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                key = name
                if name == "stage_records":
                    key = f"stage_records({args[1]})"
                self.seconds[key] += time.perf_counter() - started
                self.calls[key] += 1

        return timed

    def steps(self) -> dict[str, float]:
        out = dict(self.seconds)
        if "_replace_detail_children" in out and "merge_conversations" in out:
            out["merge_conversations"] -= out["_replace_detail_children"]
        out["COMMIT and the rest"] = self.commit_seconds - sum(out.values())
        return out

    def to_json(self) -> dict[str, Any]:
        return {
            "commits": self.commits,
            "commit_seconds": self.commit_seconds,
            "checkpoint_seconds": self.checkpoint_seconds,
            "listed": self.listed,
            "details": self.details,
            "steps": self.steps(),
        }


def table_counts(db: Path) -> dict[str, int]:
    import duckdb

    con = duckdb.connect(str(db), read_only=True)
    try:
        return {
            t: int(con.execute(f"SELECT count(*) FROM {t}").fetchone()[0])  # type: ignore[index]
            for t in (*TYPED_TABLES, *RAW_TABLES)
        }
    finally:
        con.close()


class RecordingTransport(httpx.AsyncBaseTransport):
    """The extractor's transport, noting when each request went out and its status.

    Given a transport, httpx ignores the client's pool limits, so this one is
    built with the limits the extractor's client asks for.
    """

    def __init__(self, connections: int) -> None:
        limits = httpx.Limits(max_connections=connections, max_keepalive_connections=connections)
        self.inner = httpx.AsyncHTTPTransport(limits=limits, trust_env=False)
        self.log: list[tuple[float, int]] = []

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        check_local(str(request.url))
        sent = time.perf_counter()
        response = await self.inner.handle_async_request(request)
        self.log.append((sent, response.status_code))
        return response

    async def aclose(self) -> None:
        await self.inner.aclose()


# -- child roles (run as ``python bench_extract.py ROLE ...``) -------------------------


def child_extract(spec_json: str) -> None:
    """One extraction as ``convo extract`` runs it; its result, load time and memory.

    ``spec["list_only"]`` drops the conversations stream's detail fetch (in this
    throwaway process only), for comparing list loading with dlt like for like.
    """
    from convo_analytics.extract import ExtractConfig, SourceSpec, run_extract

    spec = json.loads(spec_json)
    source = None
    if spec.get("list_only"):  # a detail path "" fetches no details
        source = SourceSpec.model_validate({"streams": {"conversations": {"detail": {"path": ""}}}})
    clock = LoadClock()
    clock.install()
    concurrency = 16
    recorder = RecordingTransport(max(4, concurrency * 2)) if spec.get("record") else None
    config = ExtractConfig(
        base_url=check_local(spec["url"]),
        api_key=KEY,
        db_path=Path(spec["db"]),
        rate_limit=spec["rate_limit"],
        streams=tuple(spec["streams"]),
        detail_concurrency=concurrency,
        source=source,
    )
    started = time.perf_counter()
    result, timed_out = None, False
    try:
        result = asyncio.run(
            asyncio.wait_for(run_extract(config, transport=recorder), spec["timeout"])
        )
    except TimeoutError:
        timed_out = True
    seconds = time.perf_counter() - started
    memory = memory_mib()
    out: dict[str, Any] = {
        "seconds": seconds,
        "timed_out": timed_out,
        "result": result.to_json() if result else None,
        "load": clock.to_json(),
        **memory,
    }
    if result is not None:
        out["rows"] = table_counts(Path(spec["db"]))
        out["db_mib"] = Path(spec["db"]).stat().st_size / 2**20
    if recorder is not None:
        t0 = recorder.log[0][0] if recorder.log else started
        out["requests"] = [[round(t - t0, 4), status] for t, status in recorder.log]
    emit({"extract": out})


def child_bodies(conversations: int, out_dir: str) -> None:
    """Write the API's answers for a sandbox's history: list pages, details, lead pages.

    Built from the sandbox's domain model in this process, serialised as the
    sandbox serves them (orjson, pages of 200 in updatedAt order), one body a
    line, so that the load-only child reads bytes as the extractor receives them.
    """
    from convo_analytics.sandbox import Sandbox, SandboxSettings

    started = time.perf_counter()
    settings = sandbox_settings(conversations, "none")
    sandbox = Sandbox(SandboxSettings(**{**settings, "workspaces": [("bench", KEY)]}))
    ws = next(iter(sandbox.workspaces.values()))
    build = time.perf_counter() - started
    base = ws.events.app_base
    convs = sorted(ws.conversations.records.values(), key=lambda c: (c.updated_at, c.id))
    leads = sorted(ws.leads.records.values(), key=lambda x: (x.updated_at, x.id))
    out = Path(out_dir)

    def pages(bodies: list[dict[str, Any]], path: Path) -> int:
        with path.open("wb") as f:
            for i in range(0, len(bodies), PAGE_LIMIT):
                more = i + PAGE_LIMIT < len(bodies)
                page = {
                    "data": bodies[i : i + PAGE_LIMIT],
                    "hasMore": more,
                    "nextCursor": f"bench-{i + PAGE_LIMIT}" if more else None,
                }
                f.write(orjson.dumps(page) + b"\n")
        return path.stat().st_size

    listed = [c.summary_json() for c in convs]
    listed_leads = [x.to_json(base) for x in leads]
    sizes = {
        "conversations": pages(listed, out / "conversations.jsonl"),
        "leads": pages(listed_leads, out / "leads.jsonl"),
    }
    # The same records one a line, for DuckDB's own reading speed (the reference).
    for name, records in (("list_records", listed), ("lead_records", listed_leads)):
        with (out / f"{name}.jsonl").open("wb") as f:
            f.writelines(orjson.dumps(r) + b"\n" for r in records)
    with (out / "details.jsonl").open("wb") as f:
        for c in convs:
            f.write(orjson.dumps(c.detail_json(base)) + b"\n")
    sizes["details"] = (out / "details.jsonl").stat().st_size
    emit(
        {
            "bodies": {
                "conversations": len(convs),
                "messages": sum(len(c.messages) for c in convs),
                "leads": len(leads),
                "bytes": sizes,
                "build_seconds": build,
                "seconds": time.perf_counter() - started,
            }
        }
    )


def _as_run_sets_up(ext: Any, con: Any) -> None:
    """What ``Extraction.run`` sets up before its first stream (connection, reader cursor,
    workspace identity), for a child that calls the runner's ``_commit`` without ``run``.

    Mirrors the start of ``Extraction.run``; tests/test_bench.py runs this benchmark, so
    a change there that this misses fails a test rather than ``make bench``.
    """
    from convo_analytics.extract._workspace import WorkspaceIdentity
    from convo_analytics.warehouse import defer_checkpoints

    cfg = ext.config
    ext.con = con
    defer_checkpoints(con)
    ext.reader = con.cursor()
    ext.identity = WorkspaceIdentity(
        con, cfg.workspace, configured=cfg.workspace_id, implicit=cfg.implicit_workspace,
        base_url=cfg.base_url,
    )  # fmt: skip


def _read_lines(path: Path) -> list[bytes]:
    with path.open("rb") as f:
        return [line.rstrip(b"\n") for line in f]


def child_load(bodies_dir: str, db: str, mode: str) -> None:
    """Only the warehouse load path, on stored bodies: the runner's own ``_commit``.

    Batches of BATCH_RECORDS list records with their details, each committed
    with its bookmark as the runner does. ``mode`` "list" loads the
    conversation list pages only (what dlt's rest_api loads); "full" loads the
    pages with their details (and so messages), then the lead pages.
    """
    from convo_analytics.extract._list_stream import ListStreamRun, _Batch
    from convo_analytics.extract._results import StreamResult
    from convo_analytics.extract._runner import Extraction
    from convo_analytics.extract._schema_drift import SchemaTracker
    from convo_analytics.extract._streams import ExtractConfig
    from convo_analytics.warehouse import RecordPaths, open_warehouse

    src = Path(bodies_dir)
    conv_pages = _read_lines(src / "conversations.jsonl")
    details = _read_lines(src / "details.jsonl") if mode == "full" else []
    lead_pages = _read_lines(src / "leads.jsonl") if mode == "full" else []
    counts = {
        "conversations": [len(orjson.loads(p)["data"]) for p in conv_pages],
        "leads": [len(orjson.loads(p)["data"]) for p in lead_pages],
    }
    loaded_bytes = sum(map(len, conv_pages)) + sum(map(len, details)) + sum(map(len, lead_pages))
    after_read = memory_mib()

    clock = LoadClock()
    clock.install()
    config = ExtractConfig(base_url="http://127.0.0.1:9", api_key=KEY, db_path=Path(db))
    ext = Extraction(config)
    _as_run_sets_up(ext, open_warehouse(Path(db)))
    paths = RecordPaths("data", "id", "updatedAt")
    mark = datetime.now(UTC)
    plan: list[tuple[str, list[bytes], list[bytes]]] = [("conversations", conv_pages, details)]
    if lead_pages:
        plan.append(("leads", lead_pages, []))
    started = time.perf_counter()
    for name, pages, stream_details in plan:
        stream = ListStreamRun(ext, None, config.plan(name), StreamResult(name))  # type: ignore[arg-type]
        tracker = SchemaTracker(ext.con, name, ext.run_id)
        batch, used = _Batch(), 0
        for i, (page, n) in enumerate(zip(pages, counts[name], strict=True)):
            batch.pages.append(page)
            batch.details.extend(stream_details[used : used + n])
            batch.records += n
            used += n
            if batch.records >= BATCH_RECORDS or i == len(pages) - 1:
                stream._commit(batch, paths, tracker, mark)
                batch = _Batch()
        tracker.finish()
    # The run's one checkpoint, at its end: part of the load.
    closing = time.perf_counter()
    ext._checkpoint()
    ext.con.close()
    close_seconds = time.perf_counter() - closing
    seconds = time.perf_counter() - started
    memory = memory_mib()  # before the reference below, which holds its own tables
    rows = table_counts(Path(db))

    # DuckDB alone on the same records, for the 1,000,000 records/s reference:
    # read_json of newline-delimited records into tables (messages unnested from details).
    reference: dict[str, float] = {}
    if mode == "full" and (src / "list_records.jsonl").exists():
        import duckdb

        con = duckdb.connect()
        began = time.perf_counter()
        for table, name in (("l", "list_records"), ("d", "details"), ("x", "lead_records")):
            con.execute(
                f"CREATE TABLE {table} AS SELECT * FROM read_json('{src / name}.jsonl', "
                "format = 'newline_delimited', maximum_object_size = 1073741824)"
            )
        con.execute(
            "CREATE TABLE m AS SELECT id AS cid, unnest(messages, recursive := true) FROM d"
        )
        reference["seconds"] = time.perf_counter() - began
        row = con.execute(
            "SELECT (SELECT count(*) FROM l) + (SELECT count(*) FROM d) + "
            "(SELECT count(*) FROM m) + (SELECT count(*) FROM x)"
        ).fetchone()
        reference["records"] = int(row[0]) if row else 0
        con.close()
    emit(
        {
            "load": {
                "seconds": seconds,
                "close_seconds": close_seconds,
                "clock": clock.to_json(),
                "rows": rows,
                "bytes": loaded_bytes,
                "rss_after_read_mib": after_read["rss_mib"],
                "reference": reference,
                "db_mib": Path(db).stat().st_size / 2**20,
                **memory,
            }
        }
    )


def child_dlt(spec_json: str) -> None:
    """dlt's rest_api source, default settings, one list endpoint into a DuckDB file."""
    spec = json.loads(spec_json)
    import dlt
    from dlt.sources.rest_api import rest_api_source

    url = check_local(spec["url"])
    source = rest_api_source(
        {
            "client": {
                "base_url": f"{url}/v1/",
                "auth": {"type": "bearer", "token": KEY},
                "paginator": {
                    "type": "cursor",
                    "cursor_path": "nextCursor",
                    "cursor_param": "cursor",
                },
            },
            "resources": [
                {
                    "name": spec["resource"],
                    "endpoint": {
                        "path": spec["resource"],
                        "params": {"limit": PAGE_LIMIT, **spec["params"]},
                        "data_selector": "data",
                    },
                }
            ],
        }
    )
    work = Path(spec["work"])
    pipeline = dlt.pipeline(
        pipeline_name="bench",
        pipelines_dir=str(work / "pipelines"),
        destination=dlt.destinations.duckdb(str(work / "dlt.duckdb")),
        dataset_name="bench",
    )
    started = time.perf_counter()
    pipeline.run(source, loader_file_format=spec.get("file_format"))
    seconds = time.perf_counter() - started
    trace = pipeline.last_trace
    steps = {
        step.step: (step.finished_at - step.started_at).total_seconds()
        for step in trace.steps
        if step.finished_at is not None
    }
    rows = dict(trace.last_normalize_info.row_counts) if trace.last_normalize_info else {}
    emit(
        {
            "dlt": {
                "seconds": seconds,
                "steps": steps,
                "rows": rows,
                "version": dlt.__version__,
                "file_format": spec.get("file_format") or "default (insert_values)",
                **memory_mib(),
            }
        }
    )


# -- parent helpers --------------------------------------------------------------------


def run_child(args: Sequence[str], key: str, timeout: float, cwd: Path, **env: str) -> Any:
    """Run one child role to its JSON line (killed if it takes longer than ``timeout``)."""
    argv = [sys.executable, str(THIS), *args]
    with Child(argv, cwd=cwd, env=child_env(**env)) as child:
        data = child.json_line(key, timeout)[key]
        child.stop(sig=0, timeout=30)
    return data


def extract_in_child(spec: dict[str, Any], cwd: Path) -> dict[str, Any]:
    data: dict[str, Any] = run_child(
        ["extract", json.dumps(spec)], "extract", spec["timeout"] + 60, cwd
    )
    if data["timed_out"]:
        raise TimeoutError(f"the extraction did not finish within {spec['timeout']:g} s")
    if not data["result"]["status"] == "ok":
        raise RuntimeError(f"the extraction failed: {json.dumps(data['result'])[:600]}")
    return data


def load_records(rows: dict[str, int]) -> int:
    """Records the load stage took in: listed items + details + messages (one run, fresh DB)."""
    return (
        rows["raw_conversations"]
        + rows["raw_conversation_details"]
        + rows["messages"]
        + rows["raw_leads"]
    )


def note_load_steps(report: Report, label: str, steps: dict[str, float], total: float) -> None:
    """The load stage's time by step, slowest first (which step to look at, at a glance)."""
    parts = sorted(steps.items(), key=lambda kv: -kv[1])
    text = ", ".join(f"{name} {sec:.2f}" for name, sec in parts if sec >= 0.005)
    report.note(f"{label}: load stage {total:.2f} s by step (s): {text}")


def aim(value: float) -> tuple[str, bool]:
    return f">= {LOAD_AIM:,} rec/s", value >= LOAD_AIM


@contextmanager
def workdir() -> Iterator[Path]:
    with tempfile.TemporaryDirectory(prefix="convo-bench-") as tmp:
        yield Path(tmp)


# -- 1. a whole extraction of 100,000 conversations ---------------------------------------


def bench_extract_100k(ctx: BenchContext, report: Report) -> None:
    """``convo extract`` of every stream, rate limit lifted, into a fresh warehouse."""
    n = ctx.size(100_000, 10_000, 300)
    report.sizes.update(
        {
            "conversations": n,
            "streams": "conversations (+details), leads, summary",
            "page size": PAGE_LIMIT,
            "detail concurrency": 16,
            "batch": f"{BATCH_RECORDS:,} records",
            "rate limit": "none (server and client)",
        }
    )
    with served(sandbox_settings(n, "none"), startup_timeout=240, lifetime=900) as server:
        report.sizes["leads"] = server.ready["leads"]
        report.add("server build", server.ready["build_seconds"], "s")
        with workdir() as tmp:
            spec = {
                "url": server.url,
                "db": str(tmp / "w.duckdb"),
                "rate_limit": "none",
                "streams": ["conversations", "leads", "summary"],
                "timeout": 600,
            }
            data = extract_in_child(spec, tmp)
    streams, rows, clock = data["result"]["streams"], data["rows"], data["load"]
    conv = streams["conversations"]
    seconds = data["seconds"]
    records = load_records(rows)
    typed = sum(rows[t] for t in TYPED_TABLES)
    report.sizes["messages"] = rows["messages"]
    report.add("wall time (all streams)", seconds, "s")
    report.add("conversations stream", conv["durationSeconds"], "s")
    report.add(
        "conversations/s (listed, detailed, loaded)",
        rate(conv["records"], conv["durationSeconds"]),
        "conv/s",
    )
    report.add(
        "details fetched/s (HTTP-bound)", rate(conv["details"], conv["durationSeconds"]), "req/s"
    )
    report.add("requests", sum(s["requests"] for s in streams.values()))
    report.add(
        "typed rows landed (conv+msg+leads)/s, end to end",
        rate(typed, seconds),
        "rows/s",
    )
    report.add(
        "load-stage records (list+details+msgs+leads)/s, end to end",
        rate(records, seconds),
        "rec/s",
    )
    load_seconds = clock["commit_seconds"] + clock["checkpoint_seconds"]
    load_rate = rate(records, load_seconds)
    target, ok = aim(load_rate)
    report.add("load stage alone: time in _commit + final CHECKPOINT", load_seconds, "s")
    report.add("load stage alone: records/s", load_rate, "rec/s", target=target, ok=ok)
    report.add(
        "load stage share of wall time (loader thread, fetching goes on)",
        100 * load_seconds / seconds,
        "%",
    )
    steps = {**clock["steps"], "final CHECKPOINT": clock["checkpoint_seconds"]}
    note_load_steps(report, "load", steps, load_seconds)
    report.add("commits", clock["commits"])
    report.add("peak RSS of the extractor (child VmHWM)", data["peak_rss_mib"], "MiB")
    report.add("RSS of the extractor at the end", data["rss_mib"], "MiB")
    report.add("warehouse file", data["db_mib"], "MiB")
    report.note(
        f"records counted: {rows['raw_conversations']:,} listed conversations + "
        f"{rows['raw_conversation_details']:,} details + {rows['messages']:,} messages + "
        f"{rows['raw_leads']:,} listed leads = {records:,}; typed rows = conversations "
        f"{rows['conversations']:,} + messages {rows['messages']:,} + leads {rows['leads']:,}"
    )
    if conv["records"] != n or conv["details"] != n or rows["conversations"] != n:
        report.note(
            f"expected {n:,} conversations listed, detailed and landed; got "
            f"{conv['records']:,} / {conv['details']:,} / {rows['conversations']:,}"
        )


# -- 2. the load stage alone -----------------------------------------------------------


def bench_load_only(ctx: BenchContext, report: Report) -> None:
    """The runner's _commit on stored response bodies: our loader with no HTTP at all."""
    n = ctx.size(100_000, 10_000, 300)
    report.sizes.update(
        {
            "conversations": n,
            "page size": PAGE_LIMIT,
            "batch": f"{BATCH_RECORDS:,} list records (+ their details)",
        }
    )
    with workdir() as tmp:
        made = run_child(["bodies", str(n), str(tmp)], "bodies", 300, tmp)
        report.sizes["leads"] = made["leads"]
        report.sizes["messages"] = made["messages"]
        mib = {k: v / 2**20 for k, v in made["bytes"].items()}
        report.sizes["bodies"] = ", ".join(f"{k} {v:.0f} MiB" for k, v in mib.items())
        runs = {}
        for mode in ("full", "list"):
            runs[mode] = run_child(
                ["load", str(tmp), str(tmp / f"{mode}.duckdb"), mode], "load", 600, tmp
            )
    for mode, label in (("full", "full"), ("list", "list only")):
        data = runs[mode]
        records = load_records(data["rows"])
        load_rate = rate(records, data["seconds"])
        target, ok = aim(load_rate) if mode == "full" else ("", None)
        report.add(f"{label}: records loaded", records)
        report.add(f"{label}: seconds", data["seconds"], "s")
        report.add(f"{label}: records/s", load_rate, "rec/s", target=target, ok=ok)
        report.add(f"{label}: MiB of JSON/s", rate(data["bytes"] / 2**20, data["seconds"]), "MiB/s")
        report.add(f"{label}: peak RSS (child VmHWM)", data["peak_rss_mib"], "MiB")
        report.add(
            f"{label}: RSS with the bodies read, before loading", data["rss_after_read_mib"], "MiB"
        )
        report.add(f"{label}: warehouse file", data["db_mib"], "MiB")
    full = runs["full"]
    ref = full["reference"]
    duck = rate(ref["records"], ref["seconds"])
    ours = rate(load_records(full["rows"]), full["seconds"])
    report.add("DuckDB alone: read_json of the same records", duck, "rec/s")
    report.add("ours (full) / DuckDB alone", ours / duck, "x")
    report.note(
        "records = listed conversations + details + messages + listed leads (full), listed "
        "conversations only (list only); timed: the runner's Extraction._commit per batch "
        "(stage, classify, raw inserts, merges, schema tracking, bookmark, COMMIT) and the "
        "final close (checkpoint); no HTTP and no JSON parsing in Python; bodies read from "
        "disk before timing"
    )
    for mode in ("full", "list"):
        data = runs[mode]
        note_load_steps(
            report,
            mode,
            {**data["clock"]["steps"], "close (checkpoint)": data["close_seconds"]},
            data["seconds"],
        )
    report.note(
        f"DuckDB alone = CREATE TABLE AS SELECT * FROM read_json(...) of the same records one "
        f"a line (list items, details, leads; messages unnested): {ref['records']:,} records "
        f"in {ref['seconds']:.2f} s, into memory, no keys; the issue quotes ~{DUCKDB_READS:,}/s"
    )


# -- 3. the rate limits ----------------------------------------------------------------


def rate_figures(
    log: list[tuple[float, int]], per_second: float, capacity: float, skip: int
) -> dict[str, float]:
    """Achieved rates from the request log: overall, and after the first ``skip`` (the burst)."""
    times = [t for t, _ in log]
    ok = [t for t, status in log if status == 200]
    window = times[-1] - times[0] if len(times) > 1 else math.nan
    steady = times[skip:]
    steady_ok = [t for t, status in log[skip:] if status == 200]
    steady_window = steady[-1] - steady[0] if len(steady) > 1 else math.nan
    return {
        "window": window,
        "rate": rate(len(times) - 1, window),
        "ok_rate": rate(len(ok) - 1, window),
        # The most a bucket of this size lets through in the window, per second.
        "allowed_overall": (capacity + per_second * window) / window if window else math.nan,
        "steady_window": steady_window,
        "steady_rate": rate(len(steady) - 1, steady_window),
        "steady_ok_rate": rate(len(steady_ok) - 1, steady_window),
    }


def bench_rate_limits(ctx: BenchContext, report: Report) -> None:
    """Whole extractions at 600/min and 100/min against a sandbox enforcing the same limit."""
    from convo_analytics.extract._limiter import BURST_SHARE
    from convo_analytics.sandbox import RateLimitPolicy

    # Sized so that each run lasts about 30 s (15 s quick) after the burst: one detail
    # request per conversation, plus a few list pages and the summary.
    seconds = ctx.size(30.0, 15.0, 1.0)
    report.sizes["aimed run length"] = f"~{seconds:g} s after the burst"
    report.sizes["streams"] = "conversations (+details), leads, summary"
    for spec in ("600/min", "100/min"):
        policy = RateLimitPolicy.parse(spec)
        assert policy is not None
        client_burst = max(1.0, policy.capacity * BURST_SHARE)
        n = int(policy.per_second * seconds + client_burst)
        report.sizes[spec] = (
            f"{n} conversations, server bucket {policy.capacity:g} per {policy.scope}, "
            f"client burst {client_burst:g}"
        )
        settings = sandbox_settings(n, spec, days=7)
        with served(settings, startup_timeout=60, lifetime=300) as server, workdir() as tmp:
            job = {
                "url": server.url,
                "db": str(tmp / "w.duckdb"),
                "rate_limit": spec,
                "streams": ["conversations", "leads", "summary"],
                "timeout": 4 * seconds + 30,
                "record": True,
            }
            data = extract_in_child(job, tmp)
        log = [(float(t), int(s)) for t, s in data["requests"]]
        sent = len(log)
        limited = sum(1 for _, s in log if s == 429)
        skip = int(client_burst)
        figs = rate_figures(log, policy.per_second, policy.capacity, skip)
        share = figs["steady_ok_rate"] / policy.per_second
        overall = figs["ok_rate"] / figs["allowed_overall"]
        report.add(f"{spec}: requests sent", sent)
        report.add(f"{spec}: run", data["seconds"], "s")
        report.add(
            f"{spec}: 429 share",
            100 * limited / sent if sent else math.nan,
            "%",
            target=f"<= {100 * LIMITED_SHARE_AIM:g} %",
            ok=limited <= LIMITED_SHARE_AIM * sent,
        )
        report.add(f"{spec}: 429s", limited)
        report.add(
            f"{spec}: 200s/min after the first {skip} (the burst)",
            figs["steady_ok_rate"] * 60,
            "/min",
        )
        report.add(
            f"{spec}: achieved / allowed, after the burst",
            100 * share,
            "%",
            target=f">= {100 * RATE_SHARE_AIM:g} %",
            ok=share >= RATE_SHARE_AIM,
        )
        report.add(
            f"{spec}: achieved / bucket allowance, whole run",
            100 * overall,
            "%",
        )
        report.note(
            f"{spec}: {sent} requests in {figs['window']:.1f} s, {figs['rate'] * 60:.1f}/min sent "
            f"overall; after the first {skip}: {figs['steady_rate'] * 60:.1f}/min sent over "
            f"{figs['steady_window']:.1f} s; allowed {policy.per_minute:g}/min (client aims at "
            f"97 %); the whole-run allowance counts the server's bucket of {policy.capacity:g}"
        )


# -- 4. dlt's rest_api source ------------------------------------------------------------


def fetch_pages(url: str, path: str, params: dict[str, Any], out: Path, max_pages: int) -> float:
    """Page a list with a plain client, writing each body as a line; the seconds it took."""
    deadline = Deadline(240)
    query: dict[str, Any] = {**params, "limit": PAGE_LIMIT}
    started = time.perf_counter()
    with local_client(url, KEY, timeout=60) as client, out.open("wb") as f:
        for _ in range(max_pages):
            r = client.get(path, params=query)
            r.raise_for_status()
            f.write(r.content + b"\n")
            body = orjson.loads(r.content)
            if not body["hasMore"]:
                break
            query = {"cursor": body["nextCursor"], "limit": PAGE_LIMIT}
            deadline.check(f"paging {path}")
        else:
            raise RuntimeError(f"{path} did not end within {max_pages} pages")
    return time.perf_counter() - started


def _dlt_job(url: str, resource: str, params: dict[str, str], file_format: str | None) -> Any:
    """One dlt run in its own child and work directory (its pipelines dir and dlt home)."""
    with workdir() as tmp:
        job = {
            "url": url,
            "resource": resource,
            "params": params,
            "work": str(tmp),
            "file_format": file_format,
        }
        env = {**DLT_ENV, "DLT_DATA_DIR": str(tmp / "dlt-home")}
        return run_child(["dlt", json.dumps(job)], "dlt", 600, tmp, **env)


def _ours_list_only(url: str, stream: str) -> dict[str, Any]:
    """Our extractor on one list stream, the conversations' detail fetch removed."""
    with workdir() as tmp:
        spec = {
            "url": url,
            "db": str(tmp / "w.duckdb"),
            "rate_limit": "none",
            "streams": [stream],
            "timeout": 600,
            "list_only": True,
        }
        return extract_in_child(spec, tmp)


def bench_dlt(ctx: BenchContext, report: Report) -> None:
    """dlt's rest_api source (default settings) and our extractor on the same two lists."""
    n = ctx.size(100_000, 10_000, 300)
    report.sizes.update({"conversations": n, "page size": PAGE_LIMIT, "rate limit": "none"})
    missing = dlt_missing()
    if missing:
        report.add("dlt", f"skipped: {missing}")
        return
    lists = {"conversations": {}, "leads": {"status": "any"}}
    dlt_runs: dict[str, dict[str, Any]] = {}
    ours: dict[str, dict[str, Any]] = {}
    with served(sandbox_settings(n, "none"), startup_timeout=240, lifetime=900) as server:
        report.sizes["leads"] = server.ready["leads"]
        for name, params in lists.items():
            dlt_runs[name] = _dlt_job(server.url, name, params, None)
            ours[name] = _ours_list_only(server.url, name)
        # dlt's default file format for DuckDB is insert_values; parquet shows how much of
        # its time goes to executing INSERT ... VALUES statements.
        parquet = _dlt_job(server.url, "conversations", {}, "parquet")
        with workdir() as tmp:
            # Our load stage alone on the very bodies dlt received (list pages, no HTTP).
            paging = fetch_pages(
                server.url, "/v1/conversations", {}, tmp / "conversations.jsonl", n // 200 + 5
            )
            load_only = run_child(
                ["load", str(tmp), str(tmp / "list.duckdb"), "list"], "load", 600, tmp
            )
    report.add("dlt version", f"{dlt_runs['conversations']['version']}")
    dlt_rates: dict[str, float] = {}
    for name in lists:
        run, our = dlt_runs[name], ours[name]
        rows = run["rows"].get(name, 0)
        dlt_rates[name] = rate(rows, run["seconds"])
        our_records = our["result"]["streams"][name]["records"]
        our_rate = rate(our_records, our["seconds"])
        report.add(f"{name}: dlt default, records/s end to end", dlt_rates[name], "rec/s")
        report.add(f"{name}: ours list only, records/s end to end", our_rate, "rec/s")
        report.add(f"{name}: ours / dlt default", rate(our_rate, dlt_rates[name]), "x")
        report.add(f"{name}: dlt peak RSS (child VmHWM)", run["peak_rss_mib"], "MiB")
        report.add(f"{name}: ours peak RSS (child VmHWM)", our["peak_rss_mib"], "MiB")
        steps = ", ".join(f"{k} {v:.1f} s" for k, v in run["steps"].items())
        report.note(
            f"{name}: dlt default loaded {rows:,} records in {run['seconds']:.1f} s ({steps}); "
            f"ours {our_records:,} in {our['seconds']:.1f} s"
        )
        other = {k: v for k, v in run["rows"].items() if k != name and not k.startswith("_dlt")}
        if other:
            report.note(f"{name}: dlt also made child tables {other}")
    parquet_rate = rate(parquet["rows"].get("conversations", 0), parquet["seconds"])
    steps = ", ".join(f"{k} {v:.1f} s" for k, v in parquet["steps"].items())
    report.add("conversations: dlt parquet, records/s end to end", parquet_rate, "rec/s")
    report.add("conversations: dlt parquet peak RSS", parquet["peak_rss_mib"], "MiB")
    report.note(f"conversations: dlt with loader_file_format=parquet: {steps}")
    alone = rate(load_only["rows"]["raw_conversations"], load_only["seconds"])
    report.add("conversations: plain client paging the list", paging, "s")
    report.add("conversations: ours, load stage alone on those pages", alone, "rec/s", *aim(alone))
    report.add(
        "conversations: ours load stage alone / dlt default end to end",
        rate(alone, dlt_rates["conversations"]),
        "x",
    )
    report.note(
        "end to end = HTTP paging + loading into a fresh DuckDB file, each in its own child: "
        "dlt's pipeline.run (extract, normalize, load; rest_api with bearer auth, cursor "
        "paginator on nextCursor, data selector 'data', limit=200), ours the real runner "
        "with the conversations stream's detail fetch removed in the child, so both load "
        "the same list records; our load stage alone = Extraction._commit on the list pages "
        f"fetched by a plain client, no HTTP; the issue quotes dlt at ~{DLT_LOADS:,} rec/s"
    )


# -- 5. many workspaces at once ---------------------------------------------------------


class WorkspaceRecorder(httpx.AsyncBaseTransport):
    """One transport per workspace (each its own client): when its requests went out."""

    def __init__(self) -> None:
        self.inner = httpx.AsyncHTTPTransport(limits=httpx.Limits(max_connections=8),
                                              trust_env=False)  # fmt: skip
        self.log: list[tuple[float, int]] = []

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        check_local(str(request.url))
        sent = time.perf_counter()
        response = await self.inner.handle_async_request(request)
        self.log.append((sent, response.status_code))
        return response

    async def aclose(self) -> None:
        await self.inner.aclose()


def child_workspaces(spec_json: str) -> None:
    """Every workspace of the spec extracted at once, each with its own key and limiter;
    per workspace its request log, and the process's CPU time."""
    from convo_analytics.extract import ExtractConfig
    from convo_analytics.extract._runner import Extraction
    from convo_analytics.warehouse import defer_checkpoints, open_warehouse

    spec = json.loads(spec_json)
    db = Path(spec["db"])
    recorders = {name: WorkspaceRecorder() for name, _ in spec["workspaces"]}

    async def all_of_them() -> list[Any]:
        shared = open_warehouse(db)
        defer_checkpoints(shared)
        try:
            runs = [
                Extraction(
                    ExtractConfig(base_url=check_local(spec["url"]), api_key=key, db_path=db,
                                  rate_limit=spec["rate_limit"], workspace=name,
                                  implicit_workspace=False, detail_concurrency=4),
                    transport=recorders[name], labelled=True,
                ).run(shared)
                for name, key in spec["workspaces"]
            ]  # fmt: skip
            return list(await asyncio.gather(*runs))
        finally:
            shared.execute("CHECKPOINT")
            shared.close()

    cpu0, started = time.process_time(), time.perf_counter()
    results = asyncio.run(asyncio.wait_for(all_of_them(), spec["timeout"]))
    seconds, cpu = time.perf_counter() - started, time.process_time() - cpu0
    logs = {
        name: [[round(t - started, 4), status] for t, status in rec.log]
        for name, rec in recorders.items()
    }
    emit({"workspaces": {
        "seconds": seconds, "cpu": cpu, "logs": logs,
        "statuses": {r.workspace: r.status for r in results}, **memory_mib(),
    }})  # fmt: skip


def bench_workspaces(ctx: BenchContext, report: Report) -> None:
    """50 workspaces at 600/min each, extracted at once against one sandbox that enforces
    the limit per key: the aggregate rate, each workspace's share of its own limit, 429s and
    the client's CPU per request."""
    from convo_analytics.sandbox import RateLimitPolicy

    count = ctx.size(50, 10, 2)
    conversations = ctx.size(120, 40, 10)
    spec_rate = "600/min"
    policy = RateLimitPolicy.parse(spec_rate)
    assert policy is not None
    keys = [(f"ws{i:02d}", f"sk_bench_ws{i:02d}_1234567") for i in range(count)]
    report.sizes["workspaces"] = f"{count} at {spec_rate} each (the sandbox: per key)"
    report.sizes["each"] = f"{conversations} conversations (+details), leads, summary"
    settings = {**sandbox_settings(conversations, spec_rate, days=7), "workspaces": keys}
    with served(settings, startup_timeout=300, lifetime=900) as server, workdir() as tmp:
        job = {"url": server.url, "db": str(tmp / "w.duckdb"), "rate_limit": spec_rate,
               "workspaces": keys, "timeout": 600}  # fmt: skip
        data = run_child(["workspaces", json.dumps(job)], "workspaces", 700, tmp)
    logs = data["logs"]
    sent = sum(len(log) for log in logs.values())
    limited = sum(1 for log in logs.values() for _, s in log if s == 429)
    shares = []
    for log in logs.values():
        times = [t for t, s in log if s == 200]
        window = times[-1] - times[0] if len(times) > 1 else math.nan
        skip = int(max(1.0, policy.capacity * 0.85))  # the client's opening burst
        steady = times[skip:]
        if len(steady) > 10:
            steady_rate = (len(steady) - 1) / (steady[-1] - steady[0])
            shares.append(steady_rate / policy.per_second)
        elif window == window:
            shares.append((len(times) - 1) / window / policy.per_second)
    shares.sort()
    failed = [name for name, status in data["statuses"].items() if status != "ok"]
    report.add("workspaces ok", count - len(failed), target=f"= {count}", ok=not failed)
    report.add("requests, all workspaces", sent)
    report.add("run", data["seconds"], "s")
    report.add("aggregate requests/s", sent / data["seconds"], "/s")
    report.add("share of own limit after the burst: min", 100 * shares[0], "%")
    report.add("share of own limit after the burst: median", 100 * shares[len(shares) // 2], "%",
               target=f">= {100 * RATE_SHARE_AIM:g} %",
               ok=shares[len(shares) // 2] >= RATE_SHARE_AIM)  # fmt: skip
    report.add("429 share", 100 * limited / sent if sent else math.nan, "%",
               target=f"<= {100 * LIMITED_SHARE_AIM:g} %",
               ok=limited <= LIMITED_SHARE_AIM * sent)  # fmt: skip
    report.add("client CPU per request", 1000 * data["cpu"] / sent if sent else math.nan, "ms")
    report.add("client peak RSS", data.get("peak_rss_mib", math.nan), "MiB")
    report.note(
        "the sandbox serves every workspace from one process on the same 2 cores as the "
        "client; a workspace under its limit is held back by the server, not by its limiter"
    )


BENCHES = [
    ("extract-100k", bench_extract_100k),
    ("extract-load-only", bench_load_only),
    ("extract-rate-limits", bench_rate_limits),
    ("dlt-rest-api", bench_dlt),
    ("extract-50-workspaces", bench_workspaces),
]


if __name__ == "__main__":
    # Child roles; run.py is the entry point for people.
    role, *rest = sys.argv[1:] or ["help"]
    if role == "extract":
        child_extract(rest[0])
    elif role == "workspaces":
        child_workspaces(rest[0])
    elif role == "bodies":
        child_bodies(int(rest[0]), rest[1])
    elif role == "load":
        child_load(rest[0], rest[1], rest[2])
    elif role == "dlt":
        child_dlt(rest[0])
    else:
        sys.exit(
            f"usage: {os.path.basename(__file__)} extract SPEC | bodies N DIR | "
            "load DIR DB full|list | dlt SPEC"
        )
