"""The dashboard's pure parts: views in URLs, drill-down from a click, table formats,
notebook files, Explore's chart choice and literal text (no Streamlit needed; Explore's
query executor is tested in test_notebooks_executor.py)."""

from __future__ import annotations

import math
from datetime import UTC, date, datetime
from pathlib import Path

import duckdb
import polars as pl
import pytest

from convo_analytics.dashboard._explore import (
    AUTO,
    axis_options,
    choose_chart,
    literal,
    name_caption,
)
from convo_analytics.dashboard._format import for_display, human_duration, label_of
from convo_analytics.dashboard._notebooks import (
    Cell,
    Notebook,
    list_notebooks,
    load_notebook,
    notebook_name,
    parse_notebook,
    render_notebook,
    save_notebook,
    schema,
)
from convo_analytics.dashboard._queries import Filters, TopicChoice
from convo_analytics.dashboard._text import plain
from convo_analytics.dashboard._views import (
    Drill,
    Known,
    Slice,
    drill_from_selection,
    filters_from_params,
    filters_from_url,
    filters_to_params,
    page_from_url,
    slice_from_params,
    slice_to_params,
)
from convo_analytics.dashboard._workspaces import with_workspace, workspace_label

DEFAULT = Filters(date(2026, 10, 20), date(2026, 11, 18))


def test_filters_round_trip_through_the_query_string() -> None:
    f = Filters(date(2026, 11, 1), date(2026, 11, 7), "Europe/Berlin", ("sms", "web"), "ws_b")
    params = {k: v if isinstance(v, list) else [v] for k, v in filters_to_params(f).items()}
    assert filters_from_params(params, DEFAULT) == f
    assert params["channel"] == ["sms", "web"] and params["workspace"] == ["ws_b"]
    assert "workspace" not in filters_to_params(DEFAULT)  # all workspaces: no parameter


def test_every_table_gets_the_workspace_by_name() -> None:
    names = {"ws_a": "brand-a", "ws_b": "brand-b"}
    rows = pl.DataFrame({"workspace_id": ["ws_b", "ws_x", None], "n": [1, 2, 3]})
    named = with_workspace(rows, names, None)
    assert named.columns == ["workspace", "workspace_id", "n"]
    assert named["workspace"].to_list() == ["brand-b", "ws_x", "–"]  # unnamed: its id
    totals = pl.DataFrame({"conversations": [7]})
    assert with_workspace(totals, names, "ws_a")["workspace"].to_list() == ["brand-a"]
    assert with_workspace(totals, names, None)["workspace"].to_list() == ["All workspaces"]
    assert workspace_label({"ws_a": "brand-a"}, None) == "brand-a"  # the only one


@pytest.mark.parametrize(
    "params",
    [{"from": ["yesterday"]}, {"to": ["2026-13-40"]}, {"tz": ["Mars/Base"]},
     {"from": ["2026-11-10"], "to": ["2026-11-01"]}],
)  # fmt: skip
def test_a_bad_url_value_falls_back_to_the_default(params: dict[str, list[str]]) -> None:
    got = filters_from_params(params, DEFAULT)
    assert (got.first, got.last, got.tz) == (DEFAULT.first, DEFAULT.last, DEFAULT.tz)


KNOWN = Known(date(2026, 10, 1), date(2026, 11, 24), ("sms", "web"), {"ws_a": "brand-a"},
              ("UTC", "Europe/Berlin"))  # fmt: skip


