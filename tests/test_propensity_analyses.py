"""The analyses with a propensity target policy or a target not named 'treatment': clip tuning of capped IS
(Gilotte Sec. 4.2, Fig. 2) in closed form, the levels beside the uplifts of the decision boxes, Table 2 with any
name for Rₜ, and the labels of the propensity estimators."""

from __future__ import annotations

import math

import pandas as pd
import pytest
from analyses_world import small_world

from offeval_core.analyses import (
    Variant,
    clip_tuning,
    decision_boxes,
    offline_online_correlation,
    variant_label,
)
from offeval_core.analyses.clip_tuning import mean_offline_effect
from offeval_core.engine import Grid, reduce
from offeval_core.estimators import online_results, summarize_groups
from offeval_core.importance import reduce_importance
from offeval_core.logs import read_logs


def _propensity_logs():
    # two sessions of one row each; weights π_t / π_p = 0.6 / 0.2 = 3 (clicked) and 0.1 / 0.2 = 0.5 (not clicked)
    return read_logs(pd.DataFrame({"session_id": [1, 2], "rank": [1, 1], "click": [1.0, 0.0],
                                   "logging_propensity": [0.2, 0.2], "target_propensity__bts": [0.6, 0.1]}))


def test_clip_tuning_of_a_propensity_policy_is_capped_is_in_closed_form():
    res = clip_tuning(_propensity_logs(), reward="click", policy="bts", clips=[1.0, 2.0, math.inf])
    assert (res.estimator, res.discount, res.exposure) == ("cis", "propensity", "propensity")
    t = res.table.set_index("clip")
    # c = 2: CIS = (min(2, 3)·1 + min(2, 0.5)·0) / 2 sessions = 1; bias bound = r_max · Σ (w − c)₊ / N = 1 · 1 / 2
    assert t.loc[2.0, "estimate"] == pytest.approx(1.0)
    assert t.loc[2.0, "bias_bound"] == pytest.approx(0.5)
    assert t.loc[2.0, "bias_estimate"] == pytest.approx(0.5)          # IS − CIS(2) = 1.5 − 1
    assert t.loc[2.0, "clipped_rows"] == pytest.approx(0.5)
    assert t.loc[2.0, "clipped_mass"] == pytest.approx(1 / 3.5)       # Σ (w − c)₊ / Σ w
    assert t.loc[2.0, "ess"] == pytest.approx(2.5 ** 2 / (2 ** 2 + 0.5 ** 2))   # Kish on min(c, w) = (2, 0.5)
    assert t.loc[1.0, "estimate"] == pytest.approx(0.5) and t.loc[1.0, "bias_bound"] == pytest.approx(1.0)
    assert t.loc[math.inf, "estimate"] == pytest.approx(1.5) and t.loc[math.inf, "bias_bound"] == 0
    assert t.loc[2.0, "max_weight"] == pytest.approx(2.0) and t.loc[math.inf, "max_weight"] == pytest.approx(3.0)


def test_clip_tuning_reads_the_importance_moments_it_is_given():
    logs = _propensity_logs()
    m = reduce_importance(logs, rewards=("click",), policies=("bts",), clips=(1.0, 2.0), weights="propensity")
    res = clip_tuning(logs, reward="click", policy="bts", clips=[1.0, 2.0, math.inf], moments=m)
    assert res.table["estimate"].tolist() == pytest.approx([0.5, 1.0, 1.5])
    assert mean_offline_effect(m, reward="click", policy="bts", discount="propensity", exposure="propensity",
                               level=0.95, metric="cis") == pytest.approx(1.5 - 0.5)   # |IS − logging mean|


