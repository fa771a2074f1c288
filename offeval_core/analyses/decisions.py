"""Offline vs online decisions per A/B test (Gilotte et al. WSDM'18, Sec. 6.3-6.4, Fig. 4/5, Table 3).

For every A/B test (experiment, all days pooled) and reward: the offline uplift is the paired effect of
the target over the logging policy on the control-arm logs (mean per-session difference), the online uplift
is treatment − control arm mean reward (Welch). Each CI gives a decision: positive (CI > 0), negative
(CI < 0) or neutral. Box colours: green = same decision, orange = false positive (offline positive, online
not), red = false negative (online positive, offline not), grey = any other disagreement.
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
from offeval_core.engine import Moments
from offeval_core.estimators import online_results, summarize_groups
from offeval_core.validation import check_level

__all__ = ["DEFAULT_ESTIMATORS", "DecisionResult", "classify", "decide", "decision_boxes", "decision_figure",
           "recommended_estimator", "summarize_boxes"]

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


def classify(offline: str, online: str) -> str:
    """Colour category of a box (Gilotte Fig. 4): ``agree`` (green), ``false positive`` (orange: offline
    positive, online not), ``false negative`` (red: online positive, offline not), ``other`` (grey).

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
    in % when ``relative``), decisions, ``category`` and ``colour``. ``summary``: per estimator n_tests,
    correlation (Pearson of offline vs online uplift), precision, fnr, ci_size (mean relative CI width over
    the reference estimator's), agreement share.
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


def decision_boxes(moments: Moments, *, estimators: Sequence = DEFAULT_ESTIMATORS, policy: str = "treatment",
                   level: float = 0.95, relative: bool = False, rewards: Sequence[str] | str | None = None,
                   reference=None) -> DecisionResult:
    """Decision boxes and Table-3 metrics of offline estimators against online A/B outcomes.

    precision = #{offline positive ∧ online positive} / #{offline positive};
    FNR = #{online positive ∧ offline not positive} / #{online positive};
    correlation = Pearson r of offline and online uplifts across tests;
    CI size = mean over tests of w_rel(est) / w_rel(reference), w_rel = CI width / |baseline| (scale-free,
    so DCG and nDCG compare). Relative uplifts divide effect and CI bounds by the baseline (offline: the
    logging policy's estimate; online: the control mean), ignoring the baseline's own uncertainty.

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
        raise ValueError("estimators must list at least one (metric, discount, exposure, clip), got none")
    for e in ests:
        check_in_grid(moments, e)
    labels = tuple(variant_label(e) for e in ests)
    if len(set(labels)) != len(labels):
        raise ValueError("estimators contains duplicates: " + ", ".join(labels))
    ref = labels[0] if reference is None else variant_label(as_variant(reference, name="reference"))
    if ref not in labels:
        raise ValueError(f"reference {ref!r} is not among the estimators ({', '.join(labels)})")
    rewards = check_rewards(moments, rewards)

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
                       "online_p": on.p_two_sided}
                rec["offline_rel_width"] = _rel(g.effect.ci.width, off_base)
                if relative:
                    for k in ("offline_effect", "offline_low", "offline_high"):
                        rec[k] = 100 * _rel(rec[k], off_base)
                    for k in ("online_effect", "online_low", "online_high"):
                        rec[k] = 100 * _rel(rec[k], on_base)
                    if off_base < 0:
                        rec["offline_low"], rec["offline_high"] = rec["offline_high"], rec["offline_low"]
                rec["offline_decision"] = decide(g.effect.ci.low, g.effect.ci.high)
                rec["online_decision"] = decide(on.effect.ci.low, on.effect.ci.high)
                rows.append(rec)
    boxes = pd.DataFrame(rows)
    if boxes.empty:
        raise ValueError("no A/B test has both arms in the moments; decision boxes need control and treatment")
    boxes["category"] = [classify(a, b) for a, b in zip(boxes["offline_decision"], boxes["online_decision"],
                                                         strict=True)]
    boxes["colour"] = boxes["category"].map(DECISION_COLOURS)
    summary = summarize_boxes(boxes, labels, reference=ref)
    takeaway = _takeaway(summary, labels)
    return DecisionResult(boxes=boxes, summary=summary, estimators=labels, reference=ref, policy=policy,
                          level=level, relative=relative, takeaway=takeaway,
                          recommended=labels[recommended_estimator(ests)])


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


def _takeaway(summary: pd.DataFrame, labels) -> str:
    s = summary.set_index("estimator")
    best = s["agreement"].idxmax()
    parts = [f"{best} takes the online decision in {pct(s.loc[best, 'agreement'])} of {int(s.loc[best, 'n_tests'])} "
             f"A/B tests (precision {pct(s.loc[best, 'precision'])}, false-negative rate {pct(s.loc[best, 'fnr'])})"]
    worst = s["agreement"].idxmin()
    if worst != best:
        parts.append(f"{worst} only in {pct(s.loc[worst, 'agreement'])} (false-negative rate "
                     f"{pct(s.loc[worst, 'fnr'])})")
    return "; ".join(parts) + "."
