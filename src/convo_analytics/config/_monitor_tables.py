"""``[[monitors]]`` as written in convo.toml (and as the dashboard stores them): typed tables.

A monitor is data: a metric of the catalogue, the slice it watches (filters), a
window (a day or a week in a time zone), a condition (a threshold, or a change
against a baseline), the smallest sample it judges, and a severity. The model
here checks the shape of one table; whether its metric exists and its filters
name real values is checked by ``monitors/`` against the catalogue and the
warehouse. Problems come back as one line each, naming the table
(``[[monitors]] #2 k: ...``), by :func:`monitor_problems`.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from convo_analytics.config._table_problems import table_problems

__all__ = ["MONITOR_NAME", "MonitorFilters", "MonitorSpec", "monitor_problems"]

#: What a monitor's name may be (``convo monitors test NAME``, notification keys, URLs).
MONITOR_NAME = r"[A-Za-z0-9][A-Za-z0-9_.-]{0,62}"

_Values = tuple[Annotated[str, Field(min_length=1, max_length=200)], ...]


class MonitorFilters(BaseModel):
    """The slice a monitor watches: each listed dimension keeps only the values given
    (none: every value). ``workspace`` takes names or ids; ``topic`` a topic's number in
    its workspace (with the topics merged into it)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    workspace: _Values = ()
    channel: _Values = ()
    locale: _Values = ()
    source: _Values = ()
    intent: _Values = ()
    topic: _Values = ()
    tier: _Values = ()


class MonitorSpec(BaseModel):
    """One ``[[monitors]]`` table, as written (defaults: the issue's: the same weekday over
    the last 4 weeks, k = 3, at least 30 conversations)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: Annotated[str, Field(pattern=f"^{MONITOR_NAME}$")]
    metric: Annotated[str, Field(min_length=1, max_length=80)]
    description: Annotated[str, Field(max_length=500)] = ""
    filters: MonitorFilters = MonitorFilters()
    #: One series per value of this dimension (each judged and alerted on its own).
    group_by: Literal["channel", "locale", "source", "intent", "topic"] | None = None
    window: Literal["day", "week"] = "day"
    #: The time zone windows are cut in; default: the first of transform.timezones.
    timezone: str | None = None
    condition: Literal["baseline", "threshold"] = "baseline"
    baseline: Literal["same_weekday", "trailing"] = "same_weekday"
    #: same_weekday: how many earlier weeks (the same weekday, or the weeks before).
    weeks: Annotated[int, Field(ge=1, le=52)] = 4
    #: trailing: how many windows before the judged one.
    windows: Annotated[int, Field(ge=2, le=366)] = 14
    k: Annotated[float, Field(gt=0, le=100)] = 3.0
    direction: Literal["up", "down", "both"] = "both"
    above: float | None = None
    below: float | None = None
    min_sample: Annotated[int, Field(ge=0, le=10_000_000)] = 30
    #: Days a window waits after it ends before it is judged (None: the metric's own: 3
    #: for figures of how conversations end, which a recent day does not know yet; else 0).
    delay_days: Annotated[int, Field(ge=0, le=60)] | None = None
    severity: Literal["info", "warning", "critical"] = "warning"
    enabled: bool = True

    @model_validator(mode="after")
    def _condition(self) -> MonitorSpec:
        if self.condition == "threshold" and self.above is None and self.below is None:
            raise ValueError("a threshold monitor needs above = ... or below = ... (or both)")
        if self.condition == "baseline" and (self.above is not None or self.below is not None):
            raise ValueError('above/below belong to condition = "threshold"; remove them or set it')
        if self.above is not None and self.below is not None and self.below > self.above:
            raise ValueError("below is greater than above: no value could be within both")
        return self


def monitor_problems(
    raw: list[Any], origin: str = "[[monitors]]"
) -> tuple[list[MonitorSpec], list[str]]:
    """The tables of ``raw`` validated, and one line per problem (a malformed table, a
    repeated name)."""
    return table_problems(raw, MonitorSpec, origin, "monitor")
