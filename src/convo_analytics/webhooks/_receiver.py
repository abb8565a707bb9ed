"""The webhook receiver: an ASGI app that archives every delivery before acknowledging it.

A delivery is answered 2xx only once its line (raw body, headers, time of
receipt, verification result) is fsynced to the archive, so an acknowledged
delivery survives any crash; the sender retries anything else. Checks run
cheapest first: size (413), JSON (400), signature (401). A rejected delivery
is not dropped either: it goes to the quarantine archive with its reason (a
body over the cap is kept truncated to the cap), so that a misconfigured
secret or a sender bug can be investigated and replayed later.

TLS is terminated in front of the receiver; it speaks plain HTTP itself.
Credential headers (``Authorization``, ``Cookie``) are archived masked, and the
webhook secrets never appear in an answer, a log line or a ``repr``.
"""

from __future__ import annotations

import contextlib
import logging
import secrets as _random
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from convo_analytics.webhooks._archive import archive_line
from convo_analytics.webhooks._archive_writer import ArchiveError, ArchiveWriter, utc_now
from convo_analytics.webhooks._verify import Verification, secret_keys, verify_delivery

__all__ = ["ACCEPTED_PREFIX", "QUARANTINE_PREFIX", "ReceiverSettings", "create_receiver_app"]

log = logging.getLogger(__name__)

ACCEPTED_PREFIX = "deliveries"
QUARANTINE_PREFIX = "quarantine"
_MASKED_HEADERS = frozenset({"authorization", "proxy-authorization", "cookie"})
_DELIVERY_HEADER = "x-convo-delivery"


@dataclass(frozen=True, slots=True)
class ReceiverSettings:
    """Where to archive, which secrets verify (several during rotation), what to accept."""

    archive_dir: Path
    secrets: list[str] = field(repr=False)
    max_body_bytes: int = 1 << 20
    path: str = "/webhooks"
    #: The time of receipt (UTC); tests move it across midnight.
    clock: Callable[[], datetime] = field(default=utc_now, repr=False, compare=False)

    def validate(self) -> None:
        if not secret_keys(self.secrets):
            raise ValueError("at least one webhook secret is needed to verify deliveries")
        if self.max_body_bytes < 1:
            raise ValueError("max_body_bytes must be at least 1")
        if not self.path.startswith("/"):
            raise ValueError(f"path {self.path!r} must start with '/'")


def _json(status: int, payload: Mapping[str, Any]) -> Response:
    return Response(orjson.dumps(payload), status_code=status, media_type="application/json")


def _error(status: int, code: str, message: str) -> Response:
    return _json(status, {"error": {"code": code, "message": message}})


def _stamp(moment: datetime) -> str:
    """ISO 8601 UTC with milliseconds, as the sandbox writes its times."""
    utc = moment.astimezone(UTC)
    return utc.strftime("%Y-%m-%dT%H:%M:%S.") + f"{utc.microsecond // 1000:03d}Z"


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


def _headers(request: Request) -> dict[str, str]:
    out = {}
    for name, value in request.headers.items():
        out[name] = "***" if name in _MASKED_HEADERS else value
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


class _Receiver:
    """The app's state: settings, HMAC keys and the two archives (opened by the lifespan)."""

    def __init__(self, settings: ReceiverSettings) -> None:
        self.settings = settings
        self.keys = secret_keys(settings.secrets)
        self.archive: ArchiveWriter | None = None
        self.quarantine: ArchiveWriter | None = None

    @contextlib.asynccontextmanager
    async def lifespan(self, app: Starlette) -> AsyncIterator[None]:
        directory, clock = self.settings.archive_dir, self.settings.clock
        async with (
            ArchiveWriter(directory, ACCEPTED_PREFIX, clock) as archive,
            ArchiveWriter(directory / "quarantine", QUARANTINE_PREFIX, clock) as quarantine,
        ):
            self.archive, self.quarantine = archive, quarantine
            try:
                yield
            finally:
                self.archive = self.quarantine = None

    async def deliver(self, request: Request) -> Response:
        received = self.settings.clock()
        cap = self.settings.max_body_bytes
        body, truncated = await _read_capped(request, cap)
        headers = _headers(request)
        delivery_id = _delivery_id(headers)
        if truncated:
            message = f"the body is larger than {cap} bytes"
            await self._quarantine(body, headers, received, delivery_id, "too_large", 413, None)
            return _error(413, "payload_too_large", message)
        try:
            parsed = orjson.loads(body)
        except orjson.JSONDecodeError:
            parsed = None
        if not isinstance(parsed, dict):
            verification = verify_delivery(body, headers, self.keys, parsed)
            await self._quarantine(
                body, headers, received, delivery_id, "not_json", 400, verification
            )
            return _error(400, "invalid_json", "the body is not a JSON object")
        verification = verify_delivery(body, headers, self.keys, parsed)
        if not verification.ok:
            reason = verification.reason or "bad_signature"
            await self._quarantine(body, headers, received, delivery_id, reason, 401, verification)
            if reason == "unsigned":
                return _error(401, "missing_signature", "the delivery carries no signature")
            return _error(401, "invalid_signature", "the signature does not verify")
        line = archive_line(
            body,
            headers,
            _stamp(received),
            deliveryId=delivery_id,
            **_verification_fields(verification),
        )
        assert self.archive is not None
        try:
            await self.archive.append(line, received.astimezone(UTC).date())
        except ArchiveError as exc:
            log.error("delivery %s not archived: %s", delivery_id, exc)
            return _error(503, "archive_unavailable", "the delivery could not be stored; retry")
        return _json(200, {"received": True, "deliveryId": delivery_id})

    async def _quarantine(
        self,
        body: bytes,
        headers: Mapping[str, str],
        received: datetime,
        delivery_id: str,
        reason: str,
        status: int,
        verification: Verification | None,
    ) -> None:
        """Keep a rejected delivery; the answer is the rejection even if this fails."""
        line = archive_line(
            body,
            headers,
            _stamp(received),
            deliveryId=delivery_id,
            reason=reason,
            status=status,
            truncated=reason == "too_large",
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


def create_receiver_app(settings: ReceiverSettings) -> Starlette:
    """The receiver: ``POST {settings.path}`` takes deliveries, ``GET /healthz`` says it is up."""
    settings.validate()
    receiver = _Receiver(settings)
    return Starlette(
        routes=[
            Route(settings.path, receiver.deliver, methods=["POST"]),
            Route("/healthz", receiver.health, methods=["GET"]),
        ],
        exception_handlers={HTTPException: _http_error, Exception: _server_error},
        lifespan=receiver.lifespan,
    )
