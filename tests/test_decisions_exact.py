"""Decision boxes by hand (offeval_core.analyses.decisions): one A/B test of four control and four treatment
sessions, D = D0 = reciprocal, so every number of a box — the offline and online effects, their CIs, the
relative uplifts, the CI size and the decisions — follows from a few session values; and every decision rule
at its boundary (a CI bound of exactly 0, a p-value of exactly α).

Control sessions log two items; the target swaps them (rank__new = 2, 1). With w = 1 / D0(k) = k:
    target  DCG_τ = c1 · D(2) · min(m, 1) + c2 · D(1) · min(m, 2)
    logging DCG_τ = c1 · D(1) · min(m, 1) + c2 · D(2) · min(m, 2)
Control rewards (1, 0), (0, 1), (0, 1), (1, 1); treatment rewards (1, 1), (1, 1), (0, 1), (1, 1).

m = ∞: target 0.5c1 + 2c2, logging c1 + c2; paired differences (−0.5, 1, 1, 0.5): mean 0.5, sd √0.5,
       SE √0.5 / 2 = 0.353553; logging mean 1.25.
m = 1: target 0.5c1 + c2, logging c1 + 0.5c2; differences (−0.5, 0.5, 0.5, 0): mean 0.125, variance
       0.6875 / 3, SE 0.239357; logging mean 0.875.
Online: per-session totals control (1, 1, 1, 2), treatment (2, 2, 1, 2): effect 0.5, Welch SE
       √(0.25/4 + 0.25/4) = 0.353553 on 6 degrees of freedom.
"""

from __future__ import annotations

import functools
import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats as sps

from offeval_core.analyses import decision_boxes
from offeval_core.analyses.decisions import decide, decide_adjusted
from offeval_core.engine import Grid, reduce
from offeval_core.logs import read_logs

INF = ("dcg", "reciprocal", "reciprocal", math.inf)
ONE = ("dcg", "reciprocal", "reciprocal", 1.0)


@functools.cache
def moments(treatment=((1, 1), (1, 1), (0, 1), (1, 1))):
    rows = []
    spec = [("control", (1, 0)), ("control", (0, 1)), ("control", (0, 1)), ("control", (1, 1)),
            *(("treatment", t) for t in treatment)]
    for s, (arm, rewards) in enumerate(spec):
        for k in (1, 2):
            rows.append({"session_id": s, "experiment_id": "e1", "arm": arm, "rank": k, "click": rewards[k - 1],
                         "rank__new": 3 - k})
    logs = read_logs(pd.DataFrame(rows))
    grid = Grid(rewards=("click",), policies=("new",), discounts=("reciprocal",), exposures=("reciprocal",),
                clips=(1.0, math.inf))
    return reduce(logs, grid)


Z95 = sps.norm.ppf(0.975)
SE_INF = math.sqrt(0.5) / 2
SE_ONE = math.sqrt(0.6875 / 3) / 2
T6 = sps.t.ppf(0.975, 6)


def test_absolute_box_by_hand():
    res = decision_boxes(moments(), estimators=[INF, ONE], policy="new", level=0.95)
    b = res.boxes.set_index("estimator")
    inf, one = b.iloc[0], b.iloc[1]
    assert inf["offline_effect"] == pytest.approx(0.5, abs=1e-12)
    assert (inf["offline_low"], inf["offline_high"]) == pytest.approx((0.5 - Z95 * SE_INF, 0.5 + Z95 * SE_INF),
                                                                       abs=1e-12)
    assert inf["offline_baseline"] == pytest.approx(1.25, abs=1e-12)
    assert inf["offline_p"] == pytest.approx(2 * sps.norm.sf(0.5 / SE_INF), abs=1e-12)
    assert one["offline_effect"] == pytest.approx(0.125, abs=1e-12)
    assert one["offline_baseline"] == pytest.approx(0.875, abs=1e-12)
    assert one["offline_high"] - one["offline_low"] == pytest.approx(2 * Z95 * SE_ONE, abs=1e-12)
    for r in (inf, one):
        assert r["online_effect"] == pytest.approx(0.5, abs=1e-12)
        assert r["online_baseline"] == pytest.approx(1.25, abs=1e-12)
        assert (r["online_low"], r["online_high"]) == pytest.approx((0.5 - T6 * SE_INF, 0.5 + T6 * SE_INF), abs=1e-9)
        assert r["online_p"] == pytest.approx(2 * sps.t.sf(0.5 / SE_INF, 6), abs=1e-9)
        assert (r["offline_decision"], r["online_decision"], r["category"]) == ("neutral", "neutral", "agree")
    # relative CI width w / |baseline|: m = ∞ 2·1.96·0.3536 / 1.25, m = 1 2·1.96·0.2394 / 0.875
    assert inf["offline_rel_width"] == pytest.approx(2 * Z95 * SE_INF / 1.25, abs=1e-12)
    assert one["offline_rel_width"] == pytest.approx(2 * Z95 * SE_ONE / 0.875, abs=1e-12)
    s = res.summary.set_index("estimator")
    # CI size against the reference (the first estimator): (SE_ONE / 0.875) / (SE_INF / 1.25)
    assert s["ci_size"].iloc[0] == pytest.approx(1.0, abs=1e-12)
    assert s["ci_size"].iloc[1] == pytest.approx((SE_ONE / 0.875) / (SE_INF / 1.25), abs=1e-12)
    assert s["agreement"].tolist() == [1.0, 1.0]
    assert math.isnan(s["precision"].iloc[0]) and math.isnan(s["fnr"].iloc[0])   # no positive decision at all
    assert s["n_tests"].tolist() == [1, 1]


