"""DCG vs nDCG by hand: four policies on two control sessions (and a treatment session that must be left out),
a three-session log with the log2 discount clipped at 1.2, and KDD'24 Table 1 under both normalisers."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from offeval_core.agreement import inverted_share_bootstrap
from offeval_core.analyses import dcg_vs_ndcg, table1_example
from offeval_core.errors import InputError, SpecError, UnknownName, WrongType
from offeval_core.logs import read_logs

L3 = math.log2(3)


def _frame():
    """Control sessions 1, 2 and a treatment session 3, four policies and the logged ranking.

    Control means: DCG a 2, b 1, c 2, d 2; nDCG a 0.375, b 0.5, c 0.5, d 0.125. Pairs: (a, b) inverted (DCG
    prefers a, nDCG b), (b, d) inverted (DCG prefers d, nDCG b); (a, c), (a, d), (c, d) tie in DCG and (b, c) in
    nDCG, so not inverted: 2 of 6. With session 3 the means would be DCG a 18, b 2/3, c 4/3, d 4/3."""
    return pd.DataFrame({
        "session": [1, 2, 3], "arm": ["control", "control", "treatment"],
        "dcg__logging": [5.0, 5.0, 5.0], "dcg__a": [3.0, 1.0, 50.0], "dcg__b": [1.0, 1.0, 0.0],
        "dcg__c": [2.0, 2.0, 0.0], "dcg__d": [2.0, 2.0, 0.0],
        "ndcg__logging": [0.0625, 0.0625, 0.0625], "ndcg__a": [0.25, 0.5, 1.0], "ndcg__b": [0.75, 0.25, 0.0],
        "ndcg__c": [0.5, 0.5, 0.0], "ndcg__d": [0.125, 0.125, 0.0]})


def test_four_policies_by_hand():
    res = dcg_vs_ndcg(_frame(), n_boot=0)
    assert res.n_sessions == 2
    assert res.points.to_dict("list") == {"policy": ["a", "b", "c", "d"], "dcg": [2.0, 1.0, 2.0, 2.0],
                                          "ndcg": [0.375, 0.5, 0.5, 0.125],
                                          # ties share the best rank: three policies tie for DCG's first place
                                          "dcg_rank": [1, 4, 1, 1], "ndcg_rank": [3, 1, 1, 4]}
    assert res.inverted_pairs.to_dict("list") == {"better_by_dcg": ["a", "d"], "better_by_ndcg": ["b", "b"],
                                                  "dcg_a": [2.0, 2.0], "dcg_b": [1.0, 1.0],
                                                  "ndcg_a": [0.375, 0.125], "ndcg_b": [0.5, 0.5]}
    assert (res.agreement.n_inverted, res.n_pairs, res.inverted_share) == (2, 6, 2 / 6)
    # Pearson: dx = (1, −3, 1, 1) / 4, dy = (0, 1, 1, −2) / 8: r = −(1/8) / √(3/4 · 3/32) = −√2 / 3;
    # Kendall τ-b: 0 concordant, 2 discordant, 3 ties in DCG, 1 in nDCG: −2 / √((6 − 3)(6 − 1)) = −2 / √15
    assert res.pearson == pytest.approx(-math.sqrt(2) / 3, rel=1e-12)
    assert res.kendall == pytest.approx(-2 / math.sqrt(15), rel=1e-12)
    assert res.pearson == res.agreement.pearson_r and res.kendall == res.agreement.kendall_tau
    assert res.inverted_ci is None
    assert res.takeaway == ("nDCG would have picked the worse policy (by DCG) in 33 % of pairs (2 of 6); "
                            "Pearson r = -0.47, Kendall τ = -0.52 over 4 policies.")
    assert res.settings == {"reward": None, "discount": "pbm", "exposure": "pbm", "clip": math.inf, "n_boot": 0,
                            "level": 0.99, "arm": "control",
                            "ndcg_zero_rule": "sessions with iDCG = 0 count nDCG = 0"}


def test_every_session_with_arm_none_and_the_logging_policy_when_asked():
    res = dcg_vs_ndcg(_frame(), n_boot=0, arm=None)
    assert res.n_sessions == 3
    assert res.points["dcg"].tolist() == pytest.approx([18.0, 2 / 3, 4 / 3, 4 / 3], rel=1e-12)
    assert res.settings["arm"] is None
    # the logged ranking only when named: DCG 5 > 1 and nDCG 1/16 < 1/2 invert the pair
    res = dcg_vs_ndcg(_frame(), policies=["logging", "b"], n_boot=0)
    assert res.points["policy"].tolist() == ["logging", "b"]
    assert res.inverted_pairs[["better_by_dcg", "better_by_ndcg"]].values.tolist() == [["logging", "b"]]
    # no inverted pair: the frame keeps its columns
    res = dcg_vs_ndcg(_frame(), policies=["c", "d"], n_boot=0)
    assert res.inverted_share == 0.0 and len(res.inverted_pairs) == 0
    assert list(res.inverted_pairs.columns) == ["better_by_dcg", "better_by_ndcg", "dcg_a", "dcg_b", "ndcg_a",
                                                "ndcg_b"]
    assert res.takeaway.startswith("nDCG would have picked the worse policy (by DCG) in 0 % of pairs (0 of 1); ")


def test_bootstrap_resamples_the_control_sessions_at_the_level_asked():
    f = _frame()
    x = f.loc[:1, ["dcg__a", "dcg__b", "dcg__c", "dcg__d"]].to_numpy()
    y = f.loc[:1, ["ndcg__a", "ndcg__b", "ndcg__c", "ndcg__d"]].to_numpy()
    want = inverted_share_bootstrap(x, y, n_boot=200, rng=np.random.default_rng(7), level=0.5)
    for rng in (7, np.random.default_rng(7)):
        res = dcg_vs_ndcg(f, n_boot=200, rng=rng, level=0.5)
        assert res.inverted_ci == want
    # two sessions: a resample holds session 1 twice (means DCG 3, 1, 2, 2 and nDCG 0.25, 0.75, 0.5, 0.125:
    # (a, b), (a, c), (b, c), (b, d) inverted, 4 of 6; probability 1/4), session 2 twice ((a, d) and (b, d), 2 of
    # 6; 1/4) or both (the sample, 2 of 6; 1/2): every share is 1/3 or 2/3
    assert 1 / 3 <= want.low <= want.high <= 2 / 3
    assert want.level == 0.5
    res = dcg_vs_ndcg(f, n_boot=200, rng=7, level=0.5)
    assert res.takeaway == (f"nDCG would have picked the worse policy (by DCG) in 33 % of pairs (2 of 6), 50% CI "
                            f"{100 * want.low:.0f} %–{100 * want.high:.0f} %; Pearson r = -0.47, Kendall τ = -0.52 "
                            "over 4 policies.")
    assert res.settings["n_boot"] == 200 and res.settings["level"] == 0.5
    # at the default level the 99 % interval of the same draws is at least as wide
    wide = dcg_vs_ndcg(f, n_boot=200, rng=7)
    assert wide.inverted_ci == inverted_share_bootstrap(x, y, n_boot=200, rng=np.random.default_rng(7), level=0.99)
    # 1/3 has probability 3/4 and 2/3 has 1/4: the 0.5 % and 99.5 % points of 200 draws are 1/3 and 2/3
    assert (wide.inverted_ci.low, wide.inverted_ci.high) == pytest.approx((1 / 3, 2 / 3), rel=1e-12)


def test_logs_are_turned_into_per_session_values_with_the_discount_exposure_and_clip_asked():
    """log2 discount and exposure, labels clipped at m = 1.2. Session 1 (clicks 0, 1): the click's label is
    min(1.2, 1 / D0(2) = log2 3) = 1.2; policy a puts it first (DCG 1.2), b second (1.2 / log2 3); iDCG 1.2.
    Session 2 (clicks 1, 0): label min(1.2, 1) = 1; a puts it second (1 / log2 3), b first (1); iDCG 1. Session
    3 is in the treatment arm and left out."""
    logs = read_logs(pd.DataFrame({"session_id": [1, 1, 2, 2, 3], "rank": [1, 2, 1, 2, 1],
                                   "click": [0.0, 1.0, 1.0, 0.0, 1.0], "rank__a": [2, 1, 2, 1, 1],
                                   "rank__b": [1, 2, 1, 2, 1],
                                   "arm": ["control", "control", "control", "control", "treatment"]}))
    res = dcg_vs_ndcg(logs, reward="click", discount="log2", exposure="log2", clip=1.2, n_boot=0)
    pts = res.points.set_index("policy")
    assert list(pts.index) == ["a", "b"]
    assert pts.loc["a", "dcg"] == pytest.approx((1.2 + 1 / L3) / 2, rel=1e-12)
    assert pts.loc["b", "dcg"] == pytest.approx((1.2 / L3 + 1) / 2, rel=1e-12)
    assert pts.loc["a", "ndcg"] == pytest.approx((1 + 1 / L3) / 2, rel=1e-12)
    assert pts.loc["b", "ndcg"] == pytest.approx((1 / L3 + 1) / 2, rel=1e-12)
    assert res.n_sessions == 2
    assert res.settings == {"reward": "click", "discount": "log2", "exposure": "log2", "clip": 1.2, "n_boot": 0,
                            "level": 0.99, "arm": "control",
                            "ndcg_zero_rule": "sessions with iDCG = 0 count nDCG = 0"}
    # the logged ranking as a policy: session 1 has the click at rank 2 (1.2 / log2 3), session 2 at rank 1
    res = dcg_vs_ndcg(logs, reward="click", policies=["logging", "a"], discount="log2", exposure="log2", clip=4,
                      n_boot=0)
    pts = res.points.set_index("policy")
    assert list(pts.index) == ["logging", "a"]
    # at m = 4 the click at rank 2 gets its whole weight log2 3
    assert pts.loc["logging", "dcg"] == pytest.approx((L3 / L3 + 1) / 2, rel=1e-12)
    assert pts.loc["a", "dcg"] == pytest.approx((L3 + 1 / L3) / 2, rel=1e-12)
    assert res.settings["clip"] == 4.0 and type(res.settings["clip"]) is float


def test_errors_name_the_problem():
    logs = read_logs(pd.DataFrame({"session_id": [1, 1], "rank": [1, 2], "click": [0.0, 1.0], "rank__a": [2, 1],
                                   "rank__b": [1, 2]}))
    with pytest.raises(InputError) as info:
        dcg_vs_ndcg(logs)
    assert str(info.value) == "reward must name a reward column when logs are given, got None"
    with pytest.raises(SpecError) as info:
        dcg_vs_ndcg(logs, reward="click", clip=0.5)
    assert str(info.value) == "clip must be ≥ 1 (1 = raw labels, inf = unclipped), got 0.5"
    with pytest.raises(WrongType) as info:
        dcg_vs_ndcg({"dcg__a": [1.0]})
    assert str(info.value) == "logs_or_session_values must be Logs or a DataFrame of per-session values, got dict"
    with pytest.raises(SpecError) as info:
        dcg_vs_ndcg(_frame(), level=1.0)
    assert str(info.value) == "level must be strictly between 0 and 1 (e.g. 0.99), got 1.0"
    with pytest.raises(UnknownName) as info:
        dcg_vs_ndcg(_frame(), policies=["a", "zz"])
    assert str(info.value) == "policies ['zz'] have no dcg__/ndcg__ columns; available: logging, a, b, c, d"
    # a DCG column without its nDCG column
    with pytest.raises(UnknownName) as info:
        dcg_vs_ndcg(_frame().drop(columns="ndcg__d"), policies=["a", "d"])
    assert str(info.value) == "policies ['d'] have no dcg__/ndcg__ columns; available: logging, a, b, c, d"
    with pytest.raises(InputError) as info:
        dcg_vs_ndcg(_frame(), policies=["a"])
    assert str(info.value) == "DCG vs nDCG needs at least 2 policies, got ['a']"
    with pytest.raises(InputError) as info:
        dcg_vs_ndcg(_frame()[["arm", "dcg__logging", "ndcg__logging", "dcg__a", "ndcg__a"]])
    assert str(info.value) == "DCG vs nDCG needs at least 2 policies, got ['a']"
    # two policies are enough
    assert dcg_vs_ndcg(_frame(), policies=["a", "b"], n_boot=0).n_pairs == 1


def test_table1_by_hand_under_both_normalisers():
    t = table1_example()
    assert t.normaliser == "paper"
    assert t.quality.to_dict("list") == {"a1": [1.0, 1.0], "a2": [0.0, 2.5]}
    assert list(t.quality.index) == ["x1", "x2"] and t.quality.index.name == "context"
    assert t.choices.to_dict("list") == {"R": ["a1", "a1"], "R'": ["a2", "a2"]}
    # ideal DCG Σ_a ρ(x, a): 1 in x1, 3.5 in x2
    want = {"policy": ["R", "R'"], "DCG(x1)": [1.0, 0.0], "DCG(x2)": [1.0, 2.5], "nDCG(x1)": [1.0, 0.0],
            "nDCG(x2)": [1 / 3.5, 2.5 / 3.5], "DCG(X)": [1.0, 1.25], "nDCG(X)": [(1 + 1 / 3.5) / 2, 2.5 / 3.5 / 2]}
    assert list(t.table.columns) == list(want)
    for col, values in want.items():
        assert t.table[col].tolist() == (values if col == "policy" else pytest.approx(values, rel=1e-12)), col
    assert t.session_values.to_dict("list") == {
        "session": [0, 1], "context": ["x1", "x2"], "dcg__R": [1.0, 1.0], "ndcg__R": [1.0, pytest.approx(1 / 3.5)],
        "dcg__R'": [0.0, 2.5], "ndcg__R'": [0.0, pytest.approx(2.5 / 3.5)]}
    assert t.explanation == ("In each context alone DCG and nDCG agree (Lemma 5.1), but averaged over both contexts "
                             "DCG prefers R' (1.25 vs 1.00) while nDCG prefers R (0.64 vs 0.36): normalising per "
                             "context re-weights the contexts (Lemma 5.2).")
    # top1: the ideal DCG of a one-slot list is max_a ρ(x, a): 1 and 2.5
    top = table1_example(normaliser="top1")
    assert top.normaliser == "top1"
    tab = top.table.set_index("policy")
    assert tab["nDCG(x2)"].tolist() == [0.4, 1.0] and tab["nDCG(X)"].tolist() == pytest.approx([0.7, 0.5])
    assert top.session_values["ndcg__R"].tolist() == [1.0, 0.4]
    assert "while nDCG prefers R (0.70 vs 0.50)" in top.explanation
    res = dcg_vs_ndcg(top.session_values, n_boot=0)
    assert res.inverted_pairs[["better_by_dcg", "better_by_ndcg"]].values.tolist() == [["R'", "R"]]
    with pytest.raises(InputError) as info:
        table1_example(normaliser="max")
    assert str(info.value) == "normaliser must be 'paper' or 'top1', got 'max'"


# eight sessions × five policies whose resampled inverted shares spread over many values, so the bootstrap's
# interval moves with the seed, the number of resamples and the level (each asserted below, so the comparison
# has power)
_X = [[2, 1, 0, 1, 3], [0, 2, 4, 2, 4], [1, 0, 0, 1, 2], [3, 3, 3, 4, 2], [0, 2, 2, 3, 0], [2, 0, 4, 4, 1],
      [1, 0, 3, 1, 1], [0, 3, 4, 0, 3]]
_Y4 = [[2, 0, 4, 0, 2], [4, 2, 1, 1, 1], [3, 2, 0, 0, 3], [0, 0, 0, 4, 0], [2, 3, 2, 1, 1], [1, 4, 2, 1, 3],
       [1, 1, 1, 0, 0], [3, 4, 1, 3, 4]]


def _spread():
    x, y = np.array(_X, dtype=float), np.array(_Y4, dtype=float) / 4
    names = list("pqrst")
    frame = pd.DataFrame({**{f"dcg__{p}": x[:, i] for i, p in enumerate(names)},
                          **{f"ndcg__{p}": y[:, i] for i, p in enumerate(names)}})
    return frame, x, y


def _boot(x, y, n_boot, seed, level):
    return inverted_share_bootstrap(x, y, n_boot=n_boot, rng=np.random.default_rng(seed), level=level)


def test_the_bootstrap_gets_the_seed_the_number_of_resamples_and_the_level():
    frame, x, y = _spread()
    want = _boot(x, y, 10, 7, 0.5)
    assert want != _boot(x, y, 10, 8, 0.5) and want != _boot(x, y, 1000, 7, 0.5) and want != _boot(x, y, 10, 7, 0.99)
    assert dcg_vs_ndcg(frame, n_boot=10, rng=7, level=0.5).inverted_ci == want
    assert dcg_vs_ndcg(frame, n_boot=10, rng=np.random.default_rng(7), level=0.5).inverted_ci == want
    # the defaults: 1000 resamples, seed 0, level 0.99
    default = _boot(x, y, 1000, 0, 0.99)
    assert default != _boot(x, y, 1000, 1, 0.99) and default != _boot(x, y, 1001, 0, 0.99)
    res = dcg_vs_ndcg(frame)
    assert res.inverted_ci == default
    assert res.settings["n_boot"] == 1000 and res.settings["level"] == 0.99


def test_ranks_are_integers_and_ties_share_the_best_rank():
    # three policies tie on both metrics: each is ranked 1 (the average rank would be 2), the fourth is 4th
    f = pd.DataFrame({"dcg__a": [1.0, 3.0], "dcg__b": [2.0, 2.0], "dcg__c": [0.0, 4.0], "dcg__d": [0.0, 1.0],
                      "ndcg__a": [0.5, 0.25], "ndcg__b": [0.25, 0.5], "ndcg__c": [0.375, 0.375],
                      "ndcg__d": [0.0, 0.5]})
    pts = dcg_vs_ndcg(f, n_boot=0).points
    assert pts["dcg_rank"].tolist() == [1, 1, 1, 4] and pts["ndcg_rank"].tolist() == [1, 1, 1, 4]
    assert pts["dcg_rank"].dtype == np.int64 and pts["ndcg_rank"].dtype == np.int64


def test_value_columns_of_python_objects_are_read_as_numbers():
    frame, _, _ = _spread()
    res = dcg_vs_ndcg(frame.astype(object), n_boot=0)
    assert res.points["dcg"].dtype == np.float64 and res.points["ndcg"].dtype == np.float64
    # DCG means: p 9/8, q 11/8, r 20/8, s 16/8, t 16/8
    assert res.points["dcg"].tolist() == [1.125, 1.375, 2.5, 2.0, 2.0]
