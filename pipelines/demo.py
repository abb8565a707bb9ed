"""``make demo``: bring up the local stack on generated data and say how to use it.

It starts the sandbox (the service, with a generated history and its webhook
archive), extracts it into the warehouse with ``convo extract``, ingests the
history's webhook archive with ``convo webhooks ingest``, builds the marts with
``convo transform``, publishes a snapshot (``convo publish``) and serves the
dashboard on it (``convo dashboard``), keeping both running until Ctrl-C. The
nightly run (issue 7) joins this script when it is built; it stays the one
command a new user runs.
"""

from __future__ import annotations

import argparse
import os
import re
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
    parser.add_argument("--conversations", type=int, default=5000)
    parser.add_argument("--days", type=int, default=30)
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--dashboard-port", type=int, default=8501)
    args = parser.parse_args(argv)
    keys = DATA / "sandbox" / "keys.json"
    archive = DATA / "webhooks" / "sandbox-history.jsonl.gz"
    warehouse = DATA / "warehouse.duckdb"
    published = DATA / "published"
    dashboard: subprocess.Popen[bytes] | None = None
    print("convo-analytics demo")
    _fresh_warehouse_for(
        warehouse, f"seed={args.seed} conversations={args.conversations} days={args.days}"
    )
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
        print("4. building the marts: metrics, lead funnel, guardrail incidents (convo transform)")
        subprocess.run([*CLI, "transform", "--db", str(warehouse)], check=True)
        print(f"5. publishing a snapshot for the dashboard to {published} (convo publish)")
        subprocess.run(
            [*CLI, "publish", "--db", str(warehouse), "--dir", str(published)], check=True
        )
        print(
            f"6. serving the dashboard on http://127.0.0.1:{args.dashboard_port} (convo dashboard)"
        )
        dashboard = subprocess.Popen(
            [*CLI, "dashboard", "--port", str(args.dashboard_port), "--dir", str(published)],
            stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT,
        )  # fmt: skip
        print()
        print(f"Open the dashboard: http://127.0.0.1:{args.dashboard_port}")
        print(f"The sandbox keeps serving at {url} (Ctrl-C stops both). Try:")
        print(f"  curl -H 'Authorization: Bearer {key}' '{url}/v1/conversations?limit=2'")
        print(f"  CONVO_API_KEY={key} uv run convo extract --base-url {url} --db {warehouse}")
        print("    (a second run fetches only what changed)")
        print(
            f"  uv run python -c \"import duckdb; print(duckdb.connect('{warehouse}', "
            "read_only=True).sql('select channel, count(*) from conversations group by 1'))\""
        )
        today = datetime.now(UTC).date()
        span = f"--from {today - timedelta(days=29)} --to {today}"
        print(f"  uv run convo export summary {span} --db {warehouse}")
        print("    (the same shape as the service's /v1/analytics/summary, from the warehouse)")
        print(f"  uv run convo export guardrails {span} --format csv --db {warehouse}")
        print(f"  CONVO_SERVE_TOKEN=choose-one uv run convo serve --db {warehouse}")
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
        if dashboard is not None and dashboard.poll() is None:
            dashboard.terminate()
        if sandbox.poll() is None:
            sandbox.send_signal(signal.SIGINT)
            try:
                sandbox.wait(timeout=10)
            except subprocess.TimeoutExpired:
                sandbox.kill()


if __name__ == "__main__":
    raise SystemExit(main())
