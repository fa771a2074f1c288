"""KDD'24's findings checked on a simulated world whose exact ground truth is known: Fig. 1 by the paper's
protocol (Sec. 6.2), Table 2 pooled over the target policy's experiment-days, and the coverage of the exact
paired effect by the 99 % CI of DCG (pbm, Q̂, m = ∞) — the acceptance lines of the demo, per seed.

- **Fig. 1**: the online improvements (two-sided p < 0.001, effect > 0) of every reward; DCG and nDCG
  detections (99 % CI strictly > 0) at every clip m; IPS weighting raises the detections from m = 1 to the best
  finite m (DCG and nDCG); DCG at m = ∞ detects fewer than at its best finite m; DCG's best ≥ nDCG's best
  (nDCG detecting something); DCG's sign agreement at its best m ≥ 95 % (the paper: 100 %).
- **Table 2**: Pearson r across the treatment policy's experiment-days between the treatment arm's online
  reward and DCG (pbm, Q̂, m = ∞), DCG (log2, C) and DCG (log2, Q̂, m = ∞): the learnt PBM's is the highest,
  for every reward.
- **Coverage**: over the Fig. 1 settings, the share whose 99 % CI of DCG (pbm, Q̂, m = ∞) covers the exact
  paired effect true_value(control sessions, target) − true_value(control sessions, production); ≥ 90 %.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from offeval_core.analyses._common import Variant, merge_moments
from offeval_core.analyses.correlation import offline_online_correlation
from offeval_core.analyses.sensitivity import SensitivityResult, sensitivity
from offeval_core.analyses.sensitivity_text import SIGN_AGREEMENT_FLOOR
from offeval_core.defaults import LEVEL

__all__ = ["COVERAGE_FLOOR", "TABLE2_VARIANTS", "WorldFindings", "exact_paired_effects", "world_findings",
           "world_moments"]

COVERAGE_FLOOR = 0.90
"""The coverage of a 99 % CI the acceptance asks for when every assumption holds (nominal 99 %; the normal CI of
an IPS mean with rare large weights covers less at a few hundred sessions per setting)."""
TABLE2_VARIANTS = (Variant("dcg", "pbm", "pbm", math.inf), Variant("dcg", "log2", "log2", 1.0),
                   Variant("dcg", "log2", "log2", math.inf))
"""DCG (pbm, Q̂) at the Correlation page's default clip m = ∞ against DCG (log2, C) and DCG (log2, Q̂)."""


def world_moments(logs, *, rewards: Sequence[str], policy: str = "treatment"):
    """The moments the findings read: every reward with D = D0 = learnt pbm on the default clip grid, and
    D = D0 = log2 at m = 1 and ∞ (Table 2's log2 columns)."""
    from offeval_core.engine import Grid, reduce

    rewards = tuple(rewards)
    main = reduce(logs, Grid(rewards=rewards, policies=(policy,)))
    log2 = reduce(logs, Grid(rewards=rewards, policies=(policy,), discounts=("log2",), exposures=("log2",),
                             clips=(1.0, math.inf)))
    return merge_moments(main, log2)


def exact_paired_effects(ground_truth: pd.DataFrame, *, policy: str = "treatment") -> pd.DataFrame:
    """Per (experiment, day, reward): the exact paired effect on the control arm's sessions,
    true_value(control, ``policy``) − true_value(control, production), as column ``truth``.

    >>> gt = pd.DataFrame({"experiment_id": "e", "day": ["2026-03-02"] * 3, "reward": "like",
    ...                    "arm": ["control", "control", "treatment"], "policy": ["treatment", "production", "treatment"],
    ...                    "true_value": [0.5, 0.4, 0.9]})
    >>> float(exact_paired_effects(gt)["truth"].iloc[0])   # 0.5 − 0.4 on the control sessions; the other arm ignored
    0.09999999999999998
    """
    g = ground_truth[ground_truth["arm"] == "control"].pivot_table(
        index=["experiment_id", "day", "reward"], columns="policy", values="true_value")
    out = (g[policy] - g["production"]).rename("truth").reset_index()
    out["day"] = pd.to_datetime(out["day"]).dt.date
    return out


