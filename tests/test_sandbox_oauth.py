"""The sandbox as an OAuth 2.0 authorization server, over real HTTP (issue 17): code with
PKCE and consent, refresh with rotation and reuse detection, revocation, scopes, metadata,
client credentials, and an access token that sees only its granted workspace."""

from __future__ import annotations

import hashlib
import secrets
import time
from base64 import urlsafe_b64encode
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest

from conftest import ACME_KEY, GLOBEX_KEY, RunningSandbox
from convo_analytics.sandbox._oauth import OAuthSettings

CLIENT = "convo-analytics"
REDIRECT = "http://127.0.0.1:53682/callback"  # a loopback redirect on any port (RFC 8252)


def challenge(verifier: str) -> str:
    return urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()


def authorize(
    sandbox: RunningSandbox, *, scope: str = "conversations:read leads:read",
    workspace: str = "acme", verifier: str | None = None, **extra: str,
) -> httpx.Response:  # fmt: skip
    verifier = verifier or secrets.token_urlsafe(48)
    params = {
        "response_type": "code", "client_id": CLIENT, "redirect_uri": REDIRECT,
        "scope": scope, "state": "st-1", "code_challenge": challenge(verifier),
        "code_challenge_method": "S256", "workspace": workspace, **extra,
    }  # fmt: skip
    return httpx.get(f"{sandbox.url}/oauth/authorize", params=params, timeout=10)


def code_of(response: httpx.Response) -> str:
    assert response.status_code == 302, response.text
    query = parse_qs(urlsplit(response.headers["location"]).query)
    assert query["state"] == ["st-1"]
    return query["code"][0]


def token(sandbox: RunningSandbox, **form: str) -> httpx.Response:
    return httpx.post(f"{sandbox.url}/oauth/token", data=form, timeout=10)


def login(sandbox: RunningSandbox, **kwargs: Any) -> dict[str, Any]:
    verifier = secrets.token_urlsafe(48)
    code = code_of(authorize(sandbox, verifier=verifier, **kwargs))
    answer = token(
        sandbox, grant_type="authorization_code", code=code, redirect_uri=REDIRECT,
        client_id=CLIENT, code_verifier=verifier,
    )  # fmt: skip
    assert answer.status_code == 200, answer.text
    body: dict[str, Any] = answer.json()
    return body


@pytest.fixture
def oauth_sandbox(start_sandbox: Any) -> RunningSandbox:
    running: RunningSandbox = start_sandbox(
        conversations=30, oauth=OAuthSettings(auto_approve=True, access_token_seconds=2)
    )
    return running


def get(sandbox: RunningSandbox, path: str, access: str) -> httpx.Response:
    return httpx.get(
        f"{sandbox.url}{path}", headers={"Authorization": f"Bearer {access}"}, timeout=10
    )


def test_metadata_document(oauth_sandbox: RunningSandbox) -> None:
    meta = httpx.get(f"{oauth_sandbox.url}/.well-known/oauth-authorization-server").json()
    assert meta["issuer"] == oauth_sandbox.url
    assert meta["token_endpoint"] == f"{oauth_sandbox.url}/oauth/token"
    assert meta["code_challenge_methods_supported"] == ["S256"]
    assert "refresh_token" in meta["grant_types_supported"]


def test_code_with_pkce_gives_a_token_of_one_workspace(oauth_sandbox: RunningSandbox) -> None:
    body = login(oauth_sandbox)
    assert body["token_type"] == "Bearer" and body["expires_in"] == 2
    assert body["refresh_token"] and body["scope"] == "conversations:read leads:read"
    listed = get(oauth_sandbox, "/v1/conversations?limit=5", body["access_token"])
    assert listed.status_code == 200 and listed.json()["data"]
    own = listed.json()["data"][0]["id"]
    globex = httpx.get(
        f"{oauth_sandbox.url}/v1/conversations?limit=1",
        headers={"Authorization": f"Bearer {GLOBEX_KEY}"},
    ).json()["data"][0]["id"]
    assert get(oauth_sandbox, f"/v1/conversations/{own}", body["access_token"]).status_code == 200
    other = get(oauth_sandbox, f"/v1/conversations/{globex}", body["access_token"])
    assert other.status_code == 404, "another workspace's record is not there for this token"


