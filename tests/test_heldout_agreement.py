"""offeval_core.agreement: against scipy and a brute-force pair count; the user bootstrap of the share."""

from __future__ import annotations

import itertools
import json
import warnings

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from resample_support import replay_counts
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


def test_three_policies_by_hand_and_the_dict():
    # x = (1, 2, 3), y = (1, 3, 2): centred (−1, 0, 1) and (−1, 1, 0), so r = 1 / √(2 · 2) = 0.5 and, on 1 df,
    # t = 0.5 / √0.75 = tan(π/6): p = 2 · (1/2 − 1/6) = 2/3. Pairs (1,2), (1,3) concordant, (2,3) discordant:
    # τ = (2 − 1) / 3; exactly, 3 of the 6 orders of three have ≤ 1 discordant pair, so p = min(1, 2 · 3/6) = 1
    a = agreement([1, 2, 3], [1, 3, 2], names=["p", "q", "s"])
    assert a.to_dict() == {
        "n": 3, "pearson_r": pytest.approx(0.5, abs=1e-12), "pearson_p": pytest.approx(2 / 3, abs=1e-12),
        "kendall_tau": pytest.approx(1 / 3, abs=1e-12), "kendall_p": pytest.approx(1.0, abs=1e-12),
        "n_pairs": 3, "n_inverted": 1, "inverted_share": pytest.approx(1 / 3, abs=1e-15),
    }
    assert a.inverted_pairs == (("s", "q"),)
    # the same correlations on a metric whose range is below 1: y = (0.1, 0.3, 0.2)
    small = agreement([1, 2, 3], [0.1, 0.3, 0.2])
    assert (small.pearson_r, small.pearson_p) == (pytest.approx(0.5, abs=1e-12), pytest.approx(2 / 3, abs=1e-12))


def test_nullable_integer_columns_are_numbers():
    # per-unit clicks in pandas' nullable Int64 columns (numpy reads them as objects): the same CI as plain floats
    x = pd.DataFrame({"a": [0, 1, 2, 1], "b": [1, 3, 2, 2], "c": [2, 2, 5, 1]}, dtype="Int64")
    y = pd.DataFrame({"a": [1, 0, 2, 1], "b": [0, 3, 1, 2], "c": [2, 4, 1, 1]}, dtype="Int64")
    got = inverted_share_bootstrap(x, y, n_boot=50, rng=3, level=0.8)
    assert got == inverted_share_bootstrap(x.to_numpy(float), y.to_numpy(float), n_boot=50, rng=3, level=0.8)
    assert agreement(x["a"], y["b"]).n_inverted == agreement([0, 1, 2, 1], [0, 3, 1, 2]).n_inverted == 2


def test_bootstrap_default_resamples_chunks_and_two_units():
    # the default is 1000 resamples: the percentiles of the explicit loop over 1000 resamples, replayed
    x = np.array([[0.0, 1.0, 2.0], [2.0, 1.0, 0.0], [1.0, 1.5, 1.0], [0.5, 0.0, 2.5]])
    y = x[:, [1, 0, 2]] + np.array([[0.0, 0.2, -0.3], [0.1, 0.0, 0.4], [-0.2, 0.3, 0.0], [0.0, 0.0, 0.1]])

    def loop(xm, ym, n_boot, seed, level):
        n = len(xm)
        counts = replay_counts(seed, n, n_boot)
        shares = []
        for c in counts:
            mx, my = c @ xm / n, c @ ym / n
            k = xm.shape[1]
            inv = sum((mx[a] - mx[b]) * (my[a] - my[b]) < 0 for a, b in itertools.combinations(range(k), 2))
            shares.append(inv / (k * (k - 1) / 2))
        return np.quantile(shares, [0.5 - level / 2, 0.5 + level / 2])

    # (261 of the 1000 shares are 0, so at level 0.479 the 26.05 % point falls between a 0 and a 1/3)
    lo, hi = loop(x, y, 1000, 7, 0.479)
    ci = inverted_share_bootstrap(x, y, rng=7, level=0.479)
    assert (ci.low, ci.high) == (pytest.approx(lo, abs=1e-12), pytest.approx(hi, abs=1e-12))
    assert 0 < lo < 1 / 3 and loop(x, y, 999, 7, 0.479)[0] != lo and loop(x, y, 1001, 7, 0.479)[0] != lo
    # the upper end too: 871 of the shares are ≤ 1/3, so at level 0.7427 the 87.135 % point falls between a 1/3
    # and a 2/3
    lo, hi = loop(x, y, 1000, 7, 0.7427)
    ci = inverted_share_bootstrap(x, y, rng=7, level=0.7427)
    assert (ci.low, ci.high) == (pytest.approx(lo, abs=1e-12), pytest.approx(hi, abs=1e-12))
    assert 1 / 3 < hi < 2 / 3
    # 2001 units: the draws come in chunks of 2,000,000 // 2001 = 999 resamples (999 + 1 here), replayed so
    # (351 of its shares are 0: at level 0.299 the 35.05 % point falls between 0 and 1/3)
    big = np.random.default_rng(8).normal(size=(2001, 3))
    big_y = big + np.random.default_rng(9).normal(size=(2001, 3))
    lo, hi = loop(big, big_y, 1000, 1, 0.299)
    ci = inverted_share_bootstrap(big, big_y, n_boot=1000, rng=1, level=0.299)
    assert (ci.low, ci.high) == (pytest.approx(lo, abs=1e-12), pytest.approx(hi, abs=1e-12))
    assert 0 < lo < 1 / 3 and loop(big, big_y, 1998, 1, 0.299)[0] != lo   # 999 + 999 draws would move it
    # two units and two policies are enough; one of either is not
    same = [[0.0, 1.0], [1.0, 3.0]]
    assert inverted_share_bootstrap(same, same, n_boot=10, rng=0).as_list() == [0.0, 0.0]
    for shape in ((1, 3), (3, 1)):
        with pytest.raises(ValueError, match=rf"^need at least 2 units and 2 policies, got shape \({shape[0]}, {shape[1]}\)$"):
            inverted_share_bootstrap(np.ones(shape), np.ones(shape), n_boot=10, rng=0)


