"""The OAuth client against hostile input (issue 24), over real HTTP: metadata naming
endpoints on other origins or on plain http, a token store edited to send the refresh (and
the client secret) elsewhere, a malformed token store. Each is one line, exit 2, and nothing
reaches the other origin (a decoy server on a second loopback port records what would)."""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import httpx
import pytest

from conftest import RunningSandbox
from convo_analytics.auth import OAuthCredentials, TokenStore, discover, login, logout
from convo_analytics.cli import main
from convo_analytics.config import OAuthAuth, Secret, WorkspaceConfig
from convo_analytics.errors import UserError
from convo_analytics.sandbox._oauth import OAuthSettings
from oauth_support import Decoy, decoy_server
from workspace_support import convo

SCOPES = ("conversations:read", "leads:read", "analytics:read")


def follow(url: str) -> None:
    """A browser: the consent redirect (auto-approved) to the loopback listener."""
    consent = httpx.get(url, follow_redirects=False, timeout=10)
    if consent.status_code == 302:
        httpx.get(consent.headers["location"], timeout=10)


@pytest.fixture
def sandbox(start_sandbox: Any) -> RunningSandbox:
    running: RunningSandbox = start_sandbox(
        conversations=20, oauth=OAuthSettings(auto_approve=True, access_token_seconds=600)
    )
    return running


@pytest.fixture
def foreign() -> Iterator[Decoy]:
    with decoy_server() as decoy:
        yield decoy


@pytest.fixture
def issuer() -> Iterator[Decoy]:
    with decoy_server() as decoy:
        yield decoy


def client_secret(sandbox: RunningSandbox) -> str:
    secret = sandbox.sandbox.oauth.store.clients["svc-acme"].client_secret
    assert secret
    return secret


def confidential(sandbox: RunningSandbox, **changes: Any) -> WorkspaceConfig:
    """acme through its confidential client: a secret that must go to the issuer only."""
    ws = WorkspaceConfig(
        name="acme", base_url=sandbox.url, rate_limit="none",
        auth=OAuthAuth(type="oauth", client_id="svc-acme", scopes=SCOPES),
        client_secret=Secret(client_secret(sandbox)),
    )  # fmt: skip
    return replace(ws, **changes)


def metadata(sandbox: RunningSandbox, **override: str) -> dict[str, Any]:
    return {
        "authorization_endpoint": f"{sandbox.url}/oauth/authorize",
        "token_endpoint": f"{sandbox.url}/oauth/token",
        "revocation_endpoint": f"{sandbox.url}/oauth/revoke",
        **override,
    }


def no_browser(url: str) -> None:
    raise AssertionError(f"the authorization URL was opened: {url}")


# -- discovery -----------------------------------------------------------------------------


def test_an_issuer_whose_endpoints_are_allowed_logs_in(
    sandbox: RunningSandbox, issuer: Decoy, tmp_path: Path
) -> None:
    """The control: the metadata served from one origin names the service's, which
    extract.allowed_origins lists; the login goes through."""
    issuer.metadata = metadata(sandbox)
    ws = confidential(sandbox, auth=OAuthAuth(type="oauth", client_id="svc-acme",
                                              scopes=SCOPES, issuer=issuer.url),
                      allowed_origins=(sandbox.url,))  # fmt: skip
    store = TokenStore(tmp_path / "tokens.json")
    login(ws, store, visit=follow, say=lambda _: None, timeout=30)
    assert store.get("acme") is not None
    assert [h.method for h in issuer.hits] == ["GET"], "only the metadata was read there"


