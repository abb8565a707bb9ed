"""No secret in a URL setting (issue 24): a password in a URL's user info or query (the
lake's catalog URI first, the base URL, a workspace's base URL) is refused with one line
naming the setting, where it was set and where the password goes; what a URL may keep is
shown with every query value masked; no message quotes a query value."""

from __future__ import annotations

import os
from pathlib import Path
from urllib.parse import quote

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from convo_analytics.config import ConfigError, load_settings, load_workspaces
from convo_analytics.lake import LakeConfig, LakeUnavailable
from workspace_support import convo

PG = "postgresql+psycopg2://convo@db.example.com:5432/lake"
PW = "pw-Never-Shown-5e1f"
#: A password where a URL can carry one, and how the refusal names the place.
IN_URLS = {
    "userinfo": (f"postgresql+psycopg2://convo:{PW}@db.example.com/lake", "user info"),
    "password": (f"{PG}?password={PW}", "'password'"),
    "sslpassword": (f"{PG}?sslmode=require&sslpassword={PW}", "'sslpassword'"),
    "pwd": (f"{PG}?PWD={PW}", "'PWD'"),
    "dsn": (f"{PG}?dsn={quote(f'host=db user=convo password={PW}')}", "'dsn'"),
    "dsn-unquoted": (f"{PG}?dsn=host=db%20password={PW}", "'dsn'"),
    "client_secret": (f"{PG}?client_secret={PW}", "'client_secret'"),
    "nested-url": (f"{PG}?target={quote(f'postgresql://u:{PW}@h/d')}", "'target'"),
}


def load(tmp_path: Path, env: dict[str, str] | None = None, toml: str | None = None,
         flags: dict[str, object] | None = None) -> object:  # fmt: skip
    config = None
    if toml is not None:
        config = tmp_path / "convo.toml"
        config.write_text(toml)
    return load_settings(config, flags or {}, env or {}, cwd=tmp_path)


@pytest.mark.parametrize("name", list(IN_URLS))
def test_a_password_in_the_catalog_uri_is_refused_with_where_it_goes(
    tmp_path: Path, name: str
) -> None:
    uri, says = IN_URLS[name]
    with pytest.raises(ConfigError) as refused:
        load(tmp_path, {"CONVO_LAKE_CATALOG_URI": uri})
    message = str(refused.value)
    assert PW not in message and quote(PW) not in message
    assert "lake.catalog_uri ($CONVO_LAKE_CATALOG_URI)" in message and says in message
    assert "CONVO_LAKE_CATALOG_PASSWORD" in message and "lake.catalog_password_file" in message
    assert "PGPASSWORD" in message and "PGPASSFILE" in message
    assert "\n" not in message


def test_the_refusal_names_the_file_line_and_the_flag(tmp_path: Path) -> None:
    toml = f'[service]\nrate_limit = "none"\n\n[lake]\ncatalog_uri = "{PG}?password={PW}"\n'
    (tmp_path / "file").mkdir()
    with pytest.raises(ConfigError, match=r"convo\.toml:5") as refused:
        load(tmp_path / "file", toml=toml)
    assert PW not in str(refused.value)
    with pytest.raises(ConfigError, match="command-line flag") as refused:
        load(tmp_path, flags={"service.base_url": f"https://api.example.com/?api_key={PW}"})
    assert PW not in str(refused.value) and "CONVO_API_KEY" in str(refused.value)
    with pytest.raises(ConfigError, match="user info") as refused:
        load(tmp_path, {"CONVO_BASE_URL": f"https://convo:{PW}@api.example.com"})
    assert PW not in str(refused.value)


def test_a_workspace_base_url_with_a_key_in_it_is_refused(tmp_path: Path) -> None:
    toml = (f'[[workspaces]]\nname = "acme"\nbase_url = "https://api.example.com/?token={PW}"\n'
            'auth = { type = "api_key", key_env = "K" }\n')  # fmt: skip
    with pytest.raises(ConfigError, match="base_url") as refused:  # refused as it is read
        load_workspaces(load(tmp_path, {"K": "k"}, toml=toml))  # type: ignore[arg-type]
    assert PW not in str(refused.value) and "'token'" in str(refused.value)


