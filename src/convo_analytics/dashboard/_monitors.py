"""The Monitors page's data: which monitors there are, what they found, and the form's checks.

No Streamlit here. Monitors are read as the run reads them (``[[monitors]]`` of
convo.toml, then the dashboard's store, ``monitoring.store_file``), but one bad
monitor never hides the others: each problem comes back as a line for the page
to show. What the monitors found is the snapshot's ``monitor_evaluations``, of
each monitor's *current* definition only (an edited monitor starts a new series,
decision D-MONITORS); a snapshot published before monitors existed has none,
which the page says instead of failing. The form's values become a
:class:`MonitorSpec` here, checked by the same model as a ``[[monitors]]`` table
and by ``monitors.check_monitor``: each problem is one readable line, never a
traceback. The page writes only to the store (``monitors.save_monitor``,
``delete_monitor``), never to the warehouse (decision D-MONITORS-PAGE).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import duckdb
import orjson
import polars as pl
from pydantic import ValidationError

from convo_analytics.config import MonitorFilters, MonitorSpec, Settings
from convo_analytics.dashboard._queries import has_table
from convo_analytics.errors import UserError
from convo_analytics.monitors import Monitor, check_monitor, read_stored
from convo_analytics.transform._frames import read_frame

__all__ = [
    "FILTER_DIMENSIONS",
    "Episode",
    "MonitorSetup",
    "breakdown_tables",
    "example_links",
    "form_values",
    "has_monitor_evaluations",
    "list_monitors",
    "monitor_episodes",
    "monitor_history",
    "monitor_setup",
    "monitor_states",
    "page_link_of",
    "spec_from_form",
]

#: The filters the form offers, in its order (each a comma-separated list of values).
FILTER_DIMENSIONS = tuple(MonitorFilters.model_fields)
#: The dimensions an explanation splits a change over, in the order the page shows them.
BREAKDOWN_ORDER = ("channel", "intent", "topic", "locale", "source", "model_tier")


@dataclass(frozen=True, slots=True)
class MonitorSetup:
    """What the page needs of the settings: the ``[[monitors]]`` tables (read-only here),
    the store the page writes (None: ``monitoring.store_file`` unset) and the time zone
    a monitor without one cuts its windows in."""

    config: tuple[MonitorSpec, ...] = ()
    store: Path | None = None
    default_timezone: str = "UTC"


def monitor_setup(settings: Settings) -> MonitorSetup:
    store = settings.get_path("monitoring.store_file")
    zones = settings.get_list("transform.timezones") or ["UTC"]
    return MonitorSetup(tuple(settings.monitors), store, str(zones[0]))


def list_monitors(setup: MonitorSetup) -> tuple[list[Monitor], list[str]]:
    """Every monitor (the config's, then the store's) that can be judged, and one line per
    monitor that cannot (or per store that cannot be read): the run refuses those, so
    the page says why instead of hiding the rest."""
    out: list[Monitor] = []
    problems: list[str] = []
    for i, spec in enumerate(setup.config):
        monitor = Monitor.of(spec, "config", setup.default_timezone)
        try:
            check_monitor(monitor, f"[[monitors]] #{i + 1} ({spec.name})")
        except UserError as exc:
            problems.append(str(exc))
        out.append(monitor)
    if setup.store is None:
        return out, problems
    try:
        stored = read_stored(setup.store)
    except UserError as exc:
        return out, [*problems, str(exc)]
    names = {m.name for m in out}
    for spec in stored:
        if spec.name in names:
            problems.append(
                f"stored monitor {spec.name!r} has the name of a [[monitors]] table, so the "
                "run refuses both; delete the stored one below or rename the table"
            )
            continue
        monitor = Monitor.of(spec, "dashboard", setup.default_timezone)
        try:
            check_monitor(monitor, f"stored monitor {spec.name!r}")
        except UserError as exc:
            problems.append(str(exc))
        out.append(monitor)
        names.add(spec.name)
    return out, problems


# -- what the snapshot says ----------------------------------------------------------------------


def has_monitor_evaluations(con: duckdb.DuckDBPyConnection) -> bool:
    """Whether the snapshot has ``monitor_evaluations`` (one published before monitors
    existed has not)."""
    return has_table(con, "monitor_evaluations")


Versions = Sequence[tuple[str, str]]


def _scope(versions: Versions, workspaces: Sequence[str] | None) -> tuple[str, list[Any]]:
    """The WHERE clause of the current definitions' rows, of ``workspaces`` (None: all)."""
    pairs = " OR ".join("(monitor = ? AND definition_version = ?)" for _ in versions)
    params: list[Any] = [v for pair in versions for v in pair]
    where = f"({pairs})" if pairs else "false"
    if workspaces is not None:
        where += f" AND workspace_id IN ({', '.join('?' * len(workspaces)) or 'NULL'})"
        params += list(workspaces)
    return where, params


