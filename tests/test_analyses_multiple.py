"""Multiple testing on the Decisions and Sensitivity analyses: the adjusted p-values equal statsmodels'
``multipletests`` on the same p-values, the decisions / detections follow them, and no adjustment changes
nothing."""

from __future__ import annotations

import math

import numpy as np
import pytest
from analyses_world import small_world
from scipy import stats as sps
from statsmodels.stats.multitest import multipletests

from offeval_core.analyses import decision_boxes, sensitivity

ESTS = [("dcg", "pbm", "pbm", 1.0), ("dcg", "pbm", "pbm", math.inf)]
METHOD = {"holm": "holm", "bh": "fdr_bh"}


@pytest.fixture(scope="module")
def moments():
    return small_world()[2]


def test_decisions_without_adjustment_are_the_ci_decisions(moments):
    plain = decision_boxes(moments, estimators=ESTS, level=0.9)
    none = decision_boxes(moments, estimators=ESTS, level=0.9, adjust="none")
    assert none.takeaway == plain.takeaway and none.adjust == "none"
    assert (none.boxes["offline_p_adj"] == none.boxes["offline_p"]).all()
    z = sps.norm.ppf(0.95)
    for rec in none.boxes.itertuples():
        # the two-sided p of the offline effect, from its normal CI: se = width / (2 z)
        se = (rec.offline_high - rec.offline_low) / (2 * z)
        assert rec.offline_p == pytest.approx(2 * sps.norm.sf(abs(rec.offline_effect) / se), rel=1e-9)
        assert (rec.offline_decision != "neutral") == (rec.offline_p < 0.1)
    assert none.family == "3 A/B tests × 1 policy × 2 rewards" and none.family_size == 6
    assert "each of the 6 boxes per estimator" in none.adjustment


@pytest.mark.parametrize("method", ["holm", "bh"])
def test_decision_p_values_match_statsmodels(moments, method):
    raw = decision_boxes(moments, estimators=ESTS, level=0.9).boxes
    res = decision_boxes(moments, estimators=ESTS, level=0.9, adjust=method)
    b = res.boxes
    for est in b["estimator"].unique():
        part, p = b[b["estimator"] == est], raw[raw["estimator"] == est]["offline_p"].to_numpy()
        np.testing.assert_allclose(part["offline_p_adj"], multipletests(p, method=METHOD[method])[1], rtol=1e-12)
        assert len(part) == res.family_size == 6
    online = raw.drop_duplicates(["experiment_id", "reward"])
    want = dict(zip(zip(online["experiment_id"], online["reward"], strict=True),
                    multipletests(online["online_p"], method=METHOD[method])[1], strict=True))
    for rec in b.itertuples():
        assert rec.online_p_adj == pytest.approx(want[(rec.experiment_id, rec.reward)], rel=1e-12)
        sig = rec.offline_p_adj <= 0.1
        assert rec.offline_decision == ("neutral" if not sig else "positive" if rec.offline_effect > 0 else "negative")
    assert "family: 3 A/B tests × 1 policy × 2 rewards per estimator (m = 6)" in res.adjustment


def test_holm_turns_a_decision_off(moments):
    raw = decision_boxes(moments, estimators=ESTS, level=0.9).boxes
    holm = decision_boxes(moments, estimators=ESTS, level=0.9, adjust="holm")
    key = ["experiment_id", "reward", "estimator"]
    both = raw.merge(holm.boxes, on=key, suffixes=("_raw", "_holm"))
    off = both[(both["offline_decision_raw"] != "neutral") & (both["offline_decision_holm"] == "neutral")]
    # DCG (pbm, Q̂) on exp03 / like: p = 0.053 < 0.1 alone, but 3rd smallest of 6, so Holm's 4 · p = 0.21 > 0.1
    assert len(off) == 1
    row = off.iloc[0]
    assert (row["experiment_id"], row["reward"], row["estimator"]) == ("exp03", "like", "DCG (pbm, Q̂)")
    q = raw[raw["estimator"] == "DCG (pbm, Q̂)"]["offline_p"].sort_values().to_numpy()
    assert row["offline_p_holm"] == pytest.approx(q[2]) == pytest.approx(0.05345, abs=1e-5)
    assert row["offline_p_adj_holm"] == pytest.approx(max(6 * q[0], 5 * q[1], 4 * q[2]), rel=1e-12)
    assert row["offline_p_adj_holm"] == pytest.approx(0.2138, abs=1e-4)
    assert "DCG (pbm, Q̂) keeps 2 of 3 offline decisions" in holm.takeaway
    # online: the two A/B tests significant at 10 % alone (p = 0.046, 0.099) do not survive among six
    assert (raw["online_decision"] != "neutral").any() and (holm.boxes["online_decision"] == "neutral").all()
    assert "online 0 of 2 A/B tests stay significant" in holm.takeaway


def test_sensitivity_without_adjustment_is_unchanged(moments):
    plain = sensitivity(moments, online_alpha=1.0, level=0.9)
    none = sensitivity(moments, online_alpha=1.0, level=0.9, adjust="none")
    assert plain.table.equals(none.table) and plain.takeaway == none.takeaway
    # the 12 online improvements of the 18 (experiment, day, reward) settings (p < 1: every effect > 0)
    assert "p_adj" not in none.per_setting and none.family_size == 12
    assert none.family == "12 settings (experiment × day × reward) at each of 4 clip values and 2 metrics"


@pytest.mark.parametrize("method", ["holm", "bh"])
def test_sensitivity_p_values_match_statsmodels_and_drive_detections(moments, method):
    raw = sensitivity(moments, online_alpha=1.0, level=0.9)
    res = sensitivity(moments, online_alpha=1.0, level=0.9, adjust=method)
    per = res.per_setting
    for (metric, clip), part in per.groupby(["metric", "clip"]):
        p = raw.per_setting[(raw.per_setting["metric"] == metric) & (raw.per_setting["clip"] == clip)]["p_value"]
        np.testing.assert_allclose(part["p_adj"], multipletests(p.to_numpy(), method=METHOD[method])[1], rtol=1e-12)
        assert (part["detected"] == (part["p_adj"] <= 0.05)).all()            # one-sided α = (1 − 0.9) / 2
        assert (part["detected_unadjusted"] == p.reset_index(drop=True).le(0.05).to_numpy()).all()
        row = res.table[(res.table["metric"] == metric) & (res.table["clip"] == clip)].iloc[0]
        assert row["n_detected"] == part["detected"].sum()
        assert row["n_detected_unadjusted"] == raw.table.set_index(["metric", "clip"]).loc[(metric, clip), "n_detected"]
    assert "m = 12" in res.adjustment


def test_holm_turns_detections_off(moments):
    res = sensitivity(moments, online_alpha=1.0, level=0.9, adjust="holm")
    t = res.table.set_index(["metric", "clip"])
    # DCG at m = 64: 5 of the 12 improvements detected alone, 1 once their p-values are multiplied by up to 12
    assert (t.loc[("dcg", 64.0), "n_detected_unadjusted"], t.loc[("dcg", 64.0), "n_detected"]) == (5, 1)
    assert (t.loc[("dcg", 1.0), "n_detected_unadjusted"], t.loc[("dcg", 1.0), "n_detected"]) == (1, 0)
    assert "DCG keeps 1 of 5 unadjusted detections at m ∈ {64, ∞}" not in res.takeaway
    assert "DCG keeps 1 of 5 unadjusted detections at m = 64" in res.takeaway
    with pytest.raises(ValueError, match="adjust"):
        sensitivity(moments, adjust="bonferroni")
