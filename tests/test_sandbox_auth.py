"""Authentication, workspace isolation and the error body, over real HTTP."""

from __future__ import annotations

import httpx

from conftest import ACME_KEY_2, GLOBEX_KEY, RunningSandbox


def _assert_error_body(r: httpx.Response, status: int, code: str | None = None) -> None:
    assert r.status_code == status
    assert r.headers["content-type"].startswith("application/json")
    body = r.json()
    assert set(body) == {"error"}
    assert {"code", "message", "requestId"} <= set(body["error"])
    assert body["error"]["requestId"] == r.headers["x-request-id"]
    if code:
        assert body["error"]["code"] == code


def test_missing_and_invalid_tokens_get_401(shared_sandbox: RunningSandbox) -> None:
    url = shared_sandbox.url
    r = httpx.get(f"{url}/v1/conversations")
    _assert_error_body(r, 401, "unauthorized")
    assert r.headers["www-authenticate"].startswith("Bearer")
    r = httpx.get(f"{url}/v1/leads", headers={"Authorization": "Bearer not-a-key"})
    _assert_error_body(r, 401, "invalid_api_key")
    r = httpx.get(f"{url}/v1/leads", headers={"Authorization": "Basic dXNlcjpwdw=="})
    _assert_error_body(r, 401)


def test_a_key_sees_only_its_own_workspace(shared_sandbox: RunningSandbox) -> None:
    with shared_sandbox.client() as acme, shared_sandbox.client(GLOBEX_KEY) as globex:
        acme_page = acme.get("/v1/conversations", params={"limit": 5}).json()["data"]
        globex_page = globex.get("/v1/conversations", params={"limit": 5}).json()["data"]
        assert {c["workspaceId"] for c in acme_page} == {"ws_acme"}
        assert {c["workspaceId"] for c in globex_page} == {"ws_globex"}
        foreign = acme_page[0]["id"]
        r = globex.get(f"/v1/conversations/{foreign}")
        _assert_error_body(r, 404, "not_found")
        assert "messages" not in r.text and acme_page[0]["externalUserId"] not in r.text
        assert acme.get(f"/v1/conversations/{foreign}").status_code == 200


def test_two_keys_of_one_workspace_see_the_same_data(shared_sandbox: RunningSandbox) -> None:
    with shared_sandbox.client() as one, shared_sandbox.client(ACME_KEY_2) as two:
        a = one.get("/v1/conversations", params={"limit": 10}).json()["data"]
        b = two.get("/v1/conversations", params={"limit": 10}).json()["data"]
    assert [c["id"] for c in a] == [c["id"] for c in b]


def test_unknown_routes_and_bad_queries_use_the_error_body(shared_sandbox: RunningSandbox) -> None:
    with shared_sandbox.client() as c:
        _assert_error_body(c.get("/v1/nothing-here"), 404)
        _assert_error_body(c.get("/v1/conversations", params={"limit": 0}), 400)
        _assert_error_body(c.get("/v1/conversations", params={"limit": 201}), 400)
        _assert_error_body(c.get("/v1/conversations", params={"updatedSince": "yesterday"}), 400)
        _assert_error_body(
            c.get("/v1/conversations", params={"cursor": "forged"}), 400, "invalid_cursor"
        )
        _assert_error_body(
            c.get("/v1/analytics/summary", params={"from": "2026-11-02", "to": "2026-11-01"}), 400
        )
        _assert_error_body(
            c.get(
                "/v1/analytics/summary",
                params={"from": "2026-11-01", "to": "2026-11-02", "tz": "Mars/Olympus"},
            ),
            400,
        )
        _assert_error_body(
            c.post(
                "/v1/webhooks", content=b"{not json", headers={"content-type": "application/json"}
            ),
            400,
        )
        _assert_error_body(c.post("/v1/webhooks", json={"url": "http://example.com/hook"}), 422)
        _assert_error_body(
            c.post("/v1/webhooks", json={"url": "https://x.example/h", "events": ["nope.event"]}),
            422,
        )


def test_a_cursor_from_another_workspace_is_a_400(shared_sandbox: RunningSandbox) -> None:
    with shared_sandbox.client() as acme, shared_sandbox.client(GLOBEX_KEY) as globex:
        for path in ("/v1/conversations", "/v1/leads"):
            page = acme.get(path, params={"limit": 2, "status": "any"} if "leads" in path
                            else {"limit": 2}).json()  # fmt: skip
            assert page["hasMore"], path
            cursor = page["nextCursor"]
            r = globex.get(path, params={"cursor": cursor})
            _assert_error_body(r, 400, "invalid_cursor")
            assert "another workspace" in r.json()["error"]["message"]
            assert acme.get(path, params={"cursor": cursor}).status_code == 200


def test_a_cursor_is_good_for_every_key_of_its_workspace(shared_sandbox: RunningSandbox) -> None:
    with shared_sandbox.client() as one, shared_sandbox.client(ACME_KEY_2) as two:
        first = one.get("/v1/conversations", params={"limit": 3}).json()
        second = two.get("/v1/conversations", params={"cursor": first["nextCursor"]})
    assert second.status_code == 200
    assert {c["workspaceId"] for c in second.json()["data"]} == {"ws_acme"}


def test_health_answers_anyone_but_shows_workspaces_only_to_the_admin(
    shared_sandbox: RunningSandbox,
) -> None:
    url = shared_sandbox.url + "/_sandbox/health"
    for headers in ({}, {"Authorization": f"Bearer {ACME_KEY_2}"}, {"Authorization": "Bearer x"}):
        r = httpx.get(url, headers=headers)
        assert r.status_code == 200 and r.json() == {"status": "ok"}
        assert "acme" not in r.text and "globex" not in r.text
    admin = {"Authorization": f"Bearer {shared_sandbox.sandbox.admin_token}"}
    details = httpx.get(url, headers=admin).json()
    assert set(details["workspaces"]) == {"acme", "globex"}
    assert details["workspaces"]["acme"] > 0 and "pendingDeliveries" in details
