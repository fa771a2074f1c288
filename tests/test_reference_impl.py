"""Self-tests of the reference implementation on hand-computed examples.

Expected numbers come from the textbook DCG example (dcg_wikipedia.txt), Table 1 of the KDD'24 paper
(jeunen2024_ndcg_ope.txt, Sec. 5) and small examples worked out by hand in the comments.
"""

from __future__ import annotations

import math
import re

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from reference_impl import (
    ref_cutoff,
    ref_exponential,
    ref_learnt_pbm,
    ref_log2,
    ref_paired_effect,
    ref_policy_value,
    ref_reciprocal,
    ref_session_values,
)


def one(_r: int) -> float:
    return 1.0


NO_DEBIAS = dict(exposure=one, clip=1)


# ----------------------------------------------------------------------------------------------------------
# discount models
# ----------------------------------------------------------------------------------------------------------
def test_discount_models_closed_form():
    assert ref_log2(1) == 1.0
    assert ref_log2(3) == 0.5  # 1 / log2(4)
    assert ref_log2(7) == pytest.approx(1 / 3)  # 1 / log2(8)
    assert ref_reciprocal(4) == 0.25
    assert ref_exponential(0.5)(1) == 1.0
    assert ref_exponential(0.5)(3) == 0.25
    cut = ref_cutoff(ref_reciprocal, 2)
    assert [cut(r) for r in (1, 2, 3, 10)] == [1.0, 0.5, 0.0, 0.0]


def test_discount_model_bad_parameters():
    with pytest.raises(ValueError, match=r"p must be in \(0, 1\], got 0"):
        ref_exponential(0)
    with pytest.raises(ValueError, match="n must be >= 1, got 0"):
        ref_cutoff(ref_log2, 0)


# ----------------------------------------------------------------------------------------------------------
# textbook example (dcg_wikipedia.txt, "Example"): relevances 3, 2, 3, 0, 1, 2 at ranks 1..6; two more
# known documents (relevance 3 and 2) are in the ideal ordering, which is cut to length 6. We log the two
# extra documents at ranks 7 and 8 and cut the log2 discount at 6: they add nothing to DCG, and iDCG is
# the top-6 of the sorted labels 3, 3, 3, 2, 2, 2, 1, 0 — exactly the textbook IDCG_6.
# ----------------------------------------------------------------------------------------------------------
def _wiki_frame() -> pd.DataFrame:
    rel = [3, 2, 3, 0, 1, 2, 3, 2]
    swapped = [1, 2, 4, 3, 5, 6, 7, 8]  # documents 3 and 4 exchange places
    return pd.DataFrame(
        {
            "session_id": ["q"] * 8,
            "rank": list(range(1, 9)),
            "rel": rel,
            "gain_exp": [2**x - 1 for x in rel],
            "rank__swap": swapped,
        }
    )


L3, L6, L7 = math.log2(3), math.log2(6), math.log2(7)


@pytest.mark.parametrize(
    ("reward", "policy", "dcg", "idcg", "ndcg"),
    [
        # 3 + 2/1.585 + 3/2 + 0 + 1/2.585 + 2/2.807 = 6.861 (textbook table), ideal
        # 3 + 3/1.585 + 3/2 + 2/2.322 + 2/2.585 + 2/2.807 = 8.740, nDCG = 0.785 (textbook values)
        ("rel", None, 6.861, 8.740, 0.785),
        # switching documents 3 and 4: 3 + 1.262 + 0 + 3/2.322 + 0.387 + 0.712 = 6.653
        ("rel", "swap", 6.653, 8.740, 0.761),
        # gains 2^rel − 1 = 7, 3, 7, 0, 1, 3: 7 + 3/1.585 + 7/2 + 0 + 1/2.585 + 3/2.807 = 13.848;
        # ideal gains 7, 7, 7, 3, 3, 3: 7 + 4.416 + 3.5 + 1.292 + 1.161 + 1.069 = 18.438
        ("gain_exp", None, 13.848, 18.438, 0.751),
        # swapped: 7 + 1.893 + 0 + 7/2.322 + 0.387 + 1.069 = 13.363
        ("gain_exp", "swap", 13.363, 18.438, 0.725),
    ],
)
def test_textbook_example(reward, policy, dcg, idcg, ndcg):
    sv = ref_session_values(
        _wiki_frame(), reward=reward, policy=policy, discount=ref_cutoff(ref_log2, 6), **NO_DEBIAS
    )
    assert round(sv.at["q", "dcg"], 3) == dcg
    assert round(sv.at["q", "idcg"], 3) == idcg
    assert round(sv.at["q", "ndcg"], 3) == ndcg


