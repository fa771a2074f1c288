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


# ---------------------------------------------------------------- exact values of every field (mutation run of stats)


def test_moments_of_by_hand_and_beyond_double_precision():
    import warnings

    from offeval_core.errors import NonFiniteMoments

    # (n, Σx, Σ(x − x̄)²): an offset of 1e8 costs no digit; a matrix is read as its values; no values at all
    assert stats.moments_of([1e8, 1e8 + 1, 1e8, 1e8 + 1]) == (4, 400000002.0, 1.0)
    assert stats.moments_of([[1, 2], [3, 4]]) == (4, 10.0, 5.0)        # x̄ = 2.5: 2.25 + 0.25 + 0.25 + 2.25
    assert stats.moments_of([]) == (0, 0.0, 0.0)
    assert stats.moments_of([5.0]) == (1, 5.0, 0.0)
    # the default wording of the finiteness check
    with pytest.raises(NonFiniteMoments, match=r"^moments are not finite: "):
        stats.check_finite(1.0, math.nan)
    # a sum or a squared deviation past double precision is an error, not a numpy overflow warning
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for values in ([1e308, 1e308], [-1e200, 1e200], [math.inf, 1.0]):   # the last: inf − inf in x − x̄
            with pytest.raises(NonFiniteMoments, match=r"^the sum and second moment of the values are not finite: "):
                stats.moments_of(values)


def test_kish_ess_by_hand():
    # (Σw)² / Σw²: (1, 1, 4) → 36 / 18 = 2; by column of [[1, 1], [1, 3]]: 4/2 = 2 and 16/10 = 1.6; all: 36/12 = 3
    assert stats.kish_ess([1.0, 1.0, 4.0]) == 2.0
    w = [[1, 1], [1, 3]]
    assert stats.kish_ess(w) == 3.0
    assert stats.kish_ess(w, axis=0).tolist() == [2.0, 1.6]
    assert stats.kish_ess(w, axis=1).tolist() == [2.0, 1.6]
    # integer weights are read as floats: 2³² squared does not wrap around in int64
    assert stats.kish_ess([2 ** 32, 2 ** 32]) == 2.0
    assert stats.kish_ess([0.0, 0.0]) == 0.0


def test_mean_paired_and_welch_fields_by_hand():
    # two values (1, 2): mean 1.5, s² = 0.5, se = √(0.5 / 2) = 0.5
    two = stats.mean_estimate(2, 3.0, 0.5, level=0.95)
    assert (two.value, two.stderr, two.n, two.ci.level) == (1.5, 0.5, 2, 0.95)
    none = stats.mean_estimate(0, 0.0, 0.0, level=0.9)
    assert math.isnan(none.stderr) and math.isnan(none.ci.low) and math.isnan(none.ci.high) and none.ci.level == 0.9
    # d = (0, 1, 1, 0): mean 0.5, s² = 1/3, se = √(1/12); one-sided p = Φ(−0.5 / se) = Φ(−√3)
    eff = stats.paired_effect(4, 2.0, 1.0, level=0.95)
    se = math.sqrt(1 / 12)
    assert (eff.value, eff.n) == (0.5, 4) and eff.stderr == pytest.approx(se, abs=1e-15)
    assert eff.p_value == pytest.approx(0.5 * math.erfc(math.sqrt(3) / math.sqrt(2)), abs=1e-15)
    assert eff.ci.high == pytest.approx(0.5 + 1.959963984540054 * se, abs=1e-12) and eff.ci.level == 0.95
    # Welch, (1, 2, 3) vs (0, 1, 2): diff 1, a = b = 1/3, se = √(2/3) < 1, df = (2/3)² / (2 · (1/9) / 2) = 4.
    # On 4 df, with x = t / √(4 + t²): F(t) = 1/2 + (x/2)(1 + (1 − x²)/2); the 97.5 % point is 2√(q − 1),
    # q = cos(arccos(√α) / 3) / √α, α = 4 · 0.975 · 0.025
    w = stats.welch_effect(3, 6.0, 2.0, 3, 3.0, 2.0, level=0.95)
    se = math.sqrt(2 / 3)
    t = 1 / se
    x = t / math.sqrt(4 + t * t)
    alpha = 4 * 0.975 * 0.025
    t_crit = 2 * math.sqrt(math.cos(math.acos(math.sqrt(alpha)) / 3) / math.sqrt(alpha) - 1)
    assert (w.value, w.n) == (1.0, 6) and w.stderr == pytest.approx(se, abs=1e-15)
    assert w.p_value == pytest.approx(1 - (0.5 + x / 2 * (1 + (1 - x * x) / 2)), abs=1e-12)
    assert (w.ci.low, w.ci.high, w.ci.level) == (pytest.approx(1 - t_crit * se, abs=1e-12),
                                                 pytest.approx(1 + t_crit * se, abs=1e-12), 0.95)
    # fewer than two units in an arm: every field undefined, at the given level
    short = stats.welch_effect(1, 1.0, 0.0, 3, 3.0, 2.0, level=0.9)
    assert math.isnan(short.stderr) and math.isnan(short.ci.low) and math.isnan(short.ci.high)
    assert short.ci.level == 0.9


