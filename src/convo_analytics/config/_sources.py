"""Where settings come from: pydantic-settings sources for flags, the environment, convo.toml
and secret files, each recording where every value it gives was written, and
:func:`load_settings`, which builds the :class:`Settings` model from them.

Precedence, highest first: flag > environment (``CONVO_<SECTION>_<KEY>`` and the documented
aliases; empty variables ignored) > convo.toml (``--config``, ``$CONVO_CONFIG`` or
``./convo.toml``) > default. Each source validates what it gives against the section models
before the sources are merged, so a message names the one place a bad value was written
(``convo.toml:12``, ``$CONVO_DB`` or the flag) and its fix. Secrets never come from the file
itself: from the environment, a flag, or the file their ``*_file`` setting names.
"""

from __future__ import annotations

import difflib
import os
import re
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError
from pydantic.fields import FieldInfo
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsError

from convo_analytics.config._endpoints import (
    ENDPOINTS_ENV_PREFIX,
    SourceSpec,
    load_source,
    source_errors,
)
from convo_analytics.config._model import (
    CONFIG_ENV_VAR,
    ConfigError,
    Kind,
    Registry,
    Setting,
    Source,
    _path,
    describe,
)
from convo_analytics.config._monitor_tables import monitor_problems
from convo_analytics.config._report_tables import report_problems
from convo_analytics.config._settings import Settings
from convo_analytics.config._urls import masked_url, url_secret
from convo_analytics.config._workspace_tables import workspace_problems

__all__ = ["DEFAULT_CONFIG_NAME", "TABLES", "ConfigLocation", "find_config_file", "load_settings"]

DEFAULT_CONFIG_NAME = "convo.toml"
_FIX_FILE = "convo.example.toml documents every setting"
#: Keys of a section that hold nested tables, kept for the models that read them
#: (``[extract.streams.NAME]``, ``[extract.fields]``: convo_analytics.extract._source);
#: ``extract.streams`` written as a list is still the setting that selects the streams.
TABLES: dict[str, tuple[str, ...]] = {"extract": ("streams", "fields")}


@dataclass(frozen=True)
class ConfigLocation:
    """The config file in use and why: ``--config``, ``$CONVO_CONFIG`` or ``./convo.toml``."""

    path: Path
    reason: str


def find_config_file(
    explicit: Path | None, environ: Mapping[str, str] | None = None, *, cwd: Path | None = None
) -> ConfigLocation | None:
    """Which config file to read: ``--config``, else ``$CONVO_CONFIG``, else ``./convo.toml``.
    A file named explicitly that does not exist is a ConfigError; no ./convo.toml: no file."""
    env = os.environ if environ is None else environ
    if explicit is not None:
        found = ConfigLocation(explicit.expanduser(), "--config")
    elif named := env.get(CONFIG_ENV_VAR, "").strip():
        found = ConfigLocation(Path(named).expanduser(), f"${CONFIG_ENV_VAR}")
    else:
        candidate = (Path.cwd() if cwd is None else cwd) / DEFAULT_CONFIG_NAME
        return (
            ConfigLocation(candidate, f"./{DEFAULT_CONFIG_NAME}") if candidate.is_file() else None
        )
    given = f"config file {found.path} (given by {found.reason})"
    if not found.path.exists():
        raise ConfigError(f"{given} does not exist; fix the path or create the file; {_FIX_FILE}")
    if found.path.is_dir():
        raise ConfigError(f"{given} is a directory; point it at a TOML file")
    return found


