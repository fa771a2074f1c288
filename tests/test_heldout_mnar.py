"""MNAR estimators (GS paper): Prop. 3.1, Prop. 4.1, one-stratum GS = Naive, Theorem 4.2, IPS unbiasedness."""

from __future__ import annotations

import math

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


def test_row_checks_name_each_problem_exactly():
    """Each input check of the observed pairs fires alone, with its message: lengths (lam or propensity alone
    off), propensities outside (0, 1] (1 itself allowed), a NaN or infinite λ, strata of another length, of floats
    or negative; numbers given as lists of ints or None-free objects read as floats."""
    import re

    from offeval_core.heldout.mnar import mnar_estimate

    ok = dict(user=[0, 0, 1], lam=[1.0, 0.0, 1.0], propensity=[0.5, 1.0, 0.25])

    def err(**kw):
        with pytest.raises(ValueError) as exc:
            mnar_estimate(**{**ok, **kw}, estimator="naive")
        return str(exc.value)

    assert err(lam=[1.0, 0.0]) == "user, lam and propensity must have the same length, got 3, 2 and 3"
    assert err(propensity=[0.5, 1.0]) == "user, lam and propensity must have the same length, got 3, 3 and 2"
    for bad in ([0.5, 1.0, 1.5], [0.5, 1.0, 0.0], [0.5, np.nan, 0.3], [0.5, np.inf, 0.3], [0.5, 2.5, 0.3]):
        assert err(propensity=bad) == "propensity must lie in (0, 1] for every observed pair", bad
    for bad in ([1.0, np.nan, 0.0], [1.0, np.inf, 0.0]):
        assert err(lam=bad) == "lam must be finite"
    strata_msg = "strata must hold one non-negative integer stratum per observed pair"
    for bad in ([0, 1], [0.0, 1.0, 0.0], [0, -1, 0]):
        with pytest.raises(ValueError, match=re.escape(strata_msg)):
            mnar_estimate(**ok, estimator="stratified", strata=bad)
    got = mnar_estimate(user=[0, 0, 1], lam=np.array([1, 0, 1], dtype=object), propensity=np.array([0.5, 1, 0.25], dtype=object),
                        estimator="snips")
    want = mnar_estimate(**ok, estimator="snips")
    np.testing.assert_allclose(got.per_user, want.per_user, rtol=0)
    np.testing.assert_allclose(got.per_user, [2 / 3, 1.0], rtol=1e-12)   # (1/0.5) / (1/0.5 + 1/1); 4 / 4


def test_popularity_propensities_and_strata_checks_and_boundaries():
    """γ = 2 by default (exponent 3/2); one item, popularity 0 and 1 are valid; each refusal has its message; the
    strata cut ties by item index (a stable sort) into floor(rank · n / size), one stratum per item allowed."""
    from offeval_core.heldout.mnar import popularity_propensities, popularity_strata

    np.testing.assert_allclose(popularity_propensities([1, 4]), [0.125, 1.0], rtol=1e-12)      # (1/4)^(3/2)
    np.testing.assert_allclose(popularity_propensities([0, 1]), [0.0, 1.0])
    np.testing.assert_allclose(popularity_propensities([0.5]), [1.0])                         # one item, below 1
    np.testing.assert_allclose(popularity_propensities(np.array([1, 4], dtype=object), gamma=1), [0.25, 1.0])

    def err(f, *args, **kw):
        with pytest.raises(ValueError) as exc:
            f(*args, **kw)
        return str(exc.value)

    assert err(popularity_propensities, []) == "popularity must be a non-empty 1-D array of counts, got shape (0,)"
    assert err(popularity_propensities, [[1, 2]]) == ("popularity must be a non-empty 1-D array of counts, got shape "
                                                       "(1, 2)")
    for bad in ([1, -1], [1, np.inf], [np.nan, 1]):
        assert err(popularity_propensities, bad) == "popularity must hold finite counts ≥ 0"
    for g in (True, "2", float("inf"), -1, -1.5):
        assert err(popularity_propensities, [1, 2], gamma=g) == (f"gamma must be a number > -1 (the paper uses 2), "
                                                                 f"got {g!r}")
    assert err(popularity_propensities, [0, 0]) == "popularity must have at least one positive count"
    np.testing.assert_allclose(popularity_propensities([1, 4], gamma=-0.5), [0.25 ** 0.25, 1.0], rtol=1e-12)

    assert popularity_strata([3, 1, 3, 1, 2], n_strata=2).tolist() == [1, 0, 1, 0, 0]   # ranks 3, 0, 4, 1, 2
    assert popularity_strata([2, 2, 2], n_strata=3).tolist() == [0, 1, 2]                # ties: by item index
    # 10 items of popularity 1 and 10 of 2, alternating: the 1s take ranks 0-9 in item order, so the first five
    # of them (items 0, 2, 4, 6, 8) are stratum 0 of 4 and the next five stratum 1
    alt = popularity_strata([1, 2] * 10, n_strata=4)
    assert alt[0::2].tolist() == [0] * 5 + [1] * 5 and alt[1::2].tolist() == [2] * 5 + [3] * 5
    assert popularity_strata(np.array([5, 1], dtype=object), n_strata=1).tolist() == [0, 0]
    assert popularity_strata([5, 1, 3], n_strata=3).tolist() == [2, 0, 1]                # n_strata = size allowed
    for n in (True, 1.0, 0, -2):
        assert err(popularity_strata, [1, 2], n_strata=n) == f"n_strata must be a positive integer, got {n!r}"
    assert err(popularity_strata, [1, 2], n_strata=3) == "n_strata must be ≤ the number of items (2), got 3"


