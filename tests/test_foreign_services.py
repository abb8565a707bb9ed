"""The foreign-shaped test services behave as their table says (tests/foreign_services.py).

The extractor's tests trust these servers and ``ForeignDomain.truth``; here
each shape is walked over real HTTP with httpx exactly as it describes itself,
and what comes back is compared with the truth.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urljoin

import httpx
import pytest

from convo_analytics._serving import ServerThread
from foreign_services import (
    SHAPES,
    ConversationTruth,
    ForeignApp,
    ForeignDomain,
    LeadTruth,
    MessageTruth,
    make_counter_app,
    record_id,
    serve,
)

KEY = "sk_foreign_test_0123"
MAX_PAGES = 200  # every walk is bounded
WALKED = ("pages", "offsets", "next_link", "header_cursor")
Json = dict[str, Any]


def _iso(text: str) -> datetime:
    return datetime.fromisoformat(text).astimezone(UTC)


def _epoch_ms(ms: int) -> datetime:
    return datetime.fromtimestamp(ms / 1000, UTC)


def _ms(at: datetime) -> int:
    return int(at.timestamp() * 1000)


# --- walking each shape the way it describes itself -----------------------------------------


@dataclass
class Walk:
    records: list[Json]
    page_sizes: list[int]
    next_links: list[str]  # as the server wrote them (next_link: relative or absolute)


def walk_pages(client: httpx.Client, path: str, size: int, params: Json) -> Walk:
    """``_page``/``_limit``, then the absolute ``Link: rel="next"`` until there is none."""
    walk = Walk([], [], [])
    response = client.get(path, params={**params, "_page": 1, "_limit": size})
    total = int(response.headers["X-Total-Count"])
    for _ in range(MAX_PAGES):
        response.raise_for_status()
        assert int(response.headers["X-Total-Count"]) == total
        walk.records += response.json()
        walk.page_sizes.append(len(response.json()))
        links = response.links
        assert {"first", "last"} <= set(links), response.headers["Link"]
        if "next" not in links:
            assert len(walk.records) == total
            return walk
        following = links["next"]["url"]
        assert following.startswith("http://127.0.0.1:"), "Link URLs are absolute"
        walk.next_links.append(following)
        response = client.get(following)
    raise AssertionError("the pages did not end")


def walk_offsets(client: httpx.Client, path: str, size: int, params: Json) -> Walk:
    """``skip`` by the records read until ``totalRecords``."""
    walk = Walk([], [], [])
    for _ in range(MAX_PAGES):
        body = client.get(path, params={**params, "skip": len(walk.records), "take": size})
        body.raise_for_status()
        page = body.json()["records"]
        walk.records += page
        walk.page_sizes.append(len(page))
        if not page or len(walk.records) >= body.json()["totalRecords"]:
            assert len(walk.records) == body.json()["totalRecords"]
            return walk
    raise AssertionError("the offsets did not end")


def walk_next_link(client: httpx.Client, path: str, size: int, params: Json) -> Walk:
    """``next`` (relative or absolute) resolved against the page's URL, until null."""
    walk = Walk([], [], [])
    response = client.get(path, params={**params, "pageSize": size})
    for _ in range(MAX_PAGES):
        response.raise_for_status()
        body = response.json()
        walk.records += body["items"]
        walk.page_sizes.append(len(body["items"]))
        if body["next"] is None:
            return walk
        walk.next_links.append(body["next"])
        response = client.get(urljoin(str(response.url), body["next"]))
    raise AssertionError("the next links did not end")


def walk_header_cursor(client: httpx.Client, path: str, size: int, params: Json) -> Walk:
    """``X-Next-Cursor`` sent back as ``after``, until the header is absent."""
    walk = Walk([], [], [])
    envelope = path.rsplit("/", 1)[-1]
    query = {**params, "max": size}
    for _ in range(MAX_PAGES):
        response = client.get(path, params=query)
        response.raise_for_status()
        assert set(response.json()) == {envelope}
        walk.records += response.json()[envelope]
        walk.page_sizes.append(len(response.json()[envelope]))
        cursor = response.headers.get("X-Next-Cursor")
        if cursor is None:
            return walk
        query = {**query, "after": cursor}
    raise AssertionError("the cursors did not end")


# --- reading each shape's records in the warehouse's terms ----------------------------------


def _optional_str(value: Any) -> str | None:
    return None if value is None else str(value)


