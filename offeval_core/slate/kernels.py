"""Per-session kernels of the slate estimators (numpy): the plain weighted value v_i = Σ_k λ_k w_ik r_ik and the
self-normalised value with its influence values; :func:`offeval_core.slate.estimators.estimate` and adaptive IPS
aggregate them."""

from __future__ import annotations

import numpy as np

from offeval_core.slate.schema import SlateData

__all__ = ["dense_by_slot", "normalised_kernel", "plain_kernel"]


def dense_by_slot(data: SlateData, values: np.ndarray) -> np.ndarray:
    """Per-row values as an (n_sessions × n_slots) matrix, 0 where a session has no row at that slot."""
    out = np.zeros((data.n_sessions, data.n_slots))
    out[data.session, data.slot - 1] = values
    return out


def plain_kernel(data: SlateData, w: np.ndarray, lam: np.ndarray) -> np.ndarray:
    """Per-session value v_i = Σ_k λ_k w_ik r_ik."""
    return np.bincount(data.session, weights=lam[data.slot - 1] * w * data.reward, minlength=data.n_sessions)


def normalised_kernel(data: SlateData, w: np.ndarray, lam: np.ndarray) -> tuple[float, np.ndarray]:
    """Self-normalised value and its influence values ψ_i (delta method, one ratio per slot)."""
    wr, ww = dense_by_slot(data, w * data.reward), dense_by_slot(data, w)
    present = dense_by_slot(data, np.ones(data.n_rows))
    a, b, c = wr.mean(0), ww.mean(0), present.mean(0)
    safe_b = np.where(b > 0, b, 1.0)
    ratio = np.where(b > 0, a / safe_b, 0.0)
    value = float(np.sum(lam * c * ratio))
    # ψ_i = Σ_k λ_k [c_k (wr_ik − R_k w_ik) / b_k + R_k (p_ik − c_k)]
    infl = ((wr - ratio * ww) * (c / safe_b) + ratio * (present - c)) @ lam
    return value, infl
