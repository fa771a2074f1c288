"""Statistics from moments: means, standard errors, normal CIs, p-values, Welch's test.

Everything here takes counts, sums and centred second moments (the "moments" of DESIGN.md and
:mod:`offeval_core.moment_columns`): ``n``, ``Σx`` and ``M2 = Σ(x − x̄)²`` (and co-moments
``Σ(x − x̄)(y − ȳ)``), so a widget change in the dashboard never needs the raw logs again, and an offset of
10⁸ on the values costs no digit of their variance. A moment that is not finite (values beyond double
precision) raises :class:`~offeval_core.errors.NonFiniteMoments` instead of giving a 0 standard error.
"""

from __future__ import annotations

import functools
import math
from typing import NamedTuple

import numpy as np
from scipy import special as _sc

from offeval_core.errors import InputError, NonFiniteMoments, warn_estimator
from offeval_core.results import ConfidenceInterval, Effect, Estimate
from offeval_core.validation import check_level

__all__ = [
    "CrossMoments",
    "RatioMoments",
    "check_finite",
    "kish_ess",
    "kish_ess_from_sums",
    "mean_estimate",
    "moments_of",
    "normal_ci",
    "normal_quantile",
    "one_sided_p",
    "paired_effect",
    "pearson",
    "ratio_difference",
    "ratio_estimate",
    "resample_counts",
    "sample_variance",
    "two_sided_p",
    "welch_df",
    "welch_effect",
    "welch_two_sided_p",
]

OVERFLOW_HINT = ("the values (or their squares) are beyond double precision (about 1.8e308); rescale the "
                 "reward (e.g. to thousands) or use a finite clip value")


def check_finite(*values: float, what: str = "moments") -> None:
    """Raise :class:`NonFiniteMoments` when any of ``values`` is infinite or NaN.

    >>> check_finite(1.0, float("inf"), what="the moments of DCG")
    Traceback (most recent call last):
    ...
    offeval_core.errors.NonFiniteMoments: the moments of DCG are not finite: the values (or their squares) are beyond double precision (about 1.8e308); rescale the reward (e.g. to thousands) or use a finite clip value
    """
    for v in values:
        if not math.isfinite(v):
            raise NonFiniteMoments(f"{what} are not finite: {OVERFLOW_HINT}")


def moments_of(values) -> tuple[int, float, float]:
    """``(n, Σx, Σ(x − x̄)²)`` of an array of per-unit values, the second moment centred on the mean
    (two passes).

    >>> moments_of([1e8, 1e8 + 1, 1e8, 1e8 + 1])   # Σ(x − x̄)² = 4 · 0.25
    (4, 400000002.0, 1.0)
    """
    x = np.asarray(values, dtype=np.float64).ravel()
    if x.size == 0:
        return 0, 0.0, 0.0
    with np.errstate(over="ignore", invalid="ignore"):
        total = float(x.sum())
        mean = float(np.mean(x))  # numpy's pairwise mean: finite whenever the values are
        m2 = float(np.sum((x - mean) ** 2))
    check_finite(total, m2, what="the sum and second moment of the values")
    return int(x.size), total, m2


