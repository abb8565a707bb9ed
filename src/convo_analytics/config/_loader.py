"""Finding the config file and merging defaults, file, environment and flags into Settings.

Precedence, highest first: command-line flag > environment variable > config
file > default.  Secrets never come from the config file itself: they come from
the environment or from a file named by their ``*_file`` setting.
"""

from __future__ import annotations

import difflib
import os
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from convo_analytics.config._registry import REGISTRY
from convo_analytics.config._schema import (
    CONFIG_ENV_VAR,
    ConfigError,
    InvalidValue,
    Registry,
    Setting,
    Source,
    coerce_python,
    coerce_text,
    coerce_toml,
)
from convo_analytics.config._settings import Resolved, Settings, how_to_set_secret
from convo_analytics.config._urls import masked_url, url_secret

__all__ = ["DEFAULT_CONFIG_NAME", "TABLES", "ConfigLocation", "find_config_file", "load_settings"]

DEFAULT_CONFIG_NAME = "convo.toml"
_FIX_FILE = "convo.example.toml documents every setting"
#: Keys of a section that hold nested tables, not one setting's value: they are kept for
#: the typed models that read them (``extract.streams`` and ``extract.fields`` describe
#: the service's endpoints, see convo_analytics.extract._source). ``extract.streams``
#: written as a list is still the setting that selects the streams.
TABLES: dict[str, tuple[str, ...]] = {"extract": ("streams", "fields")}


@dataclass(frozen=True)
class ConfigLocation:
    """The config file in use and why: ``--config``, ``$CONVO_CONFIG`` or ``./convo.toml``."""

    path: Path
    reason: str


def find_config_file(
    explicit: Path | None,
    environ: Mapping[str, str] | None = None,
    *,
    cwd: Path | None = None,
) -> ConfigLocation | None:
    """Which config file to read: ``--config``, else ``$CONVO_CONFIG``, else ``./convo.toml``.

    An explicitly named file (flag or environment) that does not exist is a
    :class:`ConfigError`; a missing ``./convo.toml`` just means "no file".
    """
    env = os.environ if environ is None else environ
    if explicit is not None:
        return _existing(ConfigLocation(explicit.expanduser(), "--config"))
    named = env.get(CONFIG_ENV_VAR, "").strip()
    if named:
        return _existing(ConfigLocation(Path(named).expanduser(), f"${CONFIG_ENV_VAR}"))
    base = Path.cwd() if cwd is None else cwd
    candidate = base / DEFAULT_CONFIG_NAME
    if candidate.is_file():
        return ConfigLocation(candidate, f"./{DEFAULT_CONFIG_NAME}")
    return None


def _existing(location: ConfigLocation) -> ConfigLocation:
    path = location.path
    if not path.exists():
        raise ConfigError(
            f"config file {path} (given by {location.reason}) does not exist; "
            f"fix the path or create the file; {_FIX_FILE}"
        )
    if path.is_dir():
        raise ConfigError(
            f"config file {path} (given by {location.reason}) is a directory; "
            "point it at a TOML file"
        )
    return location


def load_settings(
    config_path: Path | None,
    overrides: Mapping[str, object],
    environ: Mapping[str, str] | None = None,
    *,
    cwd: Path | None = None,
    registry: Registry = REGISTRY,
) -> Settings:
    """Build the effective :class:`Settings`.

    ``config_path`` is the ``--config`` flag (``None`` = discover the file).
    ``overrides`` maps dotted setting names to CLI flag values; ``None`` means
    "flag not given".  ``environ`` defaults to ``os.environ``.  Raises
    :class:`ConfigError` for any problem with user input.
    """
    env = os.environ if environ is None else environ
    location = find_config_file(config_path, env, cwd=cwd)
    tables: dict[str, dict[str, Any]] = {}
    text = ""
    if location is not None:
        text = _read_config_text(location.path)
        file_layer = _file_layer(location.path, text, registry, tables)
    layers: list[dict[str, Resolved]] = [
        file_layer if location is not None else {},
        _env_layer(env, registry),
        _flag_layer(overrides, registry),
    ]
    values: dict[str, Resolved] = {}
    for setting in registry.settings:
        default = None if setting.default is None else coerce_python(setting, setting.default)
        chosen = Resolved(default, Source.DEFAULT, "default")
        for layer in layers:
            chosen = layer.get(setting.name, chosen)
        values[setting.name] = chosen
    _apply_secret_files(values, registry)
    return Settings(
        values,
        config_path=None if location is None else location.path,
        config_reason="" if location is None else location.reason,
        registry=registry,
        tables=tables,
        environ=dict(env),
        locate=lambda dotted: _locate(location.path, text, dotted) if location else "",
    )


