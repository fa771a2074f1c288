"""Intervals for a mean that survive heavy-tailed importance weights: empirical Bernstein (Maurer & Pontil,
COLT 2009, Thm 4) and the studentised (bootstrap-t) bootstrap, next to the normal interval.

Both take the per-session values of an estimator (e.g. Σ_k w_ik r_ik) — the independent units.

* Empirical Bernstein: for i.i.d. values in [a, a + B], with probability ≥ 1 − δ/2 on each side,
  |mean − μ| ≤ √(2 V ln(4/δ) / n) + 7 B ln(4/δ) / (3 (n − 1)), V the sample variance (ddof = 1). It holds for
  every n (conservative, never below nominal coverage) when B bounds the values; with B taken from the data
  (``bound=None``: the observed range) it is a heuristic, and says so in ``method``.
* Bootstrap-t: resample sessions, t* = (mean* − mean) / se*; the interval is [mean − t*_{1−α/2} se,
  mean − t*_{α/2} se]. Second-order accurate, so it follows the skew that heavy weights put in the mean.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from offeval_core.defaults import LEVEL
from offeval_core.errors import InputError
from offeval_core.results import ConfidenceInterval
from offeval_core.stats import normal_ci
from offeval_core.validation import check_level


@dataclass(frozen=True)
class Interval:
    """A mean with one kind of interval."""

    value: float
    ci: ConfidenceInterval
    method: str


def _values_iv(values, level: float) -> np.ndarray:
    check_level(level)
    x = np.asarray(values, dtype=np.float64)
    if x.ndim != 1 or len(x) < 2:
        raise InputError(f"need a 1-d array of at least 2 per-session values, got shape {x.shape}")
    if not np.isfinite(x).all():
        raise InputError("per-session values must be finite")
    return x


def normal_interval(values, *, level: float = LEVEL) -> Interval:
    """mean ± z s / √n.

    >>> normal_interval([0.0, 1.0, 1.0, 2.0], level=0.95).ci.high.__round__(4)  # 1 + 1.96 · √(2/3) / 2
    1.8002
    """
    x = _values_iv(values, level)
    m, se = float(x.mean()), float(x.std(ddof=1) / math.sqrt(len(x)))
    return Interval(m, normal_ci(m, se, level=level), "normal")


def empirical_bernstein(values, *, level: float = LEVEL, bound: float | None = None) -> Interval:
    """Maurer-Pontil empirical Bernstein interval (two-sided, δ = 1 − level split equally).

    >>> x = [0.0, 1.0] * 50  # n = 100, V = 100/396, B = 1, ln(4/0.05) = 4.382
    >>> round(empirical_bernstein(x, level=0.95, bound=1.0).ci.high, 4)  # 0.5 + √(2 · 0.2525 · 4.382 / 100) + 7 · 4.382 / 297 = 0.5 + 0.1488 + 0.1033
    0.752
    """
    x = _values_iv(values, level)
    n = len(x)
    b = float(np.ptp(x)) if bound is None else float(bound)
    if not b >= 0:
        raise InputError(f"bound must be ≥ 0, got {bound!r}")
    if bound is not None and np.ptp(x) > b * (1 + 1e-12):
        raise InputError(f"the values span {np.ptp(x):.6g}, more than bound = {b:g}")
    log_term = math.log(4 / (1 - level))
    half = math.sqrt(2 * x.var(ddof=1) * log_term / n) + 7 * b * log_term / (3 * (n - 1))
    m = float(x.mean())
    how = "empirical Bernstein" + (" (range from the data)" if bound is None else f" (values in a range of {b:g})")
    return Interval(m, ConfidenceInterval(m - half, m + half, level), how)


def bootstrap_t(values, *, level: float = LEVEL, n_boot: int = 2000, rng=None) -> Interval:
    """Studentised bootstrap interval of the mean (sessions resampled with replacement)."""
    x = _values_iv(values, level)
    if n_boot < 100:
        raise InputError(f"n_boot must be ≥ 100, got {n_boot}")
    rng = np.random.default_rng(rng)
    n = len(x)
    m, se = float(x.mean()), float(x.std(ddof=1) / math.sqrt(n))
    idx = rng.integers(0, n, size=(n_boot, n))
    xb = x[idx]
    mb = xb.mean(1)
    seb = xb.std(1, ddof=1) / math.sqrt(n)
    ok = seb > 0
    t = (mb[ok] - m) / seb[ok]
    if len(t) < n_boot // 2 or se == 0:
        return Interval(m, ConfidenceInterval(m, m, level), "bootstrap-t (degenerate: no spread)")
    lo_q, hi_q = np.quantile(t, [0.5 - level / 2, 0.5 + level / 2])
    return Interval(m, ConfidenceInterval(m - hi_q * se, m - lo_q * se, level), f"bootstrap-t ({n_boot} resamples)")
