"""Normal, empirical-Bernstein and bootstrap-t intervals: closed forms and coverage on heavy-tailed values."""

from __future__ import annotations

import math

import numpy as np
import pytest

from offeval_core.intervals import bootstrap_t, empirical_bernstein, normal_interval


def test_empirical_bernstein_closed_form():
    x = np.array([0.0, 1.0] * 50)
    res = empirical_bernstein(x, level=0.95, bound=1.0)
    log_term = math.log(4 / 0.05)
    half = math.sqrt(2 * (100 / 396) * log_term / 100) + 7 * log_term / (3 * 99)
    assert res.ci.low == pytest.approx(0.5 - half, rel=1e-12)
    assert res.ci.high == pytest.approx(0.5 + half, rel=1e-12)
    assert res.ci.width > normal_interval(x).ci.width           # a finite-sample bound is wider
    with pytest.raises(ValueError, match="more than bound"):
        empirical_bernstein([0.0, 2.0], bound=1.0)


def test_bootstrap_t_symmetric_data_close_to_normal_and_errors():
    x = np.random.default_rng(0).normal(size=400)
    b, n = bootstrap_t(x, rng=1), normal_interval(x)
    assert b.ci.low == pytest.approx(n.ci.low, abs=0.02) and b.ci.high == pytest.approx(n.ci.high, abs=0.02)
    with pytest.raises(ValueError, match="at least 2"):
        bootstrap_t([1.0])
    with pytest.raises(ValueError, match="finite"):
        normal_interval([1.0, np.inf])


@pytest.mark.slow
def test_coverage_on_heavy_tailed_importance_weighted_values():
    # per-session values w·r with log-normal weights (mean 1) and Bernoulli(0.3) rewards: skewed, heavy tail
    rng = np.random.default_rng(5)
    sigma, n, reps = 1.5, 100, 400
    truth = 0.3
    hits = {"normal": 0, "bernstein": 0, "bootstrap-t": 0}
    for _ in range(reps):
        w = rng.lognormal(-sigma ** 2 / 2, sigma, n)
        x = w * rng.binomial(1, 0.3, n)
        hits["normal"] += normal_interval(x).ci.contains(truth)
        hits["bernstein"] += empirical_bernstein(x, bound=float(np.exp(4 * sigma))).ci.contains(truth)
        hits["bootstrap-t"] += bootstrap_t(x, n_boot=400, rng=rng).ci.contains(truth)
    cov = {k: v / reps for k, v in hits.items()}
    se = math.sqrt(0.95 * 0.05 / reps)
    assert cov["normal"] < 0.95 - 2 * se                 # the normal interval under-covers here
    assert cov["bootstrap-t"] > cov["normal"]            # bootstrap-t follows the skew
    assert cov["bernstein"] >= 0.95                       # a bound, conservative whenever B holds


def test_bootstrap_t_against_an_explicit_resample_loop():
    # the same resample indices as the function draws; per resample t* = (mean* − mean) / se*, and the interval
    # is [mean − t*_{0.95} se, mean − t*_{0.05} se] at level 0.9

    x = np.array([0.0, 0.0, 1.0, 3.0, 0.5, 7.0, 0.0, 2.0])
    n, m, se = len(x), x.mean(), x.std(ddof=1) / np.sqrt(len(x))
    idx = np.random.default_rng(4).integers(0, n, size=(400, n))
    t = []
    for row in idx:
        xb = x[row]
        seb = xb.std(ddof=1) / np.sqrt(n)
        if seb > 0:
            t.append((xb.mean() - m) / seb)
    lo_q, hi_q = np.quantile(t, [0.05, 0.95])
    res = bootstrap_t(x, level=0.9, n_boot=400, rng=np.random.default_rng(4))
    assert res.value == m
    assert (res.ci.low, res.ci.high) == (pytest.approx(m - hi_q * se, abs=1e-12), pytest.approx(m - lo_q * se, abs=1e-12))
    assert res.method == "bootstrap-t (400 resamples)"
    # no spread at all: the degenerate interval at the mean
    flat = bootstrap_t([2.0, 2.0, 2.0], n_boot=100, rng=0)
    assert (flat.ci.low, flat.ci.high, flat.method) == (2.0, 2.0, "bootstrap-t (degenerate: no spread)")
    with pytest.raises(ValueError, match="n_boot must be ≥ 100, got 99"):
        bootstrap_t(x, n_boot=99)


