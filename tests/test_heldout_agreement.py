"""offeval_core.agreement: against scipy and a brute-force pair count; the user bootstrap of the share."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from offeval_core.agreement import agreement, inverted_share_bootstrap


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 6), st.integers(0, 6)), min_size=3, max_size=25))
def test_against_scipy_and_brute_force(pairs):
    x = np.array([p[0] for p in pairs], dtype=float)
    y = np.array([p[1] for p in pairs], dtype=float)
    a = agreement(x, y)
    brute = sum(1 for i, j in itertools.combinations(range(len(x)), 2) if (x[i] - x[j]) * (y[i] - y[j]) < 0)
    assert a.n_inverted == brute
    assert a.n_pairs == len(x) * (len(x) - 1) // 2
    assert a.inverted_share == brute / a.n_pairs
    if np.ptp(x) > 0 and np.ptp(y) > 0:
        pr = stats.pearsonr(x, y)
        kt = stats.kendalltau(x, y)
        assert a.pearson_r == pytest.approx(pr.statistic) and a.pearson_p == pytest.approx(pr.pvalue)
        assert a.kendall_tau == pytest.approx(kt.statistic) and a.kendall_p == pytest.approx(kt.pvalue)
    else:
        assert np.isnan(a.pearson_r) and np.isnan(a.kendall_tau)


def test_ties_never_inverted_but_in_denominator():
    a = agreement([1, 1, 2], [2, 1, 1], names=["a", "b", "c"])
    # pairs: (a,b) tie in x; (b,c) tie in y; (a,c): x says c > a, y says a > c → inverted
    assert a.inverted_pairs == (("c", "a"),) and a.inverted_share == pytest.approx(1 / 3)


def test_bootstrap_extremes_and_coverage():
    rng = np.random.default_rng(0)
    base = rng.normal(size=(200, 6)) + np.arange(6)[None, :]
    assert inverted_share_bootstrap(base, base, n_boot=100, rng=np.random.default_rng(1)).as_list() == [0.0, 0.0]
    ci = inverted_share_bootstrap(base, -base, n_boot=100, rng=np.random.default_rng(1))
    assert ci.as_list() == [1.0, 1.0]
    # y swaps two close policies' columns with noise: share of inverted pairs ∈ CI, wider CI at higher level
    y = base.copy()
    y[:, [2, 3]] = y[:, [3, 2]]
    point = agreement(base.mean(0), y.mean(0)).inverted_share
    c95 = inverted_share_bootstrap(base, y, n_boot=400, rng=np.random.default_rng(2), level=0.95)
    c50 = inverted_share_bootstrap(base, y, n_boot=400, rng=np.random.default_rng(2), level=0.5)
    assert c95.low <= point <= c95.high
    assert c95.width >= c50.width
    assert c95.high <= 2 / 15 + 1e-12  # at most pairs involving the two swapped columns' neighbours flip


def test_errors():
    with pytest.raises(ValueError, match=r"^x and y must have the same length, got 3 and 2$"):
        agreement([1, 2, 3], [1, 2])
    with pytest.raises(ValueError, match=r"^agreement needs at least 2 policies, got 1$"):
        agreement([1], [1])
    with pytest.raises(ValueError, match=r"^x must be finite; non-finite values at positions \[1\]$"):
        agreement([1, np.nan], [1, 2])
    with pytest.raises(ValueError, match=r"^names must have one entry per policy \(2\), got 1$"):
        agreement([1, 2], [1, 2], names=["a"])
    m = np.ones((3, 2))
    with pytest.raises(ValueError, match=r"^per_unit_x and per_unit_y must have the same shape, got \(3, 2\) and "
                                         r"\(2, 2\)$"):
        inverted_share_bootstrap(m, m[:2], n_boot=10, rng=np.random.default_rng(0))
    with pytest.raises(ValueError, match=r"^n_boot must be ≥ 10, got 5$"):
        inverted_share_bootstrap(m, m, n_boot=5, rng=np.random.default_rng(0))
    with pytest.raises(TypeError, match=r"^rng must be None, an int seed or a numpy.random.Generator, got str$"):
        inverted_share_bootstrap(m, m, n_boot=10, rng="0")
    # one randomness convention: an int seed is the Generator it seeds
    x = np.random.default_rng(1).normal(size=(30, 3))
    assert inverted_share_bootstrap(x, x[:, ::-1], n_boot=20, rng=4) == inverted_share_bootstrap(
        x, x[:, ::-1], n_boot=20, rng=np.random.default_rng(4))


def test_bootstrap_percentiles_against_an_explicit_resample_loop():
    # 8 units × 5 policies; the same multinomial unit counts as the function draws (one chunk), then per
    # resample the policy means and the share of the 10 pairs the two metrics order strictly oppositely
    rng = np.random.default_rng(0)
    x = rng.normal(size=(8, 5))
    y = x + rng.normal(size=(8, 5))
    n_boot, level = 200, 0.8
    counts = np.random.default_rng(5).multinomial(8, np.full(8, 1 / 8), size=n_boot)
    shares = []
    for c in counts:
        mx, my = c @ x / 8, c @ y / 8
        inv = sum((mx[a] - mx[b]) * (my[a] - my[b]) < 0 for a, b in itertools.combinations(range(5), 2))
        shares.append(inv / 10)
    lo, hi = np.quantile(shares, [0.1, 0.9])                 # (1 − 0.8) / 2 and (1 + 0.8) / 2
    assert (lo, hi) == pytest.approx((0.2, 0.6), abs=1e-12)  # a real spread: other tails give other bounds
    assert tuple(np.quantile(shares, [0.2, 0.8])) != (lo, hi) and tuple(np.quantile(shares, [0.05, 0.95])) != (lo, hi)
    ci = inverted_share_bootstrap(x, y, n_boot=n_boot, rng=np.random.default_rng(5), level=level)
    assert (ci.low, ci.high, ci.level) == (pytest.approx(lo, abs=1e-12), pytest.approx(hi, abs=1e-12), 0.8)


def test_agreement_by_hand_on_four_policies():
    # x = (1, 2, 3, 4), y = (1, 3, 2, 2): pairs (2, 3) and (2, 4) inverted, (3, 4) tied in y (not inverted);
    # 2 of 6 pairs; the first name of an inverted pair is the one x prefers
    a = agreement([1, 2, 3, 4], [1, 3, 2, 2], names=["a", "b", "c", "d"])
    assert (a.n, a.n_pairs, a.n_inverted) == (4, 6, 2)
    assert a.inverted_share == pytest.approx(2 / 6, abs=1e-15)
    assert a.inverted_pairs == (("c", "b"), ("d", "b"))
    assert a.pearson_r == pytest.approx(stats.pearsonr([1, 2, 3, 4], [1, 3, 2, 2]).statistic, abs=1e-12)
    assert a.kendall_tau == pytest.approx(stats.kendalltau([1, 2, 3, 4], [1, 3, 2, 2]).statistic, abs=1e-12)
    # two policies: Kendall's τ is defined, Pearson's r needs three
    two = agreement([1, 2], [2, 1])
    assert np.isnan(two.pearson_r) and two.kendall_tau == pytest.approx(-1.0) and two.inverted_share == 1.0
    assert two.inverted_pairs == (("1", "0"),)
    # a constant metric: no correlation, no inversion
    flat = agreement([1, 2, 3], [5, 5, 5])
    assert np.isnan(flat.pearson_r) and np.isnan(flat.kendall_tau) and flat.n_inverted == 0
    assert flat.to_dict()["pearson_r"] is None and flat.to_dict()["n_pairs"] == 3
