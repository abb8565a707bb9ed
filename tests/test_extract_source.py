"""The service's endpoints as data: [extract.streams.*] and [extract.fields] in convo.toml,
the environment and flags, validated one line per error; and no credential in any text a
run records, whatever the key holds (issue 13)."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import string
from pathlib import Path

import httpx
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from convo_analytics.config import load_settings
from convo_analytics.errors import UserError
from convo_analytics.extract import ExtractConfig, extract_config, run_extract
from extract_support import warehouse_rows
from test_extract_check import convo

KEY = "sk_live_source_0123456789"
CONFIG = """\
[service]
base_url = "https://api.example.com"

[extract.streams.conversations]
path = "/api/chats"
params = { _sort = "updatedAt", archived = false }
records = ""
paginator = { type = "page_number", page_param = "_page", limit_param = "_limit", base_page = 1 }
incremental = { param = "updatedAt_gte", field = "updatedAt" }
detail = { path = "/api/chats/{id}", params = { _embed = "messages" } }

[extract.streams.leads]
id = "lead_id"
paginator = { type = "cursor", cursor_header = "X-Next-Cursor", cursor_param = "after" }
page_size = 25

[extract.streams.summary]
enabled = false

[extract.fields]
"messages.created_at" = "sentAt"
"conversations.feedback_rating" = "csat.score"
"""


def _config(tmp_path: Path, text: str, **env: str) -> ExtractConfig:
    path = tmp_path / "convo.toml"
    path.write_text(text)
    settings = load_settings(path, {}, {"CONVO_API_KEY": KEY, **env})
    config = extract_config(settings)
    assert isinstance(config, ExtractConfig)
    return config


def test_stream_tables_and_fields_reach_the_plans(tmp_path: Path) -> None:
    config = _config(tmp_path, CONFIG)
    conversations = config.plan("conversations")
    assert conversations.path == "/api/chats"
    assert conversations.params == {"_sort": "updatedAt", "archived": "false"}
    assert conversations.records == ""
    assert conversations.paginator.options() == {
        "limit_param": "_limit", "page_param": "_page", "base_page": "1"
    }  # fmt: skip
    assert conversations.incremental.param == "updatedAt_gte"
    assert conversations.detail is not None and conversations.detail.params == {
        "_embed": "messages"
    }
    assert conversations.fields == {
        "messages.created_at": "sentAt", "conversations.feedback_rating": "csat.score"
    }  # fmt: skip
    assert not conversations.default_params
    leads = config.plan("leads")
    assert (leads.id, leads.page_size, leads.path) == ("lead_id", 25, "/v1/leads")
    assert leads.params == {"sort": "updatedAt", "status": "any"}, "unconfigured: the default"
    assert leads.default_params and leads.fields == {}
    assert not config.plan("summary").enabled


def test_the_environment_and_flags_beat_the_file(tmp_path: Path) -> None:
    config = _config(
        tmp_path,
        CONFIG,
        CONVO_EXTRACT__STREAMS__LEADS__PATH="/api/leads",
        CONVO_EXTRACT__FIELDS='{"messages.text": "body"}',
        CONVO_EXTRACT_PAGINATION="offset:offset_param=_start,end_param=_end",
    )
    assert config.plan("leads").path == "/api/leads"
    assert config.plan("leads").page_size == 25, "the rest of the file's table stays"
    assert config.plan("conversations").fields == {
        "messages.created_at": "sentAt",
        "conversations.feedback_rating": "csat.score",
        "messages.text": "body",
    }, "tables merge key by key"
    assert config.plan("conversations").paginator.type == "page_number", "the stream's own wins"
    (tmp_path / "bare.toml").write_text("")
    settings = load_settings(
        tmp_path / "bare.toml",
        {"extract.page_size": 40},
        {"CONVO_API_KEY": KEY, "CONVO_EXTRACT_PAGINATION": "offset:offset_param=_start"},
    )
    bare = extract_config(settings)
    assert isinstance(bare, ExtractConfig)
    plan = bare.plan("leads")
    assert plan.paginator.type == "offset" and plan.paginator.offset_param == "_start"
    assert plan.page_size == 40
    flagged = load_settings(
        tmp_path / "convo.toml", {"extract.page_size": 10}, {"CONVO_API_KEY": KEY}
    )
    assert isinstance(config := extract_config(flagged), ExtractConfig)
    assert config.plan("leads").page_size == 10, "a flag beats the file's page_size"


def test_the_list_form_of_extract_streams_still_selects_streams(tmp_path: Path) -> None:
    config = _config(tmp_path, '[extract]\nstreams = ["leads"]\n')
    assert config.streams == ("leads",) and config.streams_named
    assert _config(tmp_path, CONFIG).streams_named is False


@pytest.mark.parametrize(
    ("text", "where", "what"),
    [
        ("[extract.streams.conversations]\npagination = 'x'\n", "convo.toml:2",
         "extract.streams.conversations.pagination: Extra inputs are not permitted"),
        ("[extract.streams.leeds]\npath = '/x'\n", "convo.toml:1", "extract.streams.leeds"),
        ("[extract.streams.leads]\npaginator = { type = 'pages' }\n", "convo.toml:2",
         "extract.streams.leads.paginator.type: Input should be"),
        ("[extract.streams.leads]\npage_size = 0\n", "convo.toml:2", "greater than or equal to 1"),
        ('[extract.fields]\n"messages.sent_at" = "x"\n', "convo.toml",
         "did you mean 'messages.created_at'"),
        ("[extract.streams.leads]\nrange = { from_param = 'since' }\n", "convo.toml:1",
         "extract.streams.leads: Value error, range is a key of [extract.streams.summary] only"),
        ('[extract.fields]\n"service_summaries.day" = "day"\n', "convo.toml",
         "did you mean 'service_summaries.date'"),
    ],
)  # fmt: skip
def test_a_bad_table_is_one_line_per_error_naming_its_place(
    tmp_path: Path, text: str, where: str, what: str
) -> None:
    with pytest.raises(UserError) as info:
        _config(tmp_path, text)
    lines = str(info.value).splitlines()
    assert any(what in line and where in line for line in lines), lines
    done = convo("--config", str(tmp_path / "convo.toml"), "extract", cwd=tmp_path)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert all(line.startswith("error: ") for line in done.stderr.strip().splitlines())


def test_two_errors_are_two_lines(tmp_path: Path) -> None:
    text = "[extract.streams.leads]\npage_size = 0\nrecords = 3\n"
    with pytest.raises(UserError) as info:
        _config(tmp_path, text)
    lines = [line for line in str(info.value).splitlines() if "extract.streams" in line]
    assert len(lines) == 2


def test_config_show_lists_the_source_description(tmp_path: Path) -> None:
    (tmp_path / "convo.toml").write_text(CONFIG)
    done = convo("config", "show", "--json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    shown = json.loads(done.stdout)["extract_source"]
    assert shown["streams"]["leads"]["id"] == "lead_id"
    assert shown["fields"]["messages.created_at"] == "sentAt"


# -- no credential in any recorded text ------------------------------------------------------

_KEY_CHARS = st.text(
    alphabet=st.sampled_from(string.printable + "\x00\x01\x7f\u00e9\u2028\u202e"),
    min_size=12,
    max_size=40,
).filter(lambda key: len(key.strip()) >= 12 and len(set(key)) > 6)


def _run_with_key(
    key: str, tmp: Path, caplog: pytest.LogCaptureFixture
) -> tuple[list[str], list[str]] | str:
    """Run an extract whose service echoes the Authorization header in every error body;
    the texts the run recorded and the hosts it asked, or the refusal's message."""
    settings_ = load_settings(
        None,
        {"service.base_url": "https://api.test", "warehouse.path": tmp / "w.duckdb"},
        {"CONVO_API_KEY": key},
        cwd=tmp,
    )
    try:
        config = extract_config(settings_)
    except UserError as exc:
        return str(exc)
    assert isinstance(config, ExtractConfig)
    config = dataclasses.replace(config, max_attempts=2, retry_base_seconds=0.01)
    seen: list[str] = []

    def echo(request: httpx.Request) -> httpx.Response:
        seen.append(request.url.host)
        auth = request.headers.get("authorization", "")
        status = 500 if "leads" in request.url.path else 401
        return httpx.Response(status, json={"error": {"message": f"bad credentials: {auth}"}})

    caplog.clear()
    with caplog.at_level(logging.DEBUG):
        result = asyncio.run(run_extract(config, transport=httpx.MockTransport(echo)))
    assert not result.ok
    texts = [json.dumps(result.to_json()), caplog.text]
    texts += [
        str(row)
        for row in warehouse_rows(tmp / "w.duckdb", "SELECT error, warnings FROM extract_runs")
    ]
    return texts, seen


