"""Paging through a list endpoint: one small state machine per pagination style.

The service's interface does not show how its lists page, so the extractor
supports the styles real services use, detects the style from the first
response, and lets config (a stream's ``paginator``, or ``extract.pagination``
for every stream) choose it and name its parameters. As in dlt's
rest_client, a paginator only holds paging state; the runner sends requests:
``init_request`` the first, then after each response ``update_state`` and,
while ``has_next_page``, ``update_request`` for the next. A paginator serves
one listing. Every style stops on an empty page or a body ``hasMore: false``,
and none loops forever: a repeated cursor or next URL, a page of the same
records as the one before, or more than ``max_pages`` pages is a PagingError.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

import httpx
import orjson

from convo_analytics.extract import _shapes as body
from convo_analytics.extract._shapes import bool_at, has_path, int_at, value_at

__all__ = ["STYLES", "PageRequest", "Paginator", "PagingError", "detect_paginator"]
__all__ += ["body_total", "header_total", "init_probe_request", "link_params", "make_paginator"]

STYLES = ("cursor", "next_url", "link_header", "page_number", "offset", "single")
DEFAULT_MAX_PAGES = 10_000_000
_SETTING = "the stream's paginator"

#: The options of each style (strings in config); every style also takes the common ones.
# fmt: off
OPTIONS: dict[str, tuple[str, ...]] = {
    "cursor": ("cursor_path", "cursor_param", "cursor_header"),
    "next_url": ("next_path", "next_url_path"), "link_header": (),
    "page_number": ("page_param", "base_page", "first_page"),
    "offset": ("offset_param", "end_param"), "single": (),
}
# fmt: on
_COMMON = ("max_pages", "limit_param", "total_path", "total_header")
#: Response headers that carry a total record count, in order of preference (formats:
#: ``total_in_header``).
TOTAL_HEADERS = (
    "X-Total-Count", "X-Total", "Total-Count", "X-Total-Results", "X-Result-Count",
    "Content-Range",
)  # fmt: skip
#: Response headers that carry a next cursor (not a URL: that is a next link).
CURSOR_HEADERS = (
    "X-Next-Cursor", "Next-Cursor", "X-Cursor", "X-Next-Page-Token", "Next-Page-Token",
    "X-Continuation-Token", "X-Continuation", "X-Next-Token", "X-Next",
)  # fmt: skip


class PagingError(Exception):
    """The listing cannot be paged safely: undetectable style, a loop, too many pages."""


@dataclass
class PageRequest:
    """What the next request should be; paginators replace ``params``, never mutate it.

    Empty ``params`` (after a next URL) mean "the URL as it is": send ``params or None``,
    as httpx replaces a URL's query with any params given, even ``{}``."""

    url: str  # absolute, or a path relative to the client's base URL
    params: dict[str, str] = field(default_factory=dict)  # filters and paging parameters


class Paginator(Protocol):
    """The state of paging through one listing (see the module docstring for the loop)."""

    style: str
    has_next_page: bool
    pages: int  # responses seen
    probing: bool  # the next page only checks whether the last one ended the list
    total: int | None  # the largest total record count reported
    total_source: str
    total_found: bool

    def init_request(self, request: PageRequest) -> None: ...
    def update_state(self, response: httpx.Response, data: Any, records: list[Any]) -> None: ...
    def update_request(self, request: PageRequest) -> None: ...


def _int(raw: str | None, default: int, option: str = "") -> int:
    """An integer option (a bad one is an error) or query parameter (bad: the default)."""
    if raw and raw.lstrip("-").isdigit():
        return int(raw)
    if raw and option:
        raise PagingError(f"{_SETTING} option {option!r} must be an integer, not {raw!r}")
    return default


def _cursor_at(data: Any, path: str) -> str | None:
    """A non-empty string, or a non-zero integer (0: "no more") but not in a bare ``cursor``."""
    value = value_at(data, path)
    if isinstance(value, int) and not isinstance(value, bool) and path != "cursor":
        return str(value) if value else None
    return value if isinstance(value, str) and value else None


def _link(value: Any) -> str | None:
    """A next link: a string, or a link object with ``href`` (HAL, JSON:API)."""
    value = value.get("href") if isinstance(value, Mapping) else value
    return value if isinstance(value, str) and value else None


def _has_more(data: Any) -> bool | None:
    return bool_at(data, body.HAS_MORE_PATHS)


