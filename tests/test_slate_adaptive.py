"""Adaptive IPS: the estimated-MSE choice of the interaction set, shown per leaf."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from offeval_core.slate import SlateConfig, build_world, estimate, from_arrays, sample, slate_weights
from offeval_core.slate.adaptive import CANDIDATES, _mse, choose


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
    cond = np.column_stack([np.ones(n), c2]).ravel()            # π0 = 0.25 at both slots: π = 0.25 · ratio ≤ 1
    marg = np.ones(2 * n)                                      # IIPS ratio 1 at both slots
    reward = np.tile([0.0, 1.0], n)
    seg = pd.DataFrame({"segment": np.tile(["a", "a", "b", "b"], repeat)})
    return from_arrays(session, np.tile([1, 2], n), reward, logging_marginal=0.5 * marg,
                       target_marginal=0.5 * marg, logging_conditional=np.full(2 * n, 0.25),
                       target_conditional=0.25 * cond, contexts=seg)


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


def test_leaf_names_follow_sorted_values_and_ties_keep_no_split():
    # the same sessions with segment b listed first: the leaves are still named in sorted order
    d = _two_segment_rows()
    flipped = from_arrays(d.session, d.slot, d.reward, logging_marginal=d.logging_marginal,
                          target_marginal=d.target_marginal, logging_conditional=d.logging_conditional,
                          target_conditional=d.target_conditional,
                          contexts=pd.DataFrame({"segment": ["z", "z", "b", "b"]}))
    c = choose(flipped)
    assert c.describe() == "adaptive IPS (split on segment): b → RIPS; z → IIPS"
    # every candidate identical in every session: no-split and split totals tie at 0, and no split is kept
    same = from_arrays(np.repeat(np.arange(4), 2), np.tile([1, 2], 4), np.tile([0.0, 1.0], 4),
                       logging_marginal=np.full(8, 0.5), target_marginal=np.full(8, 0.5),
                       logging_conditional=np.full(8, 0.5), target_conditional=np.full(8, 0.5),
                       contexts=pd.DataFrame({"segment": ["a", "b", "a", "b"]}))
    assert choose(same).feature is None
    # no contexts, or a feature the contexts lack: no split
    bare = from_arrays(same.session, same.slot, same.reward, logging_marginal=same.logging_marginal,
                       target_marginal=same.target_marginal, logging_conditional=same.logging_conditional,
                       target_conditional=same.target_conditional)
    assert choose(bare).feature is None
    assert choose(d, features=("device",)).feature is None


def test_split_totals_add_over_leaves():
    # segment a now has RIPS (0.2, 2.2) against IIPS (0.6, 1.4) (IIPS weight 0.6 and 1.4 at slot 2): its MSE is
    # no longer 0, so the split total is the sum of two non-zero leaf terms
    d = _two_segment_rows()
    marg = np.array([1.0, 0.6, 1.0, 1.4, 1.0, 1.0, 1.0, 1.0])
    d2 = from_arrays(d.session, d.slot, d.reward, logging_marginal=np.full(8, 0.5), target_marginal=0.5 * marg,
                     logging_conditional=d.logging_conditional, target_conditional=d.target_conditional,
                     contexts=d.contexts)
    t = choose(d2).table.set_index("leaf")
    # leaf a: IIPS (0.6, 1.4) var 0.32/2 = 0.16; gap (0.4, −0.8) mean² 0.04 < var 0.72/2 → MSE_IIPS 0.16, RIPS 1
    assert t.loc["a", ["mse_iips", "mse_rips"]].tolist() == pytest.approx([0.16, 1.0], abs=1e-12)
    assert t.loc["a", "chosen"] == "iips" and t.loc["b", "chosen"] == "rips"
    # split total 0.25 · 0.16 + 0.25 · 0.25 = 0.1025; no split (four sessions): IIPS (0.6, 1.4, 1, 1) has var
    # 0.32/3/4 = 0.0267 and the gap to RIPS (0.4, −0.8, −0.5, −1.5) mean² 0.36 − var 1.86/3/4 = 0.205, so its
    # MSE 0.2317 is the smallest: 0.1025 < 0.2317 and the split wins
    assert choose(d2).feature == "segment"


def test_aips_clip_slot_weights_and_features_reach_the_choice():
    d = _two_segment_rows(repeat=10)
    # clip 2: RIPS values 0.2, 2 (a) and 1.5, 2 (b); the choices stay IIPS in a, RIPS in b:
    # (20 · 1 + 10 · 1.5 + 10 · 2) / 40 = 1.375
    assert estimate(d, estimator="aips", rng=3, clip=2.0).target.value == pytest.approx(1.375, abs=1e-12)
    # λ = (1, 0): nothing is rewarded at a weighted slot, every candidate is 0: no split, IIPS
    res = estimate(d, estimator="aips", rng=3, slot_weights=[1.0, 0.0])
    assert res.target.value == 0.0 and res.note == "adaptive IPS (no split): all sessions → IIPS"
    # without the segment feature: no split
    assert estimate(d, estimator="aips", rng=3, features=()).note.startswith("adaptive IPS (no split)")


def test_aips_cross_fits_the_choice_on_the_other_half():
    # 16 sessions with random propensities: for each half h the choice is the one choose() makes on the other
    # half's sessions, applied to h's sessions (the halves are drawn per session with rng.integers(0, 2))
    rng = np.random.default_rng(8)
    n = 16
    d = from_arrays(np.repeat(np.arange(n), 2), np.tile([1, 2], n), rng.binomial(1, 0.5, 2 * n).astype(float),
                    logging_marginal=rng.uniform(0.2, 0.8, 2 * n), target_marginal=rng.uniform(0.2, 0.8, 2 * n),
                    logging_conditional=rng.uniform(0.2, 0.8, 2 * n), target_conditional=rng.uniform(0.2, 0.8, 2 * n),
                    contexts=pd.DataFrame({"segment": np.tile(["a", "b"], n // 2)}))
    values = np.column_stack([_session_values(d, c) for c in CANDIDATES])
    half = np.random.default_rng(11).integers(0, 2, size=n)
    want = np.empty(n)
    for h in (0, 1):
        c = choose(d.subset(half != h))
        table = c.table.set_index("leaf")["chosen"]
        for i in np.flatnonzero(half == h):
            leaf = "all sessions" if c.feature is None else d.contexts[c.feature].iloc[i]
            want[i] = values[i, CANDIDATES.index(table[leaf])]
    got = estimate(d, estimator="aips", rng=11).target.value
    assert got == pytest.approx(want.mean(), abs=1e-12)
    assert estimate(d, estimator="aips", rng=11).target.value == got          # the same seed, the same halves


def _session_values(d, candidate):
    w = slate_weights(d, candidate)
    return np.bincount(d.session, weights=w * d.reward)


def test_mse_accumulates_both_bias_steps():
    # SIPS s = (0, 1, 2, 3), RIPS s + 2, IIPS s + 3: noiseless gaps, steps 1² and 2²; each variance 5/3 / 4
    s = np.arange(4.0)
    v = np.column_stack([s + 3, s + 2, s])
    var = 5 / 3 / 4
    assert _mse(v).tolist() == pytest.approx([1 + 4 + var, 4 + var, var], abs=1e-12)


def test_split_total_sums_every_leaf():
    # every candidate equal per session (reward at slot 2 only, all weights c2): values (0, 2) in a, (1, 1) in b.
    # Split: 0.5² · (2/2) + 0.5² · 0 = 0.25; no split: var(0, 2, 1, 1) / 4 = 0.1667 — no split wins (counting
    # only the last leaf, 0, would split)
    c2 = np.array([1.0, 2.0, 1.0, 1.0])
    r2 = np.array([0.0, 1.0, 1.0, 1.0])
    d = from_arrays(np.repeat(np.arange(4), 2), np.tile([1, 2], 4), np.column_stack([np.zeros(4), r2]).ravel(),
                    logging_marginal=np.full(8, 0.5), target_marginal=0.5 * np.column_stack([np.ones(4), c2]).ravel(),
                    logging_conditional=np.full(8, 0.5), target_conditional=0.5 * np.column_stack([np.ones(4), c2]).ravel(),
                    contexts=pd.DataFrame({"segment": ["a", "a", "b", "b"]}))
    c = choose(d)
    assert c.feature is None
    assert c.table["mse_iips"].tolist() == pytest.approx([2 / 3 / 4], abs=1e-12)


def test_choose_reads_the_clip_and_the_slot_weights():
    # clip 1: RIPS is 0.2 or 1 in segment a (IIPS 1): bias 0.4² − 0.0084 makes IIPS worse, RIPS var
    # (20 · 0.16 / 19) / 20 = 0.0084 → RIPS; in b every candidate is 1 → IIPS (first of a tie). Split total
    # 0.25 · 0.0084 = 0.0021 < no split's 0.0031 (RIPS over all 40: 4.8 / 39 / 40)
    d = _two_segment_rows(repeat=10)
    c = choose(d, clip=1.0)
    assert c.describe() == "adaptive IPS (split on segment): a → RIPS; b → IIPS"
    assert c.table.set_index("leaf").loc["a", "mse_rips"] == pytest.approx(20 * 0.16 / 19 / 20, abs=1e-12)
    assert estimate(d, estimator="aips", rng=3, clip=1.0).note == c.describe()
    # λ = (1, 0): every value is 0 → no split
    assert choose(d, lam=np.array([1.0, 0.0])).describe() == "adaptive IPS (no split): all sessions → IIPS"
