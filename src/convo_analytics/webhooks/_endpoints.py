"""Which secrets verify which archive, and whose workspace it is, from one configuration.

Every endpoint the receiver serves has an archive folder, and what is read from
it is verified and owned exactly as the receiver would: a workspace's folder
(``ARCHIVE/workspaces/NAME/``) with that workspace's secrets only, its events
stored under its id (D-WEBHOOK-WORKSPACE); every other file with the flat
``webhooks.secret``. ``convo webhooks ingest``, the nightly run and
``convo webhooks quarantine replay`` all take their plan from here, so they read
``[[workspaces]]`` the same way; ``convo webhooks serve`` takes its receiver's
settings from :func:`receiver_settings` (decision D-CONFIG-BUILDERS).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from convo_analytics.config import Settings, WorkspaceConfig, load_workspaces, select_workspaces
from convo_analytics.errors import UserError
from convo_analytics.privacy import PrivacyConfig, privacy_config
from convo_analytics.webhooks._ingest import IngestOptions
from convo_analytics.webhooks._workspace import EndpointWorkspace

if TYPE_CHECKING:
    from convo_analytics.webhooks._receiver import ReceiverSettings

__all__ = [
    "ARCHIVE_SUFFIXES",
    "EndpointKeys",
    "archive_files",
    "archive_workspace",
    "check_bindings",
    "endpoint_keys",
    "flat_keys",
    "ingest_batches",
    "ingest_options",
    "known_workspace_ids",
    "receiver_settings",
    "replay_keys",
    "require_flat_keys",
]

ARCHIVE_SUFFIXES = (".jsonl", ".jsonl.gz", ".ndjson", ".ndjson.gz", ".json", ".gz")


@dataclass(frozen=True)
class EndpointKeys:
    """What verifies one endpoint's lines and whose they are: its secrets (several during a
    rotation), its workspace, and where the secrets are set (for the signature alarm)."""

    endpoint: EndpointWorkspace
    secrets: Sequence[bytes] = field(repr=False)
    hint: str
    #: How its lines are scrubbed before the warehouse, and the key of their local seal
    #: (D-PRIVACY-SCRUB-AT-LOAD); None: loaded as they are, sealed lines quarantined.
    privacy: PrivacyConfig | None = field(default=None, repr=False)

    @property
    def name(self) -> str | None:
        return self.endpoint.name


@dataclass(frozen=True)
class IngestBatch:
    """Files of one endpoint, with what verifies them."""

    keys: EndpointKeys
    files: list[Path]


def ingest_options(settings: Settings, *, full: bool = False) -> IngestOptions:
    """The ingest's limits from the ``webhooks.*`` settings."""
    return IngestOptions(
        max_line_bytes=settings.get_int("webhooks.max_line_bytes"),
        max_future_seconds=settings.get_int("webhooks.max_future_seconds"),
        settle_seconds=settings.get_int("webhooks.settle_seconds"),
        alarm_share=settings.get_float("webhooks.bad_signature_share"),
        full=full,
    )


def receiver_settings(settings: Settings, *, max_body_bytes: int, path: str) -> ReceiverSettings:
    """The receiver's settings: the flat ``webhooks.secret`` (several during rotation) and
    each ``[[workspaces]]`` endpoint's own, the archive folder and the ``webhooks.*`` limits;
    ``max_body_bytes`` and ``path`` are `convo webhooks serve`'s flags.

    A user error when no secret at all is set (nothing could be verified).
    """
    from convo_analytics.webhooks._receiver import ReceiverSettings

    secret = settings.get_secret("webhooks.secret")
    secrets = [part.reveal() for part in secret.parts()] if secret is not None else []
    hooked = [w for w in load_workspaces(settings) if not w.implicit and w.webhook_secrets]
    workspaces = {w.name: [s.reveal() for s in w.webhook_secrets] for w in hooked}
    workspace_ids = known_workspace_ids(settings)
    hints = {w.name: w.webhook_secrets_from for w in hooked if w.webhook_secrets_from}
    if not secrets and not workspaces:
        raise UserError(
            "no webhook secret to verify deliveries with; set CONVO_WEBHOOK_SECRET "
            "(comma-separated during rotation) or CONVO_WEBHOOK_SECRET_FILE, or give "
            "[[workspaces]] their webhook_secrets_env"
        )
    return ReceiverSettings(
        archive_dir=settings.require_path("webhooks.archive_dir"),
        secrets=secrets,
        max_body_bytes=max_body_bytes,
        path=path,
        body_timeout=settings.get_float("webhooks.body_timeout_seconds"),
        max_future_seconds=settings.get_int("webhooks.max_future_seconds"),
        alarm_share=settings.get_float("webhooks.bad_signature_share"),
        secret_hint=settings.resolved("webhooks.secret").origin.replace("$", ""),
        header_timeout=settings.get_float("webhooks.header_timeout_seconds"),
        max_connections=settings.get_int("webhooks.max_connections"),
        workspaces=workspaces,
        workspace_ids=workspace_ids,
        workspace_hints=hints,
        privacy=privacy_config(settings),
        workspace_privacy={
            w.name: privacy_config(settings, w.workspace_id or w.name) for w in hooked
        },
    )


