"""Cascade-DR (Kiyohara et al. WSDM'22) by hand: the previous-slot weight, the clip, the slot weights, the
cross-fitting folds and the item × slot model's shrinkage prior, on two sessions of two slots.

RIPS is also unbiased under a cascade, so the unbiasedness suite cannot tell a broken cascade-DR from RIPS;
these numbers can (RIPS on the same rows is 3.6).

The rows (conditional propensities as in tests/test_slate_estimators.py):

    session A: slot 1 item 0 reward 1, π/π0 = 0.6/0.5 = 1.2;  slot 2 item 1 reward 0, π/π0 = 0.5/0.8 = 0.625
    session B: slot 1 item 1 reward 1, π/π0 = 0.5/0.25 = 2;   slot 2 item 0 reward 1, π/π0 = 1.0/0.5 = 2

so the cumulative weights W_k are A (1.2, 0.75), B (2, 4) and the previous-slot weights W_{k−1} are
A (1, 1.2), B (1, 2). The per-session value is v = Σ_k λ_k [W_k (r_k − q̂_k) + W_{k−1} q̄_k].
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from offeval_core.slate import estimate, from_arrays
from offeval_core.slate.dr import cascade_dr_values, cross_fitted_model, fit_rates
from offeval_core.slate.estimators import diagnostics
from offeval_core.slate.weights import previous_weight, slate_weights


def rows(reward=(1.0, 0.0, 1.0, 1.0)):
    return from_arrays([0, 0, 1, 1], [1, 2, 1, 2], list(reward), item=[0, 1, 1, 0],
                       logging_conditional=[0.5, 0.8, 0.25, 0.5], target_conditional=[0.6, 0.5, 0.5, 1.0])


def test_cumulative_and_previous_slot_weights():
    d = rows()
    cum = slate_weights(d, "rips")
    assert cum.tolist() == pytest.approx([1.2, 0.75, 2.0, 4.0], abs=1e-12)
    assert previous_weight(cum, d).tolist() == pytest.approx([1.0, 1.2, 1.0, 2.0], abs=1e-12)


def test_slot_model_without_cross_fitting():
    # q̂ = q̄ = the slot means over all rows: slot 1 (1 + 1) / 2 = 1, slot 2 (0 + 1) / 2 = 0.5
    # A: 1.2·(1 − 1) + 1·1 = 1;  0.75·(0 − 0.5) + 1.2·0.5 = 0.225  → 1.225
    # B: 2·(1 − 1) + 1·1 = 1;    4·(1 − 0.5) + 2·0.5 = 3            → 4
    per, cum, note = cascade_dr_values(rows(), lam=np.ones(2), folds=1)
    assert per.tolist() == pytest.approx([1.225, 4.0], abs=1e-12)
    assert cum.tolist() == pytest.approx([1.2, 0.75, 2.0, 4.0], abs=1e-12)
    assert note == "reward model: slot rates, cross-fitted over 1 folds"
    res = estimate(rows(), estimator="cascade-dr", folds=1)
    assert res.target.value == pytest.approx(2.6125, abs=1e-12)
    assert res.logging.value == pytest.approx(1.5, abs=1e-12)          # (1 + 0 + 1 + 1) / 2
    assert res.effect.value == pytest.approx(1.1125, abs=1e-12)
    assert estimate(rows(), estimator="rips").target.value == pytest.approx(3.6, abs=1e-12)  # (1.2 + 2 + 4) / 2
    # SE from the two session values: |1.225 − 4| / 2 (the sd of two values is their gap / √2)
    assert res.target.stderr == pytest.approx(abs(1.225 - 4.0) / 2, abs=1e-12)


def test_slot_weights_weigh_each_slot_term():
    # λ = (1, 0.5): A 1 + 0.5·0.225 = 1.1125, B 1 + 0.5·3 = 2.5
    per, _, _ = cascade_dr_values(rows(), lam=np.array([1.0, 0.5]), folds=1)
    assert per.tolist() == pytest.approx([1.1125, 2.5], abs=1e-12)


def test_clip_caps_the_cumulative_and_the_previous_weight():
    # clip 1.5: W = A (1.2, 0.75), B (1.5, 1.5); W_{k−1} = A (1, 1.2), B (1, 1.5)
    # B: 1.5·0 + 1·1 = 1;  1.5·(1 − 0.5) + 1.5·0.5 = 1.5  → 2.5 (A is unchanged: 1.225)
    per, cum, _ = cascade_dr_values(rows(), lam=np.ones(2), folds=1, clip=1.5)
    assert cum.tolist() == pytest.approx([1.2, 0.75, 1.5, 1.5], abs=1e-12)
    assert per.tolist() == pytest.approx([1.225, 2.5], abs=1e-12)
    res = estimate(rows(), estimator="cascade-dr", folds=1, clip=1.5)
    assert res.target.value == pytest.approx(1.8625, abs=1e-12)
    assert res.diagnostics.max_weight == 1.5


def _split_seed() -> int:
    """A seed whose two-fold draw puts the two sessions in different folds (the folds are drawn per session
    with rng.integers(0, folds))."""
    return next(s for s in range(100) if set(np.random.default_rng(s).integers(0, 2, size=2).tolist()) == {0, 1})


def test_cross_fitting_fits_each_session_on_the_other_fold():
    # A is corrected by B's slot means (1, 1), B by A's (1, 0):
    # A: 1.2·(1 − 1) + 1·1 = 1;  0.75·(0 − 1) + 1.2·1 = 0.45  → 1.45
    # B: 2·(1 − 1) + 1·1 = 1;    4·(1 − 0) + 2·0 = 4          → 5
    # (fitted on all rows it would be 2.6125; fitted on its own session, 2)
    seed = _split_seed()
    q, qbar = cross_fitted_model(rows(), folds=2, rng=seed)
    assert q.tolist() == pytest.approx([1.0, 1.0, 1.0, 0.0], abs=1e-12)
    assert qbar.tolist() == q.tolist()
    per, _, note = cascade_dr_values(rows(), lam=np.ones(2), folds=2, rng=seed)
    assert per.tolist() == pytest.approx([1.45, 5.0], abs=1e-12)
    assert note.endswith("cross-fitted over 2 folds")


def test_item_slot_rates_shrink_to_the_slot_mean():
    # original rewards A (1, 0), B (0, 1): slot means 0.5 and 0.5; each item × slot cell holds one row, so with
    # prior m = 2 the rate is (r + 2·0.5) / (1 + 2): 2/3 after a reward, 1/3 after none
    d = rows(reward=(1.0, 0.0, 0.0, 1.0))
    rates = fit_rates(d, np.arange(4), n_items=2, prior=2.0)
    assert rates.ravel().tolist() == pytest.approx([2 / 3, 2 / 3, 1 / 3, 1 / 3], abs=1e-12)
    assert fit_rates(d, np.arange(4), n_items=2, prior=0.0).tolist() == [[1.0, 1.0], [0.0, 0.0]]
    assert fit_rates(d, np.arange(4), n_items=0, prior=2.0).tolist() == [[0.5, 0.5]]
    # slot means from the rows given only: session A alone has slot means (1, 0)
    assert fit_rates(d, np.arange(2), n_items=0, prior=2.0).tolist() == [[1.0, 0.0]]


def test_item_slot_model_value_with_the_target_distribution():
    # q̂ per row (item, slot): A1 (0, 1) 2/3, A2 (1, 2) 1/3, B1 (1, 1) 1/3, B2 (0, 2) 2/3.
    # q̄ = Σ_a π(a | row) q̂(a, k): A1 0.6·2/3 + 0.4·1/3 = 8/15, A2 0.5·2/3 + 0.5·1/3 = 1/2,
    #                               B1 0.5·2/3 + 0.5·1/3 = 1/2,  B2 1·2/3 = 2/3.
    # A: 1.2·(1 − 2/3) + 8/15 = 14/15;  0.75·(0 − 1/3) + 1.2·1/2 = 0.35   → 77/60
    # B: 2·(0 − 1/3) + 1/2 = −1/6;      4·(1 − 2/3) + 2·2/3 = 8/3          → 5/2
    d = rows(reward=(1.0, 0.0, 0.0, 1.0))
    dist = np.array([[0.6, 0.4], [0.5, 0.5], [0.5, 0.5], [1.0, 0.0]])
    q, qbar = cross_fitted_model(d, model="item-slot", prior=2.0, folds=1, target_distribution=dist)
    assert q.tolist() == pytest.approx([2 / 3, 1 / 3, 1 / 3, 2 / 3], abs=1e-12)
    assert qbar.tolist() == pytest.approx([8 / 15, 0.5, 0.5, 2 / 3], abs=1e-12)
    per, _, note = cascade_dr_values(d, lam=np.ones(2), model="item-slot", prior=2.0, folds=1,
                                     target_distribution=dist)
    assert per.tolist() == pytest.approx([77 / 60, 2.5], abs=1e-12)
    assert note == "reward model: item-slot rates shrunk with 2 pseudo-sessions, cross-fitted over 1 folds"
    res = estimate(d, estimator="cascade-dr", model="item-slot", prior=2.0, folds=1, target_distribution=dist)
    assert res.target.value == pytest.approx((77 / 60 + 2.5) / 2, abs=1e-12)


def test_model_errors_and_negative_prior():
    d = rows()
    with pytest.raises(ValueError, match="unknown reward model 'item'"):
        cross_fitted_model(d, model="item")
    with pytest.raises(ValueError, match="prior must be ≥ 0"):
        cross_fitted_model(d, prior=-1.0)
    with pytest.raises(ValueError, match="needs item ids and the target's distribution"):
        cross_fitted_model(d, model="item-slot")
    assert cross_fitted_model(d, prior=0.0, folds=1)[0].tolist() == [1.0, 0.5, 1.0, 0.5]


def test_weight_diagnostics_by_hand():
    # RIPS weights per slot: slot 1 (1.2, 2), slot 2 (0.75, 4).
    # Kish ESS (Σw)²/Σw²: slot 1 3.2²/5.44 = 1.8824, slot 2 4.75²/16.5625 = 1.3623 — the worst share is slot 2's
    # (1.3623 / 2 sessions); the largest single share 4 / 4.75; the mean weight at slot 1 (1.2 + 2) / 2 = 1.6.
    d = rows()
    dg = diagnostics(d, slate_weights(d, "rips"))
    assert dg.ess == pytest.approx(4.75 ** 2 / 16.5625, abs=1e-12)
    assert dg.ess_share == pytest.approx(4.75 ** 2 / 16.5625 / 2, abs=1e-12)
    assert dg.max_weight == 4.0
    assert dg.max_share == pytest.approx(4 / 4.75, abs=1e-12)
    assert dg.mean_weight == pytest.approx(1.6, abs=1e-12)
    # a session without slot 2: slot 2's ESS share is over the one session that logs it (1 / 1)
    short = from_arrays([0, 0, 1], [1, 2, 1], [1.0, 0.0, 1.0], logging_conditional=[0.5, 0.8, 0.25],
                        target_conditional=[0.6, 0.5, 0.5])
    g = diagnostics(short, np.array([1.2, 0.75, 2.0]))
    assert g.ess == pytest.approx(3.2 ** 2 / 5.44, abs=1e-12)                # slot 1 is the worst: 0.941 < 1
    assert g.ess_share == pytest.approx(3.2 ** 2 / 5.44 / 2, abs=1e-12)
    assert g.max_share == pytest.approx(1.0, abs=1e-12)                     # slot 2: one weight of one
    assert not math.isnan(g.mean_weight)


def test_defaults_prior_ten_and_two_folds():
    # item-slot rates with the default prior of 10 pseudo-sessions: (r + 10 · 0.5) / (1 + 10) = 6/11 after a
    # reward, 5/11 after none (the rewards and items of test_item_slot_rates_shrink_to_the_slot_mean)
    d = rows(reward=(1.0, 0.0, 0.0, 1.0))
    dist = np.array([[0.6, 0.4], [0.5, 0.5], [0.5, 0.5], [1.0, 0.0]])
    q, _ = cross_fitted_model(d, model="item-slot", folds=1, target_distribution=dist)
    assert q.tolist() == pytest.approx([6 / 11, 5 / 11, 5 / 11, 6 / 11], abs=1e-12)
    per, _, note = cascade_dr_values(d, lam=np.ones(2), model="item-slot", folds=1, target_distribution=dist)
    # A: 1.2·(1 − 6/11) + (0.6·6/11 + 0.4·5/11);  0.75·(0 − 5/11) + 1.2·(0.5·6/11 + 0.5·5/11)
    a = 1.2 * 5 / 11 + 5.6 / 11 - 0.75 * 5 / 11 + 1.2 * 5.5 / 11
    assert per[0] == pytest.approx(a, abs=1e-12)
    assert note == "reward model: item-slot rates shrunk with 10 pseudo-sessions, cross-fitted over 1 folds"
    assert cascade_dr_values(d, lam=np.ones(2), rng=0)[2].endswith("cross-fitted over 2 folds")
    # the default of cross_fitted_model is two folds too: the same draw as folds=2, not as folds=3
    big = from_arrays(np.repeat(np.arange(30), 2), np.tile([1, 2], 30), np.tile([1.0, 0.0, 0.0, 1.0, 1.0, 1.0], 10),
                      logging_conditional=np.full(60, 0.5), target_conditional=np.full(60, 0.5))
    assert cross_fitted_model(big, rng=7)[0].tolist() == cross_fitted_model(big, folds=2, rng=7)[0].tolist()
    assert cross_fitted_model(big, rng=7)[0].tolist() != cross_fitted_model(big, folds=3, rng=7)[0].tolist()


def thirty_two_slot_sessions():
    """30 sessions of two slots, rewards and conditional propensities drawn with seed 2."""
    rng = np.random.default_rng(2)
    n = 30
    return from_arrays(np.repeat(np.arange(n), 2), np.tile([1, 2], n), rng.binomial(1, 0.4, 2 * n),
                       logging_conditional=rng.uniform(0.2, 0.8, 2 * n),
                       target_conditional=rng.uniform(0.2, 0.8, 2 * n))


def cascade_dr_by_hand(d, *, seed: int) -> np.ndarray:
    """Per-session cascade-DR values v = Σ_k W_k (r − q̂) + W_{k−1} q̄, q̂ and q̄ from cross_fitted_model on two
    folds drawn with ``seed``."""
    q, qbar = cross_fitted_model(d, folds=2, rng=seed)
    cum = slate_weights(d, "rips")
    return np.bincount(d.session, weights=cum * (d.reward - q) + previous_weight(cum, d) * qbar)


def test_cascade_dr_uses_the_folds_of_its_rng():
    d = thirty_two_slot_sessions()
    want = cascade_dr_by_hand(d, seed=5)
    assert cascade_dr_values(d, lam=np.ones(2), folds=2, rng=5)[0] == pytest.approx(want, abs=1e-12)


def test_rates_keep_every_slot_and_item_cell():
    d = rows(reward=(1.0, 0.0, 0.0, 1.0))
    # only the first row (slot 1): slot 2 has no row, its mean is 0 (not a missing entry)
    assert fit_rates(d, np.array([0]), n_items=0, prior=2.0).tolist() == [[1.0, 0.0]]
    # session A only, three items: item 2 is never logged and gets the slot means (1, 0)
    r = fit_rates(d, np.arange(2), n_items=3, prior=2.0)
    assert r.ravel().tolist() == pytest.approx([1.0, 0.0, 1.0, 0.0, 1.0, 0.0], abs=1e-12)


def test_cascade_dr_needs_conditional_propensities_and_contiguous_slots():
    from offeval_core.errors import InputError, UnknownName

    marg = from_arrays([0, 0], [1, 2], [1.0, 0.0], logging_marginal=[0.5, 0.5], target_marginal=[0.5, 0.5])
    with pytest.raises(UnknownName, match="estimator cascade-dr needs the column"):
        estimate(marg, estimator="cascade-dr")
    gap = from_arrays([0, 0], [1, 3], [1.0, 0.0], logging_conditional=[0.5, 0.5], target_conditional=[0.5, 0.5])
    with pytest.raises(InputError, match="estimator cascade-dr multiplies the conditional ratios"):
        estimate(gap, estimator="cascade-dr")
