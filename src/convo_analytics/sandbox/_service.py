"""The sandbox as a whole: settings, workspaces and keys, limits, deliveries, faults."""

from __future__ import annotations

import hashlib
import secrets
import time
from dataclasses import dataclass, field
from pathlib import Path

from convo_analytics.sandbox._assistant import LiveAssistant
from convo_analytics.sandbox._delivery import Dispatcher, parse_retry_schedule
from convo_analytics.sandbox._faults import FaultSettings
from convo_analytics.sandbox._generate import HistorySpec, Incident, generate_history
from convo_analytics.sandbox._oauth import OAuthClient, OAuthServer, OAuthSettings
from convo_analytics.sandbox._ratelimit import RateLimiter, RateLimitPolicy
from convo_analytics.sandbox._store import CursorCodec
from convo_analytics.sandbox._workspace import Workspace

DEFAULT_WORKSPACE = "demo"
#: The registered public OAuth client (PKCE) that `convo auth login` uses by default.
PUBLIC_CLIENT_ID = "convo-analytics"
APP_BASE = "https://app.convo.example"


@dataclass
class SandboxSettings:
    """Everything ``convo sandbox serve`` can be told; see docs/cli.md."""

    host: str = "127.0.0.1"
    port: int = 8787
    seed: int = 42
    conversations: int = 2000
    days: int = 30
    until_ms: int | None = None
    rate_limit: str = "600/min"
    retry_after_format: str = "seconds"  # or "http-date"
    workspaces: list[tuple[str, str]] = field(default_factory=list)
    webhook_retry_schedule: str = "2,8,32"
    webhook_ack_timeout: float = 10.0
    webhook_signing: str = "stripped"
    event_fields: str = "both"
    faults: FaultSettings = field(default_factory=FaultSettings)
    admin_token: str | None = None
    default_page_size: int = 50
    max_page_size: int = 200
    #: Quiet time after which a live conversation completes; None: its channel's window.
    live_inactivity_seconds: float | None = None
    #: Lead score at which a live conversation's lead qualifies.
    lead_threshold: float = 70.0
    #: Which hosts a url-crawl knowledge source may fetch: any, or loopback only (tests).
    crawl_scope: str = "any"
    #: Words the guardrail flags (blocked_term); empty keeps the built-in list.
    blocked_terms: tuple[str, ...] = ()
    #: The OAuth 2.0 authorization server's behaviour (token lifetimes, auto-approval).
    oauth: OAuthSettings = field(default_factory=OAuthSettings)
    #: Secrets of the confidential clients ``svc-NAME`` (by client id); the rest generated.
    client_secrets: dict[str, str] = field(default_factory=dict)
    #: Faults injected into the generated histories (what a monitor must find).
    incidents: tuple[Incident, ...] = ()

    def validate(self) -> None:
        RateLimitPolicy.parse(self.rate_limit)
        parse_retry_schedule(self.webhook_retry_schedule)
        self.faults.validate()
        if self.conversations < 0 or self.days < 1:
            raise ValueError("conversations must be >= 0 and days >= 1")
        if self.retry_after_format not in ("seconds", "http-date"):
            raise ValueError("retry_after_format must be 'seconds' or 'http-date'")
        if self.webhook_signing not in ("stripped", "raw"):
            raise ValueError("webhook_signing must be 'stripped' or 'raw'")
        if self.crawl_scope not in ("any", "loopback"):
            raise ValueError("crawl_scope must be 'any' or 'loopback'")
        if self.event_fields not in ("a", "b", "both"):
            raise ValueError("event_fields must be 'a', 'b' or 'both'")
        for name, key in self.workspaces:
            if not name.replace("-", "").replace("_", "").isalnum() or len(key) < 8:
                raise ValueError(
                    f"workspace {name!r}: use NAME:KEY with a plain name and a key of 8+ chars"
                )


def key_id(key: str) -> str:
    """A non-secret name for an API key (its hash), for rate-limit buckets and logs."""
    return "key_" + hashlib.sha256(key.encode()).hexdigest()[:12]


