"""Slate estimators by hand where the two-session example of tests/test_slate_estimators.py cannot tell: the
defaults, the paired effect's standard error when the logging value varies, the clip of the self-normalised
estimators, cascade-DR's folds, and the weight diagnostics of slots that carry no weight, that one session
reaches, that no session logs (every number written out below)."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

from offeval_core.errors import InputError
from offeval_core.slate import estimate, from_arrays, slot_discount
from offeval_core.slate.estimators import (
    SlateEstimate,
    WeightDiagnostics,
    diagnostics,
    effect_from_influence,
    estimate_from_influence,
    weights_for,
)
from tests.test_slate_dr_exact import cascade_dr_by_hand, thirty_two_slot_sessions

Z90 = 1.6448536269514722  # Φ⁻¹(0.95)


def hand(**change):
    """The two sessions of tests/test_slate_estimators.py: A rewards slot 1, B slot 2; IIPS weights A (1.2, 0.5),
    B (2, 1); RIPS A (1.2, 0.75), B (2, 4)."""
    h = {"logging_marginal": [0.5, 0.4, 0.25, 0.5], "target_marginal": [0.6, 0.2, 0.5, 0.5],
         "logging_conditional": [0.5, 0.8, 0.25, 0.5], "target_conditional": [0.6, 0.5, 0.5, 1.0], **change}
    return from_arrays([0, 0, 1, 1], [1, 2, 1, 2], [1.0, 0.0, 0.0, 1.0], **h)


def no_warning(fn, *args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        return fn(*args, **kwargs)


def test_the_default_estimator_is_iips_with_an_empty_note():
    res = estimate(hand())
    assert res.estimator == "iips" and res.note == ""
    assert res.target.value == pytest.approx(1.1, abs=1e-12)          # (1.2 · 1 + 1 · 1) / 2
    assert estimate(hand(), estimator="snrips").note == ""


def test_paired_effect_se_when_the_logging_value_varies():
    # λ = (1, 0.5): IIPS per session A 1.2, B 0.5 · 1 = 0.5; logging A 1, B 0.5; differences (0.2, 0).
    # SEs s/√2 of two values: target |1.2 − 0.5|/2 = 0.35, logging 0.25, effect 0.1 (not (0.35 + 0.25)).
    res = estimate(hand(), estimator="iips", slot_weights=[1.0, 0.5], level=0.9)
    assert (res.target.value, res.logging.value, res.effect.value) == pytest.approx((0.85, 0.75, 0.1), abs=1e-12)
    assert (res.target.stderr, res.logging.stderr, res.effect.stderr) == pytest.approx((0.35, 0.25, 0.1), abs=1e-12)
    assert (res.effect.ci.low, res.effect.ci.high) == pytest.approx((0.1 - Z90 * 0.1, 0.1 + Z90 * 0.1), abs=1e-12)
    assert res.effect.p_value == pytest.approx(0.15865525393145707, abs=1e-12)   # 1 − Φ(0.1 / 0.1)
    assert res.effect.n == res.target.n == 2


def test_self_normalised_estimators_cap_their_weights():
    # RIPS weights capped at 1.5: A (1.2, 0.75), B (1.5, 1.5); slot 1 1.2 / 2.7, slot 2 1.5 / 2.25: 4/9 + 2/3
    assert estimate(hand(), estimator="snrips", clip=1.5).target.value == pytest.approx(10 / 9, abs=1e-12)
    assert estimate(hand(), estimator="snrips").target.value == pytest.approx(1.2 / 3.2 + 4 / 4.75, abs=1e-12)


def test_cascade_dr_uses_the_folds_of_its_rng():
    # the mean of the per-session values by hand, with the model cross-fitted on the folds of the estimate's seed
    d = thirty_two_slot_sessions()
    per = cascade_dr_by_hand(d, seed=5)
    res = estimate(d, estimator="cascade-dr", rng=5)
    assert res.target.value == pytest.approx(per.mean(), abs=1e-12)
    assert res.target.stderr == pytest.approx(per.std(ddof=1) / math.sqrt(len(per)), abs=1e-12)
    per6 = cascade_dr_by_hand(d, seed=6)  # another seed gives another value
    assert abs(per6.mean() - per.mean()) > 1e-6
    assert estimate(d, estimator="cascade-dr", rng=6).target.value == pytest.approx(per6.mean(), abs=1e-12)


def test_one_session_has_no_standard_error_and_warns_nothing():
    d = from_arrays([0, 0], [1, 2], [1.0, 0.0], logging_marginal=[0.5, 0.4], target_marginal=[0.6, 0.2])
    res = no_warning(estimate, d, estimator="iips")
    assert res.target.value == pytest.approx(1.2, abs=1e-12) and res.target.n == 1
    assert math.isnan(res.target.stderr) and math.isnan(res.logging.stderr) and math.isnan(res.effect.stderr)
    assert math.isnan(res.effect.p_value) and math.isnan(res.effect.ci.low)
    # one weight per slot: ESS 1 of 1 session at each slot (not ½), the largest share 1
    assert res.diagnostics == WeightDiagnostics(ess=1.0, ess_share=1.0, max_weight=pytest.approx(1.2),
                                                max_share=1.0, mean_weight=pytest.approx(1.2))
    none = no_warning(estimate_from_influence, 2.0, np.array([]), level=0.9)
    assert none.value == 2.0 and none.n == 0 and math.isnan(none.stderr)
    one = no_warning(effect_from_influence, 0.5, np.array([0.0]), level=0.9)
    assert one.n == 1 and math.isnan(one.stderr) and math.isnan(one.p_value)


def test_diagnostics_of_a_slot_without_weight():
    # the target never shows the slot-2 items: IIPS weights A (1.2, 0), B (2, 0). Slot 2 sums to 0, so its
    # share of the largest weight is 0 (not 0/0) and its ESS 0 (Kish, no weight): it is the worst slot.
    d = hand(target_marginal=[0.6, 0.0, 0.5, 0.0])
    got = no_warning(diagnostics, d, weights_for(d, "iips"))
    assert got == WeightDiagnostics(ess=0.0, ess_share=0.0, max_weight=2.0, max_share=pytest.approx(2 / 3.2),
                                    mean_weight=pytest.approx(1.6))


def test_diagnostics_skip_a_slot_that_no_session_logs():
    # slots 1 and 3 only (IIPS needs no contiguous slots): slot 2 has no session and is not a candidate.
    # Slot 1 (1.2, 2): ESS 3.2² / 5.44 of 2 sessions; slot 3 (0.5, 1): ESS 1.5² / 1.25 = 1.8 of 2, the worst.
    d = from_arrays([0, 0, 1, 1], [1, 3, 1, 3], [1.0, 0.0, 0.0, 1.0], logging_marginal=[0.5, 0.4, 0.25, 0.5],
                    target_marginal=[0.6, 0.2, 0.5, 0.5])
    got = no_warning(diagnostics, d, weights_for(d, "iips"))
    assert got == WeightDiagnostics(ess=pytest.approx(1.8), ess_share=pytest.approx(0.9), max_weight=2.0,
                                    max_share=pytest.approx(2 / 3), mean_weight=pytest.approx(1.6))


def test_diagnostics_of_a_slot_one_session_reaches_without_weight():
    # A logs slots 1, 2 (weight 0 at slot 2), B slot 1 only: slot 2 has one session and ESS 0, the worst slot
    d = from_arrays([0, 0, 1], [1, 2, 1], [1.0, 0.0, 0.0], logging_marginal=[0.5, 0.4, 0.25],
                    target_marginal=[0.6, 0.0, 0.5])
    got = no_warning(diagnostics, d, weights_for(d, "iips"))
    assert got == WeightDiagnostics(ess=0.0, ess_share=0.0, max_weight=2.0, max_share=pytest.approx(0.625),
                                    mean_weight=pytest.approx(1.6))


def test_diagnostics_without_a_slot_1_have_no_mean_weight():
    # both sessions log slot 2 only: weights 1.2 and 0.8, ESS 2² / 2.08 at slot 2; slot 1 has no weight to average
    d = from_arrays([0, 1], [2, 2], [1.0, 0.0], logging_marginal=[0.5, 0.5], target_marginal=[0.6, 0.4])
    got = no_warning(diagnostics, d, weights_for(d, "iips"))
    assert (got.ess, got.ess_share) == pytest.approx((4 / 2.08, 2 / 2.08))
    assert (got.max_weight, got.max_share) == pytest.approx((1.2, 0.6)) and math.isnan(got.mean_weight)


def test_slot_weights_are_read_as_floats():
    lam = slot_discount([1, 2, 4], 2)
    assert lam.dtype == np.float64 and lam.tolist() == [1.0, 2.0]
    assert slot_discount(["1", "0.5"], 2).tolist() == [1.0, 0.5]
    with pytest.raises(InputError) as err:
        slot_discount([1.0, None], 2)                                  # None is NaN, not finite
    assert str(err.value) == "slot weights must be a finite 1-d array of length ≥ 2"


def test_an_estimate_of_another_name_is_labelled_by_its_name():
    est = estimate_from_influence(1.0, np.array([0.5, -0.5]), level=0.9)
    eff = effect_from_influence(0.0, np.array([0.0, 0.0]), level=0.9)
    out = SlateEstimate("my-estimator", est, est, eff).to_dict()
    assert (out["estimator"], out["label"]) == ("my-estimator", "my-estimator")
    assert "diagnostics" not in out and "note" not in out
    assert out["target"]["stderr"] == pytest.approx(0.5)               # s = √(2 · 0.25) over √2
