"""Exploration of demo-world candidates (issue 22): for one (overrides, seed) simulate, reduce and check every
acceptance line of analyses.world_findings, with diagnostics for the two open lines:
per-m DCG z-scores of the improvements (the drop at m = infinity) and, per Table 2 variant, the correlation of the
offline estimate with the online reward and with the exact truth (bias vs variance).

    python tools/world_sweep.py NAME SEED '{"like_base_registered": -4.6}'   # appends a JSON line to /tmp/worlds.jsonl
"""

from __future__ import annotations

import json
import sys
import time

import numpy as np
import pandas as pd

from offeval_core.analyses.correlation import offline_online_correlation
from offeval_core.analyses.correlation_diff import pooled_difference
from offeval_core.analyses.world_findings import TABLE2_VARIANTS, world_findings, world_moments
from offeval_core.estimators import aggregate, estimate_from_row, select
from offeval_core.logs import read_logs
from offeval_core.simulate import preset_config, simulate

REWARDS = ("like", "watch_complete", "watch_time")


def run(name: str, seed: int, overrides: dict) -> dict:
    t0 = time.time()
    w = simulate(preset_config("demo", **overrides), seed=seed)
    frame, truth = w.logs, w.ground_truth
    rows = len(frame)
    like_rate = float(frame["like"].mean())
    wc_rate = float(frame["watch_complete"].mean())
    lg = read_logs(frame)
    del frame, w
    t1 = time.time()
    mom = world_moments(lg, rewards=REWARDS)
    t2 = time.time()
    f = world_findings(mom, truth, rewards=REWARDS)
    # per-m z of the improvements (DCG)
    per = f.sensitivity.per_setting
    d = per[per["metric"] == "dcg"].copy()
    d["z"] = d["effect"] / d["stderr"]
    zt = d.pivot_table(index=["experiment_id", "day", "reward"], columns="clip", values="z")
    zt.to_csv(f"/tmp/z_{name}_{seed}.csv")
    zsum = {str(c): [round(float(zt[c].mean()), 2), round(float(zt[c].median()), 2),
                     int((zt[c] > 2.5758).sum()), round(float(zt[c].min()), 2)] for c in zt.columns}
    # near-threshold settings at each m: 1.8 < z < 3.5
    near = {str(c): int(((zt[c] > 1.8) & (zt[c] < 3.5)).sum()) for c in zt.columns}
    # Table 2 decomposition for like: offline vs online vs exact truth of the treatment on its own arm
    corr = offline_online_correlation(mom, policies=("treatment",), variants=TABLE2_VARIANTS, rewards=REWARDS)
    gt = truth[(truth["arm"] == "treatment") & (truth["policy"] == "treatment")][
        ["experiment_id", "day", "reward", "true_value"]].copy()
    gt["day"] = pd.to_datetime(gt["day"]).dt.date
    dd = corr.daily.copy()
    dd["day"] = pd.to_datetime(dd["day"]).dt.date
    dd = dd.merge(gt, on=["experiment_id", "day", "reward"], how="left")
    t2d = {}
    for reward in ("like",):
        x = dd[dd["reward"] == reward]
        out = {}
        for label in corr.labels:
            p = x[x["variant"] == label].dropna(subset=["online", "offline"])
            out[label] = {"r_online": round(float(np.corrcoef(p.online, p.offline)[0, 1]), 4),
                          "r_truth": round(float(np.corrcoef(p.true_value, p.offline)[0, 1]), 4),
                          "r_online_truth": round(float(np.corrcoef(p.online, p.true_value)[0, 1]), 4),
                          # residual of offline on truth (linear fit): noise share
                          "resid_sd_rel": round(float(np.std(p.offline - np.polyval(
                              np.polyfit(p.true_value, p.offline, 1), p.true_value)) / np.std(p.offline)), 4)}
        for v, label in zip(TABLE2_VARIANTS, corr.labels, strict=True):
            rows_ = select(mom, reward=reward, policy="treatment", metric=v.metric, discount=v.discount,
                           exposure=v.exposure, clip=v.clip)
            agg = aggregate(rows_, ["experiment_id", "day"])
            ests = [estimate_from_row(r_, metric=v.metric, level=0.95) for _, r_ in agg.iterrows()]
            vals = np.array([e.value for e in ests])
            se2 = np.array([e.stderr ** 2 for e in ests])
            # noise share of the across-day variance of the offline estimate; its reliability bounds r
            out[label]["noise_share"] = round(float(se2.mean() / vals.var()), 4)
            out[label]["max_se_over_mean"] = round(float(np.sqrt(se2).max() / vals.mean()), 4)
        diff = pooled_difference(corr.daily, corr.labels[0], corr.labels[2], reward=reward)
        out["pbm_minus_log2q"] = [round(diff.diff, 4), round(diff.low, 4), round(diff.high, 4), diff.level]
        t2d[reward] = out
    res = {"name": name, "seed": seed, "overrides": overrides, "rows": rows, "like_rate": round(like_rate, 4),
           "wc_rate": round(wc_rate, 4), "improvements": f.n_settings,
           "dcg": {str(k): int(v) for k, v in f.dcg.items()}, "ndcg": {str(k): int(v) for k, v in f.ndcg.items()},
           "coverage": round(f.coverage, 4), "sign": round(f.sign_agreement, 4),
           "table2": {k: [round(x, 4) for x in v] for k, v in f.table2.items()},
           "failed": f.failed(), "z": zsum, "near": near, "t2diag": t2d,
           "sim_s": round(t1 - t0, 1), "reduce_s": round(t2 - t1, 1)}
    return res


if __name__ == "__main__":
    name, seed = sys.argv[1], int(sys.argv[2])
    overrides = json.loads(sys.argv[3]) if len(sys.argv) > 3 else {}
    r = run(name, seed, overrides)
    with open("/tmp/worlds.jsonl", "a") as fh:
        fh.write(json.dumps(r) + "\n")
    print(json.dumps(r, indent=None))
