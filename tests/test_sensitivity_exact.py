"""analyses.sensitivity by hand: the result's words (its side, bound, scope and adjustment sentence) and the
selection rules at their boundaries."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from offeval_core.analyses.sensitivity import SensitivityResult, select_settings

FAMILY = "6 settings (experiment × day × reward) at each of 4 clip values and 2 metrics"


def _result(**kw):
    base = {"table": pd.DataFrame(), "per_setting": pd.DataFrame(), "settings": pd.DataFrame(),
            "best_clips": {"dcg": (4.0,), "ndcg": (4.0, 64.0), "pndcg": ()}, "takeaway": "", "policy": "treatment",
            "discount": "pbm", "exposure": "pbm", "level": 0.99, "online_alpha": 0.001, "selection": "significant",
            "family": FAMILY, "family_size": 6}
    return SensitivityResult(**(base | kw))


def test_side_names_and_the_one_best_clip():
    imp, neg = _result(), _result(side="negatives")
    assert (imp.rate_name, imp.rate_column) == ("TPR", "tpr")
    assert (neg.rate_name, neg.rate_column) == ("negatives detected", "negatives_detected")
    assert imp.best_clip("dcg") == 4.0
    assert imp.best_clip("ndcg") is None          # a tie names no single m
    assert imp.best_clip("pndcg") is None and imp.best_clip("dcg@10") is None   # a flat line, an unknown metric


def test_effect_bound_and_scope_in_words():
    assert _result().effect_bound == "effect > 0"
    assert _result(min_effect=0.25).effect_bound == "effect > 0.25"
    assert _result(side="negatives").effect_bound == "effect < 0"          # never "< -0"
    assert _result(side="negatives", min_effect=0.25).effect_bound == "effect < -0.25"
    assert _result().scope == "with a significant online improvement (p < 0.001, effect > 0)"
    assert _result(side="negatives", online_alpha=0.05, min_effect=1e-7).scope == (
        "with a significant online degradation (p < 0.05, effect < -1e-07)")
    assert _result(selection="list").scope == "listed, with an online improvement (effect > 0)"
    assert _result(selection="list", side="negatives", min_effect=2.0).scope == (
        "listed, with an online degradation (effect < -2)")


def test_adjustment_sentence_names_the_family_the_method_and_the_one_sided_alpha():
    # one-sided α = (1 − level) / 2: 0.005 at 99 %, 0.025 at 95 %, 0.0125 at 97.5 %
    assert _result().adjustment == (
        f"Unadjusted: each of the {FAMILY} is detected on its own 99 % CI (one-sided α = 0.005); choose Holm or "
        "Benjamini-Hochberg to control the errors over the family.")
    assert _result(level=0.975).adjustment == (
        f"Unadjusted: each of the {FAMILY} is detected on its own 97.5% CI (one-sided α = 0.0125); choose Holm or "
        "Benjamini-Hochberg to control the errors over the family.")
    assert _result(adjust="holm", level=0.95).adjustment == (
        f"Detections on adjusted one-sided p-values, Holm (family-wise error) at α = 0.025; family: the {FAMILY} "
        "(m = 6).")
    assert _result(adjust="bh", family_size=12).adjustment == (
        f"Detections on adjusted one-sided p-values, Benjamini-Hochberg (false discovery rate) at α = 0.005; "
        f"family: the {FAMILY} (m = 12).")


def test_select_settings_at_each_threshold():
    on = pd.DataFrame({"experiment_id": ["a", "b", "c", "d", "e", "f"], "day": 1, "reward": "like",
                       "online_effect": [0.5, 0.25, -0.25, -0.5, 0.0, 0.5],
                       "online_p": [0.01, 0.001, 0.01, 0.001, 0.0, 0.02]},
                      index=[10, 11, 12, 13, 14, 15])
    ids = lambda f: f["experiment_id"].tolist()  # noqa: E731
    assert ids(select_settings(on, online_alpha=0.02)) == ["a", "b"]           # f: p = α is not below α
    assert ids(select_settings(on, online_alpha=0.02, side="negatives")) == ["c", "d"]   # e: effect 0 is neither
    assert ids(select_settings(on, online_alpha=0.01)) == ["b"]
    assert ids(select_settings(on, online_alpha=1, min_effect=0.25)) == ["a", "f"]       # b: 0.25 is not > 0.25
    assert ids(select_settings(on, online_alpha=1, min_effect=0.25, side="negatives")) == ["d"]
    assert ids(select_settings(on, online_alpha=1, min_effect=0)) == ["a", "b", "f"]
    got = select_settings(on, online_alpha=1)
    assert list(got.index) == [0, 1, 2]                                         # a fresh index
    assert list(got.columns) == list(on.columns)
    # the default threshold is the paper's 0.001 (strict)
    assert ids(select_settings(on.assign(online_p=[1e-4, 0.001, 1e-4, 0.001, 1e-4, 9.99e-4]))) == ["a", "f"]
    for bad, message in [(0, "online_alpha must be in (0, 1] (the paper: 0.001), got 0"),
                         (1.5, "online_alpha must be in (0, 1] (the paper: 0.001), got 1.5")]:
        with pytest.raises(ValueError) as info:
            select_settings(on, online_alpha=bad)
        assert str(info.value) == message
    with pytest.raises(TypeError) as info:
        select_settings(on, online_alpha=True)
    assert str(info.value) == "online_alpha must be a number in (0, 1], got bool True"
    with pytest.raises(TypeError) as info:
        select_settings(on, online_alpha="0.01")
    assert str(info.value) == "online_alpha must be a number in (0, 1], got str '0.01'"
    for bad in (-0.1, math.inf, math.nan, True, "0"):
        with pytest.raises(ValueError) as info:
            select_settings(on, min_effect=bad)
        assert str(info.value) == (f"min_effect must be a finite number ≥ 0 (the online effect must exceed it), "
                                   f"got {bad!r}")
    with pytest.raises(ValueError) as info:
        select_settings(on, side="both")
    assert str(info.value) == "side must be one of 'improvements', 'negatives'; got 'both'"


# ------------------------------------------------------------------------------------------- a world by hand
# One experiment, reward "click", two ranks per session, the log2 discount and exposure at m = 1 and m = ∞.
# A control session with its click at logged rank 2 that the target moves to rank 1 ("A") has the label
# ℓ = min(m, 1 / D0(2)) = min(m, log2 3) and the paired difference ℓ · (D(1) − D(2)) = ℓ (1 − 1/log2 3): a(1) =
# 1 − 1/log2 3, a(∞) = log2 3 − 1. With the click at rank 1 ("B", the target moves it to rank 2) the difference is
# 1/log2 3 − 1 = −a(1) at every m; without a click ("N"), or with the target's ranks the logged ones ("S"), 0.
#   day 0: control only (no online effect: never a setting)
#   day 1: control A A A N (clicks 1 1 1 0), treatment 1 1 1 1: online +0.25; offline mean 3a/4, se a/4
#   day 2: control B B B N (1 1 1 0), treatment 0 0 0 1: online −0.5; offline mean −3a(1)/4, se a(1)/4
#   day 3: control N N N N (0 0 0 0), treatment 1 1 0 0: online +0.5; offline 0 with se 0
#   day 4: control S S S S (1 1 1 1), treatment 0 0 0 1: online −0.75; offline 0 with se 0
# Offline mean / se = ±3 on days 1 and 2 at every m: detected at 99 % (z = 2.576), not at 99.9 % (z = 3.29);
# the one-sided p of a detected day is Φ(−3), of days 3 and 4 (value 0, se 0) ½.

L3 = math.log2(3)
A = {1.0: 1 - 1 / L3, math.inf: L3 - 1}
KINDS = {"A": ([1, 2], [0, 1], [2, 1]), "B": ([1, 2], [1, 0], [2, 1]), "N": ([1, 2], [0, 0], [2, 1]),
         "S": ([1, 2], [1, 0], [1, 2]), "T1": ([1], [1], [1]), "T0": ([1], [0], [1])}
DAYS = {0: ("AB", ""), 1: ("AAAN", ["T1"] * 4), 2: ("BBBN", ["T0", "T0", "T0", "T1"]),
        3: ("NNNN", ["T1", "T1", "T0", "T0"]), 4: ("SSSS", ["T0", "T0", "T0", "T1"])}


@pytest.fixture(scope="module")
def hand():
    from offeval_core.engine import Grid, reduce
    from offeval_core.logs import read_logs

    rows, sid = [], 0
    for day, (control, treatment) in DAYS.items():
        for arm, kinds in (("control", list(control)), ("treatment", list(treatment))):
            for kind in kinds:
                sid += 1
                for rank, click, target in zip(*KINDS[kind], strict=True):
                    rows.append({"session_id": sid, "rank": rank, "click": float(click), "rank__treatment": target,
                                 "experiment_id": "e1", "day": day, "arm": arm})
    logs = read_logs(pd.DataFrame(rows))
    return reduce(logs, Grid(rewards=("click",), policies=("treatment",), discounts=("log2",), exposures=("log2",),
                             clips=(1.0, math.inf)))


def test_online_settings_by_hand(hand):
    from scipy import stats as sps

    from offeval_core.analyses.sensitivity import ONLINE_COLUMNS, online_settings

    on = online_settings(hand, ["click"])
    assert list(on.columns) == ONLINE_COLUMNS
    # day 0 has no treatment arm: no row, and the days after it are still there
    assert on["day"].tolist() == [1, 2, 3, 4] and set(on["experiment_id"]) == {"e1"} and set(on["reward"]) == {"click"}
    assert on["online_control"].tolist() == [0.75, 0.75, 0.0, 1.0]
    assert on["online_treatment"].tolist() == [1.0, 0.25, 0.5, 0.25]
    assert on["online_effect"].tolist() == [0.25, -0.5, 0.5, -0.75]
    totals = {1: ([1, 1, 1, 0], [1, 1, 1, 1]), 2: ([1, 1, 1, 0], [0, 0, 0, 1]), 3: ([0] * 4, [1, 1, 0, 0]),
              4: ([1] * 4, [0, 0, 0, 1])}
    for (_, rec), (c, t) in zip(on.iterrows(), totals.values(), strict=True):
        # Welch: se² = s_t² / n_t + s_c² / n_c, Welch-Satterthwaite df, p = 2 P(T_df > |diff| / se)
        a, b = np.var(t, ddof=1) / len(t), np.var(c, ddof=1) / len(c)
        df = (a + b) ** 2 / (a * a / (len(t) - 1) + b * b / (len(c) - 1))
        want = 2 * sps.t.sf(abs(np.mean(t) - np.mean(c)) / math.sqrt(a + b), df)
        assert rec["online_p"] == pytest.approx(want, rel=1e-9)
    assert online_settings(hand, []).columns.tolist() == ONLINE_COLUMNS and online_settings(hand, []).empty


def _sens(m, **kw):
    from offeval_core.analyses import sensitivity

    return sensitivity(m, **({"discount": "log2", "exposure": "log2", "online_alpha": 1.0, "metrics": ("dcg",)} | kw))


def test_improvements_by_hand(hand):
    from scipy import stats as sps

    res = _sens(hand)
    assert res.settings[["day", "online_effect"]].values.tolist() == [[1, 0.25], [3, 0.5]]
    per = res.per_setting
    assert list(per.columns) == ["experiment_id", "day", "reward", "online_effect", "online_p", "direction",
                                 "metric", "clip", "effect", "stderr", "ci_low", "ci_high", "p_value", "detected",
                                 "sign_agrees"]
    z = sps.norm.ppf(0.995)
    for clip, a in A.items():
        one = per[(per["day"] == 1) & (per["clip"] == clip)].iloc[0]
        assert (one["experiment_id"], one["reward"], one["metric"], one["direction"]) == ("e1", "click", "dcg", 1)
        assert one["online_effect"] == 0.25
        assert (one["effect"], one["stderr"]) == pytest.approx((0.75 * a, 0.25 * a), rel=1e-12)
        assert (one["ci_low"], one["ci_high"]) == pytest.approx((0.75 * a - z * a / 4, 0.75 * a + z * a / 4),
                                                                rel=1e-9)
        assert one["p_value"] == pytest.approx(sps.norm.sf(3), rel=1e-9)
        assert one["detected"]
        assert bool(one["sign_agrees"])
        # day 3: offline 0 with se 0 is not an offline improvement (a CI of [0, 0] is not > 0)
        three = per[(per["day"] == 3) & (per["clip"] == clip)].iloc[0]
        assert (three["effect"], three["stderr"], three["ci_low"], three["ci_high"]) == (0.0, 0.0, 0.0, 0.0)
        assert three["p_value"] == 0.5 and not three["detected"] and not three["sign_agrees"]
    assert per["detected"].dtype == bool and per["sign_agrees"].dtype == bool
    t = res.table
    assert list(t.columns) == ["metric", "clip", "tpr", "mean_p", "sign_agreement", "n_settings", "n_detected"]
    assert t["clip"].tolist() == [1.0, math.inf] and t["tpr"].tolist() == [0.5, 0.5]
    assert t["n_settings"].tolist() == [2, 2] and t["n_detected"].tolist() == [1, 1]
    assert t["mean_p"].tolist() == pytest.approx([(sps.norm.sf(3) + 0.5) / 2] * 2, rel=1e-9)
    assert t["sign_agreement"].tolist() == [0.5, 0.5]
    assert res.family == "2 settings (experiment × day × reward) at each of 2 clip values and 1 metric"
    assert res.family_size == 2 and res.n_tested == 4
    assert res.closest_p == pytest.approx(min(res.settings["online_p"]), rel=1e-12)
    # at 99.9 % (z = 3.29 > 3) day 1's interval reaches below 0: nothing is detected
    assert _sens(hand, level=0.999).table["n_detected"].tolist() == [0, 0]


def test_negatives_by_hand(hand):
    from scipy import stats as sps

    res = _sens(hand, side="negatives")
    assert res.settings[["day", "online_effect"]].values.tolist() == [[2, -0.5], [4, -0.75]]
    per = res.per_setting
    a = A[1.0]
    for clip in A:                     # a click at rank 1 has the label 1 at every m
        two = per[(per["day"] == 2) & (per["clip"] == clip)].iloc[0]
        assert two["direction"] == -1
        assert (two["effect"], two["stderr"]) == pytest.approx((-0.75 * a, 0.25 * a), rel=1e-12)
        assert two["p_value"] == pytest.approx(sps.norm.sf(3), rel=1e-9)
        assert two["detected"] and two["sign_agrees"]
        four = per[(per["day"] == 4) & (per["clip"] == clip)].iloc[0]
        assert (four["ci_low"], four["ci_high"]) == (0.0, 0.0)
        assert four["p_value"] == 0.5 and not four["detected"] and not four["sign_agrees"]
    assert res.table["negatives_detected"].tolist() == [0.5, 0.5]
    # the nearest online negative: the smaller p of days 2 and 4
    assert res.closest_p == min(per["online_p"])


def test_adjusted_detections_use_the_one_sided_alpha_of_the_level(hand):
    from scipy import stats as sps

    p1 = sps.norm.sf(3)                # 0.00135: Holm's and BH's adjusted p of the smaller of two is 2 p1
    res = _sens(hand, adjust="holm", level=0.99)       # α = 0.005 > 0.0027: day 1 detected
    per = res.per_setting.sort_values(["clip", "day"])  # (m = 1: days 1, 3), (m = ∞: days 1, 3)
    assert list(per.columns)[-3:] == ["sign_agrees", "p_adj", "detected_unadjusted"]
    assert per["p_adj"].tolist() == pytest.approx([2 * p1, 0.5, 2 * p1, 0.5], rel=1e-9)
    assert per["detected"].tolist() == [True, False, True, False] and per["detected"].dtype == bool
    assert res.table["n_detected_unadjusted"].tolist() == [1, 1]
    # at 99.5 % the interval still excludes 0 (z = 2.81 < 3), but α = 0.0025 < 0.0027: Holm drops day 1
    res = _sens(hand, adjust="holm", level=0.995)
    assert res.per_setting["detected"].tolist() == [False] * 4
    assert res.per_setting.sort_values(["clip", "day"])["detected_unadjusted"].tolist() == [True, False, True, False]
    assert res.table["n_detected"].tolist() == [0, 0] and res.table["n_detected_unadjusted"].tolist() == [1, 1]
    bh = _sens(hand, adjust="bh", level=0.995)          # BH: 0.5 · 2 / 2 = 0.5 and p1 · 2 / 1
    assert bh.per_setting.sort_values(["clip", "day"])["p_adj"].tolist() == pytest.approx([2 * p1, 0.5, 2 * p1, 0.5], rel=1e-9)
    assert bh.per_setting["detected"].tolist() == [False] * 4


def test_listed_settings_by_hand(hand):
    from offeval_core.errors import NeedsArms

    res = _sens(hand, settings=[("e1", "1", "click")])      # the day as text matches day 1
    assert res.selection == "list" and res.settings["day"].tolist() == [1]
    assert res.per_setting["day"].unique().tolist() == [1]
    res = _sens(hand, settings=[("e1", 3, "click"), ("e1", 1, "click")])
    assert res.settings["day"].tolist() == [3, 1]
    neg = _sens(hand, side="negatives", settings=[("e1", 4, "click")])
    assert neg.settings["day"].tolist() == [4] and neg.settings["online_effect"].tolist() == [-0.75]
    # the bounds are strict: an effect equal to min_effect is not on the side
    assert _sens(hand, settings=[("e1", 1, "click")], min_effect=0.2).settings["day"].tolist() == [1]
    with pytest.raises(ValueError) as info:
        _sens(hand, settings=[("e1", 1, "click")], min_effect=0.25)
    assert str(info.value) == ("setting ('e1', 1, 'click') has online effect 0.25, not an online improvement: list it "
                               "with side='negatives'")
    with pytest.raises(ValueError) as info:
        _sens(hand, side="negatives", settings=[("e1", 2, "click")], min_effect=0.5)
    assert str(info.value) == ("setting ('e1', 2, 'click') has online effect -0.5, not an online degradation: list it "
                               "with side='improvements'")
    with pytest.raises(ValueError) as info:
        _sens(hand, side="negatives", settings=[("e1", 1, "click")])
    assert str(info.value) == ("setting ('e1', 1, 'click') has online effect 0.25, not an online degradation: list it "
                               "with side='improvements'")
    for bad in ([("e1", 1, "like")], [("e2", 1, "click")], [("e1", 0, "click")]):
        with pytest.raises(NeedsArms) as info:
            _sens(hand, settings=bad)
        assert str(info.value) == f"setting {bad[0]!r} has no online A/B outcome in the moments (needs both arms)"
    with pytest.raises(ValueError) as info:
        _sens(hand, settings=[("e1", 1)])
    assert str(info.value) == "each setting must be (experiment_id, day, reward), got ('e1', 1)"
    with pytest.raises(TypeError) as info:
        _sens(hand, settings=5)
    assert str(info.value) == ("settings must be None (select by the online test) or a list of (experiment_id, day, "
                               "reward), got 5")


def test_result_fields_nearest_p_at_the_bound_and_the_checks_by_name(hand):
    from offeval_core.analyses.sensitivity import ONLINE_COLUMNS

    res = _sens(hand)
    assert (res.policy, res.discount, res.exposure, res.selection) == ("treatment", "log2", "log2", "significant")
    assert list(res.settings.columns) == ONLINE_COLUMNS and list(res.settings.index) == [0, 1]
    listed = _sens(hand, settings=[("e1", 3, "click")])
    assert list(listed.settings.columns) == ONLINE_COLUMNS and list(listed.settings.index) == [0]
    # no setting: an empty family of size 0
    none = _sens(hand, min_effect=1.0)
    assert none.settings.empty and none.per_setting.empty and none.family_size == 0
    assert none.family == "0 settings (experiment × day × reward) at each of 2 clip values and 1 metric"
    # the nearest p counts only effects beyond the bound, strictly: no improvement exceeds 3 (day 1's 0.25 does
    # not, though 1 / 0.25 would), and no degradation is below −0.75 (day 4's −0.75 is not)
    assert math.isnan(_sens(hand, min_effect=3).closest_p)
    assert math.isnan(_sens(hand, side="negatives", min_effect=0.75).closest_p)
    day4 = _sens(hand, side="negatives", min_effect=0.7)
    assert day4.closest_p == day4.settings["online_p"].iloc[0] and day4.settings["day"].tolist() == [4]
    with pytest.raises(ValueError) as info:
        _sens(hand, adjust="bonferroni")
    assert str(info.value) == "adjust must be one of 'none', 'holm', 'bh'; got 'bonferroni'"
    with pytest.raises(ValueError) as info:
        _sens(hand, metrics=("dcg", "DCG"))
    assert str(info.value).startswith("metrics must be one of 'dcg', 'ndcg', 'pndcg', ") and str(
        info.value).endswith("; got 'DCG'")
    with pytest.raises(ValueError) as info:
        _sens(hand, metrics=())
    assert str(info.value) == "metrics must list at least one metric, got an empty sequence"


def test_no_setting_gives_nan_rates_without_a_warning_and_no_best_m(hand):
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")          # numpy's mean of nothing would warn "Mean of empty slice"
        res = _sens(hand, min_effect=1.0)
    t = res.table
    assert t["n_settings"].tolist() == [0, 0] and t["n_detected"].tolist() == [0, 0]
    assert t[["tpr", "mean_p", "sign_agreement"]].isna().all().all()
    assert res.best_clips == {}           # a metric without settings has no entry, not an empty tie


def test_best_clips_by_hand():
    from offeval_core.analyses.sensitivity import best_clips

    def table(rows):
        return pd.DataFrame(rows, columns=["metric", "clip", "n_detected", "n_settings"])

    # one setting suffices; the metrics keep the table's order
    assert best_clips(table([("ndcg", 1.0, 0, 1), ("ndcg", 4.0, 1, 1), ("dcg", 1.0, 1, 1), ("dcg", 4.0, 0, 1)])) == {
        "ndcg": (4.0,), "dcg": (1.0,)}
    assert list(best_clips(table([("ndcg", 1.0, 0, 1), ("ndcg", 4.0, 1, 1), ("dcg", 1.0, 1, 1),
                                  ("dcg", 4.0, 0, 1)]))) == ["ndcg", "dcg"]
    # a metric without settings is skipped, and the metrics after it are still read
    assert best_clips(table([("pndcg", 1.0, 0, 0), ("pndcg", 4.0, 0, 0), ("dcg", 1.0, 2, 3), ("dcg", 4.0, 3, 3)])) == {
        "dcg": (4.0,)}
    # nothing detected, or the same count everywhere: no best m
    assert best_clips(table([("dcg", 1.0, 0, 3), ("dcg", 4.0, 0, 3), ("ndcg", 1.0, 2, 3), ("ndcg", 4.0, 2, 3)])) == {
        "dcg": (), "ndcg": ()}
