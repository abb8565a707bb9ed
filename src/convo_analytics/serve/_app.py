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

Tokens map to the workspaces they may read (decision D-SERVE-TOKENS): the
global token (``serve.token``) reads every workspace, a workspace's tokens
(``serve_tokens_env`` / ``serve_tokens_file`` of its ``[[workspaces]]``
table) read it alone. ``?workspace=NAME|ID`` picks one; a workspace that does
not exist and one the token may not read get the same 404, so a token cannot
learn others' names.
"""

from __future__ import annotations

import hmac
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import Annotated, Any

import duckdb
import orjson
from fastapi import Depends, FastAPI, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from convo_analytics import __version__
from convo_analytics.audit import AuditError, Auditor
from convo_analytics.config import WorkspaceConfig
from convo_analytics.contract._summary import SummaryResponse
from convo_analytics.errors import UserError
from convo_analytics.export import (
    ALL_WORKSPACES,
    find_workspace,
    warehouse_workspaces,
    workspace_summary,
)
from convo_analytics.publish import Snapshot, SnapshotUnreadable, current_snapshot
from convo_analytics.sandbox._errors import (
    ApiException,
    api_exception_handler,
    http_exception_handler,
    validation_exception_handler,
)
from convo_analytics.transform import NotTransformed

log = logging.getLogger(__name__)
bearer = HTTPBearer(auto_error=False, description="The token `convo serve` was started with")
RETRY_AFTER_BUSY = "5"


@dataclass(frozen=True, slots=True)
class Grant:
    """What a token may read: every workspace (``names`` is ``None``) or those named; and
    the token's name, what the audit trail records for it (never its value):
    ``serve.token``, or ``workspace:NAME#N``, the Nth token of a workspace's list."""

    names: frozenset[str] | None
    label: str = "serve.token"


def _grants(
    token: str | None, workspace_tokens: Mapping[str, Sequence[str]]
) -> list[tuple[bytes, Grant]]:
    """Each distinct token and its grant (a token of several workspaces reads them all;
    the global token reads everything whatever else lists it)."""
    per_token: dict[str, set[str]] = {}
    labels: dict[str, list[str]] = {}
    for name, tokens in workspace_tokens.items():
        for number, value in enumerate(tokens, 1):
            per_token.setdefault(value, set()).add(name)
            labels.setdefault(value, []).append(f"{name}#{number}")
    grants = [
        (value.encode("utf-8"), Grant(frozenset(names), "workspace:" + ",".join(labels[value])))
        for value, names in per_token.items()
        if value and value != token
    ]
    if token:
        grants.append((token.encode("utf-8"), Grant(None)))
    return grants


def create_serve_app(
    db_path: Path,
    token: str | None,
    published_dir: Path | None = None,
    *,
    workspace_tokens: Mapping[str, Sequence[str]] | None = None,
    configured: Sequence[WorkspaceConfig] = (),
    auditor: Auditor | None = None,
) -> FastAPI:
    """The summary API over the warehouse at ``db_path``.

    Requests must carry ``token`` (reads every workspace) or one of the
    ``workspace_tokens`` (workspace name -> its tokens; reads those workspaces).
    With ``published_dir`` it answers from the newest published snapshot when
    there is one (so a run writing the warehouse never delays it), else from
    the warehouse itself. With ``auditor`` every request a token was accepted for
    is recorded in the audit trail before it is answered (:class:`AuditRequests`).
    """
    grants = _grants(token, workspace_tokens or {})
    if not grants:
        raise UserError(
            "convo serve needs a token for its clients: set CONVO_SERVE_TOKEN or "
            "CONVO_SERVE_TOKEN_FILE (reads every workspace), or serve_tokens_env / "
            "serve_tokens_file on a [[workspaces]] table"
        )
    app = FastAPI(
        title="convo-analytics summary API",
        version=__version__,
        description="GET /v1/analytics/summary, answered from the convo-analytics warehouse.",
    )
    app.add_exception_handler(ApiException, api_exception_handler)
    app.add_exception_handler(StarletteHTTPException, http_exception_handler)
    app.add_exception_handler(RequestValidationError, validation_exception_handler)
    if auditor is not None:
        app.add_middleware(AuditRequests, auditor=auditor)

    def authenticate(
        request: Request,
        credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)],
    ) -> None:
        """Who may read what: the request's grant, kept on ``request.state``."""
        challenge = {"WWW-Authenticate": 'Bearer realm="convo-analytics"'}
        if credentials is None or not credentials.credentials:
            raise ApiException(
                401, "missing bearer token: send 'Authorization: Bearer <token>'", headers=challenge
            )
        given = credentials.credentials.encode("utf-8")
        found: Grant | None = None
        for expected, grant in grants:  # every one compared, in constant time each
            if hmac.compare_digest(given, expected):
                found = grant
        if found is None:
            raise ApiException(401, "invalid token", code="invalid_token", headers=challenge)
        request.state.grant = found
        request.state.audit_token = found.label

    @app.get("/healthz", include_in_schema=False)
    def healthz() -> dict[str, str]:
        return {"status": "ok"}

    @app.get(
        "/v1/analytics/summary",
        response_model=SummaryResponse,
        summary="Aggregated metrics for a date range, from the warehouse",
        responses={
            400: {"description": "A bad query, or no workspace named when the token reads several"},
            404: {"description": "No such workspace, or not one this token may read"},
        },
        dependencies=[Depends(authenticate)],
    )
    def analytics_summary(
        request: Request,
        from_: Annotated[date, Query(alias="from", description="first day, inclusive")],
        to: Annotated[date, Query(description="last day, inclusive")],
        tz: Annotated[str, Query(max_length=64, description="IANA time zone for days")] = "UTC",
        lowConfidenceThreshold: Annotated[float | None, Query(ge=0, le=1)] = None,
        workspace: Annotated[
            str | None,
            Query(
                max_length=200,
                description="The workspace: its configured name or its id (default: the "
                "token's only one); '*' with the global token rolls every workspace up",
            ),
        ] = None,
    ) -> Response:
        con, notice = (
            _open_published(published_dir) if published_dir else (_open_warehouse(db_path), None)
        )
        try:
            label, ids = _scope(con, request.state.grant, workspace, configured)
            body = workspace_summary(
                con,
                from_,
                to,
                tz,
                workspace_id=label,
                ids=ids,
                low_confidence_threshold=lowConfidenceThreshold,
            )
        except NotTransformed as exc:
            raise ApiException(503, str(exc), headers={"Retry-After": RETRY_AFTER_BUSY}) from None
        except UserError as exc:
            raise ApiException(400, str(exc).replace("--", "query parameter ")) from None
        finally:
            con.close()
        request.state.audit_rows = len(body.get("daily") or ())
        request.state.audit_workspace = label
        response = Response(orjson.dumps(body), media_type="application/json")
        if notice:
            response.headers[NOTICE_HEADER] = notice
        return response

    return app