class _Layer(PydanticBaseSettingsSource):
    """A source's values by section, checked against the section models as given, and where
    each was written (``found``, read by Settings.resolved)."""

    source = Source.DEFAULT
    strict = False

    def __init__(self, settings_cls: type[BaseSettings]) -> None:
        super().__init__(settings_cls)
        self.registry: Registry = describe(settings_cls)
        self.data: dict[str, dict[str, Any]] = {}
        self.found: dict[str, tuple[Source, str]] = {}
        self.raw: dict[str, object] = {}

    def get_field_value(self, field: FieldInfo, field_name: str) -> tuple[Any, str, bool]:
        return self.data.get(field_name), field_name, False

    def __call__(self) -> dict[str, Any]:
        return self.data

    def put(self, name: str, raw: object, origin: str, source: Source | None = None) -> None:
        setting = self.registry.get(name)
        self.data.setdefault(setting.section, {})[setting.key] = raw
        self.found[name], self.raw[name] = (source or self.source, origin), raw

    def check(self) -> None:
        """Every value as this source gives it: typed, in range, no secret in a URL."""
        for section, values in self.data.items():
            try:
                model = self.registry.sections[section].model_validate(values, strict=self.strict)
            except ValidationError as exc:
                setting = self.registry.get(f"{section}.{exc.errors()[0]['loc'][0]}")
                expected = setting.expectation()
                shown = (
                    "(a secret, not shown)"
                    if setting.is_secret
                    else _show(_masked(setting, self.raw[setting.name]), "URL" in expected)
                )
                raise ConfigError(self.invalid(setting, expected, shown)) from None
            for key in values:
                setting = self.registry.get(f"{section}.{key}")
                if setting.url:
                    self._refuse_url_secret(setting, getattr(model, key))

    def invalid(self, setting: Setting, expected: str, shown: str) -> str:
        raise NotImplementedError

    def _refuse_url_secret(self, setting: Setting, value: object) -> None:
        """A URL setting holding a password is refused, naming where the password goes."""
        for item in value if isinstance(value, tuple) else (value,):
            if not isinstance(item, str) or (where := url_secret(item)) is None:
                continue
            home = extra = ""
            if setting.url_secret_to is not None:
                home = (
                    f" and give it as {setting.url_secret_to}: "
                    f"{self.registry.how_to_set_secret(setting.url_secret_to)}"
                )
            extra = setting.url_secret_fix or (
                "" if home else "secrets come from the environment or a file, never a URL"
            )
            raise ConfigError(
                f"{setting.name} ({self.found[setting.name][1]}) holds {where}: remove it from "
                f"the URL (URLs are shown in messages and by `convo config show`){home}"
                + (f"; {extra}" if extra else "")
            )


class FlagSource(_Layer):
    """Command-line flags: ``{"sandbox.port": 9000}``; ``None`` means the flag was not given.
    (A secret flag such as ``--api-key`` works but shows in process listings.)"""

    source = Source.FLAG

    def __init__(self, settings_cls: type[BaseSettings], flags: Mapping[str, object]) -> None:
        super().__init__(settings_cls)
        for name, raw in flags.items():
            self.registry.get(name)  # a KeyError names a programming error
            if raw is not None:
                self.put(name, raw, "command-line flag")
        self.check()

    def invalid(self, setting: Setting, expected: str, shown: str) -> str:
        return (
            f"command-line value for {setting.name} must be {expected}, got {shown}; fix the flag"
        )


class EnvSource(_Layer):
    """Each setting's variables (its alias, ``CONVO_<SECTION>_<KEY>``) in ``environ``."""

    source = Source.ENV

    def __init__(self, settings_cls: type[BaseSettings], environ: Mapping[str, str]) -> None:
        super().__init__(settings_cls)
        for setting in self.registry.settings:
            found = [(v, environ[v]) for v in setting.env_vars if environ.get(v, "").strip()]
            if len({text.strip() for _, text in found}) > 1:
                raise ConfigError(
                    f"environment variables {' and '.join(v for v, _ in found)} both set "
                    f"{setting.name} to different values; unset all but one"
                )
            if found:
                self.put(setting.name, found[0][1], f"${found[0][0]}")
        self.check()

    def invalid(self, setting: Setting, expected: str, shown: str) -> str:
        var = self.found[setting.name][1][1:]
        got = "" if setting.is_secret else f", got {shown}"
        return f"environment variable {var} must be {expected}{got}; fix or unset {var}"