def test_bootstrap_argument_errors_name_the_argument_and_the_rows():
    m = np.ones((3, 2))
    for bad, shown in ((10.0, "float 10.0"), (True, "bool True")):
        with pytest.raises(TypeError, match=rf"^n_boot must be an integer ≥ 10, got {shown}$"):
            inverted_share_bootstrap(m, m, n_boot=bad, rng=0)
    # rows 1-6 hold a NaN in the second column (row 0 is finite): the first five rows are named
    bad = np.zeros((7, 2))
    bad[1:, 1] = np.nan
    with pytest.raises(ValueError, match=r"^per_unit_x must be finite; non-finite values in units \(rows\) \[1, 2, 3, 4, 5\]$"):
        inverted_share_bootstrap(bad, np.zeros((7, 2)), n_boot=10, rng=0)
    with pytest.raises(ValueError, match=r"^per_unit_y must be finite; non-finite values in units \(rows\) \[1, 2, 3, 4, 5\]$"):
        inverted_share_bootstrap(np.zeros((7, 2)), bad, n_boot=10, rng=0)
    with pytest.raises(ValueError, match=r"^per_unit_y must be a 2-D matrix \(units × policies\), got shape \(3,\)$"):
        inverted_share_bootstrap(m, [1.0, 2.0, 3.0], n_boot=10, rng=0)
    with pytest.raises(TypeError, match=r"^per_unit_x must be a numeric matrix \(units × policies\), got list$"):
        inverted_share_bootstrap([["a", "b"], ["c", "d"]], m, n_boot=10, rng=0)


def test_pair_order_counts_and_vector_errors():
    # the first name of an inverted pair is the one x prefers, whichever comes first in the input
    assert agreement([2, 1], [1, 2]).inverted_pairs == (("0", "1"),)
    assert agreement([1, 2], [2, 1]).inverted_pairs == (("1", "0"),)
    # counts stay integers in the exported dict (JSON "3", not "3.0")
    assert json.dumps(agreement([1, 2, 3], [3, 2, 1]).to_dict()["n_pairs"]) == "3"
    # a constant metric is not handed to scipy (whose constant-input warning would reach the page): NaN, silently
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for x, y in (([1, 1, 1], [1, 2, 3]), ([1, 2, 3], [4, 4, 4])):
            a = agreement(x, y)
            assert np.isnan(a.pearson_r) and np.isnan(a.pearson_p) and np.isnan(a.kendall_tau) and a.n_inverted == 0
    # the first five non-finite positions, in the metric that has them
    y = [np.nan] * 7 + [1.0]
    with pytest.raises(ValueError, match=r"^y must be finite; non-finite values at positions \[0, 1, 2, 3, 4\]$"):
        agreement(list(range(8)), y)
    with pytest.raises(ValueError, match=r"^y must be one-dimensional \(one value per policy\), got shape \(1, 2\)$"):
        agreement([1, 2], [[1, 2]])
    with pytest.raises(TypeError, match=r"^y must be a sequence of numbers, got list$"):
        agreement([1, 2], ["a", "b"])
