"""Credentials for the service: API keys and OAuth 2.0 grants, with their token store.

Public surface: :func:`credentials_for` (the provider every request of a
workspace asks for its header), :class:`TokenStore`, :func:`login`,
:func:`logout`, :class:`AuthExpired`.
"""

from convo_analytics.auth._oauth_client import (
    ApiKeyCredentials,
    AuthExpired,
    Credentials,
    OAuthCredentials,
    credentials_for,
    discover,
    login,
    logout,
)
from convo_analytics.auth._token_store import TokenStore

__all__ = [
    "ApiKeyCredentials",
    "AuthExpired",
    "Credentials",
    "OAuthCredentials",
    "TokenStore",
    "credentials_for",
    "discover",
    "login",
    "logout",
]
