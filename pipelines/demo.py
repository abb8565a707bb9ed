"""``make demo``: the whole stack on generated data, then what to try next.

It starts the sandbox (the service, with a generated history and its webhook
archive) and the webhook receiver, registers the receiver with the sandbox,
makes some live activity so that signed deliveries arrive, runs the nightly
pipeline once (``convo run``: extract, webhook ingest, transform, publish,
exports), serves the dashboard on the published snapshot, and prints the URLs.
Everything keeps running until Ctrl-C.
"""

from __future__ import annotations

import argparse
import os
import re
import secrets
import signal
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import orjson

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "data"
CLI = [sys.executable, "-m", "convo_analytics.cli"]


def _wait_for_url(
    proc: subprocess.Popen[str], pattern: str, what: str, timeout: float = 120
) -> str:
    """Echo a server's start-up lines until it says where it listens."""
    assert proc.stdout is not None
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            raise SystemExit(f"the {what} stopped while starting; see the lines above")
        print("  " + line.rstrip())
        m = re.search(pattern, line)
        if m:
            return m.group(1)
    raise SystemExit(f"the {what} did not start in time")


def _demo_secret(path: Path) -> str:
    """The demo receiver's webhook secret, made once and kept in a file only we can read."""
    if path.exists():
        return path.read_text().strip()
    path.parent.mkdir(parents=True, exist_ok=True)
    value = "whsec_demo_" + secrets.token_hex(16)
    path.touch(mode=0o600)
    path.write_text(value)
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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--port", type=int, default=8787)
    parser.add_argument("--receiver-port", type=int, default=8788)
    parser.add_argument("--dashboard-port", type=int, default=8501)
    parser.add_argument("--conversations", type=int, default=5000)
    parser.add_argument("--days", type=int, default=30)
    parser.add_argument("--seed", type=int, default=42)
    args = parser.parse_args(argv)
    keys = DATA / "sandbox" / "keys.json"
    history = DATA / "webhooks" / "sandbox-history.jsonl.gz"
    received = DATA / "webhooks" / "received"
    warehouse = DATA / "warehouse.duckdb"
    published = DATA / "published"
    print("convo-analytics demo")
    _fresh_warehouse_for(warehouse, f"seed={args.seed} conversations={args.conversations} "
                         f"days={args.days}")  # fmt: skip
    receiver_secret = _demo_secret(DATA / "demo" / "webhook-secret")
    children: list[subprocess.Popen[str]] = []
    try:
        print("1. starting the sandbox service (a generated workspace history)")
        sandbox = subprocess.Popen(
            [*CLI, "sandbox", "serve", "--port", str(args.port),
             "--conversations", str(args.conversations), "--days", str(args.days),
             "--seed", str(args.seed), "--key-file", str(keys), "--webhook-archive", str(history),
             "--rate-limit", "none"],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        )  # fmt: skip
        children.append(sandbox)
        url = _wait_for_url(sandbox, r"listening on (http://\S+)", "sandbox")
        httpx.get(f"{url}/_sandbox/health", timeout=30).raise_for_status()
        key_file = orjson.loads(keys.read_bytes())
        key = key_file["workspaces"][0]["apiKey"]
        workspace = key_file["workspaces"][0]["name"]
        history_secret = key_file.get("archiveWebhookSecret", "")
        both = DATA / "demo" / "webhook-secrets"  # the two secrets, one a line, for the ingest
        both.touch(mode=0o600)
        both.write_text("\n".join(x for x in (receiver_secret, history_secret) if x) + "\n")

        print(f"2. starting the webhook receiver, archiving to {received}")
        receiver = subprocess.Popen(
            [*CLI, "webhooks", "serve", "--port", str(args.receiver_port),
             "--archive-dir", str(received)],
            env={**os.environ, "CONVO_WEBHOOK_SECRET": receiver_secret},
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        )  # fmt: skip
        children.append(receiver)
        hook_url = _wait_for_url(receiver, r"receiving webhooks on (http://\S+)", "receiver")

        print("3. registering the receiver with the sandbox, then some live activity")
        auth = {"Authorization": f"Bearer {key}"}
        registration = {"url": hook_url, "events": ["*"], "secret": receiver_secret,
                        "description": "convo-analytics demo receiver"}  # fmt: skip
        httpx.post(
            f"{url}/v1/webhooks", headers=auth, timeout=30, json=registration
        ).raise_for_status()
        admin = {"Authorization": f"Bearer {key_file['adminToken']}"}
        httpx.post(f"{url}/_sandbox/simulate", headers=admin, timeout=60,
                   json={"workspace": workspace, "newConversations": 25, "progress": 25},
                   ).raise_for_status()  # fmt: skip
        time.sleep(2)  # let the deliveries land (the receiver fsyncs before each answer)

        print("4. running the nightly pipeline once (convo run)")
        env = {**os.environ, "CONVO_BASE_URL": url, "CONVO_API_KEY": key,
               "CONVO_RATE_LIMIT": "none", "CONVO_DB": str(warehouse),
               "CONVO_WEBHOOK_SECRET": ",".join(s for s in (receiver_secret, history_secret) if s),
               "CONVO_WEBHOOK_ARCHIVE_DIR": str(received), "CONVO_RUN_INGEST_PATHS": str(history),
               "CONVO_PUBLISH_DIR": str(published)}  # fmt: skip
        subprocess.run([*CLI, "run"], env=env, check=True)

        print(f"5. serving the dashboard on http://127.0.0.1:{args.dashboard_port}")
        dashboard = subprocess.Popen(
            [*CLI, "dashboard", "--port", str(args.dashboard_port), "--dir", str(published)],
            stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT, text=True,
        )  # fmt: skip
        children.append(dashboard)
        today = datetime.now(UTC).date()
        span = f"--from {today - timedelta(days=29)} --to {today}"
        print()
        print(f"  dashboard:        http://127.0.0.1:{args.dashboard_port}")
        print(f"  sandbox service:  {url}  (OpenAPI docs: {url}/docs)")
        print(f"  webhook receiver: {hook_url}  (archive: {received})")
        print()
        print("Try next (Ctrl-C stops everything):")
        print(f"  curl -H 'Authorization: Bearer {key}' '{url}/v1/conversations?limit=2'")
        print(f"  uv run convo export summary {span} --db {warehouse}")
        print(f"  uv run convo export guardrails {span} --format csv --db {warehouse}")
        print(f"  CONVO_SERVE_TOKEN=choose-one uv run convo serve --db {warehouse}")
        print("  the nightly run again (incremental; new deliveries and changes only):")
        print(f"    CONVO_API_KEY={key} CONVO_BASE_URL={url} CONVO_RATE_LIMIT=none \\")
        print(f"    CONVO_WEBHOOK_SECRET_FILE={DATA / 'demo' / 'webhook-secret'} "
              f"CONVO_WEBHOOK_ARCHIVE_DIR={received} uv run convo run")  # fmt: skip
        print(f"  keys and the control API's admin token: {keys}")
        print(
            f"  webhook secrets (files; never printed): {both} holds both, one a line "
            f"(the receiver's: {DATA / 'demo' / 'webhook-secret'}; the history archive's: "
            f"archiveWebhookSecret in {keys}); pass the file, not its content:"
        )
        print(f"    CONVO_WEBHOOK_SECRET_FILE={both} uv run convo webhooks ingest "
              f"{DATA / 'webhooks'} --db {warehouse} --json")  # fmt: skip
        sys.stdout.flush()
        assert sandbox.stdout is not None
        for line in sandbox.stdout:  # keep echoing until the sandbox ends
            print("  " + line.rstrip())
        return sandbox.wait()
    except KeyboardInterrupt:
        return 0
    finally:
        for child in reversed(children):
            if child.poll() is None:
                child.send_signal(signal.SIGINT)
        for child in children:
            try:
                child.wait(timeout=10)
            except subprocess.TimeoutExpired:
                child.kill()


if __name__ == "__main__":
    raise SystemExit(main())
