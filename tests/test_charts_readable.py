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


def _rect(a, font=12):
    """A label annotation's box in px relative to its point (offset ax, ay to the text's centre)."""
    from offeval_core.labels import text_box

    w, h = text_box(a.text, font)
    return (a.ax - w / 2, a.ay - h / 2, a.ax + w / 2, a.ay + h / 2)


def test_decision_boxes_are_labelled_and_overlaps_separated():
    res = SimpleNamespace(boxes=_boxes(), estimators=("DCG",), relative=False, level=0.9)
    fig = charts.decision_figure(res)
    labels = {a.text: a for a in fig.layout.annotations if (a.name or "").startswith("box ")}
    assert set(labels) == {"exp01", "exp02", "exp03"}
    assert (labels["exp01"].x, labels["exp01"].y) == (0.1, 0.1)  # the box's centre, joined by a leader line
    assert labels["exp01"].showarrow and labels["exp01"].arrowhead == 0
    # identical boxes: their labels sit apart (the boxes of the two texts do not intersect)
    a, b = _rect(labels["exp01"]), _rect(labels["exp02"])
    assert a[2] <= b[0] or b[2] <= a[0] or a[3] <= b[1] or b[3] <= a[1]
    assert labels["exp03"].font.color == charts.DECISION_COLOURS["false negative"]
    assert charts.DECISION_COLOURS["false negative"] != charts.DECISION_COLOURS["false positive"]
    cap = charts.DECISION_CAPTION  # the caption names the colours the chart draws
    assert "Green: same decision" in cap and "orange: false positive" in cap and "purple: false negative" in cap
    assert "grey: any other disagreement" in cap


def test_decision_labels_beyond_the_count_are_hover_only_disagreements_first():
    row = dict(estimator="DCG", reward="like", offline_low=0.0, offline_high=0.2, online_low=0.0, online_high=0.2,
               offline_decision="positive", online_decision="positive", category="agree")
    rows = [{**row, "experiment_id": f"exp{i:02d}", "offline_effect": 0.01 * i, "online_effect": 0.01 * i}
            for i in range(20)]
    rows[19] = {**rows[19], "category": "false positive"}
    res = SimpleNamespace(boxes=pd.DataFrame(rows), estimators=("DCG",), relative=False, level=0.9)
    fig = charts.decision_figure(res)
    labels = [a.text for a in fig.layout.annotations if (a.name or "").startswith("box ")]
    assert len(labels) <= charts.BOX_LABELS and labels[0] == "exp19"  # the disagreement first
    centres = next(tr for tr in fig.data if tr.mode == "markers" and tr.legendgroup == "agree")
    assert all(t.startswith("exp") for t in centres.text)  # every box names its test in the hover


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


def test_a_p_value_axis_within_a_decade_has_distinct_labels():
    """Mean p-values between 0.5405 and 0.561 (a team export's Sensitivity page): plotly's own log ticks labelled
    to 2 digits read 0.56, 0.56, 0.56, 0.55, …; the axis gets five ticks from the smallest to the largest value,
    every label distinct and each the tick's value at the digits shown. A span of a decade or more keeps plotly's
    ticks."""
    t = pd.DataFrame({"metric": ["dcg"] * 3 + ["ndcg"] * 3, "clip": [1.0, 8.0, float("inf")] * 2,
                      "tpr": [0.09, 0.03, 0.03, 0.09, 0.06, 0.06], "mean_p": [0.56, 0.545, 0.5405, 0.561, 0.559, 0.559],
                      "n_detected": [24, 8, 8, 24, 17, 17], "n_settings": [280] * 6, "sign_agreement": [0.5] * 6})
    res = SimpleNamespace(table=t, best_clips={}, level=0.99, policy="ranker_v2", discount="pbm", rate_column="tpr",
                          rate_name="TPR")
    axis = charts.sensitivity_figure(res).layout.yaxis2
    assert list(axis.ticktext) == ["0.54", "0.546", "0.551", "0.556", "0.561"]
    assert list(axis.tickvals) == [0.54, 0.546, 0.551, 0.556, 0.561]
    wide = t.assign(mean_p=[0.5, 0.05, 0.01, 0.6, 0.2, 0.2])
    axis = charts.sensitivity_figure(SimpleNamespace(**{**vars(res), "table": wide})).layout.yaxis2
    assert axis.tickvals is None and axis.tickformat == ".2g"