@pytest.mark.parametrize(
    ("key", "where"),
    [("token_endpoint", "foreign"), ("authorization_endpoint", "foreign"),
     ("revocation_endpoint", "foreign"), ("token_endpoint", "plain"),
     ("token_endpoint", "backslash")],
)  # fmt: skip
def test_metadata_naming_another_origin_is_refused_before_anything_is_sent(
    sandbox: RunningSandbox, issuer: Decoy, foreign: Decoy, tmp_path: Path,
    key: str, where: str,
) -> None:  # fmt: skip
    path = key.removesuffix("_endpoint")
    bad = {
        "foreign": f"{foreign.url}/oauth/{path}",
        "plain": f"http://auth.example.com/oauth/{path}",
        "backslash": f"{sandbox.url}\\@{foreign.url.removeprefix('http://')}/oauth/{path}",
    }[where]
    issuer.metadata = metadata(sandbox, **{key: bad})
    ws = confidential(sandbox, auth=OAuthAuth(type="oauth", client_id="svc-acme",
                                              scopes=SCOPES, issuer=issuer.url),
                      allowed_origins=(sandbox.url,))  # fmt: skip
    store = TokenStore(tmp_path / "tokens.json")
    visited: list[str] = []
    with pytest.raises(UserError) as refused:
        login(ws, store, visit=lambda url: (visited.append(url), follow(url))[1],
              say=lambda _: None, timeout=5)  # fmt: skip
    message = str(refused.value)
    assert key in message and "nothing was sent" in message, message
    assert visited == [], "no authorization URL was opened"
    assert foreign.hits == [], "nothing reached the other origin"
    assert store.get("acme") is None
    assert client_secret(sandbox) not in message


def test_client_credentials_are_sent_only_to_the_issuer(
    sandbox: RunningSandbox, issuer: Decoy, foreign: Decoy
) -> None:
    """A server-to-server client sends its secret with every token request: metadata naming
    a token endpoint elsewhere ends the attempt before the secret leaves."""
    issuer.metadata = {"authorization_endpoint": f"{issuer.url}/authorize",
                       "token_endpoint": f"{foreign.url}/oauth/token"}  # fmt: skip
    auth = OAuthAuth(type="oauth", client_id="svc-acme", scopes=SCOPES,
                     grant="client_credentials", issuer=issuer.url)  # fmt: skip
    ws = confidential(sandbox, auth=auth)
    creds = OAuthCredentials(ws, TokenStore(Path("unused-tokens.json")))
    with pytest.raises(UserError, match="token_endpoint") as refused:
        asyncio.run(creds.authorization())
    assert "extract.allowed_origins" in str(refused.value)
    assert foreign.hits == [] and not foreign.seen(client_secret(sandbox))
    assert creds.refreshes == 0


def test_discovery_from_a_plain_http_base_url_afar_is_refused_unsent() -> None:
    ws = WorkspaceConfig(name="acme", base_url="http://api.example.com", rate_limit="none",
                         auth=OAuthAuth(type="oauth", client_id="c"))  # fmt: skip
    with pytest.raises(UserError, match="plain http") as refused:
        discover(ws)
    assert "base_url" in str(refused.value) and "nothing was sent" in str(refused.value)


def test_an_issuer_on_plain_http_afar_is_refused_as_the_config_is_read(tmp_path: Path) -> None:
    for issuer_url, says in (("http://auth.example.com", "plain http"),
                             ("https://auth.example.com/?tenant=x", "no query")):  # fmt: skip
        (tmp_path / "convo.toml").write_text(
            '[[workspaces]]\nname = "acme"\nbase_url = "https://api.example.com"\n'
            f'auth = {{ type = "oauth", client_id = "c", issuer = "{issuer_url}" }}\n'
        )
        done = convo(tmp_path, "auth", "login", "--workspace", "acme", "--no-browser")
        lines = done.stderr.strip().splitlines()
        assert done.returncode == 2 and len(lines) == 1, done.stderr
        assert "auth.oauth.issuer" in lines[0] and says in lines[0], lines[0]
        assert "convo.toml" in lines[0] and "Traceback" not in done.stderr
        assert done.stdout == ""


# -- the token store's endpoints ---------------------------------------------------------


