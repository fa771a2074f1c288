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


# ---------------------------------------------------------------- edge cases by hand (zero SE, zero difference, n < 2)


def test_welch_at_zero_standard_error_and_zero_difference():
    from offeval_core.stats import welch_effect, welch_two_sided_p

    # arms given as (n, Σx, M2 = Σ(x − x̄)²)
    # (2, 2) vs (1, 1): no spread, difference 1 → p 0 one- and two-sided, CI [1, 1]
    e = welch_effect(2, 4.0, 0.0, 2, 2.0, 0.0, level=0.95)
    assert (e.value, e.stderr, e.p_value, e.ci.low, e.ci.high, e.n) == (1.0, 0.0, 0.0, 1.0, 1.0, 4)
    assert welch_two_sided_p(2, 4.0, 0.0, 2, 2.0, 0.0) == 0.0
    # (0, 0) vs (1, 1): difference −1 → one-sided p 1
    assert welch_effect(2, 0.0, 0.0, 2, 2.0, 0.0, level=0.95).p_value == 1.0
    # (1, 1) vs (1, 1): nothing at all → one-sided 0.5, two-sided 1
    assert welch_effect(2, 2.0, 0.0, 2, 2.0, 0.0, level=0.95).p_value == 0.5
    assert welch_two_sided_p(2, 2.0, 0.0, 2, 2.0, 0.0) == 1.0
    # (1, 3) vs (1, 3): spread (M2 = 1 + 1) but zero difference → two-sided p exactly 1, one-sided 0.5
    assert welch_two_sided_p(2, 4.0, 2.0, 2, 4.0, 2.0) == 1.0
    assert welch_effect(2, 4.0, 2.0, 2, 4.0, 2.0, level=0.95).p_value == 0.5
    # fewer than two units in an arm: NaN everywhere, n counts both arms ((1) vs (0, 1, 2): M2 0 and 2)
    e = welch_effect(1, 1.0, 0.0, 3, 3.0, 2.0, level=0.95)
    assert math.isnan(e.value) and math.isnan(e.p_value) and e.n == 4
    assert math.isnan(welch_two_sided_p(3, 3.0, 2.0, 1, 1.0, 0.0))


def test_welch_df_by_hand():
    from offeval_core.stats import welch_df

    # a = 0.25 (n 4), b = 0.0625 (n 4): (0.3125)² / (0.25²/3 + 0.0625²/3) = 0.09765625 / 0.0221354… = 4.4118
    assert welch_df(0.25, 0.0625, 4, 4) == pytest.approx(0.09765625 / ((0.0625 + 0.00390625) / 3), rel=1e-12)
    # equal terms and sizes: 2(n − 1)
    assert welch_df(0.5, 0.5, 5, 5) == pytest.approx(8.0, rel=1e-12)
    # no variance at all: n_t + n_c − 2
    assert welch_df(0.0, 0.0, 3, 4) == 5.0


def test_small_and_degenerate_moments():
    from offeval_core.errors import EstimatorWarning
    from offeval_core.stats import (
        CrossMoments,
        RatioMoments,
        mean_estimate,
        pearson,
        ratio_difference,
        ratio_estimate,
        sample_variance,
    )

    # moments given as (n, Σx, M2 = Σ(x − x̄)²) and, for ratios, Σy, M2 of y, C = Σ(x − x̄)(y − ȳ)
    # rounding (a merge's between term) may leave M2 slightly negative: the variance is clamped at 0
    assert sample_variance(3, -1e-12) == 0.0
    assert math.isnan(sample_variance(1, 0.0))
    one = mean_estimate(1, 2.0, 0.0, level=0.95)
    assert one.value == 2.0 and math.isnan(one.stderr) and one.n == 1
    none = mean_estimate(0, 0.0, 0.0, level=0.95)
    assert math.isnan(none.value) and none.n == 0
    # ratio of one unit (x 3, y 2): the value, no SE; Σy = 0: no value
    r = ratio_estimate(1, 3.0, 0.0, 2.0, 0.0, 0.0, level=0.95)
    assert r.value == 1.5 and math.isnan(r.stderr) and r.n == 1
    assert math.isnan(ratio_estimate(2, 3.0, 0.5, 0.0, 0.0, 0.0, level=0.95).value)
    # x = (1, 2), y = (2, 4): x / y is 1/2 on every unit, so the delta-method terms cancel exactly
    # (0.5 − 2 · 0.5 · 1 + 0.25 · 2 = 0): a variance at or below the moments' precision is undefined, with a warning
    with pytest.warns(EstimatorWarning, match="below the precision of its moments"):
        z = ratio_estimate(2, 3.0, 0.5, 6.0, 2.0, 1.0, level=0.95)
    assert z.value == 0.5 and math.isnan(z.stderr)
    # one unit: a = 2, b = 1 → 2; c = 1, e = 1 → 1; every second moment and co-moment is 0
    a = RatioMoments(1, 2.0, 0.0, 1.0, 0.0, 0.0)
    d = ratio_difference(a, RatioMoments(1, 1.0, 0.0, 1.0, 0.0, 0.0), CrossMoments(0.0, 0.0, 0.0, 0.0), level=0.95)
    assert d.value == 1.0 and math.isnan(d.stderr)
    with pytest.raises(ValueError, match="same units; got n = 1 and 2"):
        ratio_difference(a, RatioMoments(2, 1.0, 0.5, 1.0, 0.5, 0.5), CrossMoments(0.0, 0.0, 0.0, 0.0), level=0.95)
    assert math.isnan(ratio_difference(RatioMoments(2, 1.0, 0.5, 0.0, 0.0, 0.0), RatioMoments(2, 1.0, 0.5, 1.0, 0.5, 0.5),
                                       CrossMoments(0.5, 0.0, 0.0, 0.0), level=0.95).value)
    # Pearson needs three points and spread in both
    assert all(math.isnan(v) for v in pearson([1, 2], [1, 2]))
    assert all(math.isnan(v) for v in pearson([1, 1, 1], [1, 2, 3]))
    assert all(math.isnan(v) for v in pearson([1, 2, 3], [5, 5, 5]))
    r, p = pearson([1, 2, 3], [1, 3, 2])           # r = 0.5, p = 2 · t-tail at t = 0.5·√1/√0.75 on 1 df
    assert r == pytest.approx(0.5, abs=1e-12)
    assert p == pytest.approx(2 * (0.5 - math.atan(0.5 / math.sqrt(0.75)) / math.pi), abs=1e-12)