def test_relative_box_divides_by_each_baseline():
    res = decision_boxes(moments(), estimators=[INF, ONE], policy="new", level=0.95, relative=True)
    inf, one = res.boxes.iloc[0], res.boxes.iloc[1]
    # offline: 100 · effect / |logging value|; online: 100 · effect / |control mean|
    assert inf["offline_effect"] == pytest.approx(40.0, abs=1e-9)                     # 100 · 0.5 / 1.25
    assert inf["offline_low"] == pytest.approx(100 * (0.5 - Z95 * SE_INF) / 1.25, abs=1e-9)
    assert inf["offline_high"] == pytest.approx(100 * (0.5 + Z95 * SE_INF) / 1.25, abs=1e-9)
    assert one["offline_effect"] == pytest.approx(100 * 0.125 / 0.875, abs=1e-9)      # 14.29 %
    assert one["online_effect"] == pytest.approx(40.0, abs=1e-9)                      # 100 · 0.5 / 1.25
    assert one["online_low"] == pytest.approx(100 * (0.5 - T6 * SE_INF) / 1.25, abs=1e-7)
    # the decisions and the relative width do not depend on the display
    assert inf["offline_rel_width"] == pytest.approx(2 * Z95 * SE_INF / 1.25, abs=1e-12)
    assert (inf["offline_decision"], inf["online_decision"]) == ("neutral", "neutral")
    assert res.relative is True


def test_decisions_at_a_lower_level_and_the_false_positive_colour():
    # at level 0.80 (z = 1.2816): m = ∞ offline CI 0.5 ± 0.4531 > 0 → positive; online t(6) 1.4398 · 0.3536 =
    # 0.509 > 0.5 → neutral: a false positive. m = 1: 0.125 ± 0.3067 → neutral, agrees.
    res = decision_boxes(moments(), estimators=[INF, ONE], policy="new", level=0.80)
    b = res.boxes
    assert b["offline_decision"].tolist() == ["positive", "neutral"]
    assert b["online_decision"].tolist() == ["neutral", "neutral"]
    assert b["category"].tolist() == ["false positive", "agree"]
    s = res.summary
    assert s["precision"].tolist()[0] == 0.0                    # the one offline positive is not online positive
    assert s["agreement"].tolist() == [0.0, 1.0]
    assert s["n_false_positive"].tolist() == [1, 0]


def test_adjusted_decisions_with_one_box_per_family():
    # a family of one: Holm leaves the p-value unchanged, so the decisions are the unadjusted p-value's
    res = decision_boxes(moments(), estimators=[INF], policy="new", level=0.80, adjust="holm")
    b = res.boxes.iloc[0]
    p = 2 * sps.norm.sf(0.5 / SE_INF)                          # 0.157 < α = 0.2
    assert b["offline_p_adj"] == pytest.approx(p, abs=1e-12)
    assert b["offline_decision"] == "positive"
    assert b["online_p_adj"] == pytest.approx(2 * sps.t.sf(0.5 / SE_INF, 6), abs=1e-9)   # 0.209 > 0.2
    assert b["online_decision"] == "neutral"
    assert res.family == "1 A/B test × 1 policy" and res.family_size == 1


