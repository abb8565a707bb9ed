"""The :class:`Settings` object: resolved values, their sources, and a safe display form."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from convo_analytics.config._registry import REGISTRY
from convo_analytics.config._schema import ConfigError, Kind, Registry, Setting, Source
from convo_analytics.config._secret import MASK, Secret
from convo_analytics.config._urls import masked_url

__all__ = ["Resolved", "SectionView", "Settings"]


@dataclass(frozen=True)
class Resolved:
    """A setting's effective value and where it came from.

    ``origin`` is a human-readable detail such as ``$CONVO_DB``,
    ``convo.toml:12`` or ``command-line flag``.
    """

    value: object
    source: Source
    origin: str


class SectionView:
    """Attribute access to one section: ``settings.sandbox.port``."""

    __slots__ = ("_section", "_settings")

    def __init__(self, settings: Settings, section: str) -> None:
        self._settings = settings
        self._section = section

    def __getattr__(self, key: str) -> Any:
        name = f"{self._section}.{key}"
        if name not in self._settings.registry:
            raise AttributeError(f"no setting {name!r}")
        return self._settings.get(name)

    def __repr__(self) -> str:
        return f"<settings section {self._section!r}>"


class Settings:
    """Effective configuration: one value per registered setting, with its source.

    Read values with the typed getters (``get_str``, ``get_int``, ...), the
    untyped :meth:`get`, or attribute style ``settings.service.base_url``.
    Secret settings hold :class:`Secret` objects, never plain strings.
    """

    def __init__(
        self,
        values: Mapping[str, Resolved],
        *,
        config_path: Path | None,
        config_reason: str = "",
        registry: Registry = REGISTRY,
        tables: Mapping[str, Mapping[str, Any]] | None = None,
        environ: Mapping[str, str] | None = None,
        locate: Callable[[str], str] | None = None,
    ) -> None:
        missing = [s.name for s in registry.settings if s.name not in values]
        if missing:
            raise ValueError(f"no value for settings: {', '.join(missing)}")
        self.registry = registry
        self._values = dict(values)
        self.config_path = config_path
        self.config_reason = config_reason
        self._tables = {k: dict(v) for k, v in (tables or {}).items()}
        #: The environment the settings were read with (typed models read theirs from it).
        self.environ: Mapping[str, str] = dict(environ or {})
        self._locate = locate

    def tables(self, section: str) -> dict[str, Any]:
        """The nested tables of ``section`` in the config file (e.g. ``extract.streams``)."""
        return dict(self._tables.get(section, {}))

    def locate(self, dotted: str) -> str:
        """Where the config file writes ``dotted`` (``convo.toml:12``), for error messages."""
        where = self._locate(dotted) if self._locate else ""
        return where or (str(self.config_path) if self.config_path else "")

    # -- generic access -----------------------------------------------------
    def get(self, name: str) -> object:
        """The value of setting ``name``; ``KeyError`` if no such setting."""
        self.registry.get(name)
        return self._values[name].value

    def resolved(self, name: str) -> Resolved:
        self.registry.get(name)
        return self._values[name]

    def source(self, name: str) -> Source:
        return self.resolved(name).source

    def section(self, section: str) -> SectionView:
        if section not in self.registry.sections:
            raise AttributeError(f"no settings section {section!r}")
        return SectionView(self, section)

    def __getattr__(self, section: str) -> SectionView:
        # Only called for names that are not regular attributes or methods.
        registry = self.__dict__.get("registry")
        if not isinstance(registry, Registry) or section not in registry.sections:
            raise AttributeError(section)
        return SectionView(self, section)

    # -- typed access -------------------------------------------------------
    def _typed(self, name: str, kind: Kind, *, secret: bool = False) -> object:
        setting = self.registry.get(name)
        if setting.kind is not kind or setting.is_secret != secret:
            raise TypeError(f"setting {name!r} is a {setting.type_name}")
        return self._values[name].value

    def get_str(self, name: str) -> str:
        value = self._typed(name, Kind.STR)
        assert isinstance(value, str)
        return value

    def get_int(self, name: str) -> int:
        value = self._typed(name, Kind.INT)
        assert isinstance(value, int)
        return value

    def get_float(self, name: str) -> float:
        value = self._typed(name, Kind.FLOAT)
        assert isinstance(value, float)
        return value

    def get_bool(self, name: str) -> bool:
        value = self._typed(name, Kind.BOOL)
        assert isinstance(value, bool)
        return value

    def get_path(self, name: str) -> Path | None:
        """A path setting; ``None`` when it is empty/unset."""
        value = self._typed(name, Kind.PATH)
        assert value is None or isinstance(value, Path)
        return value

    def require_path(self, name: str) -> Path:
        """A path setting that must be set (its default, the registry's, usually is)."""
        value = self.get_path(name)
        if value is None:
            raise ConfigError(f"{name} is empty; set it in convo.toml or its environment variable")
        return value

    def get_list(self, name: str) -> tuple[str, ...]:
        value = self._typed(name, Kind.LIST)
        assert isinstance(value, tuple)
        return tuple(str(item) for item in value)

    def get_secret(self, name: str) -> Secret | None:
        """A secret setting, or ``None`` when it is not configured."""
        value = self._typed(name, Kind.SECRET, secret=True)
        assert value is None or isinstance(value, Secret)
        return value

    def require_secret(self, name: str) -> Secret:
        """A secret setting that must be configured; a :class:`ConfigError` says how if not."""
        value = self.get_secret(name)
        if value is None:
            raise ConfigError(f"{name} is not set; {how_to_set_secret(self.registry, name)}")
        return value

    def get_secret_list(self, name: str) -> tuple[Secret, ...]:
        """A secret list setting such as ``sandbox.workspaces``."""
        value = self._typed(name, Kind.LIST, secret=True)
        assert isinstance(value, tuple)
        return tuple(item for item in value if isinstance(item, Secret))

    # -- display --------------------------------------------------------------
    def display(self) -> dict[str, dict[str, object]]:
        """A JSON-ready view for printing: secrets are ``"***"`` (set) or ``None`` (unset).

        ``{"service.base_url": {"value": ..., "source": "env", "origin": "$CONVO_BASE_URL",
        "env": "CONVO_BASE_URL", "secret": False}, ...}``
        """
        out: dict[str, dict[str, object]] = {}
        for setting in self.registry.settings:
            resolved = self._values[setting.name]
            out[setting.name] = {
                "value": display_value(setting, resolved.value),
                "source": resolved.source.value,
                "origin": resolved.origin,
                "env": setting.env_var,
                "secret": setting.is_secret,
            }
        return out

    def __repr__(self) -> str:
        return f"<Settings config_path={self.config_path!s}>"


def display_value(setting: Setting, value: object) -> object:
    """Turn a value into something JSON-ready, masking secrets and URLs' query values."""
    if setting.is_secret:
        return MASK if value else None
    if setting.url and isinstance(value, str):
        return masked_url(value)
    if setting.url and isinstance(value, tuple):
        return [masked_url(str(item)) for item in value]
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, tuple):
        return [str(item) for item in value]
    if isinstance(value, Secret):  # pragma: no cover - secrets are handled above
        return MASK
    return value


def how_to_set_secret(registry: Registry, name: str) -> str:
    """The fix for a missing or misplaced secret: which env var / file setting to use."""
    setting = registry.get(name)
    fix = f"set the environment variable {setting.env_var}"
    file_setting = registry.file_setting_for(name)
    if file_setting is not None:
        fix += f", or point {file_setting.name} ({file_setting.env_var}) at a file containing it"
    return fix
