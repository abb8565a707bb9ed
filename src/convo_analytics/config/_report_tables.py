"""``[[reports]]`` as written in convo.toml: a notebook run on a schedule and sent to people.

A report names a notebook (a saved one or a starter), the values of some of its
parameters, a schedule (``daily``: yesterday's; ``weekly``: the previous ISO
week's, on a weekday), the workspaces it is made for (one report each), who
gets it and through which notification channels. The model here checks the
shape of one table; whether the notebook exists is found when it runs (a saved
notebook can be deleted from the dashboard: that report fails, is recorded and
alerted), and whether the channels and workspaces are configured is checked by
``reports/`` before ``convo run`` locks anything. Problems come back as one
line each, naming the table (``[[reports]] #2 weekday: ...``), by
:func:`report_problems` (decision D-NOTEBOOK-SCHEDULED-REPORTS).
"""

from __future__ import annotations

import re
from datetime import date
from email.utils import parseaddr
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from convo_analytics.config._table_problems import table_problems

__all__ = ["REPORT_CHANNELS", "REPORT_NAME", "WEEKDAYS", "ReportSpec", "report_problems"]

#: What a report's name may be: it names a folder (``reporting.out_dir/NAME/``) and keys.
REPORT_NAME = r"[A-Za-z0-9][A-Za-z0-9_.-]{0,62}"
#: A notebook's name (the file's stem; the same rule as ``notebooks.notebook_name``).
_NOTEBOOK = r"[a-z0-9][a-z0-9_-]{0,63}"
#: A parameter's name (``notebooks._params``).
_PARAM = re.compile(r"[a-z_][a-z0-9_]{0,39}")
#: The notification channels a report may go through (the run's own alert URL and
#: command are for the run: ``run.alert_webhook_url``, ``run.alert_command``).
REPORT_CHANNELS = ("email", "webhook", "slack")
WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
_MAX_VALUES = 1000
_MAX_TEXT = 1000

Weekday = Literal["monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"]


def _text(name: str, value: Any) -> str:
    """One parameter value as the text ``convo notebook run --param`` would give."""
    if isinstance(value, bool) or not isinstance(value, str | int | float | date):
        raise ValueError(
            f"{name}: a value is a string, a number or a date (or a list of them), "
            f"not {type(value).__name__}"
        )
    text = value.isoformat() if isinstance(value, date) else str(value)
    if len(text) > _MAX_TEXT or "\x00" in text:
        raise ValueError(f"{name}: a value is at most {_MAX_TEXT} characters, no NUL")
    return text


def _address(value: str) -> str:
    if (
        not isinstance(value, str)
        or " ".join(value.split()) != value
        or "@" not in (parseaddr(value)[1])
    ):
        raise ValueError(f"{value!r} is not an email address; give one such as team@example.com")
    return value


class ReportSpec(BaseModel):
    """One ``[[reports]]`` table, as written."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: Annotated[str, Field(pattern=f"^{REPORT_NAME}$")]
    notebook: str
    #: Parameter values by name, each as text (a list: a ``choices`` parameter's values).
    params: dict[str, tuple[str, ...]] = Field(default_factory=dict)
    schedule: Literal["daily", "weekly"]
    #: The day a weekly report is made (a run later in the same ISO week catches up).
    weekday: Weekday = "monday"
    #: The workspaces it is made for, one report each (empty: every configured workspace).
    workspaces: tuple[Annotated[str, Field(min_length=1, max_length=63)], ...] = ()
    #: Who gets it by email (empty: ``notify.email_to``).
    recipients: tuple[str, ...] = ()
    #: The channels that deliver it (None: email and the signed webhook, those configured).
    channels: tuple[Literal["email", "webhook", "slack"], ...] | None = None
    enabled: bool = True

    @field_validator("params", mode="before")
    @classmethod
    def _params(cls, raw: Any) -> dict[str, tuple[str, ...]]:
        if not isinstance(raw, dict):
            raise ValueError('write an inline table, e.g. params = { reason = "timeout" }')
        out: dict[str, tuple[str, ...]] = {}
        for name, value in raw.items():
            if not isinstance(name, str) or not _PARAM.fullmatch(name):
                raise ValueError(
                    f"{name!r} is not a parameter name (lower-case letters, digits and _)"
                )
            if name == "workspace":
                raise ValueError(
                    "workspace: a report's workspaces are chosen with workspaces = [...]"
                )
            items = list(value) if isinstance(value, list | tuple) else [value]
            if len(items) > _MAX_VALUES:
                raise ValueError(f"{name}: at most {_MAX_VALUES} values")
            out[name] = tuple(_text(name, item) for item in items)
        return out

    @field_validator("notebook")
    @classmethod
    def _notebook(cls, value: str) -> str:
        if not re.fullmatch(_NOTEBOOK, value):
            raise ValueError(
                f"{value[:80]!r} is not a notebook name: a notebook's file stem (lower-case "
                "letters, digits, - and _), e.g. weekly_review"
            )
        return value

    @field_validator("recipients")
    @classmethod
    def _recipients(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        return tuple(_address(a) for a in value)

    @field_validator("workspaces", "channels")
    @classmethod
    def _once(cls, value: tuple[str, ...] | None) -> tuple[str, ...] | None:
        if value is not None and len(set(value)) != len(value):
            raise ValueError("a name is listed twice; list each once")
        return value

    @model_validator(mode="after")
    def _weekday(self) -> ReportSpec:
        if self.schedule == "daily" and "weekday" in self.model_fields_set:
            raise ValueError('weekday belongs to schedule = "weekly"; remove it or set that')
        return self


def report_problems(raw: list[Any]) -> tuple[list[ReportSpec], list[str]]:
    """The tables of ``raw`` validated, and one line per problem (a malformed table, a
    repeated name)."""
    return table_problems(raw, ReportSpec, "[[reports]]", "report")
