"""Candidates evaluated offline before any A/B test: every candidate's offline estimate and its paired effect over
the logging policy side by side, adjusted for the number of candidates, one clip for the comparison, and which
candidate to A/B test next.

For candidate π and its estimator V̂ (DCG at clip m for a rank policy, KDD'24 Eq. 9; capped importance sampling at
cap c = m for a propensity policy, Gilotte Sec. 4.2) on the offline sessions (the control arm, or every session of
logs without arms): the estimate V̂(π), the logging policy's V̂(π₀) and the paired effect Δ̂ = mean_τ [V̂_τ(π) −
V̂_τ(π₀)] with its normal CI at ``level`` and one-sided p-value of H0: Δ ≤ 0. The candidates are tested at once, so
a candidate *beats the logging policy* when its p-value adjusted over the candidates (Holm or Benjamini-Hochberg,
:mod:`offeval_core.multiple`) is ≤ (1 − level) / 2 — without adjustment exactly "its CI lies above 0".

**The clip of the comparison** (:func:`common_clip`): each candidate's own recommendation
(:func:`~offeval_core.analyses.clip_tuning.recommend_clip`: the most clipped m that the SLOPE / Lepski rule admits
and whose worst-case bias bound stays below that candidate's offline effect) and then the least clipped of them.
Both conditions of the rule hold at every larger m (the rule admits every m above its choice, and the bias bound
falls as m grows), so at that value they hold for every candidate at once, and all candidates are compared at one m.

**Which to A/B test next**: among the candidates that beat the logging policy after adjustment, the one with the
largest offline effect; the takeaway gives its numbers, the runner-up's and whether their intervals overlap.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import pandas as pd

from offeval_core.analyses._common import (
    as_variant,
    check_in_grid,
    check_moments,
    clip_text,
    variant_label,
)
from offeval_core.defaults import LEVEL
from offeval_core.engine import Moments
from offeval_core.errors import InputError
from offeval_core.estimators import require, summarize_groups
from offeval_core.forest import candidates_figure
from offeval_core.formatting import format_p
from offeval_core.importance.weights import PROPENSITY
from offeval_core.multiple import LABELS as ADJUST_LABELS
from offeval_core.multiple import METHODS as ADJUST_METHODS
from offeval_core.multiple import adjust as adjust_p
from offeval_core.validation import check_choice, check_level

__all__ = ["CandidatesResult", "candidates_figure", "common_clip", "compare_candidates"]

COLUMNS = ("policy", "kind", "estimator", "metric", "clip", "logging", "logging_low", "logging_high", "estimate",
           "estimate_low", "estimate_high", "effect", "effect_low", "effect_high", "relative_effect", "p_value",
           "p_adj", "beats_logging", "below_logging", "n_sessions")


@dataclass(frozen=True, eq=False)
class CandidatesResult:
    """Result of :func:`compare_candidates`.

    ``table``: one row per candidate, largest offline effect first: ``policy``, ``kind`` (rank / propensity),
    ``estimator`` (its label), ``metric``, ``clip``, the logging policy's and the candidate's estimate with CI
    bounds (``logging*``, ``estimate*``), the paired ``effect`` with CI bounds, ``relative_effect`` (effect /
    logging estimate), the one-sided ``p_value`` of H0: effect ≤ 0 and ``p_adj`` adjusted over the candidates,
    ``beats_logging`` (p_adj ≤ (1 − level) / 2) and ``below_logging`` (CI entirely below 0), ``n_sessions``.
    ``next_policy`` is the candidate to A/B test next (None when no candidate beats the logging policy).
    """

    table: pd.DataFrame
    reward: str
    level: float
    adjust: str
    clip: float
    clip_reason: str
    next_policy: str | None
    takeaway: str

    @property
    def alpha(self) -> float:
        """The one-sided significance level of "beats the logging policy": the tail of the CI rule."""
        return (1 - self.level) / 2

    @property
    def adjustment(self) -> str:
        """One sentence naming the family and the correction."""
        n = len(self.table)
        if self.adjust == "none":
            return (f"Unadjusted: each of the {n} candidate{'s' * (n != 1)} is judged on its own {self.level:.1%} CI; choose Holm "
                    f"or Benjamini-Hochberg to control the errors over the candidates.").replace(".0%", " %")
        return (f"A candidate beats the logging policy when its one-sided p-value, adjusted over the {n} "
                f"candidate{'s' * (n != 1)} ({ADJUST_LABELS[self.adjust]}), is ≤ {self.alpha:g} (the tail of the "
                f"{self.level:.1%} CI).").replace(".0%", " %")


def common_clip(recommendations: Mapping[str, float]) -> tuple[float, str]:
    """The one clip of a comparison of candidates and its reason: the least clipped (largest) of the candidates'
    own recommended clips, at which every candidate's recommendation rule holds (see the module docstring).

    >>> common_clip({"ranker_v2": 64.0, "ranker_v3": 128.0})[0]
    128.0
    >>> common_clip({"a": 8.0, "b": float("inf")})[1].split(":")[0]
    'm = ∞'
    """
    if not recommendations:
        raise InputError("recommendations must name at least one candidate's recommended clip, got none")
    clip = max(float(m) for m in recommendations.values())
    each = ", ".join(f"{p} {clip_text(m)}" for p, m in recommendations.items())
    if len(recommendations) == 1:
        return clip, (f"m = {clip_text(clip)}: the recommended clip of the only candidate ({each}) — the most "
                      "clipped m that the SLOPE / Lepski rule admits and whose worst-case bias bound stays below "
                      "its offline effect.")
    return clip, (f"m = {clip_text(clip)}: the least clipped of the candidates' recommended clips ({each}; each the "
                  "most clipped m that the SLOPE / Lepski rule admits and whose worst-case bias bound stays below "
                  "that candidate's offline effect). The rule admits every larger m and the bias bounds fall as m "
                  f"grows, so at m = {clip_text(clip)} it holds for every candidate at once.")


def compare_candidates(moments: Moments, *, candidates: Sequence[tuple[str, object]], reward: str,
                       level: float = LEVEL, adjust: str = "holm", clip_reason: str = "") -> CandidatesResult:
    """Every candidate's offline estimate and paired effect over the logging policy on the offline sessions,
    p-values adjusted over the candidates, and which candidate to A/B test next (see the module docstring).

    ``candidates``: (policy, variant) pairs, the variant ``(metric, D, D0, clip)`` of that candidate's estimator
    (D = D0 = ``propensity`` for a propensity policy); ``moments`` must hold each of them.

    Examples
    --------
    Two candidates, one-sided p-values 0.001 and 0.004: Holm multiplies the smallest by 2 and the next by 1
    (then keeps the order): 0.002 and 0.004, both ≤ (1 − 0.99) / 2 = 0.005, so both beat the logging policy.

    >>> import numpy as np
    >>> adjust_p(np.array([0.001, 0.004]), method="holm", alpha=0.005).adjusted.tolist()
    [0.002, 0.004]
    """
    check_moments(moments)
    check_level(level)
    check_choice(adjust, tuple(ADJUST_METHODS), name="adjust")
    require(moments, rewards=(reward,))
    pairs = [(str(p), as_variant(v, name=f"estimator of {p!r}")) for p, v in candidates]
    if not pairs:
        raise InputError("candidates must name at least one (policy, estimator) pair, got none")
    names = [p for p, _ in pairs]
    if len(set(names)) != len(names):
        raise InputError(f"candidates lists a policy twice: {', '.join(names)}")
    rows = []
    for policy, v in pairs:
        require(moments, policies=(policy,), of=" (a candidate)")
        check_in_grid(moments, v)
        (g,) = summarize_groups(moments, reward=reward, policy=policy, metric=v.metric, discount=v.discount,
                                exposure=v.exposure, clip=v.clip, level=level)
        rows.append({"policy": policy, "kind": "propensity" if v.discount == PROPENSITY else "rank",
                     "estimator": variant_label(v), "metric": v.metric, "clip": v.clip,
                     "logging": g.logging.value, "logging_low": g.logging.ci.low, "logging_high": g.logging.ci.high,
                     "estimate": g.target.value, "estimate_low": g.target.ci.low, "estimate_high": g.target.ci.high,
                     "effect": g.effect.value, "effect_low": g.effect.ci.low, "effect_high": g.effect.ci.high,
                     "relative_effect": g.effect.value / g.logging.value if g.logging.value else math.nan,
                     "p_value": g.effect.p_value, "n_sessions": int(g.effect.n)})
    table = pd.DataFrame(rows)
    alpha = (1 - level) / 2
    res = adjust_p(table["p_value"].to_numpy(dtype=float), method=adjust, alpha=alpha)
    table["p_adj"] = res.adjusted
    table["beats_logging"] = res.rejected & (table["effect"] > 0).to_numpy()
    table["below_logging"] = table["effect_high"] < 0
    table = table.sort_values(["effect", "policy"], ascending=[False, True], kind="stable").reset_index(drop=True)
    table = table[list(COLUMNS)]
    winners = table[table["beats_logging"]]
    nxt = str(winners.iloc[0]["policy"]) if len(winners) else None
    clip = float(table["clip"].max()) if table["clip"].nunique() == 1 else math.nan
    takeaway = _takeaway(table, nxt, level=level, adjust=adjust)
    return CandidatesResult(table=table, reward=reward, level=level, adjust=adjust, clip=clip, clip_reason=clip_reason,
                            next_policy=nxt, takeaway=takeaway)


def _p_text(name: str, p: float) -> str:
    """``adjusted p = 0.012`` / ``adjusted p < 1e-6``."""
    text = format_p(p)
    return f"{name} {text}" if text.startswith("<") else f"{name} = {text}"


def _effect_text(row) -> str:
    return f"{row['effect']:+.4g} [{row['effect_low']:+.4g}, {row['effect_high']:+.4g}]"


def _overlap(a, b) -> bool:
    return a["effect_low"] <= b["effect_high"] and b["effect_low"] <= a["effect_high"]


def _takeaway(table: pd.DataFrame, nxt: str | None, *, level: float, adjust: str) -> str:
    n = len(table)
    lvl = f"{level:.1%}".replace(".0%", " %")
    how = "without adjustment" if adjust == "none" else f"after {ADJUST_LABELS[adjust].split(' (')[0]} adjustment"
    p_name = "p" if adjust == "none" else "adjusted p"
    winners = table[table["beats_logging"]]
    below = table[table["below_logging"]]
    if nxt is None:
        top = table.iloc[0]
        text = (f"No candidate beats the logging policy offline {how} ({n} candidate{'s' * (n != 1)}, {lvl} CIs): "
                f"the largest effect, {top['policy']}'s {top['estimator']} {_effect_text(top)} "
                f"({_p_text(p_name, top['p_adj'])}), is not distinguishable from 0, so these logs give no "
                "candidate to A/B test next.")
    else:
        best = winners.iloc[0]
        rel = (f", {best['relative_effect']:+.1%} of the logging policy's {best['logging']:.4g}"
               if math.isfinite(best["relative_effect"]) else "")
        text = (f"A/B test {best['policy']} next: its offline {best['estimator']} effect over the logging policy is "
                f"{_effect_text(best)} ({lvl} CI{rel}; {_p_text(p_name, best['p_adj'])}), the largest of the "
                f"{len(winners)} of {n} candidate{'s' * (n != 1)} that beat the logging policy {how}.")
        rest = table[table["policy"] != best["policy"]]
        if len(rest):
            second = rest.iloc[0]
            verdict = ("also beats the logging policy" if bool(second["beats_logging"])
                       else f"does not beat it {how}")
            text += (f" Runner-up: {second['policy']} {_effect_text(second)} ({_p_text(p_name, second['p_adj'])}), "
                     f"which {verdict}")
            if bool(second["beats_logging"]) and _overlap(best, second):
                text += "; the two intervals overlap, so these logs do not separate them"
            text += "."
    if len(below):
        names = ", ".join(below["policy"].astype(str))
        text += f" Below the logging policy (CI under 0): {names}."
    return text