@pytest.mark.parametrize(
    ("params", "shown", "note"),
    [
        ({"to": ["2026-11-30"]}, (date(2026, 10, 26), date(2026, 11, 24)),
         "?to=2026-11-30 is after the last day with data (2026-11-24): showing up to 2026-11-24."),
        ({"from": ["2020-01-01"], "to": ["2026-11-10"]}, (date(2026, 10, 1), date(2026, 11, 10)),
         "?from=2020-01-01 is before the first day with data (2026-10-01): showing from "
         "2026-10-01."),
        ({"to": ["2026-11-10"]}, (date(2026, 10, 12), date(2026, 11, 10)), None),
        ({"from": ["2026-11-20"]}, (date(2026, 11, 20), date(2026, 11, 24)), None),
        ({"from": ["2026-13-45"]}, (date(2026, 10, 26), date(2026, 11, 24)),
         "?from=2026-13-45 is not a date (YYYY-MM-DD): ignored."),
        ({"from": ["2026-11-20"], "to": ["2026-11-10"]}, (date(2026, 10, 26), date(2026, 11, 24)),
         "?from=2026-11-20 is after ?to=2026-11-10: showing 2026-10-26 to 2026-11-24 instead."),
    ],
)  # fmt: skip
def test_url_days_are_clamped_to_the_data_with_a_note(
    params: dict[str, list[str]], shown: tuple[date, date], note: str | None
) -> None:
    got, notes = filters_from_url(params, KNOWN)
    assert (got.first, got.last) == shown
    assert notes == ([note] if note else [])


def test_url_values_the_data_lacks_are_dropped_with_a_note() -> None:
    got, notes = filters_from_url({"channel": ["sms,nonexistent"], "workspace": ["brand-a"],
                                   "tz": ["Mars/" + "x" * 5000]}, KNOWN)  # fmt: skip
    assert (got.channels, got.workspace, got.tz) == (("sms",), "ws_a", "UTC")  # a name: its id
    assert notes[0].endswith("is not one of the dashboard's time zones: showing UTC.")
    assert notes[1] == "?channel=nonexistent: the data has no such channel; ignored."
    got, notes = filters_from_url({"workspace": ["[x](http://127.0.0.1:9/)"]}, KNOWN)
    assert got.workspace is None
    assert notes == ["?workspace=` [x](http://127.0.0.1:9/) `: the data has no such workspace; "
                     "showing all workspaces."]  # fmt: skip


@pytest.mark.parametrize(
    ("text", "page", "noted"),
    [("3", 3, False), ("abc", 1, True), ("²", 1, True), ("0", 1, True), ("-2", 1, True),
     ("9" * 5000, 10**9, False), ("007", 7, False)],
)  # fmt: skip
def test_a_page_number_from_the_url_never_raises(text: str, page: int, noted: bool) -> None:
    assert page_from_url({"page": [text]}) == (
        page,
        [f"?page={plain(text)} is not a page number: showing page 1."] if noted else [],
    )


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        ("resolved", "resolved"),
        ("en-US", "en-US"),
        ("2026-11-30", "2026-11-30"),
        ("Europe/Berlin", "Europe/Berlin"),
        ("pii.email", "pii.email"),
        ("[sign in again](http://127.0.0.1:9/)", "` [sign in again](http://127.0.0.1:9/) `"),
        ("![x](http://127.0.0.1:9/b.png)", "` ![x](http://127.0.0.1:9/b.png) `"),
        ("<img src=x>", "` <img src=x> `"),
        ("www.example.com", "` www.example.com `"),
        ("a -> b", "` a -> b `"),
        (":smile:", "` :smile: `"),
        ("two\nlines", "two lines"),
        ("a\n# heading", "` a # heading `"),
        ("`code` and ``more``", "``` `code` and ``more`` ```"),
        (":material/home:", "` :\u200bmaterial/home: `"),
        ("x" * 100, "` " + "x" * 79 + "… `"),
        ("", ""),
        (None, ""),
    ],
)  # fmt: skip
def test_text_from_the_data_is_made_plain_for_markdown(value: object, shown: str) -> None:
    assert plain(value) == shown


