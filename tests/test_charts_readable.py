"""Charts people read: decision boxes labelled by A/B test with overlaps separated and a false-negative
colour distinct from the false-positive one; the day-by-day drill-down with equal values at equal heights;
full labels on log axes."""

from __future__ import annotations

from types import SimpleNamespace

import pandas as pd

from offeval_core import charts


def _boxes():
    row = dict(estimator="DCG", reward="like", offline_effect=0.1, online_effect=0.1, offline_low=0.0,
               offline_high=0.2, online_low=0.05, online_high=0.15, offline_decision="positive",
               online_decision="positive", category="agree")
    twin = {**row, "experiment_id": "exp02"}  # exactly the same box as exp01
    fn = {**row, "experiment_id": "exp03", "offline_low": -0.3, "offline_high": -0.1, "offline_decision": "neutral",
          "category": "false negative"}
    return pd.DataFrame([{**row, "experiment_id": "exp01"}, twin, fn])


def test_decision_boxes_are_labelled_and_overlaps_stacked():
    res = SimpleNamespace(boxes=_boxes(), estimators=("DCG",), relative=False, level=0.9)
    fig = charts.decision_figure(res)
    labels = {a.text: a for a in fig.layout.annotations if (a.name or "").startswith("box ")}
    assert set(labels) == {"exp01", "exp02", "exp03"}
    assert (labels["exp01"].x, labels["exp01"].y) == (0.0, 0.15)  # the box's top-left corner
    assert sorted([labels["exp01"].yshift, labels["exp02"].yshift]) == [2, 18]  # identical boxes: stacked
    assert labels["exp03"].font.color == charts.DECISION_COLOURS["false negative"]
    assert charts.DECISION_COLOURS["false negative"] != charts.DECISION_COLOURS["false positive"]
    cap = charts.DECISION_CAPTION  # the caption names the colours the chart draws
    assert "Green: same decision" in cap and "orange: false positive" in cap and "purple: false negative" in cap
    assert "grey: any other disagreement" in cap


def test_drilldown_puts_dcg_on_the_online_axis_and_ndcg_on_its_own():
    s = pd.DataFrame({"day": [1, 2, 3], "online": [0.2, 0.3, 0.25], "DCG (pbm, Q̂)": [0.2, 0.3, 0.25],
                      "nDCG (pbm, Q̂)": [0.5, 0.6, 0.55]})
    s.attrs = {"reward": "like", "r": {}}
    fig = charts.correlation_series_figure(s)
    axis = {tr.name.split(" (r")[0]: tr.yaxis for tr in fig.data}
    assert axis["online reward"] == axis["DCG (pbm, Q̂)"] == "y"
    assert axis["nDCG (pbm, Q̂)"] == "y2"


def test_log_axis_labels_every_tick_in_full():
    t = pd.DataFrame({"metric": ["dcg", "dcg"], "clip": [1.0, 2.0], "tpr": [0.1, 0.2], "mean_p": [0.08, 0.3],
                      "n_detected": [1, 2], "n_settings": [10, 10], "sign_agreement": [0.5, 0.6]})
    res = SimpleNamespace(table=t, best_clips={}, level=0.99, policy="treatment", discount="pbm",
                          rate_column="tpr", rate_name="TPR")
    fig = charts.sensitivity_figure(res)
    assert fig.layout.yaxis2.type == "log" and fig.layout.yaxis2.tickformat == ".2g"
