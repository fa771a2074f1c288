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