# -- config file ------------------------------------------------------------------


def _file_layer(
    path: Path, text: str, registry: Registry, tables: dict[str, dict[str, Any]]
) -> dict[str, Resolved]:
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        # tomllib may quote one offending character; keep secrets out of errors.
        detail = re.sub(r"character '.*?'", "character", str(exc))
        where = str(path)
        position = re.search(r"\s*\(at line (\d+), column (\d+)\)", detail)
        if position is not None:
            where = f"{path}:{position.group(1)}:{position.group(2)}"
            detail = detail[: position.start()] + detail[position.end() :]
        raise ConfigError(f"{where}: invalid TOML: {detail}; fix the syntax") from None
    base_dir = path.parent
    out: dict[str, Resolved] = {}
    for section, table in data.items():
        if section == "workspaces" and isinstance(table, list):
            tables.setdefault("", {})["workspaces"] = table  # [[workspaces]], read by its model
            continue
        if section not in registry.sections:
            raise ConfigError(_unknown_section(path, text, section, registry))
        if not isinstance(table, dict):
            where = _where(path, text, None, section)
            raise ConfigError(
                f"{where}: '{section}' must be a table like [{section}], not a single value"
            )
        for key, raw in table.items():
            if key in TABLES.get(section, ()) and isinstance(raw, dict):
                tables.setdefault(section, {})[key] = raw
                continue
            out.update(_file_value(path, text, section, key, raw, base_dir, registry))
    return out


def _locate(path: Path, text: str, dotted: str) -> str:
    """``path:line`` of the deepest part of a dotted name written in the file, else ``path``."""
    parts = dotted.split(".")
    while len(parts) > 1:
        where = _where(path, text, ".".join(parts[:-1]), parts[-1])
        if where != str(path):
            return where
        parts.pop()
    return str(path)


def _file_value(
    path: Path,
    text: str,
    section: str,
    key: str,
    raw: object,
    base_dir: Path,
    registry: Registry,
) -> dict[str, Resolved]:
    name = f"{section}.{key}"
    where = _where(path, text, section, key)
    if name not in registry:
        known = [s.key for s in registry.in_section(section) if not s.is_secret]
        known += TABLES.get(section, ())
        hint = difflib.get_close_matches(key, known, n=1)
        suggestion = f"did you mean '{hint[0]}'? " if hint else ""
        raise ConfigError(
            f"{where}: unknown setting {key!r} in [{section}]; {suggestion}"
            f"known settings in [{section}]: {', '.join(known)}"
        )
    setting = registry.get(name)
    if setting.is_secret:
        raise ConfigError(
            f"{where}: [{section}] {key} is a secret and must not be written in a config "
            f"file; remove it and {how_to_set_secret(registry, name)}"
        )
    try:
        value = coerce_toml(setting, raw, base_dir)
    except InvalidValue as exc:
        shown = _show(_masked(setting, raw), "URL" in str(exc))
        raise ConfigError(
            f"{where}: [{section}] {key} must be {exc}, got {shown}; fix the value"
        ) from None
    _refuse_url_secret(setting, value, where, registry)
    return {name: Resolved(value, Source.FILE, where)}