#: ``Content-Range: items 0-39/137``, ``items */137`` (an empty range), or PostgREST's
#: ``0-24/3573`` without a unit; ``/*`` is a range whose total the service does not know, and
#: a range of ``bytes`` counts no records.
_CONTENT_RANGE = re.compile(
    r"^\s*(?:(?!bytes\b)[A-Za-z][\w-]*\s+)?(?:\d+\s*-\s*\d+|\*)\s*/\s*(\d+)\s*$"
)


def total_in_header(value: str) -> int | None:
    """The total record count a header value gives: a number (``X-Total-Count: 137``) or a
    range's complete length (``Content-Range: items 0-39/137``, ``items */137``, ``0-39/137``)."""
    value = value.strip()
    if value.isdigit():
        return int(value)
    found = _CONTENT_RANGE.match(value)
    return int(found.group(1)) if found else None


def header_total(response: httpx.Response, name: str = "") -> tuple[str, int] | None:
    """A total record count in a response header (``X-Total-Count``, ``Content-Range``), and
    the header; ``name``: only that header."""
    for header in (name,) if name else TOTAL_HEADERS:
        total = total_in_header(response.headers.get(header, ""))
        if total is not None:
            return header, total
    return None


def header_cursor(response: httpx.Response, name: str = "") -> tuple[str, str] | None:
    """A next cursor in a response header (``X-Next-Cursor``), and the header."""
    for header in (name,) if name else CURSOR_HEADERS:
        value = response.headers.get(header, "").strip()
        if value and not value.startswith(("http://", "https://", "/", "<")):
            return header, value
    return None


def _next_url(data: Any, path: str, *, strict: bool) -> str | None:
    """The body's next-page URL; ``strict``: only what looks like a URL (detection)."""
    for candidate in (path,) if path else body.NEXT_URL_PATHS:
        url = _link(value_at(data, candidate))
        if url and (not strict or url.startswith(("http://", "https://", "/", "?"))):
            return url
    return None


def _looped(what: str, value: str, pages: int) -> PagingError:
    shown = value if len(value) <= 60 else value[:57] + "..."
    return PagingError(f"the service gave the {what} {shown!r} again after {pages} pages")


_CLASSES: dict[str, type[_Base]] = {}


class _Base:
    """Counting, the stop rules every style shares, and the ``max_pages`` guard."""

    style = ""

    def __init_subclass__(cls) -> None:
        if cls.style:
            _CLASSES[cls.style] = cls

    def __init__(self, page_size: int, options: Mapping[str, str]) -> None:
        self.page_size, self.options = page_size, options
        self.has_next_page = True
        self.pages = self.records = 0
        self.max_pages = _int(options.get("max_pages"), DEFAULT_MAX_PAGES, "max_pages")
        self.limit_param = options.get("limit_param", "limit")
        #: The largest total record count the service reported (body or header), and where.
        self.total: int | None = None
        self.total_source = ""
        #: Whether any answer carried a total where it was looked for.
        self.total_found = False
        #: How many records the first page held (to compare with the page size asked for).
        self.first_page: int | None = None
        #: The next request only checks whether a short page was the last: an answer that
        #: refuses it (400, 404, 416) ends the list instead of failing it.
        self.probing = False

    def _size_params(self) -> dict[str, str]:
        return {self.limit_param: str(self.page_size)} if self.limit_param else {}

    def init_request(self, request: PageRequest) -> None:
        request.params = {**request.params, **self._size_params()}

    def _note_total(self, response: httpx.Response, data: Any, records: list[Any]) -> None:
        found: tuple[str, int] | None = None
        if path := self.options.get("total_path"):
            value = value_at(data, path)
            if isinstance(value, str) and value.strip().isdigit():
                value = int(value)  # some services write their counts as text
            number = isinstance(value, int) and not isinstance(value, bool) and value >= 0
            found = (path, value) if number else None
        elif header := self.options.get("total_header"):
            found = header_total(response, header)
        else:
            found = header_total(response) or body_total(data, records, self.page_size)
        if found is not None and (self.total is None or found[1] > self.total):
            self.total_source, self.total = found
        self.total_found = self.total_found or found is not None

    def update_state(self, response: httpx.Response, data: Any, records: list[Any]) -> None:
        self.pages += 1
        self.records += len(records)
        if self.first_page is None:
            self.first_page = len(records)
        self._note_total(response, data, records)
        empty_or_said_so = not records or _has_more(data) is False
        self.has_next_page = not empty_or_said_so and self._advance(response, data, records)
        if self.has_next_page and self.pages >= self.max_pages:
            raise PagingError(f"the listing has more than {self.max_pages} pages (max_pages)")

    def _advance(self, response: httpx.Response, data: Any, records: list[Any]) -> bool:
        """Note where the next page is; False when this page was the last."""
        raise NotImplementedError

    def update_request(self, request: PageRequest) -> None:
        raise NotImplementedError