def test_p_values_and_welch_with_an_undefined_count():
    from offeval_core.errors import NonFiniteMoments

    # an undefined standard error makes both p-values undefined, whatever the value
    assert math.isnan(stats.two_sided_p(1.0, math.nan)) and math.isnan(stats.two_sided_p(math.nan, 1.0))
    assert math.isnan(stats.one_sided_p(1.0, math.nan)) and math.isnan(stats.one_sided_p(math.nan, 1.0))
    # a count that is not a number (a moments file with an empty cell) is an error naming what it spoils
    with pytest.raises(NonFiniteMoments, match=r"^the difference of the arms' means are not finite: "):
        stats.welch_effect(math.nan, 6.0, 2.0, 3, 3.0, 2.0, level=0.95)
    with pytest.raises(NonFiniteMoments, match=r"^the arms' means and variances are not finite: "):
        stats.welch_two_sided_p(math.nan, 6.0, 2.0, 3, 3.0, 2.0)


def test_pearson_on_booleans_a_range_of_one_and_a_constant_without_warnings():
    import warnings

    # booleans are 0/1: x = (1, 0, 1), y = (1, 2, 3) centre to (1/3, −2/3, 1/3) and (−1, 0, 1): r = 0, p = 1
    for x, y in (([True, False, True], [1, 2, 3]), ([1, 2, 3], [True, False, True])):
        r, p = stats.pearson(x, y)
        assert (r, p) == (pytest.approx(0.0, abs=1e-12), pytest.approx(1.0, abs=1e-12))
    # values whose range is exactly 1: (0, 0.5, 1) vs (0, 1, 0.5) is (1, 2, 3) vs (1, 3, 2) scaled: r = 0.5, p = 2/3
    for x, y in (([0, 0.5, 1], [0, 1, 0.5]), ([1, 2, 3], [0, 1, 0.5]), ([0, 0.5, 1], [1, 3, 2])):
        r, p = stats.pearson(x, y)
        assert (r, p) == (pytest.approx(0.5, abs=1e-12), pytest.approx(2 / 3, abs=1e-12))
    # a constant series is not handed to scipy (whose constant-input warning would reach the page)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert all(math.isnan(v) for v in stats.pearson([1, 1, 1], [1, 2, 3]))
        assert all(math.isnan(v) for v in stats.pearson([1, 2, 3], [5, 5, 5]))


def test_kish_ess_from_sums_by_hand():
    import warnings

    # weights 1 and 2: 3² / 5; one weight of 1: 1; no weight at all: 0 ("no effective sample"); elementwise,
    # a NaN sum stays NaN; a scalar gives a float
    got = stats.kish_ess_from_sums(3.0, 5.0)
    assert got == 1.8 and type(got) is float
    assert stats.kish_ess_from_sums(1.0, 1.0) == 1.0
    out = stats.kish_ess_from_sums([3.0, 0.0, math.nan, 1.0], [5.0, 0.0, 1.0, 1.0])
    assert out[:2].tolist() == [1.8, 0.0] and math.isnan(out[2]) and out[3] == 1.0
    # integer sums are read as floats (2³² squared does not wrap around in int64), and sums past double
    # precision give inf or NaN without a numpy warning
    assert stats.kish_ess_from_sums(2 ** 32, 2 ** 64) == 1.0
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert stats.kish_ess_from_sums(1e200, 1e300) == math.inf
        assert math.isnan(stats.kish_ess_from_sums(math.inf, math.inf))


