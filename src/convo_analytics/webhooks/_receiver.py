"""The webhook receiver: an ASGI app that archives every delivery before acknowledging it.

A delivery is answered 2xx only once its line (raw body, headers, time of
receipt, verification result) is fsynced to the archive, so an acknowledged
delivery survives any crash; the sender retries anything else. Checks run
cheapest first: the body in time (408) and within the cap (413), strict JSON
(400: not JSON, a repeated key, a number that is not finite; D-ONE-READING),
the signature (401), the event's time (400: no UTC offset, or further in the
future than allowed; D-EVENT-TIME), the workspace it names (400: not a
string, or another workspace than the endpoint's; D-WEBHOOK-WORKSPACE), the
same rules as the ingest's. A rejected
delivery is not dropped either: it goes to the quarantine archive with its
reason (a body over the cap is kept truncated to the cap), so that a
misconfigured secret or a sender bug can be investigated and replayed later.
When most deliveries of a minute to one endpoint fail the signature check, a
log line says that endpoint's secret is most likely wrong (naming the
workspace and where its secrets are set), once a minute while it lasts.

A workspace's endpoint (``/webhooks/NAME``) verifies with that workspace's
secrets only and takes only its events: the id the event names must be the
workspace's (configured, bound in the warehouse, or bound here on first sight
and kept in ``ARCHIVE/workspaces/.workspace-ids``), never another's.

TLS is terminated in front of the receiver; it speaks plain HTTP itself.
Credential-like headers (``Authorization``, cookies, ``X-Api-Key``, anything
named like a token, secret, key or password) are archived masked, and the
webhook secrets never appear in an answer, a log line or a ``repr``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets as _random
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import orjson
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from convo_analytics.privacy import PrivacyConfig
from convo_analytics.webhooks._archive import archive_line, archive_record
from convo_analytics.webhooks._archive_writer import ArchiveError, ArchiveWriter, utc_now
from convo_analytics.webhooks._body import (
    BAD_ENCODING,
    MALFORMED_BODY,
    read_body,
    stamp,
    timestamp_problem,
)
from convo_analytics.webhooks._run import SECRET_HINT, signature_alarm
from convo_analytics.webhooks._scrub import (
    SCHEME,
    SCRUB_FIELD,
    DeliveryScrubber,
    key_id,
    scrub_record,
)
from convo_analytics.webhooks._verify import (
    SIGNATURE_HEADERS,
    Verification,
    secret_keys,
    verify_delivery,
)
from convo_analytics.webhooks._workspace import EndpointWorkspace, WorkspaceScope

__all__ = ["ACCEPTED_PREFIX", "QUARANTINE_PREFIX", "ReceiverSettings", "create_receiver_app"]

log = logging.getLogger(__name__)

ACCEPTED_PREFIX = "deliveries"
QUARANTINE_PREFIX = "quarantine"
_MASKED_HEADERS = frozenset(
    {"authorization", "proxy-authorization", "cookie", "set-cookie", "x-api-key"}
)
#: Parts of a header name that mark a credential (matched anywhere in the lower-case name).
_CREDENTIAL_WORDS = ("token", "secret", "key", "password", "passwd", "credential", "auth")
#: Headers the ingest needs as sent, whatever their names contain.
_KEPT_HEADERS = frozenset({"idempotency-key", *SIGNATURE_HEADERS})
_DELIVERY_HEADER = "x-convo-delivery"
#: How often the signature alarm may be logged.
_ALARM_EVERY = timedelta(seconds=60)


@dataclass(frozen=True, slots=True)
class ReceiverSettings:
    """Where to archive, which secrets verify (several during rotation), what to accept."""

    archive_dir: Path
    secrets: list[str] = field(repr=False)
    max_body_bytes: int = 1 << 20
    path: str = "/webhooks"
    #: The time of receipt (UTC); tests move it across midnight.
    clock: Callable[[], datetime] = field(default=utc_now, repr=False, compare=False)
    #: Seconds the body may take to arrive (webhooks.body_timeout_seconds).
    body_timeout: float = 10.0
    #: How far in the future of its receipt an event may be dated (webhooks.max_future_seconds).
    max_future_seconds: float = 86_400.0
    #: Share of a minute's deliveries failing the signature check that means a wrong secret.
    alarm_share: float = 0.5
    #: Where the secrets come from, named by the alarm (never the secrets).
    secret_hint: str = SECRET_HINT
    #: Seconds a connection may take to send its request headers (the server's, see
    #: server_options), and how many connections are held at most.
    header_timeout: float = 5.0
    max_connections: int = 1000
    #: Workspaces each with their own endpoint ``{path}/{name}`` and secrets (several
    #: during rotation); a delivery there verifies with that workspace's secrets only.
    workspaces: dict[str, list[str]] = field(default_factory=dict, repr=False)
    #: The service's id of a workspace, where known (configured, or bound in the warehouse):
    #: a delivery whose event names another workspace is refused (400 ``workspace_mismatch``).
    #: A workspace whose id is not known binds the first id its verified events name.
    workspace_ids: dict[str, str] = field(default_factory=dict)
    #: Where each workspace's secrets are set (``$ACME_HOOKS``), named by the alarm.
    workspace_hints: dict[str, str] = field(default_factory=dict)
    #: How deliveries are scrubbed before they are archived (``[privacy]``), and each
    #: workspace endpoint's own (its ``privacy_scrub``); None: archived as received.
    privacy: PrivacyConfig | None = None
    workspace_privacy: dict[str, PrivacyConfig] = field(default_factory=dict)

    def server_options(self) -> dict[str, Any]:
        """uvicorn.Config options that apply the header timeout and the connection cap."""
        from convo_analytics.webhooks._server import guarded_protocol

        return {"http": guarded_protocol(self.header_timeout, self.max_connections)}

    def validate(self) -> None:
        if not secret_keys(self.secrets) and not any(
            secret_keys(s) for s in self.workspaces.values()
        ):
            raise ValueError("at least one webhook secret is needed to verify deliveries")
        for name, secrets in self.workspaces.items():
            if not secret_keys(secrets):
                raise ValueError(f"workspace {name!r} has no webhook secret")
        if self.max_body_bytes < 1:
            raise ValueError("max_body_bytes must be at least 1")
        if self.body_timeout <= 0:
            raise ValueError("body_timeout must be positive")
        if not self.path.startswith("/"):
            raise ValueError(f"path {self.path!r} must start with '/'")


def _json(status: int, payload: Mapping[str, Any]) -> Response:
    return Response(orjson.dumps(payload), status_code=status, media_type="application/json")


def _error(status: int, code: str, message: str) -> Response:
    return _json(status, {"error": {"code": code, "message": message}})


#: Why a body is refused with 400: the error code and the message (else the detail).
_REFUSALS = {
    "not_json": ("invalid_json", "the body is not a JSON object"),
    "duplicate_keys": ("duplicate_keys", ""),
    "non_finite_number": ("non_finite_number", ""),
}


async def _read_capped(request: Request, cap: int) -> tuple[bytes, bool]:
    """The body, read up to ``cap`` bytes whatever Content-Length says; (bytes, truncated)."""
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        chunks.append(chunk)
        size += len(chunk)
        if size > cap:
            return b"".join(chunks)[:cap], True
    return b"".join(chunks), False


def is_credential(name: str) -> bool:
    """Whether a header (lower-case name) may carry a credential, so is archived masked."""
    if name in _KEPT_HEADERS or name.startswith("x-convo-"):
        return False
    return name in _MASKED_HEADERS or any(word in name for word in _CREDENTIAL_WORDS)


def _headers(request: Request) -> dict[str, str]:
    out = {}
    for name, value in request.headers.items():
        out[name] = "***" if is_credential(name) else value
    return out


def _delivery_id(headers: Mapping[str, str]) -> str:
    """The sender's delivery id (stable across retries), else one of ours."""
    given = headers.get(_DELIVERY_HEADER, "")
    if given and len(given) <= 200 and given.isprintable():
        return given
    return f"rcv_{_random.token_hex(8)}"


