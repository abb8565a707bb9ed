"""A service shaped unlike the sandbox, with no configuration: never silently empty or
partial, credentials kept to their origin, fast failure when nothing answers (issue 13)."""

from __future__ import annotations

import asyncio
import shutil
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from conftest import ACME_KEY, RunningSandbox
from convo_analytics._serving import ServerThread
from convo_analytics.extract import ExtractConfig, run_extract
from extract_support import warehouse_rows
from foreign_services import ForeignDomain, make_counter_app, serve
from test_extract_check import KEY, SHAPES, convo, run_json


def _counts(db: Path) -> dict[str, int]:
    rows = warehouse_rows(
        db,
        "SELECT (SELECT count(*) FROM conversations), (SELECT count(*) FROM messages), "
        "(SELECT count(*) FROM leads)",
    )
    return dict(zip(("conversations", "messages", "leads"), rows[0], strict=True))


@dataclass
class Unconfigured:
    """`convo extract` with no configuration against a fresh domain of one shape: its JSON,
    the same with ``--strict`` (another warehouse), and what the first one holds."""

    domain: ForeignDomain
    url: str
    truth: Any
    db: Path
    result: dict[str, Any]
    strict: dict[str, Any]
    held: dict[str, int]


@pytest.fixture(scope="module")
def unconfigured(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Callable[[str], Unconfigured]]:
    """The runs of each shape, made once for the module (its server kept until the end):
    the tests that read a shape's first run share it instead of repeating it."""
    made: dict[str, Unconfigured] = {}
    with ExitStack() as servers:

        def runs(shape: str) -> Unconfigured:
            if shape not in made:
                domain = ForeignDomain()
                truth = domain.truth(shape)
                folder = tmp_path_factory.mktemp(f"unconfigured-{shape}")
                server, _ = servers.enter_context(serve(domain, shape, KEY))
                db = folder / "w.duckdb"
                result = run_json("extract", "--base-url", server.url, "--db", str(db),
                                  "--rate-limit", "none", cwd=folder)  # fmt: skip
                strict = run_json("extract", "--base-url", server.url, "--db",
                                  str(folder / "s.db"), "--rate-limit", "none", "--strict",
                                  cwd=folder)  # fmt: skip
                made[shape] = Unconfigured(domain, server.url, truth, db, result, strict,
                                           _counts(db))  # fmt: skip
            return made[shape]

        yield runs


@pytest.mark.parametrize("shape", SHAPES)
def test_without_configuration_no_stream_is_ok_holding_fewer_records(
    shape: str, unconfigured: Callable[[str], Unconfigured]
) -> None:
    runs = unconfigured(shape)
    truth, result, strict, held = runs.truth, runs.result, runs.strict, runs.held
    streams = result["streams"]
    if streams["conversations"]["status"] == "ok":
        assert held["conversations"] == len(truth.conversations)
        assert held["messages"] == len(truth.messages)
    if streams["leads"]["status"] == "ok":
        assert held["leads"] == len(truth.leads)
    complete = held == {"conversations": 140, "messages": len(truth.messages), "leads": 61}
    if not complete:
        assert result["exit"] == 1, "records missing: never a green run"
    assert streams["summary"]["status"] == "unavailable", "no summary endpoint: a warning"
    assert strict["exit"] == 1, "warnings, gaps or failures: --strict fails"
    assert "Traceback" not in result["stderr"] and KEY not in result["stderr"]


def test_an_emptying_default_parameter_is_dropped_and_a_missing_transcript_is_a_gap(
    unconfigured: Callable[[str], Unconfigured],
) -> None:
    """json-server applies ``status=any`` as an equality filter on the leads' own status,
    and adds a transcript to a detail only when asked (``_embed=messages``)."""
    runs = unconfigured("pages")  # a first run with no configuration
    result = runs.result
    leads = result["streams"]["leads"]
    assert runs.held["leads"] == 61
    assert any("status=any" in w and "dropped" in w for w in leads["warnings"]), leads
    conversations = result["streams"]["conversations"]
    assert conversations["status"] == "partial"
    assert any("none of the 140 details" in w and "_embed" in w for w in conversations["warnings"])
    assert result["exit"] == 1


