"""convo-analytics as an OAuth 2.0 client: login with PKCE, refresh, revoke; and credentials.

The protocol steps (authorization URL with PKCE, code exchange, refresh,
client credentials, revocation) are Authlib's ``AsyncOAuth2Client`` (on
httpx2). What it lacks is ours (decision D-OAUTH): the loopback redirect
listener of the login, and :class:`OAuthCredentials`, which hands the
extractor's requests their bearer header and refreshes before expiry and on
a 401 exactly once per expiry, however many requests are under way, and
across processes (the token store's lock, then a re-read: a token another
process just rotated is used, not refreshed again). Every endpoint it sends
to is checked first (``_origins``, decision D-OAUTH-ORIGINS).
"""

from __future__ import annotations

import asyncio
import secrets
import threading
import time
import webbrowser
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, HTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx

from convo_analytics.auth._origins import (
    AuthRefused,
    check_endpoint,
    check_metadata,
    check_root,
)
from convo_analytics.auth._token_store import TokenStore, token_problem
from convo_analytics.config import OAuthAuth, WorkspaceConfig, masked_url
from convo_analytics.errors import UserError

__all__ = [
    "ApiKeyCredentials",
    "AuthExpired",
    "AuthRefused",
    "Credentials",
    "OAuthCredentials",
    "credentials_for",
    "discover",
    "login",
    "logout",
]

#: Refresh this long before the access token expires.
LEEWAY_SECONDS = 30.0


class AuthExpired(Exception):
    """The workspace's grant is gone (revoked, reused, expired): a new login is needed."""


class Credentials:
    """What a request to one workspace is authorized with (see ``extract._http``)."""

    #: Whether a 401 may be cured by refreshing (OAuth) rather than being final (a key).
    refreshable = False

    async def authorization(self, *, stale: str | None = None) -> str:
        """The ``Authorization`` header value; ``stale``: the one a 401 just refused."""
        raise NotImplementedError

    def secrets(self) -> list[str]:
        """Every secret text this provider holds, for the redactor."""
        raise NotImplementedError


class ApiKeyCredentials(Credentials):
    def __init__(self, key: str) -> None:
        self._key = key

    async def authorization(self, *, stale: str | None = None) -> str:
        return f"Bearer {self._key}"

    def secrets(self) -> list[str]:
        return [self._key]


def discover(workspace: WorkspaceConfig, timeout: float = 10.0) -> dict[str, Any]:
    """The authorization server's metadata (RFC 8414), from ``auth.issuer`` or the base URL;
    every endpoint in it checked (TLS, the issuer's origin) before any is used."""
    root = check_root(workspace)
    url = f"{root}/.well-known/oauth-authorization-server"
    shown = masked_url(url)
    try:
        response = httpx.get(url, timeout=timeout, follow_redirects=False)
    except httpx.HTTPError as exc:
        raise UserError(
            f"cannot read the OAuth metadata at {shown} ({type(exc).__name__})"
        ) from None
    if response.status_code != 200:
        raise UserError(
            f"{shown} answered {response.status_code}: the service publishes no OAuth metadata; "
            "set auth.issuer to the authorization server"
        )
    try:
        data = response.json()
    except ValueError:
        data = None
    if not isinstance(data, dict):
        raise UserError(
            f"the OAuth metadata at {shown} is not a JSON object; set auth.issuer to the "
            "authorization server"
        )
    check_metadata(workspace, data, shown)
    return data


def _client(auth: OAuthAuth, client_secret: str | None, **kwargs: Any) -> Any:
    from authlib.integrations.httpx_client import AsyncOAuth2Client

    method = "client_secret_basic" if client_secret else "none"
    return AsyncOAuth2Client(
        client_id=auth.client_id,
        client_secret=client_secret,
        token_endpoint_auth_method=method,
        revocation_endpoint_auth_method=method,
        scope=" ".join(auth.scopes),
        timeout=30.0,
        **kwargs,
    )


