"""The NCIS counter-example of Gilotte et al. Table 1: logs on which NCIS is biased and PieceNCIS is not."""

from __future__ import annotations

import numpy as np
import pandas as pd

from offeval_core.errors import InputError
from offeval_core.logs import TARGET_PROPENSITY_PREFIX
from offeval_core.validation import check_rng

__all__ = ["COUNTEREXAMPLE_ACTIONS", "COUNTEREXAMPLE_SEGMENTS", "ncis_counterexample"]

COUNTEREXAMPLE_ACTIONS = pd.DataFrame({
    "segment": ["registered"] * 3 + ["unknown"] * 2,
    "item_id": ["good_deal", "popular", "niche", "generic_a", "generic_b"],
    "logging_propensity": [0.01, 0.37, 0.62, 0.6, 0.4],
    "target_propensity": [0.4, 0.3, 0.3, 0.4, 0.6],
    "value": [12.0, 20.0, 4.0, 1.0, 1.0],
})
"""Actions of the Table 1 counter-example (one display slot per session, reward deterministic per action).

Registered customers (share 0.1): π_p earns 0.01·12 + 0.37·20 + 0.62·4 = 10, π_t earns 0.4·12 + 0.3·20 +
0.3·4 = 12; with c = 10 only ``good_deal`` is capped (w = 40), so E_πt[W̄/W] = 0.4·10/40 + 0.6 = 0.7 and
the reward is independent of W̄/W under π_t within the segment (12 on both parts). Unknown customers
(share 0.9): both policies earn 1 and no weight exceeds 1.5. Hence π_p = 1.9, π_t = 2.1 and
NCIS → (0.1·12·0.7 + 0.9·1) / (0.1·0.7 + 0.9) = 1.74 / 0.97 ≈ 1.79 (Gilotte Table 1, Eq. 2)."""
COUNTEREXAMPLE_SEGMENTS = {"registered": 0.1, "unknown": 0.9}


def ncis_counterexample(n: int = 10_000, *, rng=None, arms: bool = True,
                        policy: str = "test") -> pd.DataFrame:
    """Logs (a DataFrame in the schema; read with :func:`offeval_core.logs.read_logs`) of the NCIS
    counter-example of Gilotte Table 1: ``n`` control sessions logged by π_p and, with ``arms``, ``n``
    treatment sessions logged by π_t (their ``logging_propensity`` is π_t's). Reward column ``value``;
    target column ``target_propensity__<policy>``; ``segment`` registered / unknown; one row per session.

    With ``rng=None`` the sessions follow the population frequencies exactly (n must be a multiple of
    1000), so every estimator returns its population value: logging 1.9, IS 2.1, NCIS(c=10) 1.74/0.97,
    PieceNCIS by segment 2.1. With an ``rng`` the sessions are drawn i.i.d.

    >>> from offeval_core.importance import estimate
    >>> from offeval_core.logs import read_logs
    >>> logs = read_logs(ncis_counterexample(1000))
    >>> r = estimate(logs, reward="value", policy="test", estimator="ncis", clip=10)
    >>> round(r.logging.value, 2), round(r.target.value, 4)  # 1.9 vs 1.74 / 0.97
    (1.9, 1.7938)
    """
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise InputError(f"n must be a positive integer, got {n!r}")
    if rng is None and n % 1000:
        raise InputError(f"n must be a multiple of 1000 for exact population frequencies (rng=None), got {n}")
    if rng is not None:
        rng = check_rng(rng)
    acts = COUNTEREXAMPLE_ACTIONS
    share = acts["segment"].map(COUNTEREXAMPLE_SEGMENTS).to_numpy()
    frames = []
    for arm, col in (("control", "logging_propensity"), ("treatment", "target_propensity"))[: 2 if arms else 1]:
        prob = share * acts[col].to_numpy()
        if rng is None:
            counts = np.rint(prob * n).astype(int)
        else:
            counts = rng.multinomial(n, prob / prob.sum())
        idx = np.repeat(np.arange(len(acts)), counts)
        if rng is not None:
            idx = rng.permutation(idx)
        part = acts.iloc[idx].reset_index(drop=True)
        frames.append(pd.DataFrame({
            "session_id": [f"{arm[0]}{i}" for i in range(len(part))], "rank": 1, "item_id": part["item_id"],
            "segment": part["segment"], "arm": arm, "value": part["value"],
            "logging_propensity": part[col], TARGET_PROPENSITY_PREFIX + policy: part["target_propensity"],
        }))
    return pd.concat(frames, ignore_index=True)

