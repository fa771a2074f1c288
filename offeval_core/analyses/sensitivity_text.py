"""The words of the sensitivity analysis (KDD'24 Sec. 6.2, Fig. 1): the takeaway of a
:class:`~offeval_core.analyses.sensitivity.SensitivityResult` and the verdict on Fig. 1's findings, each
computed from the table on screen. Ties are said as ties, a flat line has no best m, and a finding that holds
only because nothing was detected says so."""

from __future__ import annotations

import math

import pandas as pd

from offeval_core.analyses._common import clip_text, pct
from offeval_core.estimators import ESTIMATORS
from offeval_core.formatting import format_p
from offeval_core.multiple import LABELS as ADJUST_LABELS

__all__ = ["SIGN_AGREEMENT_FLOOR", "clips_text", "paper_verdict", "sensitivity_takeaway"]

# KDD'24 reports 100 % sign agreement; below 95 % the offline direction disagrees too often to call it held
SIGN_AGREEMENT_FLOOR = 0.95


def clips_text(clips, *, grid=None) -> str:
    """``m = 8`` for one clip, ``m ∈ {8, 16} (tied)`` for several; three or more that are a run of consecutive
    values of ``grid`` (the clips the curve was computed at) read ``every m ≥ 4 (tied)`` when the run ends at
    the grid's last value, ∞, and ``every m from 8 to 64 (tied)`` otherwise.

    >>> clips_text((8.0,)), clips_text((8.0, math.inf))
    ('m = 8', 'm ∈ {8, ∞} (tied)')
    >>> grid = (1.0, 2.0, 4.0, 8.0, 16.0, math.inf)
    >>> clips_text((4.0, 8.0, 16.0, math.inf), grid=grid), clips_text((2.0, 4.0, 8.0), grid=grid)
    ('every m ≥ 4 (tied)', 'every m from 2 to 8 (tied)')
    """
    clips = tuple(sorted(clips))
    if len(clips) == 1:
        return f"m = {clip_text(clips[0])}"
    values = tuple(sorted(() if grid is None else grid))
    if len(clips) >= 3 and clips[0] in values:
        start = values.index(clips[0])
        if values[start:start + len(clips)] == clips:
            if start + len(clips) == len(values) and math.isinf(clips[-1]):
                return f"every m ≥ {clip_text(clips[0])} (tied)"
            return f"every m from {clip_text(clips[0])} to {clip_text(clips[-1])} (tied)"
    return "m ∈ {" + ", ".join(clip_text(c) for c in clips) + "} (tied)"


def _span(values) -> str:
    lo, hi = min(values), max(values)
    return pct(lo) if round(100 * lo) == round(100 * hi) else f"{pct(lo)[:-2]}–{pct(hi)}"


def sensitivity_takeaway(result) -> str:
    """The result in one paragraph: per metric the most detections and where (every tied m; "at every m" on a
    flat line), the ends of the curve, the sign agreement and mean p there; then the Fig. 1 verdict."""
    n = len(result.settings)
    what = "improvement" if result.side == "improvements" else "degradation"
    if n == 0:
        bound = result.effect_bound
        hint = "(the paper: 0.001) or choose other rewards" if result.side == "improvements" else \
            "or choose other rewards, or look at the online improvements (the TPR view)"
        of = f"None of the {result.n_tested} (experiment, day, reward) settings"
        why = (f"the smallest p of an online {what} is {result.closest_p:.2g}" if not math.isnan(result.closest_p)
               else f"none has an online {bound}")
        return (f"{of} has a significant online {what} (p < {result.online_alpha:g}, {bound}): {why}, so there "
                f"is nothing to detect; raise the online p threshold {hint}.")
    t, rate = result.table, result.rate_column
    parts = []
    for metric in result.metrics:
        part = t[t["metric"] == metric].set_index("clip")
        if part.empty or int(part["n_settings"].max()) == 0:
            continue
        label = ESTIMATORS[metric].label
        best = result.best_clips.get(metric, ())
        if not best:
            k = int(part["n_detected"].iloc[0])
            parts.append(f"{label} detects {k} ({pct(part[rate].iloc[0])}) at every m (a flat line: no best m; "
                         f"sign agreement {_span(part['sign_agreement'])})")
            continue
        top = part.loc[list(best)]
        k = int(top["n_detected"].iloc[0])
        ends = [f"{pct(part.loc[c, rate])} at m = {clip_text(c)}" for c in (part.index.min(), part.index.max())
                if c not in best]
        extra = f" (vs {' and '.join(ends)})" if ends else ""
        parts.append(f"{label} detects {k} ({pct(top[rate].iloc[0])}) at {clips_text(best, grid=part.index)}{extra}, sign "
                     f"agreement {_span(top['sign_agreement'])}, mean p {format_p(float(top['mean_p'].min()))}")
    how = "" if result.adjust == "none" else \
        f" with {ADJUST_LABELS[result.adjust]} adjustment over the {n} settings at each m,"
    text = f"Of the {n} setting{'s' * (n != 1)} {result.scope}, at {result.level:.0%} confidence{how} " + "; ".join(parts) + "."
    if result.adjust != "none":
        kept = []
        for metric in result.metrics:
            part = t[t["metric"] == metric].set_index("clip")
            best = result.best_clips.get(metric, ()) or (part.index.max(),)
            row = part.loc[best[0]]
            kept.append(f"{ESTIMATORS[metric].label} keeps {int(row['n_detected'])} of "
                        f"{int(row['n_detected_unadjusted'])} unadjusted detections at m = {clip_text(best[0])}")
        text += " The adjustment: " + "; ".join(kept) + "."
    if result.side != "improvements":
        return text + (" These online negatives are a separate view, not part of the TPR: KDD'24 Fig. 1 counts "
                       "online improvements only.")
    verdict = paper_verdict(t)
    return text + (" " + verdict if verdict else "")