def test_textbook_example_closed_form():
    sv = ref_session_values(
        _wiki_frame(), reward="rel", policy=None, discount=ref_cutoff(ref_log2, 6), **NO_DEBIAS
    )
    assert sv.at["q", "dcg"] == pytest.approx(3 + 2 / L3 + 3 / 2 + 1 / L6 + 2 / L7)
    assert sv.at["q", "idcg"] == pytest.approx(3 + 3 / L3 + 3 / 2 + 2 / math.log2(5) + 2 / L6 + 2 / L7)


# ----------------------------------------------------------------------------------------------------------
# KDD'24 Table 1: two contexts x1, x2, items a1, a2 with E[Q] = (1, 0) and (1, 2.5); top-1 models
# R (a1 first) and R' (a2 first). A top-1 model's DCG is the label of the item at rank 1: the discount is
# cut at rank 1. Logged ranks are R's.
# ----------------------------------------------------------------------------------------------------------
def _table1_frame() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "session_id": ["x1", "x1", "x2", "x2"],
            "item_id": ["a1", "a2", "a1", "a2"],
            "rank": [1, 2, 1, 2],
            "q": [1.0, 0.0, 1.0, 2.5],
            "rank__R": [1, 2, 1, 2],
            "rank__Rp": [2, 1, 2, 1],
        }
    )


TOP1 = ref_cutoff(one, 1)


def test_table1_dcg():
    df = _table1_frame()
    # DCG(X, R) = (1 + 1) / 2 = 1.00; DCG(X, R') = (0 + 2.5) / 2 = 1.25
    assert ref_policy_value(df, reward="q", policy="R", discount=TOP1, metric="dcg", **NO_DEBIAS) == 1.0
    assert ref_policy_value(df, reward="q", policy="Rp", discount=TOP1, metric="dcg", **NO_DEBIAS) == 1.25


def test_table1_ndcg_ideal_sums_all_items():
    # The table's ideal is the sum of every item's quality: 1 for x1, 1 + 2.5 = 3.5 for x2, so
    # nDCG(x2) = 1 / 3.5 = 0.29 for R and 2.5 / 3.5 = 0.71 for R'; means (1 + 0.29) / 2 = 0.64 and
    # (0 + 0.71) / 2 = 0.36 — nDCG prefers R although DCG prefers R' (Lemma 5.2).
    df = _table1_frame()
    kw = dict(reward="q", discount=TOP1, ideal_discount=one, **NO_DEBIAS)
    r = ref_session_values(df, policy="R", **kw)
    rp = ref_session_values(df, policy="Rp", **kw)
    assert [round(x, 2) for x in r["ndcg"]] == [1.00, 0.29]
    assert [round(x, 2) for x in rp["ndcg"]] == [0.00, 0.71]
    assert round(ref_policy_value(df, policy="R", metric="ndcg", **kw), 2) == 0.64
    assert round(ref_policy_value(df, policy="Rp", metric="ndcg", **kw), 2) == 0.36
    assert ref_policy_value(df, policy="R", metric="ndcg", **kw) == pytest.approx((1 + 1 / 3.5) / 2)


