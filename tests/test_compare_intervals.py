"""The statistics of comparisons (issue 28): textbook values, edge cases, and coverage.

Each interval is checked three ways: against published values (Newcombe 1998a and
1998b, Garwood's table, the classic order-statistic ranks of a median), on the edges
a dashboard meets (0 of 0, 0 or all successes, an empty histogram), and by
simulation: over 2,000 synthetic data sets with a known difference and 2,000 with
none, each 95 % interval must cover the truth between 93 % and 97 % of the time
(four standard errors of a 2,000-run proportion either side of 95 %). The
topic-adjusted difference must remove a difference made only by topic mix.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from statistics import NormalDist

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from convo_analytics.compare import (
    KPIS,
    MAX_RESAMPLES,
    MIN_CONVERSATIONS,
    Histogram,
    Interval,
    SideCounts,
    compare,
    newcombe,
    percentile,
    percentile_difference,
    poisson_count,
    poisson_rate,
    poisson_rate_difference,
    poisson_rate_ratio,
    standardised_difference,
    wilson,
)
from convo_analytics.compare._histograms import _resampled_quantiles

RUNS = 2000
COVERAGE = (0.93, 0.97)


def _bounds(interval: Interval, places: int = 4) -> tuple[float, float]:
    assert interval.low is not None and interval.high is not None
    return round(interval.low, places), round(interval.high, places)


def _covers(interval: Interval, truth: float) -> bool:
    return interval.excludes(truth) is False


def _assert_coverage(name: str, hits: Sequence[bool]) -> None:
    assert len(hits) >= RUNS
    coverage = sum(hits) / len(hits)
    print(f"coverage {name}: {coverage:.4f}")
    assert COVERAGE[0] <= coverage <= COVERAGE[1], f"{name}: coverage {coverage:.4f}"


# -- published values -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("successes", "trials", "expected"),
    [
        # Newcombe (1998a), Table I, method 3 (score interval without continuity correction)
        (81, 263, (0.2553, 0.3662)),
        (15, 148, (0.0624, 0.1605)),
        (0, 20, (0.0, 0.1611)),
        (1, 29, (0.0061, 0.1718)),
    ],
)
def test_wilson_matches_newcombe_1998a(
    successes: int, trials: int, expected: tuple[float, float]
) -> None:
    interval = wilson(successes, trials)
    assert _bounds(interval) == expected
    assert interval.estimate == successes / trials
    assert interval.method == "Wilson score" and interval.n == trials


@pytest.mark.parametrize(
    ("k1", "n1", "k2", "n2", "expected"),
    [
        # Newcombe (1998b), Table II, method 10 (hybrid score without continuity correction)
        (56, 70, 48, 80, (0.0524, 0.3339)),
        (9, 10, 3, 10, (0.1705, 0.8090)),
        (6, 7, 2, 7, (0.0582, 0.8062)),
        (5, 56, 0, 29, (-0.0381, 0.1926)),
        (0, 10, 0, 20, (-0.1611, 0.2775)),
        (0, 10, 0, 10, (-0.2775, 0.2775)),
        (10, 10, 0, 20, (0.6791, 1.0)),
        (10, 10, 0, 10, (0.6075, 1.0)),
    ],
)
def test_newcombe_matches_method_10_of_newcombe_1998b(
    k1: int, n1: int, k2: int, n2: int, expected: tuple[float, float]
) -> None:
    interval = newcombe(k1, n1, k2, n2)
    assert _bounds(interval) == expected
    assert interval.estimate == pytest.approx(k1 / n1 - k2 / n2)
    assert interval.n == min(n1, n2)


@pytest.mark.parametrize(
    ("count", "expected"),
    # Garwood (1936); the 95 % table of exact Poisson limits (e.g. Sahai and Khurshid 1993)
    [(0, (0.0, 3.689)), (1, (0.025, 5.572)), (5, (1.623, 11.668)), (10, (4.795, 18.390))],
)
def test_garwood_limits_for_small_counts(count: int, expected: tuple[float, float]) -> None:
    interval = poisson_count(count)
    assert _bounds(interval, 3) == expected
    assert interval.estimate == count


def test_a_rate_per_1000_is_the_count_interval_over_the_exposure() -> None:
    """5 triggers in 2,000 responses: 2.5 per 1,000, Garwood's 1.623 to 11.668 halved."""
    interval = poisson_rate(5, 2000)
    assert interval.estimate == 2.5
    assert _bounds(interval, 3) == (0.812, 5.834)
    assert _bounds(poisson_rate(5, 2000, per=1.0), 6) == (0.000812, 0.005834)