class TomlSource(_Layer):
    """convo.toml, read strictly (an integer is written as one), with the line of each value;
    relative paths are the file's folder's. ``[[workspaces]]``, ``[[monitors]]`` and
    ``[[reports]]`` are checked here (one line a problem) and given to the model's fields of
    those names;
    ``[extract.streams.NAME]`` and ``[extract.fields]`` are kept in ``tables`` for the
    extractor's source model."""

    source = Source.FILE
    strict = True

    def __init__(self, settings_cls: type[BaseSettings], location: ConfigLocation | None) -> None:
        super().__init__(settings_cls)
        self.tables: dict[str, dict[str, Any]] = {}
        self.workspaces: list[Any] = []
        self.monitors: list[Any] = []
        self.reports: list[Any] = []
        self.path = location.path if location else None
        self.text = _read_text(location.path) if location else ""
        if location is None:
            return
        self.folder = location.path.parent
        for section, table in self._parse().items():
            if section == "workspaces" and isinstance(table, list):
                self.workspaces = self._array(section, table, workspace_problems)
            elif section == "monitors" and isinstance(table, list):
                self.monitors = self._array(section, table, monitor_problems)
            elif section == "reports" and isinstance(table, list):
                self.reports = self._array(section, table, report_problems)
            elif section == "reports":
                raise ConfigError(
                    f"{self.where(None, section)}: reports are an array of tables: write "
                    "[[reports]] for each report (the reports' settings go in [reporting])"
                )
            elif section not in self.registry.sections:
                raise ConfigError(self._unknown_section(section))
            elif not isinstance(table, dict):
                raise ConfigError(
                    f"{self.where(None, section)}: '{section}' must be a table "
                    f"like [{section}], not a single value"
                )
            else:
                for key, raw in table.items():
                    if key in TABLES.get(section, ()) and isinstance(raw, dict):
                        self.tables.setdefault(section, {})[key] = raw
                    else:
                        self._value(section, key, raw)
        self.check()

    def __call__(self) -> dict[str, Any]:
        arrays = {"workspaces": self.workspaces, "monitors": self.monitors,
                  "reports": self.reports}  # fmt: skip
        return {**self.data, **{name: specs for name, specs in arrays.items() if specs}}

    def _array(
        self,
        section: str,
        raw: list[Any],
        validate: Callable[[list[Any]], tuple[list[Any], list[str]]],
    ) -> list[Any]:
        """An array of tables (``[[workspaces]]``, ``[[monitors]]``, ``[[reports]]``) validated
        by its own model, each problem on one line with the line of its table's header."""
        specs, problems = validate(raw)
        if problems:
            # each [[section]] header's line: problem "#N" is the N-th table's
            lines = enumerate(self.text.splitlines(), start=1)
            header = re.compile(rf"\s*\[\[\s*{section}\s*\]\]")
            heads = [n for n, line in lines if header.match(line)]

            def where(problem: str) -> str:
                at = re.match(rf"\[\[{section}\]\] #(\d+)", problem)
                i = int(at.group(1)) - 1 if at else -1
                return f"{self.path}:{heads[i]}" if 0 <= i < len(heads) else str(self.path)

            raise ConfigError("\n".join(f"{where(p)}: {p}" for p in problems))
        self.found[section] = (self.source, self.where(None, section))
        return specs  # validated once: the model takes them as they are

    def _parse(self) -> dict[str, Any]:
        try:
            return tomllib.loads(self.text)
        except tomllib.TOMLDecodeError as exc:
            # tomllib may quote one offending character; keep secrets out of errors.
            detail = re.sub(r"character '.*?'", "character", str(exc))
            where = str(self.path)
            if (at := re.search(r"\s*\(at line (\d+), column (\d+)\)", detail)) is not None:
                where = f"{self.path}:{at.group(1)}:{at.group(2)}"
                detail = detail[: at.start()] + detail[at.end() :]
            raise ConfigError(f"{where}: invalid TOML: {detail}; fix the syntax") from None

    def _value(self, section: str, key: str, raw: object) -> None:
        name, where = f"{section}.{key}", self.where(section, key)
        if name not in self.registry:
            known = [s.key for s in self.registry.in_section(section) if not s.is_secret]
            known += TABLES.get(section, ())
            hint = difflib.get_close_matches(key, known, n=1)
            raise ConfigError(
                f"{where}: unknown setting {key!r} in [{section}]; "
                + (f"did you mean '{hint[0]}'? " if hint else "")
                + f"known settings in [{section}]: {', '.join(known)}"
            )
        setting = self.registry.get(name)
        if setting.is_secret:
            raise ConfigError(
                f"{where}: [{section}] {key} is a secret and must not be written in a config "
                f"file; remove it and {self.registry.how_to_set_secret(name)}"
            )
        if setting.kind is Kind.PATH and isinstance(raw, str) and (path := _path(raw)):
            raw = str(path if path.is_absolute() else self.folder / path)
        self.put(name, raw, where)

    def invalid(self, setting: Setting, expected: str, shown: str) -> str:
        return (
            f"{self.found[setting.name][1]}: [{setting.section}] {setting.key} must be "
            f"{expected}, got {shown}; fix the value"
        )

    def _unknown_section(self, section: str) -> str:
        where = self.where(None, section)
        if owners := [s.section for s in self.registry.settings if s.key == section]:
            return (
                f"{where}: '{section}' must be inside a section, e.g. [{owners[0]}] {section} = ..."
            )
        known = list(self.registry.sections)
        hint = difflib.get_close_matches(section, known, n=1)
        shown = section if re.fullmatch(r"[A-Za-z0-9_\-]+", section) else repr(section)
        return (
            f"{where}: unknown section [{shown}]; "
            + (f"did you mean [{hint[0]}]? " if hint else "")
            + f"known sections: {', '.join(known)}"
        )

    def where(self, section: str | None, key: str) -> str:
        """``path:line`` of the line defining ``[section] key`` (best effort), else ``path``."""
        wanted, current = (key if section is None else f"{section}.{key}"), ""
        for lineno, line in enumerate(self.text.splitlines(), start=1):
            if (header := re.match(r"^\s*\[\s*([^\[\]]+?)\s*\]\s*(?:#.*)?$", line)) is not None:
                current = _normalize_key(header.group(1))
                if current == wanted:
                    return f"{self.path}:{lineno}"
            elif (match := re.match(r"^\s*([A-Za-z0-9_.\-\"' ]+?)\s*=", line)) is not None:
                found = _normalize_key(match.group(1))
                full = f"{current}.{found}" if current else found
                if full == wanted or (section is None and full.split(".", 1)[0] == wanted):
                    return f"{self.path}:{lineno}"
        return str(self.path)

    def locate(self, dotted: str) -> str:
        """``path:line`` of the deepest part of a dotted name written in the file, else ``path``."""
        parts = dotted.split(".")
        while len(parts) > 1:
            if (where := self.where(".".join(parts[:-1]), parts[-1])) != str(self.path):
                return where
            parts.pop()
        return str(self.path)


