"""Bias and variance of the clipped estimator vs the clip value m (Gilotte et al. Sec. 4.2-4.3, Fig. 2).

For a rank policy R the clipped estimator is DCG (KDD'24 Eq. 9 with Sec. 6.2 clipping):
V̂(m) = mean_τ Σ_i c_i · D(R(i)) · min(m, w_i), w_i = 1 / D0(k_i) for the logged rank k_i. For a propensity
policy π_t it is capped importance sampling, CIS (Gilotte Sec. 4.2): V̂(c) = mean_τ Σ_i c_i · min(c, w_i),
w_i = π_t(a_i) / π_p(a_i), the cap c playing the role of m — the same formulas with D(R(i)) = 1.
Clipping lowers variance and adds a non-negative bias (for non-negative rewards). For every m this module
reports the estimator's standard error (from the moments), a worst-case bias bound, an estimated bias, the
share of rows and of target exposure that the clip touches, the effective sample size and the largest
weight, and it recommends a clip value by a documented rule.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from offeval_core.analyses._common import clip_text
from offeval_core.arms import offline_mask
from offeval_core.charts import clip_tuning_figure
from offeval_core.defaults import LEVEL
from offeval_core.discounts import parse_discount
from offeval_core.engine import DEFAULT_CLIPS, Grid, Moments, reduce
from offeval_core.errors import InputError, WrongType
from offeval_core.estimators import aggregate, estimate_from_row, require, select_clips
from offeval_core.importance.weights import PROPENSITY
from offeval_core.logs import POLICY_PREFIX, TARGET_PROPENSITY_PREFIX, Logs
from offeval_core.policies import policy_kind
from offeval_core.stats import kish_ess, normal_quantile
from offeval_core.validation import check_choice, check_clips, check_level

__all__ = ["RULES", "ClipRecommendation", "ClipTuningResult", "clip_tuning", "clip_tuning_figure", "recommend_clip",
           "recommended_clip", "slope_select"]

RULES = ("slope", "mse")
RULE_TEXT = {
    "slope": ("The SLOPE / Lepski rule alone chooses m = {m}: the most strongly clipped value whose {lvl} confidence interval, widened "
              "to twice its half-width, still overlaps the widened intervals of every larger m (SLOPE / "
              "Lepski selection). Clipping below it would shift the estimate by more than the noise of the "
              "less-clipped estimators can explain, i.e. the bias would show."),
    "mse": ("The worst-case MSE rule alone chooses m = {m}: it minimises the worst-case mean squared error, variance + (bias bound)², "
            "where the bias bound assumes every clipped item earns the largest reward (Gilotte Sec. 4.2)."),
}


@dataclass(frozen=True)
class ClipRecommendation:
    """The one clip recommendation every page, the report and ``offeval estimate --clip auto`` use."""

    clip: float
    reason: str
    bias_bound: float
    reference: float
    slope_clip: float


RECOMMENDATION_RULE = ("the most clipped m that the SLOPE / Lepski rule admits and whose worst-case bias bound "
                       "stays below the quantity it is meant to measure")


@dataclass(frozen=True, eq=False)
class ClipTuningResult:
    """Result of :func:`clip_tuning`. ``table`` has one row per clip value (see :func:`clip_tuning`);
    ``recommendation`` is the one clip recommendation (:func:`recommend_clip`), ``rule_clip`` what ``rule`` alone
    would choose (explained by ``rule_text``; not a recommendation)."""

    table: pd.DataFrame
    rule_clip: float
    rule: str
    rule_text: str
    reward: str
    policy: str
    discount: str
    exposure: str
    level: float
    r_max: float
    n_sessions: int
    n_rows: int
    estimator: str = "dcg"
    """The clipped estimator: ``dcg`` (a rank policy) or ``cis`` (a propensity policy, cap c = m)."""
    recommendation: ClipRecommendation | None = None


def slope_select(clips: Sequence[float], estimates: Sequence[float], halfwidths: Sequence[float]) -> float:
    """SLOPE-style selection (Su et al., ICML 2020; Lepski's method) over clip values.

    Candidates are ordered from least clipped (largest m: least bias, most variance) to most clipped.
    Walking down, m_k is admissible while the intervals [θ̂_j − 2h_j, θ̂_j + 2h_j] of every j ≤ k share a
    common point; the recommendation is the last admissible m. Candidates with a NaN estimate or
    half-width are skipped.

    >>> slope_select([1, 4, float("inf")], [0.5, 0.95, 1.0], [0.01, 0.05, 0.2])
    4.0
    """
    order = np.argsort(-np.asarray(clips, dtype=float), kind="stable")
    lo, hi = -math.inf, math.inf
    chosen = math.nan
    for k in order:
        est, h = float(estimates[k]), float(halfwidths[k])
        if not (math.isfinite(est) and math.isfinite(h)):
            continue
        lo, hi = max(lo, est - 2 * h), min(hi, est + 2 * h)
        if lo > hi:
            break
        chosen = float(clips[k])
    return chosen


def clip_tuning(logs: Logs, *, reward: str, policy: str = "treatment", discount: str = "pbm",
                exposure: str = "pbm", clips: Sequence[float] = DEFAULT_CLIPS, level: float = LEVEL,
                rule: str = "slope", r_max: float | None = None, moments: Moments | None = None,
                arm: str | None = "control") -> ClipTuningResult:
    """Variance, bias bound, clipped share, ESS and max weight of the clipped DCG estimator per clip m.

    With v_i(m) = D(R(i)) · min(m, w_i) the per-row multiplier of the reward, over the logged rows of the
    ``arm`` sessions (N sessions):

    - ``estimate``, ``stderr``: mean per-session DCG and its standard error (from the moments);
      ``variance`` = stderr² (variance of the estimator, Gilotte Fig. 2).
    - ``bias_bound`` = r_max · (1/N) Σ_i D(R(i)) · (w_i − m)₊ — the DCG analogue of Gilotte's
      r_max · P(W > c): the clipped part of the target exposure, estimated by IPS over the logged rows
      (E[Σ_logged f(i) w_i] = E[Σ_all f(i)] under the PBM), times the largest per-item reward. Every clipped
      item earning r_max is the worst case; the true bias is between 0 and this bound.
    - ``bias_estimate`` = V̂(∞) − V̂(m) = (1/N) Σ_i c_i · D(R(i)) · (w_i − m)₊, the two estimates read from the
      moments (one implementation of the value): an unbiased estimate of the clipping bias under KDD'24
      Asm. 1-5 (noisy where few rewards are clipped).
    - ``clipped_rows``: share of logged rows with w_i > m; ``clipped_mass`` = Σ D(R(i))(w_i − m)₊ /
      Σ D(R(i)) w_i, the share of the target's (IPS-estimated) exposure that the clip removes.
    - ``ess`` = (Σ v_i)² / Σ v_i² (Kish, :func:`~offeval_core.stats.kish_ess`) and ``ess_share`` = ess / rows; ``max_weight`` = max min(m, w_i).
    - ``mse_bound`` = variance + bias_bound², ``rmse_bound`` its square root.

    A propensity policy (a ``target_propensity__<policy>`` column and no ``rank__<policy>``) is tuned as capped
    importance sampling: w_i = π_t / π_p, D(R(i)) = 1, the estimate CIS at the cap c = m from importance moments
    (``discount`` and ``exposure`` do not apply and read ``propensity``); ``estimator`` says which.

    ``recommendation`` is the one clip recommendation (:func:`recommend_clip`: the SLOPE / Lepski choice moved to
    a less clipped m while its bias bound exceeds the mean size of the unclipped offline effect,
    :func:`mean_offline_effect`). ``rule_clip`` is what one rule alone chooses, for comparison: ``rule="slope"``
    (default) :func:`slope_select` on the CIs at ``level``; ``rule="mse"`` the m minimising ``mse_bound`` (worst
    case; it favours large m because the bound is loose).

    Examples
    --------
    One session, a reward at logged rank 2 with D0 = exponential:0.5 (w = 2), target puts it at rank 1:
    clipping at m = 1 removes (2 − 1) · D(1) = 1 of exposure, so the bias bound is 1 · r_max = 1.

    >>> from offeval_core.logs import read_logs
    >>> logs = read_logs(pd.DataFrame({"session_id": [1, 1], "rank": [1, 2], "click": [0, 1],
    ...                                "rank__new": [2, 1]}))
    >>> res = clip_tuning(logs, reward="click", policy="new", discount="exponential:0.5",
    ...                   exposure="exponential:0.5", clips=[1, 2])
    >>> res.table.set_index("clip").loc[1.0, "bias_bound"]
    np.float64(1.0)
    """
    if not isinstance(logs, Logs):
        raise WrongType(f"logs must be offeval_core.logs.Logs (from read_logs), got {type(logs).__name__}")
    check_level(level)
    check_choice(rule, RULES, name="rule")
    logs.check_reward(reward)
    if policy in (None, "logging"):
        raise InputError("policy must name a target policy (a rank__<policy> or target_propensity__<policy> "
                         "column), got the logging policy")
    try:
        kind = policy_kind(logs, policy)
    except KeyError:
        logs.check_policy(policy)  # the unknown-policy message of the logs
        raise
    estimator = "cis" if kind == "propensity" else "dcg"
    if kind == "propensity":
        discount = exposure = PROPENSITY
    clips = check_clips(clips)
    if moments is None:
        moments = _tuning_moments(logs, reward=reward, policy=policy, kind=kind, discount=discount,
                                  exposure=exposure, clips=clips)
    else:
        require(moments, clips=clips)

    if math.inf not in moments.grid.clips:  # the unclipped estimate: the bias estimate's and the effect's reference
        unclipped = _tuning_moments(logs, reward=reward, policy=policy, kind=kind, discount=discount,
                                    exposure=exposure, clips=(math.inf,))
    else:
        unclipped = moments

    def estimates(mom: Moments, ms: Sequence[float]) -> dict:
        """The estimate at each clip value of ``ms``: the rows of every clip value selected and pooled per clip value
        at once (a clip value's pooled row is the one its own selection gives: bincount adds in row order)."""
        rows = select_clips(mom, rewards=(reward,), policy=policy, metric=estimator, discount=discount,
                            exposure=exposure, arm=arm)
        pooled = {float(r["clip"]): r for r in aggregate(rows, ["clip"]).to_dict("records")}
        empty = aggregate(rows.iloc[:0]).to_dict("records")[0]  # a clip value without rows: n = 0, a NaN estimate
        return {m: estimate_from_row(pooled.get(float(m), empty), metric=estimator, level=level) for m in ms}

    v_inf = estimates(unclipped, (math.inf,))[math.inf].value
    per_clip = estimates(moments, clips)
    f = logs.frame
    sess = logs.sessions.sort_values("session")
    keep_sessions = offline_mask(sess["arm"].astype(str), arm)
    rows = keep_sessions[f["session"].to_numpy()]
    n_sessions = int(keep_sessions.sum())
    if kind == "propensity":  # w = π_t / π_p; the target factor D(R(i)) of DCG is 1
        w = (f[TARGET_PROPENSITY_PREFIX + policy].to_numpy(dtype=float)[rows]
             / f["logging_propensity"].to_numpy(dtype=float)[rows])
        dt = np.ones_like(w)
    else:
        w = 1.0 / parse_discount(exposure, logs=logs)(f["rank"].to_numpy()[rows])
        dt = parse_discount(discount, logs=logs)(f[POLICY_PREFIX + policy].to_numpy()[rows])
    if r_max is None:
        r_max = float(np.max(f[reward].to_numpy(dtype=float))) if len(f) else 1.0
    total_mass = float(np.sum(dt * w))
    z = normal_quantile(level)

    out = []
    for m in clips:
        wm = np.minimum(m, w)
        excess = np.maximum(w - m, 0.0) if math.isfinite(m) else np.zeros_like(w)
        est = per_clip[m]
        ess = kish_ess(dt * wm)
        bias_bound = r_max * float(np.sum(dt * excess)) / max(n_sessions, 1)
        out.append({"clip": float(m), "estimate": est.value, "stderr": est.stderr,
                    "ci_low": est.ci.low, "ci_high": est.ci.high, "variance": est.stderr ** 2,
                    "bias_bound": bias_bound,
                    "bias_estimate": v_inf - est.value,
                    "clipped_rows": float(np.mean(w > m)) if w.size else math.nan,
                    "clipped_mass": float(np.sum(dt * excess)) / total_mass if total_mass > 0 else math.nan,
                    "ess": ess, "ess_share": ess / w.size if w.size else math.nan,
                    "max_weight": float(wm.max()) if wm.size else math.nan,
                    "mse_bound": est.stderr ** 2 + bias_bound ** 2})
    table = pd.DataFrame(out)
    table["rmse_bound"] = np.sqrt(table["mse_bound"])
    if rule == "slope":
        rec = slope_select(table["clip"].to_numpy(), table["estimate"].to_numpy(),
                           (z * table["stderr"]).to_numpy())
    else:
        finite_mse = table["mse_bound"].where(np.isfinite(table["mse_bound"]))
        rec = float(table.loc[finite_mse.idxmin(), "clip"]) if finite_mse.notna().any() else math.nan
    if math.isnan(rec):
        rec = float(max(clips))
    text = RULE_TEXT[rule].format(m=clip_text(rec), lvl=f"{level:.0%}")
    effect = mean_offline_effect(unclipped, reward=reward, policy=policy, discount=discount, exposure=exposure,
                                 level=level, metric=estimator)
    return ClipTuningResult(table=table, rule_clip=rec, rule=rule, rule_text=text, reward=reward,
                            policy=policy, discount=discount, exposure=exposure, level=level, r_max=float(r_max),
                            n_sessions=n_sessions, n_rows=int(w.size), estimator=estimator,
                            recommendation=recommend_clip(table, level=level, effect=effect))


def _tuning_moments(logs: Logs, *, reward: str, policy: str, kind: str, discount: str, exposure: str,
                    clips: Sequence[float]) -> Moments:
    """The moments the clipped estimator of ``policy`` reads at every clip: importance moments (CIS, cap c = m)
    for a propensity policy, the DCG reduce of (D, D0) for a rank policy."""
    if kind == "propensity":
        from offeval_core.importance import reduce_importance

        return reduce_importance(logs, rewards=(reward,), policies=(policy,), clips=clips, cappings=("max",),
                                 scales=("session",), weights="propensity")
    return reduce(logs, Grid(rewards=(reward,), policies=(policy,), discounts=(discount,), exposures=(exposure,),
                             clips=clips))


def recommend_clip(table: pd.DataFrame, *, level: float, effect: float | None = None) -> ClipRecommendation:
    """The one clip recommendation, on a clip-tuning ``table`` (columns clip, estimate, stderr, bias_bound), with
    its rule and a one-sentence reason.

    Start from the SLOPE / Lepski choice (:func:`slope_select` on the CIs at ``level``); if its worst-case bias
    bound exceeds ``|effect|`` (the offline effect it is meant to measure; default: the unclipped estimate),
    move to the next larger m whose bias bound does not (m = ∞ has none), and say so.

    >>> t = pd.DataFrame({"clip": [1.0, 4.0, math.inf], "estimate": [0.5, 0.9, 1.0],
    ...                   "stderr": [0.01, 0.05, 0.2], "bias_bound": [0.9, 0.05, 0.0]})
    >>> recommend_clip(t, level=0.95, effect=0.1).clip   # SLOPE admits 4 (m = 1 is biased: its CI misses); 0.05 < 0.1
    4.0
    >>> recommend_clip(t, level=0.95, effect=0.01).clip  # an effect of 0.01 is below m = 4's bias bound: no clipping
    inf
    """
    t = table.sort_values("clip").reset_index(drop=True)
    z = normal_quantile(level)
    slope = slope_select(t["clip"].to_numpy(), t["estimate"].to_numpy(), (z * t["stderr"]).to_numpy())
    if math.isnan(slope):
        slope = float(t["clip"].max())
    unclipped = float(t.loc[t["clip"].idxmax(), "estimate"])
    ref = abs(effect) if effect is not None and math.isfinite(effect) else abs(unclipped)
    what = ("the size of the offline effect" if effect is not None and math.isfinite(effect)
            else "the unclipped estimate")
    ok = t[(t["clip"] >= slope) & (t["bias_bound"].fillna(math.inf) <= ref)]
    rec = float(ok["clip"].min()) if len(ok) else float(t["clip"].max())
    bound = float(t.loc[t["clip"] == rec, "bias_bound"].iloc[0])
    if rec == slope:
        reason = (f"m = {clip_text(rec)}: {RECOMMENDATION_RULE}; its bias bound {bound:.2g} is below "
                  f"{what} ({ref:.2g}).")
    else:
        reason = (f"m = {clip_text(rec)}: the SLOPE / Lepski rule alone would clip at m = {clip_text(slope)}, "
                  f"but its bias bound exceeds {what} ({ref:.2g}), so the recommendation moves to the most "
                  f"clipped m whose bias bound ({bound:.2g}) does not.")
    return ClipRecommendation(clip=rec, reason=reason, bias_bound=bound, reference=ref, slope_clip=slope)


def recommended_clip(logs: Logs, *, reward: str, policy: str, discount: str = "pbm", exposure: str = "pbm",
                     level: float = LEVEL, clips: Sequence[float] = DEFAULT_CLIPS, moments: Moments | None = None,
                     tuning: ClipTuningResult | None = None) -> ClipRecommendation:
    """The recommended clip of ``policy`` on these logs — the one rule of every dashboard page, the report and
    ``offeval estimate --clip auto``: the ``recommendation`` of :func:`clip_tuning`, i.e. :func:`recommend_clip` (the SLOPE / Lepski choice at
    ``level``, moved to a less clipped m while its worst-case bias bound exceeds the mean size over A/B tests of
    the unclipped offline effect, :func:`mean_offline_effect`). A propensity policy is tuned as CIS (cap c = m).
    ``moments`` (of ``policy`` at every clip of ``clips``) and ``tuning`` (its :func:`clip_tuning` result) are
    reused when given.

    Four sessions logged at ranks 1 and 3 (D0 = D = exponential:0.5, so w = 1 and 4), the target swapping them;
    clicks at logged rank 3 in two sessions, at rank 1 in one: session DCGs are (min(m, 4), min(m, 4), 0, 0.25).
    SLOPE admits m = 1 (the widened CIs overlap), but its bias bound 1 · (4 − 1) = 3 — and m = 2's, 2 — exceed
    the offline effect 2.0625 − 0.75 = 1.3125 (target minus logging DCG), so the rule moves to m = 4.

    >>> from offeval_core.logs import read_logs
    >>> logs = read_logs(pd.DataFrame({"session_id": [1, 1, 2, 2, 3, 3, 4, 4], "rank": [1, 3] * 4,
    ...                                "click": [0, 1, 0, 1, 0, 0, 1, 0], "rank__new": [3, 1] * 4}))
    >>> recommended_clip(logs, reward="click", policy="new", discount="exponential:0.5",
    ...                  exposure="exponential:0.5", clips=[1, 2, 4, math.inf]).clip
    4.0
    """
    if tuning is None:
        tuning = clip_tuning(logs, reward=reward, policy=policy, discount=discount, exposure=exposure, clips=clips,
                             level=level, moments=moments)
    return tuning.recommendation


def mean_offline_effect(moments: Moments, *, reward: str, policy: str, discount: str, exposure: str,
                        level: float, metric: str = "dcg") -> float | None:
    """The effect a clip is meant to measure: the mean over A/B tests of the size |effect| of the unclipped
    (m = ∞) offline effect of ``policy`` over the logging policy (None when there is none), by ``metric``
    (``dcg``; ``cis`` for a propensity policy, which at c = ∞ is IS); sizes, so positive and negative tests do
    not cancel."""
    from offeval_core.estimators import summarize_groups

    groups = summarize_groups(moments, reward=reward, policy=policy, metric=metric, discount=discount,
                              exposure=exposure, clip=math.inf, by=("experiment_id",), level=level)
    effects = [abs(g.effect.value) for g in groups if g.effect is not None and math.isfinite(g.effect.value)]
    return float(np.mean(effects)) if effects else None
