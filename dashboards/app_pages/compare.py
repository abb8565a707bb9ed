"""Compare: two periods, or two slices (channels, locales, sources, intents, topics, model
tiers), every KPI side by side with its 95 % interval, the difference raw and adjusted
for topic mix, and whether it is real (issue 28; decision D-COMPARE-PAGE).

UI only: the figures are ``dashboard._compare``'s, the statistics ``convo_analytics.compare``'s.
The sidebar's workspace, channels and topics narrow both sides; the page's own choices
live in the URL (``dashboard._compare_views``). Slice values come from the data and are
shown as text (decision D-DASH-TEXT)."""

from __future__ import annotations

from datetime import date, timedelta
from typing import Any

import streamlit as st

from convo_analytics.dashboard._compare import Side, comparison_table
from convo_analytics.dashboard._compare_views import (
    COMPARE_PARAMS,
    MODES,
    CompareChoice,
    compare_from_url,
    compare_to_params,
)
from convo_analytics.dashboard._format import enum_label, is_enum
from convo_analytics.dashboard._session import (
    filters,
    known,
    params,
    query,
    require_snapshot,
    show_table,
    topic_options,
    write_params,
)
from convo_analytics.dashboard._text import plain

DIMENSIONS = {
    "channel": "Channel",
    "locale": "Locale",
    "source": "Source",
    "intent": "Intent",
    "model_tier": "Model tier",
}
MODE_LABELS = {"periods": "Two periods", "slices": "Two slices"}

snap = require_snapshot()
f = filters()
st.title("Compare")
data = known(snap)
options = topic_options(snap)
topics = {
    key: label
    for key, label in options.labels.items()
    if key in options.choices
    and (f.workspace is None or options.choices[key].workspace_id == f.workspace)
}
dimensions = {**DIMENSIONS, **({"topic": "Topic"} if topics else {})}

if "compare_mode" not in st.session_state:  # the page's first run this session: the URL's
    wanted, notes = compare_from_url(params(), (data.first_day, data.last_day))
    st.session_state["compare_mode"] = wanted.mode
    if wanted.a is not None:
        st.session_state["compare_a_range"] = wanted.a
    if wanted.b is not None:
        st.session_state["compare_b_range"] = wanted.b
    if wanted.dimension in dimensions:
        st.session_state["compare_dimension"] = wanted.dimension
    st.session_state["_compare_url_sides"] = (wanted.side_a, wanted.side_b)
    st.session_state["_compare_notes"] = notes
notes: list[str] = st.session_state.pop("_compare_notes", [])

mode = st.radio(
    "Compare",
    list(MODES),
    format_func=lambda m: MODE_LABELS[m],
    horizontal=True,
    key="compare_mode",
)


def _default_range(key: str, default: tuple[date, date]) -> None:
    """The period's picker starts at ``default`` and follows it (the sidebar's range moved)
    until the user picks another period."""
    held = st.session_state.get(key)
    followed = st.session_state.get(f"_{key}_default")
    if held is None or (tuple(held) == followed and followed != default):
        st.session_state[key] = default
    st.session_state[f"_{key}_default"] = default


def _picked(value: Any, fallback: tuple[date, date]) -> tuple[date, date]:
    days = [d for d in (value if isinstance(value, tuple | list) else [value])
            if isinstance(d, date)]  # fmt: skip
    return (days[0], days[-1]) if days else fallback  # one day while a range is being picked


def _side_label(dimension: str, value: str) -> str:
    """A slice value as the page names it (a topic by its label; a name the service gives
    in words; anything else as it is, shown only where text is shown as text)."""
    if dimension == "topic":
        return topics.get(value, value)
    return enum_label(value) if is_enum(dimension) else value


lowest, highest = data.first_day - timedelta(days=366), data.last_day + timedelta(days=1)
choice: CompareChoice
if mode == "periods":
    before = f.previous()
    _default_range("compare_a_range", (before.first, before.last))
    _default_range("compare_b_range", (f.first, f.last))
    left, right = st.columns(2)
    picked_a = left.date_input("Period A", min_value=lowest, max_value=highest,
                               key="compare_a_range")  # fmt: skip
    picked_b = right.date_input("Period B", min_value=lowest, max_value=highest,
                                key="compare_b_range")  # fmt: skip
    a_days = _picked(picked_a, (before.first, before.last))
    b_days = _picked(picked_b, (f.first, f.last))
    side_a, side_b = Side(*a_days), Side(*b_days)
    said_a, said_b = f"{a_days[0]} to {a_days[1]}", f"{b_days[0]} to {b_days[1]}"
    choice = CompareChoice("periods", a_days, b_days)
