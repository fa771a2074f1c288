"""Coverage of the 95 % CIs against the simulator's exact truth (docs/coverage.md).

One simulated world with 20 experiments × 10 days of the same ``positive`` target: every (experiment, day)
cell is an independent replication (its own sessions; the same items, users and viewing curve), 200 in all.
The viewing curve is exponential (p = 0.9) and the estimators use it as D = D0 (``exponential:0.9``), so the
position-bias model is exact and DCG at m = ∞ is unbiased (KDD'24 Eq. 9). Truths per cell: the exact expected
reward of the target and of the logging policy on the cell's sessions (``ground_truth.parquet``); for nDCG,
whose expectation has no closed form here, a Monte-Carlo value from 100 000 sessions of the same world.

Run ``python tests/coverage_study.py`` to print the table of docs/coverage.md.
"""

from __future__ import annotations

import functools
import math

import pandas as pd

from offeval_core.engine import Grid, reduce
from offeval_core.estimators import aggregate, estimate_from_row, select
from offeval_core.importance import reduce_importance
from offeval_core.logs import read_logs
from offeval_core.simulate import preset_config, simulate

REWARD = "watch_complete"
D = "exponential:0.9"
CAP = 10.0
N_EXP, N_DAYS = 20, 10
LEVEL = 0.95
SEED = 7


def config(**kw):
    return preset_config("small", n_experiments=kw.pop("n_experiments", N_EXP),
                         effects=("positive",) * kw.pop("n_exp_effects", N_EXP), n_days=kw.pop("n_days", N_DAYS),
                         sessions_per_arm_day=kw.pop("sessions", 400), survival="exponential", survival_p=0.9,
                         share_drift=0.0, engagement_drift=0.0, traffic_drift=0.0, watch_time=False, **kw)


def _cells(moments, *, metric, clip, effect: bool, policy="treatment"):
    rows = aggregate(select(moments, reward=REWARD, policy=policy, metric=metric, discount=D, exposure=D,
                            clip=clip), ["experiment_id", "day"])
    out = []
    for _, row in rows.iterrows():
        est = estimate_from_row(row, metric=metric, level=LEVEL, diff=effect)
        out.append({"experiment_id": str(row["experiment_id"]), "day": pd.Timestamp(row["day"]).date(),
                    "value": est.value, "low": est.ci.low, "high": est.ci.high})
    return pd.DataFrame(out)


@functools.cache
def ndcg_truth() -> tuple[float, float]:
    """Population paired nDCG effect (m = ∞) of the target over the logging policy in the study's world, and
    its Monte-Carlo standard error, from 100 000 control sessions (items and users do not depend on n_days)."""
    big = simulate(config(n_experiments=1, n_exp_effects=1, n_days=1, sessions=100_000), seed=SEED)
    logs = read_logs(big.logs[big.logs["arm"] == "control"].reset_index(drop=True))
    m = reduce(logs, Grid(rewards=(REWARD,), policies=("treatment",), discounts=(D,), exposures=(D,),
                          clips=(math.inf,)))
    row = aggregate(select(m, reward=REWARD, policy="treatment", metric="ndcg", discount=D, exposure=D,
                           clip=math.inf))
    est = estimate_from_row(row.iloc[0], metric="ndcg", level=LEVEL, diff=True)
    return est.value, est.stderr


@functools.cache
def study() -> pd.DataFrame:
    """One row per (estimator, cell): estimate, CI and truth."""
    world = simulate(config(), seed=SEED)
    logs = read_logs(world.logs)
    dcg = reduce(logs, Grid(rewards=(REWARD,), policies=("treatment",), discounts=(D,), exposures=(D,),
                            clips=(math.inf,)))
    imp = reduce_importance(logs, rewards=(REWARD,), policies=("treatment",), clips=(math.inf, CAP),
                            cappings=("max",), scales=("session",), discount=D, exposure=D)
    gt = world.ground_truth
    gt = gt[(gt["arm"] == "control") & (gt["reward"] == REWARD)]
    truth = gt.pivot_table(index=["experiment_id", "day"], columns="policy", values="true_value")
    truth_target, truth_effect = truth["treatment"], truth["treatment"] - truth["production"]
    nd, _ = ndcg_truth()
    parts = []
    specs = [("DCG value (m = ∞)", dcg, "dcg", math.inf, False, "target"),
             ("DCG effect (m = ∞)", dcg, "dcg", math.inf, True, "effect"),
             ("nDCG effect (m = ∞)", dcg, "ndcg", math.inf, True, "ndcg"),
             ("IS", imp, "is", math.inf, False, "target"),
             ("SNIPS", imp, "snips", math.inf, False, "target"),
             (f"CIS (c = {CAP:g})", imp, "cis", CAP, False, "target"),
             (f"NCIS (c = {CAP:g})", imp, "ncis", CAP, False, "target"),
             (f"PieceNCIS (c = {CAP:g})", imp, "piece-ncis", CAP, False, "target"),
             (f"PointNCIS (c = {CAP:g})", imp, "point-ncis", CAP, False, "target")]
    for label, mom, metric, clip, effect, kind in specs:
        c = _cells(mom, metric=metric, clip=clip, effect=effect)
        key = list(zip(c["experiment_id"], c["day"], strict=True))
        if kind == "target":
            c["truth"] = truth_target.loc[key].to_numpy()
        elif kind == "effect":
            c["truth"] = truth_effect.loc[key].to_numpy()
        else:
            c["truth"] = nd
        parts.append(c.assign(estimator=label))
    return pd.concat(parts, ignore_index=True)


def summary(df: pd.DataFrame | None = None) -> pd.DataFrame:
    """Per estimator: replications, coverage with its Monte-Carlo standard error, mean bias (estimate − truth),
    the bias relative to the mean CI half-width, and the mean CI half-width."""
    df = study() if df is None else df
    rows = []
    for label, part in df.groupby("estimator", sort=False):
        n = len(part)
        covered = ((part["low"] <= part["truth"]) & (part["truth"] <= part["high"])).mean()
        err = part["value"] - part["truth"]
        half = ((part["high"] - part["low"]) / 2).mean()
        rows.append({"estimator": label, "n": n, "coverage": covered,
                     "mc_se": math.sqrt(LEVEL * (1 - LEVEL) / n), "mean_bias": err.mean(),
                     "bias_se": err.std(ddof=1) / math.sqrt(n), "bias_over_halfwidth": err.mean() / half,
                     "mean_halfwidth": half})
    return pd.DataFrame(rows)


if __name__ == "__main__":
    s = summary()
    nd, nd_se = ndcg_truth()
    print(f"nDCG truth {nd:.5f} (MC se {nd_se:.5f})")
    print(s.to_markdown(index=False, floatfmt=".4f"))
