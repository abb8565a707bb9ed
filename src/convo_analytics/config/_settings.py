"""The :class:`Settings` model: every section, and the accessors the code reads it with.

``settings.webhooks.max_line_bytes`` reads a value typed; ``settings.get_int("section.key")``
and its siblings read it by name (secrets as :class:`Secret`), ``resolved`` says where it came
from and ``display`` shows it safely. :func:`convo_analytics.config.load_settings` fills the
model from the sources of :mod:`._sources`; ``Settings()`` alone holds the defaults.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from pydantic import Field, PrivateAttr, SecretStr
from pydantic_settings import SettingsConfigDict

from convo_analytics.config._endpoints import SourceSpec
from convo_analytics.config._model import (
    ConfigError,
    Kind,
    Registry,
    Setting,
    Source,
    SourcedSettings,
    describe,
)
from convo_analytics.config._monitor_tables import MonitorSpec
from convo_analytics.config._report_tables import ReportSpec
from convo_analytics.config._secret import MASK, Secret
from convo_analytics.config._sections import (
    AuditSettings,
    AuthSettings,
    DashboardSettings,
    ExportSettings,
    ExtractSettings,
    LakeSettings,
    MonitoringSettings,
    NotifySettings,
    OrchestratorSettings,
    PrivacySettings,
    PublishSettings,
    ReadSettings,
    ReportingSettings,
    RetentionSettings,
    RunSettings,
    SandboxSettings,
    ServeSettings,
    ServiceSettings,
    TopicsSettings,
    TransformSettings,
    WarehouseSettings,
    WebhooksSettings,
)
from convo_analytics.config._urls import masked_url
from convo_analytics.config._workspace_tables import WorkspaceSpec

__all__ = ["Found", "Resolved", "Settings", "display_value"]


class Found(Protocol):
    """A source's record of what it set: ``found["sandbox.port"] = (Source.FILE, "c.toml:3")``."""

    found: dict[str, tuple[Source, str]]


@dataclass(frozen=True)
class Resolved:
    """A setting's effective value and where it came from (``origin``: ``$CONVO_DB``,
    ``convo.toml:12``, ``command-line flag`` or ``default``)."""

    value: object
    source: Source
    origin: str


@dataclass
class _Overlay:
    found: dict[str, tuple[Source, str]]


