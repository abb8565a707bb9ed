"""Configuration: one typed model (pydantic-settings), filled from convo.toml, environment
variables and CLI flags.

Precedence, highest first: CLI flag > environment variable > config file > default.

Typical use from code that is not a CLI command::

    from convo_analytics.config import load_settings

    settings = load_settings(None, {})
    url = settings.service.base_url  # or settings.get_str("service.base_url")
    key = settings.require_secret("service.api_key").reveal()

CLI commands use :func:`convo_analytics.cli.settings_from_context` instead, which
also honours the root ``--config`` option.

To add a setting, add a field to its section in :mod:`._sections`.
"""

from __future__ import annotations

from convo_analytics.config._model import (
    CONFIG_ENV_VAR,
    ConfigError,
    Kind,
    Registry,
    Section,
    Setting,
    Source,
    describe,
    generic_env_var,
    setting,
)
from convo_analytics.config._monitor_tables import (
    MONITOR_NAME,
    MonitorFilters,
    MonitorSpec,
    monitor_problems,
)
from convo_analytics.config._report_tables import (
    REPORT_CHANNELS,
    REPORT_NAME,
    WEEKDAYS,
    ReportSpec,
    report_problems,
)
from convo_analytics.config._secret import MASK, Secret
from convo_analytics.config._settings import Resolved, Settings
from convo_analytics.config._sources import (
    DEFAULT_CONFIG_NAME,
    ConfigLocation,
    find_config_file,
    load_settings,
)
from convo_analytics.config._urls import masked_url, url_secret
from convo_analytics.config._workspaces import (
    DEFAULT_WORKSPACE,
    ApiKeyAuth,
    OAuthAuth,
    WorkspaceConfig,
    load_workspaces,
    select_workspaces,
    serve_tokens,
)

#: Every setting of :class:`Settings`, described (a view of the model, in its order).
REGISTRY = describe(Settings)
SETTINGS = REGISTRY.settings

__all__ = [
    "CONFIG_ENV_VAR",
    "DEFAULT_CONFIG_NAME",
    "DEFAULT_WORKSPACE",
    "MASK",
    "MONITOR_NAME",
    "REGISTRY",
    "REPORT_CHANNELS",
    "REPORT_NAME",
    "SETTINGS",
    "WEEKDAYS",
    "ApiKeyAuth",
    "ConfigError",
    "ConfigLocation",
    "Kind",
    "MonitorFilters",
    "MonitorSpec",
    "OAuthAuth",
    "Registry",
    "ReportSpec",
    "Resolved",
    "Secret",
    "Section",
    "Setting",
    "Settings",
    "Source",
    "WorkspaceConfig",
    "describe",
    "find_config_file",
    "generic_env_var",
    "load_settings",
    "load_workspaces",
    "masked_url",
    "monitor_problems",
    "report_problems",
    "select_workspaces",
    "serve_tokens",
    "setting",
    "url_secret",
]
