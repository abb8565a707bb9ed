"""[[workspaces]] in convo.toml: typed, validated one line per problem, secrets from the
environment or files only; no table at all is one implicit workspace (issue 17)."""

from __future__ import annotations

from pathlib import Path

import pytest

from convo_analytics.config import (
    ApiKeyAuth,
    ConfigError,
    OAuthAuth,
    load_settings,
    load_workspaces,
    select_workspaces,
    serve_tokens,
)

TWO = """\
[service]
base_url = "https://api.example.com"

[[workspaces]]
name = "brand-a"
auth = { type = "api_key", key_env = "BRAND_A_KEY" }
rate_limit = "100/min"
webhook_secrets_env = "BRAND_A_HOOKS"

[[workspaces]]
name = "brand-b"
base_url = "https://other.example.com/"
auth = { type = "oauth", client_id = "convo-analytics", scopes = ["leads:read"] }
"""


def _load(tmp_path: Path, text: str, **env: str) -> list:  # type: ignore[type-arg]
    (tmp_path / "convo.toml").write_text(text)
    return load_workspaces(load_settings(tmp_path / "convo.toml", {}, env))


def test_two_workspaces_with_their_own_credentials(tmp_path: Path) -> None:
    a, b = _load(tmp_path, TWO, BRAND_A_KEY="sk_brand_a_123456", BRAND_A_HOOKS="s1,s2")
    assert (a.name, a.base_url, a.rate_limit) == ("brand-a", "https://api.example.com", "100/min")
    assert (
        isinstance(a.auth, ApiKeyAuth) and a.api_key and a.api_key.reveal() == "sk_brand_a_123456"
    )
    assert [s.reveal() for s in a.webhook_secrets] == ["s1", "s2"]
    assert "sk_brand_a" not in repr(a)
    assert isinstance(b.auth, OAuthAuth) and b.uses_oauth and b.auth.scopes == ("leads:read",)
    assert b.base_url == "https://other.example.com" and b.rate_limit == "600/min"
    assert [w.name for w in select_workspaces([a, b], ["brand-b"])] == ["brand-b"]
    with pytest.raises(ConfigError, match="no workspace named 'brand-c'"):
        select_workspaces([a, b], ["brand-c"])


def test_no_table_is_the_flat_settings_as_one_workspace(tmp_path: Path) -> None:
    (ws,) = _load(tmp_path, "", CONVO_API_KEY="sk_flat_1234567", CONVO_WEBHOOK_SECRET="hook")
    assert ws.implicit and ws.name == "default" and ws.api_key
    assert ws.api_key.reveal() == "sk_flat_1234567" and ws.webhook_secrets


@pytest.mark.parametrize(
    ("text", "expect"),
    [
        (TWO.replace('"brand-b"', '"brand-a"'), "name 'brand-a' is used twice"),
        ('[[workspaces]]\nname = "x y"\n', "#1 name"),
        ('[[workspaces]]\nname = "a"\nauth = { type = "magic" }\n', "#1 auth"),
        ('[[workspaces]]\nname = "a"\nbase_url = "ftp://x"\n', "#1 base_url"),
        ('[[workspaces]]\nname = "a"\nauth = { type = "api_key" }\n', "needs key_env or key_file"),
    ],
)
def test_bad_workspaces_are_one_line_each(tmp_path: Path, text: str, expect: str) -> None:
    with pytest.raises(ConfigError) as info:
        _load(tmp_path, text, BRAND_A_HOOKS="s")
    assert expect in str(info.value)
    assert all(line.strip() for line in str(info.value).splitlines())