def test_table1_ndcg_ideal_cut_at_rank_1():
    # With the ideal also cut at rank 1 (our definition: same discount), iDCG(x2) = max quality = 2.5:
    # nDCG(x2) = 1 / 2.5 = 0.4 for R and 1.0 for R'; means (1 + 0.4) / 2 = 0.70 and (0 + 1) / 2 = 0.50.
    # The inversion persists: nDCG still prefers R.
    df = _table1_frame()
    kw = dict(reward="q", discount=TOP1, **NO_DEBIAS)
    assert ref_policy_value(df, policy="R", metric="ndcg", **kw) == pytest.approx(0.70)
    assert ref_policy_value(df, policy="Rp", metric="ndcg", **kw) == pytest.approx(0.50)
    # pnDCG divides by the mean ideal (1 + 2.5) / 2 = 1.75: 1 / 1.75 < 1.25 / 1.75, consistent with DCG.
    assert ref_policy_value(df, policy="R", metric="pndcg", **kw) == pytest.approx(1 / 1.75)
    assert ref_policy_value(df, policy="Rp", metric="pndcg", **kw) == pytest.approx(1.25 / 1.75)


# ----------------------------------------------------------------------------------------------------------
# clipping (Sec. 6.2): exposure D0 = 0.5^(r−1) -> 1/D0 = 1, 2, 4 at ranks 1, 2, 3; discount D = 1/r.
# Session s1: rewards 1, 0, 1 at ranks 1, 2, 3, target ranks 3, 1, 2. Session s2: no reward.
# ----------------------------------------------------------------------------------------------------------
def _clip_frame() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "session_id": ["s1", "s1", "s1", "s2", "s2"],
            "rank": [1, 2, 3, 1, 2],
            "click": [1, 0, 1, 0, 0],
            "rank__t": [3, 1, 2, 2, 1],
        }
    )


CLIP_KW = dict(reward="click", discount=ref_reciprocal, exposure=ref_exponential(0.5))


@pytest.mark.parametrize(
    ("clip", "dcg_t", "dcg_0", "idcg"),
    [
        # m = 1: labels 1, 0, 1. target 1/3 + 1/2 = 5/6; logging 1 + 1/3 = 4/3; ideal 1 + 1/2 = 3/2
        (1, 5 / 6, 4 / 3, 3 / 2),
        # m = 2: labels 1, 0, min(2, 4) = 2. target 1/3 + 2/2 = 4/3; logging 1 + 2/3 = 5/3; ideal 2 + 1/2
        (2, 4 / 3, 5 / 3, 5 / 2),
        # m = 3: labels 1, 0, 3. target 1/3 + 3/2 = 11/6; logging 1 + 1 = 2; ideal 3 + 1/2
        (3, 11 / 6, 2, 7 / 2),
        # m >= 4 no longer binds: labels 1, 0, 4. target 1/3 + 2 = 7/3; logging 1 + 4/3 = 7/3; ideal 4 + 1/2
        (4, 7 / 3, 7 / 3, 9 / 2),
        (math.inf, 7 / 3, 7 / 3, 9 / 2),
    ],
)
def test_clipping_hand_computed(clip, dcg_t, dcg_0, idcg):
    df = _clip_frame()
    t = ref_session_values(df, policy="t", clip=clip, **CLIP_KW)
    lg = ref_session_values(df, policy=None, clip=clip, **CLIP_KW)
    assert t.at["s1", "dcg"] == pytest.approx(dcg_t)
    assert lg.at["s1", "dcg"] == pytest.approx(dcg_0)
    assert t.at["s1", "idcg"] == pytest.approx(idcg)
    assert lg.at["s1", "idcg"] == pytest.approx(idcg)
    assert t.at["s1", "ndcg"] == pytest.approx(dcg_t / idcg)
    assert t.loc["s2"].tolist() == [0.0, 0.0, 0.0]
    # policy values over the two sessions (s2 contributes 0 to every sum)
    assert ref_policy_value(df, policy="t", clip=clip, metric="dcg", **CLIP_KW) == pytest.approx(dcg_t / 2)
    assert ref_policy_value(df, policy="t", clip=clip, metric="ndcg", **CLIP_KW) == pytest.approx(
        dcg_t / idcg / 2
    )
    assert ref_policy_value(
        df, policy="t", clip=clip, metric="ndcg", ndcg_rule="drop", **CLIP_KW
    ) == pytest.approx(dcg_t / idcg)
    assert ref_policy_value(df, policy="t", clip=clip, metric="pndcg", **CLIP_KW) == pytest.approx(
        (dcg_t / 2) / (idcg / 2)
    )


