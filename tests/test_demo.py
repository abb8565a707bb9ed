"""`make demo` as a new user meets it: the stack starts, says what to try once, last,
and every command it prints runs as written; Ctrl-C stops everything with one line.

The demo runs on a small history, on free ports, with its data in a temporary
folder (``--data-dir``), as a real process in its own process group, which gets
SIGINT the way a terminal's Ctrl-C delivers it. Then ``make demo`` itself, in a
pseudo-terminal as a user's shell runs it, is stopped with SIGTERM to make's
process group and started again "an hour later" (the demo's test-only clock,
``CONVO_TEST_DEMO_NOW``), then stopped with SIGHUP: every server ends with it,
and the restart serves and loads the same figures.
"""

from __future__ import annotations

import contextlib
import fcntl
import importlib.util
import io
import os
import pty
import re
import signal
import socket
import subprocess
import sys
import termios
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import ModuleType
from typing import Any, cast

import duckdb
import httpx
import orjson
import pytest

from process_support import OutputWatcher
from shell_support import command_lines, run_help

ROOT = Path(__file__).resolve().parent.parent
CLOCK = "CONVO_TEST_DEMO_NOW"


def _free_ports(n: int) -> list[int]:
    socks = [socket.socket() for _ in range(n)]
    try:
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def _demo(data: Path, ports: list[int]) -> subprocess.Popen[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CONVO_")}
    return subprocess.Popen(
        [sys.executable, "pipelines/demo.py", "--port", str(ports[0]),
         "--receiver-port", str(ports[1]), "--dashboard-port", str(ports[2]),
         "--conversations", "120", "--days", "5", "--data-dir", str(data)],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        start_new_session=True,
    )  # fmt: skip


def test_the_demo_runs_says_what_to_try_and_stops_on_ctrl_c(tmp_path: Path) -> None:
    data = tmp_path / "data"
    ports = _free_ports(3)
    proc = _demo(data, ports)
    watch = OutputWatcher(proc.stdout, "the demo")
    try:
        watch.wait_for(r"Server logs: ", timeout=400)
        printed = watch.text
        # the commands it printed, run as written in a new shell (with --help), and two for real
        block = printed[printed.index("Try next") :]
        commands = command_lines(block)
        assert [c.words[:4] for c in commands] == [
            ["convo", "--config", str(data / "demo" / "convo.toml"), "export"],
            ["convo", "--config", str(data / "demo" / "convo.toml"), "export"],
            ["convo", "--config", str(data / "demo" / "convo.toml"), "serve"],
            ["convo", "run", "--config", str(data / "demo" / "convo.toml")],
        ]
        with ThreadPoolExecutor(max_workers=len(commands)) as pool:  # each in its own shell
            helps = list(pool.map(lambda c: run_help(c, tmp_path, tmp_path), commands))
        for done in helps:
            assert done.returncode == 0 and "Usage: convo" in done.stdout, done.stderr
        outputs = []
        for command in (commands[0], commands[3]):  # the summary export and the nightly run
            script = " && ".join([*command.setup, command.text])
            done = subprocess.run(
                ["env", "-i", "PATH=/usr/local/bin:/usr/bin:/bin", f"HOME={tmp_path}",
                 "bash", "--noprofile", "--norc", "-c", script],
                cwd=tmp_path, capture_output=True, text=True, timeout=300,
            )  # fmt: skip
            assert done.returncode == 0, done.stdout + done.stderr[-3000:]
            outputs.append(done.stdout)
        assert orjson.loads(outputs[0])["totals"]["conversations"] > 0
        assert outputs[1].startswith("run ") and " ok in " in outputs[1]
        key = re.search(r"\$\(cat (\S+)\)", block)
        assert key, block
        auth = {"Authorization": f"Bearer {Path(key.group(1)).read_text()}"}
        r = httpx.get(f"http://127.0.0.1:{ports[0]}/v1/conversations", headers=auth)
        assert r.status_code == 200
        os.killpg(proc.pid, signal.SIGINT)  # what the terminal does on Ctrl-C
        output = watch.wait_end(proc, timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)
    assert proc.returncode == 0, output
    assert "Traceback" not in output and "KeyboardInterrupt" not in output
    assert output.count("Try next") == 1
    after = [line for line in output[output.index("Server logs: ") :].splitlines() if line]
    assert after[1:] == ["stopped: sandbox, receiver, dashboard"], after  # one line, last
    keys = orjson.loads((data / "demo" / "sandbox-keys.json").read_bytes())
    secrets = [keys["workspaces"][0]["apiKey"], keys["adminToken"],
               *(data / "demo" / "webhook-secrets").read_text().split()]  # fmt: skip
    assert all(secret not in output for secret in secrets)
    assert oct((data / "demo" / "api-key").stat().st_mode & 0o777) == "0o600"
    for port in ports:  # nothing listens any more
        with socket.socket() as probe:
            assert probe.connect_ex(("127.0.0.1", port)) != 0


def test_a_busy_port_is_one_line_naming_the_make_variable(tmp_path: Path) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        taken = busy.getsockname()[1]
        free = _free_ports(2)
        proc = _demo(tmp_path / "data", [free[0], free[1], taken])
        out, _ = proc.communicate(timeout=120)
    assert proc.returncode == 2, out
    lines = out.strip().splitlines()
    assert lines == [lines[0]] and lines[0].startswith("error: port "), out
    assert "DASHBOARD_PORT=" in lines[0] and not (tmp_path / "data").exists()


# -- a restart an hour later, and make's group stopped by SIGTERM and SIGHUP ------------


def _pty_lines(master: int) -> Iterator[str]:
    """The terminal's output, line by line, until every process has let it go."""
    pending = b""
    while True:
        try:
            chunk = os.read(master, 4096)
        except OSError:  # EIO: no process holds the terminal any more
            chunk = b""
        if not chunk:
            break
        pending += chunk
        *lines, pending = pending.split(b"\n")
        for line in lines:
            yield line.decode(errors="replace").rstrip("\r") + "\n"
    if pending:
        yield pending.decode(errors="replace")


def _controlling_terminal() -> None:
    """In the child, after setsid: make stdin (the terminal) its controlling terminal,
    as a login shell's job has; make's group is then the terminal's foreground."""
    fcntl.ioctl(0, termios.TIOCSCTTY, 0)


def _listening(port: int) -> bool:
    with socket.socket() as probe:
        return probe.connect_ex(("127.0.0.1", port)) == 0


FIGURES = {
    "conversations": "SELECT status, count(*) FROM conversations GROUP BY ALL ORDER BY ALL",
    "messages": "SELECT count(*) FROM messages",
    "leads": "SELECT count(*) FROM leads",
    "events": "SELECT count(*) FROM events",
    "marts": "SELECT count(*) FROM mart_conversations",
    "daily": "SELECT timezone, date, sum(conversations), sum(resolved), sum(open), "
    "sum(leads_qualified), sum(feedback_count) FROM mart_daily_conversations "
    "GROUP BY ALL ORDER BY ALL",
    "service": "SELECT count(*), min(date), max(date) FROM service_summaries",
}


def _figures(db: Path) -> dict[str, Any]:
    con = duckdb.connect(str(db), read_only=True)
    try:
        out: dict[str, Any] = {name: con.execute(sql).fetchall() for name, sql in FIGURES.items()}
        row = con.execute(
            "SELECT reconciliation FROM transform_runs ORDER BY finished_at DESC LIMIT 1"
        ).fetchone()
    finally:
        con.close()
    assert row is not None
    out["mismatches"] = orjson.loads(row[0]) if row[0] else []
    return out


def _make_demo_in_a_terminal(data: Path, ports: list[int], now: datetime,
                             sig: signal.Signals) -> dict[str, Any]:  # fmt: skip
    """``make demo`` in a pseudo-terminal until it has said what to try; then ``sig`` to
    make's process group. What it printed, make's status, and which ports still listen."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("CONVO_")}
    env[CLOCK] = now.isoformat()
    argv = ["make", "--no-print-directory", "demo", f"PORT={ports[0]}",
            f"RECEIVER_PORT={ports[1]}", f"DASHBOARD_PORT={ports[2]}", "CONVERSATIONS=120",
            "DAYS=5", f"DEMO_DATA_DIR={data}"]  # fmt: skip
    master, slave = pty.openpty()
    proc = subprocess.Popen(argv, cwd=ROOT, env=env, stdin=slave, stdout=slave, stderr=slave,
                            start_new_session=True, preexec_fn=_controlling_terminal)  # fmt: skip
    os.close(slave)
    watch = OutputWatcher(cast(io.TextIOBase, _pty_lines(master)), "make demo")
    demo_group = None
    try:
        watch.wait_for(r"Server logs: ", timeout=400)
        demo_group = os.tcgetpgrp(master)  # the demo took the terminal's foreground
        assert demo_group != proc.pid
        os.killpg(proc.pid, sig)  # to make's group: make, uv; not the demo's own group
        output = watch.wait_end(proc, timeout=120)
        still = [port for port in ports if _listening(port)]
    finally:
        if proc.poll() is None:  # the test failed midway: end all of it
            for group in (proc.pid, demo_group):
                if group is not None:
                    with contextlib.suppress(OSError):
                        os.killpg(group, signal.SIGKILL)
        if proc.poll() is None:
            proc.wait(timeout=30)
        os.close(master)
    return {"status": proc.returncode, "output": output, "listening": still,
            "figures": _figures(data / "warehouse.duckdb")}  # fmt: skip


@pytest.fixture(scope="module")
def restarted(tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    """The demo made, stopped by SIGTERM, and made again an hour later, stopped by SIGHUP."""
    data = tmp_path_factory.mktemp("restart") / "data"
    ports = _free_ports(3)
    first = datetime.now(UTC).replace(microsecond=0) - timedelta(hours=2)
    runs = [
        _make_demo_in_a_terminal(data, ports, first, signal.SIGTERM),
        _make_demo_in_a_terminal(data, ports, first + timedelta(hours=1), signal.SIGHUP),
    ]
    for run in runs:
        run["anchor"] = orjson.loads((data / "demo" / "history.json").read_bytes())["until"]
        run["first"] = first
    return runs


@pytest.mark.timeout(1200)
def test_a_restart_an_hour_later_serves_and_loads_the_same_figures(
    restarted: list[dict[str, Any]],
) -> None:
    before, after = restarted
    assert before["figures"]["conversations"], before["output"]
    assert before["figures"]["service"][0][0] > 0  # the service's summary was there to compare
    assert after["figures"] == before["figures"]
    for run in restarted:
        assert run["figures"]["mismatches"] == [], run["figures"]["mismatches"][:5]
        assert run["anchor"] == before["first"].isoformat(timespec="milliseconds").replace(
            "+00:00", "Z"
        )
    assert "new history" not in after["output"], after["output"]


@pytest.mark.timeout(1200)
def test_sigterm_or_sighup_to_makes_group_stops_every_server(
    restarted: list[dict[str, Any]],
) -> None:
    """As docs/cli.md says: the demo stops its servers and exits 0; make, which got the
    signal itself, waits for it and then ends by that signal."""
    for run, sig in zip(restarted, (signal.SIGTERM, signal.SIGHUP), strict=True):
        assert run["listening"] == [], (sig.name, run["output"])
        assert run["status"] == -sig, (sig.name, run["status"], run["output"])
        tail = run["output"][run["output"].index("Server logs: ") :]
        assert "stopped: sandbox, receiver, dashboard" in tail, (sig.name, tail)
        assert "Traceback" not in run["output"]


def _demo_module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("demo_under_test", ROOT / "pipelines" / "demo.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def test_a_new_history_gets_a_fresh_warehouse_with_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The anchor is kept for the same seed, size and span, however much later; another
    seed makes a new history, and the warehouse and archive of the old one move aside."""
    demo = _demo_module()
    paths = demo.Paths(tmp_path / "data")
    monkeypatch.setenv(CLOCK, "2026-11-18T09:00:00+00:00")
    until = demo.history_anchor(paths, 42, 120, 5)
    assert until == "2026-11-18T09:00:00.000Z"
    demo._fresh_warehouse_for(paths, f"seed=42 until={until}")
    paths.warehouse.write_bytes(b"a warehouse")
    (paths.received / "demo").mkdir(parents=True)
    monkeypatch.setenv(CLOCK, "2026-11-19T10:00:00+00:00")
    assert demo.history_anchor(paths, 42, 120, 5) == until  # a day later: the same history
    demo._fresh_warehouse_for(paths, f"seed=42 until={until}")
    assert capsys.readouterr().out == "" and paths.warehouse.exists()
    other = demo.history_anchor(paths, 7, 120, 5)
    assert other == "2026-11-19T10:00:00.000Z"
    demo._fresh_warehouse_for(paths, f"seed=7 until={other}")
    printed = capsys.readouterr().out.splitlines()
    assert len(printed) == 1 and "fresh warehouse" in printed[0], printed
    assert not paths.warehouse.exists() and not paths.received.exists()
    assert len(list(paths.data.glob("warehouse.previous-*.duckdb"))) == 1
    assert len(list((paths.data / "webhooks").glob("received.previous-*"))) == 1