class Settings(SourcedSettings):
    """Effective configuration, one section model a ``[section]``: flags > environment >
    convo.toml > defaults (see :func:`convo_analytics.config.load_settings`)."""

    model_config = SettingsConfigDict(extra="forbid", frozen=True)

    service: ServiceSettings = Field(default_factory=ServiceSettings)
    webhooks: WebhooksSettings = Field(default_factory=WebhooksSettings)
    warehouse: WarehouseSettings = Field(default_factory=WarehouseSettings)
    extract: ExtractSettings = Field(default_factory=ExtractSettings)
    auth: AuthSettings = Field(default_factory=AuthSettings)
    privacy: PrivacySettings = Field(default_factory=PrivacySettings)
    sandbox: SandboxSettings = Field(default_factory=SandboxSettings)
    transform: TransformSettings = Field(default_factory=TransformSettings)
    topics: TopicsSettings = Field(default_factory=TopicsSettings)
    export: ExportSettings = Field(default_factory=ExportSettings)
    serve: ServeSettings = Field(default_factory=ServeSettings)
    publish: PublishSettings = Field(default_factory=PublishSettings)
    dashboard: DashboardSettings = Field(default_factory=DashboardSettings)
    lake: LakeSettings = Field(default_factory=LakeSettings)
    read: ReadSettings = Field(default_factory=ReadSettings)
    run: RunSettings = Field(default_factory=RunSettings)
    orchestrator: OrchestratorSettings = Field(default_factory=OrchestratorSettings)
    retention: RetentionSettings = Field(default_factory=RetentionSettings)
    notify: NotifySettings = Field(default_factory=NotifySettings)
    monitoring: MonitoringSettings = Field(default_factory=MonitoringSettings)
    reporting: ReportingSettings = Field(default_factory=ReportingSettings)
    audit: AuditSettings = Field(default_factory=AuditSettings)
    #: ``[[workspaces]]``: one table a workspace (none: the flat settings are one workspace).
    workspaces: tuple[WorkspaceSpec, ...] = Field((), json_schema_extra={"tables": True})
    #: ``[[monitors]]``: one table a monitor (those made in the dashboard live in its store).
    monitors: tuple[MonitorSpec, ...] = Field((), json_schema_extra={"tables": True})
    #: ``[[reports]]``: one table a scheduled report (a notebook run and sent).
    reports: tuple[ReportSpec, ...] = Field((), json_schema_extra={"tables": True})
    #: ``[extract.streams.NAME]`` and ``[extract.fields]``: the service's endpoints as data.
    endpoints: SourceSpec = Field(
        default_factory=lambda: SourceSpec.model_validate({}), json_schema_extra={"tables": True}
    )

    _found: tuple[Found, ...] = PrivateAttr(())
    _config: tuple[Path | None, str] = PrivateAttr((None, ""))
    _tables: dict[str, dict[str, Any]] = PrivateAttr(default_factory=dict)
    _environ: dict[str, str] = PrivateAttr(default_factory=dict)
    _locate: Callable[[str], str] | None = PrivateAttr(None)

    def loaded(
        self,
        found: tuple[Found, ...],
        config: tuple[Path | None, str],
        tables: dict[str, dict[str, Any]],
        environ: Mapping[str, str],
        locate: Callable[[str], str] | None,
    ) -> Settings:
        """Remember where the values came from (called by load_settings)."""
        self._found, self._config, self._tables = found, config, tables
        self._environ, self._locate = dict(environ), locate
        return self

    @property
    def registry(self) -> Registry:
        return describe(type(self))

    @property
    def config_path(self) -> Path | None:
        return self._config[0]

    @property
    def config_reason(self) -> str:
        return self._config[1]

    @property
    def environ(self) -> Mapping[str, str]:
        """The environment the settings were read with (typed models read theirs from it)."""
        return self._environ

    def tables(self, section: str) -> dict[str, Any]:
        """The nested tables of ``section`` in the config file (``[extract.streams.NAME]``,
        ``[extract.fields]``), validated by the extractor's source model."""
        return dict(self._tables.get(section, {}))

    def locate(self, dotted: str) -> str:
        """Where the config file writes ``dotted`` (``convo.toml:12``), for error messages."""
        where = self._locate(dotted) if self._locate else ""
        return where or (str(self.config_path) if self.config_path else "")

    # -- access by name ------------------------------------------------------------
    def get(self, name: str) -> object:
        """The value of setting ``name`` (secrets as :class:`Secret`); ``KeyError`` if none."""
        setting = self.registry.get(name)
        value = getattr(getattr(self, setting.section), setting.key)
        if isinstance(value, tuple):
            return tuple(_revealable(item) for item in value)
        return _revealable(value)

    def resolved(self, name: str) -> Resolved:
        value = self.get(name)
        for layer in self._found:
            if name in layer.found:
                return Resolved(value, *layer.found[name])
        return Resolved(value, Source.DEFAULT, "default")

    def source(self, name: str) -> Source:
        return self.resolved(name).source

    def _typed(self, name: str, kind: Kind, *, secret: bool = False) -> Any:
        setting = self.registry.get(name)
        if setting.kind is not kind or setting.is_secret != secret:
            raise TypeError(f"setting {name!r} is a {setting.type_name}")
        return self.get(name)

    def get_str(self, name: str) -> str:
        return str(self._typed(name, Kind.STR))

    def get_int(self, name: str) -> int:
        return int(self._typed(name, Kind.INT))

    def get_float(self, name: str) -> float:
        return float(self._typed(name, Kind.FLOAT))

    def get_bool(self, name: str) -> bool:
        return bool(self._typed(name, Kind.BOOL))

    def get_path(self, name: str) -> Path | None:
        """A path setting; ``None`` when it is empty/unset."""
        value: Path | None = self._typed(name, Kind.PATH)
        return value

    def require_path(self, name: str) -> Path:
        """A path setting that must be set (its default usually is)."""
        if (value := self.get_path(name)) is None:
            raise ConfigError(f"{name} is empty; set it in convo.toml or its environment variable")
        return value

    def get_list(self, name: str) -> tuple[str, ...]:
        return tuple(self._typed(name, Kind.LIST))

    def get_secret(self, name: str) -> Secret | None:
        """A secret setting, or ``None`` when it is not configured."""
        value: Secret | None = self._typed(name, Kind.SECRET, secret=True)
        return value

    def require_secret(self, name: str) -> Secret:
        """A secret setting that must be configured; a :class:`ConfigError` says how if not."""
        if (value := self.get_secret(name)) is None:
            raise ConfigError(f"{name} is not set; {self.registry.how_to_set_secret(name)}")
        return value

    def get_secret_list(self, name: str) -> tuple[Secret, ...]:
        """A secret list setting such as ``sandbox.workspaces``."""
        return tuple(self._typed(name, Kind.LIST, secret=True))

    # -- derived settings and display ------------------------------------------------
    def with_values(
        self,
        values: Mapping[str, object],
        origin: str,
        workspaces: tuple[WorkspaceSpec, ...] | None = None,
        monitors: tuple[MonitorSpec, ...] | None = None,
    ) -> Settings:
        """These settings with ``values`` (typed, by dotted name) in place, each reported as a
        flag from ``origin``; ``workspaces`` and ``monitors`` replace those tables."""
        sections: dict[str, dict[str, object]] = {}
        for name, value in values.items():
            setting = self.registry.get(name)
            sections.setdefault(setting.section, {})[setting.key] = value
        update: dict[str, object] = {
            section: getattr(self, section).model_copy(update=keys)
            for section, keys in sections.items()
        }
        if workspaces is not None:
            update["workspaces"] = workspaces
        if monitors is not None:
            update["monitors"] = monitors
        new = self.model_copy(update=update)
        overlay = _Overlay({name: (Source.FLAG, origin) for name in values})
        return new.loaded(
            (overlay, *self._found),
            self._config,
            self._tables,
            self._environ,
            self._locate,
        )

    def display(self) -> dict[str, dict[str, object]]:
        """A JSON-ready view: secrets are ``"***"`` (set) or ``None`` (unset), URLs' query
        values masked. ``{"warehouse.path": {"value": ..., "source": "env", "origin":
        "$CONVO_DB", "env": "CONVO_DB", "secret": False}, ...}``"""
        out: dict[str, dict[str, object]] = {}
        for setting in self.registry.settings:
            resolved = self.resolved(setting.name)
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

    __str__ = __repr__


def _revealable(value: object) -> object:
    return Secret(value.get_secret_value()) if isinstance(value, SecretStr) else value


def display_value(setting: Setting, value: object) -> object:
    """A value as shown: secrets ``***``, URLs with their query values masked."""
    if setting.is_secret:
        return MASK if value else None
    if setting.url and isinstance(value, str | tuple):
        return masked_url(value) if isinstance(value, str) else [masked_url(v) for v in value]
    if isinstance(value, Path):
        return str(value)
    return [str(item) for item in value] if isinstance(value, tuple) else value
