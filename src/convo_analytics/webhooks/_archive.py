"""The webhook archive's line format: one delivery a line, as it was received.

A line is a JSON object: ``receivedAt`` (ISO 8601 UTC), ``headers`` (names in
lower case), and the raw body as ``body`` (when it is UTF-8) or ``bodyBase64``
(when it is not), plus whatever the writer adds (the receiver records its
verification result). The sandbox writes its generated history in this shape
and the receiver archives live deliveries in it, so one ingest reads both.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from typing import Any

import orjson


def archive_line(body: bytes, headers: Mapping[str, str], received_at: str, **extra: Any) -> bytes:
    return orjson.dumps(archive_record(body, headers, received_at, **extra)) + b"\n"


def archive_record(
    body: bytes, headers: Mapping[str, str], received_at: str, **extra: Any
) -> dict[str, Any]:
    """The object an archive line holds (see :func:`archive_line`)."""
    record: dict[str, Any] = {
        "receivedAt": received_at,
        "headers": {k.lower(): v for k, v in headers.items()},
    }
    try:
        record["body"] = body.decode("utf-8")
    except UnicodeDecodeError:
        record["bodyBase64"] = base64.b64encode(body).decode("ascii")
    record.update(extra)
    return record


def parse_archive_line(line: bytes) -> tuple[bytes, dict[str, str], dict[str, Any]]:
    """(raw body, headers, the whole record) of an archived delivery line."""
    record = orjson.loads(line)
    if not isinstance(record, dict):
        raise ValueError("an archive line must be a JSON object")
    if "body" in record:
        body = str(record["body"]).encode("utf-8")
    elif "bodyBase64" in record:
        body = base64.b64decode(record["bodyBase64"], validate=True)
    else:
        raise ValueError("an archive line needs 'body' or 'bodyBase64'")
    headers = {str(k).lower(): str(v) for k, v in dict(record.get("headers") or {}).items()}
    return body, headers, record
