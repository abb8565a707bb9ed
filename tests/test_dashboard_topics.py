"""The Topics page and topic everywhere in the dashboard (issue 27), through AppTest.

Three workspaces read from the sandbox into one warehouse, each with topics of its own
(discovered from 50 conversations on, so that a small sandbox has them): the page's
figures per topic are checked against the marts by SQL of their own; renames and
merges made with the page's forms land in the app's curation store only (never the
snapshot or the warehouse), show at once, and never touch another workspace's topics;
a topic chosen in the sidebar (or a URL) narrows every page; a click opens a topic's
conversations; what end users wrote (examples) and what analysts typed (a label) show
as written (decision D-DASH-TEXT); Explore's schema describes the topic tables.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterator
from datetime import date, timedelta
from pathlib import Path
from typing import Any

import duckdb
import orjson
import pytest
from streamlit.testing.v1 import AppTest

from convo_analytics.publish import current_snapshot, publish_snapshot
from convo_analytics.warehouse import open_warehouse
from dashboard_support import (
    WORKSPACES,
    RecordingManager,
    assert_no_markup,
    downloaded,
    three_workspaces,
)

ROOT = Path(__file__).resolve().parent.parent
APP = str(ROOT / "dashboards" / "streamlit_app.py")
NAMES = {f"ws_{name}": name for name, _ in WORKSPACES}
#: First messages an end user may write, made the examples of initech's topic 1.
HOSTILE_EXAMPLES = ["[sign in again](http://127.0.0.1:9/phish)",
                    '<img src="http://127.0.0.1:9/x.png"> :smile: www.example.com']  # fmt: skip
#: A name an analyst may type (printable, under 80 characters).
HOSTILE_LABEL = "![t](http://127.0.0.1:9/t.png) <script>x</script>"


@pytest.fixture(scope="module")
def topical(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    folder = tmp_path_factory.mktemp("dashboard-topics")
    with three_workspaces(folder, topics_from=50) as (published, db):
        con = open_warehouse(db)
        try:  # one topic's examples are hostile end-user text
            con.execute(
                "UPDATE mart_topics SET examples = ? WHERE workspace_id = 'ws_initech' "
                "AND topic_id = 1",
                [HOSTILE_EXAMPLES],
            )
            publish_snapshot(con, db, published)
            first_day, last_day = con.execute(
                "SELECT min(started_at)::DATE, max(started_at)::DATE FROM mart_conversations"
            ).fetchall()[0]
        finally:
            con.close()
        first = max(first_day, last_day - timedelta(days=29))  # the dashboard's default range
        yield {"published": published, "db": db, "first": first, "last": last_day}


@pytest.fixture
def store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The app's curation store for one test (as `convo dashboard` passes it)."""
    path = tmp_path / "app-state" / "topic_curations.jsonl"
    monkeypatch.setenv("CONVO_TOPICS_CURATIONS_FILE", str(path))
    return path


@pytest.fixture
def downloads(monkeypatch: pytest.MonkeyPatch) -> list[RecordingManager]:
    return RecordingManager.record(monkeypatch)


def _download(at: AppTest, made: list[RecordingManager], name: str) -> list[dict[str, str]]:
    """The rows of the download button keyed ``download_<name>`` (its CSV, header first)."""
    (button,) = [b for b in at.get("download_button") if b.proto.id.endswith(f"download_{name}")]
    _, data = downloaded(made, button)
    rows = list(csv.reader(io.StringIO(data.decode("utf-8"))))
    return [dict(zip(rows[0], row, strict=True)) for row in rows[1:]]


def _app(topical: dict[str, Any], monkeypatch: pytest.MonkeyPatch, page: str = "topics",
         query: dict[str, Any] | None = None) -> AppTest:  # fmt: skip
    monkeypatch.setenv("CONVO_PUBLISHED_DIR", str(topical["published"]))
    at = AppTest.from_file(APP, default_timeout=90)
    at.query_params.update(query or {})
    at.run()
    assert not at.exception, at.exception
    if page != "overview":
        at.switch_page(f"app_pages/{page}.py").run()
        assert not at.exception, at.exception
    return at


