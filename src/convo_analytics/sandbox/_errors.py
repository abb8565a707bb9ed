"""One error body for every error the sandbox answers (the interface does not show one)."""

from __future__ import annotations

import uuid
from typing import Any

import orjson
from fastapi import Request
from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.responses import Response

_STATUS_CODES = {
    400: "invalid_request",
    401: "unauthorized",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    409: "conflict",
    413: "payload_too_large",
    415: "unsupported_media_type",
    422: "validation_failed",
    429: "rate_limited",
    500: "internal_error",
    503: "unavailable",
}


class ApiException(Exception):
    def __init__(
        self,
        status: int,
        message: str,
        code: str | None = None,
        details: list[dict[str, Any]] | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.code = code or _STATUS_CODES.get(status, "error")
        self.message = message
        self.details = details
        self.headers = headers or {}


def request_id(request: Request) -> str:
    rid = getattr(request.state, "request_id", None)
    if rid is None:
        rid = request.state.request_id = f"req_{uuid.uuid4().hex[:16]}"
    return str(rid)


def error_response(
    request: Request,
    status: int,
    message: str,
    code: str | None = None,
    details: list[dict[str, Any]] | None = None,
    headers: dict[str, str] | None = None,
) -> Response:
    rid = request_id(request)
    body: dict[str, Any] = {
        "code": code or _STATUS_CODES.get(status, "error"),
        "message": message,
        "requestId": rid,
    }
    if details:
        body["details"] = details
    return Response(
        orjson.dumps({"error": body}),
        status_code=status,
        media_type="application/json",
        headers={**(headers or {}), "X-Request-Id": rid},
    )


async def api_exception_handler(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, ApiException)
    return error_response(request, exc.status, exc.message, exc.code, exc.details, exc.headers)


async def http_exception_handler(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, StarletteHTTPException)
    message = {404: "no such endpoint", 405: "method not allowed on this endpoint"}.get(
        exc.status_code, str(exc.detail)
    )
    return error_response(request, exc.status_code, message, headers=dict(exc.headers or {}))


async def validation_exception_handler(request: Request, exc: Exception) -> Response:
    """Query and path problems are 400s; a body that parses but does not fit is a 422."""
    assert isinstance(exc, RequestValidationError)
    details = []
    in_body = False
    for err in exc.errors():
        loc = [str(part) for part in err.get("loc", ())]
        in_body = in_body or (bool(loc) and loc[0] == "body")
        details.append(
            {
                "field": ".".join(loc[1:]) or loc[0] if loc else "",
                "in": loc[0] if loc else "",
                "problem": str(err.get("msg", "invalid")),
            }
        )
    status = 422 if in_body and not any(d["problem"].startswith("JSON") for d in details) else 400
    first = details[0] if details else {"field": "", "problem": "invalid request"}
    message = f"{first['in']} field '{first['field']}': {first['problem']}"
    return error_response(request, status, message, details=details)