def test_estimator_weights_called_directly():
    """The weights and denominators of each estimator on two users (propensities given as objects are read as
    floats), and the exact message for an unknown estimator."""
    from offeval_core.heldout.mnar import estimator_weights

    user, p = [0, 0, 1], np.array([0.5, 1, 0.25], dtype=object)
    w, d = estimator_weights(user, p, estimator="snips")
    np.testing.assert_allclose(w, [2.0, 1.0, 4.0])
    np.testing.assert_allclose(d, [3.0, 4.0])
    w, d = estimator_weights(user, p, estimator="naive")
    np.testing.assert_allclose(w, [1.0, 1.0, 1.0])
    np.testing.assert_allclose(d, [2.0, 1.0])
    assert d.dtype == np.float64
    w, d = estimator_weights([0, 0, 2], [0.5, 0.5, 0.25], estimator="stratified")   # user 1 has no pair
    np.testing.assert_allclose(w, [1.0, 1.0, 1.0])
    np.testing.assert_allclose(d, [2.0, np.nan, 1.0])
    w, d = estimator_weights(user, p, estimator="ips", n_relevant=np.array([4, 2], dtype=object))
    np.testing.assert_allclose(w, [2.0, 1.0, 4.0])
    assert d.dtype == np.float64 and d.tolist() == [4.0, 2.0]
    with pytest.raises(ValueError) as exc:
        estimator_weights(user, p, estimator="ips", n_relevant=[[4, 2, 2]])
    assert str(exc.value) == "n_relevant must have one entry per user code (≥ 2), got shape (1, 3)"
    with pytest.raises(ValueError) as exc:
        estimator_weights(user, p, estimator="dr")
    assert str(exc.value) == "estimator must be one of 'naive', 'stratified', 'ips', 'snips', 'gs'; got 'dr'"


def test_stratified_keeps_users_without_pairs_out_and_names_the_estimator():
    """User code 1 has no observed pair (NaN, left out of the mean); user 2 has one pair; the result carries its
    estimator; BoundTerms' dictionary holds its five fields."""
    from offeval_core.heldout.mnar import BoundTerms, mnar_estimate

    res = mnar_estimate([0, 0, 2], [1.0, 0.0, 1.0], [0.5, 0.5, 0.5], estimator="stratified", strata=[0, 1, 0])
    assert res.estimator == "stratified"
    np.testing.assert_allclose(res.per_user, [0.5, np.nan, 1.0])
    assert res.estimate.value == pytest.approx(0.75)
    assert BoundTerms("ips", 0.1, 0.2, 7, 0.05).to_dict() == {"estimator": "ips", "bias": 0.1,
                                                              "concentration": 0.2, "n_users": 7, "delta": 0.05}


def test_theorem41_terms_checks_and_input_types():
    """δ must lie strictly inside (0, 1/2); a propensity of 0 on either side is refused; an unknown estimator is
    named; 0/1 observation flags and object arrays are read as booleans and floats (the same terms)."""
    from offeval_core.heldout.mnar import theorem41_terms

    args = ([0, 0, 0], [0.5, 0.5, 0.25], [0.5, 0.25, 0.25], [True, False, True])
    want, bias_u, conc_u = theorem41_terms(*args, estimator="ips")
    got = theorem41_terms([0, 0, 0], np.array([0.5, 0.5, 0.25], dtype=object),
                          np.array([0.5, 0.25, 0.25], dtype=object), [1, 0, 1], estimator="ips")
    np.testing.assert_allclose(got[1], bias_u, rtol=0)
    np.testing.assert_allclose(got[2], conc_u, rtol=0)
    assert got[0].to_dict() == want.to_dict()
    # IPS on the true scale: |w p − 1| = 0, 1, 0 over n_u = 3
    assert want.bias == pytest.approx(1 / 3) and want.n_users == 1 and want.delta == 0.05

    def err(**kw):
        with pytest.raises(ValueError) as exc:
            theorem41_terms(*kw.pop("args", args), **{"estimator": "ips", **kw})
        return str(exc.value)

    for d in (0, 0.5, 1.0):
        assert err(delta=d) == f"delta must lie in (0, 1/2) (Theorem 4.1), got {d!r}"
    assert theorem41_terms(*args, estimator="ips", delta=0.49)[0].delta == 0.49
    zero = "propensities must be > 0 for every relevant pair"
    assert err(args=(args[0], [0.5, 0.0, 0.25], args[2], args[3])) == zero
    assert err(args=(args[0], args[1], [0.5, 0.0, 0.25], args[3])) == zero
    assert err(estimator="stratified") == ("estimator must be one of 'naive', 'ips', 'snips', 'gs'; got "
                                           "'stratified'")