_REFERENCE_KEY = "Zq8#Kx2!Wv9@Lp4$Rm7%"
_REFERENCE_TEXT: list[str] = []


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(key=_KEY_CHARS)
def test_no_key_reaches_an_error_a_log_or_the_warehouse(
    key: str, tmp_path_factory: pytest.TempPathFactory, caplog: pytest.LogCaptureFixture
) -> None:
    """Whatever the key holds, it is refused before any request without being shown, or
    sent only to its origin and masked wherever a run records text: even when the service
    echoes the Authorization header in its error bodies.

    A key that is itself a piece of what every run records (`conversation`, `"status": `)
    cannot be told from that text, so such draws are set aside: the texts of a run with a
    key that appears nowhere are the reference."""
    key = key.strip()
    if not _REFERENCE_TEXT:
        reference = _run_with_key(_REFERENCE_KEY, tmp_path_factory.mktemp("ref"), caplog)
        assert not isinstance(reference, str)
        _REFERENCE_TEXT.append("\n".join(reference[0]))
    structural = _REFERENCE_TEXT[0]
    assume(all(piece not in structural for piece in [key, *_parts(key)]))
    outcome = _run_with_key(key, tmp_path_factory.mktemp("key"), caplog)
    if isinstance(outcome, str):
        assert key not in outcome and not any(part in outcome for part in _parts(key))
        return
    texts, seen = outcome
    assert set(seen) == {"api.test"}
    for text in texts:
        assert key not in text
        for part in _parts(key):
            assert part not in text


def _parts(key: str) -> list[str]:
    """The key's runs of visible characters long enough to identify it."""
    import re

    return [p for p in re.split(r"[^\x21-\x7e]+", key) if len(p) >= 8]


def test_every_setting_of_a_source_is_documented() -> None:
    """Every key of a stream table and of its paginator, incremental and detail tables is
    described in docs/configuration.md."""
    from convo_analytics.extract._source import (
        DetailSpec,
        IncrementalSpec,
        PaginatorSpec,
        StreamSpec,
    )

    text = (Path(__file__).parents[1] / "docs" / "configuration.md").read_text()
    for model in (StreamSpec, PaginatorSpec, IncrementalSpec, DetailSpec):
        for name in model.model_fields:
            assert f"`{name}`" in text, f"{model.__name__}.{name} is undocumented"
