"""The sandbox as an OAuth 2.0 authorization server, on Authlib's framework-independent grants.

The interface says only that "multi-tenant marketplace integrations use
OAuth 2.0". The sandbox implements what such an integration meets
(decision D-OAUTH): registered clients (public and confidential), the
authorization code grant with PKCE (S256 only) and a consent step in which
a workspace admin grants one workspace, the client credentials grant for a
client bound to one workspace, scopes, short-lived access tokens, rotating
refresh tokens whose reuse revokes their whole family, an authorization
code whose second use revokes the tokens of its first (RFC 6749, 4.1.2), a
malformed redirect URI answered 400 ``invalid_request`` (never a 500),
revocation (RFC 7009) and the metadata document (RFC 8414). An access token then travels
like an API key and sees only its granted workspace. Authlib runs the
protocol; this module keeps its records in memory and adapts Starlette's
requests and responses.
"""

from __future__ import annotations

import html
import secrets
import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar
from urllib.parse import urlsplit

from authlib.oauth2 import AuthorizationServer, OAuth2Request
from authlib.oauth2.rfc6749 import (
    AuthorizationCodeMixin,
    ClientMixin,
    OAuth2Payload,
    TokenMixin,
    grants,
    list_to_scope,
    scope_to_list,
)
from authlib.oauth2.rfc7009 import RevocationEndpoint
from authlib.oauth2.rfc7636 import CodeChallenge
from starlette.responses import HTMLResponse, JSONResponse, Response

from convo_analytics._net import is_loopback_host

__all__ = [
    "ALL_SCOPES",
    "AccessGrant",
    "Incoming",
    "OAuthClient",
    "OAuthServer",
    "OAuthSettings",
    "invalid_request",
    "redirect_problem",
    "required_scope",
]

#: What a token may be granted; an API key holds all of them (decision D-OAUTH).
ALL_SCOPES = (
    "conversations:read", "conversations:write", "leads:read", "analytics:read",
    "webhooks:read", "webhooks:write", "knowledge:read", "knowledge:write",
)  # fmt: skip
_AUTH_METHODS = ("client_secret_basic", "client_secret_post", "none")
#: The first path segment after /v1 names the resource a scope guards.
_RESOURCE = {"knowledge-sources": "knowledge", "escalations": "conversations"}


def required_scope(method: str, path: str) -> str | None:
    """The scope an /v1 request needs: its resource, read for GET and HEAD, else write."""
    parts = path.strip("/").split("/")
    if len(parts) < 2 or parts[0] != "v1":
        return None
    resource = _RESOURCE.get(parts[1], parts[1])
    if resource == "analytics":
        return "analytics:read"
    return f"{resource}:{'read' if method in ('GET', 'HEAD') else 'write'}"


def redirect_problem(uri: str) -> str | None:
    """What makes a redirect URI unusable (None: nothing; whether the client registered it is
    asked separately). Such a URI is refused before Authlib sees it: parsers disagree on a
    backslash (``http://127.0.0.1\\@evil.example/`` is 127.0.0.1 to a browser, evil.example
    to urllib) and Authlib cannot even quote it in an error."""
    if any(c == "\\" or c.isspace() or ord(c) < 0x20 or ord(c) == 0x7F for c in uri):
        return "the redirect_uri holds a backslash, a space or a control character"
    try:
        parts = urlsplit(uri)
        port = parts.port
    except ValueError:
        return "the redirect_uri is not a well-formed URL"
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return "the redirect_uri is not an absolute http(s) URL"
    if "@" in parts.netloc:
        return "the redirect_uri carries user info"
    if "#" in uri:
        return "the redirect_uri has a fragment (RFC 6749, 3.1.2)"
    if port == 0:
        return "the redirect_uri has port 0"
    return None


def invalid_request(description: str) -> JSONResponse:
    """RFC 6749's error body (5.2; 4.1.2.1 for a redirect URI that cannot be redirected to)."""
    return JSONResponse(
        {"error": "invalid_request", "error_description": description},
        status_code=400,
        headers={"Cache-Control": "no-store"},
    )


