"""KDD'24 Fig. 1 and Table 2 findings on the current ``demo`` preset, checked seed by seed on five seeds the
bundled demo (seed 0) does not use (data/README.md, "What holds in the demo")."""

import functools
import math

import numpy as np
import pytest

from offeval_core.analyses import correlation_by_clip, merge_moments, offline_online_correlation, sensitivity
from offeval_core.analyses._common import Variant
from offeval_core.engine import Grid, reduce
from offeval_core.estimators import session_values
from offeval_core.logs import read_logs
from offeval_core.simulate import preset_config, simulate

SEEDS = (1, 2, 3, 4, 5)
REWARDS = ("like", "watch_complete")
PBM_Q16 = Variant("dcg", "pbm", "pbm", 16.0)
LOG2_C = Variant("dcg", "log2", "log2", 1.0)
LOG2_Q = Variant("dcg", "log2", "log2", math.inf)


POSITIVE = tuple(f"exp{i + 1:02d}" for i, e in enumerate(preset_config("demo").effects) if e == "positive")


@functools.cache
def _logs(seed: int):
    # watch_time off: the like and watch_complete logs are the same (it is drawn last), a little faster
    return read_logs(simulate(preset_config("demo", watch_time=False), seed=seed).logs)


@functools.cache
def _moments(seed: int):
    logs = _logs(seed)
    main = reduce(logs, Grid(rewards=REWARDS, policies=("treatment",)))
    extra = reduce(logs, Grid(rewards=("like",), policies=("treatment",), discounts=("log2",),
                              exposures=("log2",)))  # every clip of the grid: Table 2 across clip values
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
@pytest.mark.parametrize("seed", SEEDS)
def test_table_2_across_clip_values_holds_at_moderate_clips_and_not_unclipped(seed):
    """The Correlation page's "Table 2 across clip values" (pooled, Rₜ, like): DCG (pbm, Q̂) beats both log2
    variants at m = 4, 8 and 16 and not at m = ∞ (the weights of the fresh items production buries at
    P(V | R) ≈ 1e-3), with its largest margin at a finite clip (data/README.md, "Table 2")."""
    res = correlation_by_clip(_moments(seed), reward="like")
    assert {4.0, 8.0, 16.0} <= set(res.holds), res.takeaway
    assert math.inf not in res.holds and math.isfinite(res.best_clip), res.takeaway
    assert res.margin(res.best_clip) > 0.02, res.takeaway


@pytest.mark.slow
@pytest.mark.parametrize("seed", SEEDS)
def test_ndcg_sensitivity_is_flat_in_this_world(seed):
    """Documented gap (data/README.md, "Fig. 1, nDCG"): nDCG's detections do not change with m."""
    _, ndcg, _ = _detected(seed)
    assert ndcg.max() == ndcg.min(), ndcg.tolist()


@pytest.mark.slow
@pytest.mark.parametrize("seed", SEEDS)
def test_why_ndcg_is_flat_one_reward_sessions_carry_it_and_ignore_m(seed):
    """The mechanism behind the flat nDCG curve, on the positive experiments' control sessions (like): most
    rewarded sessions hold one like, whose nDCG D(R)/D(1) is the same at every m and favours R0 (the logger
    put the liked item where it was seen, mostly rank 1, while the target spreads the logged items over all
    60 candidates); IPS raises the part of the paired effect that multi-like sessions carry, but not enough to
    turn the total positive."""
    logs = _logs(seed)
    f = logs.frame
    n_likes = (f["like"] > 0).groupby(f["session_id"]).sum()
    parts = {}
    for m in (1.0, 16.0):
        sv = session_values(logs, reward="like", policies=("treatment",), clip=m)
        sv = sv[(sv["arm"].astype(str) == "control") & sv["experiment_id"].astype(str).isin(POSITIVE)]
        n = sv["session_id"].map(n_likes).to_numpy()
        d = (sv["ndcg__treatment"] - sv["ndcg__logging"]).to_numpy()
        parts[m] = (d[n == 1].sum() / d.size, d[n >= 2].sum() / d.size)
        share_single = (n == 1).sum() / (n >= 1).sum()
    assert share_single > 0.6
    assert parts[1.0][0] == pytest.approx(parts[16.0][0], rel=1e-9) and parts[16.0][0] < 0
    assert parts[16.0][1] > parts[1.0][1]
    assert sum(parts[16.0]) < 0, parts
