"""analyses.plan by hand: which estimators each analysis reads by default and which reduces give their moments.

Every expected tuple is written out from the rules in the docstrings (DEFAULT_ESTIMATORS = DCG (pbm, C), DCG (pbm,
Q̂), nDCG (pbm, Q̂); Table 2's five columns; IS / SNIPS uncapped then CIS / NCIS at the cap), not read from the code.
"""

from __future__ import annotations

import math
import re

import pytest

from offeval_core.analyses.plan import (
    PlannedReduce,
    correlation_variants,
    decision_estimators,
    estimator_family,
    plan_moments,
    propensity_estimators,
    report_variants,
)
from offeval_core.errors import UnknownName, WrongType
from offeval_core.registry import ESTIMATORS, EstimatorSpec

INF = math.inf
P = "propensity"


def _tuples(variants):
    return [tuple(v) for v in variants]


def _all_floats(variants):
    return all(type(v.clip) is float for v in variants)


def test_estimator_family_of_each_kind_and_an_unknown_name():
    assert [estimator_family(n) for n in ("dcg", "ndcg", "pndcg")] == ["dcg", "dcg", "dcg"]
    assert [estimator_family(n) for n in ("is", "snips", "cis", "ncis-zero", "point-ncis@impression")] == [
        "importance"] * 5
    with pytest.raises(UnknownName, match=re.escape("unknown estimator 'DCG'; known: dcg, ndcg, pndcg, is, ")):
        estimator_family("DCG")


def test_estimator_family_of_a_registered_spec_without_a_family_is_dcg(monkeypatch):
    # the registry's own specs all name their family; one registered with an empty family reads the DCG reduce
    monkeypatch.setitem(ESTIMATORS, "dcg-copy", EstimatorSpec("dcg-copy", "dcg", False, "DCG copy", "", family=""))
    assert estimator_family("dcg-copy") == "dcg"


def test_plan_groups_by_family_and_pair_in_order_of_first_appearance_with_sorted_distinct_clips():
    plan = plan_moments([("ndcg", "pbm", "pbm", 64), ("cis", "propensity", "propensity", 8.0),
                         ("dcg", "pbm", "pbm", 1), ("pndcg", "pbm", "pbm", INF), ("dcg", "pbm", "pbm", 64.0),
                         ("dcg", "log2", "pbm", 4), ("is", "propensity", "propensity", INF),
                         ("ncis", "propensity", "propensity", 2.0), ("dcg", "pbm", "log2", 4)])
    # (dcg, pbm, pbm) gets 64, 1, ∞, 64 again -> (1, 64, ∞); the two propensity estimators share one reduce;
    # D = log2 with D0 = pbm and D = pbm with D0 = log2 are two more reduces
    assert plan == (PlannedReduce("dcg", "pbm", "pbm", (1.0, 64.0, INF)),
                    PlannedReduce("importance", "propensity", "propensity", (2.0, 8.0, INF)),
                    PlannedReduce("dcg", "log2", "pbm", (4.0,)),
                    PlannedReduce("dcg", "pbm", "log2", (4.0,)))
    assert all(type(c) is float for p in plan for c in p.clips)
    # the same pair under both families is two reduces
    assert plan_moments([("is", "log2", "log2", INF), ("dcg", "log2", "log2", INF)]) == (
        PlannedReduce("importance", "log2", "log2", (INF,)), PlannedReduce("dcg", "log2", "log2", (INF,)))
    assert plan_moments([]) == ()
    with pytest.raises(WrongType, match=re.escape("variant must be a (metric, discount, exposure, clip) tuple, "
                                                  "got ('dcg', 'pbm', 1.0)")):
        plan_moments([("dcg", "pbm", 1.0)])


