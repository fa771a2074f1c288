"""Holm and Benjamini-Hochberg adjusted p-values: worked examples, a direct reference, error control."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from offeval_core.multiple import adjust, benjamini_hochberg, holm


def holm_reference(p):
    m = len(p)
    order = np.argsort(p, kind="stable")
    out = np.empty(m)
    running = 0.0
    for i, j in enumerate(order):
        running = max(running, min(1.0, (m - i) * p[j]))
        out[j] = running
    return out


def bh_reference(p):
    m = len(p)
    order = np.argsort(p, kind="stable")
    out = np.empty(m)
    running = 1.0
    for i in range(m - 1, -1, -1):
        j = order[i]
        running = min(running, min(1.0, m * p[j] / (i + 1)))
        out[j] = running
    return out


def test_worked_example():
    # Holm: sorted 0.01, 0.02, 0.03, 0.5 → 4·0.01, 3·0.02, 2·0.03, 1·0.5
    p = [0.03, 0.01, 0.5, 0.02]
    assert holm(p).tolist() == pytest.approx([0.06, 0.04, 0.5, 0.06])
    # BH: 4·0.01/1 = 0.04, 4·0.02/2 = 0.04, 4·0.03/3 = 0.04, 4·0.5/4 = 0.5
    assert benjamini_hochberg(p).tolist() == pytest.approx([0.04, 0.04, 0.5, 0.04])
    res = adjust(p, method="holm", alpha=0.05, family="4 experiments × 1 policy")
    assert res.rejected.tolist() == [False, True, False, False]
    assert res.caption == ("Holm (family-wise error) adjustment over 4 experiments × 1 policy: 1 of 4 comparisons "
                           "significant at α = 0.05")
    assert adjust(p, method="bh").rejected.tolist() == [True, True, False, True]


@settings(max_examples=20, deadline=None)
@given(st.lists(st.floats(0, 1, allow_nan=False), min_size=1, max_size=30))
def test_matches_step_up_and_step_down_references(p):
    p = np.asarray(p)
    np.testing.assert_allclose(holm(p), holm_reference(p), rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(benjamini_hochberg(p), bh_reference(p), rtol=1e-12, atol=1e-15)
    assert (benjamini_hochberg(p) <= holm(p) + 1e-15).all()   # BH is never more conservative than Holm
    assert (holm(p) >= p - 1e-15).all()


def test_nan_left_out_of_family_and_errors():
    res = adjust([0.01, np.nan, 0.02], method="holm")
    assert np.isnan(res.adjusted[1]) and res.adjusted[0] == pytest.approx(0.02) and not res.rejected[1]
    assert adjust([0.01, 0.2], method="none").adjusted.tolist() == [0.01, 0.2]
    with pytest.raises(ValueError, match="unknown adjustment 'bonf'"):
        adjust([0.1], method="bonf")
    with pytest.raises(ValueError, match="p-values must lie in"):
        adjust([1.5])


def test_family_wise_error_and_fdr_control_under_the_null():
    rng = np.random.default_rng(0)
    m, reps = 20, 4000
    p = rng.random((reps, m))
    # the smallest adjusted p-value decides "any rejection": m·p_(1) for Holm, min_i m·p_(i)/i for BH
    for row in p[:5]:
        assert holm(row).min() == pytest.approx(min(1.0, m * row.min()))
        assert benjamini_hochberg(row).min() == pytest.approx(min(1.0, (m * np.sort(row) / np.arange(1, m + 1)).min()))
    any_holm = np.mean(m * p.min(1) <= 0.05)
    any_bh = np.mean((m * np.sort(p, 1) / np.arange(1, m + 1)).min(1) <= 0.05)
    any_raw = np.mean((p <= 0.05).any(1))
    assert any_holm <= 0.05 + 3 * np.sqrt(0.05 * 0.95 / reps)   # ≈ 0.05 (all nulls true: FWER = FDR)
    assert any_bh <= 0.05 + 3 * np.sqrt(0.05 * 0.95 / reps)
    assert any_raw > 0.6                                        # 1 − 0.95^20 = 0.64 without adjustment


def test_alpha_bounds_boundary_rejection_and_types_by_hand():
    from offeval_core.errors import InputError

    # alpha in the open interval (0, 1): both ends and beyond are refused with the value named
    for alpha in (0, 1, 1.5, -0.1):
        with pytest.raises(InputError) as err:
            adjust([0.1], alpha=alpha)
        assert str(err.value) == f"alpha must be in (0, 1), got {alpha!r}"
    assert adjust([0.1], alpha=0.999).rejected.tolist() == [True]
    # an adjusted p-value equal to α is rejected: Holm's 2 · 0.025 = 0.05 exactly (and 0.05 unadjusted)
    res = adjust([0.025, 0.5], method="holm", alpha=0.05)
    assert res.adjusted.tolist() == [0.05, 0.5] and res.rejected.tolist() == [True, False]
    assert adjust([0.05, 0.0500001], method="none", alpha=0.05).rejected.tolist() == [True, False]
    # NaN entries are never rejected: the mask is boolean, False there
    res = adjust([0.001, np.nan, 0.002], method="bh")
    assert res.rejected.dtype == bool and res.rejected.tolist() == [True, False, True]
    # integer p-values are read as floats: the adjusted values are float64 (Holm of 0, 1: 2 · 0, max(0, 1 · 1))
    res = adjust([0, 1], method="holm")
    assert res.p_values.dtype == np.float64 and res.adjusted.dtype == np.float64
    assert res.adjusted.tolist() == [0.0, 1.0]
    assert adjust(np.array([1, 0]), method="none").adjusted.dtype == np.float64
    # no family named: none in the caption
    plain = adjust([0.03, 0.01, 0.5, 0.02])
    assert plain.family == "" and plain.caption == ("Holm (family-wise error) adjustment: 1 of 4 comparisons "
                                                    "significant at α = 0.05")
