"""Offline vs online decisions per A/B test (Gilotte et al. WSDM'18, Sec. 6.3-6.4, Fig. 4/5, Table 3).

For every A/B test (experiment, all days pooled) and reward: the offline uplift is the paired effect of
the target over the logging policy on the control-arm logs (mean per-session difference), the online uplift
is treatment − control arm mean reward (Welch). Each CI gives a decision: positive (CI > 0), negative
(CI < 0) or neutral. Box colours: green = same decision, orange = false positive (offline positive, online
not), purple = false negative (online positive, offline not), grey = any other disagreement.

Many A/B tests are decided at once, so the decisions can also be taken on multiplicity-adjusted p-values
(``adjust="holm"``: family-wise error, ``"bh"``: false discovery rate; :mod:`offeval_core.multiple`). Each
estimator's family is its boxes (A/B tests × policy × reward); the online decisions get the same correction
over the online A/B tests, so both sides of a box are decided at the same error rate.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from offeval_core import stats
from offeval_core.analyses._common import (
    Variant,
    as_variant,
    check_in_grid,
    check_moments,
    check_policy_in,
    check_rewards,
    pct,
    variant_label,
)
from offeval_core.charts import DECISION_COLOURS, decision_figure
from offeval_core.defaults import LEVEL
from offeval_core.display import NA_REASONS
from offeval_core.engine import Moments
from offeval_core.errors import InputError, NeedsArms, UnknownName
from offeval_core.estimators import online_results, summarize_groups
from offeval_core.formatting import not_available
from offeval_core.multiple import LABELS as ADJUST_LABELS
from offeval_core.multiple import METHODS as ADJUST_METHODS
from offeval_core.multiple import adjust as adjust_p
from offeval_core.validation import check_choice, check_level

__all__ = ["DEFAULT_ESTIMATORS", "DecisionResult", "classify", "decide", "decide_adjusted", "decision_boxes",
           "decision_figure", "recommended_estimator", "summarize_boxes"]

DEFAULT_ESTIMATORS: tuple[Variant, ...] = (
    Variant("dcg", "pbm", "pbm", 1.0), Variant("dcg", "pbm", "pbm", math.inf), Variant("ndcg", "pbm", "pbm", math.inf),
)
CATEGORIES = ("agree", "false positive", "false negative", "other")


def decide(low: float, high: float) -> str:
    """Decision from a CI: ``positive`` if low > 0, ``negative`` if high < 0, else ``neutral``.

    >>> decide(0.1, 0.3), decide(-0.2, 0.1), decide(-0.3, -0.01)
    ('positive', 'neutral', 'negative')
    """
    if low > 0:
        return "positive"
    if high < 0:
        return "negative"
    return "neutral"


def decide_adjusted(effect: float, p_adjusted: float, alpha: float) -> str:
    """Decision from a two-sided (adjusted) p-value: the effect's sign when p ≤ α, else ``neutral``. Without
    adjustment it is :func:`decide` on the normal CI at level 1 − α (the CI excludes 0 iff p < α).

    >>> decide_adjusted(0.2, 0.03, 0.05), decide_adjusted(-0.2, 0.03, 0.05), decide_adjusted(0.2, 0.06, 0.05)
    ('positive', 'negative', 'neutral')
    """
    if not p_adjusted <= alpha or effect == 0:
        return "neutral"
    return "positive" if effect > 0 else "negative"


def classify(offline: str, online: str) -> str:
    """Colour category of a box (Gilotte Fig. 4): ``agree`` (green), ``false positive`` (orange: offline
    positive, online not), ``false negative`` (purple: online positive, offline not), ``other`` (grey).

    >>> classify("positive", "neutral"), classify("neutral", "positive"), classify("negative", "neutral")
    ('false positive', 'false negative', 'other')
    """
    if offline == online:
        return "agree"
    if offline == "positive":
        return "false positive"
    if online == "positive":
        return "false negative"
    return "other"


@dataclass(frozen=True, eq=False)
class DecisionResult:
    """Result of :func:`decision_boxes`.

    ``boxes``: one row per (A/B test, reward, estimator) with offline / online uplift, CI bounds (relative
    in % when ``relative``), decisions, ``category`` and ``colour``, and the levels beside them: the target's
    offline estimate ``offline_target`` and the treatment arm's online mean ``online_treatment`` with their CI
    bounds (``_low`` / ``_high``, always absolute). ``summary``: per estimator n_tests,
    correlation (Pearson of offline vs online uplift), precision, fnr, ci_size (mean relative CI width over
    the reference estimator's), agreement share. ``boxes`` also holds the two-sided p-values ``offline_p``,
    ``online_p`` and their adjusted versions ``offline_p_adj``, ``online_p_adj``; ``family`` names the family
    of each estimator's adjustment ("3 A/B tests × 1 policy") and ``family_size`` its size m.
    """

    boxes: pd.DataFrame
    summary: pd.DataFrame
    estimators: tuple[str, ...]
    reference: str
    policy: str
    level: float
    relative: bool
    takeaway: str
    recommended: str = ""
    adjust: str = "none"
    family: str = ""
    family_size: int = 0

    def estimator_takeaway(self, estimator: str) -> str:
        """The headline of one estimator's boxes, naming the target policy: how many A/B tests it decides as the
        online test does, with its precision and false-negative rate (Gilotte Table 3).

        >>> b = pd.DataFrame({"estimator": ["E"] * 2, "category": ["agree", "false negative"],
        ...                   "offline_decision": ["positive", "neutral"], "online_decision": ["positive"] * 2})
        >>> s = summarize_boxes(b.assign(experiment_id=["a", "b"], reward="r", offline_effect=[1.0, 0.1],
        ...                     online_effect=[1.0, 2.0], offline_rel_width=1.0), ["E"], reference="E")
        >>> DecisionResult(b, s, ("E",), "E", "ranker_v2", 0.99, False, "").estimator_takeaway("E")
        'ranker_v2 vs the logging policy, E: the offline decision is the online one in 1 of 2 A/B tests (50 %; precision 100 %, false-negative rate 50 %).'
        """
        row = self.summary.set_index("estimator").loc[estimator]
        n = int(row["n_tests"])
        agree = int((self.boxes[self.boxes["estimator"] == estimator]["category"] == "agree").sum())
        return (f"{self.policy} vs the logging policy, {estimator}: the offline decision is the online one in "
                f"{agree} of {n} A/B test{'s' * (n != 1)} ({pct(row['agreement'])}; precision "
                f"{rate(row, 'precision')}, false-negative rate {rate(row, 'fnr')}).")

    @property
    def adjustment(self) -> str:
        """One sentence naming the multiple-testing family and the correction of the decisions."""
        alpha = 1 - self.level
        if self.adjust == "none":
            return (f"Unadjusted: each of the {self.family_size} boxes per estimator ({self.family}) is decided "
                    f"on its own {self.level:.1%} CI; choose Holm or Benjamini-Hochberg to control the errors "
                    f"over the family.").replace(".0%", " %")
        return (f"Decisions on adjusted p-values, {ADJUST_LABELS[self.adjust]} at α = {alpha:g}; family: "
                f"{self.family} per estimator (m = {self.family_size}); the online decisions are adjusted "
                f"over the same A/B tests.")


def decision_boxes(moments: Moments, *, estimators: Sequence = DEFAULT_ESTIMATORS, policy: str = "treatment",
                   level: float = LEVEL, relative: bool = False, rewards: Sequence[str] | str | None = None,
                   reference=None, adjust: str = "none") -> DecisionResult:
    """Decision boxes and Table-3 metrics of offline estimators against online A/B outcomes.

    precision = #{offline positive ∧ online positive} / #{offline positive};
    FNR = #{online positive ∧ offline not positive} / #{online positive};
    correlation = Pearson r of offline and online uplifts across tests;
    CI size = mean over tests of w_rel(est) / w_rel(reference), w_rel = CI width / |baseline| (scale-free,
    so DCG and nDCG compare). Relative uplifts divide effect and CI bounds by |baseline| (offline: the
    logging policy's estimate; online: the control mean), ignoring the baseline's own uncertainty.

    ``adjust`` = ``"none"`` (decision = CI excludes 0), ``"holm"`` or ``"bh"``: the decisions are taken on
    adjusted two-sided p-values at α = 1 − level (:func:`decide_adjusted`), offline over each estimator's
    boxes, online over the A/B tests (:func:`offeval_core.multiple.adjust`).

    Examples
    --------
    >>> _precision_fnr(["positive", "positive", "neutral"], ["positive", "neutral", "positive"])
    (0.5, 0.5)
    """
    check_moments(moments)
    check_level(level)
    check_policy_in(moments, policy)
    ests = tuple(as_variant(e, name="estimators entry") for e in estimators)
    if not ests:
        raise InputError("estimators must list at least one (metric, discount, exposure, clip), got none")
    for e in ests:
        check_in_grid(moments, e)
    labels = tuple(variant_label(e) for e in ests)
    if len(set(labels)) != len(labels):
        raise InputError("estimators contains duplicates: " + ", ".join(labels))
    ref = labels[0] if reference is None else variant_label(as_variant(reference, name="reference"))
    if ref not in labels:
        raise UnknownName(f"reference {ref!r} is not among the estimators ({', '.join(labels)})")
    rewards = check_rewards(moments, rewards)
    check_choice(adjust, tuple(ADJUST_METHODS), name="adjust")

    rows = []
    for reward in rewards:
        online = online_results(moments, reward=reward, by=("experiment_id",), level=level)
        for e, label in zip(ests, labels, strict=True):
            groups = summarize_groups(moments, reward=reward, policy=policy, metric=e.metric,
                                      discount=e.discount, exposure=e.exposure, clip=e.clip,
                                      by=("experiment_id",), level=level)
            for g in groups:
                on = online.get((g.keys["experiment_id"],))
                if on is None or on.effect is None:
                    continue
                off_base, on_base = g.logging.value, on.control.value
                rec = {"experiment_id": g.keys["experiment_id"], "reward": reward, "estimator": label,
                       "offline_effect": g.effect.value, "offline_low": g.effect.ci.low,
                       "offline_high": g.effect.ci.high, "offline_baseline": off_base,
                       "online_effect": on.effect.value, "online_low": on.effect.ci.low,
                       "online_high": on.effect.ci.high, "online_baseline": on_base,
                       "online_p": on.p_two_sided,
                       # the levels beside the uplifts (absolute units even with ``relative``): the target's
                       # offline estimate and the treatment arm's online mean, each with its CI
                       "offline_target": g.target.value, "offline_target_low": g.target.ci.low,
                       "offline_target_high": g.target.ci.high, "online_treatment": on.treatment.value,
                       "online_treatment_low": on.treatment.ci.low, "online_treatment_high": on.treatment.ci.high,
                       "offline_p": stats.two_sided_p(g.effect.value, g.effect.stderr),
                       "offline_sign": float(np.sign(g.effect.value)), "online_sign": float(np.sign(on.effect.value))}
                rec["offline_rel_width"] = _rel(g.effect.ci.width, off_base)
                if relative:
                    for k in ("offline_effect", "offline_low", "offline_high"):
                        rec[k] = 100 * _rel(rec[k], off_base)
                    for k in ("online_effect", "online_low", "online_high"):
                        rec[k] = 100 * _rel(rec[k], on_base)
                rec["offline_decision"] = decide(g.effect.ci.low, g.effect.ci.high)
                rec["online_decision"] = decide(on.effect.ci.low, on.effect.ci.high)
                rows.append(rec)
    boxes = pd.DataFrame(rows)
    if boxes.empty:
        raise NeedsArms("no A/B test has both arms in the moments; decision boxes need control and treatment")
    family, size = _family(boxes)
    raw = _adjust_boxes(boxes, "none", level)
    boxes = _adjust_boxes(boxes, adjust, level) if adjust != "none" else raw
    boxes["category"] = [classify(a, b) for a, b in zip(boxes["offline_decision"], boxes["online_decision"],
                                                         strict=True)]
    boxes["colour"] = boxes["category"].map(DECISION_COLOURS)
    summary = summarize_boxes(boxes, labels, reference=ref)
    takeaway = _takeaway(summary, labels)
    if adjust != "none":
        takeaway += " " + _adjusted_sentence(raw, boxes, labels, adjust, family, size, level)
    return DecisionResult(boxes=boxes, summary=summary, estimators=labels, reference=ref, policy=policy,
                          level=level, relative=relative, takeaway=takeaway,
                          recommended=labels[recommended_estimator(ests)], adjust=adjust, family=family,
                          family_size=size)


def _family(boxes: pd.DataFrame) -> tuple[str, int]:
    """The family of each estimator's adjustment in words and its size m (the most boxes of an estimator)."""
    n_tests = boxes["experiment_id"].nunique()
    n_rewards = boxes["reward"].nunique()
    text = f"{n_tests} A/B test{'s' * (n_tests != 1)} × 1 policy"
    if n_rewards > 1:
        text += f" × {n_rewards} rewards"
    return text, int(boxes.groupby("estimator").size().max())


def _adjust_boxes(boxes: pd.DataFrame, method: str, level: float) -> pd.DataFrame:
    """Adjusted p-values and decisions: offline per estimator, online over the distinct (A/B test, reward).
    Without adjustment the p-values stay and the decisions stay the CIs' (:func:`decide`)."""
    out = boxes.copy()
    alpha = 1 - level
    out["offline_p_adj"] = np.nan
    for _, idx in out.groupby("estimator", sort=False).groups.items():
        out.loc[idx, "offline_p_adj"] = adjust_p(out.loc[idx, "offline_p"].to_numpy(), method=method,
                                                 alpha=alpha).adjusted
    online = out.drop_duplicates(["experiment_id", "reward"])[["experiment_id", "reward", "online_p"]].copy()
    online["online_p_adj"] = adjust_p(online["online_p"].to_numpy(), method=method, alpha=alpha).adjusted
    out = out.merge(online.drop(columns="online_p"), on=["experiment_id", "reward"], how="left")
    if method != "none":
        out["offline_decision"] = [decide_adjusted(e, p, alpha) for e, p in
                                   zip(out["offline_sign"], out["offline_p_adj"], strict=True)]
        out["online_decision"] = [decide_adjusted(e, p, alpha) for e, p in
                                  zip(out["online_sign"], out["online_p_adj"], strict=True)]
    return out.drop(columns=["offline_sign", "online_sign"])


def _adjusted_sentence(raw: pd.DataFrame, adj: pd.DataFrame, labels, method: str, family: str, size: int,
                       level: float) -> str:
    """How many offline and online decisions survive the adjustment, per estimator."""
    def n_sig(df, col):
        return int((df[col] != "neutral").sum())

    parts = []
    for label in labels:
        r, a = raw[raw["estimator"] == label], adj[adj["estimator"] == label]
        parts.append(f"{label} keeps {n_sig(a, 'offline_decision')} of {n_sig(r, 'offline_decision')} offline "
                     f"decisions")
    on_r = raw.drop_duplicates(["experiment_id", "reward"])
    on_a = adj.drop_duplicates(["experiment_id", "reward"])
    return (f"With {ADJUST_LABELS[method]} adjustment over {family} (m = {size}, α = {1 - level:g}): "
            + "; ".join(parts) + f"; online {n_sig(on_a, 'online_decision')} of {n_sig(on_r, 'online_decision')} "
            "A/B tests stay significant.")


# What the papers recommend, most preferred first: Gilotte et al. (WSDM'18, Sec. 6, Fig. 3) find the more local
# normalisation the better (PointNCIS > PieceNCIS > NCIS > CIS); Jeunen et al. (KDD'24, Sec. 6.2) recommend
# de-biased DCG with a tuned finite clip over raw labels (m = 1) and over m = ∞.
_PREFERENCE = ("point-ncis", "piece-ncis", "ncis")


def recommended_estimator(estimators) -> int:
    """Index of the estimator the papers recommend among ``estimators`` (the one a page should open on):
    PointNCIS, else PieceNCIS, else NCIS (Gilotte Sec. 6), else DCG at the largest finite clip m > 1, else
    DCG at m = ∞ (KDD'24 Sec. 6.2), else the first.

    >>> recommended_estimator([Variant("dcg", "pbm", "pbm", 1.0), Variant("dcg", "pbm", "pbm", 64.0),
    ...                        Variant("dcg", "pbm", "pbm", math.inf), Variant("ndcg", "pbm", "pbm", math.inf)])
    1
    """
    ests = [as_variant(e, name="estimators entry") for e in estimators]
    for name in _PREFERENCE:
        for i, e in enumerate(ests):
            if e.metric == name:
                return i
    finite = [(e.clip, i) for i, e in enumerate(ests) if e.metric == "dcg" and 1 < e.clip < math.inf]
    if finite:
        return max(finite)[1]
    for i, e in enumerate(ests):
        if e.metric == "dcg" and math.isinf(e.clip):
            return i
    return 0


def _rel(x: float, base: float) -> float:
    return x / abs(base) if base != 0 and math.isfinite(base) else math.nan


def _precision_fnr(offline: Sequence[str], online: Sequence[str]) -> tuple[float, float]:
    off = np.asarray(offline) == "positive"
    on = np.asarray(online) == "positive"
    precision = float((off & on).sum() / off.sum()) if off.sum() else math.nan
    fnr = float((on & ~off).sum() / on.sum()) if on.sum() else math.nan
    return precision, fnr


def summarize_boxes(boxes: pd.DataFrame, labels: Sequence[str], *, reference: str) -> pd.DataFrame:
    """Table-3 columns per estimator from a ``boxes`` frame (see :func:`decision_boxes` for the formulas)."""
    ref = reference
    keys = ["experiment_id", "reward"]
    ref_w = boxes[boxes["estimator"] == ref].set_index(keys)["offline_rel_width"]
    rows = []
    for label in labels:
        b = boxes[boxes["estimator"] == label]
        r, p = stats.pearson(b["offline_effect"].to_numpy(), b["online_effect"].to_numpy())
        precision, fnr = _precision_fnr(b["offline_decision"], b["online_decision"])
        ratio = b.set_index(keys)["offline_rel_width"] / ref_w
        ratio = ratio.replace([np.inf, -np.inf], np.nan)
        rows.append({"estimator": label, "n_tests": len(b), "correlation": r, "correlation_p": p,
                     "precision": precision, "fnr": fnr,
                     "ci_size": float(ratio.mean()) if ratio.notna().any() else math.nan,
                     "agreement": float((b["category"] == "agree").mean()),
                     "n_false_positive": int((b["category"] == "false positive").sum()),
                     "n_false_negative": int((b["category"] == "false negative").sum())})
    return pd.DataFrame(rows)


def rate(row, column: str) -> str:
    """A Table-3 rate of a summary row as a headline prints it: a percentage, or ``n/a — why`` when it is
    undefined (precision without an offline ship decision, FNR without an online one; the reasons are
    :data:`offeval_core.display.NA_REASONS`, the tables' own).

    >>> rate({"precision": 0.5}, "precision"), rate({"precision": float("nan")}, "precision")
    ('50 %', 'n/a — no offline ship decision')
    """
    x = row[column]
    return pct(x) if x is not None and math.isfinite(x) else not_available(NA_REASONS[column])


def _takeaway(summary: pd.DataFrame, labels) -> str:
    s = summary.set_index("estimator")
    best = s["agreement"].idxmax()
    parts = [f"{best} takes the online decision in {pct(s.loc[best, 'agreement'])} of {int(s.loc[best, 'n_tests'])} "
             f"A/B tests (precision {rate(s.loc[best], 'precision')}, false-negative rate "
             f"{rate(s.loc[best], 'fnr')})"]
    worst = s["agreement"].idxmin()
    if worst != best:
        parts.append(f"{worst} only in {pct(s.loc[worst, 'agreement'])} (false-negative rate "
                     f"{rate(s.loc[worst], 'fnr')})")
    return "; ".join(parts) + "."