def test_a_slice_round_trips_and_bad_values_are_dropped() -> None:
    s = Slice(day=date(2026, 11, 2), basis="incidents", flag="pii.email", statuses=("open",),
              escalated=False, band=0.3, step="qualified", search="refund")  # fmt: skip
    params = {k: v if isinstance(v, list) else [v] for k, v in slice_to_params(s).items()}
    assert slice_from_params(params) == s
    junk = slice_from_params({"band": ["7"], "step": ["nowhere"], "basis": ["x"],
                              "status": ["open,bogus"], "escalated": ["maybe"]})  # fmt: skip
    assert junk == Slice(statuses=("open",))
    assert s.drilled and not Slice(statuses=("open",), search="x").drilled


@pytest.mark.parametrize(
    ("chart", "picked", "expected"),
    [
        ("breakdown", {"locale": "de-DE"}, Slice(locale="de-DE")),
        ("breakdown", {"model_tier": "fast"}, Slice(tier="fast")),
        ("daily", {"date": 1_762_992_000_000}, Slice(day=date(2025, 11, 13))),
        ("funnel", {"step": "qualified"}, Slice(step="qualified")),
        ("confidence", {"date": "2026-11-02", "band": 0.3},
         Slice(day=date(2026, 11, 2), basis="responses", band=0.3)),
        ("incidents", {"date": "2026-11-02T00:00:00", "flag": "pii.email"},
         Slice(day=date(2026, 11, 2), basis="incidents", flag="pii.email")),
        ("feedback", {"date": "2026-11-02"}, Slice(day=date(2026, 11, 2), basis="feedback")),
    ],
)  # fmt: skip
def test_a_click_becomes_the_slice_behind_the_mark(
    chart: str, picked: dict[str, object], expected: Slice
) -> None:
    drill = drill_from_selection(picked, chart)
    assert drill is not None and drill.slice == expected and drill.channels is None


def test_a_click_on_a_channel_sets_the_channel_filter() -> None:
    drill = drill_from_selection({"channel": "sms"}, "breakdown")
    assert drill is not None and drill.channels == ("sms",) and drill.slice == Slice()
    assert drill_from_selection({}, "breakdown") is None


#: Two workspaces' topics as the sidebar knows them: topic 5 of ws_a is merged into its 3,
#: and topic 1 is a different topic in each workspace.
_THREE = TopicChoice("ws_a", 3, ("3", "5"))
TOPICS = {"ws_a:1": TopicChoice("ws_a", 1, ("1",)), "ws_a:3": _THREE, "ws_a:5": _THREE,
          "ws_b:1": TopicChoice("ws_b", 1, ("1",))}  # fmt: skip
BOTH = Known(date(2026, 10, 1), date(2026, 11, 24), ("sms", "web"),
             {"ws_a": "brand-a", "ws_b": "brand-b"}, ("UTC",), TOPICS)  # fmt: skip


def test_topics_travel_in_the_url_each_in_its_own_workspace() -> None:
    f, notes = filters_from_url({"workspace": ["ws_a"], "topic": ["3", "5", "ws_b:1", "7"]}, BOTH)
    assert f.topics == (_THREE,)  # 5 reads as the topic it is merged into, once
    assert notes == [
        "?topic=5: topic 5 is merged into topic 3: showing that one.",
        "?topic=` ws_b:1 ` is not a topic of the chosen workspace: ignored.",
        "?topic=7: the data has no such topic: ignored.",
    ]
    assert filters_to_params(f)["topic"] == ["3"]  # a number in the chosen workspace
    every, notes = filters_from_url({"topic": ["brand-b:1", "ws_a:1", "1"]}, BOTH)
    assert [c.key for c in every.topics] == ["ws_b:1", "ws_a:1"]
    assert notes == ["?topic=1: name its workspace too (workspace:number): ignored."]
    assert filters_to_params(every)["topic"] == ["ws_b:1", "ws_a:1"]
    sql, params = every.where("c")  # each topic's values in its own workspace only
    assert sql == (" AND ((c.workspace_id = ? AND c.topic IN (?)) OR "
                   "(c.workspace_id = ? AND c.topic IN (?)))")  # fmt: skip
    assert params == ["ws_b", "1", "ws_a", "1"]
    assert every.dimensions() == {"topic": ["1"]}


