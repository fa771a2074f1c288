"""Estimators of a held-out metric under missing-not-at-random (MNAR) implicit feedback.

Notation of the Generalized Stratified (GS) paper (generalized_stratified_estimator.txt, Sec. 2-4): for a
user u, S_u are the relevant items (n_u of them), S*_u ⊆ S_u the observed ones (n*_u), P_{u,i} the
probability that (u, i) is observed, λ(Ẑ_{u,i}) ∈ [0, 1] the per-item value of the metric (e.g.
1(rank ≤ K) for Recall@K, or 1(rank ≤ K) / log2(rank + 1) for a DCG-type gain). The target is
R_u = (1 / n_u) Σ_{i ∈ S_u} λ(Ẑ_{u,i}) and R = mean over users of R_u.

Estimators of R_u (all average over users with n*_u ≥ 1):

- ``naive``       Eq. 1: (1 / n*_u) Σ_{S*_u} λ.
- ``stratified``  Eq. 3 with P(v) = n*_{u,v} / n*_u (the original estimator on implicit data) — equal to
  Naive (Prop. 3.1).
- ``ips``         Eq. 2: (1 / n_u) Σ_{S*_u} λ / P_{u,i}; needs the true n_u.
- ``snips``       Eq. 2 with n_u replaced by its self-normalised estimate n̂_u = Σ_{S*_u} 1 / P_{u,i} (Eq. 4).
- ``gs``          Eq. 6: (1 / n_u) Σ_{S*_u} ŵ_{u,i} λ, with ŵ_{u,i} the mean of 1 / P over the observed items of
  i's stratum (Eq. 5); n_u the true value when given, else n̂_u (self-normalised). Singleton strata give
  IPS (Prop. 4.1); one stratum with self-normalised n_u gives Naive.

Propensities from popularity (GS paper Sec. 5.1.3, after Yang et al.): P_{u,i} ∝ pop_i^((γ+1)/2), γ = 2.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from offeval_core.defaults import LEVEL
from offeval_core.errors import InputError
from offeval_core.results import Estimate
from offeval_core.stats import mean_estimate, moments_of
from offeval_core.validation import check_choice, check_level

__all__ = [
    "MNAR_ESTIMATORS", "BoundTerms", "MnarEstimate", "estimator_weights", "mnar_estimate", "popularity_propensities",
    "popularity_strata", "theorem41_terms",
]


MNAR_ESTIMATORS = ("naive", "stratified", "ips", "snips", "gs")


def popularity_propensities(popularity, *, gamma: float = 2.0) -> np.ndarray:
    """P_i = (pop_i / max pop)^((γ+1)/2) — proportional to pop^((γ+1)/2), scaled so the most popular item
    has propensity 1 (the scale cancels in every self-normalised estimator). Items with popularity 0 get 0.

    >>> popularity_propensities([1, 4], gamma=1.0).tolist()  # exponent (1+1)/2 = 1: 1/4 and 1
    [0.25, 1.0]
    """
    pop = np.asarray(popularity, dtype=float)
    if pop.ndim != 1 or pop.size == 0:
        raise InputError(f"popularity must be a non-empty 1-D array of counts, got shape {pop.shape}")
    if not np.all(np.isfinite(pop)) or np.any(pop < 0):
        raise InputError("popularity must hold finite counts ≥ 0")
    if isinstance(gamma, bool) or not isinstance(gamma, int | float) or not math.isfinite(gamma) or gamma <= -1:
        raise InputError(f"gamma must be a number > -1 (the paper uses 2), got {gamma!r}")
    top = pop.max()
    if top <= 0:
        raise InputError("popularity must have at least one positive count")
    return (pop / top) ** ((gamma + 1.0) / 2.0)


def popularity_strata(popularity, *, n_strata: int) -> np.ndarray:
    """Stratum index (0 = least popular) per item: items sorted by popularity (ties by item index) and cut
    into ``n_strata`` groups of (nearly) equal size — the popularity stratification of GS Sec. 3.

    >>> popularity_strata([5, 1, 3, 9], n_strata=2).tolist()  # the two least popular items (1, 3) → 0
    [1, 0, 0, 1]
    """
    pop = np.asarray(popularity, dtype=float)
    if isinstance(n_strata, bool) or not isinstance(n_strata, int | np.integer) or n_strata < 1:
        raise InputError(f"n_strata must be a positive integer, got {n_strata!r}")
    if n_strata > pop.size:
        raise InputError(f"n_strata must be ≤ the number of items ({pop.size}), got {n_strata}")
    order = np.argsort(pop, kind="stable")
    strata = np.empty(pop.size, dtype=np.int64)
    strata[order] = (np.arange(pop.size) * n_strata) // pop.size
    return strata


def _codes(user) -> tuple[np.ndarray, int]:
    u = np.asarray(user)
    if u.ndim != 1:
        raise InputError(f"user must be 1-D (one entry per observed pair), got shape {u.shape}")
    if u.size and (not np.issubdtype(u.dtype, np.integer) or u.min() < 0):
        raise InputError("user must hold non-negative integer user codes (0 … n_users − 1)")
    return u.astype(np.int64), int(u.max()) + 1 if u.size else 0


def _stratum_means(user: np.ndarray, strata: np.ndarray, values: np.ndarray) -> np.ndarray:
    """Mean of ``values`` within each (user, stratum) group, broadcast back to the rows."""
    key = user * (int(strata.max()) + 1) + strata
    _, inv = np.unique(key, return_inverse=True)
    sums = np.bincount(inv, weights=values)
    counts = np.bincount(inv)
    return (sums / counts)[inv]


def _check_rows(user, lam, propensity, strata):
    u, n_users = _codes(user)
    lam = np.asarray(lam, dtype=float)
    p = np.asarray(propensity, dtype=float)
    if lam.shape != u.shape or p.shape != u.shape:
        raise InputError(
            f"user, lam and propensity must have the same length, got {u.size}, {lam.size} and {p.size}"
        )
    if np.any(~np.isfinite(p)) or np.any(p <= 0) or np.any(p > 1):
        raise InputError("propensity must lie in (0, 1] for every observed pair")
    if np.any(~np.isfinite(lam)):
        raise InputError("lam must be finite")
    s = None
    if strata is not None:
        s = np.asarray(strata)
        if s.shape != u.shape or not np.issubdtype(s.dtype, np.integer) or (s.size and s.min() < 0):
            raise InputError("strata must hold one non-negative integer stratum per observed pair")
        s = s.astype(np.int64)
    return u, n_users, lam, p, s


def estimator_weights(user, propensity, *, estimator: str, strata=None, n_relevant=None):
    """Row weights w and per-user denominators d with R̂_u = Σ_{S*_u} w λ / d_u.

    Returns ``(w, d)``; ``d`` has one entry per user code (NaN for users without observed pairs).
    """
    check_choice(estimator, MNAR_ESTIMATORS, name="estimator")
    u, n_users = _codes(user)
    p = np.asarray(propensity, dtype=float)
    n_obs = np.bincount(u, minlength=n_users).astype(float)
    inv_p = 1.0 / p
    n_hat = np.bincount(u, weights=inv_p, minlength=n_users)
    n_true = None
    if n_relevant is not None:
        n_true = np.asarray(n_relevant, dtype=float)
        if n_true.ndim != 1 or n_true.size < n_users:
            raise InputError(f"n_relevant must have one entry per user code (≥ {n_users}), got shape {n_true.shape}")
        n_true = n_true[:n_users]
        short = np.flatnonzero(n_true < n_obs)
        if short.size:
            raise InputError(
                f"n_relevant must be ≥ the number of observed relevant items; too small for users {short[:5].tolist()}"
            )
    if estimator in ("naive", "stratified"):
        w, d = np.ones_like(p), n_obs
    elif estimator == "ips":
        if n_true is None:
            raise InputError("estimator 'ips' needs n_relevant (the true n_u); use 'snips' to self-normalise")
        w, d = inv_p, n_true
    elif estimator == "snips":
        w, d = inv_p, n_hat
    else:
        if strata is None:
            raise InputError("estimator 'gs' needs strata (one stratum index per observed pair)")
        w = _stratum_means(u, np.asarray(strata, dtype=np.int64), inv_p)
        d = n_true if n_true is not None else n_hat
    d = np.where(n_obs > 0, d, np.nan)
    return w, d


@dataclass(frozen=True, eq=False)
class MnarEstimate:
    """An estimator's per-user values (``per_user[u]``, NaN for users without observed pairs) and their mean."""

    estimator: str
    per_user: np.ndarray
    estimate: Estimate