@dataclass(frozen=True, eq=False)
class WorldFindings:
    """Result of :func:`world_findings`. ``dcg`` / ``ndcg``: detections per clip m (index ascending, ∞ last);
    ``coverage`` and ``mean_z`` over the ``n_settings`` improvements ((estimate − truth) / se at m = ∞);
    ``table2``: per reward the pooled r of (pbm Q̂, log2 C, log2 Q̂); ``checks``: each acceptance line → holds."""

    n_settings: int
    dcg: pd.Series
    ndcg: pd.Series
    sign_agreement: float
    coverage: float
    mean_z: float
    table2: dict[str, tuple[float, float, float]]
    sensitivity: SensitivityResult
    per_setting: pd.DataFrame
    checks: dict[str, bool] = field(default_factory=dict)

    def failed(self) -> list[str]:
        """The acceptance lines that do not hold."""
        return [k for k, ok in self.checks.items() if not ok]


def _finite(s: pd.Series) -> pd.Series:
    return s[[not math.isinf(c) for c in s.index]]


def _ips_raises(s: pd.Series) -> bool:
    rest = s[[c != 1.0 and not math.isinf(c) for c in s.index]]
    return bool(len(rest)) and int(rest.max()) > int(s.loc[1.0])


def world_findings(moments, ground_truth: pd.DataFrame, *, rewards: Sequence[str], policy: str = "treatment",
                   level: float = LEVEL) -> WorldFindings:
    """Fig. 1, Table 2 and the coverage of the exact effect on ``moments`` (:func:`world_moments`) of a simulated
    world with its ``ground_truth``; ``checks`` says which acceptance line holds (module docstring)."""
    rewards = tuple(rewards)
    res = sensitivity(moments, policy=policy, rewards=rewards, level=level)
    det = res.table.pivot_table(index="clip", columns="metric", values="n_detected").sort_index()
    dcg, ndcg = det["dcg"].astype(int), det["ndcg"].astype(int)
    t = res.table[res.table["metric"] == "dcg"].set_index("clip")
    best = list(res.best_clips.get("dcg", ()))
    sign = float(t.loc[best, "sign_agreement"].min()) if best else math.nan

    per = res.per_setting
    p = per[(per["metric"] == "dcg") & (per["clip"] == math.inf)].copy()
    p["day"] = pd.to_datetime(p["day"]).dt.date
    p = p.merge(exact_paired_effects(ground_truth, policy=policy), on=["experiment_id", "day", "reward"],
                how="left", validate="one_to_one")
    p["z"] = (p["effect"] - p["truth"]) / p["stderr"]
    p["covers"] = (p["ci_low"] <= p["truth"]) & (p["truth"] <= p["ci_high"])
    coverage = float(p["covers"].mean()) if len(p) else math.nan

    corr = offline_online_correlation(moments, policies=(policy,), variants=TABLE2_VARIANTS, rewards=rewards)
    table2 = {}
    for reward in rewards:
        d = corr.daily[corr.daily["reward"] == reward]
        rs = []
        for label in corr.labels:
            part = d[d["variant"] == label].dropna(subset=["online", "offline"])
            rs.append(float(np.corrcoef(part["online"], part["offline"])[0, 1]) if len(part) > 2 else math.nan)
        table2[reward] = tuple(rs)

    checks = {
        "improvements ≥ 20": len(res.settings) >= 20,
        "DCG TPR rises from m = 1": _ips_raises(dcg),
        "nDCG TPR rises from m = 1": _ips_raises(ndcg),
        "DCG at m = ∞ below its best finite m": bool(int(dcg.loc[math.inf]) < int(_finite(dcg).max())),
        "DCG's best ≥ nDCG's best > 0": bool(int(dcg.max()) >= int(ndcg.max()) > 0),
        "DCG sign agreement ≥ 95 % at its best m": bool(sign >= SIGN_AGREEMENT_FLOOR),
        "Table 2: pbm Q̂ above both log2 variants": all(a > b and a > c for a, b, c in table2.values()),
        "coverage ≥ 90 %": bool(coverage >= COVERAGE_FLOOR),
    }
    return WorldFindings(n_settings=len(res.settings), dcg=dcg, ndcg=ndcg, sign_agreement=sign, coverage=coverage,
                         mean_z=float(p["z"].mean()) if len(p) else math.nan, table2=table2, sensitivity=res,
                         per_setting=p, checks=checks)