def test_ignored_incremental_parameters_and_unfilled_columns_name_their_settings(
    unconfigured: Callable[[str], Unconfigured], tmp_path: Path
) -> None:
    runs = unconfigured("next_link")  # a first run with no configuration
    first = runs.result
    db = tmp_path / "w.duckdb"
    shutil.copy(runs.db, db)  # the second run goes on from the first's warehouse, a copy
    runs.domain.touch(3)
    second = run_json("extract", "--base-url", runs.url, "--db", str(db), "--rate-limit", "none",
                      cwd=tmp_path)  # fmt: skip
    assert first["exit"] == 0 and first["streams"]["conversations"]["status"] == "ok"
    warnings = first["streams"]["conversations"]["warnings"]
    assert any('[extract.fields] "conversations.intent"' in w for w in warnings), warnings
    shape = first["streams"]["conversations"]["shape"]
    assert shape["fields"]["messages.created_at"] == {"path": "time", "origin": "detected"}
    assert shape["fields"]["conversations.escalated"]["path"] == "isEscalated"
    again = second["streams"]["conversations"]
    assert again["changed"] == 3
    assert any("ignored the incremental parameter 'updatedSince'" in w and "incremental = {" in w
               for w in again["warnings"]), again["warnings"]  # fmt: skip
    stored = warehouse_rows(
        db, "SELECT warnings FROM extract_runs WHERE stream = 'conversations' ORDER BY started_at"
    )
    assert "ignored the incremental parameter" in stored[-1][0]


def test_a_next_link_to_another_origin_gets_nothing(tmp_path: Path) -> None:
    counter = make_counter_app()
    with ServerThread(counter) as other:
        domain = ForeignDomain(conversations=20)
        with serve(domain, "leaky", KEY, leak_to=other.url) as (server, _):
            result = run_json("extract", "--base-url", server.url, "--db",
                              str(tmp_path / "w.duckdb"), "--rate-limit", "none",
                              "--streams", "conversations", "--page-size", "5",
                              "--pagination", "next_url:limit_param=pageSize",
                              cwd=tmp_path)  # fmt: skip
    conversations = result["streams"]["conversations"]
    assert conversations["status"] == "failed" and result["exit"] == 1
    port = other.url.rsplit(":", 1)[1]
    assert "another origin" in conversations["error"] and port in conversations["error"]
    assert len(counter.requests) == 0, "nothing was sent to the other origin"


def test_a_plain_http_link_off_loopback_is_refused_before_sending(tmp_path: Path) -> None:
    seen: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(str(request.url))
        if request.url.host != "api.test":
            return httpx.Response(200, json={"items": [], "next": None})
        return httpx.Response(
            200,
            json={
                "items": [{"id": "a1", "updatedAt": "2026-11-01T00:00:00Z"}],
                "next": "http://attacker.example.invalid/v1/conversations?page=2",
            },
        )

    config = ExtractConfig(
        base_url="https://api.test", api_key=KEY, db_path=tmp_path / "w.duckdb",
        rate_limit="none", streams=("leads",),
    )  # fmt: skip
    result = asyncio.run(run_extract(config, transport=httpx.MockTransport(handler)))
    leads = result.streams["leads"]
    assert leads.status == "failed" and "another origin" in (leads.error or "")
    assert all(url.startswith("https://api.test/") for url in seen), seen
    assert KEY not in (leads.error or "")


