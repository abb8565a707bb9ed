"""Whether a difference is real: intervals for the figures two sides are compared on.

Every comparison the dashboard and the monitors make (this week against last, one
model tier against another) is two numbers; this package says how sure each is and
whether their difference could be noise. It sits below the dashboard and the
monitors and knows nothing of the warehouse: it takes counts and histograms as the
marts hold them and returns small frozen values (:class:`Interval`), so every
reader shows the same interval for the same figure.

- proportions: Wilson's interval, Newcombe's for a difference (:func:`wilson`,
  :func:`newcombe`);
- counts and rates per 1,000 exposures: Garwood's exact interval, the MOVER for a
  difference, the conditional binomial for a ratio (:func:`poisson_rate` and kin);
- percentiles of a histogram: order statistics, and a bootstrap for a difference
  (:func:`percentile`, :func:`percentile_difference`);
- a difference adjusted for topic mix beside the raw one
  (:func:`standardised_difference`);
- every KPI of two sides at once (:func:`compare`).

docs/warehouse.md, "Statistics of comparisons", defines each; decision
D-COMPARE-INTERVALS says why these methods.
"""

from convo_analytics.compare._compare import (
    KPIS,
    MIN_CONVERSATIONS,
    Comparison,
    Kpi,
    KpiComparison,
    SideCounts,
    compare,
)
from convo_analytics.compare._histograms import (
    MAX_RESAMPLES,
    Histogram,
    percentile,
    percentile_difference,
)
from convo_analytics.compare._intervals import (
    MIN_SAMPLE,
    Interval,
    newcombe,
    poisson_count,
    poisson_rate,
    poisson_rate_difference,
    poisson_rate_ratio,
    wilson,
)
from convo_analytics.compare._standardise import Standardised, standardised_difference

__all__ = [
    "KPIS",
    "MAX_RESAMPLES",
    "MIN_CONVERSATIONS",
    "MIN_SAMPLE",
    "Comparison",
    "Histogram",
    "Interval",
    "Kpi",
    "KpiComparison",
    "SideCounts",
    "Standardised",
    "compare",
    "newcombe",
    "percentile",
    "percentile_difference",
    "poisson_count",
    "poisson_rate",
    "poisson_rate_difference",
    "poisson_rate_ratio",
    "standardised_difference",
    "wilson",
]
