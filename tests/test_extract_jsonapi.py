"""A JSON:API service, checked then extracted as a new user would (issue 25), over real HTTP.

Records under ``data`` with their fields under ``attributes`` and the lead under
``relationships``, messages in a detail's ``included`` list, a relative
``links.next`` carrying ``page[size]``, ``meta.total``, ``filter[updated][gt]``, and a
summary answered as CSV (tests/foreign_more.py). ``convo extract --check
--write-config`` finds all of it; ``convo extract`` with that file loads every record
exactly once, nested objects and lists included, and the summary's days, which
reconcile with the warehouse; a listing that loses records is ``partial`` naming both
counts; no command shows a traceback.
"""

from __future__ import annotations

import tomllib
from collections.abc import Iterator
from typing import Any

import pytest

from extract_support import warehouse_rows
from foreign_more import serve, truth
from foreign_services import ForeignDomain
from test_extract_check import KEY, assert_exactly, convo, run_json


@pytest.fixture(scope="module")
def checked(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """The JSON:API service, checked once, with the configuration the check wrote."""
    tmp_path = tmp_path_factory.mktemp("jsonapi")
    domain = ForeignDomain()
    with serve(domain, "jsonapi", KEY) as (server, app):
        config = tmp_path / "convo.toml"
        done = convo(
            "extract", "--check", "--base-url", server.url, "--rate-limit", "none",
            "--write-config", str(config), cwd=tmp_path,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr[-2000:]
        assert "Traceback" not in done.stderr
        yield {"domain": domain, "app": app, "config": config, "dir": tmp_path,
               "report": done.stdout}  # fmt: skip


def test_the_check_finds_paths_brackets_totals_and_the_csv_summary(
    checked: dict[str, Any],
) -> None:
    written = tomllib.loads(checked["config"].read_text())
    streams = written["extract"]["streams"]
    conversations = streams["conversations"]
    assert conversations["records"] == "data"
    assert conversations["updated"] == "attributes.updated", "a dotted stream key"
    assert conversations["created"] == "attributes.created"
    assert conversations["paginator"] == {
        "type": "next_url", "limit_param": "page[size]", "total_path": "meta.total",
    }, "the page size from the service's own links, the body total it saw"  # fmt: skip
    assert conversations["incremental"]["param"] == "filter[updated][gt]"
    assert conversations["detail"] == {
        "path": "/v1/conversations/{id}", "params": {"include": "messages"},
        "record": "data", "messages": "included",
    }  # fmt: skip
    assert streams["leads"]["paginator"]["total_path"] == "meta.total"
    fields = written["extract"]["fields"]
    assert fields["messages.created_at"] == "attributes.created"
    assert fields["messages.latency_ms"] == "attributes.trace.latencyMs"
    assert fields["conversations.lead_id"] == "relationships.lead.data.id"
    assert fields["service_summaries.date"] == "day"
    assert fields["service_summaries.conversations"] == "conversations_started"
    report = checked["report"]
    assert "a total of 140 records at 'meta.total'" in report
    assert "answers CSV with the columns day, conversations_started" in report


def test_the_written_config_loads_everything_and_the_summary_reconciles(
    checked: dict[str, Any],
) -> None:
    cwd, db = checked["dir"], checked["dir"] / "w.duckdb"
    first = run_json("extract", "--db", str(db), "--rate-limit", "none", cwd=cwd)
    assert first["exit"] == 0, first
    streams = first["streams"]
    for name in ("conversations", "leads", "summary"):
        assert streams[name]["status"] == "ok", streams[name]
        assert streams[name]["warnings"] == [], streams[name]["warnings"]
    assert streams["summary"]["records"] == 30, "every day asked for is a typed day"
    assert_exactly(db, truth(checked["domain"], "jsonapi"))
    nested = warehouse_rows(
        db,
        "SELECT count(*) FILTER (WHERE latency_ms IS NOT NULL), count(*) FILTER "
        "(WHERE role = 'assistant') FROM messages",
    )
    assert nested[0][0] == nested[0][1] > 0, "a field two objects deep in each message"
    raw = warehouse_rows(
        db, "SELECT payload->'$.attributes.tags' FROM raw_conversations WHERE id = 'C1001'"
    )
    assert raw and raw[0][0] is not None, "the record's lists are kept raw"
    transform = convo("transform", "--db", str(db), cwd=cwd)
    assert transform.returncode == 0, transform.stderr[-2000:]
    assert "of the service's own summary match" in transform.stderr
    for done in (first["stderr"], transform.stderr):
        assert "Traceback" not in done


def test_each_shortfall_is_partial_with_both_counts(checked: dict[str, Any]) -> None:
    cwd, db, app = checked["dir"], checked["dir"] / "short.duckdb", checked["app"]
    app.knobs.hidden.update({"conversations": 2, "leads": 3})
    try:
        short = run_json("extract", "--db", str(db), "--rate-limit", "none", cwd=cwd)
    finally:
        app.knobs.hidden.clear()
    again = run_json("extract", "--db", str(db), "--rate-limit", "none", cwd=cwd)
    assert short["exit"] == 1
    conversations, leads = short["streams"]["conversations"], short["streams"]["leads"]
    assert conversations["status"] == leads["status"] == "partial"
    assert "reported 140 records (meta.total) but 138 distinct records" in conversations["error"]
    assert "reported 61 records (meta.total) but 58 distinct records" in leads["error"]
    assert short["streams"]["summary"]["status"] == "ok", "the other streams load"
    assert conversations["bookmarkAfter"] is None, "a first run that fell short holds none"
    assert again["exit"] == 0, again["streams"]
    assert again["streams"]["leads"]["records"] == 61, "the next run reads all again"
    for done in (short["stderr"], again["stderr"]):
        assert "Traceback" not in done and KEY not in done