def _lead_by_id(record: Json) -> tuple[str, str, int]:
    return record["id"], record["status"], record["score"]


def _messages(detail: Json) -> list[Json]:
    messages: list[Json] = detail["messages"]
    return messages


@dataclass(frozen=True)
class Shape:
    walk: Callable[[httpx.Client, str, int, Json], Walk]
    default_size: int
    cap: int | None
    conversation: Callable[[Json], tuple[str, datetime, bool, str | None, int | None]]
    message: Callable[[Json], tuple[str, datetime]]
    #: the incremental parameter for "changed at or after / after" a time, and its comparison
    since: Callable[[datetime], Json]
    inclusive: bool
    lead: Callable[[Json], tuple[str, str, int]] = _lead_by_id
    transcript: Callable[[Json], list[Json]] = _messages


SPEC = {
    "pages": Shape(
        walk_pages, 10, None,
        lambda r: (r["id"], _iso(r["updatedAt"]), r["handedOff"], r["leadRef"],
                   r.get("csat", {}).get("score")),
        lambda m: (m["id"], _iso(m["sentAt"])),
        lambda at: {"updatedAt_gte": at.isoformat()}, inclusive=True,
    ),
    "offsets": Shape(
        walk_offsets, 20, 50,
        lambda r: (r["id"], _iso(r["lastModified"]), r["wasEscalated"], r["leadIdentifier"],
                   r["rating"]),
        lambda m: (m["id"], _iso(m["postedAt"])),
        lambda at: {"modifiedSince": at.isoformat()}, inclusive=True,
    ),
    "next_link": Shape(
        walk_next_link, 25, 100,
        lambda r: (r["id"], _iso(r["updatedAt"]), r["isEscalated"], (r["lead"] or {}).get("id"),
                   (r["feedback"] or {}).get("stars")),
        lambda m: (m["id"], _iso(m["time"])),
        lambda at: {"updated_after": at.isoformat()}, inclusive=False,
    ),
    "header_cursor": Shape(
        walk_header_cursor, 25, 25,
        lambda r: (str(r["id"]), _epoch_ms(r["updated"]), r["escalated_flag"],
                   _optional_str(r["lead_id"]), r["score_csat"]),
        lambda m: (str(m["id"]), _epoch_ms(m["ts"])),
        lambda at: {"since_ms": _ms(at)}, inclusive=True,
        lead=lambda r: (str(r["lead_id"]), r["status"], r["score"]),
        transcript=lambda d: d["conversation"]["transcript"],
    ),
}  # fmt: skip


@pytest.fixture(scope="module")
def domain() -> ForeignDomain:
    """Shared by the tests that only read it; a test that touches builds its own."""
    return ForeignDomain()


Running = tuple[ServerThread, ForeignApp]
Services = Callable[[str], Running]


@pytest.fixture(scope="module")
def services(domain: ForeignDomain) -> Iterator[Services]:
    """``services(shape)``: the shared domain served in ``shape``, started once per module."""
    with ExitStack() as stack:
        started: dict[str, Running] = {}

        def running(shape: str) -> Running:
            if shape not in started:
                leak_to = "http://127.0.0.1:9" if shape == "leaky" else None  # never asked
                started[shape] = stack.enter_context(serve(domain, shape, KEY, leak_to=leak_to))
            started[shape][1].requests.clear()
            return started[shape]

        yield running


@pytest.fixture
def client() -> Iterator[httpx.Client]:
    with httpx.Client(headers={"Authorization": f"Bearer {KEY}"}, timeout=10) as c:
        yield c


def listed(shape: str, walk: Walk) -> dict[str, tuple[datetime, bool, str | None, int | None]]:
    rows = [SPEC[shape].conversation(r) for r in walk.records]
    assert len({row[0] for row in rows}) == len(rows), "a conversation came back twice"
    return {row[0]: row[1:] for row in rows}


# --- the tests ------------------------------------------------------------------------------


