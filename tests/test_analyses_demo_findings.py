"""KDD'24 Fig. 1 and Table 2 findings on the current ``demo`` preset, checked seed by seed on five seeds the
bundled demo (seed 0) does not use (data/README.md, "What holds in the demo")."""

import functools
import math

import numpy as np
import pytest

from offeval_core.analyses import merge_moments, offline_online_correlation, sensitivity
from offeval_core.analyses._common import Variant
from offeval_core.engine import Grid, reduce
from offeval_core.logs import read_logs
from offeval_core.simulate import preset_config, simulate

SEEDS = (1, 2, 3, 4, 5)
REWARDS = ("like", "watch_complete")
PBM_Q16 = Variant("dcg", "pbm", "pbm", 16.0)
LOG2_C = Variant("dcg", "log2", "log2", 1.0)
LOG2_Q = Variant("dcg", "log2", "log2", math.inf)


@functools.cache
def _moments(seed: int):
    # watch_time off: the like and watch_complete logs are the same (it is drawn last), a little faster
    logs = read_logs(simulate(preset_config("demo", watch_time=False), seed=seed).logs)
    main = reduce(logs, Grid(rewards=REWARDS, policies=("treatment",)))
    extra = reduce(logs, Grid(rewards=("like",), policies=("treatment",), discounts=("log2",),
                              exposures=("log2",), clips=(1.0, math.inf)))
    return merge_moments(main, extra)


@functools.cache
def _detected(seed: int):
    t = sensitivity(_moments(seed), rewards=REWARDS).table
    n = int(t["n_settings"].iloc[0])
    det = t.pivot_table(index="clip", columns="metric", values="n_detected")
    return det["dcg"], det["ndcg"], n


@pytest.mark.slow
@pytest.mark.parametrize("seed", SEEDS)
def test_demo_world_has_twenty_experiments_and_enough_significant_settings(seed):
    _, _, n = _detected(seed)
    assert _moments(seed).online["experiment_id"].nunique() >= 20
    assert n >= 25


@pytest.mark.slow
@pytest.mark.parametrize("seed", SEEDS)
def test_dcg_sensitivity_rises_with_ips_and_drops_at_infinity(seed):
    """Fig. 1: m > 1 detects more online-significant settings than raw labels; unclipped weights (the
    production ranker buries fresh items at P(V | R) of 1e-3 and below) cost detections at m = ∞."""
    dcg, ndcg, _ = _detected(seed)
    finite = dcg.drop(index=[1.0, math.inf])
    assert finite.max() >= dcg.loc[1.0] + 3, dcg.tolist()
    assert dcg.loc[math.inf] < finite.max(), dcg.tolist()
    assert dcg.max() >= ndcg.max()


@pytest.mark.slow
@pytest.mark.parametrize("seed", SEEDS)
def test_pooled_correlation_of_the_target_policy_favours_learnt_pbm_with_debiased_labels(seed):
    """Table 2, pooled over experiment-days (Rt, like): DCG (pbm, Q̂ clipped at 16) tracks the online reward of
    the treatment arm better than DCG with the log2 discount on raw or de-biased labels."""
    res = offline_online_correlation(_moments(seed), rewards=("like",), policies=("treatment",),
                                     variants=[PBM_Q16, LOG2_C, LOG2_Q])
    daily = res.daily
    r = {label: np.corrcoef(part["online"], part["offline"])[0, 1]
         for label, part in daily.groupby("variant")}
    pbm, log2c, log2q = (r[label] for label in res.labels)
    assert pbm > log2c and pbm > log2q, r


@pytest.mark.slow
def test_ndcg_sensitivity_is_flat_in_this_world():
    """Documented gap (data/README.md): R0 shows the logged items at ranks 1..L, so a target that ranks the whole
    candidate set re-orders them downwards and nDCG's paired effect rarely turns significantly positive; its
    detections do not change with m."""
    for seed in SEEDS[:2]:
        _, ndcg, _ = _detected(seed)
        assert ndcg.max() == ndcg.min()