def test_the_rate_difference_is_the_mover_of_the_two_exact_intervals() -> None:
    """No events on either side: 0 +/- Garwood's 3.689 per 1,000 over 1,000 responses."""
    assert _bounds(poisson_rate_difference(0, 1000, 0, 1000), 3) == (-3.689, 3.689)
    one, two = poisson_rate(12, 3000), poisson_rate(4, 2500)
    diff = poisson_rate_difference(12, 3000, 4, 2500)
    assert one.estimate is not None and two.estimate is not None
    assert one.low is not None and one.high is not None
    assert two.low is not None and two.high is not None
    d = one.estimate - two.estimate
    assert diff.estimate == pytest.approx(d)
    assert diff.low == pytest.approx(
        d - math.hypot(one.estimate - one.low, two.high - two.estimate)
    )
    assert diff.high == pytest.approx(
        d + math.hypot(one.high - one.estimate, two.estimate - two.low)
    )


def test_the_rate_ratio_is_symmetric_on_the_log_scale_and_open_over_a_zero() -> None:
    even = poisson_rate_ratio(10, 1000, 10, 1000)
    assert even.estimate == 1.0
    assert even.low is not None and even.high is not None
    assert even.low * even.high == pytest.approx(1.0)
    # given 20 events, 10 on side 1: Wilson's 0.2993 to 0.7007, as odds
    pi = wilson(10, 20)
    assert pi.low is not None and pi.high is not None
    assert even.low == pytest.approx(pi.low / (1 - pi.low))
    assert _bounds(even, 3) == (0.427, 2.341)
    uneven = poisson_rate_ratio(10, 1000, 10, 4000)
    assert uneven.estimate == 4.0 and uneven.low == pytest.approx(4 * even.low)
    over_zero = poisson_rate_ratio(6, 1000, 0, 1000)
    assert over_zero.estimate == math.inf and over_zero.high == math.inf
    assert over_zero.low is not None and over_zero.low > 1.0


@pytest.mark.parametrize(
    ("n", "ranks"),
    # the classic distribution-free 95 % interval of a median: x(2)..x(9) of 10,
    # x(6)..x(15) of 20 (e.g. Conover, Practical Nonparametric Statistics, table A3)
    [(10, (2, 9)), (20, (6, 15))],
)
def test_a_median_interval_is_between_the_classic_order_statistics(
    n: int, ranks: tuple[int, int]
) -> None:
    # the values 10, 20, ..., so the x(r) is 10 r
    interval = percentile({10.0 * i: 1 for i in range(1, n + 1)}, 0.5)
    assert (interval.low, interval.high) == (10.0 * ranks[0], 10.0 * ranks[1])
    assert interval.estimate == 10.0 * (n + 1) / 2


def test_a_tail_percentile_of_few_observations_has_no_upper_bound() -> None:
    """0.99^367 > 0.025 >= 0.99^368: a p99 is bounded above from 368 observations."""
    assert percentile({1.0: 366, 2.0: 1}, 0.99).high == math.inf
    assert percentile({1.0: 367, 2.0: 1}, 0.99).high == 2.0
    assert percentile({1.0: 5}, 0.01).low == -math.inf


def test_an_interpolated_estimate_past_a_bound_widens_the_interval() -> None:
    """The p0.5 of five: x(1) bounds it above with 97.5 % (0.995^5), but the
    interpolated estimate lies a little past x(1); the interval is widened to hold it."""
    interval = percentile({10.0: 1, 20.0: 1, 30.0: 1, 40.0: 1, 50.0: 1}, 0.005)
    assert interval.estimate == pytest.approx(10.2)
    assert (interval.low, interval.high) == (-math.inf, interval.estimate)


def test_a_lower_level_gives_a_narrower_interval() -> None:
    wide, narrow = _bounds(wilson(30, 100)), _bounds(wilson(30, 100, level=0.8))
    assert wide[0] < narrow[0] < narrow[1] < wide[1]
    assert wilson(30, 100, level=0.8).level == 0.8