def _logged_in(sandbox: RunningSandbox, tmp_path: Path) -> tuple[WorkspaceConfig, TokenStore]:
    ws = confidential(sandbox)
    store = TokenStore(tmp_path / "tokens.json")
    login(ws, store, visit=follow, say=lambda _: None, timeout=30)
    return ws, store


def _edit(store: TokenStore, **fields: object) -> None:
    data = json.loads(store.path.read_text())
    data["acme"].update(fields)
    store.path.write_text(json.dumps(data))


@pytest.mark.parametrize("where", ["foreign", "plain"])
def test_a_refresh_goes_only_to_the_issuer_whatever_the_token_store_says(
    sandbox: RunningSandbox, foreign: Decoy, tmp_path: Path, where: str
) -> None:
    ws, store = _logged_in(sandbox, tmp_path)
    elsewhere = {"foreign": f"{foreign.url}/oauth/token",
                 "plain": "http://auth.example.com/oauth/token"}[where]  # fmt: skip
    _edit(store, token_endpoint=elsewhere, expires_at=0)
    before = store.path.read_bytes()
    creds = OAuthCredentials(ws, store)
    with pytest.raises(UserError) as refused:
        asyncio.run(creds.authorization())
    message = str(refused.value)
    assert "token_endpoint" in message and str(store.path) in message, message
    assert "convo auth login --workspace acme" in message
    assert foreign.hits == [] and not foreign.seen(client_secret(sandbox))
    assert store.path.read_bytes() == before and creds.refreshes == 0


def test_extract_refuses_a_token_store_pointing_elsewhere_with_one_line(
    sandbox: RunningSandbox, foreign: Decoy, tmp_path: Path
) -> None:
    _, store = _logged_in(sandbox, tmp_path)
    _edit(store, token_endpoint=f"{foreign.url}/oauth/token", expires_at=0)
    (tmp_path / "convo.toml").write_text(
        f'[[workspaces]]\nname = "acme"\nbase_url = "{sandbox.url}"\n'
        'auth = { type = "oauth", client_id = "svc-acme", client_secret_env = "ACME_SECRET" }\n'
    )
    secret = client_secret(sandbox)
    env = {"CONVO_TOKEN_STORE": str(store.path), "CONVO_DB": str(tmp_path / "w.duckdb")}
    done = convo(tmp_path, "extract", "--workspace", "acme", ACME_SECRET=secret, **env)
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and len(lines) == 1, done.stderr
    assert "token_endpoint" in lines[0] and foreign.url.removeprefix("http://") in lines[0]
    assert "extract.allowed_origins" in lines[0]
    assert secret not in done.stderr + done.stdout and "Traceback" not in done.stderr
    assert foreign.hits == []


def test_logout_sends_the_refresh_token_only_to_the_issuer(
    sandbox: RunningSandbox, foreign: Decoy, tmp_path: Path
) -> None:
    ws, store = _logged_in(sandbox, tmp_path)
    refresh = store.get("acme")["refresh_token"]  # type: ignore[index]
    _edit(store, revocation_endpoint=f"{foreign.url}/oauth/revoke")
    with pytest.raises(UserError, match="revocation_endpoint") as refused:
        logout(ws, store)
    assert "nothing was sent" in str(refused.value)
    assert foreign.hits == [] and not foreign.seen(refresh)
    assert store.get("acme") is not None, "the grant is kept: it was not revoked"


# -- a malformed token store ----------------------------------------------------------------

GOOD = {"access_token": "a", "refresh_token": "r", "token_endpoint": "http://127.0.0.1:9/t",
        "expires_at": 1.0}  # fmt: skip