def _read_config_text(path: Path) -> str:
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise ConfigError(f"config file {path} does not exist; fix the path") from None
    except IsADirectoryError:
        raise ConfigError(f"config file {path} is a directory; point it at a file") from None
    except OSError as exc:
        raise ConfigError(
            f"config file {path} cannot be read ({exc.strerror}); check its permissions"
        ) from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise ConfigError(f"config file {path} is not UTF-8 text; save it as UTF-8") from None


def _unknown_section(path: Path, text: str, section: str, registry: Registry) -> str:
    where = _where(path, text, None, section)
    owners = [s.section for s in registry.settings if s.key == section]
    if owners:
        return f"{where}: '{section}' must be inside a section, e.g. [{owners[0]}] {section} = ..."
    hint = difflib.get_close_matches(section, registry.sections, n=1)
    suggestion = f"did you mean [{hint[0]}]? " if hint else ""
    return (
        f"{where}: unknown section [{_quote(section)}]; {suggestion}"
        f"known sections: {', '.join(registry.sections)}"
    )


_HEADER_RE = re.compile(r"^\s*\[\s*([^\[\]]+?)\s*\]\s*(?:#.*)?$")
_KEY_RE = re.compile(r"^\s*([A-Za-z0-9_.\-\"' ]+?)\s*=")


def _where(path: Path, text: str, section: str | None, key: str) -> str:
    """``path:line`` for the line defining ``[section] key`` (best effort), else ``path``."""
    wanted = key if section is None else f"{section}.{key}"
    current = ""
    for lineno, line in enumerate(text.splitlines(), start=1):
        header = _HEADER_RE.match(line)
        if header is not None:
            current = _normalize_key(header.group(1))
            if current == wanted:
                return f"{path}:{lineno}"
            continue
        match = _KEY_RE.match(line)
        if match is None:
            continue
        found = _normalize_key(match.group(1))
        full = f"{current}.{found}" if current else found
        if full == wanted or (section is None and full.split(".", 1)[0] == wanted):
            return f"{path}:{lineno}"
    return str(path)


def _normalize_key(raw: str) -> str:
    return ".".join(part.strip().strip("\"'") for part in raw.split("."))


def _quote(name: str) -> str:
    return name if re.fullmatch(r"[A-Za-z0-9_\-]+", name) else repr(name)


def _show(raw: object, url: bool = False) -> str:
    """Describe a (non-secret) offending value for an error message; a URL without its
    scheme says so."""
    if url and isinstance(raw, str) and "://" not in raw:
        return f"{raw!r}, which has no scheme (write https://{raw}, or http:// for loopback)"
    kind = {
        bool: "boolean",
        int: "integer",
        float: "float",
        str: "string",
        list: "array",
        dict: "table",
    }.get(type(raw), type(raw).__name__)
    shown = repr(raw) if not isinstance(raw, dict) else "{...}"
    if len(shown) > 60:
        shown = shown[:57] + "..."
    return f"{kind} {shown}"


# -- URL settings -------------------------------------------------------------------


def _masked(setting: Setting, raw: object) -> object:
    """A URL setting's offending value as an error may quote it (query values masked)."""
    if not setting.url:
        return raw
    if isinstance(raw, str):
        return masked_url(raw)
    if isinstance(raw, list | tuple):
        return [masked_url(item) if isinstance(item, str) else item for item in raw]
    return raw


def _refuse_url_secret(setting: Setting, value: object, origin: str, registry: Registry) -> None:
    """A URL setting holding a password is refused, naming where the password goes."""
    if not setting.url:
        return
    items = value if isinstance(value, tuple) else (value,)
    for item in items:
        where = url_secret(item) if isinstance(item, str) else None
        if where is None:
            continue
        home = ""
        if setting.url_secret_to is not None:
            home = (
                f" and give it as {setting.url_secret_to}: "
                f"{how_to_set_secret(registry, setting.url_secret_to)}"
            )
        extra = setting.url_secret_fix or (
            "" if home else "secrets come from the environment or a file, never a URL"
        )
        raise ConfigError(
            f"{setting.name} ({origin}) holds {where}: remove it from the URL (URLs are shown "
            f"in messages and by `convo config show`){home}" + (f"; {extra}" if extra else "")
        )


