"""Where the OAuth client may send what it holds: the issuer's origin, over TLS.

The login sends an authorization code and its PKCE verifier to the token
endpoint, every refresh sends the refresh token (and a confidential client's
secret), a logout sends the refresh token to the revocation endpoint. Those
endpoints come from the authorization server's metadata document (RFC 8414)
and are then kept in the token store, a file anyone with the account can
edit. So the extractor's rule for its API key holds here too (decision
D-OAUTH-ORIGINS): every endpoint must be ``https://`` (plain ``http://``
only to loopback) and on the issuer's origin (``auth.issuer``, else the base
URL's) or an origin in ``extract.allowed_origins``; anything else is refused
with one line before a byte is sent, and the token store's endpoints are
checked again before each use.
"""

from __future__ import annotations

from typing import Any

from convo_analytics._net import insecure_url, origin_of
from convo_analytics.config import OAuthAuth, WorkspaceConfig, masked_url
from convo_analytics.errors import UserError

__all__ = [
    "AuthRefused",
    "allowed",
    "check_endpoint",
    "check_metadata",
    "check_root",
    "issuer_root",
]


class AuthRefused(UserError):
    """An OAuth endpoint the client will not send to (plain http afar, another origin)."""


def issuer_root(workspace: WorkspaceConfig) -> str:
    """The authorization server: ``auth.issuer``, else the workspace's base URL."""
    issuer = workspace.auth.issuer if isinstance(workspace.auth, OAuthAuth) else None
    return (issuer or workspace.base_url).rstrip("/")


def allowed(workspace: WorkspaceConfig) -> set[str]:
    """The origins the client may send its code, tokens and secret to."""
    return {origin_of(issuer_root(workspace)), *map(origin_of, workspace.allowed_origins)}


def check_root(workspace: WorkspaceConfig) -> str:
    """The issuer URL, checked before its metadata is asked for."""
    root = issuer_root(workspace)
    if (problem := insecure_url(root)) is not None:
        issuer = workspace.auth.issuer if isinstance(workspace.auth, OAuthAuth) else None
        setting = "auth.issuer" if issuer else "base_url"
        raise AuthRefused(
            f"workspace {workspace.name!r}: the authorization server {masked_url(root)} "
            f"{problem}; nothing was sent; set its {setting} to the https:// URL"
        )
    return root


def check_endpoint(workspace: WorkspaceConfig, name: str, url: object, source: str,
                   fix: str) -> str:  # fmt: skip
    """``url`` if the client may send to it; else :class:`AuthRefused` naming ``name``
    (``token_endpoint``), where it came from (``source``) and the ``fix``."""
    where = f"workspace {workspace.name!r}: the {name} {source}"
    if not isinstance(url, str) or not url:
        raise AuthRefused(f"{where} is not a URL; nothing was sent; {fix}")
    if (problem := insecure_url(url)) is not None:
        raise AuthRefused(f"{where} ({masked_url(url)}) {problem}; nothing was sent to it; {fix}")
    origin = origin_of(url)
    if origin not in allowed(workspace):
        raise AuthRefused(
            f"{where} is on {origin}, not the issuer's origin "
            f"({origin_of(issuer_root(workspace))}); nothing was sent to it (the client's code, "
            f"tokens and secret go to the issuer only); if that origin is the authorization "
            f"server's, add it to extract.allowed_origins, else {fix}"
        )
    return url


def check_metadata(workspace: WorkspaceConfig, meta: dict[str, Any], url: str) -> None:
    """Every endpoint the metadata document names (``*_endpoint``), before any is used."""
    fix = "set auth.issuer to the right authorization server"
    for key in ("authorization_endpoint", "token_endpoint"):
        if key not in meta:
            raise AuthRefused(f"the OAuth metadata at {url} has no {key}; {fix}")
    for key, value in meta.items():
        if key.endswith("_endpoint"):
            check_endpoint(workspace, key, value, f"from the OAuth metadata at {url}", fix)
