"""KDD'24 findings reproduced on the default simulated world (assumptions hold), pooled over two seeds."""

import functools
import math

import numpy as np
import pytest

from offeval_core.analyses import dcg_vs_ndcg, merge_moments, offline_online_correlation, sensitivity
from offeval_core.engine import Grid, reduce
from offeval_core.logs import read_logs
from offeval_core.simulate import preset_config, simulate

SEEDS = (1, 2)
REWARDS = ("like", "watch_complete")


@functools.cache
def _world(seed):
    logs = read_logs(simulate(preset_config("demo"), seed=seed).logs)
    main = reduce(logs, Grid(rewards=REWARDS, policies=("treatment",)))
    extra = reduce(logs, Grid(rewards=REWARDS, policies=("treatment",), discounts=("log2",), exposures=("log2",),
                              clips=(1.0, math.inf)))
    return logs, merge_moments(main, extra)


def _pooled_tpr():
    tables = [sensitivity(_world(s)[1]).table for s in SEEDS]
    pooled = tables[0][["metric", "clip"]].copy()
    pooled["detected"] = sum(t["n_detected"].to_numpy() for t in tables)
    pooled["n"] = sum(t["n_settings"].to_numpy() for t in tables)
    assert pooled["n"].iloc[0] >= 30                      # enough significant online effects to count
    pooled["tpr"] = pooled["detected"] / pooled["n"]
    dcg = pooled[pooled["metric"] == "dcg"].set_index("clip")["tpr"]
    ndcg = pooled[pooled["metric"] == "ndcg"].set_index("clip")["tpr"]
    return dcg, ndcg, int(pooled["n"].iloc[0])


@pytest.mark.slow
def test_dcg_sensitivity_rises_above_raw_labels_and_beats_ndcg():
    dcg, ndcg, n = _pooled_tpr()
    finite = dcg.drop(index=[1.0, math.inf])
    assert (finite.max() - dcg.loc[1.0]) * n >= 3        # a margin of ≥ 3 settings over m = 1
    assert finite.max() >= dcg.loc[math.inf]
    assert 4 <= finite.idxmax() <= 512
    for m in (8.0, 16.0, 32.0, 64.0):                     # DCG ≥ nDCG over a range of m
        assert dcg.loc[m] >= ndcg.loc[m]


@pytest.mark.slow
def test_dcg_pbm_correlates_with_online_explicit_reward_for_r0_and_rt():
    for seed in SEEDS:
        res = offline_online_correlation(_world(seed)[1], variants=[("dcg", "pbm", "pbm", 16.0)], rewards=["like"])
        med = res.table.groupby("policy")["r"].median()
        assert med["logging"] > 0.8 and med["treatment"] > 0.8


@pytest.mark.slow
def test_ndcg_inverts_a_nontrivial_share_of_dcg_orderings():
    for seed in SEEDS:
        res = dcg_vs_ndcg(_world(seed)[0], reward="like", clip=16.0, n_boot=200, rng=np.random.default_rng(seed))
        assert res.inverted_ci.low > 0.05
        assert res.kendall < 0.9


@pytest.mark.slow
@pytest.mark.xfail(strict=False, reason="the default simulated world's unclipped weights are not heavy-tailed "
                                        "enough for m = ∞ to lose sensitivity (docs/analyses.md, 'Gaps')")
def test_dcg_sensitivity_at_a_finite_clip_clearly_beats_unclipped():
    dcg, _, n = _pooled_tpr()
    finite = dcg.drop(index=[1.0, math.inf])
    assert (finite.max() - dcg.loc[math.inf]) * n >= 3
