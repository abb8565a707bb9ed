"""A transform's configuration built from the settings, and the time zones days are cut in.

`convo transform` and the nightly run's ``transform`` step (and its check)
both call :func:`transform_config`, so the two bring the marts up to date
alike; the exports and readers take their default zone from
:func:`default_zone` (decision D-CONFIG-BUILDERS).
"""

from __future__ import annotations

from typing import TYPE_CHECKING
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from convo_analytics.errors import UserError
from convo_analytics.topics import TopicConfig
from convo_analytics.transform._gaps import check_patterns
from convo_analytics.transform._run import TransformConfig

if TYPE_CHECKING:
    from convo_analytics.config import Settings

__all__ = ["SETTING_ZONES", "checked_zone", "default_zone", "topic_config", "transform_config"]

#: How errors name the zones when no flag set them (the nightly run has none).
SETTING_ZONES = "transform.timezones:"


def checked_zone(flag: str, value: str) -> str:
    """``value`` when it names an IANA zone; else the user error naming ``flag``."""
    try:
        ZoneInfo(value)
    except (ZoneInfoNotFoundError, ValueError):
        raise UserError(
            f"{flag} {value!r} is not an IANA time zone (e.g. UTC, Europe/Berlin)"
        ) from None
    return value


def default_zone(settings: Settings, tz: str | None = None, *, named: str = "--tz") -> str:
    """The zone an export or reader cuts days in: ``tz`` when given (a ``--tz`` flag), else
    the first of ``transform.timezones`` (UTC when there is none); checked, errors naming
    it as ``named``."""
    return checked_zone(named, tz or (settings.get_list("transform.timezones") or ("UTC",))[0])


def transform_config(
    settings: Settings,
    *,
    reconcile: bool = True,
    full: bool = False,
    named: str = "--tz",
    rediscover: tuple[str, ...] = (),
) -> TransformConfig:
    """The transform's configuration from the ``transform.*`` settings.

    The zones are checked and deduplicated (errors name them as ``named``: the CLI's
    ``--tz``, or :data:`SETTING_ZONES`); none at all is a user error. The fallback
    patterns are checked as the transform will use them (a user error naming
    ``transform.fallback_patterns`` otherwise). ``reconcile`` compares with the service's
    summary; ``full`` rebuilds every partition.
    """
    zones = tuple(
        dict.fromkeys(checked_zone(named, z) for z in settings.get_list("transform.timezones"))
    )
    if not zones:
        raise UserError(
            f"{named.rstrip(':')}: name at least one time zone (transform.timezones is empty)"
        )
    return TransformConfig(
        timezones=zones,
        low_confidence_threshold=settings.get_float("transform.low_confidence_threshold"),
        reconcile=reconcile,
        tolerance=settings.get_float("transform.tolerance"),
        full=full,
        topics=topic_config(settings, rediscover),
        fallback_patterns=check_patterns(settings.get_list("transform.fallback_patterns")),
    )


def topic_config(settings: Settings, rediscover: tuple[str, ...] = ()) -> TopicConfig:
    """How the transform places conversations in topics, from the ``topics.*`` settings;
    ``rediscover`` names the workspaces to cluster again ("*": all)."""
    return TopicConfig(
        enabled=settings.topics.enabled,
        min_conversations=settings.topics.min_conversations,
        messages=settings.topics.messages,
        curations_path=settings.topics.curations_file,
        rediscover=rediscover,
    )