@dataclass
class OAuthSettings:
    """How the sandbox's OAuth server behaves (see ``convo sandbox serve --help``)."""

    #: Approve every authorization request at once (tests, the demo): no consent page.
    auto_approve: bool = False
    access_token_seconds: int = 3600
    refresh_token_seconds: int = 30 * 86400
    code_seconds: int = 600


@dataclass
class OAuthClient(ClientMixin):  # type: ignore[misc]
    """A registered client: public (PKCE, no secret) or confidential (a secret)."""

    client_id: str
    client_secret: str | None
    redirect_uris: tuple[str, ...] = ()
    scope: str = " ".join(ALL_SCOPES)
    grant_types: tuple[str, ...] = ("authorization_code", "refresh_token")
    #: The workspace a client credentials grant reads (a confidential client only).
    workspace_id: str | None = None
    name: str = ""

    def get_client_id(self) -> str:
        return self.client_id

    def get_default_redirect_uri(self) -> str | None:
        return self.redirect_uris[0] if self.redirect_uris else None

    def get_allowed_scope(self, scope: str) -> str:
        if not scope:
            return ""
        allowed = set(scope_to_list(self.scope))
        return str(list_to_scope([s for s in scope_to_list(scope) if s in allowed]))

    def check_redirect_uri(self, redirect_uri: str) -> bool:
        """Exact, except that a loopback redirect may use any port (RFC 8252, 7.3)."""
        if redirect_uri in self.redirect_uris:
            return True
        given = urlsplit(redirect_uri)
        for registered in map(urlsplit, self.redirect_uris):
            if (
                given.scheme == registered.scheme == "http"
                and given.hostname == registered.hostname
                and is_loopback_host(given.hostname or "")
                and given.path == registered.path
                and not given.query
            ):
                return True
        return False

    def check_client_secret(self, client_secret: str) -> bool:
        return self.client_secret is not None and secrets.compare_digest(
            self.client_secret.encode(), client_secret.encode()
        )

    def check_endpoint_auth_method(self, method: str, endpoint: str) -> bool:
        if self.client_secret is None:
            return method == "none"
        return method in ("client_secret_basic", "client_secret_post")

    def check_response_type(self, response_type: str) -> bool:
        return response_type == "code" and "authorization_code" in self.grant_types

    def check_grant_type(self, grant_type: str) -> bool:
        if grant_type == "client_credentials":
            return self.client_secret is not None and self.workspace_id is not None
        return grant_type in self.grant_types


@dataclass
class AuthCode(AuthorizationCodeMixin):  # type: ignore[misc]
    code: str
    client_id: str
    redirect_uri: str
    scope: str
    workspace_id: str
    code_challenge: str | None
    code_challenge_method: str | None
    expires_at: float

    def get_redirect_uri(self) -> str:
        return self.redirect_uri

    def get_scope(self) -> str:
        return self.scope


@dataclass
class AccessGrant(TokenMixin):  # type: ignore[misc]
    """An issued access token and its refresh token, in a family sharing one consent."""

    access_token: str
    refresh_token: str | None
    client_id: str
    scope: str
    workspace_id: str
    family: str
    issued_at: float
    expires_in: int
    refresh_expires_at: float
    revoked: bool = False
    #: The refresh token was exchanged already: showing it again is a reuse.
    refreshed: bool = False

    def check_client(self, client: ClientMixin) -> bool:
        return bool(self.client_id == client.get_client_id())

    def get_scope(self) -> str:
        return self.scope

    def get_expires_in(self) -> int:
        return self.expires_in

    def is_expired(self) -> bool:
        return time.time() >= self.issued_at + self.expires_in

    def is_revoked(self) -> bool:
        return self.revoked

    def get_user(self) -> str:
        return self.workspace_id

    def get_client(self) -> ClientMixin:  # pragma: no cover - Authlib asks for it in places
        raise NotImplementedError


class _Payload(OAuth2Payload):  # type: ignore[misc]
    def __init__(self, data: Mapping[str, str]) -> None:
        self._data = dict(data)

    @property
    def data(self) -> dict[str, str]:
        return self._data

    @property
    def datalist(self) -> dict[str, list[str]]:
        return {k: [v] for k, v in self._data.items()}


