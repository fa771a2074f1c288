"""Offline-online sensitivity as a function of the clip value m (KDD'24 Sec. 6.2, Fig. 1).

A *setting* is one (experiment, day, reward) whose online treatment effect (treatment − control arm,
Welch's test) is significant. For every clip value m and metric, the offline paired effect of the target
policy over the logging policy on that day's control-arm sessions gets a normal CI at ``level``; the metric
*detects* the setting iff the CI lies strictly on the side of the online effect (strictly positive for the
online improvements the paper studies). TPR = share of settings detected; mean p = mean one-sided p-value
of H0 "offline effect ≤ 0" (direction-adjusted); sign agreement = share whose offline point estimate has
the online effect's sign.

The settings are many tests shown at once: with ``adjust="holm"`` (family-wise error) or ``"bh"`` (false
discovery rate) a setting is detected when its one-sided p-value, adjusted over the family of the settings
at the same (metric, clip m) (:mod:`offeval_core.multiple`), is ≤ (1 − level) / 2 — the tail of the CI rule,
which it equals without adjustment.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from offeval_core import stats
from offeval_core.analyses._common import check_moments, check_policy_in, check_rewards, clip_text, pct
from offeval_core.charts import sensitivity_figure
from offeval_core.defaults import LEVEL, ONLINE_ALPHA
from offeval_core.engine import Moments
from offeval_core.errors import NeedsArms
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

__all__ = ["SensitivityResult", "paper_verdict", "sensitivity", "sensitivity_figure"]

SETTING_KEYS = ("experiment_id", "day", "reward")


@dataclass(frozen=True, eq=False)
class SensitivityResult:
    """Result of :func:`sensitivity`.

    ``table``: one row per (metric, clip) with ``tpr``, ``mean_p``, ``sign_agreement``, ``n_settings``,
    ``n_detected``. ``per_setting``: one row per (setting, metric, clip) with the online effect and p, the
    offline effect, its CI, one-sided p and ``detected`` / ``sign_agrees``. ``settings``: the selected
    settings with their online outcome. ``best_clip``: per metric the m with the highest TPR (ties: lower
    mean p, then smaller m). With ``adjust`` ≠ "none", ``per_setting`` also holds ``p_adj`` and
    ``detected_unadjusted`` and ``table`` ``n_detected_unadjusted``; ``family`` names the family of each
    adjustment and ``family_size`` its size.
    """

    table: pd.DataFrame
    per_setting: pd.DataFrame
    settings: pd.DataFrame
    best_clip: dict[str, float]
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


def _online_settings(moments: Moments, rewards: Sequence[str]) -> pd.DataFrame:
    rows = []
    for reward in rewards:
        for (exp, day), res in online_results(moments, reward=reward, by=("experiment_id", "day")).items():
            if res.effect is None:
                continue
            rows.append({"experiment_id": exp, "day": day, "reward": reward,
                         "online_control": res.control.value, "online_treatment": res.treatment.value,
                         "online_effect": res.effect.value, "online_p": res.p_two_sided})
    cols = [*SETTING_KEYS, "online_control", "online_treatment", "online_effect", "online_p"]
    return pd.DataFrame(rows, columns=cols)


def _select_settings(online: pd.DataFrame, settings, online_alpha: float) -> tuple[pd.DataFrame, str]:
    if isinstance(settings, str):
        check_choice(settings, ("significant", "all"), name="settings")
        if settings == "all":
            return online.copy(), "all"
        mask = (online["online_p"] < online_alpha) & (online["online_effect"] != 0)
        return online[mask].copy(), "significant"
    try:
        wanted = [tuple(s) for s in settings]
    except TypeError:
        raise TypeError(f"settings must be 'significant', 'all' or a list of (experiment_id, day, reward), "
                        f"got {settings!r}") from None
    keyed = online.set_index(list(SETTING_KEYS))
    out = []
    for s in wanted:
        if len(s) != 3:
            raise ValueError(f"each setting must be (experiment_id, day, reward), got {s!r}")
        hits = [k for k in keyed.index if str(k[0]) == str(s[0]) and str(k[1]) == str(s[1]) and k[2] == s[2]]
        if not hits:
            raise NeedsArms(f"setting {s!r} has no online A/B outcome in the moments (needs both arms)")
        out.append(hits[0])
    return keyed.loc[out].reset_index(), "list"


def sensitivity(moments: Moments, *, policy: str = "treatment", metrics: Sequence[str] = ("dcg", "ndcg"),
                discount: str = "pbm", exposure: str = "pbm", level: float = LEVEL, online_alpha: float = ONLINE_ALPHA,
                settings="significant", rewards: Sequence[str] | None = None, adjust: str = "none") -> SensitivityResult:
    """TPR, mean p-value and sign agreement of offline metrics vs the clip value m (KDD'24 Sec. 6.2).

    For setting s and clip m the offline effect is the paired mean
    Δ̂_s(m) = mean_τ [DCG_τ(R_t; m) − DCG_τ(R_0; m)] over the control-arm sessions of the setting's day,
    with CI Δ̂ ± z_{(1+level)/2}·se; TPR(m) = #{s : CI_s(m) strictly on the online side} / #settings.

    Parameters
    ----------
    moments : Moments from :func:`offeval_core.engine.reduce` with ``policy`` and a clip grid.
    policy : the target policy whose online arm is ``treatment``.
    metrics : any of ``dcg``, ``ndcg``, ``pndcg``.
    level : confidence level of the offline CI (the paper: 99 %).
    online_alpha : online significance threshold on Welch's two-sided p (the paper: p ≪ 0.001).
    settings : ``"significant"`` (online p < online_alpha), ``"all"``, or a list of
        (experiment_id, day, reward).
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
    check_level(online_alpha)
    check_policy_in(moments, policy)
    check_choice(adjust, tuple(ADJUST_METHODS), name="adjust")
    metrics = tuple(metrics)
    if not metrics:
        raise ValueError("metrics must list at least one metric, got an empty sequence")
    for m in metrics:
        check_choice(m, ESTIMATORS, name="metrics")
    require(moments, discounts=(discount,), exposures=(exposure,))
    rewards = check_rewards(moments, rewards)
    online = _online_settings(moments, rewards)
    chosen, selection = _select_settings(online, settings, online_alpha)
    chosen["direction"] = np.where(chosen["online_effect"] < 0, -1, 1)

    rows = []
    for metric in metrics:
        part = select_clips(moments, rewards=rewards, policy=policy, metric=metric, discount=discount,
                            exposure=exposure)
        agg = aggregate(part, [*SETTING_KEYS, "clip"])
        agg = agg.merge(chosen, on=list(SETTING_KEYS), how="inner")
        for _, row in agg.iterrows():
            eff = estimate_from_row(row, metric=metric, level=level, diff=True)
            d = int(row["direction"])
            detected = eff.ci.low > 0 if d > 0 else eff.ci.high < 0
            rows.append({"experiment_id": row["experiment_id"], "day": row["day"], "reward": row["reward"],
                         "online_effect": row["online_effect"], "online_p": row["online_p"], "direction": d,
                         "metric": metric, "clip": float(row["clip"]), "effect": eff.value,
                         "stderr": eff.stderr, "ci_low": eff.ci.low, "ci_high": eff.ci.high,
                         "p_value": stats.one_sided_p(d * eff.value, eff.stderr),
                         "detected": bool(detected), "sign_agrees": bool(np.sign(eff.value) == d)})
    per = pd.DataFrame(rows, columns=["experiment_id", "day", "reward", "online_effect", "online_p", "direction",
                                      "metric", "clip", "effect", "stderr", "ci_low", "ci_high", "p_value",
                                      "detected", "sign_agrees"])
    n_clips = len(moments.grid.clips)
    family = (f"{len(chosen)} settings (experiment × day × reward) at each of {n_clips} clip value"
              f"{'s' * (n_clips != 1)} and {len(metrics)} metric{'s' * (len(metrics) != 1)}")
    size = int(per.groupby(["metric", "clip"]).size().max()) if len(per) else 0
    if adjust != "none":
        per = _adjust(per, adjust, level)
    table = _summarise(per, metrics, moments.grid.clips)
    best = _best_clips(table)
    takeaway = _takeaway(table, best, len(chosen), selection, online_alpha, level, adjust)
    return SensitivityResult(table=table, per_setting=per, settings=chosen.reset_index(drop=True), best_clip=best,
                             takeaway=takeaway, policy=policy, discount=discount, exposure=exposure, level=level,
                             online_alpha=online_alpha, selection=selection, metrics=metrics, adjust=adjust,
                             family=family, family_size=size)


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


def _summarise(per: pd.DataFrame, metrics, clips) -> pd.DataFrame:
    rows = []
    for metric in metrics:
        for m in clips:
            part = per[(per["metric"] == metric) & (per["clip"] == m)]
            n = len(part)
            rec = {"metric": metric, "clip": float(m), "tpr": _tpr(part["detected"].to_numpy()),
                   "mean_p": float(part["p_value"].mean()) if n else math.nan,
                   "sign_agreement": float(part["sign_agrees"].mean()) if n else math.nan,
                   "n_settings": n, "n_detected": int(part["detected"].sum())}
            if "detected_unadjusted" in part:
                rec["n_detected_unadjusted"] = int(part["detected_unadjusted"].sum())
            rows.append(rec)
    cols = ["metric", "clip", "tpr", "mean_p", "sign_agreement", "n_settings", "n_detected"]
    if "detected_unadjusted" in per:
        cols.append("n_detected_unadjusted")
    return pd.DataFrame(rows, columns=cols)


def _best_clips(table: pd.DataFrame) -> dict[str, float]:
    best = {}
    for metric, part in table.groupby("metric", sort=False):
        part = part[part["n_settings"] > 0]
        if part.empty:
            continue
        ordered = part.assign(neg_tpr=-part["tpr"]).sort_values(["neg_tpr", "mean_p", "clip"], kind="stable")
        best[metric] = float(ordered.iloc[0]["clip"])
    return best


def _takeaway(table, best, n, selection, alpha, level, adjust="none") -> str:
    if n == 0:
        what = f"online p < {alpha:g}" if selection == "significant" else "the chosen settings"
        return (f"No (experiment, day, reward) setting has {what}, so there is nothing to detect; "
                "use settings='all' or a larger online threshold.")
    label = {m: ESTIMATORS[m].label for m in best}
    parts = []
    for metric, m in best.items():
        t = table[(table["metric"] == metric)].set_index("clip")
        if t.loc[t["n_settings"] > 0, "tpr"].nunique() == 1:  # a flat curve has no best m to name
            parts.append(f"{label[metric]} detects {pct(t.loc[m, 'tpr'])} at every m")
            continue
        ends = [f"{pct(t.loc[c, 'tpr'])} at m = {clip_text(c)}" for c in (t.index.min(), t.index.max())
                if c != m]
        extra = f" (vs {' and '.join(ends)})" if ends else ""
        parts.append(f"{label[metric]} detects {pct(t.loc[m, 'tpr'])} at m = {clip_text(m)}{extra}")
    scope = f"the {n} settings with a significant online effect" if selection == "significant" \
        else f"{n} settings"
    how = "" if adjust == "none" else f" with {ADJUST_LABELS[adjust]} adjustment over the {n} settings at each m,"
    text = f"Of {scope}, at {level:.0%} confidence{how} " + "; ".join(parts) + "."
    if adjust != "none":
        lost = []
        for metric, m in best.items():
            row = table[(table["metric"] == metric) & (table["clip"] == m)].iloc[0]
            lost.append(f"{label[metric]} keeps {int(row['n_detected'])} of {int(row['n_detected_unadjusted'])} "
                        f"unadjusted detections at m = {clip_text(m)}")
        text += " The adjustment: " + "; ".join(lost) + "."
    verdict = paper_verdict(table)
    return text + (" " + verdict if verdict else "")


def paper_verdict(table: pd.DataFrame) -> str:
    """KDD'24 Fig. 1's three findings checked on a :class:`SensitivityResult` table, each with its counts:
    IPS weighting (m > 1) detects more than raw labels (m = 1); DCG's TPR at m = ∞ is below its best finite m;
    DCG's TPR is at least nDCG's. Each says "holds" or "does not hold on these logs".

    >>> t = pd.DataFrame({"metric": ["dcg"] * 3 + ["ndcg"] * 3, "clip": [1.0, 16.0, math.inf] * 2,
    ...                   "n_detected": [2, 9, 7, 2, 2, 2], "n_settings": [20] * 6})
    >>> print(paper_verdict(t))
    Fig. 1 findings: IPS weighting raises DCG's detections from 2 to 9 of 20 (holds); nDCG's stay at 2 of 20 (does not hold on these logs); DCG at m = ∞ detects 7, below its best finite m (9): its variance costs detections (holds); DCG detects at least as many as nDCG at 3 of 3 clip values (holds).
    """
    if table.empty or int(table["n_settings"].max()) == 0:
        return ""
    n = int(table["n_settings"].max())
    det = {m: part.set_index("clip")["n_detected"].astype(int) for m, part in table.groupby("metric")}
    out = []
    for metric in ("dcg", "ndcg"):
        d = det.get(metric)
        if d is None or 1.0 not in d.index:
            continue
        finite = d.drop(index=[c for c in d.index if c == 1.0 or math.isinf(c)])
        if finite.empty:
            continue
        name = "DCG" if metric == "dcg" else "nDCG"
        if finite.max() > d.loc[1.0]:
            out.append(f"IPS weighting raises {name}'s detections from {d.loc[1.0]} to {finite.max()} of {n} (holds)"
                       if metric == "dcg" else f"nDCG's from {d.loc[1.0]} to {finite.max()} (holds)")
        else:
            out.append(f"IPS weighting does not raise {name}'s detections ({d.loc[1.0]} at m = 1, at most "
                       f"{finite.max()} at m > 1 of {n}; does not hold on these logs)" if metric == "dcg" else
                       f"nDCG's stay at {d.loc[1.0]} of {n} (does not hold on these logs)")
    d = det.get("dcg")
    if d is not None and any(math.isinf(c) for c in d.index):
        finite = d.drop(index=[c for c in d.index if math.isinf(c)])
        inf = d.loc[math.inf]
        if not finite.empty and inf < finite.max():
            out.append(f"DCG at m = ∞ detects {inf}, below its best finite m ({finite.max()}): its variance costs "
                       f"detections (holds)")
        elif not finite.empty:
            out.append(f"DCG at m = ∞ detects {inf}, as many as its best finite m ({finite.max()}): the weights "
                       f"are not large enough here for their variance to cost detections (does not hold on "
                       f"these logs)")
    if "dcg" in det and "ndcg" in det:
        common = det["dcg"].index.intersection(det["ndcg"].index)
        ge = int((det["dcg"].loc[common] >= det["ndcg"].loc[common]).sum())
        holds = "holds" if ge > len(common) / 2 else "does not hold on these logs"
        out.append(f"DCG detects at least as many as nDCG at {ge} of {len(common)} clip values ({holds})")
    return ("Fig. 1 findings: " + "; ".join(out) + ".") if out else ""
