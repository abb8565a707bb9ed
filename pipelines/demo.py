"""``make demo``: the whole stack on generated data, then what to try next.

It starts the sandbox (the service, with a generated history and its webhook
archive) and the webhook receiver, registers the receiver with the sandbox,
makes some live activity so that signed deliveries arrive, writes the nightly
run's settings (``data/demo/convo.toml``, its secrets in files beside it),
runs the nightly pipeline once with them (``convo run``: extract, webhook
ingest, transform, exports, publish), serves the dashboard on the published
snapshot, and prints what to try next, once, last. Everything keeps running
until Ctrl-C, which stops it all with one line and exit status 0.

The servers' own output goes to ``data/demo/logs/``, so that nothing is printed
after the "Try next" block. Decision D-DEMO-RUN says why the demo takes the
terminal's foreground for itself.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import IO

import httpx
import orjson

ROOT = Path(__file__).resolve().parent.parent
CLI = [sys.executable, "-m", "convo_analytics.cli"]
START_TIMEOUT_SECONDS = 300.0


class DemoError(Exception):
    """Something the user can fix (a busy port: exit 2) or a part that did not start: one line."""

    def __init__(self, message: str, code: int = 1) -> None:
        super().__init__(message)
        self.code = code


@dataclass(frozen=True)
class Paths:
    """Where the demo keeps what it makes (all under ``data``)."""

    data: Path

    @property
    def demo(self) -> Path:
        return self.data / "demo"

    @property
    def logs(self) -> Path:
        return self.demo / "logs"

    @property
    def keys(self) -> Path:
        return self.data / "sandbox" / "keys.json"

    @property
    def history(self) -> Path:
        return self.data / "webhooks" / "sandbox-history.jsonl.gz"

    @property
    def received(self) -> Path:
        return self.data / "webhooks" / "received"

    @property
    def warehouse(self) -> Path:
        return self.data / "warehouse.duckdb"

    @property
    def config(self) -> Path:
        return self.demo / "convo.toml"

    @property
    def api_key(self) -> Path:
        return self.demo / "api-key"

    @property
    def receiver_secret(self) -> Path:
        return self.demo / "webhook-secret"

    @property
    def webhook_secrets(self) -> Path:
        return self.demo / "webhook-secrets"


def _check_free(host: str, ports: dict[str, int]) -> None:
    """Every port the demo needs is free, checked before anything starts."""
    for what, port in ports.items():
        with socket.socket() as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                probe.bind((host, port))
            except OSError:
                raise DemoError(
                    f"port {port} on {host} (the {what}) is in use; stop what uses it or "
                    f"choose another, e.g. make demo {_make_var(what)}={port + 100}",
                    code=2,
                ) from None


def _make_var(what: str) -> str:
    return {"sandbox": "PORT", "receiver": "RECEIVER_PORT", "dashboard": "DASHBOARD_PORT"}[what]


def _write_private(path: Path, text: str) -> None:
    """A file only this user can read (secrets live in files, never on screen)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.touch(mode=0o600)
    path.chmod(0o600)
    path.write_text(text)


def _receiver_secret(path: Path) -> str:
    """The demo receiver's webhook secret, made once and kept."""
    if path.exists():
        return path.read_text().strip()
    value = "whsec_demo_" + secrets.token_hex(16)
    _write_private(path, value)
    return value


def _fresh_warehouse_for(warehouse: Path, history: str) -> None:
    """Move aside a warehouse filled from another generated history (never delete it).

    Each demo history (seed, size, span) is a different workspace's past; mixing
    two in one warehouse would make every figure, and the reconciliation with
    the sandbox's own summary, wrong.
    """
    marker = warehouse.with_name(warehouse.name + ".demo-history")
    if warehouse.exists() and (not marker.exists() or marker.read_text() != history):
        aside = warehouse.with_name(f"{warehouse.stem}.previous-{int(time.time())}.duckdb")
        warehouse.rename(aside)
        print(f"   (the warehouse held another history; moved it to {aside})")
    warehouse.parent.mkdir(parents=True, exist_ok=True)
    marker.write_text(history)


def write_demo_config(paths: Paths, base_url: str) -> None:
    """The nightly run's settings for this demo, secrets by file (D-DEMO-CONFIG)."""
    toml = f"""# Written by `make demo` for its sandbox, for: convo run --config {paths.config}
# No secret is written here: the API key and the webhook secrets are in the files named.
[service]
base_url = "{base_url}"
api_key_file = "{paths.api_key}"
rate_limit = "none"

[warehouse]
path = "{paths.warehouse}"

[webhooks]
secret_file = "{paths.webhook_secrets}"
archive_dir = "{paths.received}"

[publish]
dir = "{paths.data / "published"}"

[export]
dir = "{paths.data / "exports"}"

[run]
ingest_paths = ["{paths.history}"]
"""
    paths.config.parent.mkdir(parents=True, exist_ok=True)
    paths.config.write_text(toml)


@dataclass
class Part:
    """One server the demo runs, its output going to a log file."""

    name: str
    proc: subprocess.Popen[bytes]
    log: Path

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
        try:
            self.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=15)