# -- edges ------------------------------------------------------------------------------


def test_nothing_to_compare_is_undefined_never_an_error() -> None:
    undefined = [
        wilson(0, 0),
        newcombe(0, 0, 5, 10),
        newcombe(5, 10, 0, 0),
        poisson_rate(3, 0),
        poisson_rate_difference(3, 0, 1, 10),
        poisson_rate_ratio(0, 10, 0, 10),
        poisson_rate_ratio(2, 0, 1, 10),
        percentile({}, 0.5),
        percentile({5.0: 0}, 0.5),
        percentile_difference({}, {1.0: 3}, 0.5),
        standardised_difference({}, {}).adjusted,
        standardised_difference({"a": (1, 5)}, {"b": (1, 5)}).adjusted,
    ]
    for interval in undefined:
        assert interval.estimate is None and interval.low is None and interval.high is None
        assert not interval.defined and interval.excludes(0.0) is None
        assert interval.small_sample
    empty = compare(SideCounts(), SideCounts())
    assert empty.a_small and empty.b_small
    assert [row.kpi.name for row in empty.kpis] == [kpi.name for kpi in KPIS]
    for row in empty.kpis:
        assert row.excludes_zero is None and row.small_sample and row.adjusted is None


def test_no_successes_and_all_successes_reach_the_ends_exactly() -> None:
    for n in (1, 7, 30, 1000):
        assert wilson(0, n).low == 0.0 and wilson(0, n).estimate == 0.0
        assert wilson(n, n).high == 1.0 and wilson(n, n).estimate == 1.0
        assert newcombe(n, n, 0, n).high == 1.0 and newcombe(0, n, n, n).low == -1.0
        assert poisson_rate(0, n).low == 0.0
    assert wilson(0, 20).high == pytest.approx(0.1611, abs=1e-4)


EXCEEDS, NEGATIVE, LEVEL = "cannot exceed trials", "cannot be negative", "confidence level"
QUANTILE, RESAMPLES = "a quantile is between", "resamples is between"


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: wilson(5, 4), EXCEEDS),
        (lambda: wilson(-1, 4), NEGATIVE),
        (lambda: newcombe(1, 2, 3, 2), EXCEEDS),
        (lambda: wilson(1, 4, level=1.0), LEVEL),
        (lambda: wilson(1, 4, level=0.0), LEVEL),
        (lambda: wilson(0, 0, level=1.0), LEVEL),
        (lambda: wilson(0, 0, level=float("nan")), LEVEL),
        (lambda: poisson_rate(-1, 10), NEGATIVE),
        (lambda: poisson_rate_ratio(1, -1, 1, 1), NEGATIVE),
        (lambda: percentile({1.0: 1}, 1.5), QUANTILE),
        (lambda: percentile_difference({1.0: 1}, {2.0: 1}, 1.5), QUANTILE),
        (lambda: percentile({1.0: -1}, 0.5), "never negative"),
        (lambda: percentile({float("nan"): 1}, 0.5), "cannot be NaN"),
        (lambda: percentile_difference({1.0: 1}, {1.0: 1}, 0.5, resamples=0), RESAMPLES),
        (
            lambda: percentile_difference({1.0: 1}, {1.0: 1}, 0.5, resamples=MAX_RESAMPLES + 1),
            RESAMPLES,
        ),
        (lambda: standardised_difference({"a": (3, 2)}, {"a": (1, 2)}), EXCEEDS),
        (
            lambda: standardised_difference({"a": (3, 2), "b": (0, 10)}, {"b": (1, 10)}),
            EXCEEDS,
        ),
        (lambda: compare(SideCounts(), SideCounts(), level=2.0), LEVEL),
    ],
    ids=[
        "wilson-k-over-n",
        "wilson-negative",
        "newcombe-k-over-n",
        "level-1",
        "level-0",
        "level-1-empty",
        "level-nan",
        "rate-negative",
        "ratio-negative-exposure",
        "percentile-q",
        "bootstrap-q",
        "histogram-negative",
        "histogram-nan",
        "resamples-0",
        "resamples-max",
        "standardised-k-over-n",
        "standardised-topic-k-over-n",
        "compare-level",
    ],
)
def test_impossible_inputs_are_refused(call: Callable[[], object], message: str) -> None:
    """A caller's bug, refused by the check meant for it (not by a later math error)."""
    with pytest.raises(ValueError, match=message):
        call()


