"""Tests for convo_analytics.config: registry, precedence, secrets, errors, docs."""

from __future__ import annotations

import copy
import json
import pickle
import re
import tomllib
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from pydantic import Field, create_model

from convo_analytics.config import (
    MASK,
    REGISTRY,
    ConfigError,
    Kind,
    Registry,
    Secret,
    Section,
    Setting,
    Settings,
    Source,
    find_config_file,
    generic_env_var,
    load_settings,
)
from convo_analytics.config import setting as declare
from convo_analytics.config._model import Bool, Int, SecretText
from convo_analytics.config._sections import ExtractSettings
from convo_analytics.errors import UserError

ROOT = Path(__file__).resolve().parents[1]
SECRET_SETTINGS = [s for s in REGISTRY.settings if s.is_secret]
PLAIN_SETTINGS = [s for s in REGISTRY.settings if not s.is_secret]


@pytest.fixture(scope="module")
def empty_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A directory without convo.toml, shared by the hypothesis tests."""
    return tmp_path_factory.mktemp("empty")


def load(
    tmp_path: Path,
    toml: str | None = None,
    env: Mapping[str, str] | None = None,
    flags: Mapping[str, object] | None = None,
) -> Settings:
    """Load settings with an isolated environment and an empty working directory.

    The TOML text, if any, is written to ``conf_file(tmp_path)`` and passed as --config.
    """
    config = None
    if toml is not None:
        config = conf_file(tmp_path)
        config.parent.mkdir(exist_ok=True)
        config.write_text(toml, encoding="utf-8")
    work = tmp_path / "work"
    work.mkdir(exist_ok=True)
    return load_settings(config, flags or {}, dict(env or {}), cwd=work)


def conf_file(tmp_path: Path) -> Path:
    return tmp_path / "conf" / "convo.toml"


def config_error(tmp_path: Path, toml: str | None = None, **kwargs: object) -> str:
    with pytest.raises(ConfigError) as info:
        load(tmp_path, toml, **kwargs)  # type: ignore[arg-type]
    assert isinstance(info.value, UserError)
    return str(info.value)


# -- defaults and registry ---------------------------------------------------------------


def test_defaults_without_any_input(tmp_path: Path) -> None:
    s = load(tmp_path)
    assert s.config_path is None
    assert s.get_str("service.base_url") == "http://127.0.0.1:8787"
    assert s.get_float("service.timeout_seconds") == 30.0
    assert s.get_path("warehouse.path") == Path("data/warehouse.duckdb")
    assert s.get_int("sandbox.port") == 8787
    assert s.get_path("sandbox.webhook_archive") is None
    assert s.get_secret("service.api_key") is None
    assert s.get_secret_list("sandbox.workspaces") == ()
    assert all(s.source(x.name) is Source.DEFAULT for x in REGISTRY.settings)


def test_required_settings_are_registered() -> None:
    expected = {
        "service.base_url": ("CONVO_BASE_URL", Kind.STR),
        "service.api_key": ("CONVO_API_KEY", Kind.SECRET),
        "service.api_key_file": ("CONVO_API_KEY_FILE", Kind.PATH),
        "service.rate_limit": ("CONVO_RATE_LIMIT", Kind.STR),
        "service.timeout_seconds": ("CONVO_TIMEOUT_SECONDS", Kind.FLOAT),
        "webhooks.secret": ("CONVO_WEBHOOK_SECRET", Kind.SECRET),
        "webhooks.secret_file": ("CONVO_WEBHOOK_SECRET_FILE", Kind.PATH),
        "webhooks.archive_dir": ("CONVO_WEBHOOK_ARCHIVE_DIR", Kind.PATH),
        "warehouse.path": ("CONVO_DB", Kind.PATH),
        "sandbox.host": ("CONVO_SANDBOX_HOST", Kind.STR),
        "sandbox.port": ("CONVO_SANDBOX_PORT", Kind.INT),
        "sandbox.workspaces": ("CONVO_SANDBOX_WORKSPACES", Kind.LIST),
        "sandbox.fault_slow_seconds": ("CONVO_SANDBOX_FAULT_SLOW_SECONDS", Kind.FLOAT),
    }
    for name, (env, kind) in expected.items():
        setting = REGISTRY.get(name)
        assert setting.env_var == env
        assert setting.kind is kind
        assert generic_env_var(name) in setting.env_vars
    assert REGISTRY.get("sandbox.workspaces").is_secret
    assert REGISTRY.file_setting_for("service.api_key") == REGISTRY.get("service.api_key_file")


def _model(section: str = "x", /, **fields: Any) -> type[Settings]:
    """The Settings model with one more section holding ``fields``: declaring a setting is
    adding a field (its type, default, description and env alias), nothing else."""
    model = create_model(f"{section.title()}Settings", __base__=Section, **fields)
    extra = {section: (model, Field(default_factory=model))}
    return create_model("Custom", __base__=Settings, **extra)  # type: ignore[call-overload,no-any-return]


@pytest.mark.parametrize(
    "make",
    [
        # (two settings of one name cannot be declared: a class has one field of a name)
        lambda: _model(b=(Int, declare(1, "h", env="CONVO_X")),
                       c=(Int, declare(1, "h", env="CONVO_X"))),
        lambda: _model("a_b", c=(Int, declare(1, "h"))),  # CONVO_A_B_C would be a.b_c's too
        lambda: _model(b=(SecretText, declare("x", "h"))),  # secret with a default
        lambda: _model(b=(Int, declare("abc", "h"))),  # invalid default
        lambda: _model(b=(Int, declare(5, "h", le=3))),  # default out of range
        lambda: create_model("Custom", __base__=Settings, b=(Int, declare(1, "h"))),  # no section
        lambda: _model(b=(SecretText, declare(None, "h")), b_file=(Int, declare(1, "h"))),
        lambda: _model(b=(Int, declare(1, "h", env="CONVO_CONFIG"))),
    ],
)  # fmt: skip
def test_registry_rejects_bad_definitions(make: Callable[[], type[Settings]]) -> None:
    with pytest.raises(ValueError):
        Registry(make())


def test_registering_a_setting_is_data_only(tmp_path: Path) -> None:
    class Extract(ExtractSettings):
        batch_size: Int = declare(500, "h", ge=1)
        dry_run: Bool = declare(False, "h")

    class Custom(Settings):
        extract: Extract = Field(default_factory=Extract)

    (tmp_path / "c.toml").write_text("[extract]\nbatch_size = 50\n")
    s = load_settings(tmp_path / "c.toml", {}, {"CONVO_EXTRACT_DRY_RUN": "yes"}, model=Custom)
    assert s.get_int("extract.batch_size") == 50
    assert s.get_bool("extract.dry_run") is True
    assert s.extract.batch_size == 50
    assert s.source("extract.dry_run") is Source.ENV


# -- precedence --------------------------------------------------------------------------


def test_precedence_flag_over_env_over_file_over_default(tmp_path: Path) -> None:
    toml = '[sandbox]\nport = 1111\n[warehouse]\npath = "file.duckdb"\n'
    env = {"CONVO_SANDBOX_PORT": "2222", "CONVO_DB": "env.duckdb"}
    flags = {"sandbox.port": 3333, "warehouse.path": Path("flag.duckdb")}

    s = load(tmp_path, toml, env, flags)
    assert s.get_int("sandbox.port") == 3333
    assert s.source("sandbox.port") is Source.FLAG
    assert s.get_path("warehouse.path") == Path("flag.duckdb")

    s = load(tmp_path, toml, env, {"sandbox.port": None, "warehouse.path": None})
    assert s.get_int("sandbox.port") == 2222
    assert s.source("sandbox.port") is Source.ENV
    assert s.resolved("warehouse.path").origin == "$CONVO_DB"

    s = load(tmp_path, toml)
    assert s.get_int("sandbox.port") == 1111
    assert s.source("sandbox.port") is Source.FILE
    assert s.get_path("warehouse.path") == tmp_path / "conf" / "file.duckdb"
    assert s.resolved("sandbox.port").origin == f"{conf_file(tmp_path)}:2"

    s = load(tmp_path)
    assert s.get_int("sandbox.port") == 8787
    assert s.source("sandbox.port") is Source.DEFAULT


def test_generic_env_name_and_alias_both_work(tmp_path: Path) -> None:
    assert load(tmp_path, env={"CONVO_DB": "a.db"}).get_path("warehouse.path") == Path("a.db")
    s = load(tmp_path, env={"CONVO_WAREHOUSE_PATH": "b.db"})
    assert s.get_path("warehouse.path") == Path("b.db")
    same = {"CONVO_DB": "c.db", "CONVO_WAREHOUSE_PATH": "c.db"}
    assert load(tmp_path, env=same).get_path("warehouse.path") == Path("c.db")
    message = config_error(tmp_path, env={"CONVO_DB": "x.db", "CONVO_WAREHOUSE_PATH": "y.db"})
    assert "CONVO_DB" in message and "CONVO_WAREHOUSE_PATH" in message


def test_empty_env_var_is_ignored(tmp_path: Path) -> None:
    s = load(tmp_path, "[sandbox]\nport = 1234\n", {"CONVO_SANDBOX_PORT": ""})
    assert s.get_int("sandbox.port") == 1234


@pytest.mark.parametrize(
    ("text", "expected"),
    [("true", True), ("1", True), ("Yes", True), ("off", False), ("0", False)],
)
def test_bool_parsing(tmp_path: Path, text: str, expected: bool) -> None:
    model = _model(flag=(Bool, declare(False, "h")))
    s = load_settings(None, {}, {"CONVO_X_FLAG": text}, cwd=tmp_path, model=model)
    assert s.get_bool("x.flag") is expected


def test_flag_strings_are_parsed_and_validated(tmp_path: Path) -> None:
    assert load(tmp_path, flags={"sandbox.port": "4000"}).get_int("sandbox.port") == 4000
    message = config_error(tmp_path, flags={"sandbox.fault_drop_rate": 1.5})
    assert "sandbox.fault_drop_rate" in message and "between 0 and 1" in message


def test_overrides_must_name_known_settings(tmp_path: Path) -> None:
    with pytest.raises(KeyError):
        load(tmp_path, flags={"sandbox.nope": 1})


def test_a_secret_flag_wins_and_stays_masked(tmp_path: Path) -> None:
    settings = load(tmp_path, env={"CONVO_API_KEY": "sk-env"}, flags={"service.api_key": "sk-flag"})
    secret = settings.get_secret("service.api_key")
    assert secret is not None and secret.reveal() == "sk-flag"
    assert settings.source("service.api_key").value == "flag"
    assert "sk-flag" not in repr(settings.display())


# -- config file discovery ---------------------------------------------------------------


def test_config_discovery_order(tmp_path: Path) -> None:
    assert find_config_file(None, {}, cwd=tmp_path) is None
    local = tmp_path / "convo.toml"
    local.write_text("")
    found = find_config_file(None, {}, cwd=tmp_path)
    assert found is not None and found.path == local
    other = tmp_path / "other.toml"
    other.write_text("")
    found = find_config_file(None, {"CONVO_CONFIG": str(other)}, cwd=tmp_path)
    assert found is not None and (found.path, found.reason) == (other, "$CONVO_CONFIG")
    third = tmp_path / "third.toml"
    third.write_text("")
    found = find_config_file(third, {"CONVO_CONFIG": str(other)}, cwd=tmp_path)
    assert found is not None and (found.path, found.reason) == (third, "--config")


@pytest.mark.parametrize("via", ["flag", "env"])
def test_explicit_missing_config_file_is_an_error(tmp_path: Path, via: str) -> None:
    missing = tmp_path / "missing.toml"
    with pytest.raises(ConfigError, match=r"missing\.toml") as info:
        if via == "flag":
            load_settings(missing, {}, {}, cwd=tmp_path)
        else:
            load_settings(None, {}, {"CONVO_CONFIG": str(missing)}, cwd=tmp_path)
    assert ("--config" if via == "flag" else "CONVO_CONFIG") in str(info.value)


# -- file errors -------------------------------------------------------------------------


def test_unknown_key_names_file_line_key_and_suggestion(tmp_path: Path) -> None:
    message = config_error(tmp_path, "[sandbox]\nseed = 1\nprot = 9000\n")
    assert f"{conf_file(tmp_path)}:3" in message
    assert "prot" in message and "did you mean 'port'" in message


def test_unknown_section(tmp_path: Path) -> None:
    message = config_error(tmp_path, "[sandboxx]\nport = 1\n")
    assert "convo.toml:1" in message and "unknown section [sandboxx]" in message
    assert "did you mean [sandbox]" in message


def test_top_level_key_is_pointed_at_its_section(tmp_path: Path) -> None:
    message = config_error(tmp_path, "port = 1\n")
    assert "[sandbox] port" in message


@pytest.mark.parametrize(
    ("toml", "fragment"),
    [
        ('[sandbox]\nport = "abc"\n', "an integer"),
        ("[sandbox]\nport = 70000\n", "between 0 and 65535"),
        ("[sandbox]\nport = true\n", "an integer"),
        ('[service]\ntimeout_seconds = "fast"\n', "a number"),
        ('[service]\nrate_limit = "lots"\n', "600/min, 100/min, none"),
        ('[service]\nbase_url = "ftp://x"\n', "URL"),
        ("[warehouse]\npath = 3\n", "a path"),
        ("[sandbox]\nfault_5xx_rate = 2\n", "between 0 and 1"),
        ('[sandbox]\nwebhook_retry_schedule = "2,x"\n', "comma-separated seconds"),
    ],
)
def test_wrong_type_names_file_key_and_expected_type(
    tmp_path: Path, toml: str, fragment: str
) -> None:
    message = config_error(tmp_path, toml)
    key = toml.split("\n")[1].split("=")[0].strip()
    assert "convo.toml:2" in message
    assert key in message
    assert fragment in message


def test_invalid_toml_names_file_and_line(tmp_path: Path) -> None:
    message = config_error(tmp_path, "[sandbox]\nport = \n")
    assert re.search(r"convo\.toml:2:\d+: invalid TOML", message)


def test_config_file_not_utf8(tmp_path: Path) -> None:
    path = tmp_path / "convo.toml"
    path.write_bytes(b"[sandbox]\nhost = '\xff'\n")
    with pytest.raises(ConfigError, match="UTF-8"):
        load_settings(path, {}, {})


def test_wrong_env_type_names_variable(tmp_path: Path) -> None:
    message = config_error(tmp_path, env={"CONVO_SANDBOX_PORT": "abc"})
    assert "CONVO_SANDBOX_PORT" in message and "an integer" in message and "'abc'" in message


# -- secrets -----------------------------------------------------------------------------

INLINE = "sk-inline-DO-NOT-LEAK-1234"


@pytest.mark.parametrize("setting", SECRET_SETTINGS, ids=lambda s: s.name)
def test_inline_secret_in_file_is_rejected(tmp_path: Path, setting: Setting) -> None:
    value = f'["{INLINE}"]' if setting.kind is Kind.LIST else f'"{INLINE}"'
    message = config_error(tmp_path, f"[{setting.section}]\n{setting.key} = {value}\n")
    assert INLINE not in message
    assert f"{conf_file(tmp_path)}:2" in message
    assert setting.key in message
    assert setting.env_var in message
    file_setting = REGISTRY.file_setting_for(setting.name)
    if file_setting is not None:
        assert file_setting.name in message


def test_secret_from_env(tmp_path: Path) -> None:
    s = load(tmp_path, env={"CONVO_API_KEY": "  sk-env-123  "})
    secret = s.require_secret("service.api_key")
    assert secret.reveal() == "sk-env-123"
    assert s.source("service.api_key") is Source.ENV
    assert s.display()["service.api_key"]["value"] == MASK
    assert "sk-env-123" not in repr(s) + repr(s.service.api_key) + str(s.display())


def test_secret_from_file_relative_to_config_dir(tmp_path: Path) -> None:
    (tmp_path / "secrets").mkdir()
    (tmp_path / "secrets" / "key").write_text("sk-file-456\n\n")
    sub = tmp_path / "elsewhere"
    sub.mkdir()
    config = tmp_path / "convo.toml"
    config.write_text('[service]\napi_key_file = "secrets/key"\n')
    s = load_settings(config, {}, {}, cwd=sub)
    assert s.require_secret("service.api_key").reveal() == "sk-file-456"
    assert s.source("service.api_key") is Source.FILE
    assert "sk-file-456" not in str(s.display())


def test_secret_file_from_env(tmp_path: Path) -> None:
    key = tmp_path / "wh"
    key.write_text("new-secret,old-secret\n")
    s = load(tmp_path, env={"CONVO_WEBHOOK_SECRET_FILE": str(key)})
    secret = s.require_secret("webhooks.secret")
    assert [p.reveal() for p in secret.parts()] == ["new-secret", "old-secret"]


def test_env_secret_beats_file_variant_from_config(tmp_path: Path) -> None:
    toml = '[service]\napi_key_file = "does-not-exist"\n'
    s = load(tmp_path, toml, {"CONVO_API_KEY": "sk-env"})
    assert s.require_secret("service.api_key").reveal() == "sk-env"


def test_secret_and_file_variant_at_same_level_is_an_error(tmp_path: Path) -> None:
    key = tmp_path / "key"
    key.write_text("sk-from-file")
    env = {"CONVO_API_KEY": "sk-from-env", "CONVO_API_KEY_FILE": str(key)}
    message = config_error(tmp_path, env=env)
    assert "service.api_key" in message and "service.api_key_file" in message
    assert "sk-from-env" not in message and "sk-from-file" not in message


@pytest.mark.parametrize("problem", ["missing", "empty", "directory", "binary"])
def test_bad_secret_file_names_path_not_content(tmp_path: Path, problem: str) -> None:
    path = tmp_path / "key"
    if problem == "empty":
        path.write_text("  \n")
    elif problem == "directory":
        path.mkdir()
    elif problem == "binary":
        path.write_bytes(b"sk-\xff\xfe-secret")
    message = config_error(tmp_path, env={"CONVO_API_KEY_FILE": str(path)})
    assert str(path) in message
    assert "CONVO_API_KEY_FILE" in message
    assert "secret" in message
    assert "\xff" not in message and "sk-" not in message


def test_require_secret_explains_how_to_set_it(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        load(tmp_path).require_secret("service.api_key")
    assert "CONVO_API_KEY" in str(info.value) and "service.api_key_file" in str(info.value)


def test_workspaces_are_secret_list(tmp_path: Path) -> None:
    s = load(tmp_path, env={"CONVO_SANDBOX_WORKSPACES": "acme:sk-aaa, globex:sk-bbb"})
    values = s.get_secret_list("sandbox.workspaces")
    assert [v.reveal() for v in values] == ["acme:sk-aaa", "globex:sk-bbb"]
    assert s.display()["sandbox.workspaces"]["value"] == MASK
    assert "sk-aaa" not in repr(values) + str(s.display())


def test_invalid_secret_env_value_is_not_echoed(tmp_path: Path) -> None:
    message = config_error(tmp_path, env={"CONVO_SANDBOX_WORKSPACES": "no-colon-sk-zzz"})
    assert "CONVO_SANDBOX_WORKSPACES" in message and "NAME:KEY" in message
    assert "sk-zzz" not in message


# -- Secret type -----------------------------------------------------------------------------------


def test_secret_never_shows_itself() -> None:
    secret = Secret("hunter2-value")
    shown = [
        str(secret),
        repr(secret),
        f"{secret}",
        f"{secret!r}",
        f"{secret:>20}",
        "%s" % (secret,),  # noqa: UP031  (logging-style formatting)
    ]
    assert all("hunter2" not in text for text in shown)
    assert str(secret) == MASK and f"{secret}" == MASK
    assert secret.reveal() == "hunter2-value"
    assert "hunter2" not in repr({"k": secret, "l": [secret]})
    with pytest.raises(TypeError):
        json.dumps({"k": secret})
    with pytest.raises(TypeError):
        orjson.dumps({"k": secret})
    with pytest.raises(TypeError):
        pickle.dumps(secret)
    assert copy.deepcopy(secret) is secret
    with pytest.raises(AttributeError):
        secret._value = "x"


def test_secret_equality_and_parts() -> None:
    assert Secret("a") == Secret("a")
    assert Secret("a") != Secret("b")
    assert Secret("a") != "a"
    assert [p.reveal() for p in Secret(" n1 ,o2,\n o3 ,").parts()] == ["n1", "o2", "o3"]
    assert not Secret("")


@settings(max_examples=50, deadline=None)
@given(
    secret=st.text(
        alphabet=st.characters(min_codepoint=33, max_codepoint=126, exclude_characters=","),
        min_size=12,
        max_size=40,
    )
)
def test_env_secrets_never_reach_display(empty_dir: Path, secret: str) -> None:
    def rendered(value: str) -> str:
        env = {"CONVO_API_KEY": value, "CONVO_WEBHOOK_SECRET": value}
        s = load_settings(None, {}, env, cwd=empty_dir)
        assert s.require_secret("service.api_key").reveal() == value
        return orjson.dumps(s.display()).decode() + repr(s) + repr(s.service.api_key)

    # A "secret" that the display shows anyway (a setting name, an env var) proves nothing.
    assume(secret not in rendered("0" * 12))
    assert secret not in rendered(secret)


@settings(max_examples=50, deadline=None)
@given(port=st.integers(min_value=0, max_value=65535))
def test_port_round_trips_from_env(empty_dir: Path, port: int) -> None:
    s = load_settings(None, {}, {"CONVO_SANDBOX_PORT": f" {port} "}, cwd=empty_dir)
    assert s.get_int("sandbox.port") == port


# -- display and typed access ------------------------------------------------------------


def test_display_is_json_ready_and_complete(tmp_path: Path) -> None:
    s = load(tmp_path, env={"CONVO_API_KEY": "sk-x-123"})
    shown = s.display()
    assert list(shown) == [x.name for x in REGISTRY.settings]
    assert json.loads(orjson.dumps(shown)) == shown
    assert shown["service.api_key"]["value"] == MASK
    assert shown["webhooks.secret"]["value"] is None
    assert shown["warehouse.path"] == {
        "value": "data/warehouse.duckdb",
        "source": "default",
        "origin": "default",
        "env": "CONVO_DB",
        "secret": False,
    }


def test_typed_getters_check_the_kind(tmp_path: Path) -> None:
    s = load(tmp_path)
    with pytest.raises(TypeError):
        s.get_int("service.base_url")
    with pytest.raises(TypeError):
        s.get_list("sandbox.workspaces")  # secret lists use get_secret_list
    with pytest.raises(KeyError):
        s.get("nope.nope")
    with pytest.raises(AttributeError):
        _ = s.nosection
    with pytest.raises(AttributeError):
        _ = s.sandbox.nokey
    assert s.sandbox.port == s.get("sandbox.port") == 8787


# -- documentation -----------------------------------------------------------------------


def _uncommented_example() -> str:
    """convo.example.toml with every `# key = value` line uncommented."""
    text = (ROOT / "convo.example.toml").read_text(encoding="utf-8")
    return re.sub(r"(?m)^# ([a-z0-9_]+ = )", r"\1", text)


def test_every_setting_is_in_example_toml() -> None:
    text = (ROOT / "convo.example.toml").read_text(encoding="utf-8")
    data = tomllib.loads(_uncommented_example())
    for setting in REGISTRY.settings:
        assert f"[{setting.section}]" in text
        assert f"env: {setting.env_var} " in text, setting.name
        if setting.is_secret:
            assert f"# {setting.key}: SECRET" in text, setting.name
            assert setting.key not in data.get(setting.section, {}), setting.name
        else:
            assert setting.key in data.get(setting.section, {}), setting.name


def test_example_toml_is_valid_and_shows_the_defaults(tmp_path: Path) -> None:
    example = ROOT / "convo.example.toml"
    as_is = load_settings(example, {}, {})
    assert all(as_is.source(s.name) is Source.DEFAULT for s in REGISTRY.settings)
    (tmp_path / "convo.toml").write_text(_uncommented_example(), encoding="utf-8")
    uncommented = load_settings(tmp_path / "convo.toml", {}, {})
    empty = tmp_path / "empty"
    empty.mkdir()
    defaults = load_settings(None, {}, {}, cwd=empty)
    for setting in PLAIN_SETTINGS:
        assert uncommented.source(setting.name) is Source.FILE, setting.name
        value, default = uncommented.get(setting.name), defaults.get(setting.name)
        if isinstance(default, Path) and not default.is_absolute():
            default = tmp_path / default  # file paths are relative to the file
        assert value == default, setting.name


def test_every_setting_is_in_configuration_docs() -> None:
    text = (ROOT / "docs" / "configuration.md").read_text(encoding="utf-8")
    for setting in REGISTRY.settings:
        row = next(
            (line for line in text.splitlines() if line.startswith(f"| `{setting.name}` |")),
            None,
        )
        assert row is not None, f"{setting.name} has no row in docs/configuration.md"
        assert f"`{setting.env_var}`" in row
        assert setting.type_name in row
        assert ("**yes**" in row) is setting.is_secret