def test_ratio_difference_edges_by_hand():
    from offeval_core.errors import NonFiniteMoments
    from offeval_core.stats import CrossMoments, RatioMoments, ratio_difference

    zero = CrossMoments(0.0, 0.0, 0.0, 0.0)
    # a = (1, 3), b = (1, 1) → 2; c = e = (1, 1) → 1: φ = (−1, 1), sd √2, se = √2 / √2 = 1; p = Φ(−1)
    d = ratio_difference(RatioMoments(2, 4.0, 2.0, 2.0, 0.0, 0.0), RatioMoments(2, 2.0, 0.0, 2.0, 0.0, 0.0), zero,
                         level=0.9)
    assert (d.value, d.stderr, d.n) == (1.0, 1.0, 2)
    assert d.p_value == pytest.approx(0.5 * math.erfc(1 / math.sqrt(2)), abs=1e-15)
    assert (d.ci.low, d.ci.high, d.ci.level) == (pytest.approx(1 - 1.6448536269514722, abs=1e-12),
                                                 pytest.approx(1 + 1.6448536269514722, abs=1e-12), 0.9)
    # no units: nothing is defined (n = 0 even with sums given)
    none = ratio_difference(RatioMoments(0, 1.0, 0.0, 1.0, 0.0, 0.0), RatioMoments(0, 1.0, 0.0, 1.0, 0.0, 0.0), zero,
                            level=0.9)
    assert math.isnan(none.value) and math.isnan(none.stderr) and math.isnan(none.p_value) and none.n == 0
    assert math.isnan(none.ci.low) and math.isnan(none.ci.high) and none.ci.level == 0.9
    # each sum past double precision is named; a ratio that overflows is named as such
    for i in range(4):
        sums = [4.0, 2.0, 2.0, 2.0]
        sums[i] = math.inf
        first = RatioMoments(2, sums[0], 2.0, sums[1], 0.0, 0.0)
        second = RatioMoments(2, sums[2], 0.0, sums[3], 0.0, 0.0)
        with pytest.raises(NonFiniteMoments, match=r"^the sums are not finite: "):
            ratio_difference(first, second, zero, level=0.9)
    with pytest.raises(NonFiniteMoments, match=r"^the ratios of the sums are not finite: "):
        ratio_difference(RatioMoments(2, 1e308, 0.0, 1e-10, 0.0, 0.0), RatioMoments(2, 2.0, 0.0, 2.0, 0.0, 0.0), zero,
                         level=0.9)
    # one unit: the value, nothing else
    one = ratio_difference(RatioMoments(1, 2.0, 0.0, 1.0, 0.0, 0.0), RatioMoments(1, 1.0, 0.0, 1.0, 0.0, 0.0), zero,
                           level=0.9)
    assert (one.value, one.n, one.ci.level) == (1.0, 1, 0.9) and math.isnan(one.p_value)
    assert math.isnan(one.stderr) and math.isnan(one.ci.low) and math.isnan(one.ci.high)
    # each of the ten second moments and co-moments past double precision is named
    for i in range(10):
        m = [2.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]
        m[i] = math.inf
        first = RatioMoments(2, 4.0, m[0], 2.0, m[1], m[2])
        second = RatioMoments(2, 2.0, m[3], 2.0, m[4], m[5])
        with pytest.raises(NonFiniteMoments, match=r"^the second moments are not finite: "):
            ratio_difference(first, second, CrossMoments(*m[6:]), level=0.9)
    # a = b = (1, 3): a/b is 1 on every unit and c = e, so every term of the variance cancels: undefined, warned
    from offeval_core.errors import EstimatorWarning

    with pytest.warns(EstimatorWarning, match="below the precision of its moments"):
        flat = ratio_difference(RatioMoments(2, 4.0, 2.0, 4.0, 2.0, 2.0), RatioMoments(2, 2.0, 0.0, 2.0, 0.0, 0.0),
                                zero, level=0.9)
    assert flat.value == 0.0 and math.isnan(flat.stderr) and math.isnan(flat.p_value)