def _table(at: AppTest) -> Any:
    """The Topics page's table (a pandas frame of what it shows)."""
    return next(d.value for d in at.dataframe if "merged_topics" in d.value.columns)


def _row(at: AppTest, ws_name: str, topic_id: int) -> Any:
    table = _table(at)
    rows = table[(table["workspace"] == ws_name) & (table["topic_id"].astype(str) == str(topic_id))]
    assert len(rows) == 1, (ws_name, topic_id, table[["workspace", "topic_id", "topic"]])
    return rows.iloc[0]


def _sql(db: Path, sql: str, params: list[Any]) -> list[tuple[Any, ...]]:
    con = duckdb.connect(str(db), read_only=True)
    con.execute("SET TimeZone = 'UTC'")
    try:
        return con.execute(sql, params).fetchall()
    finally:
        con.close()


def _expected(db: Path, first: date, last: date) -> dict[tuple[str, int | None], dict[str, Any]]:
    """Each topic's figures for the range, straight from the marts by SQL of their own:
    conversations started in it by their topic's ``effective_topic_id``, responses and
    incidents of the range by their conversation's topic."""
    topic = "LEFT JOIN mart_topics t ON t.workspace_id = c.workspace_id AND t.topic = c.topic"
    (threshold,) = _sql(
        db,
        "SELECT low_confidence_threshold FROM transform_runs WHERE status = 'ok' "
        "ORDER BY finished_at DESC LIMIT 1",
        [],
    )[0]
    out: dict[tuple[str, int | None], dict[str, Any]] = {}
    for ws, tid, n, resolved, contained, escalated, csat, leads in _sql(
        db,
        f"""SELECT c.workspace_id, t.effective_topic_id, count(*), avg((status = 'resolved')::INT),
                   avg(contained::INT), avg(escalated::INT),
                   count(*) FILTER (positive_feedback) / nullif(count(feedback_rating), 0),
                   count(qualified_at)
            FROM mart_conversations c {topic}
            WHERE c.started_at::DATE BETWEEN ? AND ? GROUP BY ALL""",
        [first, last],
    ):
        out[(ws, tid)] = {"conversations": n, "resolutionRate": resolved,
                          "containmentRate": contained, "escalationRate": escalated,
                          "csat": csat, "leadsQualified": leads,
                          "guardrailTriggersPer1000Responses": None}  # fmt: skip
    for ws, tid, responses, low, p95 in _sql(
        db,
        f"""SELECT c.workspace_id, t.effective_topic_id, count(*),
                   count(*) FILTER (coalesce(m.confidence, 0) < ?),
                   quantile_cont(coalesce(m.latency_ms, 0), 0.95)
            FROM messages m JOIN mart_conversations c USING (workspace_id, conversation_id)
            {topic} WHERE m.role = 'assistant' AND m.created_at::DATE BETWEEN ? AND ?
            GROUP BY ALL""",
        [threshold, first, last],
    ):
        got = out.setdefault((ws, tid), {})
        got.update({"responses": responses, "lowConfidenceShare": low / responses,
                    "latencyP95Ms": p95, "guardrailTriggersPer1000Responses": 0.0})  # fmt: skip
    for ws, tid, triggers in _sql(
        db,
        f"""SELECT c.workspace_id, t.effective_topic_id, count(*) FROM mart_guardrail_incidents c
            {topic} WHERE c.triggered_at::DATE BETWEEN ? AND ? GROUP BY ALL""",
        [first, last],
    ):
        got = out[(ws, tid)]
        got["triggers"] = triggers
        got["guardrailTriggersPer1000Responses"] = 1000 * triggers / got["responses"]
    return out


def _number(text: str) -> float | None:
    return float(text) if text not in ("", "None") else None