class SecretFileSource(_Layer):
    """Secrets read from the file their ``*_file`` setting names, where that setting comes from
    a higher source than the secret itself (both from one source: an error)."""

    def __init__(self, settings_cls: type[BaseSettings], layers: list[_Layer]) -> None:
        super().__init__(settings_cls)
        for target in self.registry.settings:
            file = self.registry.file_setting_for(target.name)
            via = next((x for x in layers if file and file.name in x.found), None)
            path = _path(via.raw[file.name]) if file and via else None
            if file is None or via is None or not isinstance(path, Path):
                continue
            direct = next((x for x in layers if target.name in x.found), None)
            origin = via.found[file.name][1]
            if direct is not None and direct.source.rank >= via.source.rank:
                if direct.source is via.source:
                    raise ConfigError(
                        f"both {target.name} ({direct.found[target.name][1]}) and {file.name} "
                        f"({origin}) are set; set only one of them"
                    )
                continue
            label = f"secret file {path} (from {file.name}, {origin})"
            self.put(
                target.name,
                _read_secret(label, f"fix {file.name} or create the file", path),
                f"file {path} via {origin}",
                via.source,
            )


def load_settings(
    config_path: Path | None,
    overrides: Mapping[str, object],
    environ: Mapping[str, str] | None = None,
    *,
    cwd: Path | None = None,
    model: type[Settings] = Settings,
) -> Settings:
    """The effective settings: ``config_path`` is ``--config`` (None: found as documented),
    ``overrides`` the flags by dotted name (None: not given), ``environ`` defaults to
    ``os.environ``. Raises ConfigError, one line, for any problem with what the user wrote."""
    env = os.environ if environ is None else environ
    location = find_config_file(config_path, env, cwd=cwd)
    toml = TomlSource(model, location)
    env_source = EnvSource(model, env)
    flags = FlagSource(model, overrides)
    layers: list[_Layer] = [flags, env_source, toml]
    layers.insert(0, SecretFileSource(model, layers))
    try:
        settings = model.build(layers)
    except ValidationError as exc:
        first = exc.errors()[0]
        raise ConfigError(f"{'.'.join(map(str, first['loc']))}: {first['msg']}") from None
    settings = settings.model_copy(update={"endpoints": _endpoints(toml, env)})
    config = (location.path, location.reason) if location else (None, "")
    return settings.loaded(
        tuple(layers), config, toml.tables, env, toml.locate if location else None
    )