# -- environment and flags --------------------------------------------------------


def _env_layer(environ: Mapping[str, str], registry: Registry) -> dict[str, Resolved]:
    out: dict[str, Resolved] = {}
    for setting in registry.settings:
        found = [(var, environ[var]) for var in setting.env_vars if environ.get(var, "").strip()]
        if not found:
            continue
        if len({text.strip() for _, text in found}) > 1:
            names = " and ".join(var for var, _ in found)
            raise ConfigError(
                f"environment variables {names} both set {setting.name} to different "
                "values; unset all but one"
            )
        var, text = found[0]
        try:
            value = coerce_text(setting, text)
        except InvalidValue as exc:
            shown = _show(_masked(setting, text.strip()), "URL" in str(exc))
            got = "" if setting.is_secret else f", got {shown}"
            raise ConfigError(
                f"environment variable {var} must be {exc}{got}; fix or unset {var}"
            ) from None
        _refuse_url_secret(setting, value, f"${var}", registry)
        out[setting.name] = Resolved(value, Source.ENV, f"${var}")
    return out


def _flag_layer(overrides: Mapping[str, object], registry: Registry) -> dict[str, Resolved]:
    out: dict[str, Resolved] = {}
    for name, raw in overrides.items():
        if raw is None:
            continue
        setting = registry.get(name)
        # A secret given as a flag (e.g. ``convo extract --api-key``) is accepted
        # because scripts ask for it, but it shows in process listings: the docs
        # recommend the environment or a file instead.
        try:
            value = coerce_python(setting, raw)
        except InvalidValue as exc:
            shown = _show(_masked(setting, raw), "URL" in str(exc))
            raise ConfigError(
                f"command-line value for {name} must be {exc}, got {shown}; fix the flag"
            ) from None
        _refuse_url_secret(setting, value, "command-line flag", registry)
        out[name] = Resolved(value, Source.FLAG, "command-line flag")
    return out


# -- secret files -----------------------------------------------------------------


def _apply_secret_files(values: dict[str, Resolved], registry: Registry) -> None:
    """Replace secrets by the content of their ``*_file`` setting where that wins."""
    for target in registry.settings:
        file_setting = registry.file_setting_for(target.name)
        if file_setting is None:
            continue
        via_file = values[file_setting.name]
        direct = values[target.name]
        if not isinstance(via_file.value, Path):
            continue
        if direct.source is not Source.DEFAULT and direct.source.rank >= via_file.source.rank:
            if direct.source is via_file.source:
                raise ConfigError(
                    f"both {target.name} ({direct.origin}) and {file_setting.name} "
                    f"({via_file.origin}) are set; set only one of them"
                )
            continue
        secret = _read_secret_file(target, file_setting, via_file)
        values[target.name] = Resolved(
            secret, via_file.source, f"file {via_file.value} via {via_file.origin}"
        )


def _read_secret_file(target: Setting, file_setting: Setting, via_file: Resolved) -> object:
    path = via_file.value
    assert isinstance(path, Path)
    label = f"secret file {path} (from {file_setting.name}, {via_file.origin})"
    fix = f"fix {file_setting.name} or create the file"
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise ConfigError(f"{label} does not exist; {fix}") from None
    except IsADirectoryError:
        raise ConfigError(f"{label} is a directory; {fix}") from None
    except OSError as exc:
        raise ConfigError(f"{label} cannot be read ({exc.strerror}); {fix}") from None
    try:
        text = data.decode("utf-8").rstrip()
    except UnicodeDecodeError:
        raise ConfigError(f"{label} is not UTF-8 text; {fix}") from None
    if not text:
        raise ConfigError(f"{label} is empty; put the secret in it")
    try:
        return coerce_text(target, text)
    except InvalidValue as exc:
        raise ConfigError(f"{label} must contain {exc}; {fix}") from None