def test_a_click_on_a_topic_sets_the_topic_filter() -> None:
    drill = drill_from_selection({"topic_key": "ws_a:3"}, "breakdown")
    assert drill == Drill(Slice(), topics=("ws_a:3",))
    on_a_day = drill_from_selection({"topic_key": "ws_a:3", "date": "2026-11-02"}, "topic_trend")
    assert on_a_day == Drill(Slice(day=date(2026, 11, 2)), topics=("ws_a:3",))
    assert drill_from_selection({"topic_key": None}, "topics") is None  # no topic yet: no link


def test_tables_get_human_labels_and_formats_and_keep_numbers_numbers() -> None:
    frame = pl.DataFrame({
        "escalated_conversations": [3, 1],
        "resolution_rate": [0.7242, 0.5],
        "resolution_seconds": [13037.907, None],
        "first_response_ms": [812.0, 1500.0],
        "started_at": [datetime(2026, 11, 2, 9, 30, 12, 345678, tzinfo=UTC), None],
        "contact_fields": [["email", "phone"], None],
        "intent": ["pricing", None],
    })  # fmt: skip
    shown = for_display(frame, "Europe/Berlin")
    cols = shown.columns
    assert cols["escalated_conversations"].label == "Escalated"
    # a percentage: its value scaled to 0-100 (it sorts as a number), one decimal
    assert cols["resolution_rate"].format == "%,.1f%%" and not cols["resolution_rate"].as_text
    assert shown.frame["resolution_rate"].to_list() == [72.42, 50.0]
    assert shown.frame["resolution_seconds"].to_list() == ["3.6 h", "–"]  # a gap: text
    assert cols["first_response_ms"].format == "%,.1f s"  # no gap: a number, in seconds
    assert shown.frame["first_response_ms"].to_list() == [0.812, 1.5]
    assert shown.frame["started_at"].to_list() == ["2026-11-02 10:30", "–"]  # no microseconds
    assert cols["started_at"].label == "Started (Europe/Berlin)"
    assert shown.frame["contact_fields"].to_list() == ["email, phone", "–"]
    assert shown.frame["intent"].to_list() == ["pricing", "–"]
    assert label_of("guardrailTriggersPer1000Responses").startswith("Guardrail triggers")
    assert label_of("median_time_to_first_reply") == "Median time to first reply"
    assert human_duration(13037.907) == "3.6 h" and human_duration(0.5) == "500 ms"


def test_a_notebook_file_reads_back_to_the_same_notebook(tmp_path: Path) -> None:
    notebook = Notebook("Refunds", "How refunds go.", [
        Cell("By channel", "SELECT channel, count(*) AS n FROM mart_conversations GROUP BY 1",
             "bar"),
        Cell("Per day", "SELECT started_at::DATE AS day, count(*) AS n\\nFROM x GROUP BY 1"),
    ])  # fmt: skip
    text = render_notebook(notebook)
    assert "-- %% By channel\n-- chart: bar\nSELECT channel" in text
    assert parse_notebook(text) == notebook
    path = save_notebook(tmp_path, "refunds", notebook)
    assert path == tmp_path / "refunds.sql" and load_notebook(tmp_path, "refunds") == notebook
    assert "refunds" in list_notebooks(tmp_path)
    with pytest.raises(ValueError, match="not a notebook name"):
        save_notebook(tmp_path, "../escape", notebook)
    assert notebook_name("../etc/passwd") is None and load_notebook(tmp_path, "../x") is None


def test_the_starter_notebooks_ship_and_parse() -> None:
    starters = list_notebooks(Path("/nonexistent"))
    assert {"escalations_by_reason_and_channel", "guardrail_incidents_by_locale",
            "lead_funnel_by_source"} <= set(starters)  # fmt: skip
    for name in starters:
        notebook = load_notebook(Path("/nonexistent"), name)
        assert notebook is not None and notebook.cells and all(c.sql for c in notebook.cells)