def test_a_histogram_merges_equal_values_and_drops_empty_ones() -> None:
    hist = Histogram.from_arrays([3.0, 1.0, 3.0, 2.0], [2, 1, 1, 0])
    assert hist.values.tolist() == [1.0, 3.0] and hist.counts.tolist() == [1, 3]
    assert hist.n == 4 and hist.quantile(0.5) == 3.0
    assert Histogram.of({2.0: 4}).quantile(0.9) == 2.0


# -- properties -------------------------------------------------------------------------

levels = st.floats(0.5, 0.999)
proportions = st.integers(0, 10**6).flatmap(lambda n: st.tuples(st.integers(0, n), st.just(n)))


@settings(max_examples=300, deadline=None)
@given(one=proportions, two=proportions, level=levels)
def test_proportion_intervals_hold_their_estimate_within_bounds(
    one: tuple[int, int], two: tuple[int, int], level: float
) -> None:
    for interval, floor in ((wilson(*one, level), 0.0), (newcombe(*one, *two, level), -1.0)):
        if interval.estimate is None:
            assert one[1] == 0 or two[1] == 0
            continue
        assert interval.low is not None and interval.high is not None
        assert floor <= interval.low <= interval.estimate <= interval.high <= 1.0


counts = st.integers(0, 10**5)
exposures = st.integers(1, 10**7)


@settings(max_examples=300, deadline=None)
@given(k1=counts, e1=exposures, k2=counts, e2=exposures, level=levels)
def test_rate_intervals_hold_their_estimate(
    k1: int, e1: int, k2: int, e2: int, level: float
) -> None:
    rate = poisson_rate(k1, e1, level)
    assert rate.low is not None and rate.high is not None and rate.estimate is not None
    assert 0.0 <= rate.low <= rate.estimate <= rate.high
    diff = poisson_rate_difference(k1, e1, k2, e2, level)
    assert diff.low is not None and diff.high is not None and diff.estimate is not None
    assert diff.low <= diff.estimate <= diff.high
    back = poisson_rate_difference(k2, e2, k1, e1, level)
    assert (back.low, back.high) == pytest.approx((-diff.high, -diff.low))
    ratio = poisson_rate_ratio(k1, e1, k2, e2, level)
    if k1 + k2:
        assert ratio.low is not None and ratio.high is not None and ratio.estimate is not None
        assert 0.0 <= ratio.low <= ratio.estimate * (1 + 1e-12) and ratio.estimate <= ratio.high


histograms = st.dictionaries(
    st.integers(0, 5000).map(float), st.integers(0, 500), min_size=0, max_size=30
)


@settings(max_examples=300, deadline=None)
@given(hist=histograms, q=st.floats(0.0, 1.0), level=levels)
def test_a_percentile_is_numpys_over_the_expanded_values_inside_its_interval(
    hist: dict[float, int], q: float, level: float
) -> None:
    interval = percentile(hist, q, level)
    expanded = np.repeat(list(hist.keys()), list(hist.values()))
    if expanded.size == 0:
        assert not interval.defined
        return
    assert interval.estimate == pytest.approx(float(np.quantile(expanded, q)), abs=1e-9)
    assert interval.low is not None and interval.high is not None
    assert interval.low <= interval.estimate <= interval.high
    # a bound is an observed value, unbounded, or the estimate itself (an interval is
    # widened to hold an interpolated estimate its order statistics miss)
    assert interval.low in (-math.inf, interval.estimate, *hist)
    assert interval.high in (math.inf, interval.estimate, *hist)
    assert interval.n == expanded.size and interval.small_sample == (expanded.size < 30)


strata = st.dictionaries(
    st.sampled_from("abcdef"),
    st.integers(0, 400).flatmap(lambda n: st.tuples(st.integers(0, n), st.just(n))),
    max_size=6,
)


