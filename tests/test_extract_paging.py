"""Paginators: each style's state machine, detection, guards, and paging over real HTTP."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import httpx
import pytest

from conftest import RunningSandbox, page_all
from convo_analytics._serving import ServerThread
from convo_analytics.extract._paging import (
    STYLES,
    PageRequest,
    Paginator,
    PagingError,
    detect_paginator,
    init_probe_request,
    make_paginator,
)
from convo_analytics.extract._shapes import find_records
from paging_server import SERVER_STYLES, make_paging_app, make_records

BASE = "https://api.test"


def response(
    body: Any, url: str = f"{BASE}/items", headers: Mapping[str, str] | None = None
) -> httpx.Response:
    return httpx.Response(200, json=body, headers=headers, request=httpx.Request("GET", url))


def rows(*ids: int) -> list[dict[str, Any]]:
    return [{"id": f"r{i}", "n": i} for i in ids]


def step(paginator: Paginator, body: Any, **kwargs: Any) -> None:
    records, _ = find_records(body)
    paginator.update_state(response(body, **kwargs), body, records)


def drive(
    client: httpx.Client,
    url: str,
    params: Mapping[str, str] | None = None,
    *,
    style: str | None = None,
    page_size: int = 50,
    options: Mapping[str, str] | None = None,
    max_requests: int = 1_000,
) -> tuple[list[dict[str, Any]], Paginator, int]:
    """Every record of a listing, the paginator used, and the number of requests."""
    request = PageRequest(url, dict(params or {}))
    paginator: Paginator | None = None
    if style is None:
        init_probe_request(request, page_size=page_size, options=options)
    else:
        paginator = make_paginator(style, page_size=page_size, options=options)
        paginator.init_request(request)
    out: list[dict[str, Any]] = []
    for n in range(1, max_requests + 1):
        # httpx replaces a URL's query with any params given, even none: pass None then.
        r = client.get(request.url, params=request.params or None)
        r.raise_for_status()
        data = r.json()
        records, _ = find_records(data)
        out.extend(records)
        if paginator is None:
            paginator = detect_paginator(
                r, data, records, page_size=page_size, request=request, options=options
            )
        else:
            paginator.update_state(r, data, records)
        if not paginator.has_next_page:
            return out, paginator, n
        paginator.update_request(request)
    raise AssertionError(f"more than {max_requests} requests")


# --- cursor ---------------------------------------------------------------------------------


def test_cursor_follows_the_body_cursor_and_keeps_the_filters() -> None:
    p = make_paginator("cursor", page_size=2)
    request = PageRequest("/v1/conversations", {"status": "open"})
    p.init_request(request)
    assert request.params == {"status": "open", "limit": "2"}
    step(p, {"data": rows(1, 2), "hasMore": True, "nextCursor": "abc"})
    assert p.has_next_page
    p.update_request(request)
    assert request.url == "/v1/conversations"
    assert request.params == {"status": "open", "limit": "2", "cursor": "abc"}
    step(p, {"data": rows(3), "hasMore": False, "nextCursor": None})
    assert not p.has_next_page


def test_cursor_stops_on_has_more_false_even_with_a_cursor() -> None:
    for flag in ("hasMore", "has_more", "more"):
        p = make_paginator("cursor", page_size=2)
        p.init_request(PageRequest("/x"))
        step(p, {"data": rows(1, 2), flag: False, "next_cursor": "zzz"})
        assert not p.has_next_page, flag


def test_cursor_stops_on_an_empty_page_and_without_a_cursor() -> None:
    p = make_paginator("cursor", page_size=2)
    step(p, {"data": [], "nextCursor": "more?"})
    assert not p.has_next_page
    p = make_paginator("cursor", page_size=2)
    step(p, {"data": rows(1, 2), "nextCursor": None})
    assert not p.has_next_page


def test_a_repeated_cursor_is_an_error_not_a_loop() -> None:
    p = make_paginator("cursor", page_size=2)
    request = PageRequest("/x")
    p.init_request(request)
    step(p, {"data": rows(1, 2), "nextCursor": "c1"})
    p.update_request(request)
    step(p, {"data": rows(3, 4), "nextCursor": "c2"})
    p.update_request(request)
    with pytest.raises(PagingError, match="'c1' again after 3 pages"):
        step(p, {"data": rows(5, 6), "nextCursor": "c1"})


def test_the_cursor_sent_first_counts_as_used() -> None:
    p = make_paginator("cursor", page_size=2)
    p.init_request(PageRequest("/x", {"cursor": "start"}))
    with pytest.raises(PagingError, match="again"):
        step(p, {"data": rows(1, 2), "nextCursor": "start"})


def test_integer_cursors_count_except_under_a_bare_cursor_key() -> None:
    p = make_paginator("cursor", page_size=1)
    request = PageRequest("/x")
    step(p, {"data": rows(1), "cursor": 5, "next_cursor": 1234})
    p.update_request(request)
    assert request.params["cursor"] == "1234"
    step(p, {"data": rows(2), "next_cursor": 0})
    assert not p.has_next_page
    assert detect({"data": rows(1, 2), "next_cursor": 77}).style == "cursor"
    with pytest.raises(PagingError, match="could not detect"):
        detect({"data": rows(1, 2), "cursor": 77})


def test_has_more_without_a_cursor_is_an_error() -> None:
    p = make_paginator("cursor", page_size=2)
    with pytest.raises(PagingError, match="cursor_path"):
        step(p, {"data": rows(1, 2), "hasMore": True})


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({"next_cursor": "t"}, "cursor"),
        ({"cursor": "t"}, "cursor"),
        ({"nextPageToken": "t"}, "pageToken"),
        ({"next_page_token": "t"}, "page_token"),
        ({"pagination": {"next_cursor": "t"}}, "cursor"),
        ({"meta": {"nextCursor": "t"}}, "cursor"),
        ({"paging": {"cursors": {"after": "t"}}}, "after"),
        ({"response_metadata": {"next_cursor": "t"}}, "cursor"),
    ],
)
def test_cursor_locations_and_their_usual_parameter(body: dict[str, Any], param: str) -> None:
    p = make_paginator("cursor", page_size=1)
    request = PageRequest("/x")
    step(p, {"items": rows(1), **body})
    p.update_request(request)
    assert request.params[param] == "t"


def test_cursor_options_path_and_param() -> None:
    p = make_paginator("cursor", page_size=1, options={"cursor_path": "a.b", "cursor_param": "c"})
    request = PageRequest("/x")
    step(p, {"data": rows(1), "nextCursor": "ignored", "a": {"b": 7}})
    p.update_request(request)
    assert request.params == {"limit": "1", "c": "7"}
    step(p, {"data": rows(2), "a": {"b": 0}})  # a zero integer cursor: no more
    assert not p.has_next_page


# --- next URL and Link header ---------------------------------------------------------------


def test_next_url_resolves_relative_links_and_drops_the_params() -> None:
    p = make_paginator("next_url", page_size=2)
    request = PageRequest("/items", {"status": "open"})
    p.init_request(request)
    step(p, {"results": rows(1, 2), "next": "/items?page=2&status=open"}, url=f"{BASE}/items?x")
    p.update_request(request)
    assert (request.url, request.params) == (f"{BASE}/items?page=2&status=open", {})
    step(p, {"results": rows(3), "next": None})
    assert not p.has_next_page


@pytest.mark.parametrize(
    "body",
    [
        {"next_url": "https://other.test/p2"},
        {"nextUrl": "https://other.test/p2"},
        {"links": {"next": "https://other.test/p2"}},
        {"links": {"next": {"href": "https://other.test/p2"}}},
        {"_links": {"next": {"href": "https://other.test/p2"}}},
        {"pagination": {"next": "https://other.test/p2"}},
        {"@odata.nextLink": "https://other.test/p2"},
    ],
)
def test_next_url_locations(body: dict[str, Any]) -> None:
    p = make_paginator("next_url", page_size=1)
    request = PageRequest("/items")
    step(p, {"value": rows(1), **body})
    p.update_request(request)
    assert request.url == "https://other.test/p2"


def test_next_url_option_and_repetition_guard() -> None:
    p = make_paginator("next_url", page_size=1, options={"next_url_path": "meta.more"})
    step(p, {"data": rows(1), "next": "/ignored", "meta": {"more": "/items?p=2"}})
    assert p.has_next_page
    with pytest.raises(PagingError, match="again"):
        step(p, {"data": rows(2), "meta": {"more": "/items?p=2"}}, url=f"{BASE}/items?p=2")
    p = make_paginator("next_url", page_size=1)
    with pytest.raises(PagingError, match="again"):  # a "next" that is this very page
        step(p, {"data": rows(1), "next": f"{BASE}/items"})


def test_link_header_follows_rel_next() -> None:
    p = make_paginator("link_header", page_size=2)
    request = PageRequest("/repos", {"state": "all"})
    p.init_request(request)
    link = '</repos?page=2>; rel="next", <https://api.test/repos?page=9>; rel="last"'
    step(p, rows(1, 2), url=f"{BASE}/repos", headers={"Link": link})
    p.update_request(request)
    assert (request.url, request.params) == (f"{BASE}/repos?page=2", {})
    with pytest.raises(PagingError, match="again"):
        step(p, rows(3, 4), url=f"{BASE}/repos?page=2", headers={"Link": link})
    p = make_paginator("link_header", page_size=2)
    step(p, rows(1, 2), headers={"Link": '<https://api.test/repos?page=1>; rel="prev"'})
    assert not p.has_next_page


# --- page number and offset -----------------------------------------------------------------


def test_page_number_counts_pages_and_stops_on_total_pages() -> None:
    p = make_paginator("page_number", page_size=2)
    request = PageRequest("/items", {"q": "x"})
    p.init_request(request)
    assert request.params == {"q": "x", "limit": "2", "page": "1"}
    step(p, {"data": rows(1, 2), "total_pages": 2})
    p.update_request(request)
    assert request.params == {"q": "x", "limit": "2", "page": "2"}
    step(p, {"data": rows(3, 4), "total_pages": 2})
    assert not p.has_next_page


def test_page_number_options_and_totals() -> None:
    options = {"page_param": "p", "limit_param": "per_page", "first_page": "0"}
    p = make_paginator("page_number", page_size=2, options=options)
    request = PageRequest("/items")
    p.init_request(request)
    assert request.params == {"per_page": "2", "p": "0"}
    step(p, {"data": rows(1), "meta": {"total_pages": 3}})  # short, but the total says more
    assert p.has_next_page
    p.update_request(request)
    assert request.params["p"] == "1"
    p = make_paginator("page_number", page_size=2)
    step(p, {"data": rows(1, 2), "totalCount": 4})
    step(p, {"data": rows(3, 4), "totalCount": 4})
    assert not p.has_next_page


def test_a_short_page_ends_the_list_once_the_service_page_size_is_known() -> None:
    """A short first page may be the service's own page size (it caps ours): one more page
    is asked for, marked as a probe; from then on a page shorter than the first ends it."""
    p = make_paginator("page_number", page_size=3)
    step(p, {"data": rows(1, 2), "page": 1})
    assert p.has_next_page and p.probing
    step(p, {"data": rows(3, 4), "page": 2})
    assert p.has_next_page and not p.probing, "two records a page: the service's size"
    step(p, {"data": rows(5), "page": 3})
    assert not p.has_next_page
    p = make_paginator("page_number", page_size=3)
    step(p, {"data": rows(1, 2), "page": 1})
    step(p, {"data": [], "page": 2})
    assert not p.has_next_page, "an empty probe ends the list"
    p = make_paginator("page_number", page_size=3)
    step(p, {"data": rows(1, 2), "page": 1, "total": 10})
    assert p.has_next_page and not p.probing, "a total decides, no probe needed"
    p = make_paginator("page_number", page_size=3)
    step(p, {"data": rows(1, 2), "page": 1, "per_page": 3})
    assert not p.has_next_page, "a page size the body reports decides too"


def test_a_count_equal_to_a_full_page_is_not_taken_for_a_total() -> None:
    p = make_paginator("page_number", page_size=2)
    step(p, {"data": rows(1, 2), "count": 2})
    assert p.has_next_page
    step(p, {"data": rows(3, 4), "count": 2})  # below what was received: no total either
    assert p.has_next_page
    step(p, {"data": rows(5), "count": 1})
    assert not p.has_next_page


def test_a_page_size_the_body_reports_lowers_the_full_page_size() -> None:
    p = make_paginator("page_number", page_size=50)
    step(p, {"data": rows(*range(30)), "page": 1, "per_page": 30})
    assert p.has_next_page


@pytest.mark.parametrize("style", ["page_number", "offset"])
def test_a_server_ignoring_the_page_parameter_is_an_error(style: str) -> None:
    p = make_paginator(style, page_size=2)
    step(p, {"data": rows(1, 2), "total": 10})
    with pytest.raises(PagingError, match="same records"):
        step(p, {"data": rows(1, 2), "total": 10})
    p = make_paginator(style, page_size=2)  # records without ids compare whole
    step(p, {"data": [{"a": 1}, {"a": 2}], "total": 10})
    with pytest.raises(PagingError, match="same records"):
        step(p, {"data": [{"a": 1}, {"a": 2}], "total": 10})


def test_offset_advances_by_the_records_received() -> None:
    p = make_paginator("offset", page_size=3, options={"offset_param": "skip"})
    request = PageRequest("/items")
    p.init_request(request)
    assert request.params == {"limit": "3", "skip": "0"}
    step(p, {"data": rows(1, 2), "total": 5})  # the server sent fewer than asked
    p.update_request(request)
    assert request.params == {"limit": "3", "skip": "2"}
    step(p, {"data": rows(3, 4, 5), "total": 5})
    assert not p.has_next_page
    p = make_paginator("offset", page_size=3)
    step(p, {"data": rows(1, 2, 3), "offset": 0})
    assert p.has_next_page
    step(p, {"data": rows(4), "offset": 3})
    assert not p.has_next_page


def test_every_style_stops_on_an_empty_page_and_single_sends_one_request() -> None:
    for style in STYLES:
        p = make_paginator(style, page_size=2)
        step(p, {"data": [], "nextCursor": "x", "next": "/n", "total": 9, "total_pages": 9})
        assert not p.has_next_page, style
    p = make_paginator("single", page_size=2)
    request = PageRequest("/items", {"q": "1"})
    p.init_request(request)
    assert request.params == {"q": "1"}
    step(p, {"data": rows(1, 2, 3)})
    assert not p.has_next_page


def test_max_pages_is_a_bound() -> None:
    p = make_paginator("offset", page_size=1, options={"max_pages": "2"})
    step(p, {"data": rows(1)})
    with pytest.raises(PagingError, match="more than 2 pages"):
        step(p, {"data": rows(2)})


def test_bad_styles_and_options_are_named() -> None:
    with pytest.raises(PagingError, match=r"paginator type 'pages' is unknown; use one of cursor"):
        make_paginator("pages", page_size=10)
    with pytest.raises(PagingError, match="has no option 'page_param'; its options"):
        make_paginator("cursor", page_size=10, options={"page_param": "p"})
    with pytest.raises(PagingError, match="'max_pages' must be an integer"):
        make_paginator("cursor", page_size=10, options={"max_pages": "many"})
    with pytest.raises(PagingError, match="at least 1"):
        make_paginator("cursor", page_size=0)


# --- detection ------------------------------------------------------------------------------


def detect(body: Any, page_size: int = 2, **kwargs: Any) -> Paginator:
    headers = kwargs.pop("headers", None)
    records, _ = find_records(body)
    request = PageRequest("/items", {"limit": str(page_size)})
    return detect_paginator(
        response(body, headers=headers),
        body,
        records,
        page_size=page_size,
        request=request,
        **kwargs,
    )


@pytest.mark.parametrize(
    ("body", "headers", "style", "more"),
    [
        (rows(1, 2), {"Link": '<https://api.test/items?page=2>; rel="next"'}, "link_header", True),
        (
            {"results": rows(1, 2), "next": "https://api.test/items?o=2", "count": 9},
            None,
            "next_url",
            True,
        ),
        ({"data": rows(1, 2), "hasMore": True, "nextCursor": "abc"}, None, "cursor", True),
        ({"data": rows(1, 2), "hasMore": False, "nextCursor": None}, None, "cursor", False),
        ({"data": rows(1), "hasMore": False}, None, "cursor", False),
        ({"data": rows(1, 2), "next_cursor": None}, None, "cursor", False),
        ({"data": rows(1, 2), "next": None}, None, "next_url", False),
        ({"data": rows(1, 2), "page": 1, "total_pages": 3}, None, "page_number", True),
        ({"data": rows(1, 2), "meta": {"current_page": 1}}, None, "page_number", True),
        ({"items": rows(1, 2), "offset": 0, "total": 5}, None, "offset", True),
        ({"items": rows(1, 2), "has_more": True, "page": 1}, None, "page_number", True),
        ({"data": rows(1)}, None, "single", False),
        (rows(1), None, "single", False),
        ({"data": []}, None, "single", False),
    ],
)
def test_detection_from_the_first_response(
    body: Any, headers: dict[str, str] | None, style: str, more: bool
) -> None:
    p = detect(body, headers=headers)
    assert (p.style, p.has_next_page) == (style, more)


def test_a_next_that_is_not_a_url_is_not_a_next_url() -> None:
    with pytest.raises(PagingError, match="could not detect"):
        detect({"data": rows(1, 2), "next": "eyJvZmZzZXQiOjJ9"})


def test_undetectable_full_pages_name_the_setting() -> None:
    with pytest.raises(PagingError, match=r"full page \(3 records\)"):
        detect({"data": rows(1, 2, 3)})  # more than asked: the limit was ignored, not "single"
    with pytest.raises(PagingError) as info:
        detect({"data": rows(1, 2)})
    message = str(info.value)
    assert "could not detect" in message and "paginator" in message
    assert all(style in message for style in STYLES)
    with pytest.raises(PagingError, match="says it has more records"):
        detect({"data": rows(1), "hasMore": True})


def test_detection_takes_options_of_the_detected_style() -> None:
    p = detect(
        {"data": rows(1, 2), "state": {"after": "k"}}, options={"cursor_path": "state.after"}
    )
    assert (p.style, p.has_next_page) == ("cursor", True)
    p = detect({"data": rows(1, 2), "page": 1}, options={"cursor_path": "x", "page_param": "pg"})
    request = PageRequest("/items", {"limit": "2"})
    p.update_request(request)
    assert request.params == {"limit": "2", "pg": "2"}
    with pytest.raises(PagingError, match="no option 'pagesize'"):
        detect({"data": rows(1)}, options={"pagesize": "3"})


def test_detection_leaves_the_request_alone_and_continues_from_it() -> None:
    request = PageRequest("/items", {"status": "open"})
    init_probe_request(request, page_size=2)
    assert request.params == {"status": "open", "limit": "2"}
    body = {"data": rows(1, 2), "offset": 0, "total": 4}
    records, _ = find_records(body)
    p = detect_paginator(response(body), body, records, page_size=2, request=request)
    assert request.params == {"status": "open", "limit": "2"}
    p.update_request(request)
    assert request.params == {"status": "open", "limit": "2", "offset": "2"}


# --- a mock service, through httpx ----------------------------------------------------------


def mock_service(records: list[dict[str, Any]]) -> Callable[[httpx.Request], httpx.Response]:
    """A page-number service that also ignores unknown parameters (per_page: 10)."""

    def handle(request: httpx.Request) -> httpx.Response:
        page = int(request.url.params.get("page", "1"))
        chunk = records[(page - 1) * 10 : page * 10]
        return httpx.Response(200, json={"items": chunk, "page": page, "per_page": 10})

    return handle


def test_a_mock_service_that_ignores_our_page_size() -> None:
    records = rows(*range(95))
    client = httpx.Client(transport=httpx.MockTransport(mock_service(records)), base_url=BASE)
    with client:
        got, p, requests = drive(client, "/items", page_size=50)
    assert p.style == "page_number"
    assert got == records and requests == 10


# --- over real HTTP -------------------------------------------------------------------------

RECORDS = make_records(1_003)


@pytest.fixture(scope="module")
def serve() -> Iterator[Callable[..., str]]:
    """Start paging servers for this module; returns a server's /items URL."""
    servers: list[ServerThread] = []

    def start(style: str, **kwargs: Any) -> str:
        server = ServerThread(make_paging_app(kwargs.pop("records", RECORDS), style, **kwargs))
        servers.append(server.start())
        return server.url + "/items"

    yield start
    for server in servers:
        server.stop()