def test_decision_boxes_carry_the_targets_estimate_and_the_treatment_arms_mean():
    _, _, m = small_world()
    est = Variant("dcg", "pbm", "pbm", 64.0)
    res = decision_boxes(m, estimators=[est], policy="treatment", level=0.99, relative=True, rewards=("like",))
    groups = {g.keys["experiment_id"]: g for g in summarize_groups(m, reward="like", policy="treatment", metric="dcg",
                                                                   clip=64.0, by=("experiment_id",), level=0.99)}
    online = online_results(m, reward="like", by=("experiment_id",), level=0.99)
    for row in res.boxes.itertuples():
        g, on = groups[row.experiment_id], online[(row.experiment_id,)]
        # absolute levels even though the uplifts are relative
        assert (row.offline_target, row.offline_target_low, row.offline_target_high) == pytest.approx(
            (g.target.value, g.target.ci.low, g.target.ci.high), rel=1e-12)
        assert (row.online_treatment, row.online_treatment_low, row.online_treatment_high) == pytest.approx(
            (on.treatment.value, on.treatment.ci.low, on.treatment.ci.high), rel=1e-12)
    label = variant_label(est)
    take = res.estimator_takeaway(label)
    n_agree = int((res.boxes["category"] == "agree").sum())
    assert take.startswith(f"treatment vs the logging policy, {label}: the offline decision is the online one in "
                           f"{n_agree} of 3 A/B tests")


def test_table2_with_a_target_not_named_treatment_equals_the_same_policy_named_treatment():
    world, _, m = small_world()
    renamed = read_logs(world.logs.rename(columns={"rank__treatment": "rank__ranker_v2"}))
    m2 = reduce(renamed, Grid(rewards=("like",), policies=("ranker_v2",), discounts=("pbm",), exposures=("pbm",),
                              clips=(1.0, math.inf)))
    variants = [("dcg", "pbm", "pbm", 1.0), ("dcg", "pbm", "pbm", math.inf), ("ndcg", "pbm", "pbm", math.inf)]
    a = offline_online_correlation(m, variants=variants, rewards=("like",))
    b = offline_online_correlation(m2, variants=variants, rewards=("like",), policies=("logging", "ranker_v2"))
    assert b.target == "ranker_v2" and a.target == "treatment"
    assert b.table["r"].to_numpy() == pytest.approx(a.table["r"].to_numpy(), nan_ok=True, rel=1e-12)
    assert list(b.table["policy_label"]) == list(a.table["policy_label"])
    assert b.series(b.table["experiment_id"].iloc[0], "like", "Rₜ").attrs["policy"] == "ranker_v2"
    assert "Rₜ = ranker_v2 (treatment arm)" in b.styled_html()


def test_importance_cells_of_the_logging_policy_are_identities():
    logs = read_logs(pd.DataFrame({
        "session_id": range(12), "rank": [1] * 12, "click": [1, 1, 1, 0, 0, 0, 1, 0, 1, 1, 0, 0],
        "day": [1, 1, 2, 2, 3, 3, 4, 4, 1, 2, 3, 4], "arm": ["control"] * 8 + ["treatment"] * 4,
        "logging_propensity": [0.5] * 12, "target_propensity__bts": [0.9, 0.1, 0.8, 0.3, 0.5, 0.7, 0.2, 0.6] + [0.5] * 4}))
    m = reduce_importance(logs, rewards=("click",), policies=("bts",), clips=(2.0,), weights="propensity")
    v = [Variant("cis", "propensity", "propensity", 2.0)]
    res = offline_online_correlation(m, variants=v, policies=("logging", "bts"))
    t = res.table.set_index("policy")
    assert bool(t.loc["logging", "identity"]) and t.loc["logging", "r"] == pytest.approx(1.0)
    assert not bool(t.loc["bts", "identity"])


def test_propensity_estimators_are_labelled_by_their_cap():
    p = "propensity"
    assert variant_label(Variant("is", p, p, math.inf)) == "IS (propensity)"
    assert variant_label(Variant("snips", p, p, math.inf)) == "SNIPS (propensity)"
    assert variant_label(Variant("ncis", p, p, 16.0)) == "NCIS (propensity, c = 16)"
    assert variant_label(Variant("cis", p, p, math.inf)) == "CIS (propensity, c = ∞)"
    assert variant_label(Variant("ncis", "pbm", "pbm", 16.0)) == "NCIS (pbm, Q̂ m=16)"   # exposure weights unchanged