def monitor_states(
    con: duckdb.DuckDBPyConnection, versions: Versions, workspaces: Sequence[str] | None = None
) -> pl.DataFrame:
    """Each series of the monitors' current definitions (``versions``: name, version) at its
    latest window: its state, that window, the last window that was judged, the episode
    it is in, and the value with its bounds."""
    where, params = _scope(versions, workspaces)
    return read_frame(
        con,
        f"""SELECT monitor, workspace_id, series, state, window_start, window_end,
                   last_judged, episode_start, value, lower_bound, upper_bound, sample, severity
            FROM (SELECT *,
                    max(CASE WHEN judged THEN window_start END) OVER w AS last_judged,
                    row_number() OVER (w ORDER BY window_start DESC) AS n
                  FROM monitor_evaluations WHERE {where}
                  WINDOW w AS (PARTITION BY monitor, workspace_id, series))
            WHERE n = 1 ORDER BY monitor, workspace_id, series""",
        params,
    )


def monitor_history(
    con: duckdb.DuckDBPyConnection,
    name: str,
    version: str,
    workspaces: Sequence[str] | None = None,
) -> pl.DataFrame:
    """Every window of a monitor's current definition, oldest first, per series: the value
    with its baseline and bounds, the sample, and whether it was judged, breached, and in
    which state it left the series (for the chart and its table)."""
    where, params = _scope([(name, version)], workspaces)
    return read_frame(
        con,
        f"""SELECT workspace_id, series, window_start, window_end, value, baseline,
                   lower_bound, upper_bound, sample, judged, breach, state, reason
            FROM monitor_evaluations WHERE {where}
            ORDER BY workspace_id, series, window_start""",
        params,
    )


@dataclass(frozen=True, slots=True)
class Episode:
    """An episode of one series: the window that opened it (with its explanation), the last
    window in breach, and the one that resolved it (None: still open)."""

    workspace_id: str
    series: str
    start: date
    last_breach: date
    resolved: date | None
    severity: str
    metric: str
    value: float | None
    lower_bound: float | None
    upper_bound: float | None
    sample: int
    explanation: dict[str, Any]

    @property
    def open(self) -> bool:
        return self.resolved is None


def monitor_episodes(
    con: duckdb.DuckDBPyConnection,
    name: str,
    version: str,
    workspaces: Sequence[str] | None = None,
) -> list[Episode]:
    """The episodes of a monitor's current definition, open ones first, then the latest."""
    where, params = _scope([(name, version)], workspaces)
    rows = con.execute(
        f"""SELECT workspace_id, series, episode_start,
                   max(CASE WHEN breach THEN window_start END) AS last_breach,
                   max(CASE WHEN state = 'resolved' THEN window_start END) AS resolved,
                   arg_min(severity, window_start) AS severity,
                   arg_min(metric, window_start) AS metric,
                   arg_min(value, window_start) AS value,
                   arg_min(lower_bound, window_start) AS lower_bound,
                   arg_min(upper_bound, window_start) AS upper_bound,
                   arg_min(sample, window_start) AS sample,
                   arg_min(explanation::VARCHAR, window_start) AS explanation
            FROM monitor_evaluations
            WHERE {where} AND episode_start IS NOT NULL
            GROUP BY workspace_id, series, episode_start
            ORDER BY resolved IS NOT NULL, episode_start DESC, workspace_id, series""",
        params,
    ).fetchall()
    out = []
    for (ws, series, start, last, resolved, severity, metric, value, lower, upper, sample,
         explained) in rows:  # fmt: skip
        try:
            explanation = orjson.loads(explained) if explained else {}
        except orjson.JSONDecodeError:
            explanation = {}
        out.append(Episode(
            ws, series, start, last or start, resolved, severity or "", metric or "", value,
            lower, upper, int(sample or 0), explanation if isinstance(explanation, dict) else {},
        ))  # fmt: skip
    return out