def assert_exactly_once(got: list[dict[str, Any]], want: list[dict[str, Any]]) -> None:
    counts = Counter(r["id"] for r in got)
    assert not [k for k, n in counts.items() if n > 1], "records served twice"
    assert [r["id"] for r in got] == [r["id"] for r in want]


CONFIGURED = {
    "cursor": "cursor",
    "next_url": "next_url",
    "link_header": "link_header",
    "bare_list": "link_header",
    "page_number": "page_number",
    "offset": "offset",
    "single": "single",
}


@pytest.mark.parametrize("server_style", SERVER_STYLES)
@pytest.mark.parametrize("total", [True, False])
def test_every_style_over_http_configured_and_detected(
    serve: Callable[..., str], server_style: str, total: bool
) -> None:
    url = serve(server_style, total=total)
    style = CONFIGURED[server_style]
    # A list served whole (more than a page, no hints) is detected when it fits a page.
    page_size = 2_000 if style == "single" else 50
    with httpx.Client(timeout=30) as client:
        for configured in (style, None):
            got, p, requests = drive(client, url, {"q": "x"}, style=configured, page_size=page_size)
            assert p.style == style
            assert_exactly_once(got, RECORDS)
            expected = 1 if style == "single" else 21
            assert requests == expected, (configured, requests)


