"""The served app in a real headless browser: Debian's chromium, driven by playwright.

Every page is loaded from `convo dashboard` over HTTP on 127.0.0.1 and saved
as a screenshot under data/test-artifacts/screenshots/ (git-ignored). The
snapshot holds, besides a sandbox's history, a conversation of hostile end-user
text: it is shown as written, and the browser fetches nothing it names
(decision D-DASH-TEXT).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import date, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import duckdb
import httpx
import pytest

from dashboard_support import (
    PHISH,
    Beacon,
    hostile_messages,
    hostile_snapshot,
    hostile_source,
    hostile_user,
)
from process_support import free_port

ROOT = Path(__file__).resolve().parent.parent
SHOTS = ROOT / "data" / "test-artifacts" / "screenshots"
#: (url path, the title the page shows)
PAGES = [("", "Overview"), ("conversations", "Conversations"), ("leads", "Leads"),
         ("quality", "Quality"), ("guardrails", "Guardrails"), ("workspaces", "Workspaces"),
         ("topics", "Topics"), ("compare?compare=slices&dimension=channel", "Compare"),
         ("monitors", "Monitors"),
         ("explore?notebook=guardrail_incidents_by_locale", "Explore"),
         ("pipeline", "Pipeline")]  # fmt: skip
#: The data's first and last day, and the channel with most conversations (set by `served`).
SPAN: list[str] = []
TOP_CHANNEL: list[Any] = []
#: The published folder and its workspace's id (set by `served`).
PUBLISHED: list[Path] = []
WORKSPACE: list[str] = []
#: Tall enough for a page to show whole: Streamlit scrolls its own container, so a
#: full-page screenshot only ever holds the viewport.
VIEWPORT = {"width": 1400, "height": 2600}
CHROMIUM_FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update",
                  "--disable-sync"]  # fmt: skip


def chromium() -> str:
    """Debian's chromium, or a failure that says how to install it (never a skip)."""
    path = shutil.which("chromium") or shutil.which("chromium-browser")
    if path is None:
        pytest.fail(
            "the browser tests need Debian's chromium: run 'sudo apt-get install -y chromium' "
            "(.ci/run installs it), then 'make test' again",
            pytrace=False,
        )
    return path


def _start_dashboard(
    port: int, published: Path, *args: str, env: dict[str, str] | None = None
) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "convo_analytics.cli", "dashboard", "--port", str(port),
         "--dir", str(published), *args],
        env={**os.environ, "CONVO_PUBLISHED_DIR": str(published), **(env or {})},
        stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT, cwd=ROOT,
    )  # fmt: skip


