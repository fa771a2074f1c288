"""What a reduce computes and what it returns: the variant :class:`Grid` and the per-group :class:`Moments`."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import ibis.expr.types as ir
import numpy as np
import pandas as pd

from offeval_core.errors import InputError
from offeval_core.validation import check_choice, check_clips

__all__ = ["DEFAULT_CLIPS", "GROUP_KEYS", "METRICS", "NDCG_RULES", "Grid", "Moments", "ndcg_of"]

DEFAULT_CLIPS: tuple[float, ...] = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, math.inf)
"""The clip grid of KDD'24 Sec. 6.2 (plus 1024), m = 1 (raw labels) … ∞ (unbiased)."""

GROUP_KEYS = ("experiment_id", "day", "arm", "segment")
METRICS = ("dcg", "ndcg")
NDCG_RULES = ("zero", "drop")


def ndcg_of(dcg, idcg, *, empty: float = 0.0):
    """nDCG = DCG / iDCG, and ``empty`` where iDCG = 0 (no positive label): the one no-positive-label rule. A log
    session without a reward counts nDCG = 0 (the ``zero`` rule; KDD'24 Sec. 5 — the ``drop`` rule then leaves
    those sessions out of the moments); a held-out user without a relevant item is left out (``empty=nan``).
    Backend columns (Ibis) give an expression, arrays an array.

    >>> ndcg_of(np.array([0.5, 0.0, 0.0]), np.array([2.0, 0.0, 1.0])).tolist()   # 0.5 / 2; no label: 0; 0 / 1
    [0.25, 0.0, 0.0]
    """
    if isinstance(dcg, ir.Value) or isinstance(idcg, ir.Value):
        import ibis

        return ibis.ifelse(idcg > 0, dcg / idcg, empty)
    d, i = np.asarray(dcg, dtype=np.float64), np.asarray(idcg, dtype=np.float64)
    d, i = np.broadcast_arrays(d, i)
    return np.divide(d, i, out=np.full(d.shape, float(empty)), where=i > 0)


INF_CLIP = 1e300  # stands for m = ∞ inside queries: larger than any weight 1 / D0, so min(m, w) = w exactly


@dataclass(frozen=True)
class Grid:
    """The variants a reduce computes: rewards × policies × (D, D0) × clip values."""

    rewards: tuple[str, ...]
    policies: tuple[str, ...]
    discounts: tuple[str, ...] = ("pbm",)
    exposures: tuple[str, ...] = ("pbm",)
    clips: tuple[float, ...] = DEFAULT_CLIPS
    ndcg_rule: str = "zero"

    def __post_init__(self):
        object.__setattr__(self, "clips", check_clips(self.clips))
        check_choice(self.ndcg_rule, NDCG_RULES, name="ndcg_rule")
        if not self.rewards:
            raise InputError("rewards must name at least one reward column, got none")
        if not self.discounts or not self.exposures:
            raise InputError("discounts and exposures must each list at least one discount model")


@dataclass(frozen=True, eq=False)
class Moments:
    """Per-group sufficient statistics of every variant: everything the analyses need.

    ``offline`` (long): one row per (group keys, reward, discount, exposure, clip, policy, metric) with
    ``n`` sessions, ``sum`` = Σx and ``m2`` = Σ(x − x̄)² of the per-session value x, the per-session
    denominator y of ratio estimators (for DCG rows y = iDCG, so pnDCG = Σx / Σy): ``den_sum``, ``den_m2`` and
    the co-moment ``co_den`` = Σ(x − x̄)(y − ȳ), and for target policies the paired difference
    d = target − logging on the same sessions: ``sum_diff``, ``m2_diff``, ``co_diff_den``. The logging policy
    is named ``"logging"``. ``online``: per (group keys, reward) the per-session observed reward: ``n``,
    ``sum``, ``m2``. Every column's role: :mod:`offeval_core.moment_columns`.
    """

    offline: pd.DataFrame
    online: pd.DataFrame
    grid: Grid
    discount_labels: dict[str, str] = field(default_factory=dict)
    source: str = ""

    @property
    def keys(self) -> tuple[str, ...]:
        return tuple(k for k in GROUP_KEYS if k in self.online.columns)
