"""Offline-online sensitivity as a function of the clip value m, by KDD'24's own protocol (Sec. 6.2, Fig. 1).

**Settings** are the (experiment, day, reward) whose online A/B effect (treatment − control arm, Welch's
two-sided test) is a significant *improvement*: p < ``online_alpha`` (the paper: p ≪ 0.001) and effect >
``min_effect`` (0). For every clip value m and metric, the offline paired effect of the target policy over the
logging policy on that day's control-arm sessions gets a normal CI at ``level`` (99 %); the metric **detects**
the setting iff that CI is strictly > 0. TPR = share of settings detected; mean p = mean one-sided p-value of
H0 "offline effect ≤ 0"; **sign agreement** = share of settings whose offline point estimate is > 0 (the
paper reports 100 %).

Online *negatives* (p < α and effect < −min_effect) are never mixed into the TPR: ``side="negatives"`` is a
separate view, **negatives detected** = share whose offline CI is strictly < 0 (mean p of H0 "offline effect
≥ 0", sign agreement = share with offline effect < 0). :func:`select_settings` is the one rule that picks the
settings of either view from the online outcomes (:func:`online_settings`).

The settings are many tests shown at once: with ``adjust="holm"`` (family-wise error) or ``"bh"`` (false
discovery rate) a setting is detected when its one-sided p-value, adjusted over the family of the settings
at the same (metric, clip m) (:mod:`offeval_core.multiple`), is ≤ (1 − level) / 2 — the tail of the CI rule,
which it equals without adjustment. Takeaways and the Fig. 1 verdict are in
:mod:`offeval_core.analyses.sensitivity_text`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from offeval_core import stats
from offeval_core.analyses._common import check_moments, check_policy_in, check_rewards
from offeval_core.analyses.sensitivity_text import paper_verdict, sensitivity_takeaway
from offeval_core.charts import sensitivity_figure
from offeval_core.defaults import LEVEL, ONLINE_ALPHA
from offeval_core.engine import Moments
from offeval_core.errors import InputError, NeedsArms, WrongType
from offeval_core.estimators import (
    ESTIMATORS,
    aggregate,
    estimate_from_row,
    online_results,
    require,
    select_clips,
)
from offeval_core.multiple import LABELS as ADJUST_LABELS
from offeval_core.multiple import METHODS as ADJUST_METHODS
from offeval_core.multiple import adjust as adjust_p
from offeval_core.validation import check_choice, check_level

__all__ = ["SETTING_KEYS", "SIDES", "SensitivityResult", "best_clips", "online_settings", "paper_verdict",
           "select_settings", "sensitivity", "sensitivity_figure"]

SETTING_KEYS = ("experiment_id", "day", "reward")
# side → (name of the detected share, its table column, the sign an offline CI must have to detect)
SIDES: dict[str, tuple[str, str, int]] = {"improvements": ("TPR", "tpr", 1),
                                          "negatives": ("negatives detected", "negatives_detected", -1)}
ONLINE_COLUMNS = [*SETTING_KEYS, "online_control", "online_treatment", "online_effect", "online_p"]


@dataclass(frozen=True, eq=False)
class SensitivityResult:
    """Result of :func:`sensitivity`.

    ``table``: one row per (metric, clip) with the detected share (column ``tpr`` for online improvements,
    ``negatives_detected`` for online negatives: :attr:`rate_column`), ``mean_p``, ``sign_agreement``,
    ``n_settings``, ``n_detected``. ``per_setting``: one row per (setting, metric, clip) with the online effect
    and p, the offline effect, its CI, one-sided p and ``detected`` / ``sign_agrees``. ``settings``: the
    selected settings with their online outcome. ``best_clips``: per metric every m that reaches the most
    detections (several when tied; empty on a flat line, where no m is best). With ``adjust`` ≠ "none",
    ``per_setting`` also holds ``p_adj`` and ``detected_unadjusted`` and ``table`` ``n_detected_unadjusted``;
    ``family`` names the family of each adjustment and ``family_size`` its size. ``n_tested``: the settings
    with an online outcome; ``closest_p``: the smallest online p among those whose effect is on ``side`` (NaN
    when none is), which the takeaway states when no setting is selected.
    """

    table: pd.DataFrame
    per_setting: pd.DataFrame
    settings: pd.DataFrame
    best_clips: dict[str, tuple[float, ...]]
    takeaway: str
    policy: str
    discount: str
    exposure: str
    level: float
    online_alpha: float
    selection: str
    metrics: tuple[str, ...] = field(default=())
    adjust: str = "none"
    family: str = ""
    family_size: int = 0
    side: str = "improvements"
    min_effect: float = 0.0
    n_tested: int = 0
    closest_p: float = math.nan

    @property
    def rate_name(self) -> str:
        """``"TPR"`` (online improvements, KDD'24) or ``"negatives detected"`` (online negatives)."""
        return SIDES[self.side][0]

    @property
    def rate_column(self) -> str:
        """The table column of the detected share: ``tpr`` or ``negatives_detected``."""
        return SIDES[self.side][1]

    def best_clip(self, metric: str) -> float | None:
        """The one m with the most detections of ``metric``; None when several m tie or the line is flat."""
        best = self.best_clips.get(metric, ())
        return best[0] if len(best) == 1 else None

    @property
    def effect_bound(self) -> str:
        """The online effect a setting needs: "effect > 0.1" (improvements), "effect < -0.1" (negatives; never
        "< -0")."""
        if self.side == "improvements":
            return f"effect > {self.min_effect:g}"
        return f"effect < {-self.min_effect if self.min_effect else 0:g}"

    @property
    def scope(self) -> str:
        """The settings in words: "with a significant online improvement (p < 0.001, effect > 0)"."""
        what = "improvement" if self.side == "improvements" else "degradation"
        bound = self.effect_bound
        if self.selection == "list":
            return f"listed, with an online {what} ({bound})"
        return f"with a significant online {what} (p < {self.online_alpha:g}, {bound})"

    @property
    def adjustment(self) -> str:
        """One sentence naming the multiple-testing family and the correction of the detections."""
        alpha = (1 - self.level) / 2
        if self.adjust == "none":
            return (f"Unadjusted: each of the {self.family} is detected on its own {self.level:.1%} CI "
                    f"(one-sided α = {alpha:g}); choose Holm or Benjamini-Hochberg to control the errors over "
                    "the family.").replace(".0%", " %")
        return (f"Detections on adjusted one-sided p-values, {ADJUST_LABELS[self.adjust]} at α = {alpha:g}; "
                f"family: the {self.family} (m = {self.family_size}).")


def online_settings(moments: Moments, rewards: Sequence[str]) -> pd.DataFrame:
    """Every (experiment, day, reward) with an online A/B outcome: the arms' means, Welch's effect (treatment −
    control) and its two-sided p-value (columns ``online_control``, ``online_treatment``, ``online_effect``,
    ``online_p``)."""
    rows = []
    for reward in rewards:
        for (exp, day), res in online_results(moments, reward=reward, by=("experiment_id", "day")).items():
            if res.effect is None:
                continue
            rows.append({"experiment_id": exp, "day": day, "reward": reward,
                         "online_control": res.control.value, "online_treatment": res.treatment.value,
                         "online_effect": res.effect.value, "online_p": res.p_two_sided})
    return pd.DataFrame(rows, columns=ONLINE_COLUMNS)


def _check_online_alpha(online_alpha: float) -> float:
    if isinstance(online_alpha, bool) or not isinstance(online_alpha, int | float):
        raise WrongType(f"online_alpha must be a number in (0, 1], got {type(online_alpha).__name__} "
                        f"{online_alpha!r}")
    if not 0 < online_alpha <= 1:
        raise InputError(f"online_alpha must be in (0, 1] (the paper: 0.001), got {online_alpha!r}")
    return float(online_alpha)


def _check_min_effect(min_effect: float) -> float:
    if isinstance(min_effect, bool) or not isinstance(min_effect, int | float) or not math.isfinite(min_effect) \
            or min_effect < 0:
        raise InputError(f"min_effect must be a finite number ≥ 0 (the online effect must exceed it), "
                         f"got {min_effect!r}")
    return float(min_effect)


def select_settings(online: pd.DataFrame, *, online_alpha: float = ONLINE_ALPHA, min_effect: float = 0.0,
                    side: str = "improvements") -> pd.DataFrame:
    """The settings of KDD'24 Sec. 6.2 among ``online`` (:func:`online_settings`: one row per (experiment,
    day, reward) with ``online_effect`` and its two-sided ``online_p``).

    ``side="improvements"`` (the paper's true positives): online_p < online_alpha and online_effect >
    min_effect. ``side="negatives"`` (the separate "negatives detected" view): online_p < online_alpha and
    online_effect < −min_effect. Both thresholds are strict, as in the paper's "p ≪ 0.001" and "improvement".

    >>> on = pd.DataFrame({"experiment_id": ["a", "b", "c", "d"], "day": 1, "reward": "like",
    ...                    "online_effect": [0.3, -0.2, 0.1, 0.4], "online_p": [1e-5, 1e-6, 0.2, 0.001]})
    >>> select_settings(on)["experiment_id"].tolist()   # d: p = 0.001 is not < 0.001; c: not significant
    ['a']
    >>> select_settings(on, side="negatives")["experiment_id"].tolist()
    ['b']
    """
    check_choice(side, tuple(SIDES), name="side")
    alpha, floor = _check_online_alpha(online_alpha), _check_min_effect(min_effect)
    effect = online["online_effect"]
    on_side = effect > floor if side == "improvements" else effect < -floor
    return online[(online["online_p"] < alpha) & on_side].reset_index(drop=True)


def _listed_settings(online: pd.DataFrame, wanted, *, side: str, min_effect: float) -> pd.DataFrame:
    """The settings a user lists, each of which must have an online effect on ``side`` (its p is not checked:
    the user chose it)."""
    if isinstance(wanted, str):
        raise WrongType(f"settings must be None (select by the online test) or a list of (experiment_id, day, "
                        f"reward), got {wanted!r}")
    try:
        wanted = [tuple(s) for s in wanted]
    except TypeError:
        raise WrongType(f"settings must be None (select by the online test) or a list of (experiment_id, day, "
                        f"reward), got {wanted!r}") from None
    keyed = online.set_index(list(SETTING_KEYS))
    out = []
    for s in wanted:
        if len(s) != 3:
            raise InputError(f"each setting must be (experiment_id, day, reward), got {s!r}")
        hits = [k for k in keyed.index if str(k[0]) == str(s[0]) and str(k[1]) == str(s[1]) and k[2] == s[2]]
        if not hits:
            raise NeedsArms(f"setting {s!r} has no online A/B outcome in the moments (needs both arms)")
        effect = float(keyed.loc[hits[0], "online_effect"])
        ok = effect > min_effect if side == "improvements" else effect < -min_effect
        if not ok:
            other = "negatives" if side == "improvements" else "improvements"
            raise InputError(f"setting {s!r} has online effect {effect:.4g}, not an online "
                             f"{'improvement' if side == 'improvements' else 'degradation'}: list it with "
                             f"side={other!r}")
        out.append(hits[0])
    return keyed.loc[out].reset_index()


def sensitivity(moments: Moments, *, policy: str = "treatment", metrics: Sequence[str] = ("dcg", "ndcg"),
                discount: str = "pbm", exposure: str = "pbm", level: float = LEVEL, online_alpha: float = ONLINE_ALPHA,
                min_effect: float = 0.0, side: str = "improvements", settings=None,
                rewards: Sequence[str] | None = None, adjust: str = "none") -> SensitivityResult:
    """TPR, mean p-value and sign agreement of offline metrics vs the clip value m (KDD'24 Sec. 6.2, Fig. 1).

    For setting s and clip m the offline effect is the paired mean
    Δ̂_s(m) = mean_τ [DCG_τ(R_t; m) − DCG_τ(R_0; m)] over the control-arm sessions of the setting's day,
    with CI Δ̂ ± z_{(1+level)/2}·se; TPR(m) = #{s : CI_s(m) > 0 strictly} / #settings, over the settings
    with a significant online improvement (:func:`select_settings`).

    Parameters
    ----------
    moments : Moments from :func:`offeval_core.engine.reduce` with ``policy`` and a clip grid.
    policy : the target policy whose online arm is ``treatment``.
    metrics : any of ``dcg``, ``ndcg``, ``pndcg``.
    level : confidence level of the offline CI (the paper: 99 %).
    online_alpha, min_effect : a setting counts when its online two-sided p < online_alpha and its online
        effect > min_effect (the paper: p ≪ 0.001, an improvement).
    side : ``"improvements"`` (TPR, the paper) or ``"negatives"`` (online degradations; detected iff the
        offline CI is strictly < 0) — two views, never mixed.
    settings : None (select by the online test) or a list of (experiment_id, day, reward), each with an online
        effect on ``side``.
    rewards : restrict to these rewards (default all computed).
    adjust : ``"none"``, ``"holm"`` or ``"bh"``: detect on p-values adjusted over the settings at each
        (metric, m), at one-sided α = (1 − level) / 2.

    Examples
    --------
    >>> from offeval_core.analyses.sensitivity import _tpr
    >>> _tpr(np.array([True, False, True, True]))  # 3 of 4 settings detected
    0.75
    """
    check_moments(moments)
    check_level(level)
    online_alpha, min_effect = _check_online_alpha(online_alpha), _check_min_effect(min_effect)
    check_policy_in(moments, policy)
    check_choice(adjust, tuple(ADJUST_METHODS), name="adjust")
    check_choice(side, tuple(SIDES), name="side")
    metrics = tuple(metrics)
    if not metrics:
        raise InputError("metrics must list at least one metric, got an empty sequence")
    for m in metrics:
        check_choice(m, ESTIMATORS, name="metrics")
    require(moments, discounts=(discount,), exposures=(exposure,))
    rewards = check_rewards(moments, rewards)
    online = online_settings(moments, rewards)
    if settings is None:
        chosen, selection = select_settings(online, online_alpha=online_alpha, min_effect=min_effect,
                                            side=side), "significant"
    else:
        chosen, selection = _listed_settings(online, settings, side=side, min_effect=min_effect), "list"
    d = SIDES[side][2]
    on_side = online.loc[d * online["online_effect"] > min_effect, "online_p"]
    closest_p = float(on_side.min()) if len(on_side) else math.nan

    rows = []
    for metric in metrics:
        part = select_clips(moments, rewards=rewards, policy=policy, metric=metric, discount=discount,
                            exposure=exposure)
        agg = aggregate(part, [*SETTING_KEYS, "clip"])
        agg = agg.merge(chosen, on=list(SETTING_KEYS), how="inner")
        for row in agg.to_dict("records"):  # a dict per row: a Series per row cost more than the estimates
            eff = estimate_from_row(row, metric=metric, level=level, diff=True)
            detected = eff.ci.low > 0 if d > 0 else eff.ci.high < 0
            rows.append({"experiment_id": row["experiment_id"], "day": row["day"], "reward": row["reward"],
                         "online_effect": row["online_effect"], "online_p": row["online_p"], "direction": d,
                         "metric": metric, "clip": float(row["clip"]), "effect": eff.value,
                         "stderr": eff.stderr, "ci_low": eff.ci.low, "ci_high": eff.ci.high,
                         "p_value": stats.one_sided_p(d * eff.value, eff.stderr),
                         "detected": bool(detected), "sign_agrees": bool(d * eff.value > 0)})
    per = pd.DataFrame(rows, columns=["experiment_id", "day", "reward", "online_effect", "online_p", "direction",
                                      "metric", "clip", "effect", "stderr", "ci_low", "ci_high", "p_value",
                                      "detected", "sign_agrees"])
    n_clips = len(moments.grid.clips)
    family = (f"{len(chosen)} settings (experiment × day × reward) at each of {n_clips} clip value"
              f"{'s' * (n_clips != 1)} and {len(metrics)} metric{'s' * (len(metrics) != 1)}")
    size = int(per.groupby(["metric", "clip"]).size().max()) if len(per) else 0
    if adjust != "none":
        per = _adjust(per, adjust, level)
    table = _summarise(per, metrics, moments.grid.clips, SIDES[side][1])
    best = best_clips(table)
    result = SensitivityResult(table=table, per_setting=per, settings=chosen.reset_index(drop=True),
                               best_clips=best, takeaway="", policy=policy, discount=discount, exposure=exposure,
                               level=level, online_alpha=online_alpha, selection=selection, metrics=metrics,
                               adjust=adjust, family=family, family_size=size, side=side, min_effect=min_effect,
                               n_tested=len(online), closest_p=closest_p)
    object.__setattr__(result, "takeaway", sensitivity_takeaway(result))
    return result


def _adjust(per: pd.DataFrame, method: str, level: float) -> pd.DataFrame:
    """Adjusted one-sided p-values over the settings of each (metric, clip); detected = adjusted p ≤ (1 − level)/2."""
    out = per.copy()
    out["p_adj"] = np.nan
    out["detected_unadjusted"] = out["detected"]
    for _, idx in out.groupby(["metric", "clip"], sort=False).groups.items():
        res = adjust_p(out.loc[idx, "p_value"].to_numpy(), method=method, alpha=(1 - level) / 2)
        out.loc[idx, "p_adj"] = res.adjusted
        out.loc[idx, "detected"] = res.rejected
    out["detected"] = out["detected"].astype(bool)
    return out


def _tpr(detected: np.ndarray) -> float:
    return float(np.mean(detected)) if len(detected) else math.nan


def _summarise(per: pd.DataFrame, metrics, clips, rate_column: str = "tpr") -> pd.DataFrame:
    rows = []
    for metric in metrics:
        for m in clips:
            part = per[(per["metric"] == metric) & (per["clip"] == m)]
            n = len(part)
            rec = {"metric": metric, "clip": float(m), rate_column: _tpr(part["detected"].to_numpy()),
                   "mean_p": float(part["p_value"].mean()) if n else math.nan,
                   "sign_agreement": float(part["sign_agrees"].mean()) if n else math.nan,
                   "n_settings": n, "n_detected": int(part["detected"].sum())}
            if "detected_unadjusted" in part:
                rec["n_detected_unadjusted"] = int(part["detected_unadjusted"].sum())
            rows.append(rec)
    cols = ["metric", "clip", rate_column, "mean_p", "sign_agreement", "n_settings", "n_detected"]
    if "detected_unadjusted" in per:
        cols.append("n_detected_unadjusted")
    return pd.DataFrame(rows, columns=cols)


def best_clips(table: pd.DataFrame) -> dict[str, tuple[float, ...]]:
    """Per metric, every clip m that reaches the most detections — several when they tie (a tie is reported as
    a tie, never broken by mean p), none when the line is flat (every m detects the same number) or nothing is
    detected.

    >>> t = pd.DataFrame({"metric": ["dcg"] * 3 + ["ndcg"] * 3, "clip": [1.0, 8.0, 16.0] * 2,
    ...                   "n_detected": [2, 9, 9, 3, 3, 3], "n_settings": 20})
    >>> best_clips(t)
    {'dcg': (8.0, 16.0), 'ndcg': ()}
    """
    best = {}
    for metric, part in table.groupby("metric", sort=False):
        part = part[part["n_settings"] > 0]
        if part.empty:
            continue
        top = int(part["n_detected"].max())
        flat = top == 0 or int(part["n_detected"].min()) == top
        best[metric] = () if flat else tuple(float(c) for c in part.loc[part["n_detected"] == top, "clip"])
    return best