def test_the_domain_is_seeded_and_shaped_as_documented() -> None:
    domain, again = ForeignDomain(), ForeignDomain()
    assert domain.truth("pages") == again.truth("pages")
    assert ForeignDomain(seed=5).truth("pages") != domain.truth("pages")
    assert len(domain.conversations) == 140 and len(domain.leads) == 61
    assert 0.2 < sum(c.escalated for c in domain.conversations) / 140 < 0.4
    assert 0.3 < sum(c.feedback_rating is not None for c in domain.conversations) / 140 < 0.5
    for conv in domain.conversations:
        assert 3 <= len(conv.messages) <= 8
        assert [m.role for m in conv.messages][:2] == ["user", "assistant"]
        times = [m.sent_at for m in conv.messages]
        assert times == sorted(times) and conv.created_at <= times[0]
        assert times[-1] <= conv.updated_at and conv.created_at.tzinfo is UTC
        assert (conv.ended_at is None) == (conv.status == "open")
    assert {lead.status for lead in domain.leads} == {"new", "contacted", "qualified"}
    ids = [record_id(s, "conversation", 1) for s in SHAPES]
    assert ids == ["c-0001", "conv_1", "C1001", "1", "C1001"]


@pytest.mark.parametrize("shape", WALKED)
def test_every_record_comes_back_once_over_several_pages_matching_the_truth(
    shape: str, domain: ForeignDomain, services: Services, client: httpx.Client
) -> None:
    spec, truth = SPEC[shape], domain.truth(shape)
    server, app = services(shape)
    conversations = spec.walk(client, server.url + "/v1/conversations", 20, {})
    leads = spec.walk(client, server.url + "/v1/leads", 20, {})
    assert not any("status=any" in target for target in app.requests)
    expected = {
        cid: (t.updated_at, t.escalated, t.lead_id, t.feedback_rating)
        for cid, t in truth.conversations.items()
    }
    assert listed(shape, conversations) == expected
    assert conversations.page_sizes == [20] * 7
    assert leads.page_sizes == [20, 20, 20, 1]
    lead_rows = [spec.lead(r) for r in leads.records]
    assert len(lead_rows) == len(truth.leads) == 61
    assert {lid: LeadTruth(status, score) for lid, status, score in lead_rows} == truth.leads


@pytest.mark.parametrize("shape", WALKED)
def test_the_default_page_size_and_the_cap_hold(
    shape: str, services: Services, client: httpx.Client
) -> None:
    spec = SPEC[shape]
    size_param = {"pages": "_limit", "offsets": "take", "next_link": "pageSize"}.get(shape, "max")
    first = {"pages": {"_page": 1}}.get(shape, {})
    server, _ = services(shape)
    url = server.url + "/v1/conversations"
    default = client.get(url, params=first).json()
    huge = client.get(url, params={**first, size_param: 500}).json()
    unwrap = {"offsets": "records", "next_link": "items", "header_cursor": "conversations"}
    if shape in unwrap:
        default, huge = default[unwrap[shape]], huge[unwrap[shape]]
    assert len(default) == spec.default_size
    assert len(huge) == (spec.cap or 140), "pages has no cap; the others cap the page"


@pytest.mark.parametrize("shape", WALKED)
def test_the_detail_holds_the_transcript_under_its_documented_name(
    shape: str, domain: ForeignDomain, services: Services, client: httpx.Client
) -> None:
    spec, truth = SPEC[shape], domain.truth(shape)
    embed = {"_embed": "messages"} if shape == "pages" else {}
    server, _ = services(shape)
    for number in (1, 2, 77, 140):
        cid = record_id(shape, "conversation", number)
        body = client.get(f"{server.url}/v1/conversations/{cid}", params=embed).json()
        record = body["conversation"] if shape == "header_cursor" else body
        assert spec.conversation(record)[0] == cid
        messages = [spec.message(m) for m in spec.transcript(body)]
        expected = [(mid, m.created_at) for mid, m in truth.messages.items() if m[0] == cid]
        assert messages == expected
        assert len(messages) == truth.conversations[cid].message_count
        assert all(MessageTruth(cid, at) == truth.messages[mid] for mid, at in messages)
    if shape == "pages":
        bare = client.get(f"{server.url}/v1/conversations/c-0001").json()
        assert bare["id"] == "c-0001" and "messages" not in bare
        listed_record = client.get(f"{server.url}/v1/conversations").json()[0]
        assert listed_record == bare, "the list and the bare detail agree"


