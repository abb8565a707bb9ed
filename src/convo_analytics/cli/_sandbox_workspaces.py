"""``convo sandbox serve --for-config FILE``: a sandbox serving a config's ``[[workspaces]]``.

The README's several-workspaces tour needs a service with those workspaces and
a config that reads them, with no secret in either file. Given a convo.toml
(``examples/workspaces.toml``), the sandbox serves each of its workspaces on
the port their ``base_url`` names, and puts each secret where the config reads
it (decision D-SANDBOX-FOR-CONFIG):

- an API-key workspace with ``key_file``: the key in that file, written (0600)
  when the file does not exist yet, else the key the file already holds (a
  restart keeps it; an existing file is never overwritten); with ``key_env``:
  the variable's value, which must be set where the sandbox starts;
- an OAuth workspace: the public client ``convo-analytics`` needs nothing
  (``convo auth login``); the confidential client ``svc-NAME`` gets the secret
  of its ``client_secret_file`` or ``client_secret_env``, the same way.

Only a config whose workspaces all point at one loopback origin
(``http://127.0.0.1:PORT``) is served, so a production config is refused
before anything is written.
"""

from __future__ import annotations

import ipaddress
import os
import secrets
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

from convo_analytics.config import ApiKeyAuth, OAuthAuth, Settings, WorkspaceConfig
from convo_analytics.errors import UserError

__all__ = ["ServedWorkspaces", "shown_path", "workspaces_to_serve"]

#: The sandbox's public OAuth client (sandbox/_service.py).
PUBLIC_CLIENT = "convo-analytics"
_LOOPBACK_NAMES = ("localhost",)


@dataclass
class ServedWorkspaces:
    """What the sandbox serves for a config, and what to tell its user."""

    host: str
    port: int
    #: (name, API key) pairs, in config order (SandboxSettings.workspaces).
    keys: list[tuple[str, str]] = field(default_factory=list)
    #: Secrets of the confidential clients, by client id (SandboxSettings.client_secrets).
    client_secrets: dict[str, str] = field(default_factory=dict)
    #: One line per workspace: how it authenticates here, and where its secret is.
    lines: list[str] = field(default_factory=list)
    #: The commands that read it next (log in, extract), each as typed into a shell.
    commands: list[str] = field(default_factory=list)
    #: A shell expression of an API key a `curl` line can use (``$(cat FILE)``, ``$VAR``).
    key_expression: str | None = None
    #: Secrets to write where the config reads them: (workspace, what, file, value).
    to_write: list[tuple[str, str, Path, str]] = field(default_factory=list)

    def write(self) -> None:
        """Write the new secrets (mode 0600), once the sandbox can listen; a file that
        cannot be written is a UserError naming it."""
        for name, what, path, value in self.to_write:
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
                # an empty file is filled; one with content is never overwritten
                empty = path.exists() and not path.read_text(encoding="utf-8").strip()
                how = os.O_TRUNC if empty else os.O_CREAT | os.O_EXCL
                fd = os.open(path, os.O_WRONLY | how, 0o600)
                with os.fdopen(fd, "w", encoding="utf-8") as out:
                    os.fchmod(out.fileno(), 0o600)
                    out.write(value + "\n")
            except OSError as exc:
                raise UserError(
                    f"workspace {name!r}: cannot write its {what} to {shown_path(path)} "
                    f"({exc.strerror}); fix the path in the config"
                ) from None


def shown_path(path: Path) -> str:
    """A path as a user types it: relative to the current folder when under it, quoted
    for the shell when it needs to be."""
    absolute = Path(os.path.abspath(path))
    try:
        text = str(absolute.relative_to(Path.cwd()))
    except ValueError:
        text = str(absolute)
    return shlex.quote(text)


def _loopback(host: str) -> bool:
    if host.lower() in _LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _origin(ws: WorkspaceConfig, config: str) -> tuple[str, int]:
    parts = urlsplit(ws.base_url)
    try:
        host, port = parts.hostname or "", parts.port
    except ValueError:  # a port that is no number, or out of range
        host, port = "", None
    if parts.scheme != "http" or not _loopback(host) or port is None or parts.path not in ("", "/"):
        raise UserError(
            f"--for-config {config}: workspace {ws.name!r} has base_url {ws.base_url}, not "
            "this sandbox; a config the sandbox serves gives every workspace base_url = "
            '"http://127.0.0.1:PORT" (one port for all)'
        )
    return host, port