@settings(max_examples=300, deadline=None)
@given(one=strata, two=strata, level=levels)
def test_an_adjusted_proportion_difference_stays_a_difference_of_proportions(
    one: dict[str, tuple[int, int]], two: dict[str, tuple[int, int]], level: float
) -> None:
    result = standardised_difference(one, two, level=level)
    adjusted = result.adjusted
    shared = [t for t in one.keys() & two.keys() if one[t][1] and two[t][1]]
    assert result.topics == len(shared) and adjusted.defined == bool(shared)
    assert result.excluded1 == sum(n for _, n in one.values()) - sum(one[t][1] for t in shared)
    if adjusted.defined:
        assert adjusted.low is not None and adjusted.high is not None
        assert adjusted.estimate is not None
        assert -1.0 <= adjusted.low <= adjusted.estimate + 1e-12
        assert adjusted.estimate <= adjusted.high + 1e-12 and adjusted.high <= 1.0
        assert result.rate1 is not None and 0.0 <= result.rate1 <= 1.0


# -- the bootstrap ----------------------------------------------------------------------


def _multinomial_quantiles(
    hist: Histogram, q: float, resamples: int, rng: np.random.Generator
) -> np.ndarray:
    """The plain bootstrap: whole resampled histograms (multinomial over the bins)."""
    n = hist.n
    drawn = rng.multinomial(n, hist.counts / n, size=resamples)
    cumulative = np.cumsum(drawn, axis=1)
    position = q * (n - 1)
    below = math.floor(position)
    above = min(below + 1, n - 1)
    low = hist.values[(cumulative <= below).sum(axis=1)]
    high = hist.values[(cumulative <= above).sum(axis=1)]
    return low + (high - low) * (position - below)


@pytest.mark.parametrize("q", [0.5, 0.9])
def test_bootstrap_draws_are_those_of_a_multinomial_resample(q: float) -> None:
    """The order-statistic draws give the resampled percentile the distribution of
    whole resampled histograms: their distribution functions agree within 0.03 on
    20,000 draws each (a two-sample KS bound at p ~ 1e-7), on a histogram small
    enough (15 observations) that a rank off by one would show."""
    hist = Histogram.of({1.0: 3, 2.0: 5, 4.0: 4, 7.0: 2, 9.0: 1})
    draws = 20_000
    reference = _multinomial_quantiles(hist, q, draws, np.random.default_rng(2))
    mine = _resampled_quantiles(hist, q, draws, np.random.default_rng(3))
    grid = np.linspace(0.0, 10.0, 201)
    cdf_mine = np.searchsorted(np.sort(mine), grid, side="right") / draws
    cdf_ref = np.searchsorted(np.sort(reference), grid, side="right") / draws
    assert np.max(np.abs(cdf_mine - cdf_ref)) < 0.03
    # against a one-value side, the interval is the draws' own 2.5 % and 97.5 % points
    alone = percentile_difference(hist, {0.0: 1}, q, resamples=draws, seed=3)
    assert [alone.low, alone.high] == pytest.approx(np.quantile(mine, [0.025, 0.975]))


def test_the_bootstrap_is_seeded_and_bounded() -> None:
    rng = np.random.default_rng(5)
    one = Histogram.from_arrays(rng.lognormal(6.0, 0.8, 5000), np.ones(5000))
    two = Histogram.from_arrays(rng.lognormal(6.1, 0.8, 4000), np.ones(4000))
    first = percentile_difference(one, two, 0.95, resamples=300, seed=11)
    assert first == percentile_difference(one, two, 0.95, resamples=300, seed=11)
    assert first != percentile_difference(one, two, 0.95, resamples=300, seed=12)
    assert first.method == "percentile bootstrap (300 resamples)"
    assert first.estimate == pytest.approx(
        float(np.quantile(np.repeat(one.values, one.counts), 0.95))
        - float(np.quantile(np.repeat(two.values, two.counts), 0.95))
    )
    # millions of observations over few bins cost what the bins cost
    big = Histogram.from_arrays(np.arange(2000.0), rng.integers(1000, 3000, 2000))
    wide = percentile_difference(big, one, 0.5, resamples=MAX_RESAMPLES, seed=1)
    assert wide.defined and big.n > 3_000_000


# -- coverage ---------------------------------------------------------------------------