def _start(name: str, argv: list[str], log: Path, env: dict[str, str] | None = None) -> Part:
    """Start a server in its own session (Ctrl-C reaches only the demo, which stops it)."""
    log.parent.mkdir(parents=True, exist_ok=True)
    out: IO[bytes] = log.open("wb")
    proc = subprocess.Popen(
        argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
        env=env, start_new_session=True,
    )  # fmt: skip
    out.close()
    return Part(name, proc, log)


def _wait_ready(part: Part, url: str, ok: Callable[[httpx.Response], bool]) -> None:
    """Poll ``url`` until ``ok`` says the part serves (or it exits: its log says why)."""
    deadline = time.monotonic() + START_TIMEOUT_SECONDS
    while time.monotonic() < deadline:
        if part.proc.poll() is not None:
            tail = part.log.read_text(errors="replace").strip().splitlines()[-5:]
            raise DemoError(
                f"the {part.name} stopped while starting ({part.log}): " + " / ".join(tail)
            )
        with contextlib.suppress(httpx.HTTPError):
            if ok(httpx.get(url, timeout=5)):
                return
        time.sleep(0.3)
    raise DemoError(f"the {part.name} did not start within {START_TIMEOUT_SECONDS:.0f} s")


def _wait_for_deliveries(folder: Path, timeout: float = 20.0) -> None:
    """Until the receiver's archive has lines and stops growing for a second (bounded)."""
    deadline = time.monotonic() + timeout
    size, steady = -1, 0.0
    while time.monotonic() < deadline:
        now = sum(p.stat().st_size for p in folder.rglob("*.jsonl*") if p.is_file())
        if now > 0 and now == size:
            steady += 0.25
            if steady >= 1.0:
                return
        else:
            size, steady = now, 0.0
        time.sleep(0.25)


@contextlib.contextmanager
def terminal_foreground() -> Iterator[None]:
    """Take the terminal's foreground for the demo's process group while it runs.

    Ctrl-C goes to the terminal's foreground group: under ``make demo`` that is
    make itself, which then dies of the signal (exit 130) whatever the demo does.
    With the demo's own group in the foreground, Ctrl-C reaches only the demo
    (its servers run in sessions of their own), which stops everything and
    exits 0; the foreground goes back to make's group on the way out. Without
    a terminal (tests, CI) nothing changes.
    """
    try:
        fd = os.open("/dev/tty", os.O_RDWR | os.O_CLOEXEC)
    except OSError:
        yield
        return
    before = None
    old = signal.signal(signal.SIGTTOU, signal.SIG_IGN)
    try:
        group = os.getpgrp()
        if os.tcgetpgrp(fd) == group:
            with contextlib.suppress(OSError):  # a session leader cannot move
                os.setpgid(0, 0)
                os.tcsetpgrp(fd, os.getpgrp())
                before = group
        yield
    finally:
        if before is not None:
            with contextlib.suppress(OSError):
                os.tcsetpgrp(fd, before)
        signal.signal(signal.SIGTTOU, old)
        os.close(fd)


def try_next(paths: Paths, url: str, hook_url: str, dashboard_url: str) -> list[str]:
    """The closing block: where things are, then commands that run as written in a new
    shell (absolute paths; secrets named by file, never shown)."""
    today = datetime.now(UTC).date()
    span = f"--from {today - timedelta(days=29)} --to {today}"
    cfg = paths.config
    return [
        "",
        f"  dashboard:        {dashboard_url}",
        f"  sandbox service:  {url}  (OpenAPI docs: {url}/docs)",
        f"  webhook receiver: {hook_url}  (archive: {paths.received})",
        "",
        "Try next, in a new shell (Ctrl-C here stops everything):",
        f"  source {ROOT / '.venv' / 'bin' / 'activate'}",
        f"  convo --config {cfg} export summary {span}",
        f"  convo --config {cfg} export guardrails {span} --format csv",
        f"  CONVO_SERVE_TOKEN=choose-one convo --config {cfg} serve",
        f"  convo run --config {cfg}   # the nightly run again: only what changed",
        f'  curl -H "Authorization: Bearer $(cat {paths.api_key})" '
        f"'{url}/v1/conversations?limit=2'",
        "Secrets are in files, not shown: the API key in "
        f"{paths.api_key}, the webhook secrets in {paths.webhook_secrets},",
        f"the sandbox's keys and admin token in {paths.keys}. Server logs: {paths.logs}/",
    ]


