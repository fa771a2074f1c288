"""Slate estimators of the expected reward per session, Σ_k λ_k E_π[r_k], and their paired effect over the
logging policy: a per-session kernel and a thin aggregator (numpy).

Plain estimators (IIPS, RIPS, SIPS) average the per-session value v_i = Σ_k λ_k w_ik r_ik. Self-normalised
versions (SNIIPS, SNRIPS, SNSIPS) divide each slot's weighted sum by that slot's summed weight,

    V̂_SN = Σ_k λ_k · (n_k / n) · Σ_{i ∈ S_k} w_ik r_ik / Σ_{i ∈ S_k} w_ik,

where S_k are the n_k sessions that log slot k (all n sessions for fixed-length slates, when n_k / n = 1
and the formula is the issue's Σ_k Σ_i w_ik r_ik / Σ_i w_ik). Standard errors come from each estimator's
influence function (for ratios the delta method, as :func:`offeval_core.stats.ratio_estimate`), so the
plain and self-normalised estimators, and their paired differences with the logging value Σ_k λ_k r_ik on the
same sessions, share one CI routine.

Why numpy and not the Ibis reduce: the weights are cumulative products over the slots of a session and
the self-normalised estimators need per-slot sums; both are a single pass over session-sorted arrays here,
while SQL would need ordered window products (exp-sum-log with zero handling) per estimator. Slate logs
hold one row per shown slot with propensities, which fit in memory at the sizes where propensities are
logged; the moments-based engine remains the path for the DCG / importance families.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from offeval_core import stats
from offeval_core.defaults import LEVEL
from offeval_core.discounts import parse_discount
from offeval_core.errors import InputError, SpecError
from offeval_core.results import ConfidenceInterval, Effect, Estimate, json_number
from offeval_core.slate.adaptive import adaptive_values
from offeval_core.slate.dr import cascade_dr_values
from offeval_core.slate.kernels import dense_by_slot, normalised_kernel, plain_kernel
from offeval_core.slate.names import ASSUMPTION, LABELS, NORMALISED, PLAIN, SLATE_ESTIMATORS
from offeval_core.slate.schema import SlateData
from offeval_core.slate.weights import slate_weights
from offeval_core.validation import check_level

__all__ = [
    "ASSUMPTION",
    "LABELS",
    "NORMALISED",
    "PLAIN",
    "SLATE_ESTIMATORS",
    "SlateEstimate",
    "WeightDiagnostics",
    "diagnostics",
    "effect_from_influence",
    "estimate",
    "estimate_from_influence",
    "nan_estimate",
    "normalised_kernel",
    "plain_kernel",
    "slot_discount",
    "weights_for",
]


@dataclass(frozen=True)
class WeightDiagnostics:
    """Weight concentration of a slate estimator, worst slot first.

    ``ess`` is the smallest per-slot Kish effective sample size (Σ w)² / Σ w²; ``max_share`` the largest
    share of a slot's summed weight carried by a single session; ``mean_weight`` the mean weight at slot 1
    (1 in expectation for every estimator).
    """

    ess: float
    ess_share: float
    max_weight: float
    max_share: float
    mean_weight: float

    def to_dict(self) -> dict:
        return {k: json_number(getattr(self, k)) for k in ("ess", "ess_share", "max_weight", "max_share", "mean_weight")}


@dataclass(frozen=True)
class SlateEstimate:
    """Logging value, target value and their paired difference (target − logging) on the same sessions."""

    estimator: str
    logging: Estimate
    target: Estimate
    effect: Effect
    diagnostics: WeightDiagnostics | None = None
    note: str = ""

    def to_dict(self) -> dict:
        out = {"estimator": self.estimator, "label": LABELS.get(self.estimator, self.estimator),
               "logging": self.logging.to_dict(), "target": self.target.to_dict(), "effect": self.effect.to_dict()}
        if self.diagnostics is not None:
            out["diagnostics"] = self.diagnostics.to_dict()
        if self.note:
            out["note"] = self.note
        return out


def slot_discount(spec: str | np.ndarray | None, n_slots: int) -> np.ndarray:
    """Weights λ_1..λ_K of the slots: None / "none" = 1 each (reward per session), a discount spec
    (``log2``, ``exponential:0.8@3``, …; not the learnt ``pbm``) or an explicit array.

    >>> slot_discount("reciprocal", 3).tolist()
    [1.0, 0.5, 0.3333333333333333]
    """
    if spec is None or (isinstance(spec, str) and spec.strip().lower() in ("", "none", "sum")):
        return np.ones(n_slots)
    if isinstance(spec, str):
        return parse_discount(spec)(np.arange(1, n_slots + 1))
    lam = np.asarray(spec, dtype=np.float64)
    if lam.ndim != 1 or len(lam) < n_slots or not np.isfinite(lam).all():
        raise InputError(f"slot weights must be a finite 1-d array of length ≥ {n_slots}")
    return lam[:n_slots]


def estimate_from_influence(value: float, influence: np.ndarray, *, level: float) -> Estimate:
    """Normal-interval estimate from a value and its per-session influence values (SE = s(ψ) / √n)."""
    n = len(influence)
    se = float(np.std(influence, ddof=1) / math.sqrt(n)) if n >= 2 else math.nan
    return Estimate(float(value), se, n, stats.normal_ci(float(value), se, level=level))


def effect_from_influence(value: float, influence: np.ndarray, *, level: float) -> Effect:
    est = estimate_from_influence(value, influence, level=level)
    return Effect(est.value, est.stderr, est.n, est.ci, stats.one_sided_p(est.value, est.stderr))


def diagnostics(data: SlateData, w: np.ndarray) -> WeightDiagnostics:
    """Per-slot ESS and largest-weight share; the worst slot is reported."""
    ww = dense_by_slot(data, w)
    present = dense_by_slot(data, np.ones(data.n_rows)) > 0
    s1, ess = ww.sum(0), stats.kish_ess(ww, axis=0)
    with np.errstate(divide="ignore", invalid="ignore"):
        share = np.where(s1 > 0, ww.max(0) / s1, 0.0)
    n_k = present.sum(0)
    worst = int(np.argmin(np.where(n_k > 0, ess / np.maximum(n_k, 1), np.inf)))
    return WeightDiagnostics(float(ess[worst]), float(ess[worst] / max(n_k[worst], 1)), float(w.max()),
                             float(share.max()), float(ww[present[:, 0], 0].mean()) if present[:, 0].any() else math.nan)


def _capped(w: np.ndarray, clip: float) -> np.ndarray:
    if not clip >= 1:
        raise SpecError(f"clip must be ≥ 1 (or inf), got {clip!r}")
    return w if math.isinf(clip) else np.minimum(w, clip)


def weights_for(data: SlateData, estimator: str, *, clip: float = math.inf) -> np.ndarray:
    """The per-row weights an IPS-type estimator uses (capped at ``clip``)."""
    base = estimator[2:] if estimator in NORMALISED else estimator
    if base not in PLAIN:
        raise SpecError(f"{estimator!r} has no single weight per row; expected one of {', '.join(PLAIN + NORMALISED)}")
    return _capped(slate_weights(data, base), clip)


def estimate(data: SlateData, *, estimator: str = "iips", level: float = LEVEL, slot_weights=None,
             clip: float = math.inf, rng=None, **options) -> SlateEstimate:
    """Estimate the target policy's expected reward per session with a slate estimator.

    Parameters
    ----------
    data : slate arrays (:func:`offeval_core.slate.schema.from_logs` / ``from_arrays``).
    estimator : one of ``iips, rips, sips, sniips, snrips, snsips, cascade-dr, aips``.
    level : confidence level of the normal intervals.
    slot_weights : λ_k (see :func:`slot_discount`); default 1 for every slot.
    clip : cap c ≥ 1 of the weights, min(w, c) (default ∞, unbiased).
    rng : None | int | Generator, for the cross-fitting folds of cascade-dr and aips.
    options : passed to cascade-dr (``model``, ``prior``, ``folds``) or aips.

    Examples
    --------
    Two sessions of two slots; the target doubles the chance of the rewarded item at slot 1:

    >>> from offeval_core.slate.schema import from_arrays
    >>> d = from_arrays([0, 0, 1, 1], [1, 2, 1, 2], [1.0, 0.0, 0.0, 1.0],
    ...                 logging_marginal=[0.4, 0.5, 0.5, 0.5], target_marginal=[0.8, 0.5, 0.25, 0.5])
    >>> round(estimate(d, estimator="iips").target.value, 4)  # (2·1 + 0) / 2 + (0 + 1·1) / 2 = 1.5
    1.5
    """
    check_level(level)
    if estimator not in SLATE_ESTIMATORS:
        raise SpecError(f"unknown slate estimator {estimator!r}; expected one of {', '.join(SLATE_ESTIMATORS)}")
    lam = slot_discount(slot_weights, data.n_slots)
    logged = plain_kernel(data, np.ones(data.n_rows), lam)
    log_value = float(logged.mean())
    log_infl = logged - log_value
    note = ""
    if estimator == "cascade-dr":
        per, w, note = cascade_dr_values(data, lam=lam, clip=clip, rng=rng, **options)
        value, infl = float(per.mean()), per - per.mean()
    elif estimator == "aips":
        per, w, note = adaptive_values(data, lam=lam, clip=clip, rng=rng, **options)
        value, infl = float(per.mean()), per - per.mean()
    elif estimator in PLAIN:
        w = weights_for(data, estimator, clip=clip)
        per = plain_kernel(data, w, lam)
        value, infl = float(per.mean()), per - per.mean()
    else:
        w = weights_for(data, estimator, clip=clip)
        value, infl = normalised_kernel(data, w, lam)
    return SlateEstimate(
        estimator,
        estimate_from_influence(log_value, log_infl, level=level),
        estimate_from_influence(value, infl, level=level),
        effect_from_influence(value - log_value, infl - log_infl, level=level),
        diagnostics(data, w),
        note,
    )


def nan_estimate(level: float) -> Estimate:
    return Estimate(math.nan, math.nan, 0, ConfidenceInterval(math.nan, math.nan, level))