SCENARIOS = ["no difference", "known difference"]


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_wilson_and_newcombe_cover_at_the_nominal_rate(scenario: str) -> None:
    rng = np.random.default_rng([28, 1, SCENARIOS.index(scenario)])
    pa, pb = (0.3, 0.3) if scenario == "no difference" else (0.3, 0.4)
    na, nb = 300, 350
    ka, kb = rng.binomial(na, pa, RUNS), rng.binomial(nb, pb, RUNS)
    _assert_coverage(f"Wilson ({scenario}, A)", [_covers(wilson(int(k), na), pa) for k in ka])
    _assert_coverage(f"Wilson ({scenario}, B)", [_covers(wilson(int(k), nb), pb) for k in kb])
    _assert_coverage(
        f"Newcombe ({scenario})",
        [_covers(newcombe(int(b), nb, int(a), na), pb - pa) for a, b in zip(ka, kb, strict=True)],
    )


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_poisson_rates_and_their_difference_cover_at_the_nominal_rate(scenario: str) -> None:
    """Guardrail triggers per 1,000 responses: 20 against 20, or 20 against 30."""
    rng = np.random.default_rng([28, 2, SCENARIOS.index(scenario)])
    la, lb = (0.020, 0.020) if scenario == "no difference" else (0.020, 0.030)
    ea, eb = 5000, 4000
    ka, kb = rng.poisson(la * ea, RUNS), rng.poisson(lb * eb, RUNS)
    pairs = list(zip(ka.tolist(), kb.tolist(), strict=True))
    _assert_coverage(
        f"Poisson rate ({scenario}, A)", [_covers(poisson_rate(a, ea), 1000 * la) for a, _ in pairs]
    )
    _assert_coverage(
        f"Poisson rate ({scenario}, B)", [_covers(poisson_rate(b, eb), 1000 * lb) for _, b in pairs]
    )
    _assert_coverage(
        f"rate difference ({scenario})",
        [_covers(poisson_rate_difference(b, eb, a, ea), 1000 * (lb - la)) for a, b in pairs],
    )
    _assert_coverage(
        f"rate ratio ({scenario})",
        [_covers(poisson_rate_ratio(b, eb, a, ea), lb / la) for a, b in pairs],
    )


def _latencies(rng: np.random.Generator, mu: float, n: int) -> Histogram:
    """n latencies in whole milliseconds (as the marts keep them), log-normal."""
    values = np.rint(rng.lognormal(mu, 0.8, n))
    return Histogram.from_arrays(*np.unique(values, return_counts=True))


def _true_quantile(mu: float, q: float) -> float:
    """The q quantile of the rounded log-normal: the rounded continuous quantile."""
    return float(np.rint(math.exp(mu + 0.8 * NormalDist().inv_cdf(q))))


@pytest.mark.parametrize("q", [0.5, 0.9])
@pytest.mark.parametrize("scenario", SCENARIOS)
def test_percentile_intervals_cover_at_the_nominal_rate(scenario: str, q: float) -> None:
    """p50 and p90 latency, about 400 ms against 400 ms or 490 ms, 1,000 and 800 responses."""
    mu_a, mu_b = (6.0, 6.0) if scenario == "no difference" else (6.0, 6.2)
    truth_a, truth_b = _true_quantile(mu_a, q), _true_quantile(mu_b, q)
    single, difference = [], []
    for run in range(RUNS):
        rng = np.random.default_rng([28, 3, SCENARIOS.index(scenario), run])
        a, b = _latencies(rng, mu_a, 1000), _latencies(rng, mu_b, 800)
        single.append(_covers(percentile(a, q), truth_a))
        difference.append(
            _covers(percentile_difference(b, a, q, resamples=400, seed=run), truth_b - truth_a)
        )
    _assert_coverage(f"p{round(q * 100)} order statistics ({scenario})", single)
    _assert_coverage(f"p{round(q * 100)} bootstrap difference ({scenario})", difference)


