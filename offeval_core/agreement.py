"""Agreement between two metrics over a set of policies / models.

Used wherever two offline metrics rank the same candidates, e.g. DCG vs nDCG over a model zoo (KDD'24
App. A, Fig. 2; Lemma 5.2 and Table 1) or over candidate ranking policies on logs.

Inputs are plain arrays: one value per policy for :func:`agreement`, and per-unit matrices
(units × policies, a unit being a user, query or session) for :func:`inverted_share_bootstrap`.

**Tie rule.** A pair of policies ``(a, b)`` is *inverted* when the two metrics order it strictly
oppositely: ``(x_a − x_b)·(y_a − y_b) < 0``. A pair tied under either metric is never counted as
inverted, but it stays in the denominator, which is always the number of unordered pairs
``n (n − 1) / 2``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from offeval_core.defaults import LEVEL
from offeval_core.errors import InputError, WrongType
from offeval_core.results import ConfidenceInterval
from offeval_core.stats import resample_counts
from offeval_core.validation import check_level, check_rng

__all__ = ["Agreement", "agreement", "inverted_pair_mask", "inverted_share_bootstrap"]


@dataclass(frozen=True, slots=True)
class Agreement:
    """How two metrics ``x`` and ``y`` agree over ``n`` policies.

    ``inverted_pairs`` lists ``(name_a, name_b)`` with ``x_a > x_b`` but ``y_a < y_b`` (so the first name is
    the one ``x`` prefers).
    """

    n: int
    pearson_r: float
    pearson_p: float
    kendall_tau: float
    kendall_p: float
    n_pairs: int
    n_inverted: int
    inverted_share: float
    inverted_pairs: tuple[tuple[str, str], ...]

    def to_dict(self) -> dict:
        def num(v: float) -> float | None:
            return None if math.isnan(v) else float(v)

        return {
            "n": self.n,
            "pearson_r": num(self.pearson_r),
            "pearson_p": num(self.pearson_p),
            "kendall_tau": num(self.kendall_tau),
            "kendall_p": num(self.kendall_p),
            "n_pairs": self.n_pairs,
            "n_inverted": self.n_inverted,
            "inverted_share": num(self.inverted_share),
        }


def _as_vector(values, *, name: str) -> np.ndarray:
    try:
        arr = np.asarray(values, dtype=float)
    except (TypeError, ValueError):
        raise WrongType(f"{name} must be a sequence of numbers, got {type(values).__name__}") from None
    if arr.ndim != 1:
        raise InputError(f"{name} must be one-dimensional (one value per policy), got shape {arr.shape}")
    if not np.all(np.isfinite(arr)):
        bad = np.flatnonzero(~np.isfinite(arr))[:5].tolist()
        raise InputError(f"{name} must be finite; non-finite values at positions {bad}")
    return arr


def inverted_pair_mask(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Boolean upper-triangular matrix ``M[a, b] = (x_a − x_b)(y_a − y_b) < 0`` for ``a < b``.

    >>> inverted_pair_mask(np.array([1.0, 2.0, 3.0]), np.array([1.0, 3.0, 2.0])).sum()  # only (2, 3)
    np.int64(1)
    """
    dx = np.sign(x[:, None] - x[None, :])
    dy = np.sign(y[:, None] - y[None, :])
    return np.triu(dx * dy < 0, k=1)


def agreement(x, y, *, names=None) -> Agreement:
    """Pearson r, Kendall τ (τ-b, scipy) and the share of policy pairs whose order ``y`` inverts.

    share = #{a < b : (x_a − x_b)(y_a − y_b) < 0} / (n(n−1)/2)  — ties never inverted, always counted
    in the denominator (module docstring). KDD'24 App. A reports r ≈ 0.6, τ ≈ 0.5 and ≈ 25 % inverted
    pairs for DCG@100 vs nDCG@100 over 192 models on MovieLens-1M.

    Parameters
    ----------
    x, y : array-like of shape (n_policies,)
        The two metrics, one value per policy (``x`` is the reference, e.g. DCG).
    names : sequence of str, optional
        Policy names used in ``inverted_pairs``; default ``"0", "1", …``.

    Examples
    --------
    KDD'24 Table 1 plus a third policy: DCG(X) = (1.00, 1.25, 0.5), nDCG(X) = (0.64, 0.36, 0.1).
    Only the pair (R, R') is inverted, so the share is 1 of 3 pairs:

    >>> a = agreement([1.00, 1.25, 0.5], [0.64, 0.36, 0.1], names=["R", "R'", "R''"])
    >>> a.n_inverted, round(a.inverted_share, 4), a.inverted_pairs
    (1, 0.3333, (("R'", 'R'),))
    """
    xv = _as_vector(x, name="x")
    yv = _as_vector(y, name="y")
    if xv.shape != yv.shape:
        raise InputError(f"x and y must have the same length, got {xv.size} and {yv.size}")
    n = xv.size
    if n < 2:
        raise InputError(f"agreement needs at least 2 policies, got {n}")
    if names is None:
        labels = [str(i) for i in range(n)]
    else:
        labels = [str(s) for s in names]
        if len(labels) != n:
            raise InputError(f"names must have one entry per policy ({n}), got {len(labels)}")
    mask = inverted_pair_mask(xv, yv)
    ia, ib = np.nonzero(mask)
    pairs = tuple(
        (labels[a], labels[b]) if xv[a] > xv[b] else (labels[b], labels[a]) for a, b in zip(ia, ib, strict=True)
    )
    n_pairs = n * (n - 1) // 2
    from scipy import stats as _sps  # (imported here: ~0.45 s that most callers never need)

    if n >= 3 and np.ptp(xv) > 0 and np.ptp(yv) > 0:
        pr = _sps.pearsonr(xv, yv)
        r, rp = float(pr.statistic), float(pr.pvalue)
    else:
        r, rp = math.nan, math.nan
    if np.ptp(xv) > 0 and np.ptp(yv) > 0:
        kt = _sps.kendalltau(xv, yv)
        tau, tp = float(kt.statistic), float(kt.pvalue)
    else:
        tau, tp = math.nan, math.nan
    return Agreement(n, r, rp, tau, tp, n_pairs, len(pairs), len(pairs) / n_pairs, pairs)


