"""`make demo` as a new user meets it: the stack starts, says what to try once, last,
and every command it prints runs as written; Ctrl-C stops everything with one line.

The demo runs on a small history, on free ports, with its data in a temporary
folder (``--data-dir``), as a real process in its own process group, which gets
SIGINT the way a terminal's Ctrl-C delivers it.
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
from pathlib import Path

import httpx
import orjson

from process_support import OutputWatcher
from shell_support import command_lines, run_help

ROOT = Path(__file__).resolve().parent.parent


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
        for command in commands:
            done = run_help(command, tmp_path, tmp_path)
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
    keys = orjson.loads((data / "sandbox" / "keys.json").read_bytes())
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
