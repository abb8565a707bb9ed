"""The jsonapi and ranges test services behave as tests/foreign_more.py says.

The extractor's tests trust them and ``truth``; here each is walked over real HTTP
with httpx the way it describes itself, and what comes back is compared with the truth.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterator
from datetime import UTC, date, datetime, timedelta

import httpx
import pytest

from foreign_more import SUMMARY_KEYS, day_counts, serve, truth
from foreign_services import ForeignDomain

KEY = "sk_foreign_more_0123"
MAX_PAGES = 100


@pytest.fixture(scope="module")
def domain() -> ForeignDomain:
    return ForeignDomain()


@pytest.fixture(scope="module", params=["jsonapi", "ranges"])
def client(request: pytest.FixtureRequest, domain: ForeignDomain) -> Iterator[httpx.Client]:
    with serve(domain, request.param, KEY) as (server, _):
        headers = {"Authorization": f"Bearer {KEY}"}
        with httpx.Client(base_url=server.url, headers=headers) as c:
            c.shape = request.param  # type: ignore[attr-defined]
            yield c


def _walk(client: httpx.Client, path: str, params: dict[str, str]) -> tuple[list[dict], int]:
    """Every record of a listing as the shape pages it, and the total it reports."""
    records: list[dict] = []
    if client.shape == "jsonapi":  # type: ignore[attr-defined]
        response = client.get(path, params={**params, "page[size]": "7"})
        for _ in range(MAX_PAGES):
            body = response.json()
            records += body["data"]
            following = body["links"].get("next")
            if following is None:
                return records, body["meta"]["total"]
            assert following.startswith("/") and "page%5Bsize%5D=7" in following
            response = client.get(following)
    else:
        for _ in range(MAX_PAGES):
            response = client.get(path, params={**params, "skip": str(len(records))})
            unit, _, span = response.headers["Content-Range"].partition(" ")
            total = int(span.split("/")[1])
            assert unit == "items"
            if not response.json():
                assert span.startswith("*/")
                return records, total
            records += response.json()
    raise AssertionError("the listing did not end")


def _id_of(record: dict) -> str:
    return str(record["id"])


def test_each_listing_walks_to_the_truth_and_its_total(
    client: httpx.Client, domain: ForeignDomain
) -> None:
    shape = client.shape  # type: ignore[attr-defined]
    expected = truth(domain, shape)
    conversations, total = _walk(client, "/v1/conversations", {})
    assert total == len(conversations) == 140
    assert {_id_of(r) for r in conversations} == set(expected.conversations)
    leads, total = _walk(client, "/v1/leads", {})
    assert total == len(leads) == 61 and {_id_of(r) for r in leads} == set(expected.leads)


def test_the_incremental_filter_and_the_detail(client: httpx.Client, domain: ForeignDomain) -> None:
    shape = client.shape  # type: ignore[attr-defined]
    cut = sorted(c.updated_at for c in domain.conversations)[100]
    param = "filter[updated][gt]" if shape == "jsonapi" else "modified_since"
    newer, total = _walk(client, "/v1/conversations", {param: cut.isoformat()})
    strict = shape == "jsonapi"
    want = sum((c.updated_at > cut) if strict else (c.updated_at >= cut)
               for c in domain.conversations)  # fmt: skip
    assert len(newer) == total == want
    first = _id_of(newer[0])
    detail = client.get(f"/v1/conversations/{first}").json()
    if shape == "jsonapi":
        assert "included" not in detail, "messages only when asked"
        detail = client.get(f"/v1/conversations/{first}", params={"include": "messages"}).json()
        messages = detail["included"]
        assert all(m["attributes"]["role"] in ("user", "assistant") for m in messages)
    else:
        messages = detail["messages"]
    assert len(messages) == truth(domain, shape).conversations[first].message_count


def test_the_summary_counts_each_day(client: httpx.Client, domain: ForeignDomain) -> None:
    shape = client.shape  # type: ignore[attr-defined]
    day = date(2026, 11, 15)
    if shape == "jsonapi":
        response = client.get("/v1/analytics/summary", params={"from": "2026-11-15",
                                                               "to": "2026-11-15"})  # fmt: skip
        assert response.headers["content-type"].startswith("text/csv")
        (row,) = list(csv.DictReader(io.StringIO(response.text)))
        got = {k: int(row[names[0]]) for k, names in SUMMARY_KEYS.items()}
        assert row["day"] == "2026-11-15"
    else:
        ranged = client.get(
            "/v1/analytics/summary", params={"since": "2026-11-15", "until": "2026-11-15"}
        ).json()
        (row,) = ranged["days"]  # fmt: skip
        got = {k: row[names[1]] for k, names in SUMMARY_KEYS.items()}
        default = client.get("/v1/analytics/summary", params={"from": "2026-11-15"}).json()
        today = datetime.now(UTC).date()
        assert [d["day"] for d in default["days"]][-1] == today.isoformat()
        assert len(default["days"]) == 7, "from/to are not its parameters"
    assert got == day_counts(domain, day) and got["conversations"] > 0
    assert day_counts(domain, day + timedelta(days=400))["conversations"] == 0


def test_the_knobs_hide_records_and_count_all(domain: ForeignDomain) -> None:
    with serve(domain, "ranges", KEY) as (server, app):
        headers = {"Authorization": f"Bearer {KEY}"}
        with httpx.Client(base_url=server.url, headers=headers) as c:
            c.shape = "ranges"  # type: ignore[attr-defined]
            app.knobs.hidden["leads"] = 5
            leads, total = _walk(c, "/v1/leads", {})
            assert (len(leads), total) == (56, 61)
            app.knobs.hidden.clear()
            app.knobs.total_of_all = True
            cut = max(x.updated_at for x in domain.leads)
            newest, total = _walk(c, "/v1/leads", {"modified_since": cut.isoformat()})
            assert (len(newest), total) == (1, 61)
        unauthorised = httpx.get(f"{server.url}/v1/leads")
        assert unauthorised.status_code == 401