else:
    if st.session_state.get("compare_dimension") not in dimensions:
        st.session_state["compare_dimension"] = next(iter(dimensions))
    dimension = st.selectbox("Dimension", list(dimensions), format_func=lambda d: dimensions[d],
                             key="compare_dimension")  # fmt: skip
    values = list(topics) if dimension == "topic" else query(snap, "slice_values", f, dimension)
    if len(values) < 2:
        st.info(f"The range has {len(values)} {dimensions[dimension].lower()} value(s) with "
                "data: nothing to compare. Choose a wider range or another dimension.")  # fmt: skip
        write_params(compare_to_params(CompareChoice("slices", dimension=dimension)),
                     keep_others=True, owned=COMPARE_PARAMS)  # fmt: skip
        st.stop()
    from_url = st.session_state.pop("_compare_url_sides", (None, None))
    for position, (key, wanted) in enumerate(
        (("compare_side_a", from_url[0]), ("compare_side_b", from_url[1]))
    ):
        if wanted is not None:
            if wanted in values:
                st.session_state[key] = wanted
            else:
                notes.append(f"?side_{'ab'[position]}={plain(wanted)}: the range has no such "
                             f"{dimensions[dimension].lower()}; showing another.")  # fmt: skip
        if st.session_state.get(key) not in values:
            st.session_state[key] = values[min(position, len(values) - 1)]
    left, right = st.columns(2)
    value_a = left.selectbox("A", values, format_func=lambda v: _side_label(dimension, v),
                             key="compare_side_a")  # fmt: skip
    value_b = right.selectbox("B", values, format_func=lambda v: _side_label(dimension, v),
                              key="compare_side_b")  # fmt: skip

    def _side(value: str) -> Side:
        topic = options.choices.get(value) if dimension == "topic" else None
        return Side(f.first, f.last, dimension, value, topic)

    side_a, side_b = _side(value_a), _side(value_b)
    said_a = plain(_side_label(dimension, value_a))
    said_b = plain(_side_label(dimension, value_b))
    choice = CompareChoice("slices", dimension=dimension, side_a=value_a, side_b=value_b)

write_params(compare_to_params(choice), keep_others=True, owned=COMPARE_PARAMS)
if notes:
    st.info("This link's comparison was adjusted to the data:  \n" + "  \n".join(notes),
            icon=":material/link:")  # fmt: skip
if side_a == side_b:
    st.info("A and B are the same: choose two different periods or values to compare.")
    st.stop()

result = query(snap, "compare_sides", f, side_a, side_b)
where = f"over {f.first} to {f.last} ({f.tz})" if mode == "slices" else f"({f.tz})"
st.caption(f"A: {said_a}; B: {said_b} {where}. Each figure with its 95 % confidence interval; "
           "the difference is B's figure minus A's.")  # fmt: skip
for side, sample, small in (("A", result.a_sample, result.a_small),
                            ("B", result.b_sample, result.b_small)):  # fmt: skip
    if small:
        st.warning(
            f"Side {side} has {sample:,} {result.sample_unit}, fewer than the minimum of "
            f"{result.minimum}: its figures swing widely from one {result.sample_unit[:-1]} to "
            "the next, so its differences are marked too few to tell.",
            icon=":material/warning:",
        )
if mode == "periods":
    for name, side in (("A", side_a), ("B", side_b)):
        if side.first < data.first_day or side.last > data.last_day:
            st.warning(
                f"Period {name} reaches outside the data ({data.first_day} to "
                f"{data.last_day}): its days without data count nothing, so it is compared "
                "on fewer days than it spans. Choose periods the data covers.",
                icon=":material/date_range:",
            )
if result.sample_unit == "responses":
    st.caption(
        "Model tiers are compared on their responses only: a conversation has no tier, so "
        "its figures (resolution, escalation, containment, CSAT) and the guardrail "
        "triggers, which are not counted per tier, are not applicable."
    )

show_table(comparison_table(result.rows), "compare", relabel=False, raw=result.rows)
if result.adjusted:
    st.caption(
        "Adjusted for topic mix: each side's rate recomputed as if both sides had had the "
        "same mix of topics (the two sides' pooled mix), so a side that gets harder "
        "questions is not blamed for them. A difference that shrinks here is explained by "
        "which topics each side got; one that holds is there topic by topic. Latency "
        "percentiles are not adjusted."
    )
elif mode == "slices" and dimension == "topic":
    st.caption("Adjusted for topic mix: not shown when two topics are compared (each side "
               "is one topic).")  # fmt: skip
else:
    st.caption("Adjusted for topic mix: not shown, since these conversations have no topics "
               "yet (topics are discovered by `convo transform`).")  # fmt: skip
st.caption(
    "Verdict: a difference is real when its 95 % interval excludes 0, could be noise when "
    f"it includes 0, and too few when a side has under {result.minimum} "
    f"{result.sample_unit} or the figure rests on fewer units."
)
