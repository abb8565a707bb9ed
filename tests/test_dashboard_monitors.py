"""The Monitors page through AppTest, on a snapshot whose monitors were really judged: the
sandbox's history (with one conversation of hostile end-user text) in a warehouse, three
``[[monitors]]`` of convo.toml judged by ``run_monitors``, then published. The page lists
the config's and the store's monitors with their states, draws a monitor's windows and
explains its alert (slice values as text), and its form saves to, and deletes from, the
app's own store only; a snapshot from before monitors still shows the page."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from streamlit.testing.v1 import AppTest

from convo_analytics.config import MonitorSpec, load_settings
from convo_analytics.monitors import read_stored, run_monitors, save_monitor
from convo_analytics.publish import publish_snapshot
from convo_analytics.warehouse import open_warehouse
from dashboard_support import assert_no_markup, hostile_snapshot, hostile_source

ROOT = Path(__file__).resolve().parent.parent
APP = str(ROOT / "dashboards" / "streamlit_app.py")
#: Nothing listens on the discard port: these tests look at what the app draws.
BEACON = "http://127.0.0.1:9"
#: The monitors of convo.toml: every day above 2 conversations (alerts, some resolved),
#: the escalation rate against the trailing 3 days, and the hostile source's conversations.
CONFIG = """
[transform]
timezones = ["UTC"]

[notify]
delivery_log = {log}

[monitoring]
store_file = {store}

[[monitors]]
name = "daily-volume"
metric = "conversations"
condition = "threshold"
above = 2
min_sample = 1
severity = "critical"

[[monitors]]
name = "escalation-trailing"
metric = "escalationRate"
baseline = "trailing"
windows = 3
min_sample = 1

[[monitors]]
name = "hostile-source"
metric = "conversations"
condition = "threshold"
above = 0
min_sample = 1
filters = {{ source = [{source}] }}
"""


@pytest.fixture(scope="module")
def judged(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    folder = tmp_path_factory.mktemp("monitors-page")
    config = folder / "convo.toml"
    config.write_text(CONFIG.format(
        log=json.dumps(str(folder / "deliveries.jsonl")),
        store=json.dumps(str(folder / "unused.jsonl")),
        source=json.dumps(hostile_source(BEACON)),
    ))  # fmt: skip
    with hostile_snapshot(folder, BEACON) as (_published, _cid):
        db = folder / "w.duckdb"
        con = open_warehouse(db)
        try:  # the same warehouse, published as a version without monitors would have
            publish_snapshot(
                con,
                db,
                folder / "old",
                prepare=lambda c: c.execute("DROP TABLE monitor_evaluations"),
            )
        finally:  # fmt: skip
            con.close()
        settings = load_settings(config, {}, environ={})
        counts = run_monitors(settings, db, now=datetime(2026, 11, 20, 6, tzinfo=UTC))
        assert counts["monitors"] == 3 and counts["alerts"] > 0, counts
        con = open_warehouse(db)
        try:
            publish_snapshot(con, db, folder / "published")
            latest = con.execute(
                "SELECT monitor, state FROM (SELECT *, row_number() OVER (PARTITION BY monitor, "
                "workspace_id, series ORDER BY window_start DESC) n FROM monitor_evaluations) "
                "WHERE n = 1"
            ).fetchall()
        finally:
            con.close()
        yield {"folder": folder, "config": config, "latest": dict(latest)}


@pytest.fixture
def store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh store of the dashboard's monitors for each test (the environment wins over
    the config file, as for every setting)."""
    path = tmp_path / "app-state" / "monitors.jsonl"
    monkeypatch.setenv("CONVO_MONITORING_STORE_FILE", str(path))
    return path


