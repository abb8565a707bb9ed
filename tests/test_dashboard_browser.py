"""The served app in a real headless browser: Debian's chromium, driven by playwright.

Every page is loaded from `convo dashboard` over HTTP on 127.0.0.1 and saved
as a screenshot under data/test-artifacts/screenshots/ (git-ignored).
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from convo_analytics.publish import publish_snapshot
from convo_analytics.warehouse import open_warehouse
from transform_support import populated_sandbox

ROOT = Path(__file__).resolve().parent.parent
SHOTS = ROOT / "data" / "test-artifacts" / "screenshots"
#: (url path, the title the page shows)
PAGES = [("", "Overview"), ("conversations", "Conversations"), ("leads", "Leads"),
         ("quality", "Quality"), ("guardrails", "Guardrails"),
         ("pipeline", "Pipeline")]  # fmt: skip
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


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _start_dashboard(port: int, published: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "convo_analytics.cli", "dashboard", "--port", str(port),
         "--dir", str(published)],
        env={**os.environ, "CONVO_PUBLISHED_DIR": str(published)},
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


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    folder = tmp_path_factory.mktemp("browser")
    with populated_sandbox(folder, 300, ("UTC",)) as (_running, db):
        con = open_warehouse(db)
        publish_snapshot(con, db, folder / "published")
        con.close()
    port = _free_port()
    proc = _start_dashboard(port, folder / "published")
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


def test_every_page_renders_in_chromium(served: str) -> None:
    from playwright.sync_api import sync_playwright

    SHOTS.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium(), args=CHROMIUM_FLAGS)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            for path, title in PAGES:
                page.goto(f"{served}/{path}", wait_until="domcontentloaded", timeout=60_000)
                page.get_by_role("heading", name=title).first.wait_for(timeout=60_000)
                page.wait_for_timeout(1500)  # let the charts draw
                assert page.locator("[data-testid='stException']").count() == 0, path
                shot = SHOTS / f"{title.lower()}.png"
                page.screenshot(path=str(shot), full_page=True)
                assert shot.stat().st_size > 10_000, f"{shot} looks blank"
        finally:
            browser.close()


def test_stopping_the_dashboard_command_stops_its_server(tmp_path: Path) -> None:
    """`convo dashboard` is the Streamlit server itself: a service manager's stop signal
    ends it, and nothing keeps answering on its port (it once ran Streamlit as a child,
    which outlived a stopped command)."""
    port = _free_port()
    proc = _start_dashboard(port, tmp_path / "published")
    url = f"http://127.0.0.1:{port}"
    try:
        _wait_healthy(url, proc)
        proc.terminate()
        assert proc.wait(timeout=20) is not None
        with pytest.raises(httpx.HTTPError):
            httpx.get(f"{url}/_stcore/health", timeout=2)
    finally:
        if proc.poll() is None:
            proc.kill()