def test_a_saved_notebook_wins_over_a_starter_of_the_same_name(tmp_path: Path) -> None:
    save_notebook(tmp_path, "lead_funnel_by_source", Notebook("Mine", "", [Cell("a", "SELECT 1")]))
    assert list_notebooks(tmp_path)["lead_funnel_by_source"] == "Mine"


@pytest.mark.parametrize(
    ("frame", "wanted", "kind", "x", "y", "color"),
    [
        (pl.DataFrame({"day": [date(2026, 1, 1)], "n": [1]}), "auto", "line", "day", "n", None),
        (pl.DataFrame({"channel": ["web"], "n": [1]}), "auto", "bar", "channel", "n", None),
        (pl.DataFrame({"week": [date(2026, 1, 1)], "channel": ["web"], "rate": [0.5]}), "auto",
         "line", "week", "rate", "channel"),
        (pl.DataFrame({"a": [1.0], "b": [2.0]}), "auto", "point", "a", "b", None),
        (pl.DataFrame({"channel": ["web"], "n": [1]}), "line", "line", "channel", "n", None),
        (pl.DataFrame({"channel": ["web"], "n": [1]}), "none", "none", None, None, None),
        (pl.DataFrame({"text": ["only text"]}), "auto", "none", None, None, None),
    ],
)  # fmt: skip
def test_a_chart_is_chosen_from_the_result_types(
    frame: pl.DataFrame, wanted: str, kind: str, x: str | None, y: str | None, color: str | None
) -> None:
    choice = choose_chart(frame, wanted)  # type: ignore[arg-type]
    assert (choice.kind, choice.x, choice.y, choice.color) == (kind, x, y, color)


def test_an_axis_offers_auto_the_columns_and_a_saved_column_the_result_lost() -> None:
    assert axis_options(["day", "n"], None) == [AUTO, "day", "n"]
    assert axis_options(["day", "n"], "n") == [AUTO, "day", "n"]
    assert axis_options(["day", "n"], "week") == [AUTO, "day", "n", "week"]


@pytest.mark.parametrize(
    ("title", "others", "caption"),
    [
        ("Escalations by reason", [], "Later cells read this result as `escalations_by_reason`."),
        ("[x](https://evil.example) <img>", ["Other"],
         "Later cells read this result as `x_https_evil_example_img`."),
        ("!!!", [], "Later cells cannot read this result: give the cell a title with a letter "
                    "or digit."),
        ("Totals", ["totals!", "Other"], "Later cells read this result as `totals`. Another "
         "cell has the same name: retitle one, so a later cell reads the one it means."),
    ],
)  # fmt: skip
def test_a_cells_caption_names_it_for_later_cells(
    title: str, others: list[str], caption: str
) -> None:
    assert name_caption(title, others) == caption


def test_the_schema_is_described_from_the_warehouse_doc(tmp_path: Path) -> None:
    con = duckdb.connect()
    con.execute("CREATE TABLE mart_conversations (conversation_id VARCHAR, channel VARCHAR)")
    tables = schema(con)
    (mart,) = [t for t in tables if t.name == "mart_conversations"]
    assert mart.description.startswith("One row per conversation")
    assert ("channel", "VARCHAR", "the conversation's channel ('unknown' when not given)") in (
        mart.columns
    )


