"""``make demo``: the whole stack on generated data, then what to try next.

It starts the sandbox (the service, with a generated history and its webhook
archive) and the webhook receiver, registers the receiver with the sandbox,
makes some live activity so that signed deliveries arrive, writes the nightly
run's settings (``data/demo/convo.toml``, its secrets in files beside it),
runs the nightly pipeline once with them (``convo run``: extract, webhook
ingest, transform, exports, publish), serves the dashboard on the published
snapshot, and prints what to try next, once, last. Everything keeps running
until Ctrl-C (or SIGTERM, or SIGHUP), which stops it all with one line and exit
status 0; docs/cli.md ("make demo") gives make's own status.

A restart is the same demo: the history's end (its time anchor) is fixed when
the history is first made and kept in ``data/demo/history.json``, and the live
activity happens at that anchor with the demo's seed, so every restart serves,
loads and reconciles the same figures (D-DEMO-ANCHOR). Only another seed, size
or span makes a new history, which gets a fresh warehouse (one line says so).

The servers' own output goes to ``data/demo/logs/``, so that nothing is printed
after the "Try next" block. Decision D-DEMO-RUN says why the demo takes the
terminal's foreground for itself, and how its servers end with it.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import IO

import httpx
import orjson

ROOT = Path(__file__).resolve().parent.parent
CLI = [sys.executable, "-m", "convo_analytics.cli"]
START_TIMEOUT_SECONDS = 300.0
#: Test-only: the demo's "now" (ISO 8601, not after the real time), which anchors a new
#: history; tests/test_demo.py restarts the demo "an hour later" with it.
CLOCK_VARIABLE = "CONVO_TEST_DEMO_NOW"
#: The live activity the demo makes, at the history's anchor with the demo's seed.
LIVE_NEW, LIVE_PROGRESS = 25, 25
#: The signals that stop the demo (and its servers), as Ctrl-C does.
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
#: prctl(2): deliver a signal to the child when its parent (the demo) ends.
PR_SET_PDEATHSIG = 1


class Stopped(Exception):
    """SIGINT, SIGTERM or SIGHUP arrived, or the process that started the demo ended."""


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
        """The demo sandbox's keys: its own file, which no other sandbox writes."""
        return self.demo / "sandbox-keys.json"

    @property
    def anchor(self) -> Path:
        return self.demo / "history.json"

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


def demo_now() -> datetime:
    """Now, or (tests only) the time ``CONVO_TEST_DEMO_NOW`` names."""
    faked = os.environ.get(CLOCK_VARIABLE, "").strip()
    if not faked:
        return datetime.now(UTC)
    try:
        when = datetime.fromisoformat(faked.replace("Z", "+00:00"))
    except ValueError:
        raise DemoError(f"{CLOCK_VARIABLE}={faked!r} is not an ISO 8601 time "
                        "(it is for tests only: unset it)", code=2) from None  # fmt: skip
    return when if when.tzinfo else when.replace(tzinfo=UTC)


def history_anchor(paths: Paths, seed: int, conversations: int, days: int) -> str:
    """The end of the demo's history (ISO 8601): the one kept in ``data/demo/history.json``
    when it was made with the same seed, size and span, else now, kept there from now on.

    A history regenerated "ending now" at each start moved every time, so a restart
    loaded a second, shifted copy of the past into the same warehouse (issue 25).
    """
    made = {"seed": seed, "conversations": conversations, "days": days}
    with contextlib.suppress(OSError, ValueError):  # none kept, or not readable
        kept = orjson.loads(paths.anchor.read_bytes())
        if isinstance(kept, dict) and {k: kept.get(k) for k in made} == made:
            until = kept.get("until")
            if isinstance(until, str):
                datetime.fromisoformat(until.replace("Z", "+00:00"))  # else: a new anchor
                return until
    until = demo_now().astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    paths.anchor.parent.mkdir(parents=True, exist_ok=True)
    paths.anchor.write_bytes(orjson.dumps({**made, "until": until}, option=orjson.OPT_INDENT_2))
    return until