def test_bernstein_range_from_the_data_and_the_bound_check():

    # values (0, 2, 4): range 4, V = 4, n = 3, ln(4/0.1) = 3.689 at level 0.9:
    # half = √(2 · 4 · 3.689 / 3) + 7 · 4 · 3.689 / (3 · 2) = 3.1364 + 17.2154
    res = empirical_bernstein([0.0, 2.0, 4.0], level=0.9)
    lt = np.log(40.0)
    half = np.sqrt(2 * 4 * lt / 3) + 7 * 4 * lt / 6
    assert (res.ci.low, res.ci.high) == (pytest.approx(2 - half, abs=1e-12), pytest.approx(2 + half, abs=1e-12))
    assert res.method == "empirical Bernstein (range from the data)"
    assert empirical_bernstein([0.0, 2.0, 4.0], level=0.9, bound=4.0).method == "empirical Bernstein (values in a range of 4)"
    with pytest.raises(ValueError, match="the values span 4, more than bound = 3"):
        empirical_bernstein([0.0, 2.0, 4.0], bound=3.0)
    with pytest.raises(ValueError, match="bound must be ≥ 0"):
        empirical_bernstein([0.0, 2.0, 4.0], bound=-1.0)
    n = normal_interval([0.0, 2.0, 4.0], level=0.9)
    assert n.ci.high == pytest.approx(2 + 1.6448536269514722 * 2 / np.sqrt(3), abs=1e-12)
    with pytest.raises(ValueError, match="at least 2 per-session values"):
        normal_interval([1.0])
    with pytest.raises(ValueError, match="must be finite"):
        normal_interval([1.0, np.inf])


def test_bootstrap_t_needs_spread_in_at_least_half_of_the_resamples():
    # x = (0, 2): mean 1, s = √2, se = √2 / √2 = 1. A resample of two sessions has spread (se* = 1 > 0, t* = 0)
    # exactly when it holds both values; with fewer than ⌊n_boot / 2⌋ such resamples the interval is the
    # degenerate one at the mean, otherwise every t* is 0 and the interval is [1 − 0 · 1, 1 − 0 · 1]
    x = [0.0, 2.0]

    def with_spread(seed, n_boot):
        idx = np.random.default_rng(seed).integers(0, 2, size=(n_boot, 2))   # the function's draws
        return int((idx[:, 0] != idx[:, 1]).sum())

    assert with_spread(4, 100) == 50 and with_spread(3, 101) == 50 and with_spread(31, 100) == 40
    at_half = bootstrap_t(x, level=0.9, n_boot=100, rng=4)                  # 50 of 100: not fewer than 50
    assert (at_half.value, at_half.ci.low, at_half.ci.high, at_half.ci.level) == (1.0, 1.0, 1.0, 0.9)
    assert at_half.method == "bootstrap-t (100 resamples)"
    odd = bootstrap_t(x, level=0.9, n_boot=101, rng=3)                      # 50 of 101: ⌊101 / 2⌋ = 50
    assert odd.method == "bootstrap-t (101 resamples)" and (odd.ci.low, odd.ci.high) == (1.0, 1.0)
    few = bootstrap_t(x, level=0.9, n_boot=100, rng=31)                     # 40 of 100: fewer than half
    assert (few.value, few.ci.low, few.ci.high, few.ci.level) == (1.0, 1.0, 1.0, 0.9)
    assert few.method == "bootstrap-t (degenerate: no spread)"
    # the default number of resamples
    assert bootstrap_t([0.0, 1.0, 3.0], rng=0).method == "bootstrap-t (2000 resamples)"


def test_interval_value_level_and_method_and_input_shapes():
    # 0/1 booleans are read as numbers: (1, 0, 1, 0) has mean 0.5, V = 1/3, range 1; at level 0.9, ln(4/0.1) = ln 40
    x = [True, False, True, False]
    lt = math.log(40.0)
    half = math.sqrt(2 * (1 / 3) * lt / 4) + 7 * 1 * lt / (3 * 3)
    eb = empirical_bernstein(x, level=0.9)
    assert (eb.value, eb.ci.level) == (0.5, 0.9)
    assert (eb.ci.low, eb.ci.high) == (pytest.approx(0.5 - half, abs=1e-12), pytest.approx(0.5 + half, abs=1e-12))
    n = normal_interval(x, level=0.9)
    assert (n.value, n.ci.level, n.method) == (0.5, 0.9, "normal")
    assert n.ci.high == pytest.approx(0.5 + 1.6448536269514722 * math.sqrt(1 / 3) / 2, abs=1e-12)
    with pytest.raises(ValueError, match=r"need a 1-d array of at least 2 per-session values, got shape \(2, 2\)"):
        normal_interval([[1.0, 2.0], [3.0, 4.0]])


def test_bernstein_on_constant_values_and_a_bound_below_one():
    # constant values: range 0 and V = 0, so the half-width is 0 whether the range is the data's or a bound of 0
    for bound, how in ((None, "range from the data"), (0.0, "values in a range of 0")):
        res = empirical_bernstein([3.0, 3.0, 3.0], level=0.9, bound=bound)
        assert (res.value, res.ci.low, res.ci.high, res.method) == (3.0, 3.0, 3.0, f"empirical Bernstein ({how})")
    # a bound of 0.5 on values (0, 0.5): V = 0.125, n = 2, half = √(2 · 0.125 · ln 40 / 2) + 7 · 0.5 · ln 40 / 3
    lt = math.log(40.0)
    res = empirical_bernstein([0.0, 0.5], level=0.9, bound=0.5)
    half = math.sqrt(2 * 0.125 * lt / 2) + 7 * 0.5 * lt / 3
    assert (res.ci.low, res.ci.high) == (pytest.approx(0.25 - half, abs=1e-12), pytest.approx(0.25 + half, abs=1e-12))
    assert res.method == "empirical Bernstein (values in a range of 0.5)"
