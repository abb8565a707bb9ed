"""What a monitor tells: the alert that opens an episode and the notice that closes it.

Both are :class:`notify.Notification` values with a key stable for the episode
(:func:`._evaluate.notice_key`), so however often a run is repeated, each
channel gets one alert and one resolve notice per episode. The text is plain;
values from users (topic names, slice values) stay as they are here and each
channel escapes them for its medium (D-NOTIFY-CHANNELS).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, date, datetime
from typing import Any

from convo_analytics.monitors._catalogue import CATALOGUE
from convo_analytics.notify import Notification

__all__ = ["format_value", "notice_of"]

#: Dimensions in the order an alert lists them.
_ORDER = ("channel", "intent", "topic", "locale", "source", "model_tier")


def format_value(metric: str, value: float | None) -> str:
    """A metric's value as people read it: a share in %, a count whole, others short."""
    if value is None:
        return "n/a"
    spec = CATALOGUE.get(metric)
    if spec is not None and spec.kind == "proportion":
        return f"{100 * value:.1f} %"
    if spec is not None and spec.kind == "count":
        return f"{value:,.1f}" if value != int(value) else f"{int(value):,}"
    return f"{value:,.2f}"


def _window_text(row: Mapping[str, Any]) -> str:
    start, end = row["window_start"], row["window_end"]
    return f"on {start}" if start == end else f"in the week {start} to {end}"


def _where(row: Mapping[str, Any]) -> str:
    ws = row["workspace_id"] or "(default)"
    series = f", {row['series']}" if row["series"] else ""
    return f"workspace {ws}{series}"


def _bounds_text(row: Mapping[str, Any]) -> str:
    metric = row["metric"]
    lower, upper = row.get("lower_bound"), row.get("upper_bound")
    parts = []
    if row.get("baseline") is not None:
        parts.append(f"expected {format_value(metric, row['baseline'])}")
    if lower is not None and upper is not None:
        parts.append(f"normal {format_value(metric, lower)} to {format_value(metric, upper)}")
    elif upper is not None:
        parts.append(f"normal up to {format_value(metric, upper)}")
    elif lower is not None:
        parts.append(f"normal from {format_value(metric, lower)}")
    parts.append(f"{row['sample']:,} conversations")
    return "; ".join(parts)


def _breakdown_lines(metric: str, explanation: Mapping[str, Any]) -> list[str]:
    split = explanation.get("breakdown") or {}
    spec = CATALOGUE.get(metric)
    counted = spec.numerator if spec is not None and spec.numerator else metric
    lines = []
    for dim in _ORDER:
        if dim not in split:
            continue
        total = split[dim]["excess"]
        shares = ", ".join(
            f"{s['label']} {100 * s['share']:.0f} %" for s in split[dim]["slices"][:3]
        )
        lines.append(f"- {dim}: {shares} (of {total:+,.1f} {counted} against the baseline)")
    return lines


def notice_of(row: Mapping[str, Any], description: str = "") -> Notification:
    """The alert (``state`` alerting) or resolve notice (``state`` resolved) of a judged row
    (a ``monitor_evaluations`` row with ``notification_key``)."""
    metric, alerting = row["metric"], row["state"] == "alerting"
    value = format_value(metric, row["value"])
    where, when = _where(row), _window_text(row)
    explanation: Mapping[str, Any] = row.get("explanation") or {}
    if alerting:
        moved = (
            "rose"
            if row.get("upper_bound") is not None and (row["value"] or 0) > row["upper_bound"]
            else "fell"
        )
        subject = (
            f"[{row['severity']}] {row['monitor']}: {metric} {moved} to {value} {when} ({where})"
        )
        lines = [f"{metric} {moved} to {value} {when} in {where} ({_bounds_text(row)})."]
        if description:
            lines.append(description)
        if breakdown := _breakdown_lines(metric, explanation):
            lines += ["What changed:", *breakdown]
        examples = explanation.get("examples") or []
        if examples:
            lines.append("Examples: " + ", ".join(str(e["conversation_id"]) for e in examples))
        link = (explanation.get("links") or {}).get("conversations")
        if link:
            lines.append(f"Dashboard: {link}")
    else:
        episode = row.get("episode_start")
        subject = f"[resolved] {row['monitor']}: {metric} back to {value} {when} ({where})"
        lines = [f"{metric} is back within bounds {when} in {where}: {value} "
                 f"({_bounds_text(row)}); the episode began {episode}."]  # fmt: skip
    fields = {
        "monitor": row["monitor"],
        "definitionVersion": row["definition_version"],
        "state": row["state"],
        "severity": row["severity"],
        "workspaceId": row["workspace_id"],
        "series": row["series"],
        "metric": metric,
        "window": f"{_iso(row['window_start'])} to {_iso(row['window_end'])} "
        f"({row['window_kind']}, {row['timezone']})",
        "value": row["value"],
        "baseline": row.get("baseline"),
        "lower": row.get("lower_bound"),
        "upper": row.get("upper_bound"),
        "sample": row["sample"],
        "episodeStart": _iso(row.get("episode_start")),
    }
    return Notification(
        kind="monitor.alerting" if alerting else "monitor.resolved",
        subject=subject,
        text="\n".join(lines),
        key=str(row["notification_key"]),
        source="monitor",
        fields=fields,
        details={
            "window": {
                "start": _iso(row["window_start"]),
                "end": _iso(row["window_end"]),
                "kind": row["window_kind"],
                "timezone": row["timezone"],
            },
            **({"explanation": dict(explanation)} if alerting else {}),
        },
        env={
            "CONVO_MONITOR": str(row["monitor"]),
            "CONVO_MONITOR_STATE": str(row["state"]),
            "CONVO_MONITOR_WORKSPACE": str(row["workspace_id"]),
            "CONVO_MONITOR_VALUE": "" if row["value"] is None else f"{row['value']:g}",
        },
        created_at=_iso(row.get("evaluated_at")) or "",
    )


def _iso(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, datetime):
        return value.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    if isinstance(value, date):
        return value.isoformat()
    return str(value)
