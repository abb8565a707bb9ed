"""``[privacy]`` read into the configuration a scrubber runs with (D-CONFIG-BUILDERS).

The mode is ``privacy.scrub`` unless the workspace's ``[[workspaces]]`` table says
``privacy_scrub``; a workspace is named by its id (the ``workspace_id`` of every
warehouse table, stable when convo.toml renames it) or, for a table without one, by
its name. The extra patterns and the region are checked here, so a bad one is one
line naming the setting before anything is read.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from convo_analytics.config import Secret, Settings
from convo_analytics.errors import UserError
from convo_analytics.privacy._extra import ExtraPattern, parse_extra_patterns
from convo_analytics.privacy._phone import supported_region

__all__ = ["MODES", "Mode", "PrivacyConfig", "privacy_config"]

Mode = Literal["off", "mask", "hash"]
MODES: tuple[Mode, ...] = ("off", "mask", "hash")


@dataclass(frozen=True)
class PrivacyConfig:
    """What a scrubber of one workspace runs with."""

    mode: Mode = "mask"
    #: Where national phone numbers are read (ISO 3166-1 alpha-2; "" for none).
    default_region: str = "US"
    extra_patterns: tuple[ExtraPattern, ...] = ()
    #: ``privacy.key``; None: the generated key in ``generated_key_file``.
    key: Secret | None = None
    generated_key_file: Path | None = None


def _mode(value: str, where: str) -> Mode:
    if value not in MODES:
        raise UserError(f"{where} must be off, mask or hash, not {value!r}; fix it")
    return value


def privacy_config(settings: Settings, workspace_id: str | None = None) -> PrivacyConfig:
    """The ``[privacy]`` settings, with ``workspace_id``'s own ``privacy_scrub``."""
    mode = _mode(settings.get_str("privacy.scrub"), "privacy.scrub")
    if workspace_id is not None:
        specs = sorted(settings.workspaces, key=lambda s: s.workspace_id != workspace_id)
        for spec in specs:
            if workspace_id in (spec.workspace_id, spec.name) and spec.privacy_scrub:
                mode = _mode(spec.privacy_scrub, f"[[workspaces]] {spec.name} privacy_scrub")
                break
    region = settings.get_str("privacy.default_region").upper()
    if region and not supported_region(region):
        raise UserError(
            f"privacy.default_region {region!r} is not a region phone numbers are known "
            'for; give an ISO 3166-1 alpha-2 code such as US, GB or DE, or "" for none'
        )
    return PrivacyConfig(
        mode=mode,
        default_region=region,
        extra_patterns=parse_extra_patterns(settings.get_list("privacy.extra_patterns")),
        key=settings.get_secret("privacy.key"),
        generated_key_file=settings.get_path("privacy.generated_key_file"),
    )
