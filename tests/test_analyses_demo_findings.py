"""KDD'24 Fig. 1 (by the paper's protocol) and Table 2 on the ``demo`` preset, a world where the method's
assumptions hold: checked seed by seed on the bundled demo (seed 0) and on five seeds it does not use
(data/README.md, "What holds in the demo").

What does not hold on every seed is not asserted here and is stated, per seed, in data/README.md and
docs/analyses.md ("Open"): Table 2 for ``like`` (log2 (Q̂) ahead on seed 1) and DCG's drop at m = ∞ (on seed 4
DCG at m = ∞ detects as many as at its best finite m, 83 = 83)."""

import functools
import math

import pandas as pd
import pytest
from demo_worlds import REWARDS, SEEDS, demo_world, grouped

from offeval_core.analyses import offline_online_correlation, sensitivity
from offeval_core.analyses._common import Variant
from offeval_core.analyses.world_findings import world_findings

PBM_Q = Variant("dcg", "pbm", "pbm", math.inf)     # the Correlation page's default clip: m = ∞
LOG2_C = Variant("dcg", "log2", "log2", 1.0)
LOG2_Q = Variant("dcg", "log2", "log2", math.inf)


@functools.cache
def _fig1(seed: int):
    """KDD'24 Sec. 6.2: online improvements (p < 0.001, effect > 0) of every reward, 99 % CIs."""
    return sensitivity(demo_world(seed).moments, rewards=REWARDS)


def _detected(seed: int):
    t = _fig1(seed).table
    det = t.pivot_table(index="clip", columns="metric", values="n_detected")
    return det["dcg"], det["ndcg"]


@pytest.mark.slow
@pytest.mark.parametrize("seed", grouped())
def test_twenty_experiments_and_at_least_twenty_online_improvements(seed):
    res = _fig1(seed)
    assert demo_world(seed).n_experiments >= 20
    assert len(res.settings) >= 20 and (res.settings["online_p"] < 0.001).all()
    assert (res.settings["online_effect"] > 0).all()


@pytest.mark.slow
@pytest.mark.parametrize("seed", grouped())
def test_ips_weighting_raises_the_tpr_of_dcg(seed):
    """Fig. 1: a finite m > 1 detects more online improvements than the raw labels (m = 1)."""
    dcg, _ = _detected(seed)
    finite = dcg.drop(index=[1.0, math.inf])
    assert finite.max() > dcg.loc[1.0], dcg.tolist()


@pytest.mark.slow
@pytest.mark.parametrize("seed", grouped())
def test_ips_weighting_raises_the_tpr_of_ndcg(seed):
    """Fig. 1: nDCG too detects more online improvements at some finite m > 1 than with the raw labels. It needs
    sessions with several rewards (with one reward the weight cancels in nDCG's ratio, docs/analyses.md)."""
    _, ndcg = _detected(seed)
    assert ndcg.drop(index=[1.0, math.inf]).max() > ndcg.loc[1.0], ndcg.tolist()


@pytest.mark.slow
@pytest.mark.parametrize("seed", grouped(tuple(s for s in SEEDS if s != 4)))
def test_dcg_at_infinity_detects_fewer_than_at_its_best_finite_m(seed):
    """Fig. 1: the unclipped weights' variance costs detections (not on seed 4, where m = ∞ ties its best finite
    m: OPEN below)."""
    dcg, _ = _detected(seed)
    assert dcg.loc[math.inf] < dcg.drop(index=[math.inf]).max(), dcg.tolist()


@pytest.mark.slow
@pytest.mark.parametrize("seed", grouped())
def test_dcg_best_at_least_ndcg_best_and_its_sign_agrees_at_its_best_m(seed):
    res = _fig1(seed)
    dcg, ndcg = _detected(seed)
    assert dcg.max() >= ndcg.max() > 0, (dcg.tolist(), ndcg.tolist())
    t = res.table[res.table["metric"] == "dcg"].set_index("clip")
    best = list(res.best_clips["dcg"])
    assert best and (t.loc[best, "sign_agreement"] >= 0.95).all(), t["sign_agreement"].tolist()
    assert "(the paper: 100 %; holds)" in res.takeaway


@pytest.mark.slow
@pytest.mark.parametrize("seed", grouped())
def test_table_2_learnt_pbm_debiased_dcg_beats_both_log2_variants_at_the_default_clip(seed):
    """Table 2, pooled over the target policy's experiment-days at the page's default clip (m = ∞): DCG (pbm, Q̂)
    correlates with the treatment arm's online reward better than DCG (log2, C) and DCG (log2, Q̂) for the dense
    implicit and the graded reward (for the sparse ``like`` not on every seed: module docstring)."""
    res = offline_online_correlation(demo_world(seed).moments, policies=("treatment",),
                                     variants=[PBM_Q, LOG2_C, LOG2_Q], rewards=("watch_complete", "watch_time"))
    for reward, part in res.daily.groupby("reward"):
        r = {label: part[part["variant"] == label][["online", "offline"]].corr().iloc[0, 1]
             for label in res.labels}
        pbm, log2c, log2q = (r[label] for label in res.labels)
        assert pbm > log2c and pbm > log2q, (reward, r)


OPEN = {0: set(),
        1: {"Table 2: pbm Q̂ above both log2 variants"},
        2: set(),
        3: set(),
        4: {"DCG at m = ∞ below its best finite m"},
        5: set()}
"""Per seed, the acceptance lines that do not hold (module docstring): a change that breaks another line, or
mends one, fails here until this list and the docs say so."""


@pytest.mark.slow
@pytest.mark.parametrize("seed", grouped())
def test_world_findings_fails_exactly_the_lines_the_docs_state_open(seed):
    w = demo_world(seed)
    f = world_findings(w.moments, w.ground_truth, rewards=REWARDS)
    assert set(f.failed()) == OPEN[seed], {k: v for k, v in f.checks.items()}
    # the same Fig. 1 as the tests above, and the coverage counted from the CIs it reports
    pd.testing.assert_frame_equal(f.sensitivity.table, _fig1(seed).table)
    assert f.coverage == ((f.per_setting["ci_low"] <= f.per_setting["truth"])
                          & (f.per_setting["truth"] <= f.per_setting["ci_high"])).mean()
    assert len(f.per_setting) == f.n_settings and f.per_setting["truth"].notna().all()