def test_a_value_that_fails_its_format_is_quoted_masked(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as refused:
        load(tmp_path, {"CONVO_BASE_URL": f"ftp://api.example.com/?x={PW}"})
    assert "http:// or https://" in str(refused.value) and PW not in str(refused.value)


def test_config_show_masks_every_query_value(tmp_path: Path) -> None:
    kept = "app-name-7f3e"
    env = {"CONVO_LAKE_CATALOG_URI": f"{PG}?sslmode=verify-full&application_name={kept}",
           "PATH": os.environ["PATH"]}  # fmt: skip
    shown = convo(tmp_path, "config", "show", "--json", **env)
    assert shown.returncode == 0, shown.stderr
    value = orjson.loads(shown.stdout)["settings"]["lake.catalog_uri"]["value"]
    assert value == f"{PG}?sslmode=***&application_name=***"
    table = convo(tmp_path, "config", "show", **env)
    assert table.returncode == 0 and kept not in table.stdout
    refused = convo(tmp_path, "config", "show",
                    CONVO_LAKE_CATALOG_URI=f"{PG}?sslpassword={PW}")  # fmt: skip
    lines = refused.stderr.strip().splitlines()
    assert refused.returncode == 2 and len(lines) == 1 and PW not in refused.stderr
    assert "PGPASSWORD" in lines[0] and refused.stdout == ""


def test_the_lake_error_line_never_quotes_a_query_value() -> None:
    kept = "app-name-9c2d"
    unreachable = LakeConfig(f"postgresql+psycopg2://convo@127.0.0.1:9/none?application_name="
                             f"{kept}&connect_timeout=5", "file:///nowhere")  # fmt: skip
    with pytest.raises(LakeUnavailable) as refused:
        unreachable.open_catalog()
    message = str(refused.value)
    assert "cannot be reached" in message and kept not in message, message
    assert "application_name=***" in message


# -- property: whatever the key's spelling and the value, the password never shows -------

SECRET_KEYS = ["password", "passwd", "pwd", "sslpassword", "secret", "token", "api_key",
               "apikey", "access_token", "client_secret", "api-key", "auth_token"]  # fmt: skip
OTHER_KEYS = ["sslmode", "application_name", "connect_timeout", "target_session_attrs"]
VALUES = st.text(
    alphabet=st.characters(min_codepoint=33, max_codepoint=126, exclude_characters="&#%+"),
    min_size=4, max_size=24,
).map(lambda tail: f"Zq{tail}")  # fmt: skip
KEYS = st.sampled_from(SECRET_KEYS).flatmap(
    lambda key: st.sampled_from([key, key.upper(), key.title()])
)


@pytest.fixture(scope="module")
def empty(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("empty")


@settings(max_examples=80, deadline=None)
@given(key=KEYS, value=VALUES, before=st.sampled_from(OTHER_KEYS), form=st.integers(0, 2))
def test_no_password_like_key_reaches_a_message(
    empty: Path, key: str, value: str, before: str, form: int
) -> None:
    query = quote(value, safe="")
    uri = [f"{PG}?{before}=x&{key}={query}",
           f"{PG}?{key}={query}&{before}=y",
           f"{PG}?dsn={quote(f'host=db {key}={value}', safe='')}"][form]  # fmt: skip
    if form == 2 and key.lower().replace("-", "_") not in ("password", "passwd", "pwd"):
        uri = f"{PG}?dsn=host%3Ddb&{key}={query}"
    with pytest.raises(ConfigError) as refused:
        load_settings(None, {}, {"CONVO_LAKE_CATALOG_URI": uri}, cwd=empty)
    message = str(refused.value)
    assert value not in message and query not in message
    assert "lake.catalog_uri" in message and "CONVO_LAKE_CATALOG_PASSWORD" in message


@settings(max_examples=60, deadline=None)
@given(key=st.sampled_from(OTHER_KEYS), value=VALUES, secret=KEYS)
def test_config_show_never_shows_a_query_value(
    empty: Path, key: str, value: str, secret: str
) -> None:
    uri = f"{PG}?{key}={quote(value, safe='')}"
    s = load_settings(None, {}, {"CONVO_LAKE_CATALOG_URI": uri}, cwd=empty)
    shown = orjson.dumps(s.display()).decode()
    assert value not in shown and quote(value, safe="") not in shown
    assert f"{key}=***" in shown
    with pytest.raises(ConfigError) as refused:
        load_settings(None, {}, {"CONVO_LAKE_CATALOG_URI": f"{uri}&{secret}={value}"},
                      cwd=empty)  # fmt: skip
    assert value not in str(refused.value)