class CursorPaginator(_Base):
    """An opaque cursor in the body (or a response header), sent back as a query parameter
    with the same filters."""

    style = "cursor"

    def __init__(self, page_size: int, options: Mapping[str, str]) -> None:
        super().__init__(page_size, options)
        self.cursor_path = options.get("cursor_path", "")
        self.cursor_header = options.get("cursor_header", "")
        self.cursor_param = options.get("cursor_param", "")
        self.cursor = ""
        self._used: set[str] = set()
        self._last_ids: list[str] | None = None

    def init_request(self, request: PageRequest) -> None:
        super().init_request(request)
        if given := request.params.get(self.cursor_param or "cursor"):
            self._used.add(given)

    def _find(self, response: httpx.Response, data: Any) -> str | None:
        if self.cursor_header:
            found = header_cursor(response, self.cursor_header)
            return found[1] if found else None
        if self.cursor_path:
            return _cursor_at(data, self.cursor_path)
        for path, param in body.CURSOR_PATHS.items():
            if cursor := _cursor_at(data, path):
                # Later pages look in the same place; its usual parameter takes it back.
                self.cursor_path, self.cursor_param = path, self.cursor_param or param
                return cursor
        if found := header_cursor(response):
            self.cursor_header = found[0]
            return found[1]
        return None

    def _advance(self, response: httpx.Response, data: Any, records: list[Any]) -> bool:
        ids = _record_ids(records)
        if ids == self._last_ids:
            raise PagingError(
                f"page {self.pages} holds the same records as the page before; the service "
                f"seems to ignore the cursor parameter {self.cursor_param or 'cursor'!r} "
                f"(set cursor_param in {_SETTING}; `convo extract --check` finds it)"
            )
        self._last_ids = ids
        cursor = self._find(response, data)
        if cursor is None and _has_more(data):
            where = self.cursor_path or ", ".join(body.CURSOR_PATHS)
            raise PagingError(
                f"the response says it has more records but has no next cursor (at {where}); "
                f"set the {_SETTING} option cursor_path"
            )
        if cursor in self._used:
            raise _looped("cursor", cursor or "", self.pages)
        self.cursor = cursor or ""
        self._used.add(self.cursor)
        return cursor is not None

    def update_request(self, request: PageRequest) -> None:
        param = self.cursor_param or "cursor"
        request.params = {**request.params, **self._size_params(), param: self.cursor}


class LinkPaginator(_Base):
    """A next-page URL the service gives, in the body (``next_url``) or in an RFC 8288
    ``Link: <...>; rel="next"`` header (``link_header``); it carries every parameter."""

    def __init__(self, page_size: int, options: Mapping[str, str]) -> None:
        super().__init__(page_size, options)
        self.next_url = ""
        self._seen: set[str] = set()

    def _advance(self, response: httpx.Response, data: Any, records: list[Any]) -> bool:
        self._seen.add(str(response.url))
        if self.style == "link_header":
            link = _link(response.links.get("next", {}).get("url"))
        else:
            path = self.options.get("next_path") or self.options.get("next_url_path", "")
            link = _next_url(data, path, strict=False)
        if link is None:
            return False
        self.next_url = str(response.url.join(link.strip()))  # a relative link: against this page's
        if self.next_url in self._seen:
            raise _looped("next-page URL", self.next_url, self.pages)
        self._seen.add(self.next_url)
        return True

    def update_request(self, request: PageRequest) -> None:
        request.url, request.params = self.next_url, {}


class NextUrlPaginator(LinkPaginator):
    style = "next_url"


class LinkHeaderPaginator(LinkPaginator):
    style = "link_header"


