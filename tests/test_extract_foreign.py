"""A service shaped unlike the sandbox: other paging styles, field names, offsets; drift."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from convo_analytics._serving import ServerThread
from extract_support import extract, warehouse_rows

BASE = datetime(2026, 11, 1, tzinfo=UTC)
KEY = "foreign-key-123456"


class ForeignService:
    """Conversations page by page number (``items``, ``per_page``); leads as a bare list
    with Link headers; timestamps with +02:00 offsets; ``conversation_id`` as the id."""

    def __init__(self, n: int) -> None:
        self.conversations = {
            f"c-{i:04d}": {
                "conversation_id": f"c-{i:04d}",
                "channel": "web" if i % 3 else "sms",
                "status": "resolved",
                "created_at": self._stamp(i),
                "updated_at": self._stamp(i, minutes=5),
            }
            for i in range(n)
        }
        self.leads = [
            {"lead_id": f"l-{i}", "score": i % 100, "modified": self._stamp(i)}
            for i in range(n // 3)
        ]
        self.requests: list[str] = []
        self.app = Starlette(routes=[
            Route("/v1/conversations", self.list_conversations),
            Route("/v1/conversations/{cid}", self.detail),
            Route("/v1/leads", self.list_leads),
        ])  # fmt: skip

    @staticmethod
    def _stamp(i: int, minutes: int = 0) -> str:
        """BASE + i + minutes, written in a +02:00 offset."""
        plus_two = (BASE + timedelta(minutes=i + minutes, hours=2)).replace(tzinfo=None)
        return plus_two.isoformat() + "+02:00"

    def _authorised(self, request: Request) -> bool:
        self.requests.append(str(request.url))
        return request.headers.get("authorization") == f"Bearer {KEY}"

    def list_conversations(self, request: Request) -> Response:
        if not self._authorised(request):
            return JSONResponse({"message": "no"}, status_code=401)
        per_page = min(int(request.query_params.get("per_page", "20")), 40)
        page = int(request.query_params.get("page", "1"))
        since = request.query_params.get("updated_since")
        rows = sorted(
            self.conversations.values(), key=lambda r: (r["updated_at"], r["conversation_id"])
        )
        if since:
            cut = datetime.fromisoformat(since.replace("Z", "+00:00"))
            rows = [r for r in rows if datetime.fromisoformat(r["updated_at"]) >= cut]
        pages = max(1, -(-len(rows) // per_page))
        chunk = rows[(page - 1) * per_page : page * per_page]
        return JSONResponse({"items": chunk, "page": page, "total_pages": pages})

    def detail(self, request: Request) -> Response:
        if not self._authorised(request):
            return JSONResponse({"message": "no"}, status_code=401)
        record = self.conversations.get(request.path_params["cid"])
        if record is None:
            return JSONResponse({"message": "gone"}, status_code=404)
        return JSONResponse(
            {
                **record,
                "messages": [
                    {"id": record["conversation_id"] + "-m1", "role": "user", "text": "hallo"}
                ],
            }
        )

    def list_leads(self, request: Request) -> Response:
        if not self._authorised(request):
            return JSONResponse({"message": "no"}, status_code=401)
        offset = int(request.query_params.get("offset", "0"))
        size = min(int(request.query_params.get("per_page", "25")), 25)
        chunk = self.leads[offset : offset + size]
        headers = {}
        if offset + size < len(self.leads):
            nxt = request.url.include_query_params(offset=offset + size)
            headers["Link"] = f'<{nxt}>; rel="next"'
        return JSONResponse(chunk, headers=headers)


def _run(service: ForeignService, url: str, db: Path) -> Any:
    return extract(
        url,
        KEY,
        db,
        streams=("conversations", "leads"),
        page_size=40,
        updated_since_param="updated_since",
        pagination_options={"limit_param": "per_page"},
    )


def test_other_styles_names_and_offsets_are_detected_and_loaded(tmp_path: Path) -> None:
    service = ForeignService(230)
    db = tmp_path / "w.duckdb"
    with ServerThread(service.app) as server:
        result = _run(service, server.url, db)
    assert result.ok, result.to_json()
    conv, leads = result.streams["conversations"], result.streams["leads"]
    assert conv.pagination == "page_number" and leads.pagination == "link_header"
    assert conv.records == conv.details == 230 and leads.records == len(service.leads)
    rows = warehouse_rows(db, "SELECT id, updated_at FROM conversations ORDER BY id")
    assert [r[0] for r in rows] == sorted(service.conversations)
    first = service.conversations["c-0000"]
    assert rows[0][1] == datetime.fromisoformat(first["updated_at"]).astimezone(UTC)
    raw = warehouse_rows(
        db,
        "SELECT payload->>'$.channel', payload->>'$.status' "
        "FROM raw_conversation_details WHERE id = 'c-0001'",
    )
    assert raw == [("web", "resolved")], "fields we have no typed column for are kept raw"
    assert warehouse_rows(db, "SELECT count(*) FROM leads") == [(len(service.leads),)]
    assert warehouse_rows(db, "SELECT count(*) FROM messages") == [(230,)]


def test_drift_is_reported_in_the_run_log_not_raised(tmp_path: Path) -> None:
    service = ForeignService(60)
    db = tmp_path / "w.duckdb"
    with ServerThread(service.app) as server:
        assert _run(service, server.url, db).ok
        for i, record in enumerate(service.conversations.values()):
            record["priority"] = "high"  # new
            record["channel"] = 7  # retyped
            del record["status"]  # missing
            record["updated_at"] = ForeignService._stamp(i, minutes=500)
        second = _run(service, server.url, db)
    assert second.ok
    drift = second.streams["conversations"].drift
    assert any("new field 'priority'" in line for line in drift)
    assert any("missing field 'status'" in line for line in drift)
    assert "field 'channel' changed type: string -> integer" in drift
    logged = warehouse_rows(
        db,
        "SELECT drift FROM extract_runs WHERE stream = 'conversations' "
        "ORDER BY started_at DESC LIMIT 1",
    )[0][0]
    assert "priority" in logged