def test_decide_adjusted_at_p_equal_to_alpha():
    assert decide_adjusted(0.2, 0.05, 0.05) == "positive"
    assert decide_adjusted(-0.2, 0.05, 0.05) == "negative"
    assert decide_adjusted(0.2, 0.05000001, 0.05) == "neutral"
    assert decide_adjusted(0.0, 0.01, 0.05) == "neutral"
    assert decide_adjusted(0.2, math.nan, 0.05) == "neutral"
    assert decide(0.0, 0.0) == "neutral"
    assert decide(1e-300, 1.0) == "positive" and decide(-1.0, -1e-300) == "negative"


def test_adjusted_sentence_counts_the_decisions_that_survive():
    # treatment totals (2, 2, 2, 2): online effect 0.75, SE √(0.25/4) = 0.25 on 3 degrees of freedom; at level
    # 0.80 the t-CI 0.75 ± 1.638 · 0.25 excludes 0 (positive), and Holm over one A/B test keeps p = 0.058 < 0.2.
    # Offline, m = ∞ is positive both ways (p 0.157), m = 1 neutral both ways (p 0.60).
    res = decision_boxes(moments(treatment=((1, 1),) * 4), estimators=[INF, ONE], policy="new", level=0.80,
                         adjust="holm")
    inf, one = res.estimators
    assert res.boxes["online_decision"].tolist() == ["positive", "positive"]
    assert res.boxes["online_p_adj"].tolist() == pytest.approx([2 * sps.t.sf(3.0, 3)] * 2, abs=1e-9)
    assert res.takeaway.endswith(
        f"With Holm (family-wise error) adjustment over 1 A/B test × 1 policy (m = 1, α = 0.2): {inf} keeps 1 of 1 "
        f"offline decisions; {one} keeps 0 of 0 offline decisions; online 1 of 1 A/B tests stay significant.")
    assert res.adjustment == ("Decisions on adjusted p-values, Holm (family-wise error) at α = 0.2; family: 1 A/B "
                              "test × 1 policy per estimator (m = 1); the online decisions are adjusted over the "
                              "same A/B tests.")


def test_takeaway_names_the_best_and_the_worst_estimator():
    # level 0.80 (see above): m = ∞ is a false positive (agreement 0, precision 0, no online positive → FNR n/a),
    # m = 1 agrees (agreement 1, no offline positive → precision n/a)
    res = decision_boxes(moments(), estimators=[INF, ONE], policy="new", level=0.80)
    inf, one = res.estimators
    assert res.takeaway == (f"{one} takes the online decision in 100 % of 1 A/B tests (precision n/a — no offline "
                            f"ship decision, false-negative rate n/a — no online ship decision); {inf} only in 0 % "
                            f"(false-negative rate n/a — no online ship decision).")
    # one estimator: no worst part
    solo = decision_boxes(moments(), estimators=[ONE], policy="new", level=0.80)
    assert solo.takeaway == (f"{one} takes the online decision in 100 % of 1 A/B tests (precision n/a — no offline "
                             f"ship decision, false-negative rate n/a — no online ship decision).")
    assert solo.adjustment == ("Unadjusted: each of the 1 boxes per estimator (1 A/B test × 1 policy) is decided on "
                               "its own 80 % CI; choose Holm or Benjamini-Hochberg to control the errors over the "
                               "family.")