def test_pages_filters_like_json_server(
    domain: ForeignDomain, services: Services, client: httpx.Client
) -> None:
    server, _ = services("pages")
    leads = client.get(server.url + "/v1/leads")
    assert len(leads.json()) == 61 and "Link" not in leads.headers
    assert "X-Total-Count" not in leads.headers
    assert client.get(server.url + "/v1/leads", params={"status": "any"}).json() == []
    new = client.get(server.url + "/v1/leads", params={"status": "new"}).json()
    assert new and {r["status"] for r in new} == {"new"}
    ignored = client.get(server.url + "/v1/leads", params={"updatedSince": "x", "q": 1})
    assert len(ignored.json()) == 61, "parameters naming no field are ignored"
    url = server.url + "/v1/conversations"
    handed = client.get(url, params={"handedOff": "true"}).json()
    assert len(handed) == sum(c.escalated for c in domain.conversations)
    five = client.get(url, params={"csat.score": "5"}).json()
    assert five and all(r["csat"] == {"score": 5} for r in five)
    sliced = client.get(url, params={"_start": 10, "_end": 15})
    assert [r["id"] for r in sliced.json()] == [f"c-{i:04d}" for i in range(11, 16)]
    assert sliced.headers["X-Total-Count"] == "140" and "Link" not in sliced.headers
    limited = client.get(url, params={"_start": 135, "_limit": 10}).json()
    assert [r["id"] for r in limited] == [f"c-{i:04d}" for i in range(136, 141)]
    newest = client.get(url, params={"_sort": "updatedAt", "_order": "desc"}).json()
    assert newest[0]["updatedAt"].endswith("+02:00")
    times = [_iso(r["updatedAt"]) for r in newest]
    assert times == sorted(times, reverse=True)
    last = client.get(url, params={"_page": 14, "_limit": 10})
    assert [link for link in last.links] == ["first", "prev", "last"]
    assert len(last.json()) == 10 and last.headers["X-Total-Count"] == "140"
    beyond = client.get(url, params={"_page": 15, "_limit": 10})
    assert beyond.json() == [] and "next" not in beyond.links


@pytest.mark.parametrize("shape", WALKED)
def test_the_incremental_parameter_filters_as_described(shape: str, client: httpx.Client) -> None:
    domain = ForeignDomain(seed=11)
    spec = SPEC[shape]
    ordered = sorted(domain.conversations, key=lambda c: c.updated_at)
    bookmark = ordered[100].updated_at  # an exact time: >= and > differ on it
    with serve(domain, shape, KEY) as (server, _):
        url = server.url + "/v1/conversations"
        before = listed(shape, spec.walk(client, url, 7, spec.since(bookmark)))
        wanted = {
            record_id(shape, "conversation", c.number)
            for c in domain.conversations
            if c.updated_at > bookmark or (spec.inclusive and c.updated_at == bookmark)
        }
        assert set(before) == wanted and 30 < len(wanted) < 140
        latest = max(c.updated_at for c in domain.conversations)
        touched = domain.touch(5)
        after = listed(shape, spec.walk(client, url, 2, spec.since(latest)))
        changed = {record_id(shape, "conversation", n) for n in touched}
        assert set(after) == changed | (
            {cid for cid, row in before.items() if row[0] == latest} if spec.inclusive else set()
        )
        everything = listed(shape, spec.walk(client, url, 50, {}))
    assert set(everything) == set(domain.truth(shape).conversations), "ids stay stable"
    for cid in changed:
        assert everything[cid][0] > latest
        assert everything[cid][0] == domain.truth(shape).conversations[cid].updated_at


def test_touch_changes_the_oldest_and_the_truth_follows() -> None:
    domain = ForeignDomain(seed=2)
    before = domain.truth("offsets")
    oldest = sorted(domain.conversations, key=lambda c: (c.updated_at, c.number))[:3]
    latest = max(c.updated_at for c in domain.conversations)
    touched = domain.touch(3)
    assert touched == [c.number for c in oldest]
    after = domain.truth("offsets")
    assert set(after.conversations) == set(before.conversations)
    assert set(after.leads) == set(before.leads)
    for number in touched:
        cid = f"conv_{number}"
        old, new = before.conversations[cid], after.conversations[cid]
        assert new.updated_at > latest
        assert new == ConversationTruth(
            new.updated_at, old.escalated, old.lead_id, old.feedback_rating, old.message_count + 1
        )
    for conv in domain.conversations:
        assert conv.ended_at in (None, conv.updated_at), "a completed one ends at its update"
    assert len(after.messages) == len(before.messages) + 3
    assert set(before.messages) < set(after.messages)


