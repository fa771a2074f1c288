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
