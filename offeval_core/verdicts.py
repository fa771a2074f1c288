"""Verdicts per estimator (trust / caution / don't) from the assumption checks and the weights: Kish ESS,
the largest weight's share and the clip sensitivity |V̂(c) − V̂(∞)| / SE at c = the 99th percentile of the
weights (docs/diagnose.md, "Verdicts")."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np

from offeval_core.defaults import LEVEL
from offeval_core.discounts import parse_discount
from offeval_core.estimators import aggregate, estimate_from_row, select
from offeval_core.importance import exposure_weights, reduce_importance
from offeval_core.logs import Logs
from offeval_core.results import json_number
from offeval_core.stats import kish_ess

__all__ = [
    "RANKING_NEEDS", "SLATE_NEEDS", "SUPPORT_MATERIAL", "EstimatorCheck", "ranking_estimators",
    "slate_estimators", "verdict", "verdict_clip", "verdict_summary",
]


ESS_DONT, ESS_CAUTION, SHARE_CAUTION, CLIP_CAUTION = 0.01, 0.10, 0.05, 1.0
SUPPORT_MATERIAL = 0.05   # a support shortfall below 5 % of the target's exposure is a caution, not a "don't"
# Cascade-DR's cross-fitting folds: the same folds for its value and its capped value (the clip sensitivity then
# measures the cap alone), and the same verdict on every run
FOLD_SEED = 0


@dataclass(frozen=True)
class EstimatorCheck:
    """Weight diagnostics and the verdict of one estimator."""

    estimator: str
    label: str
    value: float
    stderr: float
    ess: float
    ess_share: float
    max_share: float
    clip_sensitivity: float
    needs: tuple[str, ...]
    verdict: str
    reason: str

    def to_dict(self) -> dict:
        d = asdict(self)
        for k in ("value", "stderr", "ess", "ess_share", "max_share", "clip_sensitivity"):
            d[k] = json_number(d[k])
        d["needs"] = list(self.needs)
        return d


RANKING_NEEDS = ("cascade", "reward interaction", "context-dependent position bias", "support")
SLATE_NEEDS = {"iips": ("cascade", "support"), "sniips": ("cascade", "support"), "rips": ("support",),
               "snrips": ("support",), "sips": ("support",), "snsips": ("support",), "cascade-dr": ("support",)}


def _names(names) -> str:
    names = list(names)
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


def verdict_summary(by_verdict) -> str:
    """One sentence on the verdicts, naming the estimators of each one that has any (an empty verdict is not
    listed): ``{"trust": [...], "caution": [...], "don't": [...]}`` → what may be used, how.

    >>> verdict_summary({"trust": [], "caution": ["DCG / IPS", "SNIPS"], "don't": []})
    'No estimator is trusted here; use DCG / IPS and SNIPS with caution.'
    >>> verdict_summary({"trust": ["SNIPS"], "caution": [], "don't": ["IPS"]})
    'Trusted here: SNIPS; do not use IPS.'
    """
    trust, caution, dont = (list(by_verdict.get(v, ())) for v in ("trust", "caution", "don't"))
    parts = [f"Trusted here: {_names(trust)}" if trust else "No estimator is trusted here"]
    if caution:
        parts.append(f"use {_names(caution)} with caution")
    if dont:
        parts.append(f"do not use {_names(dont)}")
    return "; ".join(parts) + "."


def verdict(label: str, needs, checks: dict, ess_share: float, max_share: float, clip_sens: float,
             ess: float) -> tuple[str, str]:
    """(verdict, reason) by the rules of docs/diagnose.md: a fired needed check, then ESS, weight share, clip.

    >>> verdict("IPS", (), {}, 0.05, 0.001, 0.1, 500.0)  # ESS 5 % of the rows is below the 10 % caution line
    ('caution', 'its effective sample size is only 5.0% of the weights (500).')
    """
    caution = None
    for name in needs:
        c = checks.get(name)
        if c is None or not c.fires:
            continue
        if name == "support" and 1 - c.effect < SUPPORT_MATERIAL:
            caution = (f"the support check fires but only {1 - c.effect:.1%} of the target's exposure lacks "
                       f"support (p = {c.p_value:.2g}).")
            continue
        return "don't", (f"{label} assumes no {name} problem, and the {name} check fires "
                         f"({c.effect_label} {c.effect:.3g}, p = {c.p_value:.2g}).")
    if ess == 0:
        return "don't", "every weight is zero: no logged session informs it."
    if ess_share < ESS_DONT:
        return "don't", f"its effective sample size is {ess:.0f} ({ess_share:.2%} of the weights): a few sessions decide it."
    if ess_share < ESS_CAUTION:
        return "caution", f"its effective sample size is only {ess_share:.1%} of the weights ({ess:.0f})."
    if max_share > SHARE_CAUTION:
        return "caution", f"a single weight carries {max_share:.1%} of the total weight."
    if clip_sens > CLIP_CAUTION:
        return "caution", f"capping the top 1 % of weights moves the estimate by {clip_sens:.1f} standard errors."
    if caution:
        return "caution", caution
    return "trust", (f"no assumption it needs is rejected, ESS is {ess_share:.0%} of the weights and capping the top "
                     f"1 % of weights moves it by {clip_sens:.2f} SE.")


def verdict_clip(weights) -> float:
    """The cap c of the clip sensitivity: the 99th percentile of the weights (numpy's linear interpolation), at
    least 1, the smallest cap the estimators take (c ∈ [1, ∞], Gilotte Sec. 4.2).

    >>> verdict_clip(range(101))               # weights 0, 1, …, 100: the 99th percentile is 99
    99.0
    >>> verdict_clip([0.5, 0.25])             # a percentile below 1 caps nothing: c = 1
    1.0
    """
    return max(float(np.quantile(np.asarray(weights, dtype=float), 0.99)), 1.0)


def ranking_estimators(logs: Logs, reward: str, policy: str, checks: dict, discount: str) -> list[EstimatorCheck]:
    """DCG / IPS and SNIPS of ``policy`` with the exposure weights w = D(R(i)) / D0(r_i) (D = ``discount``,
    D0 = the learnt PBM) on the offline rows, with their verdicts.

    Values, standard errors and capped values are the importance family's
    (:func:`offeval_core.importance.reduce_importance`, one reduce): DCG / IPS is IS (= DCG at m = ∞), its
    capped value CIS at c = :func:`verdict_clip` of the weights; SNIPS and its capped value NCIS at the same c
    (on ranking logs SNIPS equals IS: docs/importance.md). ESS (Kish) and the largest share are of the
    offline rows' weights.
    """
    d = parse_discount(discount, logs=logs)
    _, w = exposure_weights(logs, policy, discount=discount, exposure="pbm")
    cap = verdict_clip(w)
    m = reduce_importance(logs, rewards=(reward,), policies=(policy,), clips=(cap,), cappings=("max",),
                          scales=("session",), weights="exposure", discount=discount, exposure="pbm", strata=None,
                          context=None)

    def target(metric: str, clip: float):
        rows = aggregate(select(m, reward=reward, policy=policy, metric=metric, discount=m.grid.discounts[0],
                                exposure=m.grid.exposures[0], clip=clip))
        return estimate_from_row(rows.iloc[0], metric=metric, level=LEVEL)

    ess = kish_ess(w)
    share, mx = ess / len(w), float(w.max() / w.sum())
    out = []
    for key, (full, capped), label in (("dcg", ("is", "cis"), f"DCG / IPS (D = {d.spec}, D0 = learnt PBM)"),
                                       ("snips", ("snips", "ncis"), "SNIPS (same weights)")):
        est = target(full, math.inf)
        v, se = est.value, est.stderr
        vc = target(capped, cap).value
        sens = abs(vc - v) / se if se > 0 else 0.0
        verdict_, reason = verdict(label.split(" (")[0], RANKING_NEEDS, checks, share, mx, sens, ess)
        out.append(EstimatorCheck(key, label, v, se, ess, share, mx, sens, RANKING_NEEDS, verdict_, reason))
    return out


def slate_estimators(logs: Logs, reward: str, policy: str, checks: dict) -> list[EstimatorCheck]:
    from offeval_core.slate import estimate, from_logs
    from offeval_core.slate.estimators import LABELS, weights_for

    data = from_logs(logs, reward=reward, policy=policy)
    out = []
    for key, needs in SLATE_NEEDS.items():
        try:
            res = estimate(data, estimator=key, rng=FOLD_SEED)
        except (ValueError, KeyError):
            continue                                            # columns this estimator needs are absent
        w = res.diagnostics
        if key == "cascade-dr":
            cum = weights_for(data, "rips")
        else:
            cum = weights_for(data, key)
        capped = estimate(data, estimator=key, clip=verdict_clip(cum), rng=FOLD_SEED)
        sens = abs(capped.target.value - res.target.value) / res.target.stderr if res.target.stderr > 0 else 0.0
        verdict_, reason = verdict(LABELS[key], needs, checks, w.ess_share, w.max_share, sens, w.ess)
        out.append(EstimatorCheck(key, LABELS[key], res.target.value, res.target.stderr, w.ess, w.ess_share,
                                  w.max_share, sens, needs, verdict_, reason))
    return out
