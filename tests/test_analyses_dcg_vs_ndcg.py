import itertools

import numpy as np
import pandas as pd
import pytest
from analyses_world import small_world
from scipy import stats as sps

from offeval_core.analyses import dcg_vs_ndcg, table1_example
from offeval_core.estimators import session_values


def test_table1_numbers_follow_from_the_labels():
    t = table1_example().table.set_index("policy")
    # ideal DCG of x2 is 1.0 + 2.5 = 3.5 (the paper's normaliser), of x1 it is 1.0
    assert t.loc["R", "nDCG(x2)"] == pytest.approx(1 / 3.5)
    assert t.loc["R'", "nDCG(x2)"] == pytest.approx(2.5 / 3.5)
    assert t.loc["R", "nDCG(X)"] == pytest.approx((1 + 1 / 3.5) / 2)  # 0.64 in the paper
    assert t.loc["R'", "nDCG(X)"] == pytest.approx((0 + 2.5 / 3.5) / 2)  # 0.36
    assert (t.loc["R", "DCG(X)"], t.loc["R'", "DCG(X)"]) == (1.0, 1.25)
    assert round(t.loc["R", "nDCG(X)"], 2) == 0.64 and round(t.loc["R'", "nDCG(X)"], 2) == 0.36
    top1 = table1_example(normaliser="top1").table.set_index("policy")
    assert top1.loc["R", "nDCG(X)"] == pytest.approx(0.7) and top1.loc["R'", "nDCG(X)"] == pytest.approx(0.5)


def test_table1_inverts_its_single_pair():
    res = dcg_vs_ndcg(table1_example().session_values, n_boot=50, rng=1)
    assert res.inverted_share == 1.0
    assert list(res.inverted_pairs[["better_by_dcg", "better_by_ndcg"]].iloc[0]) == ["R'", "R"]
    assert res.inverted_ci.low <= res.inverted_ci.high


def test_pair_counting_on_a_hand_made_frame():
    # 4 policies over 3 sessions; means: DCG (2, 1, 3, 0.5), nDCG (0.2, 0.5, 0.4, 0.1)
    dcg = np.array([[2, 1, 3, 0.5], [2, 1, 3, 0.5], [2, 1, 3, 0.5]], dtype=float)
    ndcg = np.array([[0.2, 0.5, 0.4, 0.1]] * 3)
    names = ["a", "b", "c", "d"]
    sv = pd.DataFrame({**{f"dcg__{p}": dcg[:, i] for i, p in enumerate(names)},
                       **{f"ndcg__{p}": ndcg[:, i] for i, p in enumerate(names)}})
    res = dcg_vs_ndcg(sv, n_boot=0)
    x, y = dcg.mean(0), ndcg.mean(0)
    inverted = [(i, j) for i, j in itertools.combinations(range(4), 2) if (x[i] - x[j]) * (y[i] - y[j]) < 0]
    assert res.agreement.n_inverted == len(inverted) == 2  # (a, b) and (b, c)
    assert res.inverted_share == pytest.approx(2 / 6)
    assert res.kendall == pytest.approx(sps.kendalltau(x, y).statistic)
    assert res.pearson == pytest.approx(sps.pearsonr(x, y).statistic)
    assert res.inverted_ci is None
    assert "33 % of pairs (2 of 6)" in res.takeaway


def test_points_from_logs_are_control_session_means():
    _, logs, _ = small_world()
    res = dcg_vs_ndcg(logs, reward="like", policies=["cand_01", "cand_09", "cand_10", "treatment"], clip=64.0,
                      n_boot=100, rng=np.random.default_rng(3))
    sv = session_values(logs, reward="like", policies=["cand_01", "cand_09", "cand_10", "treatment"], clip=64.0)
    sv = sv[sv["arm"].astype(str) == "control"]
    pts = res.points.set_index("policy")
    for p in pts.index:
        assert pts.loc[p, "dcg"] == pytest.approx(sv[f"dcg__{p}"].mean())
        assert pts.loc[p, "ndcg"] == pytest.approx(sv[f"ndcg__{p}"].mean())
    assert res.n_sessions == len(sv)
    assert 0 <= res.inverted_ci.low <= res.inverted_ci.high <= 1
    again = dcg_vs_ndcg(logs, reward="like", policies=["cand_01", "cand_09", "cand_10", "treatment"], clip=64.0,
                        n_boot=100, rng=np.random.default_rng(3))
    assert again.inverted_ci == res.inverted_ci  # seeded


def test_bad_arguments():
    _, logs, _ = small_world()
    with pytest.raises(ValueError, match="reward must name a reward column"):
        dcg_vs_ndcg(logs)
    with pytest.raises(ValueError, match="unknown policy 'nope'"):
        dcg_vs_ndcg(logs, reward="like", policies=["nope", "cand_01"])
    with pytest.raises(ValueError, match="at least 2 policies"):
        dcg_vs_ndcg(table1_example().session_values, policies=["R"], n_boot=0)
    with pytest.raises(TypeError, match="must be Logs or a DataFrame"):
        dcg_vs_ndcg([1, 2])
    with pytest.raises(ValueError, match="normaliser must be 'paper' or 'top1'"):
        table1_example(normaliser="ideal")