def mnar_estimate(
    user, lam, propensity, *, estimator: str, strata=None, n_relevant=None, level: float = LEVEL
) -> MnarEstimate:
    """Estimate R = mean_u R_u from observed pairs (one row per (u, i) ∈ S*_u).

    Parameters
    ----------
    user : int array
        User code of each observed relevant pair.
    lam : float array
        λ(Ẑ_{u,i}) ∈ [0, 1] of each pair under the evaluated model.
    propensity : float array
        P_{u,i} ∈ (0, 1] of each pair (true, popularity-based or user-provided).
    estimator : {"naive", "stratified", "ips", "snips", "gs"}
        See the module docstring.
    strata : int array, optional
        Stratum of each pair's item (``gs`` and ``stratified``).
    n_relevant : float array, optional
        True n_u per user code (``ips``; ``gs`` uses it when given, else self-normalises).

    Examples
    --------
    One user, two observed items with λ = (1, 0) and P = (0.5, 0.25): Naive = 1/2; SNIPS = (1/0.5) /
    (1/0.5 + 1/0.25) = 2 / 6 = 1/3; IPS with n_u = 4 gives (1/0.5) / 4 = 0.5.

    >>> args = ([0, 0], [1.0, 0.0], [0.5, 0.25])
    >>> [round(mnar_estimate(*args, estimator=e, n_relevant=[4]).estimate.value, 4) for e in ("naive", "snips", "ips")]
    [0.5, 0.3333, 0.5]
    """
    check_level(level)
    check_choice(estimator, MNAR_ESTIMATORS, name="estimator")
    u, n_users, lam_v, p, s = _check_rows(user, lam, propensity, strata)
    if u.size == 0:
        raise InputError("no observed pairs: user, lam and propensity are empty")
    if estimator == "stratified":
        if s is None:
            raise InputError("estimator 'stratified' needs strata (one stratum index per observed pair)")
        # Eq. 3 literally: Σ_v P(v) · mean_{S*_{u,v}} λ with P(v) = n*_{u,v} / n*_u.
        n_obs = np.bincount(u, minlength=n_users).astype(float)
        key = u * (int(s.max()) + 1) + s
        keys, inv = np.unique(key, return_inverse=True)
        n_uv = np.bincount(inv).astype(float)
        mean_uv = np.bincount(inv, weights=lam_v) / n_uv
        group_user = keys // (int(s.max()) + 1)
        p_v = n_uv / n_obs[group_user]
        per_user = np.bincount(group_user, weights=p_v * mean_uv, minlength=n_users)
        per_user = np.where(n_obs > 0, per_user, np.nan)
    else:
        w, d = estimator_weights(u, p, estimator=estimator, strata=s, n_relevant=n_relevant)
        per_user = np.bincount(u, weights=w * lam_v, minlength=n_users) / d
    x = per_user[np.isfinite(per_user)]
    est = mean_estimate(*moments_of(x), level=level)
    return MnarEstimate(estimator, per_user, est)


