"""Deliberately simple reference implementation of DCG / nDCG / pnDCG off-policy estimators.

Plain Python loops over sessions and rows, no vectorisation: the fast engine in ``offeval_core`` is
cross-checked against it. Definitions (Jeunen et al., KDD'24, Eq. 8-9, Sec. 5, clipping of Sec. 6.2):

per session τ with rows i (logged rank r_i, reward c_i ≥ 0, target rank t_i),
discount D, exposure model D0 and clip m ≥ 1 (``math.inf`` allowed):

- de-biased clipped label ℓ_i = c_i · min(m, 1 / D0(r_i))  (1 / 0 = inf; a row with c_i = 0 has ℓ_i = 0);
- DCG_τ  = Σ_i ℓ_i · D(t_i), with D(t_i) = 0 when the target does not show the item (t_i missing);
- iDCG_τ = Σ_j ℓ_(j) · D(j), labels sorted descending, j = 1 .. number of rows in τ;
- nDCG_τ = DCG_τ / iDCG_τ if iDCG_τ > 0 else 0 ("zero" rule) or τ dropped ("drop" rule);
- policy value = mean over sessions; pnDCG = mean DCG / mean iDCG;
- paired effect = mean over sessions of (metric_target − metric_logging), stderr = sd(ddof=1) / sqrt(n).

Sessions are reported in order of first appearance in the input.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import pandas as pd

Model = Callable[[int], float]


# ----------------------------------------------------------------------------------------------------------
# discount / exposure models: rank (int, 1-based) -> probability
# ----------------------------------------------------------------------------------------------------------
def ref_log2(r: int) -> float:
    """Classical DCG discount 1 / log2(r + 1)."""
    return 1.0 / math.log2(r + 1)


def ref_reciprocal(r: int) -> float:
    """Reciprocal-rank discount 1 / r."""
    return 1.0 / r


def ref_exponential(p: float) -> Model:
    """Rank-biased-precision user model: r -> p^(r − 1)."""
    if not 0 < p <= 1:
        raise ValueError(f"p must be in (0, 1], got {p!r}")

    def model(r: int) -> float:
        return float(p) ** (r - 1)

    return model


def ref_cutoff(model: Model, n: int) -> Model:
    """The model truncated at rank n: r -> model(r) if r <= n else 0."""
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n!r}")

    def cut(r: int) -> float:
        if r <= n:
            return model(r)
        return 0.0

    return cut


def ref_learnt_pbm(df: pd.DataFrame, *, floor: float, arm: str | None = None) -> Model:
    """Learnt position-based exposure: P̂(V | R = r) = share of sessions reaching rank r, floored.

    A session "reaches" rank r when its maximum logged rank is >= r. With ``arm`` given, only rows
    with ``df["arm"] == arm`` are used.
    """
    if arm is not None:
        if "arm" not in df.columns:
            raise ValueError("arm given but the frame has no 'arm' column")
        df = df[df["arm"] == arm]
    max_rank: dict = {}
    for sid, r in zip(df["session_id"].tolist(), df["rank"].tolist(), strict=True):
        r = int(r)
        if sid not in max_rank or r > max_rank[sid]:
            max_rank[sid] = r
    n_sessions = len(max_rank)
    if n_sessions == 0:
        raise ValueError("no sessions to learn the exposure model from")
    lengths = list(max_rank.values())

    def model(r: int) -> float:
        reached = 0
        for t in lengths:
            if t >= r:
                reached += 1
        return max(reached / n_sessions, floor)

    return model


# ----------------------------------------------------------------------------------------------------------
# per-session values
# ----------------------------------------------------------------------------------------------------------
def _label(c: float, logged_rank: int, exposure: Model, clip: float) -> float:
    if c == 0:
        return 0.0
    p = exposure(logged_rank)
    inverse = math.inf if p == 0 else 1.0 / p
    return c * min(clip, inverse)


def _group_rows(df: pd.DataFrame, *, reward: str, policy: str | None) -> dict:
    """session_id -> list of (logged rank, reward, target rank), sessions in order of first appearance."""
    for col in ("session_id", "rank", reward):
        if col not in df.columns:
            raise ValueError(f"column {col!r} is missing")
    target_col = "rank" if policy is None else f"rank__{policy}"
    if target_col not in df.columns:
        raise ValueError(f"policy {policy!r}: column {target_col!r} is missing")
    sessions: dict = {}
    rows = zip(
        df["session_id"].tolist(),
        df["rank"].tolist(),
        df[reward].tolist(),
        df[target_col].tolist(),
        strict=True,
    )
    for sid, r, c, t in rows:
        # a missing target rank (NaN, or -1 as stored) means the target does not show the item: D = 0
        shown = t == t and int(t) >= 1
        sessions.setdefault(sid, []).append((int(r), float(c), int(t) if shown else None))
    return sessions


def ref_session_values(
    df: pd.DataFrame,
    *,
    reward: str,
    policy: str | None,
    discount: Model,
    exposure: Model,
    clip: float,
    ndcg_rule: str = "zero",
    ideal_discount: Model | None = None,
) -> pd.DataFrame:
    """DataFrame indexed by session_id with columns dcg, idcg, ndcg.

    ``ideal_discount`` (default: ``discount``) is the discount used in iDCG only; it exists to reproduce
    conventions such as KDD'24 Table 1, whose ideal sums every item's quality (``lambda r: 1.0``).
    With ``ndcg_rule="drop"`` sessions with iDCG = 0 are left out of the frame.
    """
    if clip < 1:
        raise ValueError(f"clip must be >= 1, got {clip!r}")
    if ndcg_rule not in ("zero", "drop"):
        raise ValueError(f"ndcg_rule must be 'zero' or 'drop', got {ndcg_rule!r}")
    if ideal_discount is None:
        ideal_discount = discount
    ids, dcgs, idcgs, ndcgs = [], [], [], []
    for sid, rows in _group_rows(df, reward=reward, policy=policy).items():
        labels = []
        dcg = 0.0
        for logged_rank, c, target_rank in rows:
            label = _label(c, logged_rank, exposure, clip)
            labels.append(label)
            if label != 0 and target_rank is not None:
                dcg += label * discount(target_rank)
        labels.sort(reverse=True)
        idcg = 0.0
        for j, label in enumerate(labels, start=1):
            if label != 0:
                idcg += label * ideal_discount(j)
        if idcg > 0:
            ndcg = dcg / idcg
        elif ndcg_rule == "zero":
            ndcg = 0.0
        else:
            continue
        ids.append(sid)
        dcgs.append(dcg)
        idcgs.append(idcg)
        ndcgs.append(ndcg)
    return pd.DataFrame({"dcg": dcgs, "idcg": idcgs, "ndcg": ndcgs}, index=pd.Index(ids, name="session_id"))


def _mean(xs: list[float]) -> float:
    if not xs:
        return math.nan
    total = 0.0
    for x in xs:
        total += x
    return total / len(xs)


def ref_policy_value(
    df: pd.DataFrame,
    *,
    reward: str,
    policy: str | None,
    discount: Model,
    exposure: Model,
    clip: float,
    metric: str,
    ndcg_rule: str = "zero",
    ideal_discount: Model | None = None,
) -> float:
    """Mean DCG or nDCG over sessions, or pnDCG = mean DCG / mean iDCG (Sec. 5)."""
    if metric not in ("dcg", "ndcg", "pndcg"):
        raise ValueError(f"metric must be 'dcg', 'ndcg' or 'pndcg', got {metric!r}")
    # The drop rule only concerns nDCG; DCG and pnDCG always use every session.
    rule = ndcg_rule if metric == "ndcg" else "zero"
    sv = ref_session_values(
        df,
        reward=reward,
        policy=policy,
        discount=discount,
        exposure=exposure,
        clip=clip,
        ndcg_rule=rule,
        ideal_discount=ideal_discount,
    )
    if metric == "dcg":
        return _mean(sv["dcg"].tolist())
    if metric == "ndcg":
        return _mean(sv["ndcg"].tolist())
    mean_idcg = _mean(sv["idcg"].tolist())
    return _mean(sv["dcg"].tolist()) / mean_idcg if mean_idcg > 0 else math.nan


def ref_paired_effect(
    df: pd.DataFrame,
    *,
    reward: str,
    policy: str,
    discount: Model,
    exposure: Model,
    clip: float,
    metric: str,
    ndcg_rule: str = "zero",
) -> tuple[float, float]:
    """(mean, stderr) of the per-session difference metric(target) − metric(logging), same sessions.

    ``metric`` is "dcg" or "ndcg"; stderr = sample std (ddof=1) / sqrt(n), NaN when n < 2.
    iDCG does not depend on the policy, so the drop rule drops the same sessions for both sides.
    """
    if metric not in ("dcg", "ndcg"):
        raise ValueError(f"metric must be 'dcg' or 'ndcg' for a paired effect, got {metric!r}")
    kw = dict(reward=reward, discount=discount, exposure=exposure, clip=clip, ndcg_rule=ndcg_rule)
    target = ref_session_values(df, policy=policy, **kw)
    logging = ref_session_values(df, policy=None, **kw)
    diffs = []
    for sid in target.index:
        diffs.append(float(target.at[sid, metric]) - float(logging.at[sid, metric]))
    n = len(diffs)
    mean = _mean(diffs)
    if n < 2:
        return mean, math.nan
    ss = 0.0
    for d in diffs:
        ss += (d - mean) ** 2
    return mean, math.sqrt(ss / (n - 1)) / math.sqrt(n)
