"""A stream its rate limit makes long is announced: one line with the expected duration.

After a list stream's first page the run estimates its requests (the service's total
when it gives one, else extrapolated from the first page's update times) and, when
the rate limit makes them last 30 s or more, says so on stderr, never in ``--json``
output (issue 25, decision D-EXTRACT-ESTIMATE). The long runs are stopped as soon as
the line shows: nothing here waits for a rate limit.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import re
import signal
import subprocess
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import orjson
import pytest
from rich.console import Console

from conftest import ACME_KEY, GLOBEX_KEY, RunningSandbox, make_settings
from convo_analytics._serving import ServerThread
from convo_analytics.contract import RateLimitPolicy
from convo_analytics.extract import BarProgress, ExtractConfig, run_extract, run_extract_many
from convo_analytics.extract._estimate import estimate_records, estimate_stream, say_duration
from convo_analytics.extract._limiter import AdaptiveLimiter
from convo_analytics.sandbox import Sandbox, create_app
from extract_support import cli_env, extract_cli
from process_support import OutputWatcher

LINE = re.compile(
    r"conversations: about (\d+ s|\d+ min) at 60/min for ~([\d,]+) requests "
    r"\(~([\d,]+) conversations listed, (.+?), each with its detail\)"
)
T0 = datetime(2026, 11, 1, tzinfo=UTC)


def _times(*hours: float) -> list[datetime]:
    return [T0 + timedelta(hours=h) for h in hours]


def test_the_record_count_is_the_total_else_extrapolated_from_the_first_page() -> None:
    until = T0 + timedelta(hours=100)
    assert estimate_records(20, True, 137, "Content-Range", _times(0, 1), until) == (
        137, "as Content-Range says",
    )  # fmt: skip
    # 20 records over the first 10 of 100 hours: ~200 in all
    assert estimate_records(20, True, None, "", _times(0, 5, 10), until) == (
        200, "estimated from the first page's update times",
    )  # fmt: skip
    assert estimate_records(20, False, None, "", _times(0, 10), until) == (
        20,
        "all in the first page",
    )
    assert estimate_records(20, True, None, "", _times(10, 0), until) is None, "newest first"
    assert estimate_records(20, True, None, "", _times(3, 3), until) is None, "no span"
    assert estimate_records(20, True, None, "", [], until) is None, "no update times"


def test_the_duration_is_the_rate_limits_and_said_plainly() -> None:
    limiter = AdaptiveLimiter(RateLimitPolicy.parse("600/min"))
    est = estimate_stream(
        2000, "as X-Total-Count says", page_records=100, detail_share=1.0,
        seconds_for=limiter.seconds_for,
    )  # fmt: skip
    assert est is not None and est.requests == 20 + 2000
    # 600/min aimed at 97 %, the burst (85 % of 10 s worth) spent first
    assert est.seconds == pytest.approx((2020 - 85) / (10 * 0.97))
    assert est.line("conversations", "600/min") == (
        "conversations: about 3 min at 600/min for ~2,020 requests (~2,000 conversations "
        "listed, as X-Total-Count says, each with its detail)"
    )
    unlimited = AdaptiveLimiter(None)
    assert estimate_stream(2000, "x", page_records=100, detail_share=1.0,
                           seconds_for=unlimited.seconds_for) is None  # fmt: skip
    half = estimate_stream(400, "x", page_records=100, detail_share=0.5,
                           seconds_for=limiter.seconds_for)  # fmt: skip
    assert (
        half is not None
        and half.requests == 4 + 200
        and "50% of them detailed" in half.line("conversations", "600/min")
    )
    assert [say_duration(s) for s in (0.2, 40, 89, 240, 3600, 4800)] == [
        "about 1 s", "about 40 s", "about 89 s", "about 4 min", "about 1 h", "about 1 h 20 min",
    ]  # fmt: skip


def test_a_long_first_extract_says_how_long_before_it_goes_on(
    start_sandbox: Any, tmp_path: Path
) -> None:
    """`convo extract` at 60/min over 100 conversations: the line shows after the first
    page, on stderr; the run is then stopped (it would take minutes). A short extract
    says nothing."""
    running: RunningSandbox = start_sandbox(conversations=100)
    proc = subprocess.Popen(
        extract_cli(running.url, tmp_path / "w.duckdb", "60/min", "--page-size", "20",
                    "--streams", "conversations", "--json"),
        env=cli_env(ACME_KEY), cwd=tmp_path, text=True,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    watch = OutputWatcher(proc.stderr, "convo extract")
    try:
        found = LINE.search(watch.wait_for(LINE.pattern, timeout=60).string)
        assert found, watch.text
        assert found.group(4) == "estimated from the first page's update times"
        assert int(found.group(2).replace(",", "")) > int(found.group(3).replace(",", ""))
    finally:
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=30)
    assert "about" not in out, "never in the --json output"
    assert len(re.findall(r"about \d+", watch.text)) == 1, "said once"
    assert ACME_KEY not in watch.text
    # a short one says nothing: 60 conversations at 600/min fit in the burst
    short = start_sandbox(conversations=60)
    done = subprocess.run(
        extract_cli(short.url, tmp_path / "short.duckdb", "600/min", "--json"),
        env=cli_env(ACME_KEY), cwd=tmp_path, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert orjson.loads(done.stdout)["status"] == "ok", "the --json output stays one object"
    assert " at 600/min for " not in done.stderr


class _Notes:
    """A progress sink that keeps the notes and tells when the first arrives."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.noted = asyncio.Event()

    def start(self, stream: str, total: int | None = None) -> None:
        pass

    def update(self, stream: str, *, records: int, requests: int) -> None:
        pass

    def note(self, stream: str, line: str) -> None:
        self.lines.append(line)
        self.noted.set()

    def finish(self, stream: str, summary: str) -> None:
        pass