def test_serve_tokens_are_read_only_when_asked_and_readers_need_no_credentials(
    tmp_path: Path,
) -> None:
    """serve_tokens_env/_file name a workspace's `convo serve` tokens; loading the config
    reads none of them, and readers (resolve_secrets=False) load it without the API key."""
    (tmp_path / "b.tokens").write_text("tok_b_1\ntok_b_2, tok_shared\n")
    text = TWO.replace(
        'webhook_secrets_env = "BRAND_A_HOOKS"',
        'webhook_secrets_env = "BRAND_A_HOOKS"\nserve_tokens_env = "BRAND_A_SERVE_TOKENS"',
    ).replace(
        'scopes = ["leads:read"] }', 'scopes = ["leads:read"] }\nserve_tokens_file = "b.tokens"'
    )
    (tmp_path / "convo.toml").write_text(text)
    settings = load_settings(tmp_path / "convo.toml", {}, {})
    a, b = load_workspaces(settings)  # loaded without the key: read when used
    with pytest.raises(ConfigError, match="BRAND_A_KEY"):
        assert a.api_key  # an extraction needs the key
    a, b = load_workspaces(settings, resolve_secrets=False)
    assert a.api_key is None and a.webhook_secrets == ()
    assert [t.reveal() for t in serve_tokens(b, settings.environ)] == [
        "tok_b_1", "tok_b_2", "tok_shared",
    ]  # fmt: skip
    with pytest.raises(ConfigError, match="BRAND_A_SERVE_TOKENS") as missing:
        serve_tokens(a, settings.environ)
    assert "tok_" not in str(missing.value)
    assert [t.reveal() for t in serve_tokens(a, {"BRAND_A_SERVE_TOKENS": "tok_a"})] == ["tok_a"]


def test_a_workspace_needs_only_its_own_secrets(tmp_path: Path) -> None:
    """Loading reads no secret: each is read when a command first uses it, so brand-b's
    command runs without brand-a's key, and a missing one is named when it is used
    (decision D-WORKSPACE-SECRETS)."""
    text = TWO.replace(
        'scopes = ["leads:read"] }',
        'scopes = ["leads:read"], client_secret_file = "b.secret" }\n'
        'webhook_secrets_file = "b.hooks"',
    )
    (tmp_path / "b.secret").write_text("ocs_brand_b_secret\n")
    (tmp_path / "b.hooks").write_text("whsec_b_1\nwhsec_b_2\n")
    a, b = _load(tmp_path, text)  # neither BRAND_A_KEY nor BRAND_A_HOOKS is set
    assert b.client_secret is not None and b.client_secret.reveal() == "ocs_brand_b_secret"
    assert [s.reveal() for s in b.webhook_secrets] == ["whsec_b_1", "whsec_b_2"]
    assert [w.name for w in select_workspaces([a, b], ["brand-b"])] == ["brand-b"]
    with pytest.raises(ConfigError, match=r"brand-a.*BRAND_A_KEY is not set"):
        assert a.api_key
    with pytest.raises(ConfigError, match=r"brand-a.*BRAND_A_HOOKS is not set"):
        assert a.webhook_secrets
    (tmp_path / "b.secret").unlink()
    _, b = _load(tmp_path, text)
    with pytest.raises(ConfigError, match=r"brand-b.*cannot read .*b\.secret"):
        assert b.client_secret
    # what a table must name is still checked as it is loaded, whichever command runs
    grant = text.replace('client_secret_file = "b.secret" }', 'grant = "client_credentials" }')
    with pytest.raises(ConfigError, match="client_credentials grant needs a client secret"):
        _load(tmp_path, grant)


def test_a_bad_table_is_named_by_its_line(tmp_path: Path) -> None:
    """The message names the line of the table at fault (its ``[[workspaces]]`` header),
    and a bad name says what a name may be."""
    text = '[service]\nbase_url = "https://x.example.com"\n\n[[workspaces]]\nname = "ok"\n\n'
    text += '[[workspaces]]\nname = "a b"\n'
    with pytest.raises(ConfigError) as info:
        _load(tmp_path, text)
    assert str(info.value).startswith(f"{tmp_path / 'convo.toml'}:7: [[workspaces]] #2 name:")
    assert "'a b' is not a workspace name" in str(info.value)