TOPIC_RATES = np.array([0.05, 0.15, 0.30, 0.50])
MIX_A = np.array([0.55, 0.25, 0.15, 0.05])
MIX_B = np.array([0.10, 0.20, 0.30, 0.40])


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_the_topic_adjusted_difference_removes_a_difference_made_by_mix(scenario: str) -> None:
    """Side B gets the hard topics. With the same rate topic by topic, the raw
    difference is about +0.19 and real; adjusted it is 0 and covered at the nominal
    rate. With B worse by 0.04 in every topic, the adjusted difference covers 0.04."""
    rng = np.random.default_rng([28, 4, SCENARIOS.index(scenario)])
    shift = 0.0 if scenario == "no difference" else 0.04
    n = 2000
    mix_a = rng.multinomial(n, MIX_A, size=RUNS)
    mix_b = rng.multinomial(n, MIX_B, size=RUNS)
    k_a = rng.binomial(mix_a, TOPIC_RATES)
    k_b = rng.binomial(mix_b, TOPIC_RATES + shift)
    topics = "abcd"
    covered, raw_real, adjusted = [], [], []
    for run in range(RUNS):
        side_a = {t: (int(k_a[run, i]), int(mix_a[run, i])) for i, t in enumerate(topics)}
        side_b = {t: (int(k_b[run, i]), int(mix_b[run, i])) for i, t in enumerate(topics)}
        result = standardised_difference(side_b, side_a)
        covered.append(_covers(result.adjusted, shift))
        raw_real.append(result.raw.excludes(0.0) is True)
        assert result.adjusted.estimate is not None and result.raw.estimate is not None
        adjusted.append(result.adjusted.estimate)
        assert result.raw.estimate > 0.12 + shift
    _assert_coverage(f"topic-adjusted difference ({scenario})", covered)
    assert all(raw_real)
    assert abs(float(np.mean(adjusted)) - shift) < 0.002


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_the_topic_adjusted_difference_covers_with_small_topics(scenario: str) -> None:
    """Topics as a channel's conversations split them: 40 topics of 1 to 9 conversations on
    one side and 1 to 3 on the other, rates from 0.3 to 0.95, so many a topic shows 0 or
    n successes. The interval still covers at the nominal rate (with the plain
    ``p (1 - p) / n`` such a topic added no variance, and coverage was about 0.77)."""
    rng = np.random.default_rng([28, 5, SCENARIOS.index(scenario)])
    shift = 0.0 if scenario == "no difference" else 0.05
    topics = [str(t) for t in range(40)]
    covered = []
    for _ in range(RUNS):
        rates = rng.uniform(0.3, 0.9, len(topics))
        n_a, n_b = rng.integers(1, 10, len(topics)), rng.integers(1, 4, len(topics))
        k_a, k_b = rng.binomial(n_a, rates), rng.binomial(n_b, rates + shift)
        side_a = {t: (int(k_a[i]), int(n_a[i])) for i, t in enumerate(topics)}
        side_b = {t: (int(k_b[i]), int(n_b[i])) for i, t in enumerate(topics)}
        covered.append(_covers(standardised_difference(side_b, side_a).adjusted, shift))
    _assert_coverage(f"topic-adjusted difference, small topics ({scenario})", covered)


# -- two sides --------------------------------------------------------------------------


def _side(conversations: int, resolved: int, escalated: int, **more: object) -> SideCounts:
    fields: dict[str, object] = {
        "conversations": conversations,
        "resolved": resolved,
        "escalated_conversations": escalated,
        "contained_conversations": resolved,
        "feedback_count": conversations // 2,
        "positive_feedback": conversations // 3,
        "assistant_responses": conversations * 4,
        "low_confidence_responses": conversations // 5,
        "guardrail_triggers": conversations // 50,
        "latency": {300.0: conversations * 2, 900.0: conversations * 2},
    }
    fields.update(more)
    return SideCounts(**fields)  # type: ignore[arg-type]


def test_compare_gives_every_kpi_its_intervals_and_b_minus_a() -> None:
    a = _side(400, 240, 80)
    b = _side(500, 250, 150, latency={300.0: 1000, 1200.0: 1000})
    result = compare(a, b)
    assert [row.kpi.name for row in result.kpis] == [kpi.name for kpi in KPIS]
    assert not result.a_small and not result.b_small and result.level == 0.95
    resolution = result["resolution_rate"]
    assert resolution.a == wilson(240, 400) and resolution.b == wilson(250, 500)
    assert resolution.difference == newcombe(250, 500, 240, 400)
    assert resolution.excludes_zero is True and resolution.adjusted is None
    escalation = result["escalation_rate"]
    assert escalation.difference.estimate == pytest.approx(0.3 - 0.2)
    assert escalation.excludes_zero is True
    assert result["csat"].excludes_zero is False
    triggers = result["guardrail_triggers_per_1000_responses"]
    assert triggers.a == poisson_rate(8, 1600) and triggers.b == poisson_rate(10, 2000)
    assert triggers.difference == poisson_rate_difference(10, 2000, 8, 1600)
    p90 = result["latency_p90_ms"]
    assert p90.a == percentile(a.latency, 0.9) and p90.b.estimate == 1200.0
    assert p90.difference.estimate == 300.0 and p90.excludes_zero is True
    assert p90.difference == percentile_difference(b.latency, a.latency, 0.9, resamples=2000)
    assert not any(row.small_sample for row in result.kpis)
    with pytest.raises(KeyError):
        result["no such kpi"]


