"""analyses._common by hand: variants and their labels, the checks' exact messages, merging moments, pct, finite.

The moments here are built by hand (two small frames and a grid), so every merged row and every union is known.
"""

from __future__ import annotations

import math
import re

import numpy as np
import pandas as pd
import pytest

from offeval_core.analyses._common import (
    Variant,
    as_variant,
    check_in_grid,
    check_moments,
    check_policy_in,
    check_rewards,
    finite,
    merge_moments,
    pct,
    variant_label,
)
from offeval_core.engine import Grid, Moments
from offeval_core.errors import InputError, SpecError, UnknownName, WrongType

INF = math.inf
P = "propensity"


def test_as_variant_accepts_a_variant_or_a_four_sequence_and_normalises_it():
    v = Variant("dcg", "pbm", "pbm", 4.0)
    assert as_variant(v) == v
    got = as_variant(["ndcg", 1, 2, 4])           # a list, non-text models, an integer clip
    assert got == ("ndcg", "1", "2", 4.0) and isinstance(got, Variant)
    assert type(got.discount) is str and type(got.exposure) is str and type(got.clip) is float
    assert as_variant(("cis", P, P, INF)) == ("cis", P, P, INF)


@pytest.mark.parametrize("bad", ["dcg1", ("dcg", "pbm", "pbm"), ("dcg", "pbm", "pbm", 1.0, 2.0), 7, None])
def test_as_variant_rejects_anything_but_a_four_sequence(bad):
    # a text of four characters is a sequence of length 4, but not a variant
    with pytest.raises(WrongType) as info:
        as_variant(bad)
    assert str(info.value) == f"variant must be a (metric, discount, exposure, clip) tuple, got {bad!r}"
    with pytest.raises(WrongType) as info:
        as_variant(bad, name="estimators")
    assert str(info.value) == f"estimators must be a (metric, discount, exposure, clip) tuple, got {bad!r}"


def test_as_variant_checks_the_metric_and_the_clip_under_its_name():
    with pytest.raises(SpecError, match=re.escape("variant metric must be one of 'dcg', 'ndcg', 'pndcg', 'is', ")):
        as_variant(("DCG", "pbm", "pbm", 1.0))
    with pytest.raises(SpecError, match=re.escape("estimators metric must be one of 'dcg', ")):
        as_variant(("nope", "pbm", "pbm", 1.0), name="estimators")
    with pytest.raises(SpecError) as info:
        as_variant(("dcg", "pbm", "pbm", 0.5))
    assert str(info.value) == "variant clip must be ≥ 1 (1 = raw labels, inf = unclipped), got 0.5"
    with pytest.raises(SpecError) as info:
        as_variant(("dcg", "pbm", "pbm", 0.5), name="columns")
    assert str(info.value) == "columns clip must be ≥ 1 (1 = raw labels, inf = unclipped), got 0.5"


@pytest.mark.parametrize(("variant", "label"), [
    (("dcg", "pbm", "pbm", 1.0), "DCG (pbm, C)"),
    (("dcg", "log2", "pbm", 1.0), "DCG (log2, C)"),          # raw labels: D0 is not used, so not named
    (("dcg", "pbm", "pbm", INF), "DCG (pbm, Q̂)"),
    (("dcg", "log2", "pbm", INF), "DCG (D=log2, D0=pbm, Q̂)"),
    (("ndcg", "pbm", "pbm", 64.0), "nDCG (pbm, Q̂ m=64)"),
    (("pndcg", "pbm", "log2", 2.5), "pnDCG (D=pbm, D0=log2, Q̂ m=2.5)"),
    (("dcg", "pbm", "pbm", 2.0), "DCG (pbm, Q̂ m=2)"),
    # importance weights: the clip is the cap c, left out only for IS and SNIPS uncapped
    (("is", P, P, INF), "IS (propensity)"),
    (("snips@impression", P, P, INF), "SNIPS per impression (propensity)"),
    (("is", P, P, 8.0), "IS (propensity, c = 8)"),
    (("is@impression", P, P, 1.0), "IS per impression (propensity, c = 1)"),
    (("cis", P, P, INF), "CIS (propensity, c = ∞)"),
    (("ncis-zero", P, P, 16.0), "NCIS (zero-capping) (propensity, c = 16)"),
])
def test_variant_label_by_hand(variant, label):
    v = Variant(*variant)
    assert variant_label(v) == label
    assert v.label == label