def test_the_page_shows_each_workspaces_topics_with_the_marts_figures(
    topical: dict[str, Any], monkeypatch: pytest.MonkeyPatch, store: Path,
    downloads: list[RecordingManager],
) -> None:  # fmt: skip
    """All workspaces: every topic of each, side by side (the same ids, their own names and
    figures, never summed across workspaces), as the marts hold them."""
    at = _app(topical, monkeypatch)
    assert at.title[0].value == "Topics"
    rows = _download(at, downloads, "topics")
    want = _expected(topical["db"], topical["first"], topical["last"])
    assert {r["workspace_id"] for r in rows} == set(NAMES)
    assert len(rows) == len([k for k, v in want.items() if v.get("conversations")])
    for row in rows:
        tid = int(row["topic_id"]) if row["topic_id"] else None
        expected = want[(row["workspace_id"], tid)]
        assert int(row["conversations"]) == expected["conversations"], row
        assert int(row["leadsQualified"]) == expected["leadsQualified"], row
        for column in ("resolutionRate", "containmentRate", "escalationRate", "csat",
                       "lowConfidenceShare", "guardrailTriggersPer1000Responses",
                       "latencyP95Ms"):  # fmt: skip
            if expected.get(column) is None:
                assert _number(row[column]) is None, (row, column)
            else:
                assert _number(row[column]) == pytest.approx(expected[column], rel=1e-9), column
    for ws in NAMES:  # shares are of each workspace's own conversations
        assert sum(float(r["share"]) for r in rows if r["workspace_id"] == ws) == pytest.approx(1)
    labels = {(r["workspace_id"], r["topic_id"]): r["topic"] for r in rows}
    assert len({labels[(ws, "1")] for ws in NAMES}) == 3  # topic 1 is a different one in each
    assert len(at.get("vega_lite_chart")) == 2 * len(NAMES)  # bars and trend, per workspace
    assert not _has(at, "topics_rename")  # every workspace shown: no form to act on them
    assert any("Choose a workspace in the sidebar" in i.value for i in at.info)


def test_a_topics_change_comes_with_its_interval(
    topical: dict[str, Any], monkeypatch: pytest.MonkeyPatch, store: Path,
    downloads: list[RecordingManager],
) -> None:  # fmt: skip
    """A range whose previous period the data covers: each topic's change in conversations
    comes with its 95 % interval (the ratio of two Poisson counts over the same number of
    days, minus one), which holds the change."""
    from convo_analytics.compare import poisson_rate_ratio

    first, last = topical["last"] - timedelta(days=3), topical["last"]
    at = _app(topical, monkeypatch, query={"from": str(first), "to": str(last)})
    rows = [r for r in _download(at, downloads, "topics") if r["change"]]
    assert rows
    for row in rows:
        low, high = float(row["change_low"]), float(row["change_high"])
        assert low <= float(row["change"]) <= high, row
        ratio = poisson_rate_ratio(int(row["conversations"]), 4,
                                   int(row["previous_conversations"]), 4)  # fmt: skip
        assert ratio.low is not None and ratio.high is not None
        assert (low, high) == pytest.approx((ratio.low - 1, ratio.high - 1), rel=1e-9), row
    assert any(float(r["change_low"]) < 0 < float(r["change_high"]) for r in rows)
    assert any("95 % confidence interval" in c.value for c in at.caption)


def _has(at: AppTest, key: str) -> bool:
    return any(b.key == key for b in at.button)


def _lines(store: Path) -> list[dict[str, Any]]:
    return [orjson.loads(line) for line in store.read_bytes().splitlines() if line.strip()]


def _snapshot_label(topical: dict[str, Any], ws: str, topic_id: int) -> str:
    snap = current_snapshot(topical["published"])
    assert snap is not None
    con = snap.connect()
    try:
        return str(con.execute("SELECT label FROM mart_topics WHERE workspace_id = ? AND "
                               "topic_id = ?", [ws, topic_id]).fetchall()[0][0])  # fmt: skip
    finally:
        con.close()