def _verification_fields(v: Verification | None) -> dict[str, Any]:
    if v is None:
        return {"verified": False, "verification": None, "signatureSource": None}
    return {
        "verified": v.ok,
        "verification": v.reading,
        "secretIndex": v.secret_index,
        "signatureSource": v.signature_source,
    }


@dataclass(slots=True)
class _AlarmWindow:
    """One endpoint's minute of signature checks, and when it last alarmed."""

    start: datetime
    total: int = 0
    failed: int = 0
    alarmed_at: datetime | None = None


class _Receiver:
    """The app's state: settings, HMAC keys and the two archives (opened by the lifespan)."""

    def __init__(self, settings: ReceiverSettings) -> None:
        self.settings = settings
        self.keys = secret_keys(settings.secrets)
        self.workspace_keys = {n: secret_keys(s) for n, s in settings.workspaces.items()}
        self.archive: ArchiveWriter | None = None
        self.archives: dict[str, ArchiveWriter] = {}
        self.quarantine: ArchiveWriter | None = None
        #: Per endpoint (None: the flat one): the signature alarm's minute.
        self.alarms: dict[str | None, _AlarmWindow] = {}
        self.bindings_path = bindings_file(settings.archive_dir)
        learned = _read_bindings(self.bindings_path) if settings.workspaces else {}
        self.bound = {**learned, **settings.workspace_ids}
        names = list(settings.workspaces)
        self.scopes = {
            name: WorkspaceScope(
                EndpointWorkspace(
                    name,
                    settings.workspace_ids.get(name),
                    {n: settings.workspace_ids.get(n) for n in names if n != name},
                ),
                self.bound,
            )
            for name in names
        }
        self.flat_scope = WorkspaceScope(EndpointWorkspace(None))
        #: Per endpoint: its scrubbing (a scrubber per workspace id, made once) and seal.
        self.scrubbers: dict[str | None, DeliveryScrubber] = {
            None: DeliveryScrubber(settings.privacy),
            **{
                name: DeliveryScrubber(settings.workspace_privacy.get(name, settings.privacy))
                for name in names
            },
        }

    @contextlib.asynccontextmanager
    async def lifespan(self, app: Starlette) -> AsyncIterator[None]:
        directory, clock = self.settings.archive_dir, self.settings.clock
        async with contextlib.AsyncExitStack() as stack:
            self.archive = await stack.enter_async_context(
                ArchiveWriter(directory, ACCEPTED_PREFIX, clock)
            )
            self.quarantine = await stack.enter_async_context(
                ArchiveWriter(directory / "quarantine", QUARANTINE_PREFIX, clock)
            )
            for name in self.settings.workspaces:
                self.archives[name] = await stack.enter_async_context(
                    ArchiveWriter(workspace_archive(directory, name), ACCEPTED_PREFIX, clock)
                )
            try:
                yield
            finally:
                self.archive = self.quarantine = None
                self.archives.clear()

    async def deliver_to(self, request: Request) -> Response:
        """A delivery to one workspace's endpoint: its secrets, its archive."""
        name = request.path_params["workspace"]
        if name not in self.workspace_keys:
            return _error(404, "not_found", f"no workspace {name!r} is received here")
        return await self.deliver(request, name)

    async def deliver(self, request: Request, workspace: str | None = None) -> Response:
        received = self.settings.clock()
        keys = self.keys if workspace is None else self.workspace_keys[workspace]
        tag = {} if workspace is None else {"workspace": workspace}
        cap = self.settings.max_body_bytes
        headers = _headers(request)
        delivery_id = _delivery_id(headers)
        try:
            async with asyncio.timeout(self.settings.body_timeout):
                body, truncated = await _read_capped(request, cap)
        except TimeoutError:
            log.info("delivery %s: the body did not arrive in time; connection closed", delivery_id)
            message = f"the body did not arrive within {self.settings.body_timeout:g} s"
            response = _error(408, "request_timeout", message)
            response.headers["connection"] = "close"
            return response
        if truncated:
            message = f"the body is larger than {cap} bytes"
            await self._quarantine(
                body, headers, received, delivery_id, "too_large", 413, None, workspace
            )
            return _error(413, "payload_too_large", message)
        read = read_body(body)
        parsed = read.parsed
        if read.problem is not None or not isinstance(parsed, dict):
            verification = verify_delivery(
                body, headers, keys, parsed, canonical=read.problem is None
            )
            reason = read.problem or "not_json"
            if reason in (MALFORMED_BODY, BAD_ENCODING):
                reason = "not_json"
            code, message = _REFUSALS.get(reason, _REFUSALS["not_json"])
            await self._quarantine(
                body, headers, received, delivery_id, reason, 400, verification, workspace
            )
            return _error(400, code, message if reason == "not_json" else read.detail)
        verification = verify_delivery(body, headers, keys, parsed)
        self._count_signature(verification, received, workspace)
        if not verification.ok:
            reason = verification.reason or "bad_signature"
            await self._quarantine(
                body, headers, received, delivery_id, reason, 401, verification, workspace
            )
            if reason == "unsigned":
                return _error(401, "missing_signature", "the delivery carries no signature")
            return _error(401, "invalid_signature", "the signature does not verify")
        skew = timedelta(seconds=self.settings.max_future_seconds)
        if (late := timestamp_problem(parsed, received, skew)) is not None:
            reason, detail = late
            await self._quarantine(
                body, headers, received, delivery_id, reason, 400, verification, workspace
            )
            return _error(400, reason, detail)
        scope = self.flat_scope if workspace is None else self.scopes[workspace]
        stored, refused = scope.admit(parsed)
        if refused is not None:
            reason, detail = refused
            await self._quarantine(
                body, headers, received, delivery_id, reason, 400, verification, workspace
            )
            return _error(400, reason, detail)
        learned = scope.learned
        if (
            learned is not None
            and workspace is not None
            and (failed := self._bind(workspace, learned))
        ):
            return failed
        extra = {"deliveryId": delivery_id, **tag, **_verification_fields(verification)}
        scrub = self.scrubbers[workspace]
        if scrub.active:
            assert scrub.config is not None and verification.secret_index is not None
            event, found = scrub.event(stored, parsed)
            record = archive_record(orjson.dumps(event), headers, stamp(received), **extra)
            record[SCRUB_FIELD] = scrub_record(
                found,
                scrub.config.mode,
                verifiedAt=stamp(received),
                scheme=SCHEME,
                keyId=key_id(keys[verification.secret_index]),
                workspaceId=stored,
            )
            line = scrub.seal(record)
        else:
            line = archive_line(body, headers, stamp(received), **extra)
        archive = self.archive if workspace is None else self.archives.get(workspace)
        assert archive is not None
        try:
            await archive.append(line, received.astimezone(UTC).date())
        except ArchiveError as exc:
            log.error("delivery %s not archived: %s", delivery_id, exc)
            return _error(503, "archive_unavailable", "the delivery could not be stored; retry")
        return _json(200, {"received": True, "deliveryId": delivery_id})

    def _bind(self, workspace: str, workspace_id: str) -> Response | None:
        """Keep the id a workspace's endpoint learned on first sight (durably, before the
        delivery is answered); every other endpoint now refuses it. A 503 if it cannot be
        kept: the sender retries, and nothing was archived."""
        scope = self.scopes[workspace]
        scope.learned = None
        learned = {**_read_bindings(self.bindings_path), workspace: workspace_id}
        try:
            _write_bindings(self.bindings_path, learned)
        except OSError as exc:
            scope.workspace_id = None
            log.error("workspace %s: its id could not be kept (%s)", workspace, exc)
            return _error(503, "archive_unavailable", "the delivery could not be stored; retry")
        log.warning("workspace %s: bound to workspace id %r (its first event)", workspace,
                    workspace_id)  # fmt: skip
        self.bound[workspace] = workspace_id
        for name, other in self.scopes.items():
            if name != workspace:
                other.taken[workspace_id] = workspace
        return None

    def _count_signature(
        self, verification: Verification, now: datetime, workspace: str | None = None
    ) -> None:
        """The signature alarm, per endpoint: counts per minute; when most of a minute's
        deliveries to an endpoint fail the check, one log line says its secrets are most
        likely wrong, naming the workspace and where they are set (at most once a minute
        while it lasts; the deliveries are still answered 401 and quarantined)."""
        window = self.alarms.setdefault(workspace, _AlarmWindow(now))
        if now - window.start >= _ALARM_EVERY:
            window.start, window.total, window.failed = now, 0, 0
        window.total += 1
        if verification.ok or verification.reason != "bad_signature":
            return
        window.failed += 1
        if window.alarmed_at is not None and now - window.alarmed_at < _ALARM_EVERY:
            return
        if workspace is None:
            keys, where, noun, whose = len(self.keys), self.settings.secret_hint, "deliveries", ""
        else:
            keys, noun = (
                len(self.workspace_keys[workspace]),
                f"deliveries to {self._path(workspace)}",
            )
            hint = self.settings.workspace_hints.get(workspace)
            where = f"workspace {workspace}'s webhook_secrets_env/_file" + (
                f" ({hint})" if hint else ""
            )
            whose = f"workspace {workspace}'s "
        alarm = signature_alarm(
            window.failed, window.total, keys, self.settings.alarm_share,
            noun=noun, where=where, since=f" since {stamp(window.start)}",
            whose=whose,
        )  # fmt: skip
        if alarm is not None:
            log.error("receiver: %s", alarm)
            window.alarmed_at = now

    def _path(self, workspace: str) -> str:
        return f"{self.settings.path.rstrip('/')}/{workspace}"

    async def _quarantine(
        self,
        body: bytes,
        headers: Mapping[str, str],
        received: datetime,
        delivery_id: str,
        reason: str,
        status: int,
        verification: Verification | None,
        workspace: str | None = None,
    ) -> None:
        """Keep a rejected delivery; the answer is the rejection even if this fails."""
        tag: dict[str, Any] = {} if workspace is None else {"workspace": workspace}
        scrub = self.scrubbers[workspace]
        if scrub.active:  # kept for an investigation, not replayable (D-PRIVACY-SCRUB-AT-LOAD)
            assert scrub.config is not None
            owner = self.bound.get(workspace) if workspace is not None else None
            try:
                parsed = orjson.loads(body)
            except orjson.JSONDecodeError:
                parsed = None
            if isinstance(parsed, dict):
                event, found = scrub.event(owner, parsed)
                body = orjson.dumps(event)
            else:
                body, found = scrub.text(owner, body)
            tag[SCRUB_FIELD] = scrub_record(found, scrub.config.mode, verified=False)
        line = archive_line(
            body,
            headers,
            stamp(received),
            deliveryId=delivery_id,
            reason=reason,
            status=status,
            truncated=reason == "too_large",
            **tag,
            **_verification_fields(verification),
        )
        assert self.quarantine is not None
        try:
            await self.quarantine.append(line, received.astimezone(UTC).date())
        except ArchiveError as exc:
            log.error("rejected delivery %s not quarantined: %s", delivery_id, exc)

    async def health(self, request: Request) -> Response:
        return _json(200, {"status": "ok"})


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    codes = {404: "not_found", 405: "method_not_allowed"}
    response = _error(exc.status_code, codes.get(exc.status_code, "http_error"), exc.detail)
    if exc.headers:
        response.headers.update(exc.headers)
    return response