def _app(judged: dict[str, Any], monkeypatch: pytest.MonkeyPatch, published: str = "published",
         query: dict[str, str] | None = None) -> AppTest:  # fmt: skip
    monkeypatch.setenv("CONVO_PUBLISHED_DIR", str(judged["folder"] / published))
    monkeypatch.setenv("CONVO_CONFIG", str(judged["config"]))
    at = AppTest.from_file(APP, default_timeout=60)
    at.query_params.update({"from": "2026-11-09", "to": "2026-11-18", **(query or {})})
    at.run()
    assert not at.exception, at.exception
    at.switch_page("app_pages/monitors.py").run()
    assert not at.exception, at.exception
    return at


def _monitors(at: AppTest) -> dict[str, dict[str, Any]]:
    table = next(df.value for df in at.dataframe if "states" in df.value.columns)
    return {row["monitor"]: row for row in table.to_dict("records")}


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def test_the_table_lists_config_and_stored_monitors_with_their_states(
    judged: dict[str, Any], store: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    save_monitor(store, MonitorSpec(name="made-here", metric="csat", condition="threshold",
                                    below=0.5))  # fmt: skip
    at = _app(judged, monkeypatch)
    shown = _monitors(at)
    assert list(shown) == ["daily-volume", "escalation-trailing", "hostile-source", "made-here"]
    assert [shown[n]["from"] for n in shown] == ["convo.toml"] * 3 + ["dashboard"]
    for name, state in judged["latest"].items():  # one workspace: one series each
        assert f": {state}" in shown[name]["states"], (name, shown[name])
    assert shown["made-here"]["states"] == "not judged yet"
    assert "csat" in shown["made-here"]["rule"] and "below 0.5" in shown["made-here"]["rule"]
    assert any("next run" in c.value and "convo monitors evaluate" in c.value for c in at.caption)
    # the picked monitor: its chart, its episodes and the alert's explanation
    at.selectbox(key="monitors_pick").select("daily-volume").run()
    assert not at.exception, at.exception
    assert at.get("vega_lite_chart"), "no chart of the monitor's windows"
    episodes = next(df.value for df in at.dataframe if "opened" in df.value.columns)
    assert len(episodes) >= 1
    assert any("By channel" in m.value for m in at.markdown)
    links = [e.proto for e in at.get("page_link")]
    opened = [p for p in links if "conversation=" in p.query_string]
    assert opened and all(p.page.endswith("conversations") and not p.external for p in opened)
    assert all("127.0.0.1" not in p.query_string for p in links)


def test_the_form_creates_a_monitor_in_the_store_and_the_page_lists_it(
    judged: dict[str, Any], store: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    at = _app(judged, monkeypatch)
    at.text_input(key="mon_name").input("web-escalations")
    at.selectbox(key="mon_metric").select("escalatedConversations")
    at.text_input(key="mon_filter_channel").input("web, email")
    at.radio(key="mon_condition").set_value("threshold").run()
    at.text_input(key="mon_above").input("12.5")
    at.button(key="mon_save").click().run()
    assert not at.exception, at.exception
    assert not at.error, [e.value for e in at.error]
    (line,) = _lines(store)
    assert line["op"] == "save" and line["by"] == "dashboard"
    assert line["monitor"] == {"name": "web-escalations", "metric": "escalatedConversations",
                               "filters": {"channel": ["web", "email"]},
                               "condition": "threshold", "above": 12.5}  # fmt: skip
    (saved,) = read_stored(store)
    assert saved.above == 12.5 and saved.filters.channel == ("web", "email")
    assert "web-escalations" in _monitors(at)
    assert _monitors(at)["web-escalations"]["from"] == "dashboard"
    assert any("saved" in s.value and "next run" in s.value for s in at.success)
    # now being edited: a new description is a new line for the same name
    assert at.selectbox(key="mon_edit").value == "web-escalations"
    at.text_area(key="mon_description").input("web and email only")
    at.button(key="mon_save").click().run()
    assert not at.exception and not at.error
    assert [r["monitor"].get("description") for r in _lines(store)] == [None, "web and email only"]
    assert read_stored(store)[0].description == "web and email only"


@pytest.mark.parametrize(
    ("fill", "said"),
    [
        ({"mon_name": "bad-k", "mon_k": 0.0}, "k: Input should be greater than 0"),
        ({"mon_name": "no-limit", "mon_condition": "threshold"},
         "a threshold monitor needs above"),
        ({"mon_name": "daily-volume"}, "is a monitor of convo.toml"),
        ({"mon_name": "bad name!"}, "is not a monitor name"),
        ({"mon_name": "tiered", "mon_filter_tier": "premium"}, "filters.tier"),
        ({"mon_name": "nowhere", "mon_timezone": "Mars/Olympus"}, "is not an IANA time zone"),
    ],
)  # fmt: skip
def test_an_invalid_form_value_shows_one_readable_error_and_writes_nothing(
    judged: dict[str, Any], store: Path, monkeypatch: pytest.MonkeyPatch,
    fill: dict[str, Any], said: str,
) -> None:  # fmt: skip
    at = _app(judged, monkeypatch)
    for key, value in fill.items():
        if key == "mon_condition":
            at.radio(key=key).set_value(value).run()
        elif key == "mon_k":
            at.number_input(key=key).set_value(value)
        else:
            at.text_input(key=key).input(value)
    at.button(key="mon_save").click().run()
    assert not at.exception, at.exception
    assert [e.value for e in at.error] == ["Not saved:"]
    problems = [t.value for t in at.text if said in t.value]
    assert len(problems) == 1, [t.value for t in at.text]
    assert "Traceback" not in problems[0] and "\n" not in problems[0]
    assert not store.exists()


def test_delete_removes_a_stored_monitor(
    judged: dict[str, Any], store: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("keep-me", "drop-me"):
        save_monitor(store, MonitorSpec(name=name, metric="conversations"))
    at = _app(judged, monkeypatch)
    assert {"keep-me", "drop-me"} <= set(_monitors(at))
    assert at.selectbox(key="mon_delete_pick").options == ["keep-me", "drop-me"]
    at.selectbox(key="mon_delete_pick").select("drop-me")
    at.button(key="mon_delete").click().run()
    assert not at.exception, at.exception
    assert [s.name for s in read_stored(store)] == ["keep-me"]
    assert _lines(store)[-1]["op"] == "delete"
    assert "drop-me" not in _monitors(at) and "keep-me" in _monitors(at)
    # config monitors are not offered: they are edited in convo.toml
    assert at.selectbox(key="mon_delete_pick").options == ["keep-me"]
    assert at.selectbox(key="mon_edit").options == ["a new monitor", "keep-me"]


def test_an_alerts_slice_value_from_users_shows_as_text(
    judged: dict[str, Any], store: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    source = hostile_source(BEACON)
    at = _app(judged, monkeypatch)
    at.selectbox(key="monitors_pick").select("hostile-source").run()
    assert not at.exception, at.exception
    by_source = [df.value for df in at.dataframe
                 if "slice" in df.value.columns and source in set(df.value["slice"])]  # fmt: skip
    assert by_source, "the alert's breakdown by source does not show the source"
    assert any(source in t.value for t in at.text)  # the rule, as text
    assert_no_markup(at)


def test_a_snapshot_without_monitor_evaluations_says_what_to_do(
    judged: dict[str, Any], store: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    at = _app(judged, monkeypatch, published="old")
    assert any("no monitor evaluations" in i.value and "convo publish" in i.value
               for i in at.info)  # fmt: skip
    shown = _monitors(at)
    assert set(shown) == {"daily-volume", "escalation-trailing", "hostile-source"}
    assert {row["states"] for row in shown.values()} == {"not judged yet"}
    at.text_input(key="mon_name").input("still-works")
    at.button(key="mon_save").click().run()
    assert not at.exception and not at.error
    assert [s.name for s in read_stored(store)] == ["still-works"]