class Sandbox:
    """The state behind the HTTP app."""

    def __init__(self, settings: SandboxSettings) -> None:
        settings.validate()
        self.settings = settings
        self.until_ms = settings.until_ms or int(time.time() * 1000)
        pairs = settings.workspaces or [(DEFAULT_WORKSPACE, f"sk_sandbox_{secrets.token_hex(16)}")]
        self.generated_key = None if settings.workspaces else pairs[0][1]
        self.admin_token = settings.admin_token or f"adm_{secrets.token_hex(16)}"
        self.workspaces: dict[str, Workspace] = {}
        self.keys: dict[str, Workspace] = {}
        for name, key in pairs:
            ws = self.workspaces.get(f"ws_{name}")
            if ws is None:
                ws = Workspace.create(name, APP_BASE, settings.seed, settings.event_fields)
                spec = HistorySpec(
                    workspace_id=ws.id,
                    seed=settings.seed,
                    conversations=settings.conversations,
                    days=settings.days,
                    until_ms=self.until_ms,
                    incidents=tuple(i for i in settings.incidents if i.workspace in (None, name)),
                )
                ws.load_history(generate_history(spec, ws.events))
                self.workspaces[ws.id] = ws
            self.keys[key] = ws
        for ws in self.workspaces.values():
            ws.activity.lead_threshold = settings.lead_threshold
            if settings.blocked_terms:
                ws.activity.blocked_terms = settings.blocked_terms
        inactivity = settings.live_inactivity_seconds
        self.live = LiveAssistant(
            inactivity_ms=int(inactivity * 1000) if inactivity is not None else None
        )
        self.limiter = RateLimiter(RateLimitPolicy.parse(settings.rate_limit))
        self.dispatcher = Dispatcher(
            schedule=parse_retry_schedule(settings.webhook_retry_schedule),
            ack_timeout=settings.webhook_ack_timeout,
            signing=settings.webhook_signing,
        )
        for ws in self.workspaces.values():
            ws.sinks.append(self.dispatcher.sink_for(ws.id))
        self.cursors = CursorCodec(secrets.token_bytes(32))
        self.oauth = OAuthServer(settings.oauth, self._default_clients())

    def _default_clients(self) -> list[OAuthClient]:
        """A public client for interactive logins (PKCE, loopback redirects) and, per
        workspace, a confidential client bound to it for the client credentials grant."""
        clients = [
            OAuthClient(
                client_id=PUBLIC_CLIENT_ID,
                client_secret=None,
                redirect_uris=("http://127.0.0.1/callback", "http://localhost/callback"),
                name="convo-analytics",
            )
        ]
        for ws in self.workspaces.values():
            clients.append(
                OAuthClient(
                    client_id=f"svc-{ws.name}",
                    client_secret=self.settings.client_secrets.get(f"svc-{ws.name}")
                    or f"ocs_{secrets.token_urlsafe(24)}",
                    redirect_uris=("http://127.0.0.1/callback",),
                    grant_types=("authorization_code", "refresh_token", "client_credentials"),
                    workspace_id=ws.id,
                    name=f"convo-analytics for {ws.name}",
                )
            )
        return clients

    def workspace_names(self) -> dict[str, str]:
        """Workspace name -> id, in the order they were configured."""
        return {ws.name: ws.id for ws in self.workspaces.values()}

    def is_workspace_admin(self, workspace_id: str, credential: str) -> bool:
        """Whether ``credential`` administers the workspace (one of its API keys, or the
        sandbox's admin token): the consent step's proof."""
        if credential and secrets.compare_digest(credential.encode(), self.admin_token.encode()):
            return True
        ws = self.workspace_for(credential) if credential else None
        return ws is not None and ws.id == workspace_id

    def workspace_for(self, token: str) -> Workspace | None:
        for key, ws in self.keys.items():
            if secrets.compare_digest(key.encode(), token.encode()):
                return ws
        return None

    def write_key_file(self, path: Path) -> None:
        """Write the workspace keys for scripts (mode 0600); never printed by the CLI."""
        import orjson

        path.parent.mkdir(parents=True, exist_ok=True)
        data = {
            "workspaces": [
                {"name": ws.name, "workspaceId": ws.id, "apiKey": key}
                for key, ws in self.keys.items()
            ],
            "adminToken": self.admin_token,
            "oauthClients": [
                {
                    "clientId": c.client_id,
                    "clientSecret": c.client_secret,
                    "workspaceId": c.workspace_id,
                }
                for c in self.oauth.store.clients.values()
            ],
        }
        tmp = path.with_suffix(".tmp")
        tmp.write_bytes(orjson.dumps(data, option=orjson.OPT_INDENT_2))
        tmp.chmod(0o600)
        tmp.replace(path)