def test_family_counts_ab_tests_and_rewards():
    # the same sessions logged under two A/B tests and with two rewards: each estimator decides 4 boxes
    rows = []
    spec = [("control", (1, 0)), ("control", (0, 1)), ("control", (0, 1)), ("control", (1, 1)),
            ("treatment", (1, 1)), ("treatment", (1, 1)), ("treatment", (0, 1)), ("treatment", (1, 1))]
    s = 0
    for exp in ("e1", "e2"):
        for arm, rewards in spec:
            for k in (1, 2):
                rows.append({"session_id": s, "experiment_id": exp, "arm": arm, "rank": k, "click": rewards[k - 1],
                             "like": 1 - rewards[k - 1], "rank__new": 3 - k})
            s += 1
    logs = read_logs(pd.DataFrame(rows))
    m = reduce(logs, Grid(rewards=("click", "like"), policies=("new",), discounts=("reciprocal",),
                          exposures=("reciprocal",), clips=(math.inf,)))
    res = decision_boxes(m, estimators=[INF], policy="new", level=0.95, rewards=("click", "like"), adjust="bh")
    assert (res.family, res.family_size) == ("2 A/B tests × 1 policy × 2 rewards", 4)
    assert len(res.boxes) == 4
    # one reward of the two: its boxes only
    only = decision_boxes(m, estimators=[INF], policy="new", level=0.95, rewards=("like",))
    assert set(only.boxes["reward"]) == {"like"} and only.family_size == 2
    # like = 1 − click: control differences −0.5·like1 + like2 = (1, −0.5, −0.5, 0), mean 0
    effects = res.boxes.set_index(["experiment_id", "reward"])["offline_effect"]
    assert effects.to_dict() == pytest.approx({("e1", "click"): 0.5, ("e2", "click"): 0.5, ("e1", "like"): 0.0,
                                               ("e2", "like"): 0.0}, abs=1e-12)


@functools.cache
def two_tests():
    """The four control and four treatment sessions of :func:`moments` logged under two A/B tests."""
    rows = []
    spec = [("control", (1, 0)), ("control", (0, 1)), ("control", (0, 1)), ("control", (1, 1)),
            ("treatment", (1, 1)), ("treatment", (1, 1)), ("treatment", (0, 1)), ("treatment", (1, 1))]
    s = 0
    for exp in ("e1", "e2"):
        for arm, rewards in spec:
            for k in (1, 2):
                rows.append({"session_id": s, "experiment_id": exp, "arm": arm, "rank": k, "click": rewards[k - 1],
                             "rank__new": 3 - k})
            s += 1
    return reduce(read_logs(pd.DataFrame(rows)), Grid(rewards=("click",), policies=("new",),
                                                       discounts=("reciprocal",), exposures=("reciprocal",),
                                                       clips=(math.inf,)))


def test_holm_over_two_ab_tests_overrides_the_ci_decisions():
    # each box alone: offline p = 0.157 < α = 0.2 and the 80 % CI excludes 0 → positive. Holm over the two
    # A/B tests doubles the smaller p: 0.315 > 0.2 → neutral; BH keeps 2 · 0.157 / 2 = 0.157 → positive.
    p = 2 * sps.norm.sf(0.5 / SE_INF)
    raw = decision_boxes(two_tests(), estimators=[INF], policy="new", level=0.80)
    assert raw.boxes["offline_decision"].tolist() == ["positive", "positive"]
    assert raw.boxes["offline_p_adj"].tolist() == pytest.approx([p, p], abs=1e-12)   # no adjustment: the p-values
    holm = decision_boxes(two_tests(), estimators=[INF], policy="new", level=0.80, adjust="holm")
    assert holm.boxes["offline_p_adj"].tolist() == pytest.approx([2 * p, 2 * p], abs=1e-12)
    assert holm.boxes["offline_decision"].tolist() == ["neutral", "neutral"]
    online_p = 2 * sps.t.sf(0.5 / SE_INF, 6)
    assert holm.boxes["online_p_adj"].tolist() == pytest.approx([min(1.0, 2 * online_p)] * 2, abs=1e-9)
    assert holm.boxes["online_decision"].tolist() == ["neutral", "neutral"]
    bh = decision_boxes(two_tests(), estimators=[INF], policy="new", level=0.80, adjust="bh")
    assert bh.boxes["offline_p_adj"].tolist() == pytest.approx([p, p], abs=1e-12)
    assert bh.boxes["offline_decision"].tolist() == ["positive", "positive"]
    assert (holm.family, holm.family_size) == ("2 A/B tests × 1 policy", 2)
    assert list(holm.boxes.columns) == [
        "experiment_id", "reward", "estimator", "offline_effect", "offline_low", "offline_high", "offline_baseline",
        "online_effect", "online_low", "online_high", "online_baseline", "online_p", "offline_target",
        "offline_target_low", "offline_target_high", "online_treatment", "online_treatment_low",
        "online_treatment_high", "offline_p", "offline_rel_width", "offline_decision", "online_decision",
        "offline_p_adj", "online_p_adj", "category", "colour"]
    assert holm.boxes["offline_p_adj"].dtype == np.float64
    # the levels beside the uplifts: the target's DCG per control session 0.5 c1 + 2 c2 = 0.5, 2, 2, 2.5 (mean 1.75,
    # SE √(0.75 / 4)); the treatment arm's online reward per session 2, 2, 1, 2 (mean 1.75, SE 0.25); 80 % normal CIs
    z = sps.norm.ppf(0.90)
    box = holm.boxes.iloc[0]
    assert [box["offline_target"], box["offline_target_low"], box["offline_target_high"]] == pytest.approx(
        [1.75, 1.75 - z * math.sqrt(0.75 / 4), 1.75 + z * math.sqrt(0.75 / 4)], abs=1e-12)
    assert [box["online_treatment"], box["online_treatment_low"], box["online_treatment_high"]] == pytest.approx(
        [1.75, 1.75 - z * 0.25, 1.75 + z * 0.25], abs=1e-12)


