"""Statistics from moments against direct computation on the underlying values (numpy / scipy)."""

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from scipy import stats as sps

from offeval_core import stats

# values rounded to 1e-6: sums of squares of ~1e-141 underflow, a limit of any moments-based variance
values = st.lists(st.floats(-100, 100, allow_nan=False).map(lambda v: round(v, 6)), min_size=3, max_size=60)


def moments(x):
    """n, Σx and Σ(x − x̄)² (two-pass)."""
    x = np.asarray(x, dtype=float)
    return len(x), float(x.sum()), float(((x - x.mean()) ** 2).sum())


@given(values)
def test_mean_estimate_matches_numpy(x):
    e = stats.mean_estimate(*moments(x), level=0.9)
    assert e.value == pytest.approx(np.mean(x), abs=1e-9)
    assert e.stderr == pytest.approx(np.std(x, ddof=1) / math.sqrt(len(x)), rel=1e-6, abs=1e-6)
    z = sps.norm.ppf(0.95)
    assert e.ci.high - e.value == pytest.approx(z * e.stderr, rel=1e-9, abs=1e-12)


@given(values, values)
def test_welch_matches_scipy(t, c):
    if np.ptp(t) == 0 and np.ptp(c) == 0:  # constant samples (np.std of equal floats can be ~1e-14, not 0)
        return
    eff = stats.welch_effect(*moments(t), *moments(c), level=0.95)
    ref = sps.ttest_ind(t, c, equal_var=False, alternative="greater")
    assert eff.value == pytest.approx(np.mean(t) - np.mean(c), abs=1e-9)
    assert eff.p_value == pytest.approx(ref.pvalue, abs=1e-6)
    two = stats.welch_two_sided_p(*moments(t), *moments(c))
    assert two == pytest.approx(sps.ttest_ind(t, c, equal_var=False).pvalue, abs=1e-6)
    ci = ref.confidence_interval(0.95)
    if math.isfinite(ci.low):
        # scipy's one-sided CI has an infinite upper bound; compare the two-sided one instead
        ci2 = sps.ttest_ind(t, c, equal_var=False).confidence_interval(0.95)
        assert eff.ci.low == pytest.approx(ci2.low, rel=1e-6, abs=1e-6)
        assert eff.ci.high == pytest.approx(ci2.high, rel=1e-6, abs=1e-6)


def test_paired_effect_is_the_one_sample_test_of_differences():
    rng = np.random.default_rng(0)
    d = rng.normal(0.3, 1.0, 500)
    eff = stats.paired_effect(*moments(d), level=0.99)
    assert eff.p_value == pytest.approx(sps.norm.sf(d.mean() / (d.std(ddof=1) / math.sqrt(500))))
    assert eff.ci.level == 0.99 and eff.ci.low < d.mean() < eff.ci.high


def test_ratio_estimate_delta_method_against_a_direct_formula():
    rng = np.random.default_rng(1)
    y = rng.uniform(1, 3, 400)
    x = 0.5 * y + rng.normal(0, 0.2, 400)
    co = float(((x - x.mean()) * (y - y.mean())).sum())
    e = stats.ratio_estimate(*moments(x), *moments(y)[1:], co, level=0.95)
    r = x.sum() / y.sum()
    resid = x - r * y
    assert e.value == pytest.approx(r)
    assert e.stderr == pytest.approx(np.std(resid, ddof=1) / (math.sqrt(400) * y.mean()), rel=1e-9)


def test_pearson_matches_scipy_and_degenerate_inputs_are_nan():
    x = [1.0, 2.0, 3.0, 4.0, 5.5]
    y = [2.0, 1.0, 4.0, 3.0, 6.0]
    r, p = stats.pearson(x, y)
    ref = sps.pearsonr(x, y)
    assert (r, p) == pytest.approx((ref.statistic, ref.pvalue))
    assert all(math.isnan(v) for v in stats.pearson([1, 2], [3, 4]))
    assert all(math.isnan(v) for v in stats.pearson([1, 1, 1], [3, 4, 5]))


def test_level_validation():
    with pytest.raises(ValueError, match=r"level must be strictly between 0 and 1 \(e.g. 0.99\), got 99"):
        stats.normal_ci(0.0, 1.0, level=99)
    with pytest.raises(TypeError, match="level must be a number between 0 and 1, got str '0.9'"):
        stats.normal_ci(0.0, 1.0, level="0.9")