def _moments(rewards=("click",), policies=("a", "b"), discounts=("log2",), exposures=("log2",), clips=(1, INF),
             rule="zero", offline=None, online=None, labels=None, source=""):
    offline = pd.DataFrame() if offline is None else offline
    online = pd.DataFrame() if online is None else online
    return Moments(offline=offline, online=online, grid=Grid(rewards=rewards, policies=policies, discounts=discounts,
                                                             exposures=exposures, clips=clips, ndcg_rule=rule),
                   discount_labels=labels or {}, source=source)


def test_check_in_grid_names_the_variant_whose_value_is_missing():
    m = _moments(discounts=("log2", "pbm"), exposures=("log2",), clips=(1, 4, INF))
    check_in_grid(m, Variant("dcg", "pbm", "log2", 4.0))   # computed: no error
    cases = [(Variant("dcg", "log2", "log2", 8.0), "clip 8 of DCG (log2, Q̂ m=8) was not computed; available: 1, 4, inf"),
             (Variant("ndcg", "exponential:0.8", "log2", 1.0),
              "discount 'exponential:0.8' of nDCG (exponential:0.8, C) was not computed; available: log2, pbm"),
             (Variant("dcg", "log2", "pbm", INF),
              "exposure 'pbm' of DCG (D=log2, D0=pbm, Q̂) was not computed; available: log2")]
    for v, message in cases:
        with pytest.raises(UnknownName) as info:
            check_in_grid(m, v)
        assert str(info.value) == message


def test_check_moments_policy_and_rewards():
    m = _moments(rewards=("like", "click"))
    assert check_moments(m) is m and check_moments(m, name="parts") is m
    with pytest.raises(WrongType) as info:
        check_moments({"offline": None})
    assert str(info.value) == "moments must be offeval_core.engine.Moments (from engine.reduce), got dict"
    with pytest.raises(WrongType) as info:
        check_moments("m.parquet", name="parts")
    assert str(info.value) == "parts must be offeval_core.engine.Moments (from engine.reduce), got str"
    assert check_policy_in(m, "b") == "b"
    with pytest.raises(UnknownName) as info:
        check_policy_in(m, "logging")
    assert str(info.value) == "policy 'logging' was not computed; available: a, b"
    # rewards: all computed ones by default, one name, or the names asked in their order
    assert check_rewards(m, None) == ("like", "click")
    assert check_rewards(m, "click") == ("click",)
    assert check_rewards(m, ["click", "like"]) == ("click", "like")
    assert check_rewards(m, (r for r in ["like"])) == ("like",)
    with pytest.raises(InputError) as info:
        check_rewards(m, [])
    assert str(info.value) == "rewards must name at least one reward, got an empty sequence"
    with pytest.raises(UnknownName) as info:
        check_rewards(m, ["click", "watch"])
    assert str(info.value) == "reward 'watch' was not computed; available: like, click"
    with pytest.raises(UnknownName) as info:
        check_rewards(m, "cli")        # one name, not its characters
    assert str(info.value) == "reward 'cli' was not computed; available: like, click"


def _offline(rows):
    cols = ["experiment_id", "arm", "reward", "discount", "exposure", "clip", "policy", "metric", "n", "sum"]
    return pd.DataFrame(rows, columns=cols)


def _online(rows):
    return pd.DataFrame(rows, columns=["experiment_id", "arm", "reward", "n", "sum"])


