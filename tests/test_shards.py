"""A workspace's share of the nightly run (pipeline/_shards.py): the settings narrowed to it,
and which workspaces an orchestrator may run (the partitions of pipelines/dagster/)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from convo_analytics.auth import TokenStore
from convo_analytics.config import ConfigError, load_settings, load_workspaces
from convo_analytics.pipeline import shard_path, shard_settings, shard_workspaces, warehouse_lock


def _config(tmp_path: Path) -> Path:
    (tmp_path / "a.key").write_text("sk_test_alpha_0123456789")
    (tmp_path / "hooks").write_text("whsec_alpha_one")
    path = tmp_path / "convo.toml"
    path.write_text(f"""
[warehouse]
path = "{tmp_path}/data/warehouse.duckdb"

[auth]
token_store = "{tmp_path}/data/tokens.json"

[[workspaces]]
name = "alpha"
base_url = "http://127.0.0.1:9"
auth = {{ type = "api_key", key_file = "a.key" }}
webhook_secrets_file = "hooks"

[[workspaces]]
name = "beta"
base_url = "http://127.0.0.1:9"
auth = {{ type = "oauth", client_id = "convo-analytics" }}

[[workspaces]]
name = "gamma"
base_url = "http://127.0.0.1:9"
auth = {{ type = "oauth", client_id = "svc", client_secret_file = "a.key", grant = "client_credentials" }}
""")  # noqa: E501
    return path


def test_settings_narrowed_to_one_workspace(tmp_path: Path) -> None:
    settings = load_settings(_config(tmp_path), {}, {"CONVO_WEBHOOK_SECRET": "whsec_flat_secret"})
    narrowed = shard_settings(settings, "alpha")
    assert [w.name for w in load_workspaces(narrowed)] == ["alpha"]
    assert narrowed.require_path("warehouse.path") == tmp_path / "data/shards/alpha.duckdb"
    assert narrowed.require_path("warehouse.path") == shard_path(settings, "alpha")
    shard_lock = Path(os.path.realpath(tmp_path / "data/shards/alpha.duckdb.lock"))
    assert warehouse_lock(narrowed).path == shard_lock, "the shard's own, beside it"
    installation = load_settings(_config(tmp_path), {}, {"CONVO_RUN_LOCK_FILE": "/x/run.lock"})
    assert warehouse_lock(installation).path == Path("/x/run.lock")
    assert warehouse_lock(shard_settings(installation, "alpha")).path == shard_lock
    assert settings.get_secret("webhooks.secret") is not None
    assert narrowed.get_secret("webhooks.secret") is None, "the flat secret is the whole site's"
    assert [s.reveal() for s in load_workspaces(narrowed)[0].webhook_secrets] == ["whsec_alpha_one"]
    assert settings.require_path("warehouse.path") == tmp_path / "data/warehouse.duckdb"
    with pytest.raises(ConfigError, match="no workspace named 'delta'"):
        shard_settings(settings, "delta")


def test_runnable_workspaces_follow_the_token_store(tmp_path: Path) -> None:
    settings = load_settings(_config(tmp_path), {}, {"CONVO_WEBHOOK_SECRET": "whsec_flat_secret"})
    found = shard_workspaces(settings)
    assert found.runnable == ("alpha", "gamma"), "a key, a client-credentials client"
    assert found.awaiting_login == ("beta",)
    store = TokenStore(tmp_path / "data/tokens.json")
    with store.locked():
        store.put("beta", {"access_token": "at", "refresh_token": "rt", "expires_at": 0})
        store.put("omega", {"access_token": "at2", "expires_at": 0})
    found = shard_workspaces(settings)
    assert found.runnable == ("alpha", "beta", "gamma")
    assert found.awaiting_login == ()
    assert found.unconfigured_grants == ("omega",)