def test_ratio_estimate_and_mean_edges_by_hand():
    from offeval_core.errors import NonFiniteMoments

    # x = (1, 2), y = (2, 2): R = 3/4, Var(x − R y) = s_x² = 0.5, se = √(0.5 / (2 · 2²)) = 0.25
    e = stats.ratio_estimate(2, 3.0, 0.5, 4.0, 0.0, 0.0, level=0.9)
    assert (e.value, e.stderr, e.n, e.ci.level) == (0.75, 0.25, 2, 0.9)
    assert e.ci.high == pytest.approx(0.75 + 1.6448536269514722 * 0.25, abs=1e-12)
    # no units (even with sums given), and one unit: the value only
    none = stats.ratio_estimate(0, 3.0, 0.0, 2.0, 0.0, 0.0, level=0.9)
    assert math.isnan(none.value) and math.isnan(none.stderr) and none.n == 0
    assert math.isnan(none.ci.low) and math.isnan(none.ci.high) and none.ci.level == 0.9
    one = stats.ratio_estimate(1, 3.0, 0.0, 2.0, 0.0, 0.0, level=0.9)
    assert (one.value, one.n, one.ci.level) == (1.5, 1, 0.9) and math.isnan(one.ci.low) and math.isnan(one.ci.high)
    # what is past double precision is named: a sum, the ratio, a co-moment, the variance's terms
    for sums in ((math.inf, 2.0), (3.0, math.inf)):
        with pytest.raises(NonFiniteMoments, match=r"^the sums are not finite: "):
            stats.ratio_estimate(2, *sums[:1], 0.5, *sums[1:], 0.0, 0.0, level=0.9)
    with pytest.raises(NonFiniteMoments, match=r"^the ratio of the sums are not finite: "):
        stats.ratio_estimate(2, 1e308, 0.5, 1e-10, 0.0, 0.0, level=0.9)
    with pytest.raises(NonFiniteMoments, match=r"^the co-moments are not finite: "):
        stats.ratio_estimate(2, 3.0, 0.5, 4.0, 0.0, math.inf, level=0.9)
    with pytest.raises(NonFiniteMoments, match=r"^the second moments are not finite: "):
        stats.ratio_estimate(2, 3.0, math.inf, 4.0, 0.0, 0.0, level=0.9)
    with pytest.raises(NonFiniteMoments, match=r"^the ratio's variance terms are not finite: "):
        stats.ratio_estimate(2, 1.0, 1e300, 1e-150, 0.0, 0.0, level=0.9)   # 1e300 / (2 · (5e-151)²) overflows
    # a mean's sum past double precision
    with pytest.raises(NonFiniteMoments, match=r"^the sums are not finite: "):
        stats.mean_estimate(2, math.inf, 0.0, level=0.9)


def test_delta_variance_precision_rule():
    import warnings

    from offeval_core.errors import EstimatorWarning, NonFiniteMoments

    # a second moment past double precision is named
    with pytest.raises(NonFiniteMoments, match=r"^the second moments are not finite: "):
        stats.sample_variance(3, math.inf)
    # no spread at all (x = (1, 1), y = (2, 2)): every term is 0, so the SE is 0, not undefined, and no warning
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert stats.ratio_estimate(2, 2.0, 0.0, 4.0, 0.0, 0.0, level=0.9).stderr == 0.0
    # x = (0.1, 0.2), y = (0.2, 0.4): x/y = 1/2 on both units; the terms (0.005, −0.01, 0.005) are all below 1 and
    # cancel: undefined, with a warning
    with pytest.warns(EstimatorWarning, match=r"^the delta-method standard error of a ratio is below the precision "
                                              r"of its moments"):
        small = stats.ratio_estimate(2, 0.30000000000000004, 0.005, 0.6000000000000001, 0.02, 0.01, level=0.9)
    assert math.isnan(small.stderr)
    # the rule is relative to the terms' size: a sum of 1e-8 against terms of size 200 (5e-11 of it) is noise,
    # the same sum against terms of size 2 (5e-9 of it) is kept
    with pytest.warns(EstimatorWarning):
        assert math.isnan(stats._delta_variance(100.0, -200.0, 100.0 + 1e-8))
    assert stats._delta_variance(1.0, -1.0, 1e-8) == pytest.approx(1e-8, rel=1e-12)


def test_delta_variance_is_undefined_exactly_at_its_precision_boundary():
    """The rule reads "value ≤ 1e-9 · size": terms (x, −x, v) whose sum v is exactly 1e-9 of their size in
    double precision (x = 0.5282756833351288, v = 1e-9 · (2x + v) rounds to itself) are undefined; the next
    double above v, with the same x, is kept. A strict < would keep the first."""
    import warnings

    from offeval_core.errors import EstimatorWarning

    x, v = 0.5282756833351288, 1.0565513677268088e-09
    terms = (x, -x, v)
    assert sum(terms) == stats.DELTA_PRECISION * sum(abs(t) for t in terms)  # exactly on the boundary
    with pytest.warns(EstimatorWarning):
        assert math.isnan(stats._delta_variance(*terms))
    above = (x, -x, np.nextafter(v, 1.0))
    assert sum(above) > stats.DELTA_PRECISION * sum(abs(t) for t in above)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert stats._delta_variance(*above) == np.nextafter(v, 1.0)