def _ips(name: str, d: pd.Series, n: int) -> str:
    finite = d.drop(index=[c for c in d.index if c == 1.0 or math.isinf(c)])
    one, top = int(d.loc[1.0]), int(finite.max())
    at = clips_text(tuple(finite.index[finite == top]), grid=finite.index)
    if top > one:
        return f"IPS weighting raises {name}'s detections from {one} at m = 1 to {top} of {n} at {at} (holds)"
    if top == one:
        return f"IPS weighting leaves {name}'s detections at {one} of {n} (no finite m > 1 detects more; does " \
               f"not hold on these logs)"
    return f"IPS weighting lowers {name}'s detections from {one} at m = 1 to at most {top} of {n} (does not " \
           f"hold on these logs)"


def paper_verdict(table: pd.DataFrame) -> str:
    """KDD'24 Fig. 1's findings checked on an online-improvements :class:`SensitivityResult` table, each with
    its counts: IPS weighting (a finite m > 1) detects more than raw labels (m = 1), for DCG and for nDCG;
    DCG at m = ∞ detects fewer than at its best finite m; DCG's best is at least nDCG's best (only vacuously
    when nDCG detects nothing); DCG's sign agreement at its best m (the paper: 100 %; held at ≥ 95 %). Each
    says "holds" or "does not hold on these logs".

    >>> t = pd.DataFrame({"metric": ["dcg"] * 3 + ["ndcg"] * 3, "clip": [1.0, 16.0, math.inf] * 2,
    ...                   "n_detected": [2, 9, 7, 2, 2, 2], "n_settings": [20] * 6,
    ...                   "sign_agreement": [0.9, 1.0, 0.95, 0.5, 0.5, 0.5]})
    >>> print(paper_verdict(t))
    Fig. 1 findings: IPS weighting raises DCG's detections from 2 at m = 1 to 9 of 20 at m = 16 (holds); IPS weighting leaves nDCG's detections at 2 of 20 (no finite m > 1 detects more; does not hold on these logs); DCG at m = ∞ detects 7, below its best finite m (9): its variance costs detections (holds); DCG's best (9) ≥ nDCG's best (2), and DCG ≥ nDCG at 3 of 3 clip values (holds); DCG's sign agreement at its best m is 100 % (the paper: 100 %; holds).
    """
    if table.empty or int(table["n_settings"].max()) == 0:
        return ""
    n = int(table["n_settings"].max())
    det = {m: part.set_index("clip")["n_detected"].astype(int) for m, part in table.groupby("metric")}
    out = []
    for metric, name in (("dcg", "DCG"), ("ndcg", "nDCG")):
        d = det.get(metric)
        if d is None or 1.0 not in d.index or d.drop(index=[c for c in d.index if c == 1.0 or math.isinf(c)]).empty:
            continue
        out.append(_ips(name, d, n))
    d = det.get("dcg")
    if d is not None and any(math.isinf(c) for c in d.index):
        finite = d.drop(index=[c for c in d.index if math.isinf(c)])
        inf = int(d.loc[math.inf])
        if not finite.empty and inf < finite.max():
            out.append(f"DCG at m = ∞ detects {inf}, below its best finite m ({finite.max()}): its variance costs "
                       f"detections (holds)")
        elif not finite.empty:
            out.append(f"DCG at m = ∞ detects {inf}, {'as many as' if inf == finite.max() else 'more than'} its "
                       f"best finite m ({finite.max()}): the weights' variance costs no detections here (does not "
                       f"hold on these logs)")
    if "dcg" in det and "ndcg" in det:
        dbest, nbest = int(det["dcg"].max()), int(det["ndcg"].max())
        common = det["dcg"].index.intersection(det["ndcg"].index)
        ge = int((det["dcg"].loc[common] >= det["ndcg"].loc[common]).sum())
        at = f"DCG ≥ nDCG at {ge} of {len(common)} clip values"
        if nbest == 0 and dbest == 0:
            out.append("neither DCG nor nDCG detects any setting at any m, so \"DCG ≥ nDCG\" holds only vacuously")
        elif nbest == 0:
            out.append(f"DCG's best ({dbest}) ≥ nDCG's best (0) holds only vacuously: nDCG detects no setting at "
                       f"any m")
        elif dbest >= nbest:
            out.append(f"DCG's best ({dbest}) ≥ nDCG's best ({nbest}), and {at} (holds)")
        else:
            out.append(f"DCG's best ({dbest}) is below nDCG's best ({nbest}); {at} (does not hold on these logs)")
    if "dcg" in det and "sign_agreement" in table:
        t = table[table["metric"] == "dcg"].set_index("clip")
        top = int(t["n_detected"].max())
        if top > 0 and int(t["n_detected"].min()) < top:
            sa = t.loc[t["n_detected"] == top, "sign_agreement"]
            holds = "holds" if sa.min() >= SIGN_AGREEMENT_FLOOR else "does not hold on these logs"
            out.append(f"DCG's sign agreement at its best m is {_span(sa)} (the paper: 100 %; {holds})")
        else:
            out.append(f"DCG's sign agreement is {_span(t['sign_agreement'])} across m (no best m)")
    return ("Fig. 1 findings: " + "; ".join(out) + ".") if out else ""