class AuditRequests:
    """ASGI middleware: one audit record per request a token was accepted for (who: the
    token's name; what: the method, path and query; rows: the summary's days; the
    status), written before the answer is sent. When it cannot be written the answer is
    a 503 instead: nothing is read unrecorded. Requests refused for their token are not
    recorded (they read nothing, and recording them would let anyone grow the log)."""

    def __init__(self, app: ASGIApp, auditor: Auditor) -> None:
        self.app = app
        self.auditor = auditor

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        refused = False

        async def sending(message: Message) -> None:
            nonlocal refused
            if message["type"] == "http.response.start":
                state = scope.get("state") or {}
                if state.get("audit_token") is not None:
                    try:
                        await run_in_threadpool(self._record, scope, state, message["status"])
                    except AuditError as exc:
                        log.error("request not answered: %s", exc)
                        refused = True
                        failed = ApiException(
                            503,
                            "the audit trail cannot be written, so nothing is answered; "
                            "the server's log says why",
                            code="audit_unavailable",
                        )
                        answer = await api_exception_handler(Request(scope), failed)
                        await answer(scope, receive, send)
                        return
            elif refused:
                return  # the answer's body, replaced by the 503
            await send(message)

        await self.app(scope, receive, sending)

    def _record(self, scope: Scope, state: Mapping[str, Any], status: int) -> None:
        query = scope.get("query_string", b"").decode("latin-1")
        what = f"{scope['method']} {scope['path']}" + (f"?{query}" if query else "")
        headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]}
        self.auditor.record(
            "serve.request",
            what=what,
            rows=state.get("audit_rows"),
            workspace=state.get("audit_workspace"),
            token=state["audit_token"],
            headers=headers,
            detail={"status": status},
        )


def _scope(
    con: duckdb.DuckDBPyConnection,
    grant: Grant,
    wanted: str | None,
    configured: Sequence[WorkspaceConfig],
) -> tuple[str, list[str] | None]:
    """The summary's ``workspaceId`` and the ids it sums (``None``: every row) for this
    token and ``?workspace=``; 404 alike for a workspace unknown or not the token's."""
    known = warehouse_workspaces(con, configured)
    if grant.names is None:
        if wanted == ALL_WORKSPACES:
            return ALL_WORKSPACES, None
        if wanted is None and len(known) > 1:
            raise ApiException(
                400,
                f"this warehouse holds {len(known)} workspaces "
                f"({', '.join(w.name for w in known)}): name one with ?workspace=NAME, "
                "or ask for all of them together with ?workspace=*",
            )
        readable = known
    else:
        readable = [w for w in known if w.name in grant.names]
    if wanted is None:
        if grant.names is not None and len(grant.names) > 1:
            raise ApiException(
                400,
                "this token reads several workspaces "
                f"({', '.join(sorted(grant.names))}): name one with ?workspace=NAME",
            )
        if grant.names is None:
            return (known[0].workspace_id if known else "unknown"), None
        if not readable:
            raise ApiException(404, "nothing of this token's workspace is published yet")
        return readable[0].workspace_id, [readable[0].workspace_id]
    try:
        chosen = find_workspace(readable, wanted)
    except UserError:
        raise ApiException(404, f"workspace {wanted[:80]!r} not found") from None
    return chosen.workspace_id, [chosen.workspace_id]


#: The response header that says the figures are not of the newest data (a damaged newest
#: snapshot passed over, a lake publish unfinished); the body keeps the service's shape.
NOTICE_HEADER = "X-Convo-Data-Notice"


def _notice(snap: Snapshot) -> str | None:
    """One ASCII line for NOTICE_HEADER, or None when the snapshot is the newest whole one."""
    said = snap.unfinished or (
        f"the newest snapshot is damaged; figures of the previous one ({snap.passed_over})"
        if snap.passed_over
        else None
    )
    if not said:
        return None
    line = " ".join(str(said).split())
    return line.encode("ascii", "replace").decode("ascii")[:900]


def _open_published(published_dir: Path) -> tuple[duckdb.DuckDBPyConnection, str | None]:
    """The checked snapshot ``CURRENT`` names, read-only, and what it says of itself (an
    unfinished lake publish, a passed-over snapshot) for the answer's NOTICE_HEADER; a 503 in
    the error shape otherwise."""
    try:
        snap = current_snapshot(published_dir)
        if snap is None:
            raise ApiException(
                503,
                "nothing is published yet: run 'convo publish' (or 'convo run') first",
                headers={"Retry-After": RETRY_AFTER_BUSY},
            )
        return snap.connect(), _notice(snap)
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