def kish_ess_from_sums(total, total_sq):
    """Kish's effective sample size (Σ w)² / Σ w² from the sum and the sum of squares of the weights (Kish,
    *Survey Sampling*, 1965, Sec. 11.7; Owen, *Monte Carlo theory, methods and examples*, 2013, Eq. 9.13): the
    number of equally weighted units that would give the weighted mean the same variance. 0 where Σ w² = 0
    (no unit carries weight, so none is effective: a weight diagnostic then reads "no effective sample", not
    "undefined"); elementwise on arrays. The one definition of ESS: every
    estimator's weight diagnostics (importance, slate, clip tuning, verdicts) call it.

    >>> kish_ess_from_sums(3.0, 5.0)   # weights 1 and 2: 3² / (1 + 4)
    1.8
    """
    t, t2 = np.asarray(total, dtype=np.float64), np.asarray(total_sq, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        out = np.where(t2 == 0, 0.0, t * t / np.where(t2 == 0, 1.0, t2))  # NaN sums stay NaN
    return float(out) if out.ndim == 0 else out


def kish_ess(weights, *, axis: int | None = None):
    """Kish's effective sample size (Σ w)² / Σ w² of ``weights`` (over ``axis``; all of them by default), by
    :func:`kish_ess_from_sums`.

    >>> kish_ess([1.0, 1.0, 4.0])      # 6² / (1 + 1 + 16) = 2: one weight of 4 is worth a third of the rows
    2.0
    """
    w = np.asarray(weights, dtype=np.float64)
    return kish_ess_from_sums(w.sum(axis=axis), (w * w).sum(axis=axis))


def resample_counts(n: int, size: int, rng: np.random.Generator) -> np.ndarray:
    """How often each of ``n`` units is drawn in each of ``size`` bootstrap resamples (n draws with replacement):
    a (size, n) float array whose rows are multinomial(n; 1/n, …, 1/n). Drawn as n uniform unit indices per
    resample and counted — several times faster than ``rng.multinomial`` for many units — and returned as floats,
    so that ``counts @ values`` (each resample's sums) runs as one matrix product.

    >>> c = resample_counts(4, 3, np.random.default_rng(0))
    >>> c.shape, c.sum(axis=1).tolist()   # every resample draws the 4 units 4 times in all
    ((3, 4), [4.0, 4.0, 4.0])
    """
    idx = rng.integers(0, n, size=(size, n))
    flat = (idx + np.arange(size)[:, None] * n).ravel()  # resample r's units counted in the slots r·n … r·n + n − 1
    return np.bincount(flat, minlength=size * n).reshape(size, n).astype(np.float64)


def sample_variance(n: float, m2: float) -> float:
    """Unbiased sample variance ``M2 / (n − 1)`` from the centred second moment ``M2 = Σ(x − x̄)²``; NaN
    when ``n < 2``.

    >>> sample_variance(3, 2.0)  # values 1, 2, 3: M2 = 1 + 0 + 1
    1.0
    """
    if n < 2:
        return math.nan
    check_finite(m2, what="the second moments")
    return max(float(m2), 0.0) / (n - 1)


def normal_quantile(level: float) -> float:
    """The two-sided normal critical value z_{(1+level)/2} (1.960 at level 0.95, 2.576 at 0.99).

    >>> round(normal_quantile(0.99), 3)
    2.576
    """
    check_level(level)
    return _normal_quantile(float(level))


@functools.lru_cache(maxsize=64)
def _normal_quantile(level: float) -> float:
    # scipy.special's kernels are the ones scipy.stats.norm / t call (ndtri, ndtr, stdtrit, stdtr): the same
    # numbers without the distribution layer's per-call argument handling (~0.2 ms a call, thousands a page)
    return float(_sc.ndtri(0.5 + level / 2))


def normal_ci(value: float, stderr: float, *, level: float) -> ConfidenceInterval:
    """Two-sided normal interval ``value ± z_{(1+level)/2} · stderr``.

    >>> round(normal_ci(0.0, 1.0, level=0.95).high, 3)  # z_0.975 = 1.960
    1.96
    """
    z = normal_quantile(level)
    return ConfidenceInterval(value - z * stderr, value + z * stderr, level)


def one_sided_p(value: float, stderr: float) -> float:
    """p-value of H0: mean ≤ 0 against H1: mean > 0 under the normal approximation (NaN when the standard
    error is undefined; 0 / ½ / 1 when it is exactly 0, i.e. every unit has the same value).

    >>> round(one_sided_p(1.645, 1.0), 3)  # the 95 % one-sided critical value
    0.05
    """
    if math.isnan(stderr) or math.isnan(value):
        return math.nan
    if not stderr > 0:
        if value > 0:
            return 0.0
        return 1.0 if value < 0 else 0.5
    return float(_sc.ndtr(-(value / stderr)))


def two_sided_p(value: float, stderr: float) -> float:
    """p-value of H0: mean = 0 (two-sided) under the normal approximation (NaN when the standard error is
    undefined)."""
    if math.isnan(stderr) or math.isnan(value):
        return math.nan
    if not stderr > 0:
        return 1.0 if value == 0 else 0.0
    return float(2 * _sc.ndtr(-(abs(value) / stderr)))


def _mean(n: float, total: float) -> float:
    check_finite(total, what="the sums")
    return float(total / n)


def mean_estimate(n: float, total: float, m2: float, *, level: float) -> Estimate:
    """Mean of per-unit values with its standard error ``s / √n`` (s² = M2 / (n − 1)) and normal CI.

    >>> e = mean_estimate(4, 4.0, 2.0, level=0.95)  # values 0, 1, 1, 2: mean 1, M2 = 2, s² = 2/3
    >>> e.value, round(e.stderr, 4)
    (1.0, 0.4082)
    """
    if n <= 0:
        return Estimate(math.nan, math.nan, 0, ConfidenceInterval(math.nan, math.nan, level))
    mean = _mean(n, total)
    se = math.sqrt(sample_variance(n, m2) / n) if n >= 2 else math.nan
    return Estimate(mean, se, int(n), normal_ci(mean, se, level=level))


def paired_effect(n: float, sum_diff: float, m2_diff: float, *, level: float) -> Effect:
    """Paired treatment effect from the per-unit differences ``d = target − logging`` on the same units
    (``Σd`` and ``M2 = Σ(d − d̄)²``).

    The CI is the normal interval at ``level``; the p-value is one-sided for H0: effect ≤ 0
    (KDD'24 Sec. 6.2: "significant iff the 99 % CI is strictly positive").

    >>> eff = paired_effect(4, 2.0, 1.0, level=0.95)  # d = 0, 1, 1, 0: mean 0.5, M2 = 1, s² = 1/3
    >>> round(eff.value, 2), round(eff.stderr, 4)
    (0.5, 0.2887)
    """
    est = mean_estimate(n, sum_diff, m2_diff, level=level)
    return Effect(est.value, est.stderr, est.n, est.ci, one_sided_p(est.value, est.stderr))


def welch_effect(
    n_t: float, sum_t: float, m2_t: float, n_c: float, sum_c: float, m2_c: float, *, level: float
) -> Effect:
    """Difference of two independent means (treatment − control) with Welch's unequal-variance test, from
    each arm's count, sum and centred second moment.

    The CI uses Student's t with Welch-Satterthwaite degrees of freedom; the p-value is one-sided for
    H0: effect ≤ 0 (use :func:`welch_two_sided_p` for the usual two-sided online significance).

    >>> eff = welch_effect(3, 6.0, 2.0, 3, 3.0, 2.0, level=0.95)  # (1,2,3) vs (0,1,2)
    >>> eff.value, round(eff.stderr, 4)
    (1.0, 0.8165)
    """
    check_level(level)
    if n_t < 2 or n_c < 2:
        nan = math.nan
        return Effect(nan, nan, int(n_t + n_c), ConfidenceInterval(nan, nan, level), nan)
    var_t = sample_variance(n_t, m2_t)
    var_c = sample_variance(n_c, m2_c)
    diff = _mean(n_t, sum_t) - _mean(n_c, sum_c)
    check_finite(diff, what="the difference of the arms' means")
    a, b = var_t / n_t, var_c / n_c
    se = math.sqrt(a + b)
    check_finite(se, what="the arms' variances")
    df = welch_df(a, b, n_t, n_c)
    if se > 0:
        t_crit = float(_sc.stdtrit(df, 0.5 + level / 2))
        p = float(_sc.stdtr(df, -(diff / se)))
    else:
        t_crit, p = 0.0, (0.0 if diff > 0 else (1.0 if diff < 0 else 0.5))
    return Effect(diff, se, int(n_t + n_c), ConfidenceInterval(diff - t_crit * se, diff + t_crit * se, level), p)


def welch_df(a: float, b: float, n_t: float, n_c: float) -> float:
    """Welch-Satterthwaite degrees of freedom for variance-of-mean terms ``a = s_t²/n_t``, ``b = s_c²/n_c``."""
    denom = (a * a) / (n_t - 1) + (b * b) / (n_c - 1)
    if denom == 0:
        return float(n_t + n_c - 2)
    return (a + b) ** 2 / denom


def welch_two_sided_p(n_t, sum_t, m2_t, n_c, sum_c, m2_c) -> float:
    """Two-sided p-value of Welch's test of equal means, from each arm's count, sum and centred second moment."""
    if n_t < 2 or n_c < 2:
        return math.nan
    a = sample_variance(n_t, m2_t) / n_t
    b = sample_variance(n_c, m2_c) / n_c
    se = math.sqrt(a + b)
    diff = _mean(n_t, sum_t) - _mean(n_c, sum_c)
    check_finite(diff, se, what="the arms' means and variances")
    if se == 0:
        return 1.0 if diff == 0 else 0.0
    return float(2 * _sc.stdtr(welch_df(a, b, n_t, n_c), -(abs(diff) / se)))


def ratio_estimate(
    n: float, sum_x: float, m2_x: float, sum_y: float, m2_y: float, co_xy: float, *, level: float
) -> Estimate:
    """Ratio of means ``Σx / Σy`` with a delta-method standard error (used by pnDCG and NIS), from the sums,
    centred second moments and the co-moment ``Σ(x − x̄)(y − ȳ)``.

    Var(x̄/ȳ) ≈ (s_x² − 2 R s_xy + R² s_y²) / (n ȳ²) with R = x̄ / ȳ.

    >>> e = ratio_estimate(2, 3.0, 0.5, 4.0, 0.0, 0.0, level=0.95)  # x = (1, 2), y = (2, 2)
    >>> e.value, round(e.stderr, 4)
    (0.75, 0.25)
    """
    if n <= 0 or sum_y == 0:
        return Estimate(math.nan, math.nan, int(n), ConfidenceInterval(math.nan, math.nan, level))
    check_finite(sum_x, sum_y, what="the sums")
    r = float(sum_x / sum_y)
    check_finite(r, what="the ratio of the sums")
    if n < 2:
        return Estimate(r, math.nan, int(n), ConfidenceInterval(math.nan, math.nan, level))
    mean_y = sum_y / n
    _check_square(mean_y)
    var_x = sample_variance(n, m2_x)
    var_y = sample_variance(n, m2_y)
    check_finite(co_xy, what="the co-moments")
    cov = co_xy / (n - 1)
    var_r = _delta_variance(var_x, -2 * r * cov, r * r * var_y) / (n * mean_y * mean_y)
    se = math.sqrt(var_r)
    if not math.isnan(se):
        check_finite(se, what="the ratio's variance terms")
    return Estimate(r, se, int(n), normal_ci(r, se, level=level))


def _check_square(*means: float) -> None:
    """Raise :class:`NonFiniteMoments` when the square of a ratio's denominator mean ȳ is below the smallest
    double (|ȳ| < about 1e-154): the delta-method variance divides by ȳ².

    >>> _check_square(0.5, 2e-200)
    Traceback (most recent call last):
    ...
    offeval_core.errors.NonFiniteMoments: the mean of a ratio's denominator (2e-200) is too small to square in double precision (below about 1e-154); rescale the weights or the denominators' values
    """
    for m in means:
        if m * m == 0:
            raise NonFiniteMoments(f"the mean of a ratio's denominator ({m:.3g}) is too small to square in double "
                                   "precision (below about 1e-154); rescale the weights or the denominators' values")


DELTA_PRECISION = 1e-9
"""A delta-method variance smaller than this share of the sum of its terms' sizes is below the precision of the
moments it comes from (second moments carry a relative error of up to about 1e-9 when the values share a large
offset): it is reported as undefined (NaN), with a warning, rather than as 0 or as rounding noise."""


def _delta_variance(*terms: float) -> float:
    """Σ terms of a delta-method variance, or NaN (with an :class:`EstimatorWarning`) when the terms cancel
    beyond the moments' precision: the per-unit ratios x/y are (nearly) the same on every unit, e.g. rewards
    sharing an offset of 10⁸ in SNIPS, so Var(x − R y) is lost against Var(x) ≈ R² Var(y)."""
    size = sum(abs(t) for t in terms)
    value = sum(terms)
    if size > 0 and value <= DELTA_PRECISION * size:
        warn_estimator("the delta-method standard error of a ratio is below the precision of its moments (the "
                       "ratio of each unit's values is nearly the same everywhere, e.g. rewards with a large common "
                       "offset): reported as undefined; subtract the offset from the reward to get it")
        return math.nan
    return max(value, 0.0)


def pearson(x: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    """Pearson's r and its two-tailed Student-t p-value (as in KDD'24 Table 2); NaN with < 3 points."""
    x = np.asarray(x, dtype=float)
    y = np.asarray(y, dtype=float)
    if x.size < 3 or np.ptp(x) == 0 or np.ptp(y) == 0:
        return math.nan, math.nan
    from scipy import stats as _sps  # (imported here: ~0.45 s that most callers never need)

    res = _sps.pearsonr(x, y)
    return float(res.statistic), float(res.pvalue)


class RatioMoments(NamedTuple):
    """Moments of a ratio of means Σx / Σy over ``n`` units: Σx, M2 of x, Σy, M2 of y and the co-moment
    Σ(x − x̄)(y − ȳ)."""

    n: float
    sum_x: float
    m2_x: float
    sum_y: float
    m2_y: float
    co_xy: float


class CrossMoments(NamedTuple):
    """Co-moments Σ(u − ū)(v − v̄) of two ratios' per-unit values x₁/y₁ (first) and x₀/y₀ (second) on the
    same units."""

    x1_x0: float
    x1_y0: float
    y1_x0: float
    y1_y0: float


def ratio_difference(first: RatioMoments, second: RatioMoments, cross: CrossMoments, *, level: float) -> Effect:
    """Paired difference of two ratios of means on the same n units, Σa/Σb − Σc/Σe, delta method
    (a, b = the first ratio's x, y; c, e = the second's).

    The influence of unit τ is φ_τ = (a_τ − R₁ b_τ)/b̄ − (c_τ − R₀ e_τ)/ē (R₁ = Σa/Σb, R₀ = Σc/Σe);
    SE = sd(φ)/√n from the per-unit sums, centred second moments and co-moments. NCIS − logging mean
    (Gilotte Sec. 6.1, "offline uplift") is such a difference: the target is normalised by its capped
    weights, the logging value by the unit count. One-sided p of H0: difference ≤ 0.

    >>> # a = (1, 3), b = (1, 1) → 2;  c = (1, 1), e = (1, 1) → 1; φ = (−1, 1) − (0, 0): sd = √2
    >>> eff = ratio_difference(RatioMoments(2, 4, 2, 2, 0, 0), RatioMoments(2, 2, 0, 2, 0, 0),
    ...                        CrossMoments(0, 0, 0, 0), level=0.95)
    >>> eff.value, round(eff.stderr, 4)
    (1.0, 1.0)
    """
    if first.n != second.n:
        raise InputError(f"ratio_difference needs both ratios on the same units; got n = {first.n} and {second.n}")
    n, sum_a, m2_a, sum_b, m2_b, co_ab = first
    _, sum_c, m2_c, sum_e, m2_e, co_ce = second
    co_ac, co_ae, co_bc, co_be = cross
    nan = math.nan
    if n <= 0 or sum_b == 0 or sum_e == 0:
        return Effect(nan, nan, int(n), normal_ci(nan, nan, level=level), nan)
    check_finite(sum_a, sum_b, sum_c, sum_e, what="the sums")
    r1, r0 = sum_a / sum_b, sum_c / sum_e
    value = float(r1 - r0)
    check_finite(value, what="the ratios of the sums")
    if n < 2:
        return Effect(value, nan, int(n), normal_ci(value, nan, level=level), nan)
    check_finite(m2_a, m2_b, co_ab, m2_c, m2_e, co_ce, co_ac, co_ae, co_bc, co_be, what="the second moments")
    k = n - 1
    mb, me = sum_b / n, sum_e / n
    _check_square(mb, me)
    b2, e2, be = k * mb * mb, k * me * me, k * mb * me
    var = _delta_variance(m2_a / b2, -2 * r1 * co_ab / b2, r1 * r1 * m2_b / b2,  # the first ratio
                          m2_c / e2, -2 * r0 * co_ce / e2, r0 * r0 * m2_e / e2,  # the second
                          -2 * co_ac / be, 2 * r0 * co_ae / be, 2 * r1 * co_bc / be, -2 * r1 * r0 * co_be / be) / n
    se = math.sqrt(var)
    if not math.isnan(se):
        check_finite(se, what="the difference's variance terms")
    return Effect(value, se, int(n), normal_ci(value, se, level=level), one_sided_p(value, se))
