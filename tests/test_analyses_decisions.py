import math

import numpy as np
import pandas as pd
import pytest
from analyses_world import per_session_totals, small_world

from offeval_core.analyses import decision_boxes
from offeval_core.analyses.decisions import DecisionResult, _takeaway, classify, decide, summarize_boxes
from offeval_core.charts import DECISION_COLOURS


@pytest.mark.parametrize(("off", "on", "cat"), [
    ((0.1, 0.3), (0.2, 0.5), "agree"), ((-0.1, 0.3), (-0.2, 0.5), "agree"), ((-0.4, -0.1), (-0.3, -0.2), "agree"),
    ((0.1, 0.3), (-0.2, 0.5), "false positive"), ((0.1, 0.3), (-0.5, -0.2), "false positive"),
    ((-0.1, 0.3), (0.2, 0.5), "false negative"), ((-0.4, -0.1), (0.2, 0.5), "false negative"),
    ((-0.4, -0.1), (-0.2, 0.5), "other"), ((-0.1, 0.3), (-0.5, -0.2), "other"),
])
def test_colour_of_constructed_boxes(off, on, cat):
    assert classify(decide(*off), decide(*on)) == cat


def _boxes(rows):
    df = pd.DataFrame(rows, columns=["experiment_id", "estimator", "offline_effect", "online_effect",
                                     "offline_decision", "online_decision", "offline_rel_width"])
    df["reward"] = "like"
    df["category"] = [classify(a, b) for a, b in zip(df["offline_decision"], df["online_decision"], strict=True)]
    return df


def test_table3_columns_on_constructed_boxes():
    rows = [  # 4 tests; estimator A: 2 positive decisions, 1 right; online positives: e1, e2, e3
        ("e1", "A", 0.3, 0.2, "positive", "positive", 0.2), ("e2", "A", 0.2, 0.1, "positive", "neutral", 0.2),
        ("e3", "A", 0.0, 0.3, "neutral", "positive", 0.4), ("e4", "A", -0.1, -0.2, "negative", "negative", 0.4),
        ("e1", "B", 0.1, 0.2, "positive", "positive", 0.1), ("e2", "B", 0.0, 0.1, "neutral", "neutral", 0.1),
        ("e3", "B", 0.2, 0.3, "positive", "positive", 0.2), ("e4", "B", -0.3, -0.2, "negative", "negative", 0.2),
    ]
    rows[1] = ("e2", "A", 0.2, 0.1, "positive", "neutral", 0.2)
    rows[5] = ("e2", "B", 0.0, 0.1, "neutral", "positive", 0.1)
    s = summarize_boxes(_boxes(rows), ["A", "B"], reference="A").set_index("estimator")
    assert s.loc["A", "precision"] == 0.5          # 1 of 2 offline positives is online positive
    assert s.loc["A", "fnr"] == 0.5                # e3 of the online positives {e1, e3}
    assert s.loc["B", "precision"] == 1.0 and s.loc["B", "fnr"] == pytest.approx(1 / 3)
    assert s.loc["B", "ci_size"] == pytest.approx(0.5) and s.loc["A", "ci_size"] == 1.0
    assert s.loc["A", "correlation"] == pytest.approx(np.corrcoef([0.3, 0.2, 0.0, -0.1], [0.2, 0.1, 0.3, -0.2])[0, 1])
    assert (s.loc["A", "n_false_positive"], s.loc["A", "n_false_negative"]) == (1, 1)


def test_an_undefined_rate_says_why_in_the_headlines():
    """An estimator that never ships offline has no precision and a test set without an online ship has no
    false-negative rate: the headlines say "n/a — why", as the tables do, never a bare "n/a" or "nan %"."""
    rows = [("e1", "A", 0.3, 0.2, "positive", "positive", 0.2), ("e2", "A", 0.0, 0.1, "neutral", "positive", 0.2),
            ("e1", "B", 0.0, 0.2, "neutral", "positive", 0.2), ("e2", "B", 0.0, 0.1, "neutral", "positive", 0.2)]
    boxes = _boxes(rows)
    s = summarize_boxes(boxes, ["A", "B"], reference="A")
    res = DecisionResult(boxes, s, ("A", "B"), "A", "ranker_v2", 0.99, False, _takeaway(s, ["A", "B"]))
    assert res.estimator_takeaway("B") == (
        "ranker_v2 vs the logging policy, B: the offline decision is the online one in 0 of 2 A/B tests (0 %; "
        "precision n/a — no offline ship decision, false-negative rate 100 %).")
    assert res.estimator_takeaway("A").endswith("(50 %; precision 100 %, false-negative rate 50 %).")
    assert res.takeaway == ("A takes the online decision in 50 % of 2 A/B tests (precision 100 %, false-negative "
                            "rate 50 %); B only in 0 % (false-negative rate 100 %).")
    quiet = _boxes([("e1", "A", 0.0, 0.0, "neutral", "neutral", 0.2), ("e2", "A", -0.2, 0.0, "negative", "neutral", 0.2)])
    s = summarize_boxes(quiet, ["A"], reference="A")
    assert DecisionResult(quiet, s, ("A",), "A", "p", 0.99, False, "").estimator_takeaway("A").endswith(
        "(50 %; precision n/a — no offline ship decision, false-negative rate n/a — no online ship decision).")
    assert _takeaway(s, ["A"]) == ("A takes the online decision in 50 % of 2 A/B tests (precision n/a — no offline "
                                   "ship decision, false-negative rate n/a — no online ship decision).")