def _stamped(token: dict[str, Any], endpoint: str) -> dict[str, Any]:
    """The token as stored: with its absolute expiry; a malformed answer is refused."""
    out = dict(token)
    problem = token_problem({**out, "token_endpoint": endpoint})
    if problem is not None:
        raise UserError(
            f"the token endpoint answered a malformed token ({problem}); nothing was stored; "
            "check auth.issuer"
        )
    if "expires_at" not in out and out.get("expires_in") is not None:
        out["expires_at"] = time.time() + float(out["expires_in"])
    return out


def _refused(exc: Exception, what: str, fix: str) -> UserError:
    """One line for a refused or failed exchange: the OAuth error code or the transport's
    error type (never the request, which holds the code or token)."""
    code = getattr(exc, "error", None) or type(exc).__name__
    return UserError(f"{what} failed ({code}); {fix}")


class _Capture:
    """What the loopback redirect brought back (the code or the error, and the state)."""

    def __init__(self) -> None:
        self.result: dict[str, str] = {}
        self.done = threading.Event()


def _callback_handler(capture: _Capture) -> type[BaseHTTPRequestHandler]:
    class Callback(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            query = {k: v[0] for k, v in parse_qs(urlsplit(self.path).query).items()}
            capture.result = query
            capture.done.set()
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; charset=utf-8")
            self.end_headers()
            self.wfile.write(
                b"convo-analytics is signed in; you can close this window.\n"
                if "code" in query
                else b"The authorization was not granted; see the terminal.\n"
            )

        def log_message(self, format: str, *args: Any) -> None:
            """No request log: the query holds the authorization code."""

    return Callback


def login(
    workspace: WorkspaceConfig,
    store: TokenStore,
    *,
    open_browser: bool = True,
    say: Callable[[str], None] = print,
    timeout: float = 300.0,
    visit: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """The authorization code flow with PKCE and a loopback redirect; stores the token.

    ``visit`` (tests) is called with the authorization URL instead of a browser.
    Returns what to show of the token (scope, expiry; never the token).
    """
    from authlib.integrations.base_client import OAuthError

    auth = workspace.auth
    if not isinstance(auth, OAuthAuth):
        raise UserError(f"workspace {workspace.name!r} does not use OAuth; nothing to log in to")
    if auth.grant == "client_credentials":
        raise UserError(
            f"workspace {workspace.name!r} uses the client credentials grant: it needs no login"
        )
    store.check()  # before the flow: a grant that cannot be stored would be lost
    meta = discover(workspace)
    handler = _Capture()
    server = HTTPServer(("127.0.0.1", 0), _callback_handler(handler))
    redirect = f"http://127.0.0.1:{server.server_address[1]}/callback"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    secret = workspace.client_secret.reveal() if workspace.client_secret else None
    verifier = secrets.token_urlsafe(64)
    try:

        async def flow() -> dict[str, Any]:
            async with _client(auth, secret, redirect_uri=redirect,
                               code_challenge_method="S256") as client:  # fmt: skip
                url, state = client.create_authorization_url(
                    meta["authorization_endpoint"], code_verifier=verifier
                )
                extra = f"&workspace={workspace.workspace_id or workspace.name}"
                url += extra
                say(f"Open this URL to grant convo-analytics access to {workspace.name!r}:")
                say(url)
                if visit is not None:
                    visit(url)
                elif open_browser:
                    webbrowser.open(url)
                got = await asyncio.to_thread(handler.done.wait, timeout)
                if not got:
                    raise UserError("no answer on the loopback redirect in time; run it again")
                result = handler.result
                if result.get("state") != state:
                    raise UserError("the redirect's state does not match: refused (try again)")
                if "code" not in result:
                    raise UserError(
                        f"the authorization was not granted: {result.get('error', 'no code')}"
                    )
                token = await client.fetch_token(
                    meta["token_endpoint"], code=result["code"], code_verifier=verifier
                )
                return dict(token)

        try:
            token = asyncio.run(flow())
        except (OAuthError, httpx.HTTPError) as exc:
            again = f"run `convo auth login --workspace {workspace.name}` again"
            raise _refused(exc, "exchanging the authorization code", again) from None
    finally:
        server.shutdown()
        server.server_close()
    stored = _stamped({**token, "token_endpoint": meta["token_endpoint"],
                       "revocation_endpoint": meta.get("revocation_endpoint")},
                      meta["token_endpoint"])  # fmt: skip
    with store.locked():
        store.put(workspace.name, stored)
    return {"scope": stored.get("scope", ""), "expires_at": stored.get("expires_at")}


def logout(workspace: WorkspaceConfig, store: TokenStore) -> bool:
    """Revoke the stored grant at the service (RFC 7009) and forget it; False: none stored."""
    auth = workspace.auth

    def checked() -> tuple[dict[str, Any] | None, str | None]:
        token = store.get(workspace.name)
        endpoint = token.get("revocation_endpoint") if token else None
        if token is not None and endpoint and token.get("refresh_token"):
            check_endpoint(workspace, "revocation_endpoint", endpoint,
                           f"in the token store {store.path}",
                           "delete the workspace's entry from it (the grant then ends when it "
                           "expires)")  # fmt: skip
        return token, endpoint

    checked()  # a malformed store or a refused endpoint: refused before the lock is taken
    with store.locked():
        token, endpoint = checked()
        if token is None or not isinstance(auth, OAuthAuth):
            return False
        secret = workspace.client_secret.reveal() if workspace.client_secret else None
        if endpoint and token.get("refresh_token"):

            async def revoke() -> None:
                async with _client(auth, secret) as client:
                    await client.revoke_token(
                        endpoint, token=token["refresh_token"], token_type_hint="refresh_token"
                    )

            try:
                asyncio.run(revoke())
            except httpx.HTTPError as exc:
                raise _refused(exc, f"revoking the grant at {masked_url(endpoint)}",
                               "run it again when the service answers") from None  # fmt: skip
        store.put(workspace.name, None)
    return True


class OAuthCredentials(Credentials):
    """A workspace's OAuth grant: the current access token, refreshed when due, once."""

    refreshable = True

    def __init__(self, workspace: WorkspaceConfig, store: TokenStore) -> None:
        assert isinstance(workspace.auth, OAuthAuth)
        self.workspace = workspace
        self.auth = workspace.auth
        self.store = store
        self._token: dict[str, Any] | None = None
        self._lock = asyncio.Lock()
        self._secret = workspace.client_secret.reveal() if workspace.client_secret else None
        #: Refreshes (or client credentials fetches) this provider made; for tests and logs.
        self.refreshes = 0

    def secrets(self) -> list[str]:
        found = [self._secret] if self._secret else []
        if self._token:
            found += [str(self._token.get(k)) for k in ("access_token", "refresh_token")
                      if self._token.get(k)]  # fmt: skip
        return found

    def _expired(self, token: dict[str, Any]) -> bool:
        """Due for a refresh: within the leeway of its expiry (a quarter of a short life)."""
        leeway = min(LEEWAY_SECONDS, 0.25 * float(token.get("expires_in") or 0))
        return float(token.get("expires_at") or 0) - leeway <= time.time()

    def _header(self, token: dict[str, Any]) -> str:
        return f"Bearer {token['access_token']}"

    def check(self) -> None:
        """Before a run, raise a user error (exit 2) for what no retry cures: a token store
        that cannot be used, or a stored endpoint the client may not send to."""
        check_root(self.workspace)
        if self.auth.grant == "client_credentials":
            return
        self.store.check()
        token = self.store.get(self.workspace.name)
        if token is not None:
            self._check_stored(token)

    def _check_stored(self, token: dict[str, Any]) -> None:
        """The token store's endpoints, checked again before each use: the file may have been
        edited since the login checked them."""
        fix = f"run `convo auth login --workspace {self.workspace.name}` again"
        where = f"in the token store {self.store.path}"
        check_endpoint(self.workspace, "token_endpoint", token["token_endpoint"], where, fix)
        if token.get("revocation_endpoint"):
            check_endpoint(self.workspace, "revocation_endpoint", token["revocation_endpoint"],
                           where, fix)  # fmt: skip

    async def authorization(self, *, stale: str | None = None) -> str:
        """The current token's header; refreshed when it expires (or ``stale`` was refused)."""
        token = self._token
        if token is not None and not self._expired(token) and self._header(token) != stale:
            return self._header(token)
        async with self._lock:  # one refresh per expiry, however many requests wait
            token = self._token
            if token is not None and not self._expired(token) and self._header(token) != stale:
                return self._header(token)
            self._token = await asyncio.to_thread(self._current_or_refreshed, stale)
            return self._header(self._token)

    def _current_or_refreshed(self, stale: str | None) -> dict[str, Any]:
        """Under the store's lock: the stored token if still good (another process may have
        refreshed it), else a refreshed one, stored before anyone else can read the old."""
        if self.auth.grant == "client_credentials":
            return self._client_credentials()
        with self.store.locked():
            token = self.store.get(self.workspace.name)
            if token is None:
                raise AuthExpired(self._login_hint("no login is stored"))
            if not self._expired(token) and self._header(token) != stale:
                return token
            refreshed = asyncio.run(self._refresh(token))
            self.store.put(self.workspace.name, refreshed)
            self.refreshes += 1
            return refreshed

    async def _refresh(self, token: dict[str, Any]) -> dict[str, Any]:
        from authlib.integrations.base_client import OAuthError

        if not token.get("refresh_token"):
            raise AuthExpired(
                self._login_hint("the access token expired and there is no refresh token")
            )
        self._check_stored(token)
        try:
            async with _client(self.auth, self._secret) as client:
                fresh = await client.refresh_token(
                    token["token_endpoint"], refresh_token=token["refresh_token"]
                )
        except OAuthError as exc:
            raise AuthExpired(self._login_hint(f"the grant was refused ({exc.error})")) from None
        except httpx.HTTPError as exc:
            at = masked_url(token["token_endpoint"])
            raise _refused(
                exc, f"refreshing the access token at {at}", "run it again when the service answers"
            ) from None
        return _stamped({**dict(fresh), "token_endpoint": token["token_endpoint"],
                         "revocation_endpoint": token.get("revocation_endpoint")},
                        token["token_endpoint"])  # fmt: skip

    def _client_credentials(self) -> dict[str, Any]:
        from authlib.integrations.base_client import OAuthError

        meta = discover(self.workspace)

        async def fetch() -> dict[str, Any]:
            async with _client(self.auth, self._secret) as client:
                return dict(
                    await client.fetch_token(
                        meta["token_endpoint"], grant_type="client_credentials"
                    )
                )

        try:
            token = asyncio.run(fetch())
        except OAuthError as exc:
            raise AuthExpired(
                f"workspace {self.workspace.name!r}: the client credentials were refused "
                f"({exc.error}); check auth.client_id and its secret"
            ) from None
        except httpx.HTTPError as exc:
            raise _refused(exc, f"fetching a token at {masked_url(meta['token_endpoint'])}",
                           "run it again when the service answers") from None  # fmt: skip
        self.refreshes += 1
        return _stamped(token, meta["token_endpoint"])

    def _login_hint(self, why: str) -> str:
        return (
            f"workspace {self.workspace.name!r}: {why}; run `convo auth login --workspace "
            f"{self.workspace.name}`"
        )


def credentials_for(workspace: WorkspaceConfig, store: TokenStore) -> Credentials:
    """The provider of a workspace's requests: its API key, or its OAuth grant."""
    if workspace.uses_oauth:
        return OAuthCredentials(workspace, store)
    if workspace.api_key is None:
        raise UserError(
            f"workspace {workspace.name!r} has no credentials: set its auth (or CONVO_API_KEY)"
        )
    return ApiKeyCredentials(workspace.api_key.reveal())
