"""``[[workspaces]]`` as written in convo.toml: the typed tables the Settings model holds.

Kept apart from :mod:`._workspaces` (which turns a table into the workspace a command
uses, reading its secrets on use) so that the model can hold the tables without
importing the code that reads them. Validation problems become one line each, naming
the table (``[[workspaces]] #2 auth.type: ...``), by :func:`workspace_problems`.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from convo_analytics._net import insecure_url
from convo_analytics.config._table_problems import table_problems
from convo_analytics.config._urls import url_secret

__all__ = ["WORKSPACE_NAME", "ApiKeyAuth", "OAuthAuth", "WorkspaceSpec", "workspace_problems"]

#: What a workspace's name may be (``--workspace NAME``, folder and partition names).
WORKSPACE_NAME = r"[A-Za-z0-9][A-Za-z0-9_.-]{0,62}"
_NAME = WORKSPACE_NAME


class _Spec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ApiKeyAuth(_Spec):
    """A workspace API key, from an environment variable or a file (never the config)."""

    type: Literal["api_key"]
    key_env: str | None = None
    key_file: Path | None = None


class OAuthAuth(_Spec):
    """An OAuth 2.0 grant: ``authorization_code`` (``convo auth login``, refreshed by
    itself) or ``client_credentials`` (server to server, a confidential client)."""

    type: Literal["oauth"]
    client_id: str
    client_secret_env: str | None = None
    client_secret_file: Path | None = None
    scopes: tuple[str, ...] = ("conversations:read", "leads:read", "analytics:read")
    grant: Literal["authorization_code", "client_credentials"] = "authorization_code"
    #: The authorization server; default: the base URL's RFC 8414 metadata document.
    issuer: str | None = None

    @field_validator("issuer")
    @classmethod
    def _issuer(cls, value: str | None) -> str | None:
        """The client's code, tokens and secret go there: TLS (http only to loopback), and
        an issuer is a bare URL (RFC 8414, 2: no query, no fragment)."""
        if value is None:
            return value
        if (problem := insecure_url(value)) is not None:
            raise ValueError(f"the issuer {problem} (decision D-OAUTH-ORIGINS)")
        if "?" in value or "#" in value:
            raise ValueError("an issuer has no query or fragment (RFC 8414); remove them")
        return value.rstrip("/")


class WorkspaceSpec(_Spec):
    """One ``[[workspaces]]`` table, as written."""

    name: Annotated[str, Field(pattern=f"^{_NAME}$")]
    #: The service's own id of the workspace; default: learned from its records, else the name.
    workspace_id: str | None = None
    base_url: str | None = None
    auth: Annotated[ApiKeyAuth | OAuthAuth, Field(discriminator="type")] | None = None
    rate_limit: str | None = None
    webhook_secrets_env: str | None = None
    webhook_secrets_file: Path | None = None
    #: Tokens of `convo serve` clients that may read this workspace (read by serve only).
    serve_tokens_env: str | None = None
    serve_tokens_file: Path | None = None
    #: Its own ``privacy.scrub`` (read by convo_analytics.privacy.privacy_config).
    privacy_scrub: Literal["off", "mask", "hash"] | None = None
    #: Its own ``[retention]`` days (read by convo_analytics.pipeline.retention_config).
    retention_raw_payload_days: Annotated[int, Field(ge=0)] | None = None
    retention_transcript_days: Annotated[int, Field(ge=0)] | None = None
    retention_archive_days: Annotated[int, Field(ge=0)] | None = None

    @field_validator("base_url")
    @classmethod
    def _url(cls, value: str | None) -> str | None:
        if value is not None and not re.match(r"https?://", value):
            raise ValueError("must start with https:// (or http:// for loopback)")
        if value is not None and (where := url_secret(value)) is not None:
            raise ValueError(
                f"holds {where}: remove it from the URL (URLs are shown in messages); the "
                "workspace's credential goes in its auth (key_env or key_file)"
            )
        return value


def workspace_problems(raw: list[Any]) -> tuple[list[WorkspaceSpec], list[str]]:
    """The tables of ``raw`` validated, and one line per problem (a malformed table, a
    repeated name)."""
    return table_problems(raw, WorkspaceSpec, "[[workspaces]]", "workspace")