def test_page_number_with_another_page_size_parameter_over_http(serve: Callable[..., str]) -> None:
    url = serve("page_number", page_size_param="per_page", total=False)
    options = {"limit_param": "per_page"}
    with httpx.Client(timeout=30) as client:
        got, p, requests = drive(client, url, style="page_number", page_size=40, options=options)
        assert_exactly_once(got, RECORDS)
        assert requests == 26
        # Detected, our "limit" is ignored: the body's per_page (25) tells a full page.
        got, p, requests = drive(client, url, page_size=50)
        assert p.style == "page_number"
        assert_exactly_once(got, RECORDS)


@pytest.mark.parametrize(
    ("server_style", "kwargs"),
    [
        ("page_number", {"ignore_page_param": True}),
        ("offset", {"ignore_page_param": True}),
        ("offset", {"ignore_page_param": True, "total": False}),
        ("cursor", {"repeat_cursor": True}),
        ("cursor", {"ignore_page_param": True}),
        ("next_url", {"ignore_page_param": True}),
        ("link_header", {"ignore_page_param": True}),
    ],
)
def test_misbehaving_servers_raise_instead_of_looping(
    serve: Callable[..., str], server_style: str, kwargs: dict[str, Any]
) -> None:
    url = serve(server_style, **kwargs)
    with httpx.Client(timeout=30) as client:
        for style in (CONFIGURED[server_style], None):
            with pytest.raises(PagingError):
                drive(client, url, style=style, page_size=50, max_requests=5)