def test_an_unreachable_service_fails_the_run_fast_with_one_line(tmp_path: Path) -> None:
    import socket

    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"http://127.0.0.1:{port}"
    began = time.monotonic()
    done = convo("extract", "--base-url", url, "--db", str(tmp_path / "w.duckdb"), cwd=tmp_path)
    took = time.monotonic() - began
    assert done.returncode == 1 and took < 30, (took, done.stderr[-500:])
    errors = [line for line in done.stderr.splitlines() if " ERROR " in line]
    assert len(errors) == 1 and url in errors[0] and "cannot reach" in errors[0]
    assert KEY not in done.stderr and "Traceback" not in done.stderr
    assert "leads: started" not in done.stderr, "the other streams are not tried again"


def test_a_wrong_key_fails_each_stream_with_one_401_line(
    shared_sandbox: RunningSandbox, tmp_path: Path
) -> None:
    result = run_json("extract", "--base-url", shared_sandbox.url, "--db",
                      str(tmp_path / "w.duckdb"), "--rate-limit", "none", cwd=tmp_path,
                      )  # fmt: skip
    assert result["exit"] == 1
    for stream in result["streams"].values():
        assert stream["status"] == "failed" and "401" in stream["error"]
        assert "check the API key" in stream["error"] and "\n" not in stream["error"]
    assert ACME_KEY not in result["stderr"] and KEY not in result["stderr"]


@pytest.mark.parametrize(
    ("url", "key", "expect"),
    [
        ("http://someone:hunter2-secret@127.0.0.1:8787", KEY, "user info"),
        ("http://127.0.0.1:99999", KEY, "port '99999'"),
        ("127.0.0.1:18787", KEY, "has no scheme (write https://127.0.0.1:18787"),
        ("http://127.0.0.1:8787", "sk_live_first\nsk_live_second", "control character"),
        ("http://127.0.0.1:8787", "sk_live_ümlaut_key", "non-ASCII"),
        ("https://api.example.com?x=1", KEY, "query"),
    ],
)
def test_bad_urls_and_keys_are_one_line_configuration_errors(
    url: str, key: str, expect: str, tmp_path: Path
) -> None:
    done = convo("extract", "--base-url", url, "--db", str(tmp_path / "w.duckdb"),
                 cwd=tmp_path, key=key)  # fmt: skip
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and expect in lines[0], lines
    assert "Traceback" not in done.stderr
    for secret in ("hunter2-secret", *key.split("\n")):
        assert secret not in done.stderr
    assert not (tmp_path / "w.duckdb").exists(), "refused before anything was opened or sent"


def test_a_missing_summary_endpoint_is_unavailable_unless_named(tmp_path: Path) -> None:
    domain = ForeignDomain(conversations=12)
    with serve(domain, "next_link", KEY) as (server, _):
        named = run_json("extract", "--base-url", server.url, "--db", str(tmp_path / "n.db"),
                         "--rate-limit", "none", "--streams", "summary", cwd=tmp_path)  # fmt: skip
        db = tmp_path / "w.duckdb"
        default = run_json("extract", "--base-url", server.url, "--db", str(db),
                           "--rate-limit", "none", cwd=tmp_path)  # fmt: skip
    assert named["exit"] == 1 and named["streams"]["summary"]["status"] == "failed"
    assert "404" in named["streams"]["summary"]["error"]
    assert default["exit"] == 0 and default["streams"]["summary"]["status"] == "unavailable"
    transform = convo("transform", "--db", str(db), cwd=tmp_path)
    assert transform.returncode == 0, transform.stderr[-1000:]
    assert "reconciliation: nothing to compare" in transform.stderr


def test_the_sandbox_shape_needs_no_configuration_and_warns_of_nothing(
    shared_sandbox: RunningSandbox, tmp_path: Path
) -> None:
    config = ExtractConfig(
        base_url=shared_sandbox.url, api_key=ACME_KEY, db_path=tmp_path / "w.duckdb",
        rate_limit="none",
    )  # fmt: skip
    result: Any = asyncio.run(run_extract(config))
    for name, stream in result.streams.items():
        assert stream.status == "ok", (name, stream.error)
        assert stream.warnings == [] and stream.gaps == [], (name, stream.warnings)
