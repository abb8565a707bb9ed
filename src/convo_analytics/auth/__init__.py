"""Credentials for the service: API keys and OAuth 2.0 grants, with their token store.

Public surface: :func:`credentials_for` (the provider every request of a
workspace asks for its header), :class:`TokenStore`, :func:`login`,
:func:`logout`, :class:`AuthExpired`, and the user errors :class:`AuthRefused`
(an endpoint the client will not send to) and :class:`TokenStoreError`.
"""

from convo_analytics.auth._oauth_client import (
    ApiKeyCredentials,
    AuthExpired,
    AuthRefused,
    Credentials,
    OAuthCredentials,
    credentials_for,
    discover,
    login,
    logout,
)
from convo_analytics.auth._token_store import TokenStore, TokenStoreError

__all__ = [
    "ApiKeyCredentials",
    "AuthExpired",
    "AuthRefused",
    "Credentials",
    "OAuthCredentials",
    "TokenStore",
    "TokenStoreError",
    "credentials_for",
    "discover",
    "login",
    "logout",
]