def _as_matrix(values, *, name: str) -> np.ndarray:
    try:
        arr = np.asarray(values, dtype=float)
    except (TypeError, ValueError):
        raise WrongType(f"{name} must be a numeric matrix (units × policies), got {type(values).__name__}") from None
    if arr.ndim != 2:
        raise InputError(f"{name} must be a 2-D matrix (units × policies), got shape {arr.shape}")
    if not np.all(np.isfinite(arr)):
        rows = np.unique(np.nonzero(~np.isfinite(arr))[0])[:5].tolist()
        raise InputError(f"{name} must be finite; non-finite values in units (rows) {rows}")
    return arr


def inverted_share_bootstrap(
    per_unit_x, per_unit_y, *, n_boot: int = 1000, rng=None, level: float = LEVEL
) -> ConfidenceInterval:
    """Percentile bootstrap CI of the inverted-pair share, resampling units with replacement.

    In each resample the units (users / sessions) are drawn with replacement, each policy's metric is
    re-aggregated as the mean over the resampled units, and the share of inverted policy pairs is
    recomputed (tie rule of the module docstring). A resample with replacement is the same as
    multinomial unit counts, which lets all resamples be one matrix product.

    Parameters
    ----------
    per_unit_x, per_unit_y : array-like of shape (n_units, n_policies)
        Per-unit metric values (rows the same units in both).
    n_boot : int
        Number of bootstrap resamples (≥ 10).
    rng : None, int or numpy.random.Generator
        Source of randomness (an int seeds a new Generator).
    level : float
        Confidence level of the percentile interval.

    Examples
    --------
    Two policies whose order is the same for every unit are never inverted, so the CI is [0, 0]:

    >>> x = np.array([[1.0, 2.0], [2.0, 3.0], [0.0, 1.0]])
    >>> ci = inverted_share_bootstrap(x, x, n_boot=50, rng=np.random.default_rng(0))
    >>> ci.low, ci.high
    (0.0, 0.0)
    """
    check_level(level)
    if isinstance(n_boot, bool) or not isinstance(n_boot, int | np.integer):
        raise WrongType(f"n_boot must be an integer ≥ 10, got {type(n_boot).__name__} {n_boot!r}")
    if n_boot < 10:
        raise InputError(f"n_boot must be ≥ 10, got {n_boot}")
    rng = check_rng(rng)
    xm = _as_matrix(per_unit_x, name="per_unit_x")
    ym = _as_matrix(per_unit_y, name="per_unit_y")
    if xm.shape != ym.shape:
        raise InputError(f"per_unit_x and per_unit_y must have the same shape, got {xm.shape} and {ym.shape}")
    n_units, n_pol = xm.shape
    if n_units < 2 or n_pol < 2:
        raise InputError(f"need at least 2 units and 2 policies, got shape {xm.shape}")
    n_pairs = n_pol * (n_pol - 1) / 2
    chunk = max(1, 2_000_000 // n_units)  # resamples drawn at once: about 2 M unit counts in memory
    shares: list[float] = []
    for start in range(0, n_boot, chunk):
        counts = resample_counts(n_units, min(chunk, n_boot - start), rng)
        mx = counts @ xm / n_units
        my = counts @ ym / n_units
        shares.extend(inverted_pair_mask(mx[j], my[j]).sum() / n_pairs for j in range(len(counts)))
    lo, hi = np.quantile(shares, [0.5 - level / 2, 0.5 + level / 2])
    return ConfidenceInterval(float(lo), float(hi), level)
