"""Cascade doubly robust estimator (Kiyohara et al. WSDM'22) with a cross-fitted, transparent
reward model.

Per session, with the cumulative RIPS weight W_k = Π_{l ≤ k} π(a_l | x, a_<l) / π0(a_l | x, a_<l) (W_0 = 1),
a reward model q̂(a, k) and its expectation under the target at slot k given the logged items above,
q̄_k = Σ_a π(a | x, a_<k) q̂(a, k):

    v_i = Σ_k λ_k [ W_k (r_k − q̂(a_k, k)) + W_{k−1} q̄_k ].

Under the cascade assumption E[W_k r_k] is the target's reward at slot k and E[W_k q̂(a_k, k) | a_<k] =
W_{k−1} q̄_k, so the estimator is unbiased for *any* q̂; a good q̂ removes variance. q̂ is fitted on the other
folds of a session split (cross-fitting), so its errors are independent of the session it corrects.

Reward models:

* ``"slot"``: the mean reward at each slot (q̂ does not depend on the item, so q̄_k = q̂(k) and the target's
  full action distribution is not needed — the model that works on any propensity logs);
* ``"item-slot"``: the item × slot reward rate shrunk to the slot mean with ``prior`` pseudo-sessions,
  (Σ r + m ρ_k) / (N + m); q̄ needs the target's conditional distribution over items at each row
  (``target_distribution``, an n_rows × n_items array, e.g. from the stochastic-slate simulator).
"""

from __future__ import annotations

import math

import numpy as np

from offeval_core.errors import InputError, SpecError
from offeval_core.slate.schema import SlateData, require
from offeval_core.slate.weights import conditional_ratio, previous_weight, segment_cumprod

__all__ = [
    "MODELS", "cascade_dr_values", "cross_fitted_model", "fit_rates",
]


MODELS = ("slot", "item-slot")


def fit_rates(data: SlateData, rows: np.ndarray, *, n_items: int, prior: float) -> np.ndarray:
    """Item × slot reward rates (n_items × n_slots) from the given rows, shrunk to the slot means."""
    k = data.n_slots
    slot = data.slot[rows] - 1
    r = data.reward[rows]
    n_slot = np.bincount(slot, minlength=k)
    slot_rate = np.bincount(slot, weights=r, minlength=k) / np.maximum(n_slot, 1)
    if n_items == 0:
        return slot_rate[None, :]
    flat = data.item[rows] * k + slot
    s = np.bincount(flat, weights=r, minlength=n_items * k).reshape(n_items, k)
    c = np.bincount(flat, minlength=n_items * k).reshape(n_items, k)
    return (s + prior * slot_rate) / (c + prior)


def cross_fitted_model(data: SlateData, *, model: str = "slot", prior: float = 10.0, folds: int = 2,
                       rng=None, target_distribution: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Cross-fitted q̂(a_k, k) and q̄_k per row (see the module docstring)."""
    if model not in MODELS:
        raise SpecError(f"unknown reward model {model!r}; expected one of {', '.join(MODELS)}")
    if not prior >= 0:
        raise InputError(f"prior must be ≥ 0, got {prior!r}")
    if model == "item-slot" and (target_distribution is None or data.item is None):
        raise InputError("the item-slot reward model needs item ids and the target's distribution over items at "
                         "each row (target_distribution); use model='slot' on logs without them")
    rng = np.random.default_rng(rng)
    fold = rng.integers(0, folds, size=data.n_sessions)[data.session] if folds > 1 else np.zeros(data.n_rows, int)
    q = np.empty(data.n_rows)
    qbar = np.empty(data.n_rows)
    n_items = 0 if model == "slot" else target_distribution.shape[1]
    for f in range(max(folds, 1)):
        test = fold == f
        train = np.flatnonzero(~test) if folds > 1 else np.arange(data.n_rows)
        rates = fit_rates(data, train, n_items=n_items, prior=prior)
        idx = np.flatnonzero(test)
        k = data.slot[idx] - 1
        if model == "slot":
            q[idx] = rates[0, k]
            qbar[idx] = q[idx]
        else:
            q[idx] = rates[data.item[idx], k]
            qbar[idx] = np.einsum("ij,ji->i", target_distribution[idx], rates[:, k])
    return q, qbar


def cascade_dr_values(data: SlateData, *, lam: np.ndarray, clip: float = math.inf, rng=None, model: str = "slot",
                      prior: float = 10.0, folds: int = 2, target_distribution: np.ndarray | None = None
                      ) -> tuple[np.ndarray, np.ndarray, str]:
    """Per-session Cascade-DR values, the cumulative weights used, and a note naming the reward model."""
    require(data, conditional=True, contiguous=True, estimator="cascade-dr")
    cum = segment_cumprod(conditional_ratio(data), data.position)
    if not math.isinf(clip):
        cum = np.minimum(cum, clip)
    prev = previous_weight(cum, data)
    q, qbar = cross_fitted_model(data, model=model, prior=prior, folds=folds, rng=rng,
                                 target_distribution=target_distribution)
    term = lam[data.slot - 1] * (cum * (data.reward - q) + prev * qbar)
    per = np.bincount(data.session, weights=term, minlength=data.n_sessions)
    note = (f"reward model: {model} rates" + (f" shrunk with {prior:g} pseudo-sessions" if model == "item-slot" else "")
            + f", cross-fitted over {folds} folds")
    return per, cum, note