class _Range(_Base):
    """A position parameter that advances each page (dlt's RangePaginator). Such listings
    end by a body total or a short page; a page repeated (the parameter ignored) is an error."""

    def __init__(self, page_size: int, options: Mapping[str, str], param: str, first: int) -> None:
        super().__init__(page_size, options)
        self.param, self.first, self.position = param, first, first
        self._last_ids: list[str] | None = None
        #: The size of a short first page (the service's own page size, or the whole list).
        self.served = 0

    def init_request(self, request: PageRequest) -> None:
        super().init_request(request)
        self.position = _int(request.params.get(self.param), self.first)
        request.params = {**request.params, self.param: str(self.position)}

    def _advance(self, response: httpx.Response, data: Any, records: list[Any]) -> bool:
        ids = _record_ids(records)
        if ids == self._last_ids:
            raise PagingError(
                f"page {self.pages} holds the same records as the page before; the service "
                f"seems to ignore the {self.param!r} parameter (set {_SETTING} and its "
                "options; `convo extract --check` finds them)"
            )
        self._last_ids = ids
        return not self._done(response, data, records)

    def _done(self, response: httpx.Response, data: Any, records: list[Any]) -> bool:
        """Advance; whether this page was the last."""
        raise NotImplementedError

    def _total_done(self, data: Any, records: list[Any], received: int) -> bool:
        """Whether ``received`` records (this page included) are the whole listing.

        A reported total decides (see ``_note_total``); without one, a page shorter
        than a full one is the last. A page larger than asked for sets the size a full
        page is judged by (the service ignores or raises our page size).
        """
        found = int_at(data, body.PAGE_SIZE_PATHS)
        size = min(self.page_size, found[1]) if found and found[1] else self.page_size
        if self.first_page is not None and self.first_page > size:
            size = self.first_page
        if self.total is not None and self.total >= received:
            return received >= self.total
        if self.pages == 1 and 0 < len(records) < size and not found:
            # A first page shorter than asked, with nothing saying how large a page is: the
            # whole list, or the service's own page size. One more page tells (an empty or
            # refused page ends the list); from then on its size judges a full page.
            self.served, self.probing = len(records), True
            return False
        self.probing = False
        return len(records) < min(size, self.served or size)

    def update_request(self, request: PageRequest) -> None:
        request.params = {**request.params, self.param: str(self.position)}
        request.params = {**request.params, **self._size_params()}


class PageNumberPaginator(_Range):
    """A page number (1-based by default, option ``first_page``) and a page size."""

    style = "page_number"

    def __init__(self, page_size: int, options: Mapping[str, str]) -> None:
        name = "base_page" if "base_page" in options else "first_page"
        first = _int(options.get(name), 1, name)
        super().__init__(page_size, options, options.get("page_param") or "page", first)

    def _done(self, response: httpx.Response, data: Any, records: list[Any]) -> bool:
        self.position += 1
        total_pages = int_at(data, body.TOTAL_PAGES_PATHS)
        if total_pages is not None:
            return self.position - self.first >= total_pages[1]
        return self._total_done(data, records, self.records)


class OffsetPaginator(_Range):
    """A record offset, advanced by the records received, and a limit; or an offset and an
    end index (``end_param``, exclusive: json-server's ``_start`` and ``_end``)."""

    style = "offset"

    def __init__(self, page_size: int, options: Mapping[str, str]) -> None:
        super().__init__(page_size, options, options.get("offset_param") or "offset", 0)
        self.end_param = options.get("end_param", "")

    def _size_params(self) -> dict[str, str]:
        if self.end_param:
            return {self.end_param: str(self.position + self.page_size)}
        return super()._size_params()

    def init_request(self, request: PageRequest) -> None:
        super().init_request(request)
        request.params = {**request.params, **self._size_params()}  # the end follows the start

    def _done(self, response: httpx.Response, data: Any, records: list[Any]) -> bool:
        self.position += len(records)
        return self._total_done(data, records, self.position)


class SinglePaginator(_Base):
    """The whole list in one response."""

    style = "single"

    def init_request(self, request: PageRequest) -> None:
        """No page-size parameter: there is only one page."""

    def _advance(self, response: httpx.Response, data: Any, records: list[Any]) -> bool:
        return False


def _record_ids(records: list[Any]) -> list[str]:
    """What identifies a page's records: their ids, else their text (a page repeated)."""
    return [str(r["id"]) if "id" in r else orjson.dumps(r).decode() for r in records]


def body_total(data: Any, records: list[Any], page_size: int) -> tuple[str, int] | None:
    """A total in the body; ``count`` is the page's own count in some services: a count
    equal to a full page, or below the page's records, is no total."""
    total = int_at(data, body.TOTAL_PATHS)
    if total is None or total[1] < len(records):
        return None
    if total[0] == "count" and total[1] == len(records) >= page_size:
        return None
    return total


