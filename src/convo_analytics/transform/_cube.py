"""The daily cube: additive counts and exact value histograms per day and slice.

Every date-range figure is a sum over the cube's days, so a range's totals
always equal the sum of its daily series; percentiles come from histograms of
the exact values (latencies are whole milliseconds), so a range's p95 is the
p95 of its responses, not an average of daily p95s. Days are cut in one IANA
time zone per cube.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import date

import polars as pl

from convo_analytics.transform._facts import UNKNOWN, Facts
from convo_analytics.transform._slices import DIMENSIONS

#: Confidence is summed in billionths, as integers: exact, so every order of summing agrees.
CONFIDENCE_SCALE = 1_000_000_000


#: The one slicing key that is not a conversation's: assistant responses' model tier.
TIER = "model_tier"
#: Every row of the cube is a workspace's, on a day, in a slice.
CELL = ("date", "workspace_id", "slice_key")


def local_date(column: str, tz: str) -> pl.Expr:
    """The calendar day of a UTC timestamp column in the time zone ``tz``."""
    return pl.col(column).dt.convert_time_zone(tz).dt.date()


@dataclass(frozen=True, slots=True)
class Cube:
    """The cube's tables for one time zone and low-confidence threshold.

    ``conversations`` is keyed by the conversation's start day (a cohort);
    ``messages``, ``latency``, ``guardrails`` and ``escalations`` by the day
    the message or event happened; ``durations`` by the start day.

    A summary-only cube (``convo export summary``, ``convo serve``) carries
    the transform's per-day percentiles of the whole workspace in
    ``daily_percentiles``; its ``latency`` and ``durations`` histograms are then
    already summed over ``histogram_range`` (dated at its first day), which is
    all the range's totals need.
    """

    timezone: str
    low_confidence_threshold: float
    conversations: pl.DataFrame
    messages: pl.DataFrame
    latency: pl.DataFrame
    guardrails: pl.DataFrame
    escalations: pl.DataFrame
    durations: pl.DataFrame
    frames: tuple[str, ...] = field(
        default=(
            "conversations",
            "messages",
            "latency",
            "guardrails",
            "escalations",
            "durations",
        ),
        repr=False,
    )
    #: slice_key -> channel, locale, source, intent (the rows are keyed by slice_key).
    slices: pl.DataFrame = field(default_factory=pl.DataFrame)
    daily_percentiles: pl.DataFrame | None = None
    histogram_range: tuple[date, date] | None = None

    @classmethod
    def of(
        cls,
        tz: str,
        threshold: float,
        frames: Mapping[str, pl.DataFrame],
        *,
        slices: pl.DataFrame | None = None,
        daily_percentiles: pl.DataFrame | None = None,
        histogram_range: tuple[date, date] | None = None,
    ) -> Cube:
        """A cube from its six frames by name (as read back from the marts)."""
        return cls(
            timezone=tz,
            low_confidence_threshold=threshold,
            conversations=frames["conversations"],
            messages=frames["messages"],
            latency=frames["latency"],
            guardrails=frames["guardrails"],
            escalations=frames["escalations"],
            durations=frames["durations"],
            slices=pl.DataFrame() if slices is None else slices,
            daily_percentiles=daily_percentiles,
            histogram_range=histogram_range,
        )

    def sliced(self, filters: Mapping[str, Sequence[str]] | None) -> Cube:
        """The cube restricted to the slices whose dimensions take the given values.

        ``model_tier`` may be filtered too: it narrows the response figures
        (messages, latency) only, since a conversation has no model tier.
        """
        wanted = {dim: values for dim, values in (filters or {}).items() if values}
        tiers = wanted.pop(TIER, None)
        unknown = set(wanted) - set(DIMENSIONS)
        if unknown:
            raise ValueError(
                f"unknown dimension {sorted(unknown)}; one of {', '.join((*DIMENSIONS, TIER))}"
            )
        cube = self
        if wanted:
            keep = self.slices.filter(
                pl.all_horizontal(pl.col(dim).is_in(list(v)) for dim, v in wanted.items())
            )["slice_key"].to_list()
            frames = {
                name: getattr(self, name).filter(pl.col("slice_key").is_in(keep))
                for name in self.frames
            }
            cube = replace(cube, **frames, daily_percentiles=None)
        if tiers:
            tier = pl.col(TIER).is_in(list(tiers))
            # user messages carry no tier; a tier filter keeps responses only
            cube = replace(
                cube,
                messages=cube.messages.filter(tier),
                latency=cube.latency.filter(tier),
                daily_percentiles=None,
            )
        return cube

    def of_workspaces(self, workspaces: Sequence[str] | None) -> Cube:
        """The cube restricted to the rows of ``workspaces`` (ids); all rows for ``None``."""
        if workspaces is None:
            return self
        keep = pl.col("workspace_id").is_in(list(workspaces))
        frames = {name: getattr(self, name).filter(keep) for name in self.frames}
        return replace(self, **frames, daily_percentiles=None)

    def with_dimensions(self, frame: str) -> pl.DataFrame:
        """One of the cube's frames with its slice's dimension values joined on."""
        table: pl.DataFrame = getattr(self, frame)
        return table.join(self.slices, on="slice_key", how="left")

    def between(self, first: date, last: date) -> Cube:
        frames = {
            name: getattr(self, name).filter(pl.col("date").is_between(first, last))
            for name in self.frames
        }
        return replace(self, **frames)


def build_cube(facts: Facts, tz: str, low_confidence_threshold: float) -> Cube:
    """Aggregate the facts into the daily cube, days cut in ``tz``."""
    convs = facts.conversations.with_columns(date=local_date("started_at", tz))
    conversations = convs.group_by(*CELL).agg(
        pl.len().alias("conversations"),
        pl.col("engaged").sum().alias("engaged_conversations"),
        (pl.col("status") == "resolved").sum().alias("resolved"),
        (pl.col("status") == "abandoned").sum().alias("abandoned"),
        (pl.col("status") == "open").sum().alias("open"),
        pl.col("escalated").sum().alias("escalated_conversations"),
        pl.col("contained").sum().alias("contained_conversations"),
        pl.col("qualified_at").is_not_null().sum().alias("leads_qualified"),
        pl.col("feedback_rating").is_not_null().sum().alias("feedback_count"),
        pl.col("positive_feedback").fill_null(False).sum().alias("positive_feedback"),
        pl.col("feedback_rating").fill_null(0).sum().alias("rating_sum"),
    )
    durations = pl.concat(
        [
            convs.filter(pl.col(measure).is_not_null())
            .group_by(*CELL, pl.col(measure).alias("value"))
            .agg(pl.len().alias("conversations"))
            .with_columns(measure=pl.lit(measure))
            for measure in ("first_response_ms", "resolution_seconds")
        ],
        how="diagonal",
    )
    msgs = facts.messages.with_columns(
        date=local_date("created_at", tz),
        model_tier=pl.when(pl.col("is_assistant")).then(pl.col("model_tier").fill_null(UNKNOWN)),
        confidence=pl.col("confidence").fill_null(0.0),
        latency_ms=pl.col("latency_ms").fill_null(0),
    )
    is_assistant = pl.col("is_assistant")
    messages = msgs.group_by(*CELL, "model_tier").agg(
        pl.col("is_user").sum().alias("user_messages"),
        is_assistant.sum().alias("assistant_responses"),
        (pl.col("confidence").filter(is_assistant) * CONFIDENCE_SCALE)
        .round()
        .cast(pl.Int64)
        .sum()
        .alias("confidence_nanos"),
        (is_assistant & (pl.col("confidence") < low_confidence_threshold))
        .sum()
        .alias("low_confidence_responses"),
    )
    latency = (
        msgs.filter(is_assistant)
        .group_by(*CELL, "model_tier", "latency_ms")
        .agg(pl.len().alias("responses"))
    )
    guardrails = (
        facts.incidents.with_columns(date=local_date("triggered_at", tz))
        .group_by(*CELL, "flag")
        .agg(pl.len().alias("triggers"))
    )
    escalations = (
        facts.escalations.with_columns(
            date=local_date("escalated_at", tz),
            destination=pl.col("destination").fill_null(UNKNOWN),
        )
        .group_by(*CELL, "destination")
        .agg(pl.len().alias("escalations"))
    )
    return Cube(
        timezone=tz,
        low_confidence_threshold=low_confidence_threshold,
        conversations=conversations,
        messages=messages,
        latency=latency,
        guardrails=guardrails,
        escalations=escalations,
        durations=durations,
        slices=facts.slices,
    )
