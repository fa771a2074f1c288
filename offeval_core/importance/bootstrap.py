"""Session bootstrap of the importance estimators: per-session sums, every estimator from (weighted)
per-session sums, and percentile CIs with the normalisation recomputed in every resample."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from offeval_core.arms import OFFLINE_ARM, offline_rows
from offeval_core.defaults import LEVEL
from offeval_core.errors import InputError
from offeval_core.importance.keys import check_estimator
from offeval_core.importance.normalisation import (
    CELL_KEYS,
    POOLED_CONTEXT,
    group_ratio,
    pooled_sessions,
    warn_pooled_contexts,
)
from offeval_core.importance.reduce import session_table
from offeval_core.importance.weights import capping_variants, importance_source, resolve_weights
from offeval_core.logs import Logs
from offeval_core.results import ConfidenceInterval, Effect, Estimate
from offeval_core.stats import resample_counts
from offeval_core.validation import check_clip, check_level, check_rng

__all__ = ["BootstrapResult", "bootstrap", "percentile_summary", "session_sums", "session_values",
           "values_from_sessions"]


def session_sums(logs: Logs, *, reward: str, policy: str, clip: float = math.inf, capping: str = "max",
                   weights: str = "auto", discount: str = "pbm", exposure: str = "pbm", strata="segment",
                   context="session", pbm_floor: float | None = None) -> pd.DataFrame:
    """Per-session raw sums (one row per session): m, s = Σ w̄, a = Σ w̄ r, c = Σ r, p = exact PointNCIS
    numerator, exact flag, group keys, stratum, context. The input of :func:`bootstrap` and of checks."""
    logs.check_reward(reward)
    clip = check_clip(clip)
    setup = resolve_weights(logs, (policy,), weights=weights, discount=discount, exposure=exposure)
    variants = capping_variants([clip], [capping])
    variants = variants[variants["clip_value"] == clip].assign(v=0)
    source = importance_source(logs, setup, strata=strata, context=context)
    per = session_table(source, setup, policy, rewards=(reward,), variants=variants, logs=logs, pbm_floor=pbm_floor)
    out = source.backend.execute(per).rename(columns={f"a__{reward}": "a", f"c__{reward}": "c", f"p__{reward}": "p"})
    out["propensity"] = setup.mode == "propensity"
    return out.sort_values("session", kind="stable").reset_index(drop=True)


session_values = session_sums
"""Alias of :func:`session_sums` (the name :func:`offeval_core.estimators.session_values` has per-session
DCG values; this one has the raw importance sums)."""


def values_from_sessions(per: pd.DataFrame, *, base: str, scale: str, counts: np.ndarray | None = None
                         ) -> tuple[float, float]:
    """(target, logging) value of an estimator from per-session sums, each session counted ``counts``
    times (bootstrap multiplicities; default once). Normalisation (global, per cell, per stratum, per context)
    is done on the weighted sample, so a bootstrap that calls this per resample re-normalises inside it.

    The groups and each group's ratio R_g are those of the reduce (:mod:`~offeval_core.importance.normalisation`);
    the value is Σ_g U_g R_g / U. NCIS with propensity weights (or per impression) is one global ratio A / Y
    with y = u · s / m, as the reduce's ratio moments give it. PointNCIS contexts with one logged row (in the
    original sample) share one normaliser per cell. Without a session, or with every count 0: (NaN, NaN)."""
    return _session_estimator(per, base=base, scale=scale)(counts)


def _session_estimator(per: pd.DataFrame, *, base: str, scale: str):
    """:func:`values_from_sessions` as a function of the multiplicities alone: the groups are found once, so a
    bootstrap's resamples only re-weight the sums."""
    m, s, a, c, w = (per[col].to_numpy(dtype=float) for col in ("m", "s", "a", "c", "w_sum"))
    u = np.ones_like(m) if scale == "session" else m
    y = s / m * u
    exposure_session = scale == "session" and len(per) > 0 and not bool(per["propensity"].iloc[0])
    exact = per["exact"].to_numpy() == 1 if base == "point-ncis" else np.zeros(len(per), dtype=bool)
    cell = list(CELL_KEYS)
    if base in ("snips", "ncis") and exposure_session:
        keys = cell
    elif base == "piece-ncis":
        keys = [*cell, "stratum"]
    elif base == "point-ncis":
        per = per.assign(context_=per["context"].where(~pooled_sessions(per), POOLED_CONTEXT))
        keys = [*cell, "context_"]
    else:
        keys = None
    plug = ~exact
    codes = (per.loc[plug, keys].groupby(keys, sort=False, dropna=False, observed=True).ngroup().to_numpy()
             if keys else None)
    p_exact = per["p"].to_numpy(dtype=float)[exact]

    def values(counts: np.ndarray | None = None) -> tuple[float, float]:
        k = np.ones(len(m)) if counts is None else np.asarray(counts, dtype=float)
        big_u = float(k @ u)
        if big_u <= 0:  # no session, or none counted: no value
            return math.nan, math.nan
        logging = float(k @ c) / big_u
        if base in ("is", "cis"):
            return float(k @ a) / big_u, logging
        if codes is None:  # NCIS with propensity weights, or per impression: one ratio
            return float(k @ a) / float(k @ y), logging
        kk = k[plug]

        def total(v):
            return np.bincount(codes, kk * v[plug])

        group_u = total(u)
        with np.errstate(invalid="ignore"):  # S_g = 0 (or Y_g = 0) only where A_g = 0: 0 / 0, never x / 0
            ratio = group_ratio(total(a), total(y), group_u, total(s), total(w), exposure_session=exposure_session,
                                where=np.where)
        return (float(k[exact] @ p_exact) + float(group_u @ ratio)) / big_u, logging

    return values


