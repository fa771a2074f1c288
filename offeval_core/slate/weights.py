"""Importance weights of the slate estimators, one per logged row (session i, slot k).

* IIPS (Li et al. KDD'18, independence): w_ik = π(a_k at k | x) / π0(a_k at k | x), the ratio of the
  item-position marginals.
* RIPS (McInerney et al. KDD'20, cascade): w_ik = Π_{l ≤ k} π(a_l | x, a_<l) / π0(a_l | x, a_<l), the product
  of the conditional ratios of the slot and every slot above it.
* SIPS (standard slate IPS): w_ik = Π_{l ≤ L} π(a_l | x, a_<l) / π0(a_l | x, a_<l), the whole-slate ratio,
  the same at every slot of the session.

Kiyohara et al. (WSDM'22) compare the three: IIPS has the smallest variance but is unbiased only when
the reward at a slot depends on that slot's item alone; RIPS is unbiased under the cascade assumption (the
reward at slot k depends on the items at slots 1..k); SIPS is unbiased without any assumption on the reward.
"""

from __future__ import annotations

import numpy as np

from offeval_core.errors import SpecError
from offeval_core.slate.schema import SlateData, require

__all__ = [
    "KINDS", "conditional_ratio", "previous_weight", "segment_cumprod", "session_last", "slate_weights",
]


KINDS = ("iips", "rips", "sips")


def segment_cumprod(x: np.ndarray, position: np.ndarray) -> np.ndarray:
    """Cumulative product of ``x`` restarting at every row whose ``position`` is 0 (rows in session order).

    One multiplication per row in slot order, so the result equals ``np.cumprod`` on each session bit for bit.

    >>> segment_cumprod(np.array([2.0, 3.0, 5.0, 7.0]), np.array([0, 1, 0, 1])).tolist()
    [2.0, 6.0, 5.0, 35.0]
    """
    out = np.array(x, dtype=np.float64, copy=True)
    for j in range(1, int(position.max()) + 1 if len(position) else 0):
        idx = np.flatnonzero(position == j)
        out[idx] = out[idx - 1] * x[idx]
    return out


def session_last(x: np.ndarray, data: SlateData) -> np.ndarray:
    """Broadcast each session's last row value of ``x`` to every row of the session."""
    ends = np.r_[data.starts[1:], data.n_rows] - 1
    return x[ends][data.session]


def conditional_ratio(data: SlateData) -> np.ndarray:
    """π(a_k | x, a_<k) / π0(a_k | x, a_<k) per row."""
    return data.target_conditional / data.logging_conditional


def slate_weights(data: SlateData, kind: str) -> np.ndarray:
    """Per-row weights of ``kind`` ∈ {iips, rips, sips} (see the module docstring).

    >>> from offeval_core.slate.schema import from_arrays
    >>> d = from_arrays([0, 0], [1, 2], [1.0, 0.0], logging_marginal=[0.5, 0.5], target_marginal=[0.8, 0.2],
    ...                 logging_conditional=[0.5, 1.0], target_conditional=[0.8, 1.0])
    >>> slate_weights(d, "iips").tolist(), slate_weights(d, "rips").tolist()  # 0.8/0.5 = 1.6; 0.2/0.5 = 0.4
    ([1.6, 0.4], [1.6, 1.6])
    """
    if kind == "iips":
        require(data, marginal=True, estimator=kind)
        return data.target_marginal / data.logging_marginal
    if kind not in KINDS:
        raise SpecError(f"unknown slate weight {kind!r}; expected one of {', '.join(KINDS)}")
    require(data, conditional=True, contiguous=True, estimator=kind)
    cum = segment_cumprod(conditional_ratio(data), data.position)
    return cum if kind == "rips" else session_last(cum, data)


def previous_weight(cum: np.ndarray, data: SlateData) -> np.ndarray:
    """The cumulative weight of the slots strictly above each row (1 at the top slot): w_{1:k-1}."""
    prev = np.ones_like(cum)
    inner = data.position > 0
    prev[inner] = cum[np.flatnonzero(inner) - 1]
    return prev
