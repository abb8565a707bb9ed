"""A monitor as the evaluation uses it: its table, where it came from, and its version.

Monitors come from two places: ``[[monitors]]`` in convo.toml and the dashboard's
own store (:mod:`._store`); a name is one monitor (the store cannot shadow the
config). Each has a *definition version*, a hash of everything that decides its
verdicts (metric, filters, window and its time zone, condition, sample, severity):
a changed definition is a new series of evaluations, so its episodes start anew
and an old alert is never "resolved" by a different rule (decision D-MONITORS).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import orjson

from convo_analytics.config import MonitorSpec
from convo_analytics.errors import UserError
from convo_analytics.monitors._catalogue import MetricSpec, metric_spec

__all__ = ["Monitor", "Origin", "check_monitor", "monitors_of"]

Origin = Literal["config", "dashboard"]

#: The spec's fields that change no verdict (so no new version when edited).
_NOT_JUDGING = {"name", "description", "enabled"}


@dataclass(frozen=True, slots=True)
class Monitor:
    """A monitor ready to judge: its spec, its origin, its time zone and version."""

    spec: MonitorSpec
    origin: Origin
    timezone: str
    version: str

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def metric(self) -> MetricSpec:
        return metric_spec(self.spec.metric)

    @classmethod
    def of(cls, spec: MonitorSpec, origin: Origin, default_timezone: str) -> Monitor:
        tz = spec.timezone or default_timezone
        judged = spec.model_dump(mode="json", exclude=_NOT_JUDGING)
        judged["timezone"] = tz
        digest = hashlib.sha256(orjson.dumps(judged, option=orjson.OPT_SORT_KEYS)).hexdigest()
        return cls(spec=spec, origin=origin, timezone=tz, version=digest[:16])

    def describe(self) -> str:
        """One line saying what it judges (``convo monitors list``, the dashboard)."""
        s = self.spec
        if s.condition == "threshold":
            parts = [f"above {s.above:g}" if s.above is not None else "",
                     f"below {s.below:g}" if s.below is not None else ""]  # fmt: skip
            rule = "outside " + " or ".join(p for p in parts if p)
        elif s.baseline == "same_weekday":
            base = "the same weekday" if s.window == "day" else "the weeks"
            rule = f"{s.direction} by more than {s.k:g} sd against {base} over {s.weeks} weeks"
        else:
            trailing = f"the trailing {s.windows} {s.window}s"
            rule = f"{s.direction} by more than {s.k:g} sd against {trailing}"
        filters = [
            f"{dim}={'|'.join(values)}" for dim, values in s.filters.model_dump().items() if values
        ]
        slice_ = f" where {', '.join(filters)}" if filters else ""
        per = f" per {s.group_by}" if s.group_by else ""
        return (
            f"{s.metric}{slice_}{per}, per {s.window} ({self.timezone}): {rule}; "
            f"at least {s.min_sample} conversations; {s.severity}"
        )


def check_monitor(monitor: Monitor, where: str) -> None:
    """What the config's model could not check: the metric is in the catalogue, the time
    zone exists, a model tier filter is on a metric about responses. UserError if not."""
    spec = monitor.spec
    metric = metric_spec(spec.metric, f"{where} metric")
    try:
        ZoneInfo(monitor.timezone)
    except (ZoneInfoNotFoundError, ValueError):
        raise UserError(
            f"{where} timezone {monitor.timezone!r} is not an IANA time zone; use one such as "
            "UTC or Europe/Berlin"
        ) from None
    if spec.filters.tier and not metric.responses:
        raise UserError(
            f"{where} filters.tier: {spec.metric} is about conversations, which have no model "
            "tier; remove the tier filter or watch a response metric (e.g. "
            "lowConfidenceShare, latencyP95Ms)"
        )


def monitors_of(
    config: Sequence[MonitorSpec], stored: Iterable[MonitorSpec], default_timezone: str
) -> list[Monitor]:
    """Every monitor (the config's, then the store's), each checked; a UserError naming the
    first problem. A stored monitor with a configured one's name is refused."""
    out = []
    for i, spec in enumerate(config):
        monitor = Monitor.of(spec, "config", default_timezone)
        check_monitor(monitor, f"[[monitors]] #{i + 1} ({spec.name})")
        out.append(monitor)
    names = {m.name for m in out}
    for spec in stored:
        if spec.name in names:
            raise UserError(
                f"monitor {spec.name!r} is both in [[monitors]] and in the dashboard's store; "
                "rename or delete one (`convo monitors delete NAME` removes the stored one)"
            )
        monitor = Monitor.of(spec, "dashboard", default_timezone)
        check_monitor(monitor, f"stored monitor {spec.name!r}")
        out.append(monitor)
        names.add(spec.name)
    return out