def test_a_missing_scope_answers_403_with_the_error_body(oauth_sandbox: RunningSandbox) -> None:
    body = login(oauth_sandbox, scope="leads:read")
    denied = get(oauth_sandbox, "/v1/analytics/summary?from=2026-11-01&to=2026-11-02",
                 body["access_token"])  # fmt: skip
    assert denied.status_code == 403
    assert denied.json()["error"]["code"] == "insufficient_scope"
    assert 'scope="analytics:read"' in denied.headers["www-authenticate"]
    assert get(oauth_sandbox, "/v1/leads", body["access_token"]).status_code == 200


def test_pkce_is_required_and_checked(oauth_sandbox: RunningSandbox) -> None:
    params = {"response_type": "code", "client_id": CLIENT, "redirect_uri": REDIRECT,
              "scope": "leads:read", "state": "st-1"}  # fmt: skip
    plain = httpx.get(f"{oauth_sandbox.url}/oauth/authorize", params=params)
    assert plain.status_code == 302 and "error=invalid_request" in plain.headers["location"]
    code = code_of(authorize(oauth_sandbox, verifier="v" * 50))
    wrong = token(oauth_sandbox, grant_type="authorization_code", code=code,
                  redirect_uri=REDIRECT, client_id=CLIENT, code_verifier="w" * 50)  # fmt: skip
    assert wrong.status_code == 400 and wrong.json()["error"] == "invalid_grant"


def test_refresh_rotates_and_a_reused_refresh_token_revokes_the_family(
    oauth_sandbox: RunningSandbox,
) -> None:
    first = login(oauth_sandbox)
    time.sleep(2.1)
    assert get(oauth_sandbox, "/v1/leads", first["access_token"]).status_code == 401, "expired"
    second = token(oauth_sandbox, grant_type="refresh_token",
                   refresh_token=first["refresh_token"], client_id=CLIENT).json()  # fmt: skip
    assert second["refresh_token"] != first["refresh_token"], "rotated"
    assert get(oauth_sandbox, "/v1/leads", second["access_token"]).status_code == 200
    reused = token(oauth_sandbox, grant_type="refresh_token",
                   refresh_token=first["refresh_token"], client_id=CLIENT)  # fmt: skip
    assert reused.status_code == 400 and reused.json()["error"] == "invalid_grant"
    assert get(oauth_sandbox, "/v1/leads", second["access_token"]).status_code == 401
    third = token(oauth_sandbox, grant_type="refresh_token",
                  refresh_token=second["refresh_token"], client_id=CLIENT)  # fmt: skip
    assert third.status_code == 400, "the whole family is revoked"


def test_revocation_ends_the_grant(oauth_sandbox: RunningSandbox) -> None:
    body = login(oauth_sandbox)
    answer = httpx.post(f"{oauth_sandbox.url}/oauth/revoke",
                        data={"token": body["refresh_token"], "client_id": CLIENT})  # fmt: skip
    assert answer.status_code == 200
    assert get(oauth_sandbox, "/v1/leads", body["access_token"]).status_code == 401
    again = token(oauth_sandbox, grant_type="refresh_token",
                  refresh_token=body["refresh_token"], client_id=CLIENT)  # fmt: skip
    assert again.status_code == 400


def test_client_credentials_for_a_client_bound_to_one_workspace(
    oauth_sandbox: RunningSandbox,
) -> None:
    client = next(c for c in oauth_sandbox.sandbox.oauth.store.clients.values()
                  if c.client_id == "svc-globex")  # fmt: skip
    assert client.client_secret
    answer = httpx.post(f"{oauth_sandbox.url}/oauth/token", data={
        "grant_type": "client_credentials", "scope": "conversations:read"},
        auth=(client.client_id, client.client_secret))  # fmt: skip
    assert answer.status_code == 200, answer.text
    access = answer.json()["access_token"]
    listed = get(oauth_sandbox, "/v1/conversations?limit=1", access).json()["data"]
    globex = {"Authorization": f"Bearer {GLOBEX_KEY}"}
    expected = httpx.get(f"{oauth_sandbox.url}/v1/conversations?limit=1", headers=globex)
    expected = expected.json()["data"]
    assert listed[0]["id"] == expected[0]["id"]
    bad = httpx.post(f"{oauth_sandbox.url}/oauth/token",
                     data={"grant_type": "client_credentials"},
                     auth=(client.client_id, "wrong-secret"))  # fmt: skip
    assert bad.status_code == 401 and bad.json()["error"] == "invalid_client"