def test_merge_moments_by_hand():
    a = _moments(rewards=("click",), policies=("a",), discounts=("log2",), exposures=("log2",), clips=(1, INF),
                 offline=_offline([("e1", "control", "click", "log2", "log2", 1.0, "a", "dcg", 3, 1.5),
                                   ("e1", "control", "click", "log2", "log2", INF, "a", "dcg", 3, 2.5)]),
                 online=_online([("e1", "control", "click", 3, 2.0), ("e1", "treatment", "click", 4, 1.0)]),
                 labels={"log2": "1/log2(1+k)"}, source="first.parquet")
    # b repeats a's (log2, m = 1) row with another sum (kept once: a's) and a's control online row; it adds pbm,
    # m = 4, policy b, reward like
    b = _moments(rewards=("like", "click"), policies=("b", "a"), discounts=("pbm", "log2"), exposures=("pbm",),
                 clips=(4, 1),
                 offline=_offline([("e1", "control", "click", "log2", "log2", 1.0, "a", "dcg", 3, 99.0),
                                   ("e1", "control", "like", "pbm", "pbm", 4.0, "b", "ndcg", 2, 0.5),
                                   ("e1", "control", "click", "log2", "log2", 1.0, "a", "ndcg", 3, 0.7)]),
                 online=_online([("e1", "control", "click", 3, 5.0), ("e1", "control", "like", 3, 1.0)]),
                 labels={"pbm": "learnt"}, source="second.parquet")
    m = merge_moments(a, b)
    assert m.grid == Grid(rewards=("click", "like"), policies=("a", "b"), discounts=("log2", "pbm"),
                          exposures=("log2", "pbm"), clips=(1, 4, INF))
    assert m.grid.ndcg_rule == "zero"
    assert list(m.offline.columns) == list(a.offline.columns)
    assert list(m.offline.index) == [0, 1, 2, 3]
    assert m.offline[["reward", "discount", "clip", "metric", "sum"]].values.tolist() == [
        ["click", "log2", 1.0, "dcg", 1.5], ["click", "log2", INF, "dcg", 2.5], ["like", "pbm", 4.0, "ndcg", 0.5],
        ["click", "log2", 1.0, "ndcg", 0.7]]
    assert list(m.online.columns) == list(a.online.columns) and list(m.online.index) == [0, 1, 2]
    assert m.online[["arm", "reward", "sum"]].values.tolist() == [["control", "click", 2.0],
                                                                   ["treatment", "click", 1.0],
                                                                   ["control", "like", 1.0]]
    assert m.discount_labels == {"log2": "1/log2(1+k)", "pbm": "learnt"}
    assert m.source == "first.parquet"
    # rows that differ only in the group keys are different rows
    c = _moments(offline=_offline([("e2", "control", "click", "log2", "log2", 1.0, "a", "dcg", 1, 4.0),
                                   ("e1", "treatment", "click", "log2", "log2", 1.0, "a", "dcg", 1, 5.0)]),
                 online=_online([("e2", "control", "click", 1, 1.0)]))
    assert merge_moments(a, c).offline["sum"].tolist() == [1.5, 2.5, 4.0, 5.0]
    assert merge_moments(a, c).online["sum"].tolist() == [2.0, 1.0, 1.0]
    one = merge_moments(a)
    assert one.grid == a.grid and one.offline.equals(a.offline) and one.source == "first.parquet"
    # parts of different rewards (the Sensitivity page's pooled rewards): their rows one after the other
    d = _moments(rewards=("like",), policies=("a",), discounts=("log2",), exposures=("log2",), clips=(1,),
                 offline=_offline([("e1", "control", "like", "log2", "log2", 1.0, "a", "dcg", 3, 7.0)]),
                 online=_online([("e1", "control", "like", 3, 6.0)]))
    both = merge_moments(a, d)
    assert both.offline["sum"].tolist() == [1.5, 2.5, 7.0] and list(both.offline.index) == [0, 1, 2]
    assert both.online["sum"].tolist() == [2.0, 1.0, 6.0] and both.grid.rewards == ("click", "like")


def test_merge_moments_checks_its_parts():
    a = _moments(rule="drop")
    with pytest.raises(InputError) as info:
        merge_moments()
    assert str(info.value) == "merge_moments needs at least one Moments, got none"
    with pytest.raises(WrongType) as info:
        merge_moments(a, "m.parquet")
    assert str(info.value) == "parts must be offeval_core.engine.Moments (from engine.reduce), got str"
    with pytest.raises(InputError) as info:
        merge_moments(a, _moments(rule="zero"))
    assert str(info.value) == "cannot merge moments computed with different ndcg_rule values"
    # the third part differs from the first
    with pytest.raises(InputError) as info:
        merge_moments(a, _moments(rule="drop"), _moments(rule="zero"))
    assert str(info.value) == "cannot merge moments computed with different ndcg_rule values"
    merged = merge_moments(a, _moments(rule="drop", clips=(2,)))
    assert merged.grid.ndcg_rule == "drop" and merged.grid.clips == (1, 2, INF)


def test_pct_and_finite():
    assert pct(0.234) == "23 %"
    assert pct(0.234, 1) == "23.4 %"
    assert pct(0.234, digits=2) == "23.40 %"
    assert pct(1) == "100 %" and pct(0) == "0 %" and pct(-0.05) == "-5 %"
    assert pct(None) == "n/a" and pct(math.nan) == "n/a" and pct(np.float64("nan")) == "n/a"
    got = finite([1, INF, math.nan, -2, -INF])
    assert got.dtype == np.float64 and got.tolist() == [1.0, -2.0]
    ints = finite([3, 4])
    assert ints.dtype == np.float64 and ints.tolist() == [3.0, 4.0]
    assert finite([]).tolist() == []
