"""`convo serve`: the warehouse answers GET /v1/analytics/summary like the service does."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from conftest import RunningSandbox
from convo_analytics._serving import ServerThread
from convo_analytics.serve import create_serve_app
from transform_support import assert_same, populated_sandbox

TOKEN = "serve_test_token_0123456789"
PARAMS = {"from": "2026-11-10", "to": "2026-11-17", "tz": "Europe/Berlin"}


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[RunningSandbox, Path]]:
    with populated_sandbox(tmp_path_factory.mktemp("serve"), 200, ("UTC",)) as made:
        yield made


def _get(db: Path, params: dict[str, str], token: str | None = TOKEN) -> httpx.Response:
    """One request through the app in process (httpx's ASGI transport)."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}

    async def go() -> httpx.Response:
        transport = httpx.ASGITransport(app=create_serve_app(db, TOKEN))
        async with httpx.AsyncClient(transport=transport, base_url="http://convo") as client:
            return await client.get("/v1/analytics/summary", params=params, headers=headers)

    return asyncio.run(go())


def _without_time(body: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in body.items() if k != "generatedAt"}


def test_the_summary_matches_the_services_over_real_http(
    served: tuple[RunningSandbox, Path],
) -> None:
    running, db = served
    with running.client() as client:
        theirs = client.get("/v1/analytics/summary", params=PARAMS).json()
    with ServerThread(create_serve_app(db, TOKEN)) as server:
        r = httpx.get(
            server.url + "/v1/analytics/summary",
            params=PARAMS,
            headers={"Authorization": f"Bearer {TOKEN}"},
            timeout=30,
        )
    assert r.status_code == 200, r.text
    assert r.headers["content-type"] == "application/json"
    assert theirs["totals"]["conversations"] > 0
    assert_same(_without_time(r.json()), _without_time(theirs))


@pytest.mark.parametrize("token", [None, "wrong-token"])
def test_a_bearer_token_is_required(served: tuple[RunningSandbox, Path], token: str | None) -> None:
    _, db = served
    r = _get(db, PARAMS, token)
    assert r.status_code == 401
    assert r.json()["error"]["code"] in ("unauthorized", "invalid_token")
    assert TOKEN not in r.text


@pytest.mark.parametrize(
    ("params", "says"),
    [
        ({"from": "2026-11-10", "to": "2026-11-01"}, "before"),
        ({"from": "2026-11-10", "to": "2026-11-11", "tz": "Mars/Olympus"}, "IANA"),
        ({"from": "yesterday", "to": "2026-11-11"}, "from"),
        ({"to": "2026-11-11"}, "from"),
    ],
)
def test_bad_queries_get_a_400_in_the_services_error_shape(
    served: tuple[RunningSandbox, Path], params: dict[str, str], says: str
) -> None:
    _, db = served
    r = _get(db, params)
    assert r.status_code == 400, r.text
    error = r.json()["error"]
    assert says in error["message"] and error["requestId"]


def test_a_busy_warehouse_answers_503_and_a_missing_one_too(
    served: tuple[RunningSandbox, Path], tmp_path: Path
) -> None:
    assert _get(tmp_path / "none.duckdb", PARAMS).status_code == 503
    _, db = served
    copy = tmp_path / "copy.duckdb"
    copy.write_bytes(db.read_bytes())
    holder = (
        "import duckdb, sys, time; c = duckdb.connect(sys.argv[1]); "
        "print('ready', flush=True); time.sleep(60)"
    )
    writer = subprocess.Popen(
        [sys.executable, "-c", holder, str(copy)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert writer.stdout is not None and writer.stdout.readline().strip() == "ready"
        r = _get(copy, PARAMS)
    finally:
        writer.kill()
        writer.wait(timeout=10)
    assert r.status_code == 503
    assert r.headers["retry-after"] == "5"
    assert _get(copy, PARAMS).status_code == 200  # and answers again once the run is done


def test_a_published_snapshot_answers_while_a_run_writes(
    served: tuple[RunningSandbox, Path], tmp_path: Path
) -> None:
    from convo_analytics.publish import publish_snapshot
    from convo_analytics.warehouse import open_warehouse

    _, db = served
    copy = tmp_path / "copy.duckdb"
    copy.write_bytes(db.read_bytes())
    con = open_warehouse(copy)
    publish_snapshot(con, copy, tmp_path / "published")
    con.close()
    holder = (
        "import duckdb, sys, time; c = duckdb.connect(sys.argv[1]); "
        "print('ready', flush=True); time.sleep(60)"
    )
    writer = subprocess.Popen(
        [sys.executable, "-c", holder, str(copy)], stdout=subprocess.PIPE, text=True
    )

    async def go() -> httpx.Response:
        app = create_serve_app(copy, TOKEN, tmp_path / "published")
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://convo") as client:
            return await client.get(
                "/v1/analytics/summary",
                params=PARAMS,
                headers={"Authorization": f"Bearer {TOKEN}"},
            )

    try:
        assert writer.stdout is not None and writer.stdout.readline().strip() == "ready"
        r = asyncio.run(go())
    finally:
        writer.kill()
        writer.wait(timeout=10)
    assert r.status_code == 200, r.text
    assert r.json()["totals"]["conversations"] > 0


def test_nothing_published_or_no_marts_is_a_503_that_says_what_to_run(
    served: tuple[RunningSandbox, Path], tmp_path: Path
) -> None:
    async def ask(app: Any) -> httpx.Response:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://convo") as client:
            return await client.get("/v1/analytics/summary", params=PARAMS,
                                    headers={"Authorization": f"Bearer {TOKEN}"})  # fmt: skip

    _, db = served
    r = asyncio.run(ask(create_serve_app(db, TOKEN, tmp_path / "nothing-yet")))
    assert r.status_code == 503 and "convo publish" in r.json()["error"]["message"]
    bare = tmp_path / "bare.duckdb"
    from convo_analytics.warehouse import open_warehouse

    con = open_warehouse(bare)
    con.execute("DROP TABLE mart_slices")  # as a release before the marts left it
    con.close()
    r = asyncio.run(ask(create_serve_app(bare, TOKEN)))
    assert r.status_code == 503 and "convo transform" in r.json()["error"]["message"]