async def _server_error(request: Request, exc: Exception) -> Response:
    return _error(500, "internal_error", "the receiver failed; retry")


def bindings_file(directory: Path) -> Path:
    """Where the receiver keeps the workspace ids it bound on first sight."""
    return directory / "workspaces" / ".workspace-ids"


def _read_bindings(path: Path) -> dict[str, str]:
    try:
        found = orjson.loads(path.read_bytes())
    except FileNotFoundError:
        return {}
    except (OSError, orjson.JSONDecodeError) as exc:
        raise ValueError(f"{path} cannot be read ({exc}); fix or remove it") from None
    if not isinstance(found, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in found.items()
    ):
        raise ValueError(f"{path} is not an object of workspace names to ids; fix or remove it")
    return found


def _write_bindings(path: Path, bindings: Mapping[str, str]) -> None:
    """Replace the bindings file atomically and durably (before the delivery is answered)."""
    import os

    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as out:
        out.write(orjson.dumps(dict(sorted(bindings.items()))))
        out.flush()
        os.fsync(out.fileno())
    os.replace(tmp, path)
    fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def workspace_archive(directory: Path, name: str) -> Path:
    """Where one workspace's accepted deliveries are archived (ingested with its secrets)."""
    return directory / "workspaces" / name


def create_receiver_app(settings: ReceiverSettings) -> Starlette:
    """The receiver: ``POST {settings.path}`` takes deliveries, ``GET /healthz`` says it is up."""
    settings.validate()
    receiver = _Receiver(settings)
    return Starlette(
        routes=[
            Route(settings.path, receiver.deliver, methods=["POST"]),
            Route(
                settings.path.rstrip("/") + "/{workspace}", receiver.deliver_to, methods=["POST"]
            ),
            Route("/healthz", receiver.health, methods=["GET"]),
        ],
        exception_handlers={HTTPException: _http_error, Exception: _server_error},
        lifespan=receiver.lifespan,
    )