def test_theorem41_terms_of_a_user_with_nothing_observed_warn_nothing():
    """User 1 has two relevant items and observed none: SNIPS' n̂_u and Naive's n*_u are 0 there, a division by 0
    that is silenced (the user is left out: NaN terms), without a warning."""
    import warnings

    from offeval_core.heldout.mnar import theorem41_terms

    args = ([0, 0, 1, 1], [0.5, 0.5, 0.5, 0.5], [0.5, 0.5, 0.5, 0.5], [True, False, False, False])
    for est in ("snips", "naive"):
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            terms, bias_u, _ = theorem41_terms(*args, estimator=est)
        assert terms.n_users == 1 and np.isnan(bias_u[1])
        # user 0: w = 2 on both items (n_u / n*_u = 2; SNIPS 2 · 2 / 2), |w p − 1| = 0
        assert bias_u[0] == pytest.approx(0.0)


def test_user_codes_checks_and_no_pairs():
    """User codes must be non-negative integers of one dimension (exact messages); no observed pair is its own
    error; the weights of no pair are empty."""
    from offeval_core.heldout.mnar import estimator_weights, mnar_estimate

    def err(user, lam, p):
        with pytest.raises(ValueError) as exc:
            mnar_estimate(user, lam, p, estimator="naive")
        return str(exc.value)

    codes = "user must hold non-negative integer user codes (0 … n_users − 1)"
    assert err([0.0, 1.0], [1.0, 1.0], [0.5, 0.5]) == codes
    assert err([0, -1], [1.0, 1.0], [0.5, 0.5]) == codes
    assert err([[0, 1]], [[1.0, 1.0]], [[0.5, 0.5]]) == "user must be 1-D (one entry per observed pair), got shape (1, 2)"
    assert err([], [], []) == "no observed pairs: user, lam and propensity are empty"
    w, d = estimator_weights(np.array([], dtype=np.int64), np.array([]), estimator="naive")
    assert w.shape == d.shape == (0,)


def test_theorem41_terms_of_gs_by_hand_and_edge_users():
    """GS on user 0's strata: stratum 0 has two observed items (P̂ 0.5 and 0.25: ŵ = (2 + 4)/2 = 3 on all three of
    its items), stratum 1 none (ŵ = 0); with true p = 1/3 the bias is (0 + 0 + 0 + 1)/4 = 1/4. User 1 has a single
    relevant item and user 2 nothing observed: both left out, without a warning; 0/1 flags read as booleans."""
    import warnings

    from offeval_core.heldout.mnar import theorem41_terms

    user = [0, 0, 0, 0, 1, 2, 2]
    p_true = [1 / 3, 1 / 3, 1 / 3, 0.5, 0.5, 0.5, 0.5]
    p_est = [0.5, 0.25, 0.5, 0.5, 0.5, 0.5, 0.5]
    obs = [1, 1, 0, 0, 1, 0, 0]
    strata = [0, 0, 0, 1, 0, 0, 1]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        terms, bias_u, conc_u = theorem41_terms(user, p_true, p_est, obs, estimator="gs", rel_strata=strata)
        none, nb, _ = theorem41_terms([0, 1], [0.5, 0.5], [0.5, 0.5], [True, True], estimator="ips")
    assert (terms.estimator, terms.n_users) == ("gs", 1)
    assert bias_u[0] == pytest.approx(0.25) and np.isnan(bias_u[1:]).all() and np.isnan(conc_u[1:]).all()
    # Σ_{S*} ŵ² = 9 + 9 = 18 over n_u (n_u − 1) = 12; w_max = 3
    log_term = math.log(2 / 0.05)
    assert conc_u[0] == pytest.approx(math.sqrt(2 * log_term * 18 / 12) + 3 * 7 * log_term / 9, rel=1e-12)
    assert none.n_users == 0 and np.isnan(none.bias) and np.isnan(none.concentration) and np.isnan(nb).all()


def test_theorem41_terms_single_observed_items_and_integer_flags():
    """A stratum with one observed item gives it and its unobserved items ŵ = 1/P̂ (2 and 4 here: no bias with
    the true p); 0/1 flags mark rows, they are not row numbers (user 1's largest weight is its own 2)."""
    from offeval_core.heldout.mnar import theorem41_terms

    terms, _, _ = theorem41_terms([0, 0, 0], [0.5, 0.25, 0.25], [0.5, 0.25, 0.5], [True, True, False],
                                  estimator="gs", rel_strata=[0, 1, 1])
    assert terms.bias == pytest.approx(0.0, abs=1e-15)
    _, _, conc_u = theorem41_terms([0, 0, 1, 1], [0.5] * 4, [0.5] * 4, [0, 1, 1, 0], estimator="ips")
    log_term = math.log(2 / 0.05)
    # each user: one observed item of weight 2 among two: √(2 L · 4 / 2) + 2 · 7 L / 3
    np.testing.assert_allclose(conc_u, [math.sqrt(4 * log_term) + 14 * log_term / 3] * 2, rtol=1e-12)
