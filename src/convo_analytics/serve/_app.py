"""`convo serve`: GET /v1/analytics/summary answered from the warehouse.

Tools built for the service can point at us instead: same path, same query
parameters, same body, same error shape, behind a bearer token. The warehouse
is opened read-only for each request and closed again, so the server never
holds a lock a nightly run would wait for. Given the published-snapshot
folder (as `convo serve` always is) it reads only the snapshot ``CURRENT``
names, checked by the one reader (``publish.current_snapshot``: the previous
good snapshot when the newest is damaged), and answers 503 with the error
body until there is one it can read; without a folder (a library use) it
reads the warehouse, 503 while a run writes it.
"""

from __future__ import annotations

import hmac
from datetime import date
from pathlib import Path
from typing import Annotated

import duckdb
import orjson
from fastapi import Depends, FastAPI, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.responses import Response

from convo_analytics import __version__
from convo_analytics.contract._summary import SummaryResponse
from convo_analytics.errors import UserError
from convo_analytics.export import export_summary
from convo_analytics.publish import SnapshotUnreadable, current_snapshot
from convo_analytics.sandbox._errors import (
    ApiException,
    api_exception_handler,
    http_exception_handler,
    validation_exception_handler,
)
from convo_analytics.transform import NotTransformed

bearer = HTTPBearer(auto_error=False, description="The token `convo serve` was started with")
RETRY_AFTER_BUSY = "5"


def create_serve_app(db_path: Path, token: str, published_dir: Path | None = None) -> FastAPI:
    """The summary API over the warehouse at ``db_path``; requests must carry ``token``.

    With ``published_dir`` it answers from the newest published snapshot when
    there is one (so a run writing the warehouse never delays it), else from
    the warehouse itself.
    """
    if not token:
        raise UserError(
            "convo serve needs a token for its clients: set CONVO_SERVE_TOKEN or "
            "CONVO_SERVE_TOKEN_FILE"
        )
    expected = token.encode("utf-8")
    app = FastAPI(
        title="convo-analytics summary API",
        version=__version__,
        description="GET /v1/analytics/summary, answered from the convo-analytics warehouse.",
    )
    app.add_exception_handler(ApiException, api_exception_handler)
    app.add_exception_handler(StarletteHTTPException, http_exception_handler)
    app.add_exception_handler(RequestValidationError, validation_exception_handler)

    def authenticate(
        credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)],
    ) -> None:
        challenge = {"WWW-Authenticate": 'Bearer realm="convo-analytics"'}
        if credentials is None or not credentials.credentials:
            raise ApiException(
                401, "missing bearer token: send 'Authorization: Bearer <token>'", headers=challenge
            )
        if not hmac.compare_digest(credentials.credentials.encode("utf-8"), expected):
            raise ApiException(401, "invalid token", code="invalid_token", headers=challenge)

    @app.get("/healthz", include_in_schema=False)
    def healthz() -> dict[str, str]:
        return {"status": "ok"}

    @app.get(
        "/v1/analytics/summary",
        response_model=SummaryResponse,
        summary="Aggregated metrics for a date range, from the warehouse",
        dependencies=[Depends(authenticate)],
    )
    def analytics_summary(
        request: Request,
        from_: Annotated[date, Query(alias="from", description="first day, inclusive")],
        to: Annotated[date, Query(description="last day, inclusive")],
        tz: Annotated[str, Query(max_length=64, description="IANA time zone for days")] = "UTC",
        lowConfidenceThreshold: Annotated[float | None, Query(ge=0, le=1)] = None,
    ) -> Response:
        con = _open_published(published_dir) if published_dir else _open_warehouse(db_path)
        try:
            body = export_summary(
                con, from_, to, tz, low_confidence_threshold=lowConfidenceThreshold
            )
        except NotTransformed as exc:
            raise ApiException(503, str(exc), headers={"Retry-After": RETRY_AFTER_BUSY}) from None
        except UserError as exc:
            raise ApiException(400, str(exc).replace("--", "query parameter ")) from None
        finally:
            con.close()
        return Response(orjson.dumps(body), media_type="application/json")

    return app


def _open_published(published_dir: Path) -> duckdb.DuckDBPyConnection:
    """The checked snapshot ``CURRENT`` names, read-only; a 503 in the error shape otherwise."""
    try:
        snap = current_snapshot(published_dir)
        if snap is None:
            raise ApiException(
                503,
                "nothing is published yet: run 'convo publish' (or 'convo run') first",
                headers={"Retry-After": RETRY_AFTER_BUSY},
            )
        return snap.connect()
    except SnapshotUnreadable as exc:
        raise ApiException(503, str(exc)) from None


def _open_warehouse(db_path: Path) -> duckdb.DuckDBPyConnection:
    """The warehouse itself, read-only (a library use without a publish folder)."""
    if not db_path.exists():
        raise ApiException(503, "there is no warehouse yet: run the pipeline first")
    try:
        con = duckdb.connect(str(db_path), read_only=True)
    except (duckdb.IOException, duckdb.ConnectionException):
        raise ApiException(
            503,
            "the warehouse is being written by a pipeline run; retry shortly",
            headers={"Retry-After": RETRY_AFTER_BUSY},
        ) from None
    con.execute("SET TimeZone = 'UTC'")
    return con