def _endpoints(toml: TomlSource, environ: Mapping[str, str]) -> SourceSpec:
    """``[extract.streams.*]`` and ``[extract.fields]`` from the environment
    (``CONVO_EXTRACT__...``) over the file, one line per problem naming its place: the
    variable that set it, else the file's line."""
    try:
        return load_source(toml.tables.get("extract", {}), environ)
    except ValidationError as exc:
        lines = source_errors(exc)
        where = [_endpoint_origin(line.split(":", 1)[0], toml, environ) for line in lines]
        raise ConfigError(
            "\n".join(f"{w}: {line}" if w else line for w, line in zip(where, lines, strict=True))
            + "\n(docs/configuration.md, 'The service's endpoints', describes every key)"
        ) from None
    except SettingsError as exc:  # a variable whose value is no JSON where a table goes
        field = re.search(r'field "([^"]+)"', str(exc))
        head = f"{ENDPOINTS_ENV_PREFIX}{field.group(1).upper() if field else ''}"
        names = sorted(v for v in environ if v.upper().startswith(head) and environ[v])
        var = names[0] if names else head
        raise ConfigError(
            f"environment variable {var} must be JSON where it sets a table or list (e.g. "
            f'{{"messages.created_at": "sentAt"}}); fix or unset {var}'
        ) from None


def _endpoint_origin(dotted: str, toml: TomlSource, environ: Mapping[str, str]) -> str:
    """``$CONVO_EXTRACT__STREAMS__LEADS__PAGE_SIZE`` when a variable set ``dotted`` (or the
    table holding it), else where the file writes it, else nothing."""
    parts = dotted.split(".")[1:]
    for n in range(len(parts), 0, -1):
        var = ENDPOINTS_ENV_PREFIX + "__".join(parts[:n]).upper()
        if environ.get(var):
            return f"${var}"
    return toml.locate(dotted) if toml.path else ""


def _read_text(path: Path) -> str:
    try:
        return path.read_bytes().decode("utf-8")
    except UnicodeDecodeError:
        raise ConfigError(f"config file {path} is not UTF-8 text; save it as UTF-8") from None
    except OSError as exc:
        raise ConfigError(
            f"config file {path} cannot be read ({exc.strerror}); check its permissions"
        ) from None


def _read_secret(label: str, fix: str, path: Path) -> str:
    try:
        text = path.read_bytes().decode("utf-8").rstrip()
    except FileNotFoundError:
        raise ConfigError(f"{label} does not exist; {fix}") from None
    except IsADirectoryError:
        raise ConfigError(f"{label} is a directory; {fix}") from None
    except OSError as exc:
        raise ConfigError(f"{label} cannot be read ({exc.strerror}); {fix}") from None
    except UnicodeDecodeError:
        raise ConfigError(f"{label} is not UTF-8 text; {fix}") from None
    if not text:
        raise ConfigError(f"{label} is empty; put the secret in it")
    return text


def _normalize_key(raw: str) -> str:
    return ".".join(part.strip().strip("\"'") for part in raw.split("."))


def _masked(setting: Setting, raw: object) -> object:
    """A URL setting's offending value as a message may quote it (query values masked)."""
    if setting.url and isinstance(raw, list | tuple):
        return [masked_url(item) if isinstance(item, str) else item for item in raw]
    return masked_url(raw) if setting.url and isinstance(raw, str) else raw


def _show(raw: object, url: bool = False) -> str:
    """A (non-secret) offending value for a message; a URL without a scheme says so."""
    if url and isinstance(raw, str) and "://" not in raw:
        return f"{raw!r}, which has no scheme (write https://{raw}, or http:// for loopback)"
    kinds = {
        bool: "boolean",
        int: "integer",
        float: "float",
        str: "string",
        list: "array",
        tuple: "array",
        dict: "table",
    }
    shown = repr(raw) if not isinstance(raw, dict) else "{...}"
    shown = shown[:57] + "..." if len(shown) > 60 else shown
    return f"{kinds.get(type(raw), type(raw).__name__)} {shown}"