def test_compare_reads_counts_of_numpy_and_polars_integers() -> None:
    """Sums read from the marts arrive as numpy integers; they are counts all the same."""
    a = SideCounts(conversations=np.int64(400), resolved=np.int64(240))  # type: ignore[arg-type]
    assert compare(a, _side(500, 250, 150))["resolution_rate"].a == wilson(240, 400)


def test_compare_flags_a_side_under_the_minimum_sample() -> None:
    assert MIN_CONVERSATIONS == 30
    at_minimum = compare(_side(30, 15, 5), _side(400, 200, 40))
    assert not at_minimum.a_small
    assert not at_minimum["resolution_rate"].small_sample
    below = compare(_side(400, 200, 40), _side(29, 15, 5))
    assert below.b_small and not below.a_small
    assert all(row.small_sample for row in below.kpis)
    assert below["escalation_rate"].b.small_sample
    assert not compare(_side(29, 15, 5), _side(29, 15, 5), min_conversations=20).a_small


def test_compare_adjusts_each_rate_for_topic_mix() -> None:
    """B is escalated more only because it gets the refund topic: the raw difference is
    real, the adjusted one is nil."""

    def split(easy: int, hard: int) -> SideCounts:
        topics = {
            "greeting": _side(easy, easy // 2, easy // 10),
            "refund": _side(hard, hard // 2, hard // 2),
        }
        total = _side(easy + hard, easy // 2 + hard // 2, easy // 10 + hard // 2, by_topic=topics)
        return total

    result = compare(split(900, 100), split(200, 800))
    escalation = result["escalation_rate"]
    assert escalation.excludes_zero is True
    assert escalation.difference.estimate == pytest.approx(0.42 - 0.14)
    assert escalation.adjusted is not None
    assert escalation.adjusted.estimate == pytest.approx(0.0, abs=1e-12)
    assert escalation.adjusted_excludes_zero is False
    assert result["guardrail_triggers_per_1000_responses"].adjusted is not None
    assert result["latency_p50_ms"].adjusted is None


def test_the_adjustment_weights_by_the_pooled_mix_and_leaves_out_one_sided_topics() -> None:
    one = {"x": (10, 100), "y": (40, 100), "only one": (5, 20)}
    two = {"x": (5, 50), "y": (60, 150)}
    result = standardised_difference(one, two)
    # pooled mix of the shared topics: x 150 / 400, y 250 / 400
    assert result.rate1 == pytest.approx(0.375 * 0.1 + 0.625 * 0.4)
    assert result.rate2 == pytest.approx(0.375 * 0.1 + 0.625 * 0.4)
    assert result.adjusted.estimate == pytest.approx(0.0, abs=1e-12)

    def v(k: int, n: int) -> float:  # the variance at Agresti and Coull's shrunken rate
        shrunk = (k + 1.959964**2 / 2) / (n + 1.959964**2)
        return shrunk * (1 - shrunk) / n

    variance = 0.375**2 * (v(10, 100) + v(5, 50)) + 0.625**2 * (v(40, 100) + v(60, 150))
    assert result.adjusted.high == pytest.approx(1.959964 * math.sqrt(variance), rel=1e-5)
    assert result.raw == newcombe(55, 220, 65, 200)
    assert (result.topics, result.excluded1, result.excluded2) == (2, 20, 0)
    assert result.adjusted.n == 200
    rates = standardised_difference({"x": (4, 1000)}, {"x": (1, 2000)}, kind="rate")
    assert rates.adjusted.estimate == pytest.approx(4.0 - 0.5)
    assert rates.adjusted.high == pytest.approx(3.5 + 1.959964 * math.sqrt(4e-6 + 0.25e-6) * 1000)
    assert rates.raw == poisson_rate_difference(4, 1000, 1, 2000)