def test_the_consent_step_needs_the_workspace_admin(start_sandbox: Any) -> None:
    running: RunningSandbox = start_sandbox(conversations=5)
    page = authorize(running)
    assert page.status_code == 200 and "Approve" in page.text and "acme" in page.text
    form = {k: v[0] for k, v in parse_qs(urlsplit(str(page.request.url)).query).items()}
    form.pop("workspace")
    refused = httpx.post(f"{running.url}/oauth/authorize", data={
        **form, "workspace": "acme", "admin_key": GLOBEX_KEY, "decision": "approve"})  # fmt: skip
    assert refused.status_code == 403
    denied = httpx.post(f"{running.url}/oauth/authorize", data={
        **form, "workspace": "acme", "admin_key": "", "decision": "deny"})  # fmt: skip
    assert denied.status_code == 302 and "error=access_denied" in denied.headers["location"]
    approved = httpx.post(f"{running.url}/oauth/authorize", data={
        **form, "workspace": "acme", "admin_key": ACME_KEY, "decision": "approve"})  # fmt: skip
    assert "code=" in approved.headers["location"]


def test_an_unregistered_redirect_is_never_redirected_to(oauth_sandbox: RunningSandbox) -> None:
    answer = authorize(oauth_sandbox, redirect_uri="https://attacker.example.invalid/cb")
    assert answer.status_code == 400 and "location" not in answer.headers


MALFORMED_REDIRECTS = {
    "backslash": "http://127.0.0.1\\@evil.example/callback",
    "userinfo": "http://user:pw@127.0.0.1/callback",
    "scheme": "ftp://127.0.0.1/callback",
    "javascript": "javascript:alert(1)",
    "unparsable": "http://[::1/callback",
    "bad-port": "http://127.0.0.1:99999/callback",
    "fragment": "http://127.0.0.1/callback#top",
    "space": "http://127.0.0.1/call back",
}


@pytest.mark.parametrize("uri", MALFORMED_REDIRECTS.values(), ids=list(MALFORMED_REDIRECTS))
def test_a_malformed_redirect_uri_is_400_invalid_request(
    oauth_sandbox: RunningSandbox, uri: str
) -> None:
    """RFC 6749, 4.1.2.1: never redirected to, never a 500; the error body, not a page."""
    for answer in (
        authorize(oauth_sandbox, redirect_uri=uri),
        httpx.post(f"{oauth_sandbox.url}/oauth/authorize", data={
            "response_type": "code", "client_id": CLIENT, "redirect_uri": uri, "state": "s",
            "workspace": "acme", "admin_key": ACME_KEY, "decision": "approve"}),
        token(oauth_sandbox, grant_type="authorization_code", code="c", redirect_uri=uri,
              client_id=CLIENT, code_verifier="v" * 50),
    ):  # fmt: skip
        assert answer.status_code == 400, (answer.request.method, answer.text)
        assert "location" not in answer.headers
        assert answer.json()["error"] == "invalid_request", answer.text
        assert "redirect_uri" in answer.json()["error_description"]


def test_a_code_presented_twice_revokes_what_its_first_exchange_issued(
    start_sandbox: Any,
) -> None:
    """RFC 6749, 4.1.2: the second exchange is refused, and the tokens of the first (access
    and refresh) are revoked: someone else held the code."""
    running: RunningSandbox = start_sandbox(
        conversations=5, oauth=OAuthSettings(auto_approve=True, access_token_seconds=3600)
    )
    verifier = secrets.token_urlsafe(48)
    code = code_of(authorize(running, verifier=verifier))
    form = {"grant_type": "authorization_code", "code": code, "redirect_uri": REDIRECT,
            "client_id": CLIENT, "code_verifier": verifier}  # fmt: skip
    first = token(running, **form).json()
    assert get(running, "/v1/leads", first["access_token"]).status_code == 200
    second = token(running, **form)
    assert second.status_code == 400 and second.json()["error"] == "invalid_grant"
    assert get(running, "/v1/leads", first["access_token"]).status_code == 401
    refreshed = token(running, grant_type="refresh_token",
                      refresh_token=first["refresh_token"], client_id=CLIENT)  # fmt: skip
    assert refreshed.status_code == 400 and refreshed.json()["error"] == "invalid_grant"
    other = login(running)  # another grant of the same client lives on
    assert get(running, "/v1/leads", other["access_token"]).status_code == 200