def test_a_rename_and_a_merge_from_the_page_land_in_the_store_and_show_at_once(
    topical: dict[str, Any], monkeypatch: pytest.MonkeyPatch, store: Path
) -> None:
    at = _app(topical, monkeypatch, query={"workspace": "ws_acme"})
    discovered = _snapshot_label(topical, "ws_acme", 1)
    one, two = _row(at, "acme", 1)["conversations"], _row(at, "acme", 2)["conversations"]
    at.selectbox(key="topics_pick").set_value("ws_acme:1").run()
    at.text_input(key="topics_new_name").input("  Exporting   reports ").run()
    at.button(key="topics_rename").click().run()
    assert not at.exception, at.exception
    assert [(c["workspace_id"], c["action"], c["topic_id"], c["label"], c["created_by"])
            for c in _lines(store)] == [("ws_acme", "rename", 1, "Exporting reports",
                                         "dashboard")]  # fmt: skip
    renamed = _row(at, "acme", 1)
    assert renamed["topic"] == "Exporting reports" and renamed["pending"]
    assert "Exporting reports (#1)" in at.sidebar.multiselect(key="filter_topics").options
    assert any("marts" not in s.value and "Exporting reports" in s.value for s in at.success)
    # the snapshot (and the warehouse it was published from) are left as they were
    assert _snapshot_label(topical, "ws_acme", 1) == discovered
    assert _sql(topical["db"], "SELECT label FROM mart_topics WHERE workspace_id = 'ws_acme' "
                               "AND topic_id = 1", [])[0][0] == discovered  # fmt: skip

    at.selectbox(key="topics_merge_into").set_value(2).run()
    at.button(key="topics_merge").click().run()
    assert not at.exception, at.exception
    assert _lines(store)[-1]["action"] == "merge" and _lines(store)[-1]["target_topic_id"] == 2
    table = _table(at)
    assert not ((table["workspace"] == "acme") & (table["topic_id"].astype(str) == "1")).any()
    merged = _row(at, "acme", 2)
    assert merged["conversations"] == one + two
    assert "Exporting reports (#1)" in merged["merged_topics"]
    assert "ws_acme:1" not in at.sidebar.multiselect(key="filter_topics").options

    at.selectbox(key="topics_pick").set_value("ws_acme:2").run()
    at.selectbox(key="topics_unmerge_pick").set_value(1).run()
    at.button(key="topics_unmerge").click().run()
    assert not at.exception, at.exception
    assert [c["action"] for c in _lines(store)] == ["rename", "merge", "unmerge"]
    assert _row(at, "acme", 1)["conversations"] == one
    assert _row(at, "acme", 2)["conversations"] == two


def test_curating_one_workspaces_topic_never_touches_another(
    topical: dict[str, Any], monkeypatch: pytest.MonkeyPatch, store: Path
) -> None:
    """The forms act on the sidebar's workspace: topic 1 of acme renamed and merged leaves
    topic 1 of globex (another topic that happens to share the number) as it was."""
    at = _app(topical, monkeypatch)
    globex_one = _row(at, "globex", 1)
    at.sidebar.selectbox(key="filter_workspace").select("ws_acme").run()
    assert set(_table(at)["workspace"]) == {"acme"}
    at.selectbox(key="topics_pick").set_value("ws_acme:1").run()
    at.text_input(key="topics_new_name").input("Acme only").run()
    at.button(key="topics_rename").click().run()
    at.selectbox(key="topics_merge_into").set_value(2).run()
    at.button(key="topics_merge").click().run()
    assert not at.exception, at.exception
    assert {c["workspace_id"] for c in _lines(store)} == {"ws_acme"}

    at.sidebar.selectbox(key="filter_workspace").select("ws_globex").run()
    assert not at.exception, at.exception
    assert set(_table(at)["workspace"]) == {"globex"}
    mine = _row(at, "globex", 1)
    assert mine["topic"] == globex_one["topic"] and not mine["pending"]
    assert mine["conversations"] == globex_one["conversations"]
    assert not any("Acme only" in o for o in at.sidebar.multiselect(key="filter_topics").options)
    at.selectbox(key="topics_pick").set_value("ws_globex:1").run()
    at.text_input(key="topics_new_name").input("Globex only").run()
    at.button(key="topics_rename").click().run()
    assert [c["workspace_id"] for c in _lines(store)] == ["ws_acme", "ws_acme", "ws_globex"]

    at.sidebar.selectbox(key="filter_workspace").select("").run()  # all: side by side
    assert _row(at, "globex", 1)["topic"] == "Globex only"
    assert not ((_table(at)["workspace"] == "acme") & (_table(at)["topic"] == "Globex only")).any()
    options = at.sidebar.multiselect(key="filter_topics").options
    assert "acme: Acme only (#1)" not in options  # merged into 2: not offered on its own
    assert "globex: Globex only (#1)" in options
    assert not _has(at, "topics_rename")  # every workspace shown: no form to act on them