def breakdown_tables(explanation: Mapping[str, Any]) -> dict[str, pl.DataFrame]:
    """The explanation's split of the change, a table per dimension (its slices: label,
    value, count, expected, excess, share), in the page's order of dimensions."""
    split = explanation.get("breakdown") or {}
    if not isinstance(split, Mapping):
        return {}
    out = {}
    for dim in (*BREAKDOWN_ORDER, *sorted(set(split) - set(BREAKDOWN_ORDER))):
        slices = (split.get(dim) or {}).get("slices") if isinstance(split.get(dim), Mapping) else []
        if not slices:
            continue
        out[dim] = pl.DataFrame(
            [
                {
                    "slice": str(s.get("label", s.get("value", ""))),
                    "value": str(s.get("value", "")),
                    "count": _float(s.get("count")),
                    "expected": _float(s.get("expected")),
                    "excess": _float(s.get("excess")),
                    "share": _float(s.get("share")),
                }
                for s in slices
                if isinstance(s, Mapping)
            ],
            schema={"slice": pl.String, "value": pl.String, "count": pl.Float64,
                    "expected": pl.Float64, "excess": pl.Float64, "share": pl.Float64},
        )  # fmt: skip
    return out


def _float(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


#: The pages an alert's links may open inside the app (its last path segment -> page).
_PAGES = {"": "app_pages/overview.py", "conversations": "app_pages/conversations.py"}


def page_link_of(url: Any) -> tuple[str, dict[str, str | list[str]]] | None:
    """An alert's absolute link (made with ``monitoring.dashboard_url``) as the app's own
    page and query parameters, so that it opens in this dashboard wherever it is served
    (None: not a link to a page of the app)."""
    if not isinstance(url, str) or len(url) > 4000:
        return None
    parts = urlsplit(url)
    page = _PAGES.get(parts.path.rstrip("/").rpartition("/")[2]) if parts.path else _PAGES[""]
    if page is None:
        return None
    params: dict[str, str | list[str]] = {}
    for key, value in parse_qsl(parts.query):
        held = params.get(key)
        if held is None:
            params[key] = value
        else:
            params[key] = [*([held] if isinstance(held, str) else held), value]
    return page, params


def example_links(explanation: Mapping[str, Any]) -> list[tuple[dict[str, Any], Any]]:
    """The explanation's example conversations, each with its in-app link (or None)."""
    examples = explanation.get("examples") or []
    urls = ((explanation.get("links") or {}).get("examples") or {}) if isinstance(
        explanation.get("links"), Mapping) else {}  # fmt: skip
    out = []
    for example in examples if isinstance(examples, list) else []:
        if isinstance(example, Mapping) and example.get("conversation_id"):
            cid = str(example["conversation_id"])
            url = urls.get(cid) if isinstance(urls, Mapping) else None
            out.append((dict(example), page_link_of(url)))
    return out


# -- the form ------------------------------------------------------------------------------------


def form_values(spec: MonitorSpec | None) -> dict[str, Any]:
    """The form's widgets' values for ``spec`` (None: a new monitor's defaults); the
    optional numbers (above, below, delay days) as text, blank when not set."""
    base = spec or MonitorSpec(name="new-monitor", metric="escalationRate")
    values: dict[str, Any] = {
        "name": spec.name if spec is not None else "",
        "metric": base.metric,
        "description": base.description,
        "group_by": base.group_by or "",
        "window": base.window,
        "timezone": base.timezone or "",
        "condition": base.condition,
        "baseline": base.baseline,
        "weeks": base.weeks,
        "windows": base.windows,
        "k": base.k,
        "direction": base.direction,
        "above": "" if base.above is None else f"{base.above:g}",
        "below": "" if base.below is None else f"{base.below:g}",
        "min_sample": base.min_sample,
        "delay_days": "" if base.delay_days is None else str(base.delay_days),
        "severity": base.severity,
        "enabled": base.enabled,
    }
    for dim in FILTER_DIMENSIONS:
        values[f"filter_{dim}"] = ", ".join(getattr(base.filters, dim))
    return values


def _number(values: Mapping[str, Any], key: str, problems: list[str]) -> Any:
    """An optional number the form takes as text (blank: not set), as given otherwise."""
    value = values.get(key)
    if not isinstance(value, str):
        return value
    text = value.strip()
    if not text:
        return None
    try:
        return float(text)
    except ValueError:
        problems.append(f"{key}: {text[:40]!r} is not a number; write one, or leave it blank")
        return None


def _table(values: Mapping[str, Any], problems: list[str]) -> dict[str, Any]:
    """The ``[[monitors]]`` table the form's values write (only what applies: a threshold's
    limits for a threshold, a baseline's parameters for a baseline)."""
    filters = {}
    for dim in FILTER_DIMENSIONS:
        text = str(values.get(f"filter_{dim}") or "")
        parts = [p.strip() for p in text.split(",") if p.strip()]
        if parts:
            filters[dim] = list(dict.fromkeys(parts))
    table: dict[str, Any] = {
        "name": str(values.get("name") or "").strip(),
        "metric": str(values.get("metric") or "").strip(),
        "description": str(values.get("description") or "").strip(),
        "window": values.get("window"),
        "condition": values.get("condition"),
        "min_sample": values.get("min_sample"),
        "severity": values.get("severity"),
        "enabled": bool(values.get("enabled", True)),
    }
    if filters:
        table["filters"] = filters
    if values.get("group_by"):
        table["group_by"] = values["group_by"]
    if str(values.get("timezone") or "").strip():
        table["timezone"] = str(values["timezone"]).strip()
    delay = _number(values, "delay_days", problems)
    if delay is not None:
        table["delay_days"] = int(delay) if float(delay).is_integer() else delay
    if values.get("condition") == "threshold":
        for key in ("above", "below"):
            table[key] = _number(values, key, problems)
    else:
        table["baseline"] = values.get("baseline")
        counted = "weeks" if values.get("baseline") == "same_weekday" else "windows"
        table[counted] = values.get(counted)
        table["k"] = values.get("k")
        table["direction"] = values.get("direction")
    return {k: v for k, v in table.items() if v is not None}


def _problem(error: Mapping[str, Any]) -> str:
    """One pydantic error as the form says it: the field, then what is wrong."""
    loc = ".".join(str(p) for p in error["loc"])
    msg = str(error["msg"]).removeprefix("Value error, ")
    if error["type"] == "string_pattern_mismatch" and tuple(error["loc"]) == ("name",):
        msg = (
            f"{str(error['input'])[:80]!r} is not a monitor name: letters, digits, '.', '_' "
            "and '-', starting with a letter or digit, at most 63"
        )
    return f"{loc}: {msg}" if loc else msg


def spec_from_form(
    values: Mapping[str, Any],
    setup: MonitorSetup,
    stored: Sequence[str] = (),
    editing: str | None = None,
) -> tuple[MonitorSpec | None, list[str]]:
    """The monitor the form's ``values`` describe, or one readable line per problem: what
    the model refuses (a value out of range, a threshold without a limit), a name taken
    by a ``[[monitors]]`` table (or by another stored monitor, unless it is the one being
    edited, ``editing``), what ``check_monitor`` refuses (an unknown metric or time zone,
    a tier filter on a figure about conversations)."""
    problems: list[str] = []
    table = _table(values, problems)
    if problems:
        return None, problems
    try:
        spec = MonitorSpec.model_validate(table)
    except ValidationError as exc:
        return None, [_problem(e) for e in exc.errors()]
    if spec.name in {s.name for s in setup.config}:
        return None, [
            f"name: {spec.name!r} is a monitor of convo.toml ([[monitors]]), which is edited "
            "there; choose another name"
        ]
    if spec.name in stored and spec.name != editing:
        return None, [
            f"name: a monitor made in the dashboard is already called {spec.name!r}; choose "
            "another name, or pick it under 'Edit' to change it"
        ]
    try:
        check_monitor(Monitor.of(spec, "dashboard", setup.default_timezone), "monitor")
    except UserError as exc:
        return None, [str(exc)]
    return spec, []