def test_drop_rule_removes_sessions_without_ideal():
    sv = ref_session_values(_clip_frame(), policy="t", clip=2, ndcg_rule="drop", **CLIP_KW)
    assert sv.index.tolist() == ["s1"]
    # pnDCG and DCG ignore the nDCG rule: still averaged over both sessions
    assert ref_policy_value(
        _clip_frame(), policy="t", clip=2, metric="dcg", ndcg_rule="drop", **CLIP_KW
    ) == pytest.approx(2 / 3)


def test_zero_exposure_takes_the_clip():
    # D0 = 0.5^(r−1) cut at rank 2: D0(3) = 0, so 1/D0 = inf and the rank-3 label is c · m.
    kw = dict(reward="click", discount=ref_reciprocal, exposure=ref_cutoff(ref_exponential(0.5), 2))
    for m in (2, 8):
        lg = ref_session_values(_clip_frame(), policy=None, clip=m, **kw)
        assert lg.at["s1", "dcg"] == pytest.approx(1 + m / 3)
    lg = ref_session_values(_clip_frame(), policy=None, clip=math.inf, **kw)
    assert lg.at["s1", "dcg"] == math.inf
    assert lg.at["s2", "dcg"] == 0.0  # no reward, no infinite label


def test_paired_effect_hand_computed():
    df = _clip_frame()
    # m = 2, DCG: differences s1 4/3 − 5/3 = −1/3, s2 0. mean −1/6; sd = sqrt(2 · (1/6)^2 / 1) = sqrt(2)/6;
    # stderr = sd / sqrt(2) = 1/6
    mean, se = ref_paired_effect(df, policy="t", clip=2, metric="dcg", **CLIP_KW)
    assert mean == pytest.approx(-1 / 6)
    assert se == pytest.approx(1 / 6)
    # nDCG (zero rule): s1 (4/3)/(5/2) − (5/3)/(5/2) = 8/15 − 2/3 = −2/15, s2 0 -> mean −1/15, stderr 1/15
    mean, se = ref_paired_effect(df, policy="t", clip=2, metric="ndcg", **CLIP_KW)
    assert mean == pytest.approx(-1 / 15)
    assert se == pytest.approx(1 / 15)
    # drop rule: only s1 is left; one difference has no standard error
    mean, se = ref_paired_effect(df, policy="t", clip=2, metric="ndcg", ndcg_rule="drop", **CLIP_KW)
    assert mean == pytest.approx(-2 / 15)
    assert math.isnan(se)


# ----------------------------------------------------------------------------------------------------------
# learnt pbm: share of sessions whose maximum logged rank reaches r
# ----------------------------------------------------------------------------------------------------------
def _lengths_frame(lengths: list[int], arms: list[str]) -> pd.DataFrame:
    rows = []
    for s, (n, arm) in enumerate(zip(lengths, arms, strict=True)):
        for r in range(1, n + 1):
            rows.append({"session_id": s, "rank": r, "arm": arm})
    return pd.DataFrame(rows)


def test_learnt_pbm_hand_computed():
    df = _lengths_frame([3, 1, 2, 3, 5], ["control"] * 4 + ["treatment"])
    control = ref_learnt_pbm(df, floor=0.01, arm="control")
    # control lengths 3, 1, 2, 3: reach rank 1: 4/4, rank 2: 3/4, rank 3: 2/4, beyond: floor
    assert [control(r) for r in (1, 2, 3, 4, 5, 100)] == [1.0, 0.75, 0.5, 0.01, 0.01, 0.01]
    everyone = ref_learnt_pbm(df, floor=0.01)
    # all lengths 3, 1, 2, 3, 5: 5/5, 4/5, 3/5, 1/5, 1/5, then floor
    assert [everyone(r) for r in (1, 2, 3, 4, 5, 6)] == pytest.approx([1.0, 0.8, 0.6, 0.2, 0.2, 0.01])
    # the floor also lifts observed shares below it
    assert ref_learnt_pbm(df, floor=0.3)(4) == 0.3


