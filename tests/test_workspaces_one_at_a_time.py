"""A command about one workspace needs only that workspace's settings (issue 25).

Two workspaces of one config on one sandbox: brand-a reads with an API key from
``$BRAND_A_KEY`` (with webhook secrets from ``$BRAND_A_HOOKS``), brand-b with an OAuth
login (webhook secrets in a file). With neither of brand-a's variables set, `convo auth
login/status/logout --workspace brand-b`, `convo extract --workspace brand-b` and
`convo webhooks ingest --workspace brand-b` run as real processes, the login through
the sandbox's OAuth server and a "browser" that opens the URL it is given; a command
that does need brand-a's key says which variable to set (decision D-WORKSPACE-SECRETS).
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from conftest import RunningSandbox, make_settings
from convo_analytics._serving import ServerThread
from convo_analytics.sandbox import Sandbox, create_app, write_history_archive
from convo_analytics.sandbox._oauth import OAuthSettings
from extract_support import warehouse_rows
from workspace_support import convo

A_KEY = "sk_test_brand_a_0000001"
B_KEY = "sk_test_brand_b_0000002"
B_HOOKS = "whsec_brand_b_secret_0001"
PER_WORKSPACE = "SELECT workspace_id, count(*) FROM conversations GROUP BY 1 ORDER BY 1"

CONFIG = """
[warehouse]
path = "warehouse.duckdb"

[auth]
token_store = "tokens.json"

[[workspaces]]
name = "brand-a"
base_url = "{url}"
auth = {{ type = "api_key", key_env = "BRAND_A_KEY" }}
webhook_secrets_env = "BRAND_A_HOOKS"
rate_limit = "none"

[[workspaces]]
name = "brand-b"
base_url = "{url}"
auth = {{ type = "oauth", client_id = "convo-analytics" }}
webhook_secrets_file = "b.hooks"
rate_limit = "none"
"""


def browser(folder: Path) -> dict[str, str]:
    """``BROWSER`` for `convo auth login`: a program that opens the URL it is given and
    follows its redirects (the sandbox approves at once, then the loopback callback)."""
    program = folder / "browser"
    program.write_text(
        f"#!{sys.executable}\nimport sys, httpx\n"
        "httpx.get(sys.argv[1], follow_redirects=True, timeout=30)\n"
    )
    program.chmod(0o755)
    return {"BROWSER": str(program)}


@pytest.fixture
def two(tmp_path: Path) -> Iterator[dict[str, Any]]:
    settings = make_settings(
        conversations=30, workspaces=[("brand-a", A_KEY), ("brand-b", B_KEY)],
        oauth=OAuthSettings(auto_approve=True),
    )  # fmt: skip
    sandbox = Sandbox(settings)
    with ServerThread(create_app(sandbox)) as server:
        (tmp_path / "convo.toml").write_text(CONFIG.format(url=server.url))
        (tmp_path / "b.hooks").write_text(B_HOOKS + "\n")
        yield {"dir": tmp_path, "sandbox": RunningSandbox(sandbox, server)}


def test_brand_b_logs_in_extracts_and_ingests_without_brand_as_settings(
    two: dict[str, Any],
) -> None:
    folder: Path = two["dir"]
    login = convo(folder, "auth", "login", "--workspace", "brand-b", **browser(folder))
    assert login.returncode == 0, login.stderr
    assert "logged in to 'brand-b'" in login.stderr

    status = convo(folder, "auth", "status", "--json")
    assert status.returncode == 0, status.stderr
    rows = {r["workspace"]: r for r in orjson.loads(status.stdout)["workspaces"]}
    assert rows["brand-b"]["ready"] is True and rows["brand-b"]["auth"].startswith("oauth")
    assert rows["brand-a"]["ready"] is False
    assert "BRAND_A_KEY is not set" in rows["brand-a"]["problem"], "says what to set"
    only_b = convo(folder, "auth", "status", "--workspace", "brand-b")
    assert only_b.returncode == 0 and only_b.stdout.startswith("brand-b: "), only_b.stdout
    assert "brand-a" not in only_b.stdout

    extract = convo(folder, "extract", "--workspace", "brand-b", "--json")
    assert extract.returncode == 0, extract.stderr
    assert orjson.loads(extract.stdout)["status"] == "ok"
    loaded = warehouse_rows(folder / "warehouse.duckdb", PER_WORKSPACE)
    assert loaded == [("ws_brand-b", 30)]

    hooks = folder / "b-history.jsonl"
    sandbox: Sandbox = two["sandbox"].sandbox
    write_history_archive(hooks, [sandbox.workspaces["ws_brand-b"]], B_HOOKS, seed=1)
    ingest = convo(folder, "webhooks", "ingest", str(hooks), "--workspace", "brand-b", "--json")
    assert ingest.returncode == 0, ingest.stderr
    assert orjson.loads(ingest.stdout)["loaded"] > 0

    logout = convo(folder, "auth", "logout", "--workspace", "brand-b")
    assert logout.returncode == 0, logout.stderr


def test_a_command_that_needs_the_missing_key_names_it(two: dict[str, Any]) -> None:
    """Every workspace at once needs brand-a's key: one line naming the variable, exit 2,
    before any request; with it set, both load."""
    folder: Path = two["dir"]
    assert (
        convo(folder, "auth", "login", "--workspace", "brand-b", **browser(folder)).returncode == 0
    )
    every = convo(folder, "extract", "--json")
    assert every.returncode == 2
    assert every.stderr.count("\n") == 1 and "BRAND_A_KEY is not set" in every.stderr
    assert not (folder / "warehouse.duckdb").exists(), "refused before anything was written"
    both = convo(folder, "extract", "--json", BRAND_A_KEY=A_KEY)
    assert both.returncode == 0, both.stderr
    loaded = warehouse_rows(folder / "warehouse.duckdb", PER_WORKSPACE)
    assert loaded == [("ws_brand-a", 30), ("ws_brand-b", 30)]
    assert A_KEY not in both.stderr + both.stdout