def _count(text: str) -> int:
    return int(text.replace(",", ""))


def test_a_topic_chosen_in_the_sidebar_narrows_every_page(
    topical: dict[str, Any], monkeypatch: pytest.MonkeyPatch, store: Path,
    downloads: list[RecordingManager],
) -> None:  # fmt: skip
    want = _expected(topical["db"], topical["first"], topical["last"])[("ws_globex", 2)]
    n = want["conversations"]
    at = _app(topical, monkeypatch, "overview", {"workspace": "ws_globex", "topic": "2"})
    assert at.sidebar.multiselect(key="filter_topics").value == ["ws_globex:2"]
    tiles = {m.label: m.value for m in at.metric}
    assert _count(tiles["Conversations"]) == n
    assert tiles["Resolution rate"] == f"{want['resolutionRate']:.1%}"
    at.radio(key="overview_breakdown").set_value("topic").run()  # topic as a breakdown
    assert not at.exception, at.exception
    (breakdown,) = [d.value for d in at.dataframe if "topic" in d.value.columns]
    assert list(breakdown["topic_id"]) == [2] and list(breakdown["conversations"]) == [n]

    at.switch_page("app_pages/conversations.py").run()
    assert f"{n:,} conversations" in at.caption[0].value
    at.switch_page("app_pages/leads.py").run()
    funnel = at.dataframe[0].value
    assert funnel.loc[funnel["step"] == "started", "conversations"].item() == n
    at.switch_page("app_pages/guardrails.py").run()
    log = next(
        d.value for d in at.dataframe if "flag" in d.value.columns and "rule" in d.value.columns
    )
    assert len(log) == want.get("triggers", 0)
    at.switch_page("app_pages/quality.py").run()
    responses = _download(at, downloads, "low_confidence")
    assert sum(int(r["assistantResponses"]) for r in responses) == want["responses"]
    at.switch_page("app_pages/workspaces.py").run()
    table = at.dataframe[0].value  # globex's topic is globex's: the others have none of it
    assert list(table["conversations"]) == [0, n, 0, n]
    at.switch_page("app_pages/topics.py").run()
    assert list(_table(at)["topic_id"]) == [2]
    assert at.query_params["topic"] == "2" and at.query_params["workspace"] == "ws_globex"


@pytest.mark.parametrize(
    ("query", "kept", "note"),
    [
        ({"topic": "globex:2"}, ["ws_globex:2"], None),  # a workspace named by its name
        ({"workspace": "ws_globex", "topic": "ws_acme:2"}, [],
         "?topic=` ws_acme:2 ` is not a topic of the chosen workspace: ignored."),
        ({"topic": "2"}, [], "?topic=2: name its workspace too (workspace:number): ignored."),
        ({"topic": "ws_acme:9999"}, [], "?topic=` ws_acme:9999 `: the data has no such topic"),
        ({"topic": "[x](http://127.0.0.1:9/)"}, [], "is not a topic (its number, or "),
    ],
)  # fmt: skip
def test_a_topic_in_the_url_is_checked_against_the_workspaces_topics(
    topical: dict[str, Any], monkeypatch: pytest.MonkeyPatch, store: Path,
    query: dict[str, str], kept: list[str], note: str | None,
) -> None:  # fmt: skip
    at = _app(topical, monkeypatch, "topics", query)
    assert at.sidebar.multiselect(key="filter_topics").value == kept
    said = " ".join(i.value for i in at.info)
    assert (note in said) if note else "adjusted" not in said, said
    assert_no_markup(at)


