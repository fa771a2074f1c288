"""Adaptive IPS (after Kiyohara et al. KDD'23): a data-driven choice, per context, of the interaction set the
weight accounts for — the slot alone (IIPS), the slots above (RIPS) or the whole slate (SIPS).

A depth-one tree on session-level features (default ``segment``) splits the sessions into leaves when that
lowers the summed estimated MSE; in each leaf the candidate with the smallest estimated MSE is kept,

    MSE^_c = Σ_{steps c → SIPS} max(0, (V̂_c − V̂_c')² − Var^(V̂_c − V̂_c')) + Var^(V̂_c),

where the steps go from c to the next less-assuming candidate (IIPS → RIPS → SIPS) and SIPS (no assumption
on the reward) is the unbiased end of the chain. The choice is made on one half of the
sessions and applied to the other (and vice versa), so a session's value never selects its own estimator.
This is a transparent simplification of the paper's method, which searches the interaction sets over
slot-level action subsets with a deeper tree.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from offeval_core.slate.kernels import plain_kernel
from offeval_core.slate.names import LABELS
from offeval_core.slate.schema import SlateData
from offeval_core.slate.weights import slate_weights

__all__ = [
    "CANDIDATES", "AdaptiveChoice", "adaptive_values", "candidate_values", "choose",
]


CANDIDATES = ("iips", "rips", "sips")


@dataclass(frozen=True)
class AdaptiveChoice:
    """The interaction set chosen in each leaf: ``table`` has leaf, sessions, chosen, and the estimated MSE of
    every candidate (on all sessions, for display); ``feature`` is the split feature (None = no split)."""

    feature: str | None
    table: pd.DataFrame

    def describe(self) -> str:
        parts = [f"{r.leaf} → {LABELS[r.chosen]}" for r in self.table.itertuples()]
        head = f"split on {self.feature}" if self.feature else "no split"
        return f"adaptive IPS ({head}): " + "; ".join(parts)


def _mse(values: np.ndarray) -> np.ndarray:
    """Estimated MSE of each candidate column (n × 3: IIPS, RIPS, SIPS).

    The bias of a candidate is estimated against the next less-assuming one (IIPS against RIPS, RIPS against
    SIPS) and accumulated along the chain, each squared step corrected for its noise: differences between
    neighbours are far less noisy than differences with SIPS."""
    n = len(values)
    if n < 2:
        return np.array([math.inf, math.inf, 0.0])
    var = values.var(0, ddof=1) / n
    d = values[:, :-1] - values[:, 1:]
    step = np.maximum(d.mean(0) ** 2 - d.var(0, ddof=1) / n, 0.0)
    bias2 = np.r_[step[0] + step[1], step[1], 0.0]
    return bias2 + var


def _leaves(data: SlateData, features) -> dict[str | None, np.ndarray]:
    ctx = data.contexts
    out: dict[str | None, np.ndarray] = {None: np.zeros(data.n_sessions, dtype=np.int64)}
    for f in features:
        if ctx is not None and f in ctx.columns and ctx[f].nunique() > 1:
            out[f] = pd.factorize(ctx[f], sort=True)[0]
    return out


def _fit(values: np.ndarray, leaves: dict) -> tuple[str | None, np.ndarray]:
    """The split (or none) with the smallest summed leaf MSE, and the chosen candidate per leaf code."""
    best = None
    for feature, codes in leaves.items():
        n_leaf = int(codes.max()) + 1
        total, chosen = 0.0, np.empty(n_leaf, dtype=np.int64)
        for leaf in range(n_leaf):
            m = codes == leaf
            share = m.mean()
            mse = _mse(values[m])
            chosen[leaf] = int(np.argmin(mse))
            total += share * share * mse[chosen[leaf]]
        if best is None or total < best[0]:
            best = (total, feature, chosen)
    return best[1], best[2]


def candidate_values(data: SlateData, *, lam: np.ndarray, clip: float = math.inf) -> tuple[np.ndarray, list]:
    vals, weights = [], []
    for c in CANDIDATES:
        w = slate_weights(data, c)
        w = w if math.isinf(clip) else np.minimum(w, clip)
        weights.append(w)
        vals.append(plain_kernel(data, w, lam))
    return np.column_stack(vals), weights


def adaptive_values(data: SlateData, *, lam: np.ndarray, clip: float = math.inf, rng=None,
                    features=("segment",)) -> tuple[np.ndarray, np.ndarray, str]:
    """Per-session adaptive-IPS values (cross-fitted choice), the row weights used and the choice's text."""
    values, weights = candidate_values(data, lam=lam, clip=clip)
    leaves = _leaves(data, features)
    half = np.random.default_rng(rng).integers(0, 2, size=data.n_sessions)
    pick = np.empty(data.n_sessions, dtype=np.int64)
    for h in (0, 1):
        train = half != h
        feature, chosen = _fit(values[train], {f: c[train] for f, c in leaves.items()})
        pick[~train] = chosen[leaves[feature][~train]]
    per = values[np.arange(data.n_sessions), pick]
    row_w = np.choose(pick[data.session], weights)
    return per, row_w, choose(data, lam=lam, clip=clip, features=features).describe()


def choose(data: SlateData, *, lam: np.ndarray | None = None, clip: float = math.inf,
           features=("segment",)) -> AdaptiveChoice:
    """The interaction set chosen on all sessions, with every candidate's estimated MSE per leaf."""
    lam = np.ones(data.n_slots) if lam is None else lam
    values, _ = candidate_values(data, lam=lam, clip=clip)
    leaves = _leaves(data, features)
    feature, chosen = _fit(values, leaves)
    codes = leaves[feature]
    names = (["all sessions"] if feature is None
             else [str(v) for v in pd.factorize(data.contexts[feature], sort=True)[1]])
    rows = []
    for leaf, name in enumerate(names):
        m = codes == leaf
        mse = _mse(values[m])
        rows.append({"leaf": name, "sessions": int(m.sum()), "chosen": CANDIDATES[chosen[leaf]],
                     **{f"mse_{c}": float(v) for c, v in zip(CANDIDATES, mse, strict=True)}})
    return AdaptiveChoice(feature, pd.DataFrame(rows))