@dataclass(frozen=True)
class BootstrapResult:
    """Percentile-bootstrap CIs (sessions resampled, estimator re-normalised in every resample); the
    effect's ``p_value`` is the share of resampled effects ≤ 0."""

    logging: Estimate
    target: Estimate
    effect: Effect
    n_boot: int


def percentile_summary(value: float, replicates: np.ndarray, *, n: int, level: float) -> Estimate:
    """Estimate ``value`` with the bootstrap SE (sd of the replicates, ddof = 1) and the percentile CI
    [q_{(1−level)/2}, q_{(1+level)/2}] of the replicates (NaN replicates ignored)."""
    lo, hi = (1 - level) / 2, (1 + level) / 2
    q = np.nanquantile(replicates, [lo, hi])
    return Estimate(value, float(np.nanstd(replicates, ddof=1)), n, ConfidenceInterval(float(q[0]), float(q[1]), level))


def _bootstrap_iv(estimator, capping, scale, n_boot, level, rng):
    """Input validation of :func:`bootstrap` (one place, before any work)."""
    check_level(level)
    rng = check_rng(rng)
    if isinstance(n_boot, bool) or not isinstance(n_boot, int) or n_boot < 2:
        raise InputError(f"n_boot must be an integer ≥ 2, got {n_boot!r}")
    return check_estimator(estimator, capping=capping, scale=scale), rng


def bootstrap(logs: Logs, *, reward: str, policy: str, estimator: str = "ncis", clip: float = math.inf,
              capping: str | None = None, scale: str | None = None, arm: str | None = OFFLINE_ARM,
              n_boot: int = 1000, level: float = LEVEL, rng=None, **kwargs) -> BootstrapResult:
    """Session bootstrap of an importance estimator: every resample recomputes the normalisation
    (Σ w̄ for NCIS, per stratum for PieceNCIS, per context for plug-in PointNCIS) from the resampled
    sessions — never normalise once and resample normalised values. Percentile CIs, SE = sd of replicates,
    p-value = share of replicates of the effect ≤ 0. ``estimator`` is read like
    :func:`~offeval_core.importance.estimate` reads it (``ncis-zero@impression`` is zero-capped, per
    impression); ``rng`` is None, an int seed or a Generator. IS and SNIPS are uncapped: they ignore ``clip``.
    """
    key, rng = _bootstrap_iv(estimator, capping, scale, n_boot, level, rng)
    # IS and SNIPS are uncapped: at any clip they read the weights at c = ∞, as estimate and the reduce do
    per = session_sums(logs, reward=reward, policy=policy, clip=math.inf if key.uncapped else clip,
                       capping=key.capping, **kwargs)
    if key.base == "point-ncis":
        warn_pooled_contexts(per, arm=arm)
    per = offline_rows(per, arm).reset_index(drop=True)
    n = len(per)
    values = _session_estimator(per, base=key.base, scale=key.scale)
    t0, l0 = values()
    reps = np.empty((n_boot, 2))
    chunk = max(1, 2_000_000 // max(n, 1))  # resamples drawn at once: about 2 M session counts in memory
    for start in range(0, n_boot, chunk):
        for b, counts in enumerate(resample_counts(n, min(chunk, n_boot - start), rng), start):
            reps[b] = values(counts)
    diff = reps[:, 0] - reps[:, 1]
    e = percentile_summary(t0 - l0, diff, n=n, level=level)
    p_one = float(np.mean(diff <= 0))
    return BootstrapResult(percentile_summary(l0, reps[:, 1], n=n, level=level),
                           percentile_summary(t0, reps[:, 0], n=n, level=level),
                           Effect(e.value, e.stderr, n, e.ci, p_one), n_boot)
