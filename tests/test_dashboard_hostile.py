"""The app through AppTest against hostile input: what end users wrote shows as written (never
rendered as Markdown or HTML), and no query-string value can crash a page (decisions
D-DASH-TEXT and D-VIEW-URL). The browser's side (nothing fetched) is in
test_dashboard_browser.py."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import date, timedelta
from pathlib import Path
from typing import Any

import pytest
from streamlit.testing.v1 import AppTest

from convo_analytics.publish import current_snapshot
from dashboard_support import (
    PHISH,
    assert_no_markup,
    hostile_messages,
    hostile_snapshot,
    hostile_source,
    hostile_user,
)

ROOT = Path(__file__).resolve().parent.parent
APP = str(ROOT / "dashboards" / "streamlit_app.py")
PAGES = ["overview", "conversations", "leads", "quality", "guardrails", "workspaces", "topics",
         "compare", "monitors", "explore", "pipeline"]  # fmt: skip
#: Nothing listens on the discard port: these tests look at what the app draws.
BEACON = "http://127.0.0.1:9"


@pytest.fixture(scope="module")
def hostile(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    with hostile_snapshot(tmp_path_factory.mktemp("hostile"), BEACON) as (published, cid):
        snap = current_snapshot(published)
        assert snap is not None
        con = snap.connect()
        try:
            ((first, last),) = con.execute(
                "SELECT min(started_at)::DATE, max(started_at)::DATE FROM mart_conversations"
            ).fetchall()
        finally:
            con.close()
        yield {"published": published, "conversation": cid, "first": first, "last": last}


def _app(hostile: dict[str, Any], monkeypatch: pytest.MonkeyPatch, page: str,
         query: dict[str, Any] | None = None) -> AppTest:  # fmt: skip
    monkeypatch.setenv("CONVO_PUBLISHED_DIR", str(hostile["published"]))
    at = AppTest.from_file(APP, default_timeout=60)
    at.query_params.update(query or {})
    at.run()
    assert not at.exception, at.exception
    if page != "overview":
        at.switch_page(f"app_pages/{page}.py").run()
    return at


def _whole_range(hostile: dict[str, Any]) -> dict[str, str]:
    return {"from": str(hostile["first"]), "to": str(hostile["last"])}


def test_a_transcript_shows_what_the_end_user_wrote_as_written(
    hostile: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    at = _app(hostile, monkeypatch, "conversations", _whole_range(hostile))
    assert not at.exception, at.exception
    assert at.selectbox(key="conv_pick").value == hostile["conversation"]  # the newest
    texts = [t.value for t in at.text]
    for message in hostile_messages(BEACON):  # each message is one plain-text element
        assert message in texts, (message, texts)
    assert not any("sign in again" in m.value for m in at.markdown)
    user = hostile_user(BEACON)
    assert any(f"end user ` {user} `" in c.value for c in at.caption)
    table = next(df.value for df in at.dataframe if "external_user_id" in df.value.columns)
    assert user in set(table["external_user_id"])  # a table cell: text
    transcript = next(df.value for df in at.dataframe if "text" in df.value.columns)
    assert PHISH in set(transcript["text"])
    escalations = next(df.value for df in at.dataframe if "owner" in df.value.columns)
    assert f"![o]({BEACON}/owner.png)" in set(escalations["owner"])
    assert_no_markup(at)


def test_no_page_renders_the_datas_text_as_markup(
    hostile: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every page, with the hostile conversation in range: its text reaches tables (as
    text) and never Markdown; the lead's source shows as written on Leads."""
    at = _app(hostile, monkeypatch, "overview", _whole_range(hostile))
    for page in PAGES:
        at.switch_page(f"app_pages/{page}.py").run()
        assert not at.exception, (page, at.exception)
        assert_no_markup(at)
    at.switch_page("app_pages/overview.py").run()
    at.radio(key="overview_breakdown").set_value("source").run()  # bars named by users
    assert not at.exception, at.exception
    assert_no_markup(at)
    at.switch_page("app_pages/leads.py").run()
    leads = next(df.value for df in at.dataframe if "lead_id" in df.value.columns)
    assert hostile_source(BEACON) in set(leads["source"])
    at.selectbox(key="funnel_by").select("source").run()
    assert not at.exception, at.exception
    funnel = next(df.value for df in at.dataframe if "source" in df.value.columns)
    assert hostile_source(BEACON) in set(funnel["source"])
    assert_no_markup(at)