def test_a_topic_merged_since_a_link_was_made_opens_as_the_one_it_is_merged_into(
    topical: dict[str, Any], monkeypatch: pytest.MonkeyPatch, store: Path
) -> None:
    at = _app(topical, monkeypatch, query={"workspace": "ws_initech"})
    at.selectbox(key="topics_pick").set_value("ws_initech:3").run()
    at.selectbox(key="topics_merge_into").set_value(2).run()
    at.button(key="topics_merge").click().run()
    linked = _app(topical, monkeypatch, "overview", {"topic": "ws_initech:3"})
    assert linked.sidebar.multiselect(key="filter_topics").value == ["ws_initech:2"]
    assert any("topic 3 is merged into topic 2: showing that one" in i.value for i in linked.info)


def test_a_topic_opens_its_conversations(
    topical: dict[str, Any], monkeypatch: pytest.MonkeyPatch, store: Path
) -> None:
    at = _app(topical, monkeypatch)
    n = _row(at, "globex", 2)["conversations"]
    at.selectbox(key="topics_pick").set_value("ws_globex:2").run()
    at.button(key="topics_open").click().run()
    assert not at.exception, at.exception
    assert at.title[0].value == "Conversations"
    assert at.query_params["topic"] == "ws_globex:2"
    assert at.sidebar.multiselect(key="filter_topics").value == ["ws_globex:2"]
    assert f"{n:,} conversations" in at.caption[0].value
    assert set(at.dataframe[0].value["workspace"]) == {"globex"}


def test_labels_and_examples_show_as_written(
    topical: dict[str, Any], monkeypatch: pytest.MonkeyPatch, store: Path
) -> None:
    """A label typed into the form and examples end users wrote reach tables, charts and
    plain text, never Markdown (no link, image or script)."""
    at = _app(topical, monkeypatch, query={"workspace": "ws_acme"})
    at.selectbox(key="topics_pick").set_value("ws_acme:1").run()
    at.text_input(key="topics_new_name").input(HOSTILE_LABEL).run()
    at.button(key="topics_rename").click().run()
    assert not at.exception, at.exception
    assert _lines(store)[-1]["label"] == HOSTILE_LABEL
    assert_no_markup(at)  # the confirmation quotes the name as text
    at.sidebar.selectbox(key="filter_workspace").select("").run()
    assert _row(at, "acme", 1)["topic"] == HOSTILE_LABEL
    at.selectbox(key="topics_pick").set_value("ws_initech:1").run()
    texts = [t.value for t in at.text]
    assert all(example in texts for example in HOSTILE_EXAMPLES), texts
    assert set(HOSTILE_EXAMPLES) <= set(_row(at, "initech", 1)["examples"].split(", ", 1))
    assert_no_markup(at)
    for page, widget, value in (("overview", "overview_breakdown", "topic"),
                                ("leads", "funnel_by", "topic")):  # fmt: skip
        at.switch_page(f"app_pages/{page}.py").run()
        (at.radio if page == "overview" else at.selectbox)(key=widget).set_value(value).run()
        assert not at.exception, (page, at.exception)
        shown = [d.value for d in at.dataframe if "topic" in d.value.columns]
        assert any(f"acme: {HOSTILE_LABEL} (#1)" in set(t["topic"]) or
                   f"{HOSTILE_LABEL} (#1)" in set(t["topic"]) for t in shown), page  # fmt: skip
        assert_no_markup(at)


def test_explore_describes_the_topic_tables(
    topical: dict[str, Any], monkeypatch: pytest.MonkeyPatch, store: Path
) -> None:
    at = _app(topical, monkeypatch, "explore")
    described = {"mart_topics": "Every topic as analysts see it",
                 "conversation_topics": "The topic of each conversation",
                 "knowledge_gaps": "Assistant answers that did not answer"}  # fmt: skip
    assert set(described) <= set(at.selectbox(key="explore_schema_table").options)
    for table, description in described.items():
        at.selectbox(key="explore_schema_table").set_value(table).run()
        assert not at.exception, at.exception
        assert any(description in c.value for c in at.caption), table
        rows = next(t.value for t in at.table if "column" in t.value)
        if table != "knowledge_gaps":  # every column's meaning (the gaps are another's)
            assert all(rows["meaning"].astype(bool)), (table, rows)
