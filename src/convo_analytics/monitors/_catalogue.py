"""The metrics a monitor can watch: every figure of the summary, described as data.

Each entry says how the figure is made from the daily cube (the same
``metrics_table`` every view uses, so a monitor's value is the dashboard's), what
kind it is (a count, a proportion, a rate per exposure, a mean, a percentile),
which counts it is made of, and therefore how much it would move by chance in a
window of a given size (:meth:`MetricSpec.sampling_variance`) and how its change
splits over slices (:mod:`._explain`).
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, replace
from typing import Literal

from convo_analytics.errors import UserError
from convo_analytics.transform import COUNTS, LATENCY_QUANTILES, MEDIANS, RATES

__all__ = ["CATALOGUE", "COUNTS_OF", "MetricKind", "MetricSpec", "metric_spec"]

#: Where each count metric lives in the cube: name -> (frame, column).
COUNTS_OF = COUNTS

MetricKind = Literal["count", "proportion", "rate", "mean", "percentile"]

#: Rates of :data:`transform.RATES` that are a share of their denominator (0..1).
_PROPORTIONS = frozenset({
    "resolutionRate", "containmentRate", "escalationRate", "abandonmentRate",
    "leadQualificationRate", "csat", "lowConfidenceShare",
})  # fmt: skip
#: Figures of how conversations end (their outcome, feedback, lead): a day's are not known
#: until its conversations have ended, so a monitor waits :data:`SETTLE_DAYS` to judge them.
_OUTCOMES = frozenset({
    "resolved", "abandoned", "open", "containedConversations", "leadsQualified",
    "feedbackCount", "positiveFeedback", "resolutionRate", "containmentRate",
    "abandonmentRate", "leadQualificationRate", "csat", "avgRating",
    "medianTimeToResolutionSeconds",
})  # fmt: skip
#: Days an outcome figure's window waits before it is judged (the slowest channel of the
#: sandbox, email, completes a conversation after three quiet days).
SETTLE_DAYS = 3
#: Cube frames whose rows are assistant responses (a model tier applies to them).
_RESPONSE_FRAMES = frozenset({"messages", "latency"})


@dataclass(frozen=True, slots=True)
class MetricSpec:
    """A catalogue metric: ``numerator``/``denominator`` are count metrics (names of
    :data:`transform.COUNTS`), ``frame``/``column`` where the numerator's count lives in the
    cube (for the breakdown of a change), ``per`` the rate's scale."""

    name: str
    kind: MetricKind
    numerator: str | None = None
    denominator: str | None = None
    per: float = 1.0
    frame: str | None = None
    column: str | None = None
    #: The figure is about assistant responses: a model tier filter narrows it.
    responses: bool = False
    #: Days a window waits after it ends before it is judged (by default).
    settle_days: int = 0

    @property
    def decomposable(self) -> bool:
        """Whether a change splits into slices' counts (counts, proportions, rates)."""
        return self.kind in ("count", "proportion", "rate") and self.frame is not None

    def sampling_variance(self, baseline: float, denominator: float) -> float:
        """The variance of the figure from chance alone, for a window whose denominator is
        ``denominator``, were the true value ``baseline``: binomial for a proportion,
        Poisson for a count and a rate; 0 for means and percentiles (their spread comes
        from the baseline windows only)."""
        if self.kind == "count":
            return max(baseline, 0.0)
        if denominator <= 0:
            return 0.0
        if self.kind == "proportion":
            p = min(max(baseline, 0.0), 1.0)
            return p * (1.0 - p) / denominator
        if self.kind == "rate":
            return max(baseline, 0.0) * self.per / denominator
        return 0.0


def _catalogue() -> dict[str, MetricSpec]:
    out: dict[str, MetricSpec] = {}
    for name, (frame, column) in COUNTS.items():
        if name in ("ratingSum",):
            continue  # a sum of ratings is no figure anyone watches
        out[name] = MetricSpec(
            name, "count", numerator=name, frame=frame, column=column,
            responses=frame in _RESPONSE_FRAMES,
        )  # fmt: skip
    for name, (numerator, denominator, scale) in RATES.items():
        num_frame, num_column = COUNTS.get(numerator, ("", ""))
        kind: MetricKind = "proportion" if name in _PROPORTIONS else "rate" if scale > 1 else "mean"
        den_frame = COUNTS.get(denominator, ("", ""))[0]
        out[name] = MetricSpec(
            name, kind, numerator=numerator, denominator=denominator, per=scale,
            frame=num_frame if kind != "mean" and num_frame else None,
            column=num_column or None,
            responses=den_frame in _RESPONSE_FRAMES,
        )  # fmt: skip
    for name in (*LATENCY_QUANTILES, *MEDIANS):
        out[name] = MetricSpec(name, "percentile", responses=name in LATENCY_QUANTILES)
    return {
        name: replace(spec, settle_days=SETTLE_DAYS if name in _OUTCOMES else 0)
        for name, spec in out.items()
    }


#: Every metric a monitor may name, by its summary name (docs/warehouse.md, "Metrics").
CATALOGUE: dict[str, MetricSpec] = _catalogue()


def metric_spec(name: str, where: str = "metric") -> MetricSpec:
    """The catalogue entry ``name``; a UserError naming the close ones otherwise."""
    found = CATALOGUE.get(name)
    if found is None:
        close = difflib.get_close_matches(name, CATALOGUE, n=3)
        hint = f"did you mean {', '.join(close)}? " if close else ""
        raise UserError(
            f"{where} {name!r} is not in the metric catalogue; {hint}"
            f"known metrics: {', '.join(sorted(CATALOGUE))}"
        )
    return found
