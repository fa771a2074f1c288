"""KDD'24 Table 2 across clip values: at which clip m does the learnt-PBM de-biased DCG of the target policy
track the online reward better than DCG with the log2 discount?

For every clip m of the moments' grid, the target policy's daily offline DCG on the control logs of each
(experiment, day) is correlated with the online mean reward of the treatment arm, pooled over all
experiment-days (:func:`~offeval_core.analyses.correlation.pooled_correlation`), for DCG (pbm, Q̂ at m) and
DCG (log2, Q̂ at m); raw labels (m = 1, "C") are the reference of both. The finding of Table 2 holds at m when
DCG (pbm, Q̂ at m) correlates more than both log2 variants at that m, DCG (log2, C) and DCG (log2, Q̂ at m), by
a difference whose paired bootstrap CI over the experiment-days lies above 0
(:mod:`~offeval_core.analyses.correlation_diff`); a positive margin inside the noise is said to be one.
Clipping trades the bias of 1/D0 for variance: where the logger buried items at tiny P(V | R), the unclipped
estimate is the least biased and the noisiest, which can hide the finding at m = ∞ while it holds at a finite m.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import pandas as pd

from offeval_core.analyses._common import Variant, check_moments, check_rewards, clip_text, variant_label
from offeval_core.analyses.correlation import METHODS, offline_online_correlation, pooled_correlation
from offeval_core.charts import correlation_clip_figure
from offeval_core.defaults import LEVEL
from offeval_core.engine import Moments
from offeval_core.errors import UnknownName
from offeval_core.estimators import require
from offeval_core.formatting import CORRELATION_SYMBOLS
from offeval_core.validation import check_choice

__all__ = ["CorrelationByClip", "correlation_by_clip", "correlation_clip_figure"]


@dataclass(frozen=True)
class CorrelationByClip:
    """Result of :func:`correlation_by_clip`.

    ``table``: one row per (clip, discount): ``clip``, ``discount`` (the learnt model or ``log2``),
    ``variant`` (Table-2 label), ``r`` (pooled over experiment-days), ``median_r`` (median over experiments
    of the per-experiment correlation across days) and ``n_points``. ``differences``: per (clip m > 1, log2
    variant) the pooled r of DCG (model, Q̂ at m) minus that variant's, with its paired-bootstrap CI at
    :data:`~offeval_core.defaults.LEVEL` (99 %) over the experiment-days (``diff``, ``low``, ``high``).
    ``holds`` lists the clips m > 1 at which both CIs lie above 0; ``best_clip`` is the m > 1 with the largest
    margin (NaN when there is none).
    """

    table: pd.DataFrame
    reward: str
    policy: str
    method: str
    model: str
    holds: tuple[float, ...]
    best_clip: float
    takeaway: str
    differences: pd.DataFrame | None = None

    def margin(self, clip: float) -> float:
        """r of DCG (model, Q̂ at m) minus the larger r of DCG (log2, C) and DCG (log2, Q̂ at m)."""
        return _margins(self.table, self.model).get(float(clip), math.nan)


def _margins(table: pd.DataFrame, model: str) -> dict[float, float]:
    """Per clip m > 1: r(model, m) − max(r(log2, C), r(log2, m)), the learnt model's lead over the better log2
    variant; NaN when any of the three r is missing (no verdict against a variant that has no r).

    >>> t = pd.DataFrame({"discount": ["log2", "pbm", "log2", "pbm", "log2"], "clip": [1.0, 4.0, 4.0, 16.0, 16.0],
    ...                   "r": [0.5, 0.8, 0.6, 0.9, float("nan")]})
    >>> {m: round(d, 2) for m, d in _margins(t, "pbm").items()}
    {4.0: 0.2, 16.0: nan}
    """
    r = table.set_index(["discount", "clip"])["r"]
    return {float(m): float(r.get((model, m), math.nan) - _better_log2(r, m))
            for m in sorted(c for c in table["clip"].unique() if c > 1)}


def _better_log2(r: pd.Series, m: float) -> float:
    """max(r(log2, C), r(log2, Q̂ at m)) of pooled r indexed by (discount, clip); NaN when either is missing."""
    raw, at_m = r.get(("log2", 1.0), math.nan), r.get(("log2", m), math.nan)
    return math.nan if math.isnan(raw) or math.isnan(at_m) else max(raw, at_m)


def _holds_surely(differences: pd.DataFrame) -> tuple[float, ...]:
    """The clips where the learnt model's r exceeds both log2 variants' by a difference whose bootstrap CI lies
    above 0 (a margin inside the noise is no win).

    >>> d = pd.DataFrame({"clip": [4.0, 4.0, 16.0, 16.0], "low": [0.01, 0.02, 0.03, -0.01]})
    >>> _holds_surely(d)
    (4.0,)
    """
    out = []
    for m, part in differences.groupby("clip", sort=True):
        if len(part) and bool((part["low"] > 0).all()):
            out.append(float(m))
    return tuple(out)


def _holds(margins: dict[float, float]) -> tuple[float, ...]:
    """The clips where the learnt model wins: a strictly positive margin (a tie is not a win, NaN is none).

    >>> _holds({4.0: 0.02, 16.0: 0.0, 64.0: -0.1, float("inf"): float("nan")})
    (4.0,)
    """
    return tuple(m for m, d in margins.items() if d > 0)


def correlation_by_clip(moments: Moments, *, reward: str, policy: str = "treatment", model: str = "pbm",
                        method: str = "pearson", clips=None, n_boot: int = 1000, rng=0) -> CorrelationByClip:
    """Pooled correlation of Rₜ's offline DCG with its online reward at every clip m, for the learnt model and
    log2 (KDD'24 Table 2's columns DCG (log2, ·) and DCG (pbm, ·), Sec. 6.1), and where the finding holds.

    ``moments`` must hold DCG with D = D0 = ``model`` and D = D0 = log2 at ``clips`` (default: every clip of
    the grid, m = 1 included).

    Examples
    --------
    Margin at m = 16: r(pbm, Q̂ m=16) − max(r(log2, C), r(log2, Q̂ m=16)) = 0.80 − max(0.70, 0.60) = 0.10.

    >>> t = pd.DataFrame({"clip": [1.0, 1.0, 16.0, 16.0], "discount": ["pbm", "log2", "pbm", "log2"],
    ...                   "r": [0.65, 0.70, 0.80, 0.60]})
    >>> round(_margins(t, "pbm")[16.0], 2)
    0.1
    """
    check_moments(moments)
    check_choice(method, METHODS, name="method")
    (reward,) = check_rewards(moments, (reward,))
    g = moments.grid
    clips = tuple(sorted({float(c) for c in (g.clips if clips is None else clips)} | {1.0}))
    require(moments, clips=clips)
    for d in (model, "log2"):
        if d not in g.discounts or d not in g.exposures:
            raise UnknownName(f"the moments hold no DCG with D = D0 = {d!r} (D ∈ {{{', '.join(g.discounts)}}}, "
                             f"D0 ∈ {{{', '.join(g.exposures)}}}); reduce them with that model")
    variants = [Variant("dcg", d, d, c) for c in clips for d in (model, "log2")]
    res = offline_online_correlation(moments, variants=variants, policies=(policy,), method=method,
                                     rewards=(reward,))
    pooled = pooled_correlation(res.daily, policy=policy, method=method).set_index("variant")
    median = res.table.groupby("variant")["r"].median()
    rows = []
    for v in variants:
        label = variant_label(v)
        rows.append({"clip": v.clip, "discount": v.discount, "variant": label,
                     "r": float(pooled.loc[label, "r"]) if label in pooled.index else math.nan,
                     "median_r": float(median.get(label, math.nan)),
                     "n_points": int(pooled.loc[label, "n_points"]) if label in pooled.index else 0})
    table = pd.DataFrame(rows)
    margins = _margins(table, model)
    from offeval_core.analyses.correlation_diff import points_difference, pooled_points

    points = pooled_points(res.daily, reward=reward, policy=policy)
    diffs = []
    for m in (c for c in clips if c > 1):
        a = variant_label(Variant("dcg", model, model, m))
        for b in dict.fromkeys((variant_label(Variant("dcg", "log2", "log2", 1.0)),
                                variant_label(Variant("dcg", "log2", "log2", m)))):
            d = points_difference(points, a, b, method=method, n_boot=n_boot, level=LEVEL, rng=rng)
            diffs.append({"clip": m, "vs": b, "r": d.r_a, "r_vs": d.r_b, "diff": d.diff, "low": d.low,
                          "high": d.high})
    differences = pd.DataFrame(diffs, columns=["clip", "vs", "r", "r_vs", "diff", "low", "high"])
    holds = _holds_surely(differences)
    finite = {m: d for m, d in margins.items() if not math.isnan(d)}
    best = max(finite, key=finite.get) if finite else math.nan
    takeaway = _takeaway(table, margins, holds, best, model=model, reward=reward, sym=CORRELATION_SYMBOLS[method],
                         differences=differences)
    return CorrelationByClip(table=table, reward=reward, policy=policy, method=method, model=model, holds=holds,
                             best_clip=best, takeaway=takeaway, differences=differences)


def _takeaway(table: pd.DataFrame, margins: dict[float, float], holds, best: float, *, model: str, reward: str,
              sym: str, differences: pd.DataFrame | None = None) -> str:
    r = table.set_index(["discount", "clip"])["r"]
    n = int(table["n_points"].max()) if len(table) else 0

    def pair(m: float) -> str:
        text = f"{sym} = {r.get((model, m), math.nan):.2f} vs {_better_log2(r, m):.2f}"
        if differences is not None and len(differences):
            part = differences[differences["clip"] == m]
            if len(part):
                worst = part.loc[part["diff"].idxmin()]
                text += (f", difference {worst['diff']:+.2f}, {round(100 * LEVEL)} % bootstrap CI "
                         f"{worst['low']:+.2f} to {worst['high']:+.2f}")
        return text

    head = (f"Pooled over {n} experiment-days of the target policy ({reward}), KDD'24 Table 2's finding — DCG "
            f"({model}, Q̂) tracks the online reward better than DCG (log2, C) and DCG (log2, Q̂) at the same clip, "
            f"by more than the bootstrap noise — ")
    if not margins or math.isnan(best):
        return head + "cannot be checked: no clip m > 1 has a pooled correlation."
    ahead = [m for m, d in margins.items() if d > 0 and m not in holds]
    noise = (f"; ahead by the point estimate but within the noise at m ∈ {{{', '.join(clip_text(m) for m in ahead)}}}"
             if ahead else "")
    if not holds:
        return head + f"holds at no clip m{noise}; closest at m = {clip_text(best)} ({pair(best)}, the better log2 " \
                      f"variant)."
    text = head + f"holds at m ∈ {{{', '.join(clip_text(m) for m in holds)}}}"
    fails = [m for m in margins if m not in holds and m not in ahead]
    if fails:
        text += f" and not at m ∈ {{{', '.join(clip_text(m) for m in fails)}}}"
    text += noise
    text += f"; largest margin at m = {clip_text(best)} ({pair(best)})"
    if math.inf in margins and best != math.inf:
        text += f"; unclipped (m = ∞): {pair(math.inf)}, " + ("it holds" if math.inf in holds else "it does not hold")
    return text + "."
