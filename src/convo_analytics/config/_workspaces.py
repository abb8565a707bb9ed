"""The workspaces one installation reads: ``[[workspaces]]`` in convo.toml, as typed values.

A company runs a workspace per brand or region; an agency or a marketplace
integration reads many. Each workspace is one value, built here from the
config and handed down to every stage (extract, ingest, transform
partitions, exports, the lake): its name (``--workspace NAME``), base URL,
how it authenticates (an API key, or an OAuth 2.0 grant), its rate limit and
its webhook secrets. A configuration without ``[[workspaces]]`` is one
workspace made of the flat settings (``service.*``, ``webhooks.secret``),
so a single-workspace setup keeps working unchanged.

A workspace's secrets (its API key, client secret, webhook secrets) are read
when a command first uses them, not when the config is loaded: a command
about one workspace (``convo auth login --workspace brand-b``, ``convo
extract --workspace brand-b``) runs without the variables and files of the
others (decision D-WORKSPACE-SECRETS). A secret that is named but missing is
a ConfigError at that first use, naming the variable or file.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Generic, TypeVar, overload

from convo_analytics.config._model import ConfigError
from convo_analytics.config._secret import Secret
from convo_analytics.config._settings import Settings
from convo_analytics.config._workspace_tables import ApiKeyAuth, OAuthAuth, WorkspaceSpec

__all__ = [
    "DEFAULT_WORKSPACE",
    "ApiKeyAuth",
    "Deferred",
    "OAuthAuth",
    "WorkspaceConfig",
    "WorkspaceSpec",
    "load_workspaces",
    "select_workspaces",
    "serve_tokens",
]

#: The name of the one workspace a configuration without ``[[workspaces]]`` describes.
DEFAULT_WORKSPACE = "default"


_T = TypeVar("_T")


class Deferred(Generic[_T]):
    """A secret the config names (a variable or a file), read when it is first used."""

    __slots__ = ("read",)

    def __init__(self, read: Callable[[], _T]) -> None:
        self.read = read


class _SecretField(Generic[_T]):
    """A field of :class:`WorkspaceConfig` holding a secret: given as a value (tests, code
    that holds it), or as a :class:`Deferred`, read on first access and kept. A dataclass
    field whose default is a descriptor: ``__init__`` stores through ``__set__``."""

    def __init__(self, default: _T) -> None:
        self.default = default
        self.slot = ""

    def __set_name__(self, owner: type, name: str) -> None:
        self.slot = f"_{name}_value"

    @overload
    def __get__(self, obj: None, owner: type) -> _T: ...
    @overload
    def __get__(self, obj: object, owner: type) -> _T: ...
    def __get__(self, obj: object | None, owner: type) -> _T:
        if obj is None:  # the class's own access: the field's default
            return self.default
        value = obj.__dict__.get(self.slot, self.default)
        if isinstance(value, Deferred):
            value = value.read()
            obj.__dict__[self.slot] = value
        return value  # type: ignore[no-any-return]

    def __set__(self, obj: object, value: _T | Deferred[_T]) -> None:
        obj.__dict__[self.slot] = value


@dataclass(frozen=True, eq=False)
class WorkspaceConfig:
    """A workspace as every stage sees it: its secrets are read when first used (see the
    module docstring), never shown."""

    name: str
    base_url: str
    rate_limit: str
    auth: ApiKeyAuth | OAuthAuth | None
    api_key: _SecretField[Secret | None] = _SecretField(None)
    client_secret: _SecretField[Secret | None] = _SecretField(None)
    webhook_secrets: _SecretField[tuple[Secret, ...]] = _SecretField(())
    #: Where its webhook secrets are set (``$ACME_HOOKS`` or a file), for messages.
    webhook_secrets_from: str = ""
    workspace_id: str | None = None
    #: Where its `convo serve` tokens are (resolved by :func:`serve_tokens`, serve only).
    serve_tokens_env: str | None = None
    serve_tokens_file: Path | None = None
    #: Origins besides the issuer's (or base URL's) that the OAuth client may send its code,
    #: tokens and secret to: ``extract.allowed_origins`` (decision D-OAUTH-ORIGINS).
    allowed_origins: tuple[str, ...] = ()
    #: Where the config says so (``convo.toml:12``), for messages.
    origin: str = ""
    implicit: bool = False
    extra: Mapping[str, Any] = field(default_factory=dict)

    @property
    def uses_oauth(self) -> bool:
        return isinstance(self.auth, OAuthAuth)

    def __repr__(self) -> str:
        return f"WorkspaceConfig(name={self.name!r}, base_url={self.base_url!r}, ...)"


def _read_secret(
    what: str, env_name: str | None, file: Path | None, environ: Mapping[str, str]
) -> Secret | None:
    if env_name:
        value = environ.get(env_name, "").strip()
        if not value:
            raise ConfigError(f"{what}: the environment variable {env_name} is not set; set it")
        return Secret(value)
    if file is not None:
        try:
            text = file.read_text(encoding="utf-8").strip()
        except OSError as exc:
            raise ConfigError(
                f"{what}: cannot read {file} ({exc.strerror}); fix the path"
            ) from None
        if not text:
            raise ConfigError(f"{what}: {file} is empty; put the secret in it")
        return Secret(text)
    return None


def serve_tokens(workspace: WorkspaceConfig, environ: Mapping[str, str]) -> tuple[Secret, ...]:
    """The `convo serve` tokens that may read ``workspace`` (none when it names none).

    Read only by `convo serve`, so that no other command needs them; a variable
    or file that is named but missing or empty is a ConfigError naming it.
    """
    found = _read_secret(
        f"workspace {workspace.name!r} serve_tokens_env/_file",
        workspace.serve_tokens_env,
        workspace.serve_tokens_file,
        environ,
    )
    return found.parts() if found is not None else ()


def _workspace(
    spec: WorkspaceSpec,
    settings: Settings,
    environ: Mapping[str, str],
    base_dir: Path | None,
    resolve_secrets: bool = True,
) -> WorkspaceConfig:
    """The workspace of one table. What the table must name is checked now; the secrets
    it names are read on first use (``resolve_secrets=False``: never)."""
    where = f"workspace {spec.name!r}"

    def path(p: Path | None) -> Path | None:
        return p if p is None or p.is_absolute() or base_dir is None else base_dir / p

    def secret(what: str, env_name: str | None, file: Path | None) -> Deferred[Secret | None]:
        return Deferred(lambda: _read_secret(f"{where} {what}", env_name, path(file), environ))

    api_key: Secret | Deferred[Secret | None] | None = None
    client_secret: Secret | Deferred[Secret | None] | None = None
    auth = spec.auth
    if isinstance(auth, ApiKeyAuth):
        if not (auth.key_env or auth.key_file):
            raise ConfigError(f"{where}: auth type api_key needs key_env or key_file")
        if resolve_secrets:
            api_key = secret("auth.key_env/key_file", auth.key_env, auth.key_file)
    elif isinstance(auth, OAuthAuth):
        named = bool(auth.client_secret_env or auth.client_secret_file)
        if auth.grant == "client_credentials" and not named:
            raise ConfigError(
                f"{where}: the client_credentials grant needs a client secret "
                "(client_secret_env or client_secret_file)"
            )
        if resolve_secrets and named:
            client_secret = secret(
                "auth.client_secret_env/_file", auth.client_secret_env, auth.client_secret_file
            )
    elif resolve_secrets:
        api_key = settings.get_secret("service.api_key")
    hooks: tuple[Secret, ...] | Deferred[tuple[Secret, ...]] = ()
    if resolve_secrets and (spec.webhook_secrets_env or spec.webhook_secrets_file):
        read_hooks = secret(
            "webhook_secrets_env/_file", spec.webhook_secrets_env, spec.webhook_secrets_file
        )

        def parts() -> tuple[Secret, ...]:
            found = read_hooks.read()
            return found.parts() if found is not None else ()

        hooks = Deferred(parts)
    return WorkspaceConfig(
        name=spec.name,
        base_url=(spec.base_url or settings.get_str("service.base_url")).rstrip("/"),
        rate_limit=spec.rate_limit or settings.get_str("service.rate_limit"),
        auth=auth,
        api_key=api_key,
        client_secret=client_secret,
        webhook_secrets=hooks,
        webhook_secrets_from=(
            f"${spec.webhook_secrets_env}"
            if spec.webhook_secrets_env
            else str(path(spec.webhook_secrets_file) or "")
        ),
        workspace_id=spec.workspace_id,
        serve_tokens_env=spec.serve_tokens_env,
        serve_tokens_file=path(spec.serve_tokens_file),
        allowed_origins=settings.get_list("extract.allowed_origins"),
        origin=settings.locate(f"workspaces.{spec.name}"),
    )


def load_workspaces(settings: Settings, *, resolve_secrets: bool = True) -> list[WorkspaceConfig]:
    """Every configured workspace, in order; one implicit workspace without ``[[workspaces]]``.

    The tables were checked as the config was loaded (one line per malformed table or
    repeated name); this raises ConfigError for an auth that names no secret where it
    needs one. The secrets are read
    when first used (a missing one is a ConfigError then), so a command about one
    workspace needs none of the others'. Readers of the warehouse (exports, `convo
    serve`) pass ``resolve_secrets=False``: they need names and ids, not the
    service's credentials, which are then never read.
    """
    specs = settings.workspaces  # validated as the config was loaded
    environ = settings.environ
    if not specs:
        key = settings.get_secret("service.api_key") if resolve_secrets else None
        hooks = settings.get_secret("webhooks.secret") if resolve_secrets else None
        return [
            WorkspaceConfig(
                name=DEFAULT_WORKSPACE,
                base_url=settings.get_str("service.base_url").rstrip("/"),
                rate_limit=settings.get_str("service.rate_limit"),
                auth=None,
                api_key=key,
                webhook_secrets=hooks.parts() if hooks else (),
                allowed_origins=settings.get_list("extract.allowed_origins"),
                implicit=True,
            )
        ]
    base_dir = settings.config_path.parent if settings.config_path else None
    return [_workspace(spec, settings, environ, base_dir, resolve_secrets) for spec in specs]


def select_workspaces(
    workspaces: list[WorkspaceConfig], names: tuple[str, ...] | list[str]
) -> list[WorkspaceConfig]:
    """The workspaces ``--workspace NAME`` (repeatable) names, in config order."""
    if not names:
        return workspaces
    known = {w.name: w for w in workspaces}
    if unknown := [n for n in names if n not in known]:
        raise ConfigError(
            f"--workspace: no workspace named {', '.join(map(repr, unknown))}; "
            f"configured: {', '.join(known)}"
        )
    return [w for w in workspaces if w.name in names]