@dataclass
class Incoming:
    """A Starlette request read whole (Authlib's server is synchronous)."""

    method: str
    url: str
    headers: Mapping[str, str]
    query: Mapping[str, str]
    form: Mapping[str, str] = field(default_factory=dict)


class _Request(OAuth2Request):  # type: ignore[misc]
    def __init__(self, incoming: Incoming) -> None:
        super().__init__(incoming.method, incoming.url, headers=incoming.headers)
        self._incoming = incoming
        self.payload = _Payload({**incoming.query, **incoming.form})
        #: The family of the tokens this request was issued (set by ``save_token``).
        self.issued_family: str | None = None

    @property
    def args(self) -> Mapping[str, str]:
        return self._incoming.query

    @property
    def form(self) -> Mapping[str, str]:
        return self._incoming.form


class _Store:
    """The server's records, in memory, behind one lock."""

    def __init__(self) -> None:
        self.lock = threading.RLock()
        self.clients: dict[str, OAuthClient] = {}
        self.codes: dict[str, AuthCode] = {}
        self.by_access: dict[str, AccessGrant] = {}
        self.by_refresh: dict[str, AccessGrant] = {}
        #: Exchanged codes -> (the family of the tokens they brought, until when to remember).
        self.spent: dict[str, tuple[str, float]] = {}

    def revoke_family(self, family: str) -> int:
        with self.lock:
            hit = [g for g in self.by_access.values() if g.family == family and not g.revoked]
            for grant in hit:
                grant.revoked = True
            return len(hit)


class _CodeGrant(grants.AuthorizationCodeGrant):  # type: ignore[misc]
    TOKEN_ENDPOINT_AUTH_METHODS: ClassVar[list[str]] = [
        "client_secret_basic",
        "client_secret_post",
        "none",
    ]

    def save_authorization_code(self, code: str, request: _Request) -> None:
        server: OAuthServer = self.server
        payload = request.payload.data
        with server.store.lock:
            server.store.codes[code] = AuthCode(
                code=code,
                client_id=request.client.get_client_id(),
                redirect_uri=request.payload.redirect_uri or "",
                scope=request.scope or "",
                workspace_id=str(request.user),
                code_challenge=payload.get("code_challenge"),
                code_challenge_method=payload.get("code_challenge_method"),
                expires_at=time.time() + server.settings.code_seconds,
            )

    def query_authorization_code(self, code: str, client: OAuthClient) -> AuthCode | None:
        store: _Store = self.server.store
        with store.lock:
            spent = store.spent.get(code)
            if spent is not None:  # shown twice: whoever holds it, its tokens end (4.1.2)
                store.revoke_family(spent[0])
                return None
            found: AuthCode | None = store.codes.get(code)
        if found is None or found.client_id != client.client_id or found.expires_at < time.time():
            return None
        return found

    def delete_authorization_code(self, authorization_code: AuthCode) -> None:
        """The code is spent: remembered (until it would have expired) with the family of
        the tokens it brought, so that a second use revokes them."""
        store: _Store = self.server.store
        with store.lock:
            store.codes.pop(authorization_code.code, None)
            now = time.time()
            for code in [c for c, (_, until) in store.spent.items() if until < now]:
                del store.spent[code]
            family = getattr(self.request, "issued_family", None)
            if family:
                store.spent[authorization_code.code] = (family, authorization_code.expires_at)

    def authenticate_user(self, authorization_code: AuthCode) -> str:
        return authorization_code.workspace_id


class _S256Only(CodeChallenge):  # type: ignore[misc]
    SUPPORTED_CODE_CHALLENGE_METHOD: ClassVar[list[str]] = ["S256"]
    DEFAULT_CODE_CHALLENGE_METHOD = "S256"

    def validate_code_challenge(self, grant: Any, redirect_uri: str) -> None:
        """Every authorization request carries an S256 challenge, public client or not."""
        from authlib.oauth2.rfc6749 import InvalidRequestError

        data = grant.request.payload.data
        if not data.get("code_challenge") or data.get("code_challenge_method") != "S256":
            raise InvalidRequestError(
                "PKCE is required: send code_challenge with code_challenge_method=S256"
            )
        super().validate_code_challenge(grant, redirect_uri)

    def get_authorization_code_challenge(self, authorization_code: AuthCode) -> str | None:
        return authorization_code.code_challenge

    def get_authorization_code_challenge_method(self, authorization_code: AuthCode) -> str | None:
        return authorization_code.code_challenge_method


