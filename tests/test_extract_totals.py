"""Totals a service reports are read and compared (issue 25, decision D-EXTRACT-TOTALS).

``X-Total-Count``, ``Content-Range`` (``items 0-19/61``, ``items */61``, ``0-19/61``) and a
body path: a run that read fewer distinct records than the total is ``partial`` naming both
counts, with its bookmark held; an incremental run whose total counts the whole collection
(which the warehouse holds) is not. Over real HTTP, against tests/foreign_more.py's
``ranges`` service (``skip``/``take``, ``Content-Range``) and a small list of its own.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import duckdb
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from convo_analytics._serving import ServerThread
from convo_analytics.extract import ExtractResult, load_source
from extract_support import extract, warehouse_rows
from foreign_more import serve
from foreign_services import ForeignDomain

KEY = "fk_totals_0123456789"
#: How a run reads the ranges service's leads, as `convo extract --check` writes it.
LEADS = {
    "path": "/v1/leads",
    "params": {},
    "records": "",
    "updated": "modified_at",
    "paginator": {"type": "offset", "offset_param": "skip", "limit_param": "take"},
    "page_size": 40,
    "incremental": {"param": "modified_since"},
}

#: The lead fields the service has none of (nothing to warn about).
ABSENT = {
    f"leads.{c}": ""
    for c in ("qualified_at", "phone", "name", "company", "contact_fields", "source", "metadata",
              "conversation_url")
}  # fmt: skip


def _leads(
    url: str, db: Path, paginator: dict[str, Any] | None = None, records: str = "", **kw: Any
) -> ExtractResult:
    spec = {**LEADS, "paginator": paginator or LEADS["paginator"], "records": records}
    source = load_source({"streams": {"leads": spec}, "fields": ABSENT}, {})
    return extract(url, KEY, db, streams=("leads",), source=source, **kw)


def _bookmark(db: Path) -> Any:
    rows = warehouse_rows(db, "SELECT high_water_mark FROM bookmarks WHERE stream = 'leads'")
    return rows[0][0] if rows else None


@pytest.mark.parametrize(
    ("value", "total"),
    [
        ("61", 61),
        ("items 0-39/137", 137),
        ("items */61", 61),
        ("0-24/3573", 3573),  # PostgREST: no unit
        (" items 0 - 39 / 137 ", 137),
        ("*/0", 0),
        ("items 0-39/*", None),  # a length the service does not know
        ("bytes 0-99/5000", None),  # bytes are no records
        ("many", None),
    ],
)
def test_total_header_formats(value: str, total: int | None) -> None:
    from convo_analytics.extract._paging import total_in_header

    assert total_in_header(value) == total


def test_a_short_read_is_partial_naming_both_counts_and_holds_the_bookmark(
    tmp_path: Path,
) -> None:
    domain = ForeignDomain()
    db = tmp_path / "w.duckdb"
    with serve(domain, "ranges", KEY) as (server, app):
        first = _leads(server.url, db)
        assert first.ok, first.to_json()
        assert first.streams["leads"].records == 61
        mark = _bookmark(db)
        assert mark is not None
        app.knobs.hidden["leads"] = 4  # the listing loses 4 records its Content-Range still counts
        short = _leads(server.url, db, full_refresh=True)
        held = _bookmark(db)
        one_page = _leads(server.url, tmp_path / "single.duckdb", {"type": "single"})
    leads = short.streams["leads"]
    assert leads.status == "partial" and not short.ok
    assert "the service reported 61 records (Content-Range) but 57 distinct records" in (
        leads.error or ""
    ), leads.error
    assert "bookmark is held" in (leads.error or "")
    assert held == mark, "a short read leaves the bookmark where it was"
    single = one_page.streams["leads"]
    assert single.status == "partial", "one page of 20 read of the 61 counted"
    assert "61 records (Content-Range) but 20 distinct records" in (single.error or "")
    assert _bookmark(tmp_path / "single.duckdb") is None, "a first run that fell short: none"


def test_an_incremental_run_does_not_cry_wolf_at_a_whole_collection_total(tmp_path: Path) -> None:
    """A service whose total ignores the incremental filter counts every lead; the warehouse
    holds them all, so the few read are no shortfall. Holding fewer than that total is one."""
    domain = ForeignDomain()
    db = tmp_path / "w.duckdb"
    with serve(domain, "ranges", KEY) as (server, app):
        app.knobs.total_of_all = True
        assert _leads(server.url, db).ok
        again = _leads(server.url, db)
        con_rows = warehouse_rows(db, "SELECT count(*) FROM leads")
        con = duckdb.connect(str(db))
        con.execute("DELETE FROM leads WHERE id IN (SELECT id FROM leads ORDER BY id LIMIT 3)")
        con.close()
        third = _leads(server.url, db)
    assert con_rows == [(61,)]
    inc = again.streams["leads"]
    assert again.ok and inc.status == "ok", inc.error
    assert inc.records < 61, "an incremental run reads only what changed"
    assert inc.warnings == []
    short = third.streams["leads"]
    assert short.status == "partial"
    assert "61 records (Content-Range)" in (short.error or "")
    assert "the warehouse holds 58 in all" in (short.error or ""), short.error


def _counted_app(header: str, value: str | None, body_total: Any = None) -> Starlette:
    """20 records in one page with a total that says 30, given in ``header`` or the body."""

    def items(request: Request) -> Response:
        records = [{"id": f"r{i}", "modified_at": f"2026-11-01T00:00:{i:02d}Z"} for i in range(20)]
        body: dict[str, Any] = {"items": records}
        if body_total is not None:
            body["meta"] = {"count": body_total}
        return JSONResponse(body, headers={header: value} if value else {})

    return Starlette(routes=[Route("/v1/leads", items)])


@pytest.mark.parametrize(
    ("header", "value", "configured"),
    [
        ("X-Total-Count", "30", {}),
        ("Content-Range", "items 0-19/30", {}),
        ("Content-Range", "0-19/30", {}),
        ("Content-Range", "items 0-19/30", {"total_header": "Content-Range"}),
        ("X-Records", "30", {"total_header": "X-Records"}),
    ],
)
def test_every_total_format_and_setting_takes_effect(
    header: str, value: str, configured: dict[str, str], tmp_path: Path
) -> None:
    with ServerThread(_counted_app(header, value)) as server:
        result = _leads(
            server.url, tmp_path / "w.duckdb", {"type": "single", **configured}, "items"
        )
    leads = result.streams["leads"]
    assert leads.status == "partial", leads.to_json()
    assert f"reported 30 records ({header}) but 20 distinct records" in (leads.error or "")


def test_a_body_total_at_a_configured_path_and_one_found_nowhere(tmp_path: Path) -> None:
    with ServerThread(_counted_app("X-Other", None, body_total="30")) as server:
        at_path = _leads(
            server.url,
            tmp_path / "a.duckdb",
            {"type": "single", "total_path": "meta.count"},
            "items",
        )
        nowhere = _leads(
            server.url,
            tmp_path / "b.duckdb",
            {"type": "single", "total_header": "X-Total"},
            "items",
        )
    assert at_path.streams["leads"].status == "partial"
    assert "reported 30 records (meta.count) but 20" in (at_path.streams["leads"].error or "")
    missing = nowhere.streams["leads"]
    assert missing.status == "ok" and missing.gaps == [], missing.to_json()
    assert "total_header 'X-Total' was in none of the 1 answers" in missing.warnings[0]
