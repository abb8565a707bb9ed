"""convo-analytics as an OAuth 2.0 client of the sandbox, over real HTTP (issue 17): login
with PKCE through a loopback redirect, extraction whose expiring token refreshes itself
(once per expiry, across processes), reuse and revocation ending in one clear line."""

from __future__ import annotations

import asyncio
import json
import stat
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import httpx
import pytest

from conftest import RunningSandbox
from convo_analytics.auth import AuthExpired, OAuthCredentials, TokenStore, login, logout
from convo_analytics.config import OAuthAuth, WorkspaceConfig
from convo_analytics.extract import ExtractConfig, run_extract
from convo_analytics.sandbox._oauth import OAuthSettings
from extract_support import assert_complete


def follow(url: str) -> None:
    """What a browser does with the authorization URL: the consent redirect to loopback."""
    consent = httpx.get(url, follow_redirects=False, timeout=10)
    assert consent.status_code == 302, consent.text
    httpx.get(consent.headers["location"], timeout=10)


def workspace(url: str, name: str = "acme") -> WorkspaceConfig:
    return WorkspaceConfig(
        name=name, base_url=url, rate_limit="none",
        auth=OAuthAuth(type="oauth", client_id="convo-analytics",
                       scopes=("conversations:read", "leads:read", "analytics:read")),
    )  # fmt: skip


@pytest.fixture
def oauth_sandbox(start_sandbox: Any) -> RunningSandbox:
    running: RunningSandbox = start_sandbox(
        conversations=120, oauth=OAuthSettings(auto_approve=True, access_token_seconds=1)
    )
    return running


def test_login_stores_a_grant_the_owner_alone_can_read(
    oauth_sandbox: RunningSandbox, tmp_path: Path
) -> None:
    store = TokenStore(tmp_path / "tokens.json")
    shown = login(workspace(oauth_sandbox.url), store, visit=follow, say=lambda _: None)
    assert shown["scope"] == "conversations:read leads:read analytics:read"
    token = store.get("acme")
    assert token and token["refresh_token"] and token["access_token"]
    assert stat.S_IMODE((tmp_path / "tokens.json").stat().st_mode) == 0o600
    assert token["access_token"] not in json.dumps(shown)


def _extract(url: str, creds: OAuthCredentials, db: Path) -> Any:
    config = ExtractConfig(
        base_url=url, api_key="", db_path=db, rate_limit="none", credentials=creds,
        page_size=20, detail_concurrency=4,
    )  # fmt: skip
    return asyncio.run(run_extract(config))


def test_an_expiring_token_refreshes_and_the_run_goes_on(
    oauth_sandbox: RunningSandbox, tmp_path: Path
) -> None:
    store = TokenStore(tmp_path / "tokens.json")
    ws = workspace(oauth_sandbox.url)
    login(ws, store, visit=follow, say=lambda _: None)
    creds = OAuthCredentials(ws, store)
    result = _extract(oauth_sandbox.url, creds, tmp_path / "w.duckdb")
    assert result.ok, result.to_json()
    assert creds.refreshes >= 1, "a one-second token outlived by the run was refreshed"
    assert_complete(tmp_path / "w.duckdb", oauth_sandbox.sandbox.workspaces["ws_acme"])
    rows = json.dumps(result.to_json())
    assert store.get("acme")["access_token"] not in rows  # type: ignore[index]


def test_two_processes_with_one_grant_both_succeed(
    oauth_sandbox: RunningSandbox, tmp_path: Path
) -> None:
    store_path = tmp_path / "tokens.json"
    login(workspace(oauth_sandbox.url), TokenStore(store_path), visit=follow, say=lambda _: None)
    script = textwrap.dedent(f"""
        import asyncio, sys
        from pathlib import Path
        from convo_analytics.auth import OAuthCredentials, TokenStore
        from convo_analytics.config import OAuthAuth, WorkspaceConfig
        from convo_analytics.extract import ExtractConfig, run_extract
        ws = WorkspaceConfig(name="acme", base_url={oauth_sandbox.url!r}, rate_limit="none",
                             auth=OAuthAuth(type="oauth", client_id="convo-analytics"))
        creds = OAuthCredentials(ws, TokenStore(Path({str(store_path)!r})))
        config = ExtractConfig(base_url={oauth_sandbox.url!r}, api_key="",
                               db_path=Path(sys.argv[1]), rate_limit="none", credentials=creds,
                               page_size=10, detail_concurrency=2)
        result = asyncio.run(run_extract(config))
        print(result.status, creds.refreshes)
    """)
    procs = [
        subprocess.Popen([sys.executable, "-c", script, str(tmp_path / f"w{i}.duckdb")],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for i in range(2)
    ]  # fmt: skip
    outputs = [p.communicate(timeout=240) for p in procs]
    for proc, (out, err) in zip(procs, outputs, strict=True):
        assert proc.returncode == 0 and out.split()[0] == "ok", err[-2000:]
    store = TokenStore(store_path)
    creds = OAuthCredentials(workspace(oauth_sandbox.url), store)
    header = asyncio.run(creds.authorization(stale="expired"))
    answer = httpx.get(f"{oauth_sandbox.url}/v1/leads", headers={"Authorization": header})
    assert answer.status_code == 200, "the store ends with a grant that still works"


def test_a_reused_refresh_token_ends_the_grant_with_a_login_hint(
    oauth_sandbox: RunningSandbox, tmp_path: Path
) -> None:
    store_path = tmp_path / "tokens.json"
    store = TokenStore(store_path)
    ws = workspace(oauth_sandbox.url)
    login(ws, store, visit=follow, say=lambda _: None)
    before = store_path.read_bytes()
    refused = f"Bearer {store.get('acme')['access_token']}"  # type: ignore[index]
    asyncio.run(OAuthCredentials(ws, store).authorization(stale=refused))  # rotates
    assert store.get("acme")["refresh_token"] not in before.decode()  # type: ignore[index]
    store_path.write_bytes(before)  # a stale copy: its refresh token was spent
    with pytest.raises(AuthExpired, match="convo auth login --workspace acme"):
        asyncio.run(OAuthCredentials(ws, store).authorization(stale=refused))
    result = _extract(oauth_sandbox.url, OAuthCredentials(ws, store), tmp_path / "w.duckdb")
    assert not result.ok
    errors = {s.error for s in result.streams.values()}
    assert all("convo auth login --workspace acme" in (e or "") for e in errors), errors


def test_logout_revokes_at_the_service(oauth_sandbox: RunningSandbox, tmp_path: Path) -> None:
    store = TokenStore(tmp_path / "tokens.json")
    ws = workspace(oauth_sandbox.url)
    login(ws, store, visit=follow, say=lambda _: None)
    refresh = store.get("acme")["refresh_token"]  # type: ignore[index]
    assert logout(ws, store) and store.get("acme") is None
    form = {"grant_type": "refresh_token", "refresh_token": refresh, "client_id": "convo-analytics"}
    answer = httpx.post(f"{oauth_sandbox.url}/oauth/token", data=form)
    assert answer.status_code == 400 and answer.json()["error"] == "invalid_grant"
