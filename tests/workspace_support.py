"""Three sandbox workspaces configured in one convo.toml, and `convo` as a real process.

acme reads by API key, globex by an OAuth login (authorization code with
PKCE), initech by the client credentials of its confidential client.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx

from conftest import ACME_KEY, GLOBEX_KEY, RunningSandbox, make_settings
from convo_analytics._serving import ServerThread
from convo_analytics.auth import TokenStore, login
from convo_analytics.config import OAuthAuth, WorkspaceConfig
from convo_analytics.sandbox import Sandbox, create_app
from convo_analytics.sandbox._oauth import OAuthSettings

INITECH_KEY = "sk_test_initech_55555555"
#: Each workspace's own key: the service's summary of it is read with these.
KEYS = {"acme": ACME_KEY, "globex": GLOBEX_KEY, "initech": INITECH_KEY}


def convo(cwd: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "convo_analytics.cli", *args],
        cwd=cwd, env={"PATH": "/usr/bin:/bin", "HOME": str(cwd), **env},
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip


def _follow(url: str) -> None:
    consent = httpx.get(url, follow_redirects=False, timeout=10)
    httpx.get(consent.headers["location"], timeout=10)


def configure_three(running: RunningSandbox, folder: Path) -> dict[str, Any]:
    """Log globex in, write initech's client secret and convo.toml; acme's serve tokens are
    named (ACME_SERVE_TOKENS) but not set, as a nightly run's environment has them."""
    store = folder / "tokens.json"
    globex = WorkspaceConfig(
        name="globex", base_url=running.url, rate_limit="none",
        auth=OAuthAuth(type="oauth", client_id="convo-analytics"),
    )  # fmt: skip
    login(globex, TokenStore(store), visit=_follow, say=lambda _: None)
    secret = running.sandbox.oauth.store.clients["svc-initech"].client_secret
    (folder / "initech.secret").write_text(str(secret))
    (folder / "convo.toml").write_text(f"""
[service]
rate_limit = "none"

[auth]
token_store = "{store}"

[[workspaces]]
name = "acme"
base_url = "{running.url}"
auth = {{ type = "api_key", key_env = "ACME_KEY" }}
serve_tokens_env = "ACME_SERVE_TOKENS"

[[workspaces]]
name = "globex"
base_url = "{running.url}"
auth = {{ type = "oauth", client_id = "convo-analytics" }}

[[workspaces]]
name = "initech"
base_url = "{running.url}"

[workspaces.auth]
type = "oauth"
client_id = "svc-initech"
client_secret_file = "initech.secret"
grant = "client_credentials"
""")
    return {"sandbox": running, "dir": folder, "env": {"ACME_KEY": ACME_KEY}}


def three_settings(**overrides: Any) -> dict[str, Any]:
    return {
        "conversations": 40,
        "workspaces": [(name, key) for name, key in KEYS.items()],
        "oauth": OAuthSettings(auto_approve=True, access_token_seconds=2),
        **overrides,
    }


@contextmanager
def three_workspaces(folder: Path, **overrides: Any) -> Iterator[dict[str, Any]]:
    """A served sandbox of the three workspaces and the folder configured to read them."""
    sandbox = Sandbox(make_settings(**three_settings(**overrides)))
    with ServerThread(create_app(sandbox)) as server:
        yield configure_three(RunningSandbox(sandbox, server), folder)
