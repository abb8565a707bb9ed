"""On a terminal ``convo extract`` draws a bar per stream; elsewhere it writes log lines."""

from __future__ import annotations

import os
import pty
import select
import subprocess
import time
from pathlib import Path

from conftest import ACME_KEY, RunningSandbox
from extract_support import cli_env, extract_cli


def _cli(url: str, db: Path) -> list[str]:
    return extract_cli(url, db)


def test_a_terminal_gets_progress_bars(start_sandbox, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    running: RunningSandbox = start_sandbox(conversations=80)
    primary, secondary = pty.openpty()
    env = {"PATH": "/usr/bin:/bin", "CONVO_API_KEY": ACME_KEY, "TERM": "xterm", "COLUMNS": "160"}
    proc = subprocess.Popen(
        _cli(running.url, tmp_path / "w.duckdb"),
        env=env,
        cwd=tmp_path,
        stdout=secondary,
        stderr=secondary,
        close_fds=True,
    )
    os.close(secondary)
    chunks: list[bytes] = []
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        ready, _, _ = select.select([primary], [], [], 0.5)
        if ready:
            try:
                data = os.read(primary, 65536)
            except OSError:
                break
            if not data:
                break
            chunks.append(data)
        elif proc.poll() is not None:
            break
    proc.wait(timeout=30)
    os.close(primary)
    screen = b"".join(chunks).decode("utf-8", "replace")
    assert proc.returncode == 0, screen
    for stream in ("conversations", "leads", "summary"):
        assert stream in screen
    assert "records" in screen and "requests" in screen and "req/s" in screen
    assert "\x1b[" in screen, "drawn with terminal control sequences"
    assert ACME_KEY not in screen


def test_without_a_terminal_it_writes_plain_log_lines(start_sandbox, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    running: RunningSandbox = start_sandbox(conversations=40)
    env = cli_env(ACME_KEY)
    done = subprocess.run(
        _cli(running.url, tmp_path / "w.duckdb"),
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0
    assert "\x1b[" not in done.stderr
    assert "conversations: 40 records (40 new, 0 changed)" in done.stderr
