"""`convo extract --check --write-config` then `convo extract`: the two steps to a working
extraction from a service shaped unlike the sandbox (issue 13), over real HTTP.

Each foreign shape (tests/foreign_services.py) is checked, the findings written as
convo.toml tables, and an extraction run with them as written: every conversation,
message and lead lands exactly once with its typed columns filled, lists are read in
several pages, a re-run adds nothing, and a change is picked up incrementally.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from extract_support import warehouse_rows
from foreign_services import ForeignDomain, Truth, serve

KEY = "fk_live_check_0123456789"
SHAPES = ("pages", "offsets", "next_link", "header_cursor")


def convo(
    *args: str, cwd: Path, key: str = KEY, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    """``convo ARGS`` as a new user runs it: a subprocess with a bare environment."""
    env = {"PATH": "/usr/bin:/bin", "HOME": str(cwd), "CONVO_API_KEY": key}
    return subprocess.run(
        [sys.executable, "-m", "convo_analytics.cli", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def run_json(*args: str, cwd: Path) -> dict[str, Any]:
    done = convo(*args, "--json", cwd=cwd)
    assert done.stdout.strip(), done.stderr[-2000:]
    result: dict[str, Any] = json.loads(done.stdout)
    result["exit"] = done.returncode
    result["stderr"] = done.stderr
    return result


def loaded(db: Path) -> Truth:
    """The warehouse, in the form ForeignDomain.truth gives."""
    from foreign_services import ConversationTruth, LeadTruth, MessageTruth

    conversations = {
        r[0]: ConversationTruth(*r[1:])
        for r in warehouse_rows(
            db,
            "SELECT c.id, c.updated_at, c.escalated, c.lead_id, c.feedback_rating, "
            "(SELECT count(*) FROM messages m WHERE m.conversation_id = c.id) FROM conversations c",
        )
    }
    messages = {
        r[0]: MessageTruth(*r[1:])
        for r in warehouse_rows(db, "SELECT id, conversation_id, created_at FROM messages")
    }
    leads = {
        r[0]: LeadTruth(r[1], int(r[2]))
        for r in warehouse_rows(db, "SELECT id, status, score FROM leads")
    }
    return Truth(conversations, messages, leads)


def assert_exactly(db: Path, truth: Truth) -> None:
    got = loaded(db)
    assert got.conversations == truth.conversations
    assert got.messages == truth.messages
    assert got.leads == truth.leads
    counts = warehouse_rows(
        db,
        "SELECT (SELECT count(*) - count(DISTINCT id) FROM conversations), "
        "(SELECT count(*) - count(DISTINCT id) FROM messages), "
        "(SELECT count(*) - count(DISTINCT id) FROM leads)",
    )
    assert counts == [(0, 0, 0)], "each record exactly once"


@pytest.fixture(scope="module", params=SHAPES)
def checked(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, Any]]:
    """A foreign service, checked once per module, with the configuration the check wrote."""
    shape: str = request.param
    tmp_path = tmp_path_factory.mktemp(shape)
    domain = ForeignDomain()
    with serve(domain, shape, KEY) as (server, app):
        config = tmp_path / "convo.toml"
        done = convo(
            "extract", "--check", "--base-url", server.url, "--rate-limit", "none",
            "--write-config", str(config), cwd=tmp_path,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr[-2000:]
        yield {"shape": shape, "domain": domain, "app": app, "url": server.url,
               "config": config, "dir": tmp_path, "report": done.stdout}  # fmt: skip


def test_the_written_config_extracts_every_record_exactly_once(checked: dict[str, Any]) -> None:
    shape, domain, app = checked["shape"], checked["domain"], checked["app"]
    cwd, db = checked["dir"], checked["dir"] / "w.duckdb"
    written = tomllib.loads(checked["config"].read_text())
    assert written["extract"]["streams"]["summary"] == {"enabled": False}, "no summary endpoint"
    first = run_json("extract", "--db", str(db), "--rate-limit", "none", "--page-size", "30",
                     cwd=cwd)  # fmt: skip
    assert first["exit"] == 0, first
    streams = first["streams"]
    assert streams["conversations"]["status"] == "ok", streams["conversations"]
    assert streams["leads"]["status"] == "ok", streams["leads"]
    assert streams["summary"]["status"] == "unavailable"
    assert streams["conversations"]["warnings"] == [], "the written config leaves nothing open"
    assert streams["leads"]["warnings"] == []
    assert streams["conversations"]["pages"] >= 5, "read in pages of at most 30"
    assert streams["leads"]["pages"] >= 3
    assert_exactly(db, domain.truth(shape))

    before = len(app.requests)
    again = run_json("extract", "--db", str(db), "--rate-limit", "none", cwd=cwd)
    assert again["exit"] == 0
    for name in ("conversations", "leads"):
        assert again["streams"][name]["new"] == again["streams"][name]["changed"] == 0
    assert again["streams"]["conversations"]["details"] == 0, "nothing changed: no details"
    assert len(app.requests) - before <= 8, "an incremental re-run asks for little"
    assert_exactly(db, domain.truth(shape))

    touched = domain.touch(5)
    third = run_json("extract", "--db", str(db), "--rate-limit", "none", cwd=cwd)
    assert third["exit"] == 0
    conversations = third["streams"]["conversations"]
    assert conversations["changed"] == len(touched) and conversations["details"] == len(touched)
    assert conversations["warnings"] == [], "the incremental parameter was honoured"
    assert_exactly(db, domain.truth(shape))


def test_the_check_reports_paging_fields_and_columns(checked: dict[str, Any]) -> None:
    report, shape = checked["report"], checked["shape"]
    written = tomllib.loads(checked["config"].read_text())
    streams = written["extract"]["streams"]
    expected_paging = {
        "pages": ("page_number", "_page"),
        "offsets": ("offset", "skip"),
        "next_link": ("next_url", None),
        "header_cursor": ("cursor", "after"),
    }[shape]
    paginator = streams["conversations"]["paginator"]
    assert paginator["type"] == expected_paging[0]
    if expected_paging[1]:
        assert expected_paging[1] in paginator.values()
    assert streams["leads"]["params"] == {"sort": "updatedAt"} or shape != "pages", (
        "status=any empties the json-server leads: left out"
    )
    assert (
        streams["conversations"]["incremental"]["param"]
        in {
            "pages": ("updatedAt_gte",),
            "offsets": ("modifiedSince",),
            "next_link": ("updated_after",),
            "header_cursor": ("since_ms",),
        }[shape]
    )
    fields = written["extract"]["fields"]
    for column in ("messages.created_at", "conversations.escalated", "conversations.lead_id"):
        assert fields.get(column), f"{column} found"
    assert "conversations: ok" in report and "leads: ok" in report
    assert "summary: unavailable" in report and "typed columns" in report
    if shape == "header_cursor":
        assert streams["conversations"]["incremental"]["format"] == "epoch_ms"
        assert streams["conversations"]["detail"]["record"] == "conversation"
        assert streams["leads"]["id"] == "lead_id", "a lead is keyed by its own id"
        assert streams["conversations"]["page_size"] == 25, "the service's cap"
    if shape == "pages":
        assert streams["conversations"]["detail"]["params"] == {"_embed": "messages"}