def _fresh_warehouse_for(paths: Paths, history: str) -> None:
    """Move aside a warehouse (and the receiver's archive) filled from another generated
    history; never delete them.

    Each demo history (seed, size, span, end) is a different workspace's past;
    mixing two in one warehouse would make every figure, and the reconciliation
    with the sandbox's own summary, wrong.
    """
    warehouse = paths.warehouse
    marker = warehouse.with_name(warehouse.name + ".demo-history")
    if warehouse.exists() and (not marker.exists() or marker.read_text() != history):
        stamp = int(time.time())
        aside = warehouse.with_name(f"{warehouse.stem}.previous-{stamp}.duckdb")
        warehouse.rename(aside)
        if paths.received.exists():
            paths.received.rename(paths.received.with_name(f"received.previous-{stamp}"))
        print(f"   (a new history, so a fresh warehouse: the previous one is in {aside})")
    warehouse.parent.mkdir(parents=True, exist_ok=True)
    marker.write_text(history)


def write_demo_config(paths: Paths, base_url: str, first_day: date) -> None:
    """The nightly run's settings for this demo, secrets by file (D-DEMO-CONFIG); the
    service's summary is fetched from the history's first day, however old it is."""
    summary_days = min(732, (datetime.now(UTC).date() - first_day).days + 1)
    toml = f"""# Written by `make demo` for its sandbox, for: convo run --config {paths.config}
# No secret is written here: the API key and the webhook secrets are in the files named.
[service]
base_url = "{base_url}"
api_key_file = "{paths.api_key}"
rate_limit = "none"

[extract]
summary_days = {max(1, summary_days)}

[warehouse]
path = "{paths.warehouse}"

[webhooks]
secret_file = "{paths.webhook_secrets}"
archive_dir = "{paths.received}"

[publish]
dir = "{paths.data / "published"}"

[export]
dir = "{paths.data / "exports"}"

[audit]
file = "{paths.data / "audit" / "audit.jsonl"}"

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

    def stop(self) -> bool:
        """Ask the server to stop (Ctrl-C), kill it after 15 s; True once it has ended.

        Never raises: on a machine busy with disk writes a killed process may take a
        while to go, and the demo must still stop the others and say which one lingers.
        """
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
        for wait in (15, 60):
            try:
                self.proc.wait(timeout=wait)
                return True
            except subprocess.TimeoutExpired:
                self.proc.kill()
        return False


def _ends_with_the_demo() -> Callable[[], None] | None:
    """For a child's ``preexec_fn``: SIGTERM to the child when the demo ends, however it
    ends (even SIGKILL), by the parent-death signal of Linux's prctl(2); None elsewhere.

    The demo stops its servers itself on SIGINT, SIGTERM and SIGHUP; this is the net
    under that, so that no server outlives it and keeps its port.
    """
    if not sys.platform.startswith("linux"):
        return None
    libc = ctypes.CDLL(None, use_errno=True)
    demo = os.getpid()

    def in_the_child() -> None:
        libc.prctl(PR_SET_PDEATHSIG, int(signal.SIGTERM), 0, 0, 0)
        if os.getppid() != demo:  # the demo ended before the line above
            os.kill(os.getpid(), signal.SIGTERM)

    return in_the_child


def _start(name: str, argv: list[str], log: Path, env: dict[str, str] | None = None) -> Part:
    """Start a server in its own session (Ctrl-C reaches only the demo, which stops it),
    ending with the demo should the demo end without stopping it."""
    log.parent.mkdir(parents=True, exist_ok=True)
    out: IO[bytes] = log.open("wb")
    proc = subprocess.Popen(
        argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
        env=env, start_new_session=True, preexec_fn=_ends_with_the_demo(),
    )  # fmt: skip
    out.close()
    return Part(name, proc, log)


class _Parent:
    """Whether the process that started the demo (make's uv, a shell) is still there.

    A parent that ends without passing on its signal (an old uv killed by SIGHUP, a
    ``kill -9``) leaves the demo orphaned: it notices within half a second and stops.
    """

    pid = os.getppid()

    @classmethod
    def check(cls) -> None:
        if os.getppid() != cls.pid:
            raise Stopped("the process that started the demo ended")


def _on_stop_signal(signum: int, frame: object) -> None:
    raise Stopped(signal.Signals(signum).name)


def _wait_ready(part: Part, url: str, ok: Callable[[httpx.Response], bool]) -> None:
    """Poll ``url`` until ``ok`` says the part serves (or it exits: its log says why)."""
    deadline = time.monotonic() + START_TIMEOUT_SECONDS
    while time.monotonic() < deadline:
        _Parent.check()
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


def try_next(
    paths: Paths, url: str, hook_url: str, dashboard_url: str, last_day: date
) -> list[str]:
    """The closing block: where things are, then commands that run as written in a new
    shell (absolute paths; secrets named by file, never shown); the exports' range is
    the 30 days that end on the history's last day."""
    span = f"--from {last_day - timedelta(days=29)} --to {last_day}"
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
    until = history_anchor(paths, args.seed, args.conversations, args.days)
    _fresh_warehouse_for(paths, f"seed={args.seed} conversations={args.conversations} "
                         f"days={args.days} until={until}")  # fmt: skip
    receiver_secret = _receiver_secret(paths.receiver_secret)
    last_day = datetime.fromisoformat(until.replace("Z", "+00:00")).date()

    print(f"1. starting the sandbox service ({args.conversations} conversations over "
          f"{args.days} days to {until}, kept in {paths.anchor})")  # fmt: skip
    url = f"http://{host}:{args.port}"
    hook_url = f"http://{host}:{args.receiver_port}/webhooks"
    dashboard_url = f"http://{host}:{args.dashboard_port}"
    # The three servers start together (each takes seconds to import and bind; none needs
    # another to start): each is waited for where the steps below need it. The dashboard
    # finds the snapshot that step 4 publishes when a browser opens it.
    parts.append(_start("sandbox", [
        *CLI, "sandbox", "serve", "--host", host, "--port", str(args.port),
        "--conversations", str(args.conversations), "--days", str(args.days),
        "--seed", str(args.seed), "--until", until, "--key-file", str(paths.keys),
        "--webhook-archive", str(paths.history), "--rate-limit", "none",
    ], paths.logs / "sandbox.log"))  # fmt: skip
    parts.append(_start("receiver", [
        *CLI, "webhooks", "serve", "--host", host, "--port", str(args.receiver_port),
        "--archive-dir", str(paths.received),
    ], paths.logs / "receiver.log",
        env={**os.environ, "CONVO_WEBHOOK_SECRET_FILE": str(paths.receiver_secret)}))  # fmt: skip
    parts.append(_start("dashboard", [
        *CLI, "dashboard", "--host", host, "--port", str(args.dashboard_port),
        "--dir", str(paths.data / "published"),
    ], paths.logs / "dashboard.log"))  # fmt: skip
    sandbox, receiver, dashboard = parts[-3:]
    _wait_ready(sandbox, f"{url}/_sandbox/health", lambda r: r.status_code == 200)
    key_file = orjson.loads(paths.keys.read_bytes())
    key = key_file["workspaces"][0]["apiKey"]
    workspace = key_file["workspaces"][0]["name"]
    history_secret = key_file.get("archiveWebhookSecret", "")
    _write_private(paths.api_key, key)
    _write_private(paths.webhook_secrets,
                   "\n".join(s for s in (receiver_secret, history_secret) if s))  # fmt: skip

    print(f"2. starting the webhook receiver, archiving to {paths.received}")
    _wait_ready(receiver, hook_url, lambda r: r.status_code < 500)

    print("3. registering the receiver with the sandbox, then some live activity (at the "
          "history's end, the same at every start)")  # fmt: skip
    auth = {"Authorization": f"Bearer {key}"}
    registration = {"url": hook_url, "events": ["*"], "secret": receiver_secret,
                    "description": "convo-analytics demo receiver"}  # fmt: skip
    httpx.post(f"{url}/v1/webhooks", headers=auth, timeout=30, json=registration
               ).raise_for_status()  # fmt: skip
    admin = {"Authorization": f"Bearer {key_file['adminToken']}"}
    live = {"workspace": workspace, "newConversations": LIVE_NEW, "progress": LIVE_PROGRESS,
            "seed": args.seed, "at": until}  # fmt: skip
    httpx.post(f"{url}/_sandbox/simulate", headers=admin, timeout=60, json=live
               ).raise_for_status()  # fmt: skip
    _wait_for_deliveries(paths.received)

    print(f"4. running the nightly pipeline once: convo run --config {paths.config}")
    write_demo_config(paths, url, last_day - timedelta(days=args.days))
    env = {k: v for k, v in os.environ.items() if not k.startswith("CONVO_")}
    with (paths.logs / "run.log").open("wb") as log:
        done = subprocess.run([*CLI, "run", "--verbose", "--config", str(paths.config)], env=env,
                              stdout=subprocess.PIPE, stderr=log, stdin=subprocess.DEVNULL,
                              start_new_session=True,
                              preexec_fn=_ends_with_the_demo())  # fmt: skip
    print("   " + done.stdout.decode(errors="replace").strip())  # the run's summary line
    if done.returncode:
        raise DemoError(f"convo run failed (exit {done.returncode}); its log: {log.name}")

    print(f"5. serving the dashboard on {dashboard_url}")
    _wait_ready(dashboard, f"{dashboard_url}/_stcore/health", lambda r: r.status_code == 200)
    return try_next(paths, url, hook_url, dashboard_url, last_day)


def _watch(parts: list[Part]) -> str:
    """Block until a server ends by itself (its name), or the demo is stopped."""
    while True:
        _Parent.check()
        for part in parts:
            if part.proc.poll() is not None:
                return part.name
        time.sleep(0.5)


def _stop_all(parts: list[Part]) -> None:
    """Stop every server, last started first; no signal cuts this short."""
    for sig in STOP_SIGNALS:
        signal.signal(sig, signal.SIG_IGN)
    lingering = [part for part in reversed(parts) if not part.stop()]
    for part in lingering:
        _say(
            f"warning: the {part.name} (pid {part.proc.pid}) did not end when killed; "
            f"its log: {part.log}",
            file=sys.stderr,
        )


def _say(text: str, file: IO[str] | None = None) -> None:
    """Print, unless the terminal has gone (SIGHUP after a hang-up: nobody reads it)."""
    with contextlib.suppress(OSError):
        print(text, file=file or sys.stdout, flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8787, help="the sandbox's port")
    parser.add_argument("--receiver-port", type=int, default=8788)
    parser.add_argument("--dashboard-port", type=int, default=8501)
    parser.add_argument("--conversations", type=int, default=5000)
    parser.add_argument("--days", type=int, default=30)
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument(
        "--data-dir", type=Path, default=ROOT / "data", help="where it keeps all it makes"
    )
    args = parser.parse_args(argv)
    paths = Paths(args.data_dir.resolve())
    parts: list[Part] = []
    for sig in STOP_SIGNALS[1:]:  # SIGINT raises KeyboardInterrupt already
        signal.signal(sig, _on_stop_signal)
    with terminal_foreground():
        try:
            for line in run_demo(args, paths, parts):
                print(line)
            sys.stdout.flush()
            ended = _watch(parts)
            _stop_all(parts)
            _say(f"the {ended} stopped by itself (its log: {paths.logs / (ended + '.log')}); "
                 "stopped the rest")  # fmt: skip
            return 1
        except (KeyboardInterrupt, Stopped):
            _stop_all(parts)  # first: the terminal may be gone (SIGHUP)
            _say(f"\nstopped: {', '.join(p.name for p in parts) or 'nothing was running'}")
            return 0
        except DemoError as exc:
            _stop_all(parts)
            _say(f"error: {exc}", file=sys.stderr)
            return exc.code
        finally:
            _stop_all(parts)


if __name__ == "__main__":
    raise SystemExit(main())