@pytest.mark.parametrize(
    "text",
    ["[click](https://evil.example)", "![x](https://evil.example/p.png)", "<b>bold</b>",
     "# heading", ":red[alarm] :material/warning: $x^2$", "a `tick` and ``two``", "line\nbreak",
     "www.evil.example"],
)  # fmt: skip
def test_user_text_becomes_one_literal_code_span(text: str) -> None:
    """A code span is shown as written: markdown makes no link, image, HTML, heading,
    colour or formula of it, whatever backticks the text holds."""
    shown = literal(text)
    assert "\n" not in shown
    if not shown.startswith("`"):  # plain words stay as they are (dashboard._text.plain)
        assert shown == " ".join(text.split()) and not set(shown) & set("[]()<>#*_`:$!~|\\")
        return
    fence = shown.split(" ", 1)[0]
    assert set(fence) == {"`"} and shown.endswith(" " + fence)
    inner = shown[len(fence) + 1 : -len(fence) - 1]
    # a zero-width space keeps ":material/" from becoming an icon (Streamlit rewrites it)
    assert inner.replace("\u200b", "") == " ".join(text.split()) and fence not in inner


def test_one_precision_per_unit_in_tiles_tables_axes_and_labels() -> None:
    """A rate reads 70.5% on a tile, in a table (70.48 with "%.1f%%") and a tooltip; an axis
    trims only a round tick's zero; a duration's label names no unit (its values do, in the
    unit its axis uses); names the service gives read as words; downloads say what they hold."""
    from datetime import date

    from convo_analytics.dashboard import charts
    from convo_analytics.dashboard._format import (
        axis_format,
        delta_text,
        download_label,
        enum_label,
        name_text,
        showing,
        tooltip_format,
        value_text,
    )

    assert value_text(0.70482, "percent") == "70.5%" and value_text(0.6772, "percent") == "67.7%"
    table = for_display(pl.DataFrame({"resolution_rate": [0.70482], "csat": [0.6772]}))
    assert table.frame.row(0) == pytest.approx((70.482, 67.72))
    assert {c.format for c in table.columns.values()} == {"%,.1f%%"}  # shown 70.5%, 67.7%
    gappy = for_display(pl.DataFrame({"escalation_rate": [0.1647, None]}))
    assert gappy.frame["escalation_rate"].to_list() == ["16.5%", "–"]
    assert tooltip_format("percent") == ".1%" and axis_format("percent") == ".1~%"
    assert delta_text(0.705, 0.69, "percent") == "+1.5 pts"
    assert delta_text(1450.0, 1200.0, "ms") == "+250 ms" and value_text(1450.0, "ms") == "1.4 s"
    # a duration's label carries no unit: "Latency" over "1.2 s", never "Latency ms"
    messages = for_display(pl.DataFrame({"latency_ms": [1200, 1400, 900]}))
    assert messages.columns["latency_ms"].label == "Latency"
    assert messages.columns["latency_ms"].format == "%,.1f s"
    daily = pl.DataFrame({"date": [date(2026, 11, 14), date(2026, 11, 15)],
                          "latencyP50Ms": [1200.0, 1400.0], "latencyP90Ms": [2000.0, 2400.0],
                          "latencyP95Ms": [2500.0, 2600.0], "latencyP99Ms": [3000.0, 3100.0],
                          "resolutionRate": [0.70482, 0.71]})  # fmt: skip
    latency = charts.latency_percentiles(daily).to_dict()
    assert latency["encoding"]["y"]["title"] == "latency (s)"
    assert {r["latency"] for r in next(iter(latency["datasets"].values()))} >= {1.2, 3.1}
    rate = charts.daily_line(daily, "resolutionRate").to_dict()["encoding"]
    assert rate["y"]["axis"]["format"] == ".1~%" and rate["tooltip"][1]["format"] == ".1%"
    assert rate["x"]["axis"]["format"] == "%b %d"  # every tick "Nov 15", no "Tue 27"
    explore = charts.result_chart(
        pl.DataFrame({"week": [date(2026, 11, 2), date(2026, 11, 9)], "share": [0.1647, 0.2]}),
        "line", "week", "share", None,
    ).to_dict()["encoding"]  # fmt: skip
    assert explore["y"]["axis"]["format"] == ".1~%" and explore["x"]["axis"]["format"] == "%b %d"
    # names the service or the transform gives, in words; anything else as written
    assert enum_label("contact_captured") == "Contact captured"
    assert enum_label("pii.email") == "PII: email" and enum_label("whatsapp") == "WhatsApp"
    assert enum_label("resolutionRate") == "Resolution rate" and enum_label("en-US") == "en-US"
    assert enum_label("[x](http://h)") == "[x](http://h)"
    assert name_text("pii.card") == "PII: card number"
    assert name_text("[x](http://h)") == plain("[x](http://h)")  # data shown as text
    funnel = pl.DataFrame(
        {
            "step": ["started", "contact_captured"],
            "conversations": [9, 3],
            "step_conversion": [1.0, 0.33],
            "conversion_from_start": [1.0, 0.33],
        }
    )
    shown = for_display(funnel)
    assert shown.frame["step"].to_list() == ["started", "contact_captured"]  # values kept
    assert dict(shown.columns["step"].options)["contact_captured"] == "Contact captured"
    bars = charts.funnel_chart(funnel).to_dict()
    assert bars["encoding"]["y"]["field"] == "step_label"  # drawn in words ...
    assert bars["params"][0]["select"]["fields"] == ["step"]  # ... a click picks the value
    assert showing(1, 25, 571, "qualified leads") == "Showing 1–25 of 571 qualified leads"
    assert showing(1, 40, 40, "runs") == "40 runs"
    assert download_label(571, "qualified leads") == "Download all 571 qualified leads as CSV"