def _secret_from(
    ws: WorkspaceConfig,
    what: str,
    env: str | None,
    file: Path | None,
    prefix: str,
    settings: Settings,
    served: ServedWorkspaces,
) -> tuple[str, str, str]:
    """The secret the config reads for ``ws`` (``what``): kept from its file, to be written
    to it (``served.to_write``), or taken from its variable; with the line to say and a
    shell expression of it."""
    if env:
        value = settings.environ.get(env, "").strip()
        if len(value) < 8:
            raise UserError(
                f"workspace {ws.name!r} reads its {what} from ${env}, which is not set (or "
                f"shorter than 8 characters): set it to the {what} this sandbox should accept "
                f"before starting it, or give the workspace a file to read it from instead"
            )
        return value, f"{what} from ${env}", f"${env}"
    assert file is not None and settings.config_path is not None
    path = file if file.is_absolute() else settings.config_path.parent / file
    shown = shown_path(path)
    try:
        kept = path.read_text(encoding="utf-8").strip() if path.exists() else ""
    except OSError as exc:
        raise UserError(f"workspace {ws.name!r}: cannot read {shown} ({exc.strerror})") from None
    if kept:
        if len(kept) < 8 or any(c.isspace() for c in kept):
            raise UserError(
                f"workspace {ws.name!r}: {shown} holds no usable {what} (8+ characters, no "
                "spaces); remove the file and the sandbox writes a new one"
            )
        return kept, f"{what} in {shown} (kept from before)", f"$(cat {shown})"
    value = f"{prefix}{secrets.token_hex(16)}"
    served.to_write.append((ws.name, what, path, value))
    return value, f"{what} written to {shown}", f"$(cat {shown})"


def workspaces_to_serve(
    settings: Settings, workspaces: list[WorkspaceConfig], config: str
) -> ServedWorkspaces:
    """The sandbox's workspaces for the config ``settings`` was read from (``config``: the
    path as given, for messages and the lines printed). Every refusal is a UserError
    raised here, before anything is written: the new secrets are written by
    :meth:`ServedWorkspaces.write` once the sandbox can listen."""
    if not workspaces or workspaces[0].implicit:
        raise UserError(
            f"--for-config {config}: the file has no [[workspaces]] to serve (see "
            "examples/workspaces.toml)"
        )
    origins = {_origin(ws, config) for ws in workspaces}
    if len(origins) > 1:
        shown = ", ".join(f"{h}:{p}" for h, p in sorted(origins))
        raise UserError(
            f"--for-config {config}: the workspaces name several origins ({shown}); one "
            "sandbox serves one: give them the same base_url"
        )
    ((host, port),) = origins
    for ws in workspaces:  # every refusal before the first file is written
        _check(ws, settings)
    served = ServedWorkspaces(host, port)
    use = f"convo --config {shlex.quote(config)}"
    for ws in workspaces:
        auth = ws.auth
        if isinstance(auth, ApiKeyAuth):
            key, said, expression = _secret_from(
                ws, "API key", auth.key_env, auth.key_file, "sk_sandbox_", settings, served
            )
            served.key_expression = served.key_expression or expression
            served.lines.append(f"{ws.name}: {said}")
        elif isinstance(auth, OAuthAuth):
            key = f"sk_sandbox_{secrets.token_hex(16)}"  # its admin's key: the consent page
            if auth.client_id == PUBLIC_CLIENT:
                said = "OAuth, the public client"
            else:
                secret, said, _ = _secret_from(
                    ws, "client secret", auth.client_secret_env, auth.client_secret_file,
                    "ocs_", settings, served,
                )  # fmt: skip
                served.client_secrets[auth.client_id] = secret
                said = f"OAuth client {auth.client_id}, {said}"
            if auth.grant == "authorization_code":
                served.lines.append(f"{ws.name}: {said} (log in: convo auth login)")
                served.commands.append(f"{use} auth login --workspace {ws.name}")
            else:
                served.lines.append(f"{ws.name}: {said} (client credentials: no login)")
        else:
            flat = settings.get_secret("service.api_key")
            assert flat is not None  # _check
            key = flat.reveal()
            served.key_expression = served.key_expression or "$CONVO_API_KEY"
            served.lines.append(f"{ws.name}: API key from service.api_key (CONVO_API_KEY)")
        served.keys.append((ws.name, key))
    served.commands.append(f"{use} extract")
    return served


def _check(ws: WorkspaceConfig, settings: Settings) -> None:
    """Refusals that need no file: what the sandbox cannot be for this workspace."""
    if ws.workspace_id is not None and ws.workspace_id != f"ws_{ws.name}":
        raise UserError(
            f"workspace {ws.name!r} has workspace_id {ws.workspace_id!r}; the sandbox names "
            f"it ws_{ws.name}: remove workspace_id (or set it to that)"
        )
    auth = ws.auth
    if isinstance(auth, OAuthAuth):
        confidential = f"svc-{ws.name}"
        if auth.client_id not in (PUBLIC_CLIENT, confidential):
            raise UserError(
                f"workspace {ws.name!r} has client_id {auth.client_id!r}; the sandbox's "
                f"clients are {PUBLIC_CLIENT!r} (public, for convo auth login) and "
                f"{confidential!r} (confidential, with a client secret)"
            )
        named = auth.client_secret_env or auth.client_secret_file
        if auth.client_id == PUBLIC_CLIENT and named:
            raise UserError(
                f"workspace {ws.name!r}: the sandbox's client {PUBLIC_CLIENT!r} is public and "
                f"has no secret; remove client_secret_env/_file, or use client_id = "
                f'"{confidential}"'
            )
        if auth.client_id == confidential and not named:
            raise UserError(
                f"workspace {ws.name!r}: the confidential client {confidential!r} needs a "
                "client_secret_file (the sandbox writes it) or client_secret_env"
            )
    elif auth is None and settings.get_secret("service.api_key") is None:
        raise UserError(
            f'workspace {ws.name!r} has no auth: give it auth = {{ type = "api_key", '
            'key_file = "FILE" } (the sandbox writes the key there)'
        )