def _with_total(app: Any, total: int) -> Any:
    """The sandbox, its conversation lists also giving ``X-Total-Count``."""

    async def wrapped(scope: dict[str, Any], receive: Any, send: Any) -> None:
        async def send_with(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start" and scope["path"] == "/v1/conversations":
                extra = [(b"x-total-count", str(total).encode())]
                message = {**message, "headers": [*message.get("headers", []), *extra]}
            await send(message)

        await app(scope, receive, send_with)

    return wrapped


def test_a_total_the_service_gives_is_the_count(tmp_path: Path) -> None:
    sandbox = Sandbox(make_settings(conversations=90, workspaces=[("acme", ACME_KEY)]))

    async def until_noted(url: str) -> list[str]:
        notes = _Notes()
        config = ExtractConfig(
            base_url=url, api_key=ACME_KEY, db_path=tmp_path / "w.duckdb",
            rate_limit="60/min", page_size=30, streams=("conversations",),
        )  # fmt: skip
        task = asyncio.ensure_future(run_extract(config, notes))
        try:
            await asyncio.wait_for(notes.noted.wait(), 60)
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        return notes.lines

    with ServerThread(_with_total(create_app(sandbox), 90)) as server:
        (line,) = asyncio.run(until_noted(server.url))
    assert line.startswith("conversations: about ") and " at 60/min for ~93 requests " in line
    assert "(~90 conversations listed, as X-Total-Count says, each with its detail)" in line


def test_bars_of_several_workspaces_are_drawn_each_under_its_label(
    start_sandbox: Any, tmp_path: Path
) -> None:
    """Progress of several workspaces at once is labelled WORKSPACE/STREAM, on start,
    update and finish alike (an update under the bare stream name had no bar)."""
    running: RunningSandbox = start_sandbox(conversations=30)
    db = tmp_path / "w.duckdb"
    configs = [
        ExtractConfig(base_url=running.url, api_key=key, db_path=db, rate_limit="none",
                      workspace=name, implicit_workspace=False)
        for name, key in (("acme", ACME_KEY), ("globex", GLOBEX_KEY))
    ]  # fmt: skip
    screen = io.StringIO()
    console = Console(file=screen, force_terminal=True, width=160)
    with BarProgress(console) as bars:
        result = asyncio.run(run_extract_many(configs, bars))
    assert result.ok, result.to_json()
    text = screen.getvalue()
    assert "acme/conversations: " in text and "globex/conversations: " in text