#: What a token store can be instead of a JSON object of tokens, and what the line says.
MALFORMED: dict[str, tuple[object, str]] = {
    "bad-json": ("{not json", "is not valid JSON"),
    "a-list": ([1], "is not a JSON object"),
    "entry-a-list": ({"acme": [1]}, "malformed entry for workspace 'acme'"),
    "expires-soon": ({"acme": {**GOOD, "expires_at": "soon"}}, "expires_at is not a number"),
    "no-endpoint": ({"acme": {"access_token": "a"}}, "no token_endpoint"),
    "a-folder": (None, "is a folder"),
    "root": ("/", "a folder, not a file"),
    "under-a-file": ("under-a-file", "not a folder"),
}
#: Malformed the whole file (login refuses it too); else one entry, which a login replaces.
WHOLE_FILE = ("bad-json", "a-list", "a-folder", "root", "under-a-file")
COMMANDS = {
    "status": ("auth", "status"),
    "login": ("auth", "login", "--workspace", "acme", "--no-browser"),
    "logout": ("auth", "logout", "--workspace", "acme"),
    "extract": ("extract", "--workspace", "acme"),
}


def _store_path(tmp_path: Path, kind: str) -> Path:
    content, _ = MALFORMED[kind]
    path = tmp_path / "tokens.json"
    if kind == "a-folder":
        path.mkdir()
    elif kind == "root":
        return Path("/")
    elif kind == "under-a-file":
        (tmp_path / "file").write_text("x")
        return tmp_path / "file" / "tokens.json"
    else:
        path.write_text(content if isinstance(content, str) else json.dumps(content))
    return path


#: Every command with every malformed store, but a login with a malformed entry of its own
#: workspace: it replaces that entry (tested below).
_MALFORMED_CASES = [
    (kind, command) for command in COMMANDS for kind in MALFORMED
    if command != "login" or kind in WHOLE_FILE
]  # fmt: skip


@pytest.mark.parametrize(("kind", "command"), _MALFORMED_CASES)
def test_a_malformed_token_store_is_one_line_for_every_command(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
    kind: str, command: str,
) -> None:  # fmt: skip
    store = _store_path(tmp_path, kind)
    config = tmp_path / "convo.toml"
    config.write_text('[[workspaces]]\nname = "acme"\nbase_url = "http://127.0.0.1:9"\n'
                      'auth = { type = "oauth", client_id = "c" }\n')  # fmt: skip
    for name in [n for n in os.environ if n.startswith("CONVO_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("CONVO_CONFIG", str(config))
    monkeypatch.setenv("CONVO_TOKEN_STORE", str(store))
    monkeypatch.setenv("CONVO_DB", str(tmp_path / "w.duckdb"))
    monkeypatch.chdir(tmp_path)
    code = main(list(COMMANDS[command]))
    out, err = capsys.readouterr()
    lines = err.strip().splitlines()
    assert code == 2 and out == "" and len(lines) == 1, err
    assert MALFORMED[kind][1] in lines[0], lines[0]
    assert "auth.token_store" in lines[0] and "$CONVO_TOKEN_STORE" in lines[0], lines[0]
    fixes = ("convo auth login", "delete", "point auth.token_store", "point it at a file")
    assert any(fix in lines[0] for fix in fixes), lines[0]
    assert not (tmp_path / "w.duckdb").exists()


def test_a_malformed_entry_is_refused_until_a_login_replaces_it(
    sandbox: RunningSandbox, tmp_path: Path
) -> None:
    """The fix the line names works: a login replaces its workspace's entry (and keeps the
    others as they are); until then, a run refuses it rather than guessing."""
    store = TokenStore(tmp_path / "tokens.json")
    store.path.write_text(json.dumps({"acme": {**GOOD, "expires_at": "soon"},
                                      "globex": {"not": "a token"}}))  # fmt: skip
    ws = confidential(sandbox)
    with pytest.raises(UserError, match="convo auth login --workspace acme"):
        OAuthCredentials(ws, store).check()
    login(ws, store, visit=follow, say=lambda _: None, timeout=30)
    OAuthCredentials(ws, store).check()
    assert asyncio.run(OAuthCredentials(ws, store).authorization()).startswith("Bearer ")
    assert json.loads(store.path.read_text())["globex"] == {"not": "a token"}