@dataclass(frozen=True, slots=True)
class BoundTerms:
    """Theorem 4.1 terms averaged over users with n_u ≥ 2 (``n_users``), at confidence 1 − 2δ."""

    estimator: str
    bias: float
    concentration: float
    n_users: int
    delta: float

    def to_dict(self) -> dict:
        return {"estimator": self.estimator, "bias": self.bias, "concentration": self.concentration,
                "n_users": self.n_users, "delta": self.delta}


def theorem41_terms(
    rel_user,
    rel_true_propensity,
    rel_est_propensity,
    rel_observed,
    *,
    estimator: str,
    rel_strata=None,
    delta: float = 0.05,
) -> tuple[BoundTerms, np.ndarray, np.ndarray]:
    """Bias and concentration terms of GS Theorem 4.1 for an estimator written as Eq. 7.

    Rows are **all** relevant pairs (u, i ∈ S_u), known in a simulation: ``rel_observed`` marks S*_u,
    ``rel_true_propensity`` is the true p_{u,i}, ``rel_est_propensity`` the propensity the estimator uses.
    Each estimator is written as R̂_u = (1/n_u) Σ_{S*_u} w_{u,i} λ with the true n_u (Eq. 7):
    IPS w = 1/P̂; SNIPS w = n_u (1/P̂) / n̂_u; Naive w = n_u / n*_u; GS w = ŵ (Eq. 5, true n_u) — for
    unobserved items of a stratum with no observed item ŵ = 0. Then per user

    bias = (1/n_u) Σ_{S_u} |w p − 1|,
    conc = sqrt(2 log(2/δ) Σ_{S*_u} w² / (n_u (n_u − 1))) + w_max · 7 log(2/δ) / (3 (n_u − 1)),

    with w_max the largest weight on S*_u. Returns the user-averaged :class:`BoundTerms` and the per-user
    bias and concentration arrays (NaN where n_u < 2 or n*_u = 0).

    >>> t, _, _ = theorem41_terms([0, 0], [0.5, 0.5], [0.5, 0.5], [True, False], estimator="ips")
    >>> t.bias  # IPS with the true propensities: w p = 1 for every item
    0.0
    """
    check_choice(estimator, ("naive", "ips", "snips", "gs"), name="estimator")
    if not 0 < delta < 0.5:
        raise InputError(f"delta must lie in (0, 1/2) (Theorem 4.1), got {delta!r}")
    u, n_users = _codes(rel_user)
    p_true = np.asarray(rel_true_propensity, dtype=float)
    p_est = np.asarray(rel_est_propensity, dtype=float)
    obs = np.asarray(rel_observed, dtype=bool)
    if not (p_true.shape == p_est.shape == obs.shape == u.shape):
        raise InputError("rel_user, rel_true_propensity, rel_est_propensity and rel_observed must have equal length")
    if np.any(p_est <= 0) or np.any(p_true <= 0):
        raise InputError("propensities must be > 0 for every relevant pair")
    n_u = np.bincount(u, minlength=n_users).astype(float)
    n_obs = np.bincount(u, weights=obs.astype(float), minlength=n_users)
    inv = 1.0 / p_est
    if estimator == "ips":
        w = inv
    elif estimator == "snips":
        n_hat = np.bincount(u, weights=inv * obs, minlength=n_users)
        with np.errstate(divide="ignore", invalid="ignore"):
            w = n_u[u] * inv / n_hat[u]
    elif estimator == "naive":
        with np.errstate(divide="ignore"):
            w = n_u[u] / n_obs[u]
    else:
        if rel_strata is None:
            raise InputError("estimator 'gs' needs rel_strata")
        s = np.asarray(rel_strata, dtype=np.int64)
        key = u * (int(s.max()) + 1) + s
        _, g = np.unique(key, return_inverse=True)
        sums = np.bincount(g, weights=inv * obs)
        cnt = np.bincount(g, weights=obs.astype(float))
        with np.errstate(divide="ignore", invalid="ignore"):
            w = np.where(cnt[g] > 0, sums[g] / cnt[g], 0.0)
    valid_user = (n_u >= 2) & (n_obs >= 1)
    row_ok = valid_user[u]
    w = np.where(row_ok, w, 0.0)
    bias_u = np.bincount(u, weights=np.abs(w * p_true - 1.0) * row_ok, minlength=n_users)
    sq = np.bincount(u, weights=(w * w) * obs, minlength=n_users)
    wmax = np.zeros(n_users)
    np.maximum.at(wmax, u[obs], w[obs])
    log_term = math.log(2.0 / delta)
    with np.errstate(divide="ignore", invalid="ignore"):
        bias_u = np.where(valid_user, bias_u / n_u, np.nan)
        conc_u = np.sqrt(2 * log_term * sq / (n_u * (n_u - 1))) + wmax * 7 * log_term / (3 * (n_u - 1))
        conc_u = np.where(valid_user, conc_u, np.nan)
    n_valid = int(valid_user.sum())
    bias = float(np.nanmean(bias_u)) if n_valid else math.nan
    conc = float(np.nanmean(conc_u)) if n_valid else math.nan
    return BoundTerms(estimator, bias, conc, n_valid, float(delta)), bias_u, conc_u