def test_offsets_sort_by_last_modified_only_when_asked(
    domain: ForeignDomain, services: Services, client: httpx.Client
) -> None:
    server, _ = services("offsets")
    url = server.url + "/v1/conversations"
    by_id = client.get(url, params={"take": 50, "unknown": "x"}).json()["records"]
    by_time = client.get(url, params={"take": 50, "orderBy": "lastModified"}).json()
    assert [r["id"] for r in by_id] == [f"conv_{i}" for i in range(1, 51)]
    assert by_id and by_time["totalRecords"] == 140
    stamps = [(_iso(r["lastModified"]), int(r["id"][5:])) for r in by_time["records"]]
    assert stamps == sorted(stamps) and stamps[0][0] == min(
        c.updated_at for c in domain.conversations
    )


def test_next_links_alternate_relative_and_absolute(
    services: Services, client: httpx.Client
) -> None:
    server, _ = services("next_link")
    walk = walk_next_link(client, server.url + "/v1/leads", 10, {})
    bad = client.get(server.url + "/v1/leads", params={"page": "not-a-token"})
    assert len(walk.next_links) == 6
    for number, link in enumerate(walk.next_links, start=1):
        if number % 2:
            assert link.startswith("/v1/leads?") and "pageSize=10" in link
        else:
            assert link.startswith(server.url + "/v1/leads?")
    assert bad.status_code == 400


def test_header_cursor_reads_epoch_ms_only_and_keys_leads_by_lead_id(
    services: Services, client: httpx.Client
) -> None:
    server, _ = services("header_cursor")
    url = server.url + "/v1/leads"
    iso = walk_header_cursor(client, url, 25, {"since_ms": "2026-11-19T00:00:00Z"})
    last = client.get(url, params={"max": 25, "since_ms": _ms(datetime(2030, 1, 1, tzinfo=UTC))})
    assert len(iso.records) == 61, "an ISO since_ms is ignored"
    assert last.json() == {"leads": []} and "X-Next-Cursor" not in last.headers
    first = iso.records[0]
    assert set(first) == {
        "lead_id", "conversation_id", "status", "score", "intent", "created", "updated"
    }  # fmt: skip
    assert isinstance(first["lead_id"], int) and first["lead_id"] > 5000
    assert isinstance(first["updated"], int)


@pytest.mark.parametrize("shape", SHAPES)
def test_the_key_is_required_and_there_is_no_summary(
    shape: str, services: Services, client: httpx.Client
) -> None:
    server, app = services(shape)
    for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": KEY}):
        refused = httpx.get(server.url + "/v1/conversations", headers=headers, timeout=10)
        assert refused.status_code == 401 and refused.json()["error"] == "unauthorized"
    summary = client.get(server.url + "/v1/analytics/summary", params={"from": "2026-11-01"})
    assert summary.status_code == 404 and summary.json()
    unknown = ["nope", "0", record_id(shape, "conversation", 141), "c-1", "conv_01"]
    for cid in unknown:
        assert client.get(f"{server.url}/v1/conversations/{cid}").status_code == 404
    assert client.get(server.url + "/v1/leads").status_code == 200
    assert len(app.requests) == 3 + 1 + len(unknown) + 1
    assert app.requests[3] == "/v1/analytics/summary?from=2026-11-01"


def test_leaky_points_its_first_next_link_at_another_origin(
    domain: ForeignDomain, client: httpx.Client
) -> None:
    counter = make_counter_app()
    with (
        ServerThread(counter) as other,
        serve(domain, "leaky", KEY, leak_to=other.url) as (server, app),
    ):
        first = client.get(server.url + "/v1/conversations", params={"pageSize": 50}).json()
        assert len(first["items"]) == 50
        assert first["next"].startswith(other.url + "/v1/conversations?")
        assert not counter.requests.snapshot(), "nothing reached the other origin"
        followed = httpx.get(first["next"], headers={"Authorization": "Bearer decoy"}, timeout=10)
        assert followed.json() == {"items": [], "next": None}
        plain = httpx.get(other.url + "/anything", timeout=10)
        # the same token asked of the leaky server itself goes on as next_link does
        query = first["next"].split("?", 1)[1]
        second = client.get(f"{server.url}/v1/conversations?{query}").json()
    assert plain.status_code == 200
    assert [(h.target.split("?")[0], h.authorization) for h in counter.requests] == [
        ("/v1/conversations", "Bearer decoy"),
        ("/anything", None),
    ]
    assert second["next"].startswith(server.url), "page 2's next link is absolute and local"
    assert len(app.requests) == 2