def test_a_comparison_round_trips_through_the_query_string() -> None:
    """The Compare page's choices in the URL: two periods or two slices read back as
    written; a value that does not parse or lies outside the data is dropped, saying so."""
    from convo_analytics.dashboard._compare_views import (
        CompareChoice,
        compare_from_url,
        compare_to_params,
    )

    span = (date(2026, 11, 1), date(2026, 11, 30))
    for choice in (
        CompareChoice(
            "periods",
            (date(2026, 11, 1), date(2026, 11, 7)),
            (date(2026, 11, 8), date(2026, 11, 14)),
        ),
        CompareChoice("slices", dimension="model_tier", side_a="fast", side_b="premium"),
        CompareChoice("slices", dimension="topic", side_a="ws_a:3", side_b="ws_a:12"),
    ):
        params = {
            k: v if isinstance(v, list) else [v] for k, v in compare_to_params(choice).items()
        }
        assert compare_from_url(params, span) == (choice, [])
    bad = {"compare": ["both"], "a_from": ["2026-10-01"], "a_to": ["2026-11-03"],
           "b_from": ["2026-11-09"], "b_to": ["2026-11-02"], "dimension": ["`x`"]}  # fmt: skip
    choice, notes = compare_from_url(bad, span)
    assert choice == CompareChoice()
    assert len(notes) == 4 and "outside the data" in notes[2] and "after" in notes[3]
    assert "`` `x` ``" in notes[1]  # a URL's value is quoted as text


def test_intervals_are_written_as_the_tiles_write_figures() -> None:
    from convo_analytics.dashboard._format import delta_text, interval_text, with_interval

    assert with_interval(0.654, 0.612, 0.701, "percent") == "65.4% (61.2% to 70.1%)"
    assert delta_text(0.5, 0.479, "percent", -0.004, 0.046) == (
        "+2.1 pts (95 % CI -0.4 to +4.6 pts)"
    )
    assert delta_text(0.5, 0.479, "percent") == "+2.1 pts"  # no interval: as before
    assert with_interval(-120.0, -310.0, 2500.0, "ms", signed=True) == (
        "-120 ms (-310 ms to +2.5 s)"
    )
    assert with_interval(3600.0, 1400.0, math.inf, "ms") == "3.6 s (1.4 s to ∞)"
    assert with_interval(184.4, 154.1, 219.0, "number") == "184.4 (154.1 to 219.0)"
    assert with_interval(None, None, None, "percent") == "–"
    assert interval_text(None, 0.2, "percent") == "–"