def test_a_record_count_that_is_a_multiple_of_the_page_size(serve: Callable[..., str]) -> None:
    records = make_records(100)
    for style in ("page_number", "offset", "cursor"):
        url = serve(style, records=records)
        with httpx.Client(timeout=30) as client:
            got, _, requests = drive(client, url, style=style, page_size=50)
        assert_exactly_once(got, records)
        assert requests == 2, style


# --- the project's sandbox ------------------------------------------------------------------


def test_detection_on_the_sandbox_picks_cursor_and_pages_every_record_once(
    shared_sandbox: RunningSandbox,
) -> None:
    expected = set(shared_sandbox.sandbox.workspaces["ws_acme"].conversations.records)
    with shared_sandbox.client() as client:
        got, p, requests = drive(client, "/v1/conversations", page_size=37)
        assert p.style == "cursor"
        ids = [r["id"] for r in got]
        assert len(ids) == len(set(ids)) == len(expected) and set(ids) == expected
        assert requests == -(-len(expected) // 37)
        assert ids == [r["id"] for r in page_all(client, "/v1/conversations", {"limit": 37})]
        # Filters stay on every request; the sandbox accepts them with the cursor.
        got, p, _ = drive(client, "/v1/conversations", {"status": "open"}, style="cursor")
        want = {r["id"] for r in page_all(client, "/v1/conversations", {"status": "open"})}
        assert {r["id"] for r in got} == want and all(r["status"] == "open" for r in got)
        got, p, _ = drive(client, "/v1/leads", {"status": "any"}, page_size=200)
        assert p.style == "cursor"
        assert len(got) == len(shared_sandbox.sandbox.workspaces["ws_acme"].leads.records)