def test_learnt_pbm_uses_maximum_rank_not_row_count():
    # a session with rows at ranks 1 and 4 only still reaches rank 4
    df = pd.DataFrame({"session_id": [1, 1, 2], "rank": [1, 4, 1]})
    pbm = ref_learnt_pbm(df, floor=0.0)
    assert [pbm(r) for r in (1, 2, 4, 5)] == [1.0, 0.5, 0.5, 0.0]


# ----------------------------------------------------------------------------------------------------------
# identity: with D = D0 and no clipping the logging policy's DCG is the observed reward sum (Eq. 9)
# ----------------------------------------------------------------------------------------------------------
sessions_strategy = st.lists(
    st.lists(st.integers(min_value=0, max_value=3), min_size=1, max_size=8),  # rewards at ranks 1..t
    min_size=1,
    max_size=12,
)


def _frame_from_rewards(sessions: list[list[int]]) -> pd.DataFrame:
    rows = []
    for s, rewards in enumerate(sessions):
        t = len(rewards)
        for r, c in enumerate(rewards, start=1):
            rows.append({"session_id": f"s{s}", "rank": r, "c": c, "rank__rev": t + 1 - r, "arm": "control"})
    return pd.DataFrame(rows)


@settings(max_examples=60, deadline=None)
@given(sessions_strategy)
def test_unclipped_logging_dcg_equals_reward_sum(sessions):
    df = _frame_from_rewards(sessions)
    models = [ref_learnt_pbm(df, floor=0.05, arm="control"), ref_exponential(0.7), ref_log2]
    for model in models:
        sv = ref_session_values(df, reward="c", policy=None, discount=model, exposure=model, clip=math.inf)
        for s, rewards in enumerate(sessions):
            assert sv.at[f"s{s}", "dcg"] == pytest.approx(sum(rewards))


@settings(max_examples=60, deadline=None)
@given(sessions_strategy, st.sampled_from([1, 2, 16, math.inf]))
def test_ndcg_within_unit_interval_for_a_permutation(sessions, clip):
    # with a non-increasing discount and target ranks a permutation of 1..t, DCG <= iDCG (rearrangement)
    df = _frame_from_rewards(sessions)
    sv = ref_session_values(
        df, reward="c", policy="rev", discount=ref_log2, exposure=ref_exponential(0.6), clip=clip
    )
    for ndcg in sv["ndcg"]:
        assert 0.0 <= ndcg <= 1.0 + 1e-12


# ----------------------------------------------------------------------------------------------------------
# bad input
# ----------------------------------------------------------------------------------------------------------
def test_bad_arguments():
    df = _clip_frame()
    with pytest.raises(ValueError, match=re.escape("clip must be >= 1, got 0.5")):
        ref_session_values(df, policy="t", clip=0.5, **CLIP_KW)
    with pytest.raises(ValueError, match="metric must be 'dcg', 'ndcg' or 'pndcg', got 'map'"):
        ref_policy_value(df, policy="t", clip=2, metric="map", **CLIP_KW)
    with pytest.raises(ValueError, match="policy 'nope': column 'rank__nope' is missing"):
        ref_session_values(df, policy="nope", clip=2, **CLIP_KW)
    with pytest.raises(ValueError, match="ndcg_rule must be 'zero' or 'drop', got 'skip'"):
        ref_session_values(df, policy="t", clip=2, ndcg_rule="skip", **CLIP_KW)
    with pytest.raises(ValueError, match="metric must be 'dcg' or 'ndcg' for a paired effect, got 'pndcg'"):
        ref_paired_effect(df, policy="t", clip=2, metric="pndcg", **CLIP_KW)