def test_boxes_from_moments_match_online_and_offline_paths():
    _, logs, m = small_world()
    res = decision_boxes(m, estimators=[("dcg", "pbm", "pbm", 1.0), ("dcg", "pbm", "pbm", math.inf)], level=0.9)
    assert len(res.boxes) == 3 * 2 * 2
    assert set(res.boxes["colour"]) <= set(DECISION_COLOURS.values())
    on = per_session_totals(logs, "like")
    b = res.boxes[(res.boxes["reward"] == "like") & (res.boxes["experiment_id"] == "exp01")].iloc[0]
    g = on[on["experiment_id"] == "exp01"]
    diff = g[g["arm"] == "treatment"]["total"].mean() - g[g["arm"] == "control"]["total"].mean()
    assert b["online_effect"] == pytest.approx(diff)
    for rec in res.boxes.itertuples():
        assert rec.offline_decision == decide(rec.offline_low, rec.offline_high)
        assert rec.online_decision == decide(rec.online_low, rec.online_high)
    rel = decision_boxes(m, estimators=[("dcg", "pbm", "pbm", 1.0)], relative=True, level=0.9)
    a = res.boxes[res.boxes["estimator"] == "DCG (pbm, C)"].reset_index(drop=True)
    r = rel.boxes.reset_index(drop=True)
    assert np.allclose(r["online_effect"], 100 * a["online_effect"] / a["online_baseline"].abs())
    assert (r["category"] == a["category"]).all()   # relative scaling never changes a decision
    assert res.summary["n_tests"].tolist() == [6, 6]


def test_bad_arguments():
    m = small_world()[2]
    with pytest.raises(ValueError, match="reference"):
        decision_boxes(m, estimators=[("dcg", "pbm", "pbm", 1.0)], reference=("dcg", "pbm", "pbm", 4.0))
    with pytest.raises(ValueError, match="duplicates"):
        decision_boxes(m, estimators=[("dcg", "pbm", "pbm", 1.0)] * 2)
    with pytest.raises(ValueError, match="metric must be one of"):
        decision_boxes(m, estimators=[("ncdg", "pbm", "pbm", 1.0)])


def test_recommended_estimator_follows_the_papers_preference():
    from offeval_core.analyses import Variant
    from offeval_core.analyses.decisions import recommended_estimator
    dcg = [Variant("dcg", "pbm", "pbm", m) for m in (1.0, 16.0, 64.0, math.inf)]
    nd = Variant("ndcg", "pbm", "pbm", math.inf)
    assert recommended_estimator([dcg[0], nd, *dcg[1:]]) == 3        # the largest finite m > 1: 64
    assert recommended_estimator([dcg[0], dcg[3], nd]) == 1           # no finite m > 1: m = ∞
    assert recommended_estimator([dcg[0], nd]) == 0                   # nothing preferred: the first
    imp = [Variant(n, "pbm", "pbm", 100.0) for n in ("cis", "ncis", "piece-ncis", "point-ncis")]
    assert recommended_estimator([*dcg, *imp]) == 7                   # PointNCIS (Gilotte Sec. 6)
    assert recommended_estimator([*dcg, *imp[:3]]) == 6               # then PieceNCIS
    assert recommended_estimator([*imp[:2], dcg[1]]) == 1             # then NCIS, before DCG


def test_result_names_the_recommended_estimator():
    from offeval_core.analyses import Variant
    ests = [Variant("dcg", "pbm", "pbm", 1.0), Variant("dcg", "pbm", "pbm", 64.0), Variant("ndcg", "pbm", "pbm",
                                                                                           math.inf)]
    res = decision_boxes(small_world()[2], estimators=ests)
    assert res.recommended == res.estimators[1]