def archive_files(paths: Sequence[Path]) -> list[Path]:
    """Files named, and archive files under folders named (their quarantine/ left out)."""
    out: list[Path] = []
    for path in paths:
        if path.is_dir():
            found = sorted(
                p for p in path.rglob("*")
                if p.is_file() and p.name.endswith(ARCHIVE_SUFFIXES)
                and "quarantine" not in p.relative_to(path).parts
            )  # fmt: skip
            out.extend(found)
        elif path.is_file():
            out.append(path)
        else:
            raise UserError(
                f"{path}: no such file or folder; name webhook archive files "
                "(.jsonl or .jsonl.gz) or folders holding them"
            )
    return list(dict.fromkeys(out))


def _configured(settings: Settings) -> dict[str, WorkspaceConfig]:
    return {w.name: w for w in load_workspaces(settings) if not w.implicit}


def archive_workspace(settings: Settings, path: Path | str) -> str | None:
    """The configured workspace whose archive folder (``ARCHIVE/workspaces/NAME/``) holds
    ``path``, else None (the flat endpoint's)."""
    configured = _configured(settings)
    archive = settings.require_path("webhooks.archive_dir").resolve() / "workspaces"
    parts = Path(path).resolve().parts
    if parts[: len(archive.parts)] == archive.parts and len(parts) > len(archive.parts) + 1:
        name = parts[len(archive.parts)]
        return name if name in configured else None
    return None


def _endpoint(name: str, configured: dict[str, WorkspaceConfig]) -> EndpointWorkspace:
    return EndpointWorkspace(
        name,
        configured[name].workspace_id,
        {n: w.workspace_id for n, w in configured.items() if n != name},
    )


def endpoint_keys(settings: Settings, name: str) -> EndpointKeys:
    """A configured workspace's secrets and endpoint; a workspace without webhook secrets is
    a UserError naming how to set them."""
    configured = _configured(settings)
    workspace = configured[name]
    if not workspace.webhook_secrets:
        raise UserError(
            f"workspace {name!r} has no webhook secrets; set its "
            "webhook_secrets_env or webhook_secrets_file"
        )
    where = f" ({workspace.webhook_secrets_from})" if workspace.webhook_secrets_from else ""
    return EndpointKeys(
        _endpoint(name, configured),
        [s.reveal().encode("utf-8") for s in workspace.webhook_secrets],
        f"workspace {name}'s webhook secrets{where}",
        privacy_config(settings, workspace.workspace_id or name),
    )


def flat_keys(settings: Settings, given: Sequence[str] | None) -> EndpointKeys | None:
    """The flat endpoint's secrets: the flags, else ``webhooks.secret`` (several = rotation);
    None when neither is set."""
    if given:
        secrets = [s.encode("utf-8") for s in given if s]
        hint = "--secret"
    else:
        secret = settings.get_secret("webhooks.secret")
        if secret is None:
            return None
        secrets = [part.reveal().encode("utf-8") for part in secret.parts()]
        hint = settings.resolved("webhooks.secret").origin.replace("$", "")
    return EndpointKeys(EndpointWorkspace(None), secrets, hint, privacy_config(settings))


