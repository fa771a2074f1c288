"""One importance estimate with delta-method CIs, and the Midzuno-Sen normaliser of PointNCIS."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from offeval_core.arms import OFFLINE_ARM
from offeval_core.defaults import LEVEL
from offeval_core.errors import InputError
from offeval_core.estimators import aggregate, estimate_from_row, select
from offeval_core.importance.bootstrap import session_sums
from offeval_core.importance.keys import CAPPINGS, check_estimator
from offeval_core.importance.normalisation import warn_pooled_contexts
from offeval_core.importance.reduce import reduce_importance, weight_diagnostics
from offeval_core.importance.weights import cap
from offeval_core.logs import Logs
from offeval_core.results import Effect, Estimate, json_number
from offeval_core.validation import check_choice, check_clip, check_level, check_rng

__all__ = ["ImportanceResult", "estimate", "midzuno_sen_inverse"]

MIDZUNO_SEN_TRIES = 1_000_000   # first draws tried before Midzuno-Sen gives up (the capped share is then ~0)


@dataclass(frozen=True)
class ImportanceResult:
    """One estimator on one data set: logging and target values, paired uplift, and weight diagnostics."""

    estimator: str
    scale: str
    logging: Estimate
    target: Estimate
    effect: Effect
    diagnostics: dict

    def to_dict(self) -> dict:
        return {"estimator": self.estimator, "scale": self.scale, "logging": self.logging.to_dict(),
                "target": self.target.to_dict(), "effect": self.effect.to_dict(),
                "diagnostics": {k: json_number(v) for k, v in self.diagnostics.items()}}



def estimate(logs: Logs, *, reward: str, policy: str, estimator: str = "ncis", clip: float = math.inf,
             capping: str | None = None, scale: str | None = None, weights: str = "auto", discount: str = "pbm",
             exposure: str = "pbm", strata="segment", context="session", arm: str | None = OFFLINE_ARM,
             level: float = LEVEL) -> ImportanceResult:
    """One Gilotte estimator of ``policy`` on the ``arm`` sessions, with delta-method CIs.

    >>> from offeval_core.logs import read_logs
    >>> import pandas as pd
    >>> logs = read_logs(pd.DataFrame({"session_id": [1, 2], "rank": [1, 1], "click": [1, 0],
    ...     "logging_propensity": [0.5, 0.5], "target_propensity__new": [0.9, 0.1]}))
    >>> # NCIS with c = 1.5: Σ w̄ r / Σ w̄ = 1.5 / (1.5 + 0.2)
    >>> round(estimate(logs, reward="click", policy="new", estimator="ncis", clip=1.5).target.value, 4)
    0.8824
    """
    check_level(level)
    clip = check_clip(clip)
    base, capping, scale, key = check_estimator(estimator, capping=capping, scale=scale)
    if base == "point-ncis":  # the contexts of the sessions' own sums, as the reduce pools them
        warn_pooled_contexts(session_sums(logs, reward=reward, policy=policy, clip=clip, capping=capping,
                                          weights=weights, discount=discount, exposure=exposure, strata=strata,
                                          context=context), arm=arm)
    m = reduce_importance(logs, rewards=(reward,), policies=(policy,), clips=(clip,), cappings=(capping,),
                          scales=(scale,), weights=weights, discount=discount, exposure=exposure, strata=strata,
                          context=context)
    d, e = m.grid.discounts[0], m.grid.exposures[0]
    lrows = aggregate(select(m, reward=reward, policy=None, metric=key, discount=d, exposure=e, clip=clip, arm=arm))
    trows_full = select(m, reward=reward, policy=policy, metric=key, discount=d, exposure=e, clip=clip, arm=arm)
    trows = aggregate(trows_full)
    lrow, trow = lrows.iloc[0], trows.iloc[0]
    diag = weight_diagnostics(trows_full).iloc[0]
    diagnostics = {k: diag[k] for k in ("ess", "ess_uncapped", "max_weight", "capped_share", "mean_weight",
                                         "exact_share")}
    return ImportanceResult(key, scale, estimate_from_row(lrow, metric=key, level=level),
                            estimate_from_row(trow, metric=key, level=level),
                            estimate_from_row(trow, metric=key, level=level, diff=True), diagnostics)


def midzuno_sen_inverse(draw: Callable[[int, np.random.Generator], np.ndarray], *, n: int, clip: float,
                        capping: str = "max", rng=None) -> float:
    """Unbiased estimate of 1 / E_πt[W̄/W | x] by the Midzuno-Sen construction (Gilotte Sec. 5.4).

    ``draw(k, rng)`` returns k importance weights w = π_t / π_p of actions sampled from π_t at context x.
    Draw u ~ U(0, 1) and w₁ until w̄₁/w₁ > u (the first draw is accepted with probability ∝ its ratio),
    then w₂..w_n, and return n / Σ_j w̄_j / w_j. PointNCIS is (1/n) Σ ÎP_c(x) w̄ r.
    """
    check_choice(capping, CAPPINGS, name="capping")
    clip = check_clip(clip)
    rng = check_rng(rng)

    def ratio(w):
        w = np.asarray(w, dtype=float)
        wbar = cap(w, clip, capping)
        return np.divide(wbar, w, out=np.ones_like(w), where=w > 0)

    for _ in range(MIDZUNO_SEN_TRIES):
        r1 = ratio(draw(1, rng))[0]
        if rng.uniform() < r1:
            break
    else:
        raise InputError(f"Midzuno-Sen: no draw accepted in {MIDZUNO_SEN_TRIES:,} tries; the capped share "
                         "E[W̄/W | x] is ~0")
    rest = ratio(draw(n - 1, rng)) if n > 1 else np.empty(0)
    return n / (r1 + float(rest.sum()))

