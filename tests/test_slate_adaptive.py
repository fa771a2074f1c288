"""Adaptive IPS: the estimated-MSE choice of the interaction set, shown per leaf."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from offeval_core.slate import SlateConfig, build_world, estimate, from_arrays, sample
from offeval_core.slate.adaptive import _mse, choose


def test_mse_formula_on_known_columns():
    # columns IIPS, RIPS, SIPS over 4 sessions; neighbour differences d1 = IIPS − RIPS = (1, 1, 1, 1)
    v = np.array([[2.0, 1.0, 1.0], [2.0, 1.0, 3.0], [3.0, 2.0, 1.0], [3.0, 2.0, 3.0]])
    mse = _mse(v)
    var = v.var(0, ddof=1) / 4
    d2 = v[:, 1] - v[:, 2]                                  # (0, -2, 1, -1): mean -0.5
    step2 = max(0.25 - d2.var(ddof=1) / 4, 0.0)             # noise exceeds the squared mean → 0
    assert step2 == 0.0
    assert mse.tolist() == pytest.approx([1.0 + step2 + var[0], step2 + var[1], var[2]], abs=1e-12)


def test_large_cascade_sample_rejects_iips_and_independent_keeps_it():
    casc = sample(build_world(SlateConfig(behaviours=("cascade",)), rng=7), 20_000, rng=1).data
    assert choose(casc).table["chosen"].tolist() in (["rips"], ["sips"])
    ind = sample(build_world(SlateConfig(behaviours=("independent",)), rng=7), 20_000, rng=1).data
    c = choose(ind)
    assert c.table["chosen"].tolist() == ["iips"]
    assert c.describe().startswith("adaptive IPS (no split): all sessions → IIPS")


def test_aips_value_is_the_chosen_estimator_per_half():
    d = sample(build_world(SlateConfig(behaviours=("independent",)), rng=7), 20_000, rng=2).data
    res = estimate(d, estimator="aips", rng=0)
    # both halves pick IIPS here, so the value is IIPS's
    assert res.target.value == pytest.approx(estimate(d, estimator="iips").target.value, abs=1e-12)
    assert "IIPS" in res.note


def _two_segment_rows(repeat: int = 1):
    """Sessions of two slots, the reward at slot 2 only, so per session IIPS = w_I2 and RIPS = SIPS = c1·c2.

    segment a: IIPS 1 and RIPS 0.2 or 2.2 (mean 1.2): the IIPS − RIPS gap (0.8, −1.2) is noise, IIPS has no
               variance → IIPS;
    segment b: IIPS 1 and RIPS 1.5 or 2.5: the gap −1 every time is bias → RIPS (first of the tied RIPS, SIPS).
    """
    c2 = np.tile([0.2, 2.2, 1.5, 2.5], repeat)
    n = len(c2)
    session = np.repeat(np.arange(n), 2)
    cond = np.column_stack([np.ones(n), c2]).ravel()            # π0 = 0.5 at both slots: π = 0.5 · ratio
    marg = np.ones(2 * n)                                      # IIPS ratio 1 at both slots
    reward = np.tile([0.0, 1.0], n)
    seg = pd.DataFrame({"segment": np.tile(["a", "a", "b", "b"], repeat)})
    return from_arrays(session, np.tile([1, 2], n), reward, logging_marginal=0.5 * marg,
                       target_marginal=0.5 * marg, logging_conditional=np.full(2 * n, 0.5),
                       target_conditional=0.5 * cond, contexts=seg)


def test_choose_splits_on_the_segment_by_hand():
    # leaf a (values IIPS 1, 1; RIPS 0.2, 2.2): var IIPS 0; var RIPS = 2/2 = 1; gap d = (0.8, −1.2): mean² 0.04
    #   < var(d)/n = 2/2 = 1, so no bias step: MSE (0, 1, 1) → IIPS.
    # leaf b (IIPS 1, 1; RIPS 1.5, 2.5): var RIPS 0.5/2 = 0.25; gap −(0.5, 1.5): mean² 1 − var(d)/n 0.25 = 0.75:
    #   MSE (0.75 + 0, 0.25, 0.25) → RIPS. Split total (leaf share)² · MSE = 0.5²·0 + 0.5²·0.25 = 0.0625.
    # no split (all four): RIPS (0.2, 2.2, 1.5, 2.5) var 3.14/3/4 = 0.2617; gap mean² 0.36 − 0.2617 = 0.0983 is
    #   IIPS's MSE and the smallest: 0.0983 > 0.0625, so the split is kept (unsquared shares would give 0.125).
    c = choose(_two_segment_rows())
    assert c.feature == "segment"
    t = c.table
    assert t["leaf"].tolist() == ["a", "b"]
    assert t["sessions"].tolist() == [2, 2]
    assert t["chosen"].tolist() == ["iips", "rips"]
    assert t[["mse_iips", "mse_rips", "mse_sips"]].to_numpy().ravel().tolist() == pytest.approx(
        [0.0, 1.0, 1.0, 0.75, 0.25, 0.25], abs=1e-12)
    assert c.describe() == "adaptive IPS (split on segment): a → IIPS; b → RIPS"
    assert choose(_two_segment_rows(), features=()).describe() == "adaptive IPS (no split): all sessions → IIPS"


def test_aips_value_uses_each_leaf_choice_fitted_on_the_other_half():
    # 40 sessions, ten of each kind: every random half holds both kinds of each segment, so both halves choose
    # IIPS in a and RIPS in b; the value is (20·1 + 10·1.5 + 10·2.5) / 40 = 1.5, while IIPS is 1 and RIPS
    # (10·0.2 + 10·2.2 + 10·1.5 + 10·2.5) / 40 = 1.6
    d = _two_segment_rows(repeat=10)
    res = estimate(d, estimator="aips", rng=3)
    assert res.target.value == pytest.approx(1.5, abs=1e-12)
    assert estimate(d, estimator="iips").target.value == pytest.approx(1.0, abs=1e-12)
    assert estimate(d, estimator="rips").target.value == pytest.approx(1.6, abs=1e-12)
    assert res.note == "adaptive IPS (split on segment): a → IIPS; b → RIPS"
    # the row weights are the chosen candidate's: 1 in segment a (IIPS), c1·c2 up to 2.5 in segment b
    assert res.diagnostics.max_weight == pytest.approx(2.5, abs=1e-12)
    assert res.diagnostics.mean_weight == pytest.approx(1.0, abs=1e-12)


def test_mse_of_fewer_than_two_sessions_prefers_sips():
    assert _mse(np.array([[1.0, 2.0, 3.0]])).tolist() == [math.inf, math.inf, 0.0]
