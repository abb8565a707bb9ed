"""``make demo``: bring up the local stack on generated data and say how to use it.

It starts the sandbox (the service, with a generated history and its webhook
archive), extracts it into the warehouse with ``convo extract``, ingests the
history's webhook archive with ``convo webhooks ingest``, and keeps the
sandbox serving until Ctrl-C. Later stages (webhook ingest, transforms,
the dashboard) join this script as they are built; it stays the one command
a new user runs.
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import orjson

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "data"
CLI = [sys.executable, "-m", "convo_analytics.cli"]


def _wait_for_url(proc: subprocess.Popen[str], timeout: float = 120) -> str:
    """Echo the sandbox's start-up lines until it says where it listens."""
    assert proc.stdout is not None
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            raise SystemExit("the sandbox stopped while starting; see the lines above")
        print("  " + line.rstrip())
        m = re.search(r"listening on (http://\S+)", line)
        if m:
            return m.group(1)
    raise SystemExit("the sandbox did not start in time")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--port", type=int, default=8787)
    parser.add_argument("--conversations", type=int, default=5000)
    parser.add_argument("--days", type=int, default=30)
    parser.add_argument("--seed", type=int, default=42)
    args = parser.parse_args(argv)
    keys = DATA / "sandbox" / "keys.json"
    archive = DATA / "webhooks" / "sandbox-history.jsonl.gz"
    warehouse = DATA / "warehouse.duckdb"
    print("convo-analytics demo")
    print("1. starting the sandbox service (a generated workspace history)")
    sandbox = subprocess.Popen(
        [*CLI, "sandbox", "serve", "--port", str(args.port),
         "--conversations", str(args.conversations), "--days", str(args.days),
         "--seed", str(args.seed), "--key-file", str(keys), "--webhook-archive", str(archive),
         "--rate-limit", "none"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    try:
        url = _wait_for_url(sandbox)
        httpx.get(f"{url}/_sandbox/health", timeout=30).raise_for_status()
        key = orjson.loads(keys.read_bytes())["workspaces"][0]["apiKey"]
        print(f"2. extracting it into the warehouse {warehouse} (convo extract)")
        env = {**os.environ, "CONVO_API_KEY": key}
        subprocess.run(
            [*CLI, "extract", "--base-url", url, "--db", str(warehouse), "--rate-limit", "none"],
            env=env, check=True,
        )  # fmt: skip
        secret = orjson.loads(keys.read_bytes()).get("archiveWebhookSecret")
        if secret or os.environ.get("CONVO_WEBHOOK_SECRET"):
            print(f"3. ingesting the history's webhook events from {archive}")
            hook_env = {**os.environ, **({"CONVO_WEBHOOK_SECRET": secret} if secret else {})}
            subprocess.run(
                [*CLI, "webhooks", "ingest", str(archive), "--db", str(warehouse)],
                env=hook_env, check=True,
            )  # fmt: skip
        print()
        print(f"The sandbox keeps serving at {url} (Ctrl-C stops it). Try:")
        print(f"  curl -H 'Authorization: Bearer {key}' '{url}/v1/conversations?limit=2'")
        print(f"  CONVO_API_KEY={key} uv run convo extract --base-url {url} --db {warehouse}")
        print("    (a second run fetches only what changed)")
        print(
            f"  uv run python -c \"import duckdb; print(duckdb.connect('{warehouse}', "
            "read_only=True).sql('select channel, count(*) from conversations group by 1'))\""
        )
        print(f"  keys and the control API's admin token: {keys}")
        print(f"  the history's webhook deliveries, as a receiver archives them: {archive}")
        sys.stdout.flush()
        assert sandbox.stdout is not None
        for line in sandbox.stdout:  # keep echoing until the sandbox ends
            print("  " + line.rstrip())
        return sandbox.wait()
    except KeyboardInterrupt:
        return 0
    finally:
        if sandbox.poll() is None:
            sandbox.send_signal(signal.SIGINT)
            try:
                sandbox.wait(timeout=10)
            except subprocess.TimeoutExpired:
                sandbox.kill()


if __name__ == "__main__":
    raise SystemExit(main())