class _RefreshGrant(grants.RefreshTokenGrant):  # type: ignore[misc]
    TOKEN_ENDPOINT_AUTH_METHODS: ClassVar[list[str]] = [
        "client_secret_basic",
        "client_secret_post",
        "none",
    ]
    INCLUDE_NEW_REFRESH_TOKEN = True  # rotation

    def authenticate_refresh_token(self, refresh_token: str) -> AccessGrant | None:
        store: _Store = self.server.store
        with store.lock:
            grant = store.by_refresh.get(refresh_token)
            if grant is None:
                return None
            if grant.refreshed:  # shown twice: someone else holds it; end the whole family
                store.revoke_family(grant.family)
                return None
            if grant.revoked:
                return None
            if time.time() >= grant.refresh_expires_at:
                return None
            return grant

    def authenticate_user(self, refresh_token: AccessGrant) -> str:
        return refresh_token.workspace_id

    def revoke_old_credential(self, refresh_token: AccessGrant) -> None:
        """The old refresh token is spent; its access token lives out its short life."""
        with self.server.store.lock:
            refresh_token.refreshed = True


class _ClientCredentialsGrant(grants.ClientCredentialsGrant):  # type: ignore[misc]
    TOKEN_ENDPOINT_AUTH_METHODS: ClassVar[list[str]] = ["client_secret_basic", "client_secret_post"]


class _Revocation(RevocationEndpoint):  # type: ignore[misc]
    CLIENT_AUTH_METHODS: ClassVar[list[str]] = ["client_secret_basic", "client_secret_post", "none"]

    def query_token(self, token_string: str, token_type_hint: str | None) -> AccessGrant | None:
        store: _Store = self.server.store
        if token_type_hint != "refresh_token" and token_string in store.by_access:
            return store.by_access[token_string]
        return store.by_refresh.get(token_string) or store.by_access.get(token_string)

    def revoke_token(self, token: AccessGrant, request: _Request) -> None:
        """Revoking a refresh token ends its family; an access token, itself (RFC 7009, 2.1)."""
        store: _Store = self.server.store
        with store.lock:
            if request.payload.data.get("token") == token.refresh_token:
                store.revoke_family(token.family)
            else:
                token.revoked = True