def test_a_denominator_mean_too_small_to_square_is_a_typed_error():
    """ȳ = 1e-200 is a finite mean, but ȳ² underflows to 0 and the delta-method variance divides by it: a
    NonFiniteMoments naming the mean, not a ZeroDivisionError (a bug's traceback on the dashboard)."""
    from offeval_core.errors import NonFiniteMoments
    from offeval_core.stats import CrossMoments, RatioMoments, ratio_difference, ratio_estimate

    msg = r"the mean of a ratio's denominator \(1e-200\) is too small to square"
    with pytest.raises(NonFiniteMoments, match=msg):
        ratio_estimate(2, 1.0, 1.0, 2e-200, 0.0, 0.0, level=0.9)
    small = RatioMoments(2, 1.0, 0.5, 2e-200, 0.0, 0.0)
    with pytest.raises(NonFiniteMoments, match=msg):
        ratio_difference(small, RatioMoments(2, 1.0, 0.5, 1.0, 0.5, 0.5), CrossMoments(0.0, 0.0, 0.0, 0.0), level=0.9)
    with pytest.raises(NonFiniteMoments, match=msg):
        ratio_difference(RatioMoments(2, 1.0, 0.5, 1.0, 0.5, 0.5), small, CrossMoments(0.0, 0.0, 0.0, 0.0), level=0.9)
    # 1e-150 squares to 1e-300, still a double: the ratio 1 / 2e-150 = 5e149 is computed, with se 0 (no spread)
    e = ratio_estimate(2, 1.0, 0.0, 2e-150, 0.0, 0.0, level=0.9)
    assert e.value == 5e149


def test_the_precision_warning_points_at_the_line_that_asked_for_the_ratio():
    """The delta-method warning is attributed to the caller's line (this file's), not to stats.py, for either
    ratio: x = (1, 2), y = (2, 4) (x/y = 1/2 on both units), and a = b = (1, 3) against c = e = (1, 1)."""
    from offeval_core.errors import EstimatorWarning

    calls = (lambda: stats.ratio_estimate(2, 3.0, 0.5, 6.0, 2.0, 1.0, level=0.95),
             lambda: stats.ratio_difference(stats.RatioMoments(2, 4.0, 2.0, 4.0, 2.0, 2.0),
                                            stats.RatioMoments(2, 2.0, 0.0, 2.0, 0.0, 0.0),
                                            stats.CrossMoments(0.0, 0.0, 0.0, 0.0), level=0.9))
    for call in calls:
        with pytest.warns(EstimatorWarning, match="below the precision of its moments") as record:
            assert math.isnan(call().stderr)
        assert [(w.filename, w.lineno) for w in record] == [(__file__, call.__code__.co_firstlineno)]


def test_resample_counts_are_multinomial_counts_of_uniform_draws():
    """Each resample draws n units with replacement: the counts of the same uniform indices, counted row by row,
    sum to n per resample and have the multinomial(n; 1/n) moments: variance 1 − 1/n, covariance −1/n between two
    units (20,000 resamples of 5 units: standard errors about 0.009 and 0.006)."""
    from resample_support import replay_counts

    from offeval_core.stats import resample_counts

    c = resample_counts(7, 3, np.random.default_rng(5))
    assert c.dtype == np.float64 and c.shape == (3, 7)
    idx = np.random.default_rng(5).integers(0, 7, size=(3, 7))
    assert c.tolist() == [np.bincount(row, minlength=7).tolist() for row in idx]
    assert np.array_equal(resample_counts(7, 3, np.random.default_rng(5)), replay_counts(5, 7, 3))
    big = resample_counts(5, 20_000, np.random.default_rng(1))
    assert (big.sum(axis=1) == 5).all()
    assert big.var(axis=0, ddof=1) == pytest.approx([0.8] * 5, abs=0.04)
    assert np.cov(big[:, 0], big[:, 1])[0, 1] == pytest.approx(-0.2, abs=0.03)