def _wait_healthy(url: str, proc: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{url}/_stcore/health", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        assert proc.poll() is None, "convo dashboard exited early"
        time.sleep(0.5)
    raise AssertionError("the dashboard did not answer within 90 s")


#: True when the app's script run has ended (the state its root element carries, which
#: Streamlit's own end-to-end tests wait on) and no status widget or skeleton is left.
RUN_ENDED = "[data-testid='stApp'][data-test-script-state='notRunning']"
BUSY = "[data-testid='stStatusWidget'], [data-testid='stSkeleton']"
IDLE = (f'() => document.querySelector("{RUN_ENDED}") !== null'
        f' && document.querySelector("{BUSY}") === null')  # fmt: skip


def settle(page: Any, title: str, calm: float = 0.4) -> None:
    """Wait until the page shows its title and has finished running: its script run ended,
    no status widget, no element still a skeleton, for ``calm`` seconds in a row (after a
    click, 1 s: the rerun it asks for may not have begun yet), bounded."""
    page.get_by_role("heading", name=title).first.wait_for(timeout=60_000)
    deadline = time.monotonic() + 60
    since = None
    while time.monotonic() < deadline:
        now = time.monotonic()
        if not page.evaluate(IDLE):
            since = None
        elif since is None:
            since = now
        elif now - since >= calm:
            return
        page.wait_for_timeout(100)
    raise AssertionError(f"{title} did not finish rendering within 60 s")


@pytest.fixture(scope="module")
def driver(served: str) -> Iterator[Any]:
    """Playwright for the module. Its sync API keeps an event loop running in this thread
    while it lives, where ``asyncio.run`` (the extraction that makes a snapshot) cannot
    run: the module's snapshot is made first."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        yield p


@pytest.fixture(scope="module")
def browser(driver: Any) -> Iterator[Any]:
    """One chromium for the module; each test opens pages in a context of its own (cookies,
    storage and cache apart): :func:`new_page`."""
    launched = driver.chromium.launch(executable_path=chromium(), args=CHROMIUM_FLAGS)
    try:
        yield launched
    finally:
        launched.close()


@contextmanager
def new_page(browser: Any) -> Iterator[Any]:
    """A page in a new browser context, closed with its context when the block ends."""
    page = browser.new_page(viewport=VIEWPORT)
    try:
        yield page
    finally:
        page.context.close()


@pytest.fixture(scope="module")
def beacon() -> Iterator[Beacon]:
    """A server on 127.0.0.1 that records any request: the hostile text's images and
    scripts point at it."""
    with Beacon() as running:
        yield running


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory, beacon: Beacon) -> Iterator[str]:
    """The dashboard over a sandbox's history of 300 conversations and one more whose end
    user wrote hostile text (``dashboard_support.hostile_snapshot``)."""
    folder = tmp_path_factory.mktemp("browser")
    with hostile_snapshot(folder, beacon.url, conversations=300) as (published, _cid):
        con = duckdb.connect(str(folder / "w.duckdb"), read_only=True)
        first, last = con.execute(
            "SELECT min(started_at)::DATE, max(started_at)::DATE FROM mart_conversations"
        ).fetchall()[0]
        SPAN[:] = [str(first), str(last)]
        TOP_CHANNEL[:] = con.execute(
            "SELECT channel, count(*) FROM mart_conversations GROUP BY 1 ORDER BY 2 DESC, 1 LIMIT 1"
        ).fetchall()[0]
        WORKSPACE[:] = [con.execute("SELECT any_value(workspace_id) FROM mart_conversations")
                        .fetchall()[0][0]]  # fmt: skip
        PUBLISHED[:] = [published]
        con.close()
    port = free_port()
    proc = _start_dashboard(port, published)
    url = f"http://127.0.0.1:{port}"
    try:
        _wait_healthy(url, proc)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()


def test_a_url_with_filters_restores_them(served: str, browser: Any) -> None:
    first, last = (date.fromisoformat(d) for d in SPAN)
    view = f"from={first + timedelta(days=1)}&to={last}&tz=Europe/Berlin&channel=sms"
    with new_page(browser) as page:
        page.goto(f"{served}/leads?{view}", wait_until="domcontentloaded", timeout=60_000)
        settle(page, "Leads")
        page.screenshot(path=str(SHOTS / "restored-view.png"), full_page=True)
        sidebar = page.locator("[data-testid='stSidebar']")
        values = [field.input_value() for field in sidebar.locator("input").all()]
        # the date range's two ends, then the time zone
        assert values[:3] == [str(first + timedelta(days=1)), str(last), "Europe/Berlin"]
        assert sidebar.get_by_text("SMS", exact=True).count() == 1  # the chosen channel, named
        assert "tz=Europe/Berlin" in page.url.replace("%2F", "/") and "channel=sms" in page.url


def test_a_click_on_an_overview_bar_narrows_conversations_to_that_slice(
    served: str, browser: Any
) -> None:
    top, count = TOP_CHANNEL
    with new_page(browser) as page:
        page.goto(f"{served}/?from={SPAN[0]}&to={SPAN[1]}", wait_until="domcontentloaded",
                  timeout=60_000)  # fmt: skip
        settle(page, "Overview")
        bars = page.locator("[data-testid='stVegaLiteChart']").nth(1)  # the breakdown
        box = bars.locator("canvas, svg").first.bounding_box()
        assert box is not None
        # bars are sorted longest first: the top one is the channel with most conversations
        page.mouse.click(box["x"] + box["width"] * 0.5, box["y"] + 14)
        deadline = time.monotonic() + 60
        while "/conversations" not in page.url and time.monotonic() < deadline:
            page.wait_for_timeout(100)
        assert "/conversations" in page.url, page.url
        settle(page, "Conversations", calm=1.0)
        assert f"channel={top}" in page.url
        caption = page.get_by_text("conversations (newest first)").first.inner_text()
        assert caption.startswith(f"{count} conversations"), caption
        page.screenshot(path=str(SHOTS / "drill-down.png"), full_page=True)


# -- hostile end-user text --------------------------------------------------------------------


def _tooltips_over_bars(page: Any, chart: Any) -> list[str]:
    """Hover each bar of a horizontal bar chart (bars start at the plot's left edge, one
    ``BAR_HEIGHT`` row each) and return the tooltips' HTML; bounded in moves."""
    from convo_analytics.dashboard._charts import BAR_HEIGHT

    box = chart.locator("canvas, svg").first.bounding_box()
    assert box is not None
    tooltip = page.locator("#vg-tooltip-element")
    first_row = box["y"] + BAR_HEIGHT / 2

    def answers(x: float) -> bool:
        page.mouse.move(x, first_row)
        page.wait_for_timeout(30)
        return bool(tooltip.count() and tooltip.first.is_visible())

    # the plot's left edge on the first bar, to 2 px (the shortest bar may be a few px
    # long): in steps of 24 px, then of 2 px in the last 24
    coarse = next((x for x in range(0, int(box["width"]), 24) if answers(box["x"] + x)), None)
    assert coarse is not None, "no bar answered the mouse"
    page.mouse.move(box["x"] - 40, first_row)  # off the chart: its tooltip goes
    tooltip.first.wait_for(state="hidden", timeout=10_000)
    fine = next(x for x in range(max(0, coarse - 22), coarse + 1, 2) if answers(box["x"] + x))
    left = box["x"] + fine + 1
    seen = []
    for row in range(int(box["height"] // BAR_HEIGHT)):
        page.mouse.move(left, box["y"] + BAR_HEIGHT * row + BAR_HEIGHT / 2)
        page.wait_for_timeout(120)
        if tooltip.count() and tooltip.first.is_visible():
            seen.append(tooltip.first.inner_html())
    return seen


#: A URL on any host but 127.0.0.1 (a browser's URLs always have a path after the host).
ELSEWHERE = re.compile(r"^(?!https?://127\.0\.0\.1(:\d+)?/)")


def _shows_the_hostile_conversation_as_written(page: Any, beacon: str) -> None:
    shown = page.locator("[data-testid='stText']").all_inner_texts()
    for message in hostile_messages(beacon):
        assert message in shown, (message, shown)
    captions = " ".join(page.locator("[data-testid='stCaptionContainer']")
                        .all_inner_texts())  # fmt: skip
    assert f"end user {hostile_user(beacon)}" in captions
    assert page.get_by_text(PHISH, exact=True).count() >= 1
    page.screenshot(path=str(SHOTS / "hostile-conversation.png"), full_page=True)


def _shows_the_hostile_source_as_written_in_tooltips(page: Any, beacon: str) -> None:
    """The breakdown by lead source: the hostile source's bar shows it as text, no image."""
    page.get_by_text("Source", exact=True).click()
    settle(page, "Overview", calm=1.0)
    assert page.locator("[data-testid='stException']").count() == 0
    bars = page.locator("[data-testid='stVegaLiteChart']").nth(1)
    tips = _tooltips_over_bars(page, bars)
    source = hostile_source(beacon)
    assert any(source.replace("<", "&lt;").replace(">", "&gt;") in t for t in tips), tips
    assert page.locator("#vg-tooltip-element img").count() == 0
    page.screenshot(path=str(SHOTS / "hostile-tooltip.png"), full_page=True)


def _elsewhere(page: Any, url: str) -> list[str]:
    """The links and images on the page that lead anywhere but the dashboard itself."""
    found: list[str] = page.eval_on_selector_all(
        "a[href], img[src], script[src], iframe[src]",
        "els => els.map(e => e.href || e.src)",
    )
    return [u for u in found if urlsplit(u).scheme in ("http", "https", "mailto")
            and not u.startswith(url + "/") and u != url]  # fmt: skip


def test_every_page_renders_shows_end_user_text_as_written_and_fetches_nothing_it_names(
    served: str, beacon: Beacon, driver: Any
) -> None:
    """Every page renders in chromium, without an error. Markdown links and images, HTML
    images and scripts in what an end user wrote show as those characters on
    Conversations (and in chart tooltips): chromium requests nothing but the dashboard
    itself on any page, and the beacon they name is never called."""
    SHOTS.mkdir(parents=True, exist_ok=True)
    dashboard = urlsplit(served).netloc
    requested: list[str] = []
    browser = driver.chromium.launch(
        executable_path=chromium(),
        # nothing may leave this machine, whatever the page asks for
        args=[*CHROMIUM_FLAGS, "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1"],
    )
    try:
        page = browser.new_page(viewport=VIEWPORT)
        page.on("request", lambda request: requested.append(request.url))
        # any request to another host fails (a pattern, matched by the driver: a function
        # would hold every request of the page until Python had looked at it)
        page.route(ELSEWHERE, lambda route: route.abort())
        for path, title in PAGES:
            page.goto(f"{served}/{path}", wait_until="domcontentloaded", timeout=60_000)
            settle(page, title)
            assert page.locator("[data-testid='stException']").count() == 0, path
            assert page.locator("[data-testid='stAlertContentError']").count() == 0, path
            assert _elsewhere(page, served) == [], path  # no link to follow, no image to fetch
            shot = SHOTS / f"{title.lower()}.png"
            page.screenshot(path=str(shot), full_page=True)
            assert shot.stat().st_size > 10_000, f"{shot} looks blank"
            if title == "Conversations":
                _shows_the_hostile_conversation_as_written(page, beacon.url)
            elif title == "Overview":
                _shows_the_hostile_source_as_written_in_tooltips(page, beacon.url)
        # no Deploy button: the toolbar is the viewer's
        assert page.get_by_text("Deploy", exact=True).count() == 0
    finally:
        browser.close()
    assert beacon.hits == [], beacon.hits
    left = [u for u in requested if urlsplit(u).scheme in ("http", "https", "ws", "wss")
            and urlsplit(u).netloc != dashboard]  # fmt: skip
    assert left == [], left


def _query_processes(parent: int) -> list[int]:
    """The ids of ``parent``'s children that are Explore query processes."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            cmdline = (entry / "cmdline").read_bytes()
        except (OSError, IndexError, ValueError):
            continue
        if ppid == parent and b"convo_analytics.notebooks._worker" in cmdline:
            found.append(int(entry.name))
    return found


def _ended(pid: int, seconds: float = 20.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            return True
        if state in ("Z", "X"):
            return True
        time.sleep(0.1)
    return False


def test_explore_stops_a_query_and_its_processes_end_with_the_app(
    served: str, browser: Any
) -> None:
    """`convo dashboard --workspace ID` in a real browser: a query past the time limit is
    one line on the page and the next one answers; the query processes are the server's
    children. `convo dashboard` is the Streamlit server itself: a service manager's stop
    signal ends it and them, and nothing keeps answering on its port (it once ran
    Streamlit as a child, which outlived a stopped command)."""
    port = free_port()
    proc = _start_dashboard(port, PUBLISHED[0], "--workspace", WORKSPACE[0],
                            env={"CONVO_DASHBOARD_QUERY_TIMEOUT_SECONDS": "2"})  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:
        _wait_healthy(url, proc)
        with new_page(browser) as page:
            page.goto(f"{url}/explore", wait_until="domcontentloaded", timeout=60_000)
            settle(page, "Explore")
            cell = page.locator("textarea").first
            cell.fill("SELECT sum(hash(range)) FROM range(100000000000)")
            cell.press("Control+Enter")
            page.get_by_text("stopped after 2 s").first.wait_for(timeout=60_000)
            assert page.locator("[data-testid='stException']").count() == 0
            page.screenshot(path=str(SHOTS / "explore-stopped.png"), full_page=True)
            cell.fill("SELECT 42 AS answer")
            cell.press("Control+Enter")
            page.get_by_text("1 rows in").first.wait_for(timeout=60_000)
        workers = _query_processes(proc.pid)
        assert workers, "no query process runs under the dashboard"
        proc.terminate()
        assert proc.wait(timeout=30) is not None
        assert all(_ended(pid) for pid in workers), workers
        with pytest.raises(httpx.HTTPError):
            httpx.get(f"{url}/_stcore/health", timeout=2)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)


def _grid_rows(grid: Any) -> list[list[str]]:
    """A data grid's rows as its cells' text (the grid draws on a canvas; these are the cells
    of the table it keeps for screen readers)."""
    return [[cell.text_content() or "" for cell in row.locator("td").all()]
            for row in grid.locator("tbody tr").all()]  # fmt: skip


def _drawn_rows(grid: Any, seconds: float = 30.0) -> list[list[str]]:
    """The grid's rows once it has drawn some (a cell's result reaches the page after the
    page itself under load); empty if none came within ``seconds``."""
    deadline = time.monotonic() + seconds
    while True:
        rows = _grid_rows(grid)
        if rows or time.monotonic() >= deadline:
            return rows
        time.sleep(0.25)


def test_a_notebook_url_restores_its_parameter_and_the_cell_shows_its_rows(
    served: str, browser: Any
) -> None:
    """``?notebook=NAME&p.NAME=VALUE`` in a real browser: the parameter's widget shows the
    URL's value and the cells' rows are those of that value (decision D-NOTEBOOK-PARAMS)."""
    import duckdb

    snapshot = next(PUBLISHED[0].glob("warehouse-*.duckdb"))
    con = duckdb.connect(str(snapshot), read_only=True)
    try:
        reasons = con.execute(
            "SELECT e.reason_code, count(*), count(DISTINCT e.conversation_id) "
            "FROM mart_escalations e JOIN mart_conversations c USING (workspace_id, "
            "conversation_id) WHERE regexp_full_match(e.reason_code, '[a-z_]+') "
            "GROUP BY 1 ORDER BY 2, 1"
        ).fetchall()
    finally:
        con.close()
    assert len(reasons) > 1, reasons
    # the rarest of the service's codes (not the widget's first; the hostile conversation's
    # reason, Markdown, is left out: a URL's value is what this test is about)
    reason, escalations, conversations = reasons[0]
    view = (f"notebook=escalations_by_reason_and_channel&from={SPAN[0]}&to={SPAN[1]}"
            f"&p.reason={reason}")  # fmt: skip
    with new_page(browser) as page:
        page.goto(f"{served}/explore?{view}", wait_until="domcontentloaded", timeout=60_000)
        settle(page, "Explore")
        page.screenshot(path=str(SHOTS / "explore-parameter.png"), full_page=True)
        assert page.locator("[data-testid='stAlertContentError']").count() == 0
        assert page.locator("input[aria-label='$reason']").input_value() == reason
        by_reason, by_channel = page.locator("[data-testid='stDataFrame']").all()[:2]
        assert _drawn_rows(by_reason) == [[reason, f"{escalations:,}", f"{conversations:,}"]]
        rows = _drawn_rows(by_channel)
        assert rows and {row[0] for row in rows} == {reason}, rows
        assert f"p.reason={reason}" in page.url
