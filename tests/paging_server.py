"""A small service that serves one list of records in any pagination style (a test helper).

The extractor must page through services whose scheme it does not know in
advance, so its paginators are tested over real HTTP against each style real
services use, and against servers that misbehave (ignore the page parameter,
repeat a cursor). ``GET /items`` serves the records; run the app with
``convo_analytics._serving.ServerThread``.
"""

from __future__ import annotations

from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

#: The styles this server speaks; ``bare_list`` is a bare JSON list with ``Link`` headers.
SERVER_STYLES = (
    "cursor",
    "next_url",
    "link_header",
    "bare_list",
    "page_number",
    "offset",
    "single",
)
DEFAULT_PAGE_SIZE = 25
MAX_PAGE_SIZE = 200


def make_records(n: int) -> list[dict[str, Any]]:
    """``n`` records with an id, a number and an ISO 8601 timestamp."""
    return [
        {
            "id": f"rec_{i:05d}",
            "n": i,
            "updatedAt": f"2026-01-01T00:{i // 60 % 60:02d}:{i % 60:02d}Z",
        }
        for i in range(n)
    ]


def _number(request: Request, name: str, default: int) -> int:
    raw = request.query_params.get(name)
    if raw is None:
        return default
    if not raw.isdigit():
        raise ValueError(f"query parameter {name!r} must be a non-negative integer")
    return int(raw)


def make_paging_app(
    records: list[dict[str, Any]],
    style: str,
    *,
    page_size_param: str = "limit",
    total: bool = True,
    envelope: str = "data",
    ignore_page_param: bool = False,
    repeat_cursor: bool = False,
) -> Starlette:
    """An app serving ``records`` at ``GET /items`` in ``style`` (one of SERVER_STYLES).

    The page size comes from ``page_size_param`` (default 25, at most 200); the
    position from ``cursor`` (cursor), ``page`` (page_number) or ``offset`` (the
    rest; next URLs and ``Link`` headers carry it). ``total`` adds a total count
    (and ``total_pages``) to bodies that have one; ``envelope=""`` serves bare
    lists. ``ignore_page_param`` always serves the first page; ``repeat_cursor``
    always gives the second page's cursor.
    """
    if style not in SERVER_STYLES:
        raise ValueError(f"unknown style {style!r}; one of {SERVER_STYLES}")

    def items(request: Request) -> Response:
        try:
            size = min(_number(request, page_size_param, DEFAULT_PAGE_SIZE), MAX_PAGE_SIZE)
            page_no = _number(request, "page", 1)
            if style == "cursor":
                cursor = request.query_params.get("cursor", "c0")
                if not (cursor.startswith("c") and cursor[1:].isdigit()):
                    raise ValueError("invalid cursor")
                start = int(cursor[1:])
            elif style == "page_number":
                start = (max(page_no, 1) - 1) * size
            else:
                start = _number(request, "offset", 0)
        except ValueError as exc:
            return JSONResponse({"error": str(exc)}, status_code=400)
        if style == "single":
            start, size = 0, len(records)
        if ignore_page_param:
            start, page_no = 0, 1
        page = records[start : start + size]
        end = start + len(page)
        more = end < len(records)
        following = request.url.include_query_params(offset=end)
        extra: dict[str, Any] = {}
        headers: dict[str, str] = {}
        if style == "cursor":
            token = f"c{size if repeat_cursor else end}"
            extra = {"hasMore": more, "nextCursor": token if more else None}
        elif style == "next_url":  # relative, so that clients must resolve it
            extra = {"next": f"{following.path}?{following.query}" if more else None}
        elif style in ("link_header", "bare_list") and more:
            headers["Link"] = f'<{following}>; rel="next", <{request.url}>; rel="self"'
        elif style == "page_number":
            extra = {"page": page_no, page_size_param: size}
            if total:
                extra["total_pages"] = -(-len(records) // size)
        elif style == "offset":
            extra = {"offset": start, page_size_param: size}
        if total and style != "single":
            extra["total"] = len(records)
        body: Any = page if style == "bare_list" or not envelope else {envelope: page, **extra}
        return JSONResponse(body, headers=headers)

    return Starlette(routes=[Route("/items", items)])