def test_the_compare_page_shows_a_slice_value_as_written(
    hostile: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two sources compared, one of them the end user's hostile one (from the URL): the
    page names it as written (in a code span), never as Markdown."""
    source = hostile_source(BEACON)
    view = {**_whole_range(hostile), "compare": "slices", "dimension": "source",
            "side_a": source}  # fmt: skip
    at = _app(hostile, monkeypatch, "compare", view)
    assert not at.exception, at.exception
    assert at.selectbox(key="compare_side_a").value == source
    assert any(f"A: ` {source} `" in c.value for c in at.caption)
    assert at.query_params["side_a"] == source
    assert_no_markup(at)


def test_a_drill_down_value_from_the_url_shows_as_written(
    hostile: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    source = hostile_source(BEACON)
    at = _app(hostile, monkeypatch, "conversations", {**_whole_range(hostile), "source": source})
    assert not at.exception, at.exception
    (chip,) = [i.value for i in at.info if "behind a chart" in i.value]
    assert f"source: ` {source} `" in chip
    table = next(df.value for df in at.dataframe if "conversation_id" in df.value.columns)
    assert list(table["conversation_id"]) == [hostile["conversation"]]
    assert_no_markup(at)


def _notes(at: AppTest) -> str:
    return "\n".join(i.value for i in at.info if "adjusted" in i.value)


def _url_cases(first: date, last: date) -> list[tuple[dict[str, str], str, tuple[date, date]]]:
    """(query, what the note says, the range shown) for out-of-range and unparseable filters."""
    default = (max(first, last - timedelta(days=29)), last)
    return [
        ({"from": "2020-01-01"},
         f"?from=2020-01-01 is before the first day with data ({first}): showing from {first}",
         (first, last)),
        ({"to": "2030-01-01"},
         f"?to=2030-01-01 is after the last day with data ({last}): showing up to {last}",
         default),
        ({"from": "2026-13-45"}, "?from=2026-13-45 is not a date (YYYY-MM-DD): ignored", default),
        ({"from": str(last), "to": str(first)},
         f"?from={last} is after ?to={first}: showing {default[0]} to {default[1]} instead",
         default),
        ({"channel": "nonexistent"},
         "?channel=nonexistent: the data has no such channel; showing all channels", default),
        ({"workspace": "nope"},
         "?workspace=nope: the data has no such workspace; showing all workspaces", default),
        ({"tz": "Mars/" + "x" * 5000}, "is not one of the dashboard's time zones: showing UTC",
         default),
        ({"from": "2030-01-01", "to": "2031-01-01"},
         f"?to=2031-01-01 is after the last day with data ({last})", (last, last)),
    ]  # fmt: skip


@pytest.mark.parametrize("case", range(8))
def test_every_page_renders_a_url_with_filters_outside_the_data(
    hostile: dict[str, Any], monkeypatch: pytest.MonkeyPatch, case: int
) -> None:
    """Each page, opened from a URL whose filters lie outside the data or do not parse,
    renders (no exception) with the filters clamped or dropped, and says so."""
    query, note, shown = _url_cases(hostile["first"], hostile["last"])[case]
    at = _app(hostile, monkeypatch, "overview", query)
    for page in PAGES:
        at.switch_page(f"app_pages/{page}.py").run()
        assert not at.exception, (page, at.exception)
        assert note in _notes(at), (page, _notes(at))
        assert at.sidebar.date_input(key="filter_range").value == shown, page
        assert_no_markup(at)
    assert at.query_params["from"] == str(shown[0]) and at.query_params["to"] == str(shown[1])
    other = (hostile["first"], hostile["first"] + timedelta(days=1))
    at.sidebar.date_input(key="filter_range").set_value(other).run()  # the note was read
    assert not at.exception, at.exception
    assert not _notes(at)


@pytest.mark.parametrize(
    ("query", "note"),
    [
        ({"page": "abc"}, "?page=abc is not a page number: showing page 1."),
        ({"page": "²"}, "is not a page number: showing page 1."),
        ({"page": "9" * 5000}, "is past the last page (1): showing page 1."),
        ({"page": "7"}, "?page=7 is past the last page (1): showing page 1."),
        ({"day": "2026-13-45"}, "?day=2026-13-45 is not a date (YYYY-MM-DD): ignored."),
        ({"day": "2020-01-01"}, "?day=2020-01-01 is outside the data"),
        ({"status": "bogus"}, "?status=bogus is not a status"),
        ({"escalated": "maybe"}, "?escalated=maybe is not yes or no: ignored."),
        ({"band": "7"}, "?band=7 is not a number from 0 to 0.9: ignored."),
        ({"below": "nan"}, "?below=nan is not a number from 0 to 1: ignored."),
        ({"step": "nowhere"}, "?step=nowhere is not a funnel step: ignored."),
        ({"basis": "x"}, "?basis=x is not one of started"),
        ({"q": "x" * 300}, "?q= is longer than 200 characters"),
        ({"conversation": "c" * 500}, "?conversation= is longer than 200 characters"),
        ({"status": PHISH}, f"?status=` {PHISH} ` is not a status"),
    ],
)
def test_conversations_url_values_are_used_clamped_or_dropped_with_a_note(
    hostile: dict[str, Any], monkeypatch: pytest.MonkeyPatch, query: dict[str, str], note: str
) -> None:
    at = _app(hostile, monkeypatch, "conversations", {**_whole_range(hostile), **query})
    assert not at.exception, at.exception
    assert note in _notes(at), _notes(at)
    assert_no_markup(at)


def test_a_conversation_the_url_names_but_the_snapshot_lacks_is_named_as_written(
    hostile: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    at = _app(hostile, monkeypatch, "conversations", {**_whole_range(hostile),
                                                      "conversation": PHISH})  # fmt: skip
    assert not at.exception, at.exception
    assert f"Conversation ` {PHISH} ` is not in this snapshot." in [i.value for i in at.info]
    assert_no_markup(at)