def test_takeaway_with_a_precision_and_a_false_negative_rate():
    # treatment totals (2, 2, 2, 2), level 0.80: online positive; m = ∞ offline positive (agree: precision 100 %,
    # FNR 0 %), m = 1 neutral (a false negative: FNR 100 %)
    res = decision_boxes(moments(treatment=((1, 1),) * 4), estimators=[INF, ONE], policy="new", level=0.80)
    inf, one = res.estimators
    assert res.takeaway == (f"{inf} takes the online decision in 100 % of 1 A/B tests (precision 100 %, "
                            f"false-negative rate 0 %); {one} only in 0 % (false-negative rate 100 %).")
    s = res.summary.set_index("estimator")
    assert s.loc[one, "n_false_negative"] == 1 and s.loc[inf, "n_false_positive"] == 0


def test_ab_tests_without_both_arms_are_skipped():
    # "e0" logs only control sessions (no online effect): its box is skipped and e1's is kept, whatever the order
    rows = [{"session_id": 100 + s, "experiment_id": "e0", "arm": "control", "rank": k, "click": 1, "rank__new": 3 - k}
            for s in range(3) for k in (1, 2)]
    base = moments()
    spec = [("control", (1, 0)), ("control", (0, 1)), ("control", (0, 1)), ("control", (1, 1)),
            ("treatment", (1, 1)), ("treatment", (1, 1)), ("treatment", (0, 1)), ("treatment", (1, 1))]
    for s, (arm, rewards) in enumerate(spec):
        for k in (1, 2):
            rows.append({"session_id": s, "experiment_id": "e1", "arm": arm, "rank": k, "click": rewards[k - 1],
                         "rank__new": 3 - k})
    m = reduce(read_logs(pd.DataFrame(rows)), base.grid)
    res = decision_boxes(m, estimators=[INF], policy="new", level=0.95)
    assert res.boxes["experiment_id"].tolist() == ["e1"]
    assert res.boxes["offline_effect"].tolist() == pytest.approx([0.5], abs=1e-12)


def test_ndcg_box_and_argument_names():
    # nDCG per session = DCG / iDCG over de-biased labels Q̂ = c / D0: (1, 0) → target 0.5 / 1, logging 1 / 1;
    # (0, 1) → Q̂ (0, 2), iDCG 2: target 2 / 2, logging 1 / 2; (1, 1) → Q̂ (1, 2), iDCG 2 + 0.5: target 2.5 / 2.5,
    # logging 2 / 2.5. Differences (−0.5, 0.5, 0.5, 0.2): mean 0.175
    ndcg = ("ndcg", "reciprocal", "reciprocal", math.inf)
    res = decision_boxes(moments(), estimators=[ndcg], policy="new", level=0.95)
    assert res.boxes["offline_effect"].tolist() == pytest.approx([0.175], abs=1e-12)
    with pytest.raises(Exception, match="estimators entry metric must be one of"):
        decision_boxes(moments(), estimators=[("nope", "reciprocal", "reciprocal", 1.0)], policy="new")
    with pytest.raises(Exception, match="reference metric must be one of"):
        decision_boxes(moments(), estimators=[INF], policy="new", reference=("nope", "reciprocal", "reciprocal", 1.0))
    with pytest.raises(Exception, match="adjust must be one of"):
        decision_boxes(moments(), estimators=[INF], policy="new", adjust="sidak")