class OAuthServer(AuthorizationServer):  # type: ignore[misc]
    """The sandbox's authorization server (see the module docstring)."""

    def __init__(self, settings: OAuthSettings, clients: Iterable[OAuthClient] = ()) -> None:
        super().__init__(scopes_supported=list(ALL_SCOPES))
        self.settings = settings
        self.store = _Store()
        for client in clients:
            self.register_client(client)
        self.register_token_generator("default", self._generate)
        self.register_grant(_CodeGrant, [_S256Only(required=True)])
        self.register_grant(_RefreshGrant)
        self.register_grant(_ClientCredentialsGrant)
        self.register_endpoint(_Revocation)

    def register_client(self, client: OAuthClient) -> None:
        with self.store.lock:
            self.store.clients[client.client_id] = client

    # -- what Authlib asks of a server ---------------------------------------------

    def query_client(self, client_id: str) -> OAuthClient | None:
        return self.store.clients.get(client_id)

    def _generate(
        self,
        grant_type: str,
        client: OAuthClient,
        user: str | None = None,
        scope: str | None = None,
        expires_in: int | None = None,
        include_refresh_token: bool = True,
    ) -> dict[str, Any]:
        token: dict[str, Any] = {
            "token_type": "Bearer",
            "access_token": f"oat_{secrets.token_urlsafe(32)}",
            "expires_in": expires_in or self.settings.access_token_seconds,
            "scope": scope or "",
        }
        if include_refresh_token and grant_type != "client_credentials":
            token["refresh_token"] = f"ort_{secrets.token_urlsafe(32)}"
        return token

    def save_token(self, token: dict[str, Any], request: _Request) -> None:
        client: OAuthClient = request.client
        if request.payload.grant_type == "client_credentials":
            workspace = client.workspace_id or ""
        else:
            workspace = str(request.user)
        previous: AccessGrant | None = getattr(request, "refresh_token", None)
        family = previous.family if isinstance(previous, AccessGrant) else secrets.token_hex(8)
        grant = AccessGrant(
            access_token=token["access_token"],
            refresh_token=token.get("refresh_token"),
            client_id=client.client_id,
            scope=token.get("scope", ""),
            workspace_id=workspace,
            family=family,
            issued_at=time.time(),
            expires_in=int(token["expires_in"]),
            refresh_expires_at=time.time() + self.settings.refresh_token_seconds,
        )
        with self.store.lock:
            self.store.by_access[grant.access_token] = grant
            if grant.refresh_token:
                self.store.by_refresh[grant.refresh_token] = grant
        request.issued_family = family  # for the code grant: what its code brought

    def create_oauth2_request(self, request: Any) -> _Request:
        if isinstance(request, _Request):
            return request
        assert isinstance(request, Incoming)
        return _Request(request)

    def handle_response(self, status: int, body: Any, headers: Any) -> Response:
        pairs = dict(headers or [])
        if isinstance(body, dict):
            return JSONResponse(body, status_code=status, headers=pairs)
        return Response(body or "", status_code=status, headers=pairs)

    def send_signal(self, name: str, *args: Any, **kwargs: Any) -> None:
        """Authlib's hook for signals; the sandbox has no listeners."""

    # -- what the resource side asks -------------------------------------------------

    def bearer(self, token: str) -> AccessGrant | None:
        """The live grant an access token belongs to, or None (unknown, expired, revoked)."""
        grant = self.store.by_access.get(token)
        if grant is None or grant.revoked or grant.is_expired():
            return None
        return grant

    # -- documents -------------------------------------------------------------------

    def metadata(self, issuer: str) -> dict[str, Any]:
        """The authorization server metadata (RFC 8414)."""
        return {
            "issuer": issuer,
            "authorization_endpoint": f"{issuer}/oauth/authorize",
            "token_endpoint": f"{issuer}/oauth/token",
            "revocation_endpoint": f"{issuer}/oauth/revoke",
            "scopes_supported": list(ALL_SCOPES),
            "response_types_supported": ["code"],
            "grant_types_supported": ["authorization_code", "refresh_token", "client_credentials"],
            "code_challenge_methods_supported": ["S256"],
            "token_endpoint_auth_methods_supported": list(_AUTH_METHODS),
            "revocation_endpoint_auth_methods_supported": list(_AUTH_METHODS),
        }


def consent_page(incoming: Incoming, client: OAuthClient, workspaces: Mapping[str, str]) -> str:
    """The consent step: a workspace admin picks the workspace and approves or denies."""
    hidden = "".join(
        f'<input type="hidden" name="{html.escape(k)}" value="{html.escape(v)}">'
        for k, v in incoming.query.items()
        if k != "workspace"
    )
    options = "".join(
        f'<option value="{html.escape(name)}">{html.escape(name)} ({html.escape(ws)})</option>'
        for name, ws in workspaces.items()
    )
    scopes = "".join(
        f"<li>{html.escape(s)}</li>" for s in scope_to_list(incoming.query.get("scope", ""))
    )
    name = html.escape(client.name or client.client_id)
    return f"""<!doctype html><html><head><meta charset="utf-8"><title>Grant access</title></head>
<body><h1>{name} asks for access to one workspace</h1>
<p>It asks for:</p><ul>{scopes or "<li>(no scope)</li>"}</ul>
<form method="post" action="/oauth/authorize">{hidden}
<label>Workspace <select name="workspace">{options}</select></label><br>
<label>Workspace admin key <input type="password" name="admin_key" autocomplete="off"></label>
<br><button name="decision" value="approve">Approve</button>
<button name="decision" value="deny">Deny</button></form></body></html>"""


def consent_error(message: str, status: int = 400) -> HTMLResponse:
    return HTMLResponse(f"<!doctype html><p>{html.escape(message)}</p>", status_code=status)
