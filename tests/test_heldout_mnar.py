"""MNAR estimators (GS paper): Prop. 3.1, Prop. 4.1, one-stratum GS = Naive, Theorem 4.2, IPS unbiasedness."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from offeval_core.heldout.mnar import (
    mnar_estimate,
    popularity_propensities,
    popularity_strata,
    theorem41_terms,
)


def _observed(seed, n_users=50, n_items=40):
    """Random complete data: relevant pairs with propensities, an observation draw, λ values and strata."""
    rng = np.random.default_rng(seed)
    rel = rng.random((n_users, n_items)) < 0.3
    rel[:, 0] = True
    rel[:, 1] = True
    p_item = rng.uniform(0.05, 1.0, size=n_items)
    obs = rel & (rng.random((n_users, n_items)) < p_item[None, :])
    obs[:, 0] = rel[:, 0]  # every user observes at least one item
    lam = rng.random((n_users, n_items))
    strata_item = rng.integers(0, 4, size=n_items)
    return rel, obs, p_item, lam, strata_item


def test_popularity_propensities_formula():
    p = popularity_propensities([1, 4, 16], gamma=2.0)  # exponent 1.5
    assert p.tolist() == pytest.approx([(1 / 16) ** 1.5, (4 / 16) ** 1.5, 1.0])
    assert p[1] / p[0] == pytest.approx(4**1.5)  # P ∝ pop^((γ+1)/2)
    with pytest.raises(ValueError, match=r"^gamma must be a number > -1 \(the paper uses 2\), got -1$"):
        popularity_propensities([1, 2], gamma=-1)


def test_popularity_strata_equal_sizes():
    s = popularity_strata(np.arange(10)[::-1], n_strata=3)
    assert np.bincount(s).tolist() == [4, 3, 3]
    assert s[9] == 0 and s[0] == 2  # least popular item in stratum 0
    with pytest.raises(ValueError, match=r"^n_strata must be ≤ the number of items \(3\), got 4$"):
        popularity_strata([1, 2, 3], n_strata=4)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_prop_4_1_singleton_strata_is_ips(seed):
    rel, obs, p_item, lam, _ = _observed(seed)
    u, i = np.nonzero(obs)
    n_true = rel.sum(axis=1)
    gs = mnar_estimate(u, lam[u, i], p_item[i], estimator="gs", strata=i, n_relevant=n_true)
    ips = mnar_estimate(u, lam[u, i], p_item[i], estimator="ips", n_relevant=n_true)
    np.testing.assert_allclose(gs.per_user, ips.per_user, rtol=1e-12)
    gs_sn = mnar_estimate(u, lam[u, i], p_item[i], estimator="gs", strata=i)
    snips = mnar_estimate(u, lam[u, i], p_item[i], estimator="snips")
    np.testing.assert_allclose(gs_sn.per_user, snips.per_user, rtol=1e-12)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_prop_3_1_original_stratified_is_naive(seed):
    _, obs, p_item, lam, strata_item = _observed(seed)
    u, i = np.nonzero(obs)
    st_ = mnar_estimate(u, lam[u, i], p_item[i], estimator="stratified", strata=strata_item[i])
    naive = mnar_estimate(u, lam[u, i], p_item[i], estimator="naive")
    np.testing.assert_allclose(st_.per_user, naive.per_user, rtol=1e-12)
    manual = np.array([lam[k][obs[k]].mean() for k in range(obs.shape[0])])
    np.testing.assert_allclose(naive.per_user, manual, rtol=1e-12)


def test_gs_one_stratum_self_normalised_is_naive():
    _, obs, p_item, lam, _ = _observed(5)
    u, i = np.nonzero(obs)
    gs = mnar_estimate(u, lam[u, i], p_item[i], estimator="gs", strata=np.zeros_like(i))
    naive = mnar_estimate(u, lam[u, i], p_item[i], estimator="naive")
    np.testing.assert_allclose(gs.per_user, naive.per_user, rtol=1e-12)
    snips = mnar_estimate(u, lam[u, i], p_item[i], estimator="snips")
    assert not np.allclose(snips.per_user, naive.per_user)  # the identity is not trivial


@settings(max_examples=25, deadline=None)
@given(st.integers(0, 10_000), st.integers(1, 8))
def test_theorem_4_2_concentration_gs_le_ips(seed, n_strata):
    rel, obs, p_item, _, _ = _observed(seed, n_users=20, n_items=25)
    strata = np.random.default_rng(seed + 1).integers(0, n_strata, size=25)
    cu, ci = np.nonzero(rel)
    args = (cu, p_item[ci], p_item[ci], obs[cu, ci])
    t_gs, b_gs, c_gs = theorem41_terms(*args, estimator="gs", rel_strata=strata[ci])
    t_ips, b_ips, c_ips = theorem41_terms(*args, estimator="ips")
    ok = np.isfinite(c_ips)
    assert np.all(c_gs[ok] <= c_ips[ok] + 1e-12)
    assert np.allclose(b_ips[ok], 0.0, atol=1e-12) and np.all(b_gs[ok] >= b_ips[ok] - 1e-12)  # bias(GS) ≥ bias(IPS) = 0
    assert t_gs.concentration <= t_ips.concentration + 1e-12


def test_theorem_4_1_terms_worked_example():
    # one user, S_u = 3 items with p = (0.5, 0.5, 0.25), observed first two. Naive: w = n_u / n*_u = 1.5,
    # bias = (|0.75 − 1| + |0.75 − 1| + |0.375 − 1|) / 3 = (0.25 + 0.25 + 0.625) / 3 = 0.375.
    # IPS conc with δ = 0.05: sqrt(2 log 40 (4 + 4) / (3 · 2)) + 2 · 7 log 40 / (3 · 2).
    args = ([0, 0, 0], [0.5, 0.5, 0.25], [0.5, 0.5, 0.25], [True, True, False])
    t, _, _ = theorem41_terms(*args, estimator="naive")
    assert t.bias == pytest.approx(0.375)
    t_ips, _, _ = theorem41_terms(*args, estimator="ips")
    log_term = np.log(40)
    assert t_ips.concentration == pytest.approx(np.sqrt(2 * log_term * 8 / 6) + 2 * 7 * log_term / 6)


@pytest.mark.slow
def test_ips_unbiased_and_naive_biased_over_draws():
    rng = np.random.default_rng(9)
    n_users, n_items = 30, 30
    rel = rng.random((n_users, n_items)) < 0.4
    rel[:, :3] = True
    p_item = np.linspace(0.1, 0.9, n_items)
    lam = (np.arange(n_items)[None, :] >= 15).astype(float) * np.ones((n_users, 1))  # λ higher for popular items
    truth = np.mean([lam[u][rel[u]].mean() for u in range(n_users)])
    ips_vals, naive_vals = [], []
    for _ in range(400):
        obs = rel & (rng.random((n_users, n_items)) < p_item[None, :])
        u, i = np.nonzero(obs)
        ips = mnar_estimate(u, lam[u, i], p_item[i], estimator="ips", n_relevant=rel.sum(axis=1))
        naive = mnar_estimate(u, lam[u, i], p_item[i], estimator="naive")
        # users with no observed pair are NaN; IPS's per-user value for them is 0 (empty sum)
        ips_vals.append(np.nan_to_num(ips.per_user, nan=0.0).mean())
        naive_vals.append(np.nanmean(naive.per_user))
    se = np.std(ips_vals, ddof=1) / np.sqrt(len(ips_vals))
    assert abs(np.mean(ips_vals) - truth) < 4 * se
    assert np.mean(naive_vals) - truth > 0.1  # popular items over-represented


def test_errors():
    with pytest.raises(ValueError, match=r"^estimator 'ips' needs n_relevant \(the true n_u\); use 'snips' to "
                                         r"self-normalise$"):
        mnar_estimate([0], [1.0], [0.5], estimator="ips")
    with pytest.raises(ValueError, match=r"^propensity must lie in \(0, 1\] for every observed pair$"):
        mnar_estimate([0], [1.0], [0.0], estimator="naive")
    with pytest.raises(ValueError, match=r"^estimator must be one of 'naive', 'stratified', 'ips', 'snips', 'gs'; "
                                         r"got 'dr'$"):
        mnar_estimate([0], [1.0], [0.5], estimator="dr")
    with pytest.raises(ValueError, match=r"^estimator 'gs' needs strata"):
        mnar_estimate([0], [1.0], [0.5], estimator="gs")
    with pytest.raises(ValueError, match=r"^n_relevant must be ≥ the number of observed relevant items; too small "
                                         r"for users \[0\]$"):
        mnar_estimate([0, 0], [1.0, 1.0], [0.5, 0.5], estimator="ips", n_relevant=[1])
