"""Conversations: a slice of conversations (from a chart's click, the URL or the widgets),
searched and paged, and one conversation's transcript with its traces.

What end users wrote is shown as text: messages with ``st.text``, values inside our own
sentences through ``_text.plain`` (decision D-DASH-TEXT)."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime
from zoneinfo import ZoneInfo

import streamlit as st

from convo_analytics.dashboard._conversations import PAGE_SIZES
from convo_analytics.dashboard._format import enum_label, name_text, value_text
from convo_analytics.dashboard._queries import STATUSES
from convo_analytics.dashboard._session import (
    Whole,
    filters,
    known,
    params,
    query,
    require_snapshot,
    show_table,
    write_params,
)
from convo_analytics.dashboard._text import plain
from convo_analytics.dashboard._views import (
    SLICE_PARAMS,
    conversation_from_url,
    page_from_url,
    slice_from_url,
    slice_to_params,
)


def _local(moment: datetime | None, tz: str, *, seconds: bool = False) -> str:
    """A stored (UTC) time in the chosen zone, to the minute (or second)."""
    if moment is None:
        return "–"
    return f"{moment.astimezone(ZoneInfo(tz)):%Y-%m-%d %H:%M{':%S' if seconds else ''}}"


def _word(value: bool | None) -> str:
    return "any" if value is None else "yes" if value else "no"


def _settled(url_changed: bool) -> None:
    """Remember the URL as this run left it (a later change of it drives the widgets), and
    tie the notes the URL gave to it (they are said until it changes)."""
    st.session_state["_conv_url"] = {k: params().get(k) for k in seen}
    if url_changed:
        st.session_state["_conv_notes_url"] = st.session_state["_conv_url"]


snap = require_snapshot()
f = filters()
st.title("Conversations")
url = params()
data = known(snap)
from_url, notes = slice_from_url(url, (data.first_day, data.last_day))
asked_page, page_notes = page_from_url(url)
asked_conversation, id_notes = conversation_from_url(url)
# The URL drives the widgets when it changed since they last took it (a chart's click, a
# pasted link); otherwise the widgets drive the URL.
seen = {k: url.get(k) for k in (*SLICE_PARAMS, "page", "conversation")}
url_changed = st.session_state.get("_conv_url") != seen
notes_box = st.empty()  # what the URL asked for that was dropped or clamped, said here
if url_changed:
    st.session_state["conv_status"] = list(from_url.statuses)
    st.session_state["conv_escalated"] = _word(from_url.escalated)
    st.session_state["conv_flagged"] = _word(from_url.flagged)
    st.session_state["conv_search"] = from_url.search
    st.session_state["conv_page"] = asked_page
    st.session_state["_conv_pick"] = asked_conversation
    st.session_state["_conv_notes"] = [*notes, *page_notes, *id_notes]

if from_url.drilled:
    chips = " · ".join(from_url.chips())
    left, right = st.columns([5, 1])
    left.info(f"Showing the conversations behind a chart: {chips}")
    if right.button("Show all", key="conv_clear_drill"):
        write_params(
            slice_to_params(from_url.without_drill()), keep_others=True, owned=SLICE_PARAMS
        )
        st.session_state["_conv_url"] = None
        st.rerun()

search = st.text_input(
    "Search", key="conv_search", placeholder="a conversation id, an end user id, or words said"
)
left, middle, right, last = st.columns(4)
statuses = left.multiselect("Status", STATUSES, key="conv_status", format_func=enum_label,
                            placeholder="any")  # fmt: skip
escalated = middle.selectbox("Escalated", ("any", "yes", "no"), key="conv_escalated")
flagged = right.selectbox("Guardrail flagged", ("any", "yes", "no"), key="conv_flagged")
page_size = last.selectbox("Per page", PAGE_SIZES, index=1, key="conv_page_size")
choice = {"any": None, "yes": True, "no": False}
wanted = replace(
    from_url,
    statuses=tuple(statuses),
    escalated=choice[escalated],
    flagged=choice[flagged],
    search=search.strip()[:200],
)
if wanted != from_url:
    st.session_state["conv_page"] = 1  # a new question starts at its first page
result = query(
    snap, "conversation_page", f, wanted, st.session_state.get("conv_page", 1), page_size
)
if url_changed and asked_page > result.pages:
    st.session_state["_conv_notes"].append(
        f"?page={plain((url.get('page') or [''])[-1].strip())} is past the last page "
        f"({result.pages:,}): showing page {result.pages:,}."
    )
said = st.session_state.get("_conv_notes") or []
if said and (url_changed or (st.session_state.get("_conv_notes_url") == seen
                             and wanted == from_url)):  # fmt: skip
    notes_box.info("This link's view was adjusted:  \n" + "  \n".join(said),
                   icon=":material/link:")  # fmt: skip
if result.pages > 1:
    st.session_state["conv_page"] = result.page  # within the pages there are now
    st.number_input(
        f"Page (of {result.pages:,})", min_value=1, max_value=result.pages, step=1, key="conv_page"
    )
first_row = (result.page - 1) * page_size + 1
st.caption(
    f"{result.total:,} conversations (newest first); showing {first_row:,} to "
    f"{first_row + result.rows.height - 1:,}"
    if result.rows.height
    else "No conversation matches these filters."
)
show_table(result.rows, "conversations", f.tz,
           whole=Whole(snap, "conversation_table", (f, wanted), result.total,
                       "conversations"))  # fmt: skip

ids = result.rows["conversation_id"].to_list()
picked_from_url = st.session_state.get("_conv_pick")
shown = {
    row["conversation_id"]: (
        f"{_local(row['started_at'], f.tz)} · {enum_label(row['channel'])} · "
        f"{(row['first_user_message'] or '(no user message)')[:80]}"
    )
    for row in result.rows.iter_rows(named=True)
}
if url_changed and picked_from_url and picked_from_url not in shown:  # a link to it
    shown = {picked_from_url: f"{picked_from_url} (from the link)", **shown}
state = {
    **slice_to_params(wanted),
    **({"page": str(result.page)} if result.page > 1 else {}),
}
if not shown:
    write_params(state, keep_others=True, owned=(*SLICE_PARAMS, "page", "conversation"))
    _settled(url_changed)
    st.stop()

st.subheader("Transcript")
options = list(shown)
if url_changed or st.session_state.get("conv_pick") not in shown:
    st.session_state["conv_pick"] = picked_from_url if picked_from_url in shown else options[0]
picked = st.selectbox(
    "Conversation", options, format_func=lambda c: shown.get(c, c), key="conv_pick"
)
state["conversation"] = picked
write_params(state, keep_others=True, owned=(*SLICE_PARAMS, "page", "conversation"))
_settled(url_changed)
st.session_state["_conv_pick"] = picked
workspace_of = dict(zip(ids, result.rows["workspace_id"].to_list(), strict=True))
detail = query(snap, "transcript", picked, workspace_of.get(picked, f.workspace))
if not detail["conversation"].height:
    st.info(f"Conversation {plain(picked)} is not in this snapshot.")
    st.stop()
facts = detail["conversation"].to_dicts()[0]
cols = st.columns(4)
cols[0].metric("Status", name_text(facts["status"]))
cols[1].metric("Channel", name_text(facts["channel"]))
cols[2].metric("Escalations", facts["escalations"])
cols[3].metric("Guardrail triggers", facts["guardrail_triggers"])
st.caption(
    f"{plain(picked)} · end user {plain(facts['external_user_id'])} · started "
    f"{_local(facts['started_at'], f.tz)} ({f.tz})"
)
for message in detail["messages"].iter_rows(named=True):
    role = {"user": "user", "assistant": "assistant"}.get(message["role"], "ai")
    with st.chat_message(role):
        st.text(message["text"] or "")  # what was said, as it was said: no Markdown
        when = _local(message["created_at"], f.tz, seconds=True)
        if message["role"] == "assistant":
            flags = ", ".join(name_text(flag) for flag in message["policy_flags"] or [])
            st.caption(
                f"{when} · latency {value_text(message['latency_ms'], 'ms')} · tier "
                f"{name_text(message['model_tier'])} · confidence "
                f"{value_text(message['confidence'], 'ratio')} · flags {flags or 'none'} · "
                f"source {plain(message['knowledge_source']) or '–'}"
            )
        else:
            st.caption(f"{when} · {name_text(message['role'])}")
show_table(detail["messages"], f"transcript_{picked}", f.tz)
if detail["escalations"].height:
    st.markdown("**Escalations**")
    show_table(detail["escalations"], f"escalations_{picked}", f.tz)
if detail["incidents"].height:
    st.markdown("**Guardrail incidents** (excerpts redacted)")
    show_table(detail["incidents"], f"incidents_{picked}", f.tz)