def test_decision_estimators_by_hand():
    assert _tuples(decision_estimators("log2", 16)) == [("dcg", "log2", "log2", 1.0), ("dcg", "log2", "log2", 16.0),
                                                        ("dcg", "log2", "log2", INF), ("ndcg", "log2", "log2", INF)]
    assert _all_floats(decision_estimators("log2", 16))
    # an exposure model of its own: D0 on every estimator, D kept
    assert _tuples(decision_estimators("exponential:0.8", 4.0, exposure="pbm")) == [
        ("dcg", "exponential:0.8", "pbm", 1.0), ("dcg", "exponential:0.8", "pbm", 4.0),
        ("dcg", "exponential:0.8", "pbm", INF), ("ndcg", "exponential:0.8", "pbm", INF)]
    # the chosen m is one of the defaults: m = 1 and m = ∞ each repeat one, so three estimators in the same order
    assert _tuples(decision_estimators("pbm", 1.0)) == [("dcg", "pbm", "pbm", 1.0), ("dcg", "pbm", "pbm", INF),
                                                        ("ndcg", "pbm", "pbm", INF)]
    assert _tuples(decision_estimators("pbm", INF)) == [("dcg", "pbm", "pbm", 1.0), ("dcg", "pbm", "pbm", INF),
                                                        ("ndcg", "pbm", "pbm", INF)]
    # a propensity policy gets the importance estimators at the cap, whatever exposure is passed
    assert _tuples(decision_estimators(P, 16.0, exposure="pbm")) == [
        ("is", P, P, INF), ("snips", P, P, INF), ("cis", P, P, 16.0), ("ncis", P, P, 16.0)]


def test_propensity_estimators_by_hand():
    assert _tuples(propensity_estimators(16)) == [("is", P, P, INF), ("snips", P, P, INF), ("cis", P, P, 16.0),
                                                  ("ncis", P, P, 16.0)]
    assert _all_floats(propensity_estimators(16))
    # at c = 1 CIS and NCIS are still listed (a finite cap); at c = ∞ they would repeat IS and SNIPS
    assert _tuples(propensity_estimators(1)) == [("is", P, P, INF), ("snips", P, P, INF), ("cis", P, P, 1.0),
                                                 ("ncis", P, P, 1.0)]
    assert _tuples(propensity_estimators(INF)) == [("is", P, P, INF), ("snips", P, P, INF)]


def test_correlation_variants_by_hand():
    five = [("dcg", "log2", "log2", 1.0), ("dcg", "log2", "log2", INF), ("dcg", "pbm", "pbm", 1.0),
            ("dcg", "pbm", "pbm", INF), ("ndcg", "pbm", "pbm", INF)]
    assert _tuples(correlation_variants("pbm", 8)) == [*five, ("dcg", "pbm", "pbm", 8.0)]
    assert _all_floats(correlation_variants("pbm", 8))
    assert _tuples(correlation_variants("log2", INF)) == five  # DCG (log2, Q̂) is Table 2's second column
    assert _tuples(correlation_variants("exponential:0.8", 1)) == [*five, ("dcg", "exponential:0.8",
                                                                           "exponential:0.8", 1.0)]
    assert _tuples(correlation_variants(P, 4.0)) == [("is", P, P, INF), ("snips", P, P, INF), ("cis", P, P, 4.0),
                                                     ("ncis", P, P, 4.0)]


def test_report_variants_by_hand():
    got = report_variants("pbm", (1, 4), 16)
    assert _tuples(got) == [
        # the sensitivity curves: DCG and nDCG at each clip of the curve
        ("dcg", "pbm", "pbm", 1.0), ("ndcg", "pbm", "pbm", 1.0), ("dcg", "pbm", "pbm", 4.0),
        ("ndcg", "pbm", "pbm", 4.0),
        # the correlation's columns not already listed (DCG (pbm, C) is), then DCG (pbm, Q̂ m=16)
        ("dcg", "log2", "log2", 1.0), ("dcg", "log2", "log2", INF), ("dcg", "pbm", "pbm", INF),
        ("ndcg", "pbm", "pbm", INF), ("dcg", "pbm", "pbm", 16.0),
        # Table 2 across clips with log2: m = 1 is listed, m = 4 is new; the decision boxes add nothing new
        ("dcg", "log2", "log2", 4.0)]
    assert _all_floats(got)
    assert plan_moments(got) == (PlannedReduce("dcg", "pbm", "pbm", (1.0, 4.0, 16.0, INF)),
                                 PlannedReduce("dcg", "log2", "log2", (1.0, 4.0, INF)))
