"""``make demo``: bring up the local stack on generated data and say how to use it.

Today the stack is the sandbox (the service with a generated history and its
webhook archive). The extract, ingest, transform and dashboard steps join this
script as they are built; it stays the one command a new user runs.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "data"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--port", type=int, default=8787)
    parser.add_argument("--conversations", type=int, default=5000)
    parser.add_argument("--days", type=int, default=30)
    parser.add_argument("--seed", type=int, default=42)
    args = parser.parse_args(argv)
    keys = DATA / "sandbox" / "keys.json"
    archive = DATA / "webhooks" / "sandbox-history.jsonl.gz"
    print("convo-analytics demo: starting the sandbox service (Ctrl-C stops it)")
    print(f"  workspace keys and the control API's admin token: {keys}")
    print(f"  the history's webhook deliveries, as a receiver archives them: {archive}")
    print("  then try the curl lines below, or open the OpenAPI docs in a browser.")
    sys.stdout.flush()
    command = [
        sys.executable, "-m", "convo_analytics.cli", "sandbox", "serve",
        "--port", str(args.port),
        "--conversations", str(args.conversations),
        "--days", str(args.days),
        "--seed", str(args.seed),
        "--key-file", str(keys),
        "--webhook-archive", str(archive),
    ]  # fmt: skip
    os.execv(sys.executable, command)
    return 0  # not reached


if __name__ == "__main__":
    raise SystemExit(main())