def make_paginator(
    style: str, *, page_size: int, options: Mapping[str, str] | None = None
) -> Paginator:
    """The paginator of a configured style; unknown styles and options are errors."""
    if style not in _CLASSES:
        raise PagingError(f"paginator type {style!r} is unknown; use one of {', '.join(STYLES)}")
    if page_size < 1:
        raise PagingError(f"the page size must be at least 1, not {page_size}")
    allowed = _COMMON + OPTIONS[style]
    if unknown := sorted(set(options or {}) - set(allowed)):
        raise PagingError(
            f"{_SETTING} {style!r} has no option {', '.join(map(repr, unknown))}; "
            f"its options: {', '.join(allowed)}"
        )
    return _CLASSES[style](page_size, dict(options or {}))


def init_probe_request(
    request: PageRequest, *, page_size: int, options: Mapping[str, str] | None = None
) -> None:
    """Prepare the first request of a listing whose style is to be detected: page size only."""
    if limit_param := (options or {}).get("limit_param", "limit"):
        request.params = {**request.params, limit_param: str(page_size)}


def _detect_style(
    response: httpx.Response,
    data: Any,
    records: list[Any],
    page_size: int,
    options: Mapping[str, str],
) -> str:
    if _link(response.links.get("next", {}).get("url")):
        return "link_header"
    if _next_url(data, options.get("next_path", ""), strict=True):
        return "next_url"
    if any(_cursor_at(data, p) for p in (options.get("cursor_path"), *body.CURSOR_PATHS) if p):
        return "cursor"
    if header_cursor(response, options.get("cursor_header", "")):
        return "cursor"
    if any(has_path(data, p) for p in body.PAGE_HINT_PATHS):
        return "page_number"
    if any(has_path(data, p) for p in body.OFFSET_HINT_PATHS):
        return "offset"
    more = _has_more(data)  # below, value_at(..., False) is None: the key is there, null
    if more is False or any(value_at(data, p, False) is None for p in body.CURSOR_PATHS):
        return "cursor"  # the first page is also the last
    if more is None and any(value_at(data, p, False) is None for p in body.NEXT_URL_PATHS):
        return "next_url"
    total = header_total(response) or body_total(data, records, page_size)
    if more is None and len(records) < page_size and (total is None or total[1] <= len(records)):
        return "single"
    if more:
        why = "says it has more records"
    elif total is not None and total[1] > len(records):
        why = f"holds {len(records)} records of the {total[1]} its {total[0]} counts"
    else:
        why = f"is a full page ({len(records)} records)"
    raise PagingError(
        f"could not detect how the list pages: the first response {why}, with no next link, "
        f"cursor, page number or offset known here; set {_SETTING} to one of {', '.join(STYLES)}"
    )


def detect_paginator(
    response: httpx.Response,
    data: Any,
    records: list[Any],
    *,
    page_size: int,
    request: PageRequest,
    options: Mapping[str, str] | None = None,
) -> Paginator:
    """The paginator for a listing, judged from its first response and already past it.

    ``request`` got ``response`` (see :func:`init_probe_request`) and is not changed; the
    detected style takes its own ``options``; ``update_request`` makes the second request.
    """
    given = dict(options or {})
    if unknown := sorted(set(given) - set(_COMMON).union(*OPTIONS.values())):
        raise PagingError(f"{_SETTING} has no option {', '.join(map(repr, unknown))}")
    style = _detect_style(response, data, records, page_size, given)
    allowed = _COMMON + OPTIONS[style]
    paginator = make_paginator(
        style, page_size=page_size, options={k: v for k, v in given.items() if k in allowed}
    )
    paginator.init_request(PageRequest(request.url, dict(request.params)))
    paginator.update_state(response, data, records)
    return paginator


#: Where bodies keep links besides the next page's (JSON:API's ``links``, HAL's ``_links``).
_LINK_PATHS = (
    "links.self", "links.first", "links.last", "links.prev", "_links.self", "_links.first",
    "_links.last", "_links.prev", "first", "last", "prev", "previous", "self",
)  # fmt: skip


def link_params(response: httpx.Response, data: Any) -> list[tuple[str, str]]:
    """The query parameters of the links a list answer gives (its next, first, last, self
    links, in the body or the ``Link`` header), first seen first: how the service names its
    own paging parameters (``page[size]``, ``page[offset]``), brackets and all."""
    found: dict[str, str] = {}
    links = [_link(value_at(data, p)) for p in (*body.NEXT_URL_PATHS, *_LINK_PATHS)]
    links += [_link(link.get("url")) for link in response.links.values()]
    for link in links:
        if not link:
            continue
        try:
            query = httpx.URL(link).params
        except (httpx.InvalidURL, ValueError):
            continue
        for name, value in query.multi_items():
            found.setdefault(name, value)
    return list(found.items())