def require_flat_keys(settings: Settings, given: Sequence[str] | None) -> EndpointKeys:
    keys = flat_keys(settings, given)
    if keys is None:
        raise UserError(
            "no webhook secret to verify signatures with; set CONVO_WEBHOOK_SECRET (several "
            "comma-separated during a rotation) or CONVO_WEBHOOK_SECRET_FILE, or pass --secret"
        )
    return keys


def known_workspace_ids(settings: Settings) -> dict[str, str]:
    """Each configured workspace's id where it is known before any event arrives: configured
    (``workspace_id``), else bound in the warehouse (``workspaces``, read if it can be opened:
    a warehouse a run is writing is skipped, the receiver then binds on first sight)."""
    configured = _configured(settings)
    known = {name: w.workspace_id for name, w in configured.items() if w.workspace_id}
    path = settings.require_path("warehouse.path")
    if not path.exists():
        return known
    import duckdb

    try:
        con = duckdb.connect(str(path), read_only=True)
    except duckdb.Error:
        return known
    try:
        rows = con.execute("SELECT name, workspace_id FROM workspaces").fetchall()
    except duckdb.Error:
        rows = []
    finally:
        con.close()
    for name, workspace_id in rows:
        if name in configured and name not in known:
            known[str(name)] = str(workspace_id)
    return known


def replay_keys(
    settings: Settings, given: Sequence[str] | None
) -> Callable[[str | None], EndpointKeys | None]:
    """What verifies a quarantined line of each endpoint on replay: a configured workspace's
    own secrets (None when it has none now, or is no longer configured), the flat
    endpoint's ``--secret`` or ``webhooks.secret`` (None when neither is set)."""
    configured = _configured(settings)
    flat = flat_keys(settings, given)

    def keys_for(name: str | None) -> EndpointKeys | None:
        if name is None:
            return flat
        found = configured.get(name)
        if found is None or not found.webhook_secrets:
            return None
        return endpoint_keys(settings, name)

    return keys_for


def check_bindings(db_path: Path, batches: Sequence[IngestBatch]) -> None:
    """A configured workspace id that the warehouse binds otherwise (or to another name) is a
    WorkspaceConflict naming both, found reading the warehouse only, before the writers'
    lock is taken (the ingest checks again under it)."""
    from convo_analytics.warehouse._bindings import (
        WorkspaceConflict,
        bound_workspaces,
        check_binding,
    )

    configured = [b.keys.endpoint for b in batches if b.keys.endpoint.configured_id]
    if not configured or not db_path.exists():
        return
    import duckdb

    try:
        con = duckdb.connect(str(db_path), read_only=True)
    except duckdb.Error:
        return  # busy or unreadable: the run itself says so
    try:
        bound = bound_workspaces(con)
    except duckdb.Error:
        return
    finally:
        con.close()
    for endpoint in configured:
        assert endpoint.name is not None and endpoint.configured_id is not None
        problem = check_binding(bound, endpoint.name, endpoint.configured_id)
        if problem is not None:
            raise WorkspaceConflict(problem)


def ingest_batches(
    settings: Settings, files: list[Path], given: Sequence[str] | None, workspace: str | None
) -> list[IngestBatch]:
    """Which secrets verify which files: a file under a workspace's archive folder
    (``ARCHIVE/workspaces/NAME/``), or any file with ``--workspace NAME``, that workspace's
    secrets and id (a delivery signed with another's, or naming another workspace, is
    quarantined); the rest ``webhooks.secret`` (or ``--secret``)."""
    configured = _configured(settings)
    if workspace is not None:
        (chosen,) = select_workspaces(list(configured.values()), [workspace])
        return [IngestBatch(endpoint_keys(settings, chosen.name), files)]
    by_workspace: dict[str, list[Path]] = {}
    rest: list[Path] = []
    for path in files:
        name = archive_workspace(settings, path)
        if name is not None:
            by_workspace.setdefault(name, []).append(path)
        else:
            rest.append(path)
    batches = [IngestBatch(endpoint_keys(settings, n), paths) for n, paths in by_workspace.items()]
    if rest or not batches:
        # no files at all still checks the secret: the error belongs to the setup, not the day
        batches.append(IngestBatch(require_flat_keys(settings, given), rest))
    return batches