def run_demo(args: argparse.Namespace, paths: Paths, parts: list[Part]) -> list[str]:
    """Start everything (appending each server to ``parts``); the closing block's lines."""
    host = args.host
    _check_free(host, {"sandbox": args.port, "receiver": args.receiver_port,
                       "dashboard": args.dashboard_port})  # fmt: skip
    print("convo-analytics demo")
    _fresh_warehouse_for(paths.warehouse, f"seed={args.seed} conversations="
                         f"{args.conversations} days={args.days}")  # fmt: skip
    receiver_secret = _receiver_secret(paths.receiver_secret)

    print(f"1. starting the sandbox service ({args.conversations} conversations over "
          f"{args.days} days)")  # fmt: skip
    url = f"http://{host}:{args.port}"
    parts.append(_start("sandbox", [
        *CLI, "sandbox", "serve", "--host", host, "--port", str(args.port),
        "--conversations", str(args.conversations), "--days", str(args.days),
        "--seed", str(args.seed), "--key-file", str(paths.keys),
        "--webhook-archive", str(paths.history), "--rate-limit", "none",
    ], paths.logs / "sandbox.log"))  # fmt: skip
    _wait_ready(parts[-1], f"{url}/_sandbox/health", lambda r: r.status_code == 200)
    key_file = orjson.loads(paths.keys.read_bytes())
    key = key_file["workspaces"][0]["apiKey"]
    workspace = key_file["workspaces"][0]["name"]
    history_secret = key_file.get("archiveWebhookSecret", "")
    _write_private(paths.api_key, key)
    _write_private(paths.webhook_secrets,
                   "\n".join(s for s in (receiver_secret, history_secret) if s))  # fmt: skip

    print(f"2. starting the webhook receiver, archiving to {paths.received}")
    hook_url = f"http://{host}:{args.receiver_port}/webhooks"
    parts.append(_start("receiver", [
        *CLI, "webhooks", "serve", "--host", host, "--port", str(args.receiver_port),
        "--archive-dir", str(paths.received),
    ], paths.logs / "receiver.log",
        env={**os.environ, "CONVO_WEBHOOK_SECRET_FILE": str(paths.receiver_secret)}))  # fmt: skip
    _wait_ready(parts[-1], hook_url, lambda r: r.status_code < 500)

    print("3. registering the receiver with the sandbox, then some live activity")
    auth = {"Authorization": f"Bearer {key}"}
    registration = {"url": hook_url, "events": ["*"], "secret": receiver_secret,
                    "description": "convo-analytics demo receiver"}  # fmt: skip
    httpx.post(f"{url}/v1/webhooks", headers=auth, timeout=30, json=registration
               ).raise_for_status()  # fmt: skip
    admin = {"Authorization": f"Bearer {key_file['adminToken']}"}
    httpx.post(f"{url}/_sandbox/simulate", headers=admin, timeout=60,
               json={"workspace": workspace, "newConversations": 25, "progress": 25},
               ).raise_for_status()  # fmt: skip
    _wait_for_deliveries(paths.received)

    print(f"4. running the nightly pipeline once: convo run --config {paths.config}")
    write_demo_config(paths, url)
    env = {k: v for k, v in os.environ.items() if not k.startswith("CONVO_")}
    with (paths.logs / "run.log").open("wb") as log:
        done = subprocess.run([*CLI, "run", "--config", str(paths.config)], env=env,
                              stdout=subprocess.PIPE, stderr=log, stdin=subprocess.DEVNULL,
                              start_new_session=True)  # fmt: skip
    print("   " + done.stdout.decode(errors="replace").strip())  # the run's summary line
    if done.returncode:
        raise DemoError(f"convo run failed (exit {done.returncode}); its log: {log.name}")

    dashboard_url = f"http://{host}:{args.dashboard_port}"
    print(f"5. serving the dashboard on {dashboard_url}")
    parts.append(_start("dashboard", [
        *CLI, "dashboard", "--host", host, "--port", str(args.dashboard_port),
        "--dir", str(paths.data / "published"),
    ], paths.logs / "dashboard.log"))  # fmt: skip
    _wait_ready(parts[-1], f"{dashboard_url}/_stcore/health", lambda r: r.status_code == 200)
    return try_next(paths, url, hook_url, dashboard_url)


def _watch(parts: list[Part]) -> str:
    """Block until a server ends by itself; its name."""
    while True:
        for part in parts:
            if part.proc.poll() is not None:
                return part.name
        time.sleep(0.5)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8787, help="the sandbox's port")
    parser.add_argument("--receiver-port", type=int, default=8788)
    parser.add_argument("--dashboard-port", type=int, default=8501)
    parser.add_argument("--conversations", type=int, default=5000)
    parser.add_argument("--days", type=int, default=30)
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--data-dir", type=Path, default=ROOT / "data", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    paths = Paths(args.data_dir.resolve())
    parts: list[Part] = []
    with terminal_foreground():
        try:
            for line in run_demo(args, paths, parts):
                print(line)
            sys.stdout.flush()
            ended = _watch(parts)
            print(f"the {ended} stopped by itself (its log: {paths.logs / (ended + '.log')}); "
                  "stopping the rest")  # fmt: skip
            return 1
        except KeyboardInterrupt:
            signal.signal(signal.SIGINT, signal.SIG_IGN)  # a second Ctrl-C must not cut cleanup
            for part in reversed(parts):
                part.stop()
            print(f"\nstopped: {', '.join(p.name for p in parts) or 'nothing was running'}")
            return 0
        except DemoError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return exc.code
        finally:
            signal.signal(signal.SIGINT, signal.SIG_IGN)
            for part in reversed(parts):
                part.stop()


if __name__ == "__main__":
    raise SystemExit(main())
