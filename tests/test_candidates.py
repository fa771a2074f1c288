"""Candidates before an A/B test (offeval_core.analyses.candidates, offeval_core.forest): every candidate's estimate
and paired effect over the logging policy against an independent loop implementation, the adjustment over the
candidates, the one clip of the comparison, the "A/B test next" takeaway and the forest plot."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from analyses_world import small_world
from reference_impl import ref_log2, ref_paired_effect, ref_policy_value

from offeval_core.analyses import Variant, candidates_figure, common_clip, compare_candidates
from offeval_core.analyses.clip_tuning import ClipTuningResult, recommend_clip
from offeval_core.engine import Grid, reduce
from offeval_core.errors import UnknownName
from offeval_core.multiple import adjust
from offeval_core.stats import normal_quantile

CANDS = ("cand_01", "cand_02", "cand_10")
LEVEL = 0.99


@pytest.fixture(scope="module")
def world():
    _, logs, _ = small_world()
    m = reduce(logs, Grid(rewards=("like",), policies=CANDS, discounts=("log2",), exposures=("log2",),
                          clips=(1.0, 16.0, math.inf)))
    return logs, m


def _pairs(clip):
    return [(p, Variant("dcg", "log2", "log2", clip)) for p in CANDS]


def test_effects_and_estimates_equal_the_reference_loop_on_the_control_arm(world):
    logs, m = world
    res = compare_candidates(m, candidates=_pairs(16.0), reward="like", level=LEVEL, adjust="none")
    arm = logs.sessions.set_index("session")["arm"].astype(str)
    raw = logs.frame.assign(session_arm=logs.frame["session"].map(arm).to_numpy())
    control = raw[raw["session_arm"] == "control"].assign(session_id=lambda d: d["session"])
    z = normal_quantile(LEVEL)
    t = res.table.set_index("policy")
    kw = dict(reward="like", discount=ref_log2, exposure=ref_log2, clip=16.0)
    logging = ref_policy_value(control, policy=None, metric="dcg", **kw)
    for p in CANDS:
        eff, se = ref_paired_effect(control, policy=p, metric="dcg", **kw)
        assert t.loc[p, "effect"] == pytest.approx(eff, rel=1e-9)
        assert t.loc[p, "effect_low"] == pytest.approx(eff - z * se, rel=1e-9)
        assert t.loc[p, "estimate"] == pytest.approx(ref_policy_value(control, policy=p, metric="dcg", **kw), rel=1e-9)
        assert t.loc[p, "logging"] == pytest.approx(logging, rel=1e-9)
        assert t.loc[p, "relative_effect"] == pytest.approx(eff / logging, rel=1e-9)
        assert t.loc[p, "n_sessions"] == control["session"].nunique()
    # unadjusted: beats the logging policy exactly when the CI lies above 0; below when it lies under 0
    assert (t["beats_logging"] == (t["effect_low"] > 0)).all()
    assert (t["below_logging"] == (t["effect_high"] < 0)).all()
    assert list(res.table["effect"]) == sorted(res.table["effect"], reverse=True)   # largest effect first


@pytest.mark.parametrize("method", ["holm", "bh"])
def test_p_values_are_adjusted_over_the_candidates(world, method):
    _, m = world
    res = compare_candidates(m, candidates=_pairs(16.0), reward="like", level=LEVEL, adjust=method)
    t = res.table
    expected = adjust(t["p_value"].to_numpy(), method=method, alpha=(1 - LEVEL) / 2)
    assert t["p_adj"].to_numpy() == pytest.approx(expected.adjusted, rel=1e-12)
    assert (t["beats_logging"] == (expected.rejected & (t["effect"] > 0))).all()
    assert (t["p_adj"] >= t["p_value"] - 1e-15).all()
    assert res.alpha == pytest.approx(0.005)


def test_the_takeaway_names_the_candidate_to_test_next_with_its_numbers(world):
    _, m = world
    res = compare_candidates(m, candidates=_pairs(16.0), reward="like", level=LEVEL, adjust="holm")
    t = res.table.set_index("policy")
    winners = t[t["beats_logging"]]
    assert len(winners) >= 1 and res.next_policy == winners["effect"].idxmax()
    best = t.loc[res.next_policy]
    assert res.takeaway.startswith(f"A/B test {res.next_policy} next: its offline DCG (log2, Q̂ m=16) effect over "
                                   f"the logging policy is {best['effect']:+.4g} [{best['effect_low']:+.4g}, "
                                   f"{best['effect_high']:+.4g}] (99 % CI")
    assert f"the largest of the {len(winners)} of 3 candidates that beat the logging policy after Holm adjustment" \
        in res.takeaway
    if t["below_logging"].any():
        assert "Below the logging policy (CI under 0): cand_10." in res.takeaway


def test_without_a_winner_the_takeaway_says_so(world):
    _, m = world
    res = compare_candidates(m, candidates=[("cand_10", Variant("dcg", "log2", "log2", 16.0))], reward="like",
                             level=LEVEL)
    assert res.next_policy is None
    assert res.takeaway.startswith("No candidate beats the logging policy offline after Holm adjustment "
                                   "(1 candidate, 99 % CIs): the largest effect, cand_10's")


def test_bad_arguments(world):
    _, m = world
    with pytest.raises(ValueError, match="candidates lists a policy twice: cand_01, cand_01"):
        compare_candidates(m, candidates=_pairs(16.0)[:1] * 2, reward="like")
    with pytest.raises(UnknownName, match=r"^policy 'treatment' \(a candidate\) was not computed; available: "
                                          "cand_01, cand_02, cand_10$"):
        compare_candidates(m, candidates=[("treatment", Variant("dcg", "log2", "log2", 16.0))], reward="like")
    with pytest.raises(ValueError, match="clip 4 of DCG"):
        compare_candidates(m, candidates=[("cand_01", Variant("dcg", "log2", "log2", 4.0))], reward="like")
    with pytest.raises(ValueError, match="adjust must be one of"):
        compare_candidates(m, candidates=_pairs(16.0), reward="like", adjust="bonferroni")


def _tuning(clips, estimates, stderrs, bounds) -> ClipTuningResult:
    t = pd.DataFrame({"clip": clips, "estimate": estimates, "stderr": stderrs, "bias_bound": bounds})
    return ClipTuningResult(t, clips[0], "slope", "", "like", "p", "pbm", "pbm", 0.95, 1.0, 100, 1000)


def test_the_common_clip_satisfies_every_candidates_rule():
    """Each candidate's rule: m ≥ its SLOPE choice and bias bound(m) ≤ its effect. The least clipped of the
    recommendations satisfies both for every candidate (the bounds fall as m grows); the most clipped would not."""
    clips = [1.0, 4.0, 16.0, 64.0, math.inf]
    a = _tuning(clips, [0.5, 0.9, 0.95, 0.97, 1.0], [0.01, 0.05, 0.1, 0.15, 0.2], [0.9, 0.05, 0.02, 0.01, 0.0])
    b = _tuning(clips, [0.5, 0.9, 0.95, 0.97, 1.0], [0.01, 0.05, 0.1, 0.15, 0.2], [0.9, 0.3, 0.08, 0.01, 0.0])
    recs = {"a": recommend_clip(a.table, level=a.level, effect=0.1), "b": recommend_clip(b.table, level=b.level, effect=0.05)}
    assert (recs["a"].clip, recs["b"].clip) == (4.0, 64.0)
    m, reason = common_clip({p: r.clip for p, r in recs.items()})
    assert m == 64.0
    for res, r in ((a, recs["a"]), (b, recs["b"])):
        bound = res.table.set_index("clip").loc[m, "bias_bound"]
        assert m >= r.slope_clip and bound <= r.reference
    assert a.table.set_index("clip").loc[4.0, "bias_bound"] <= 0.1 < b.table.set_index("clip").loc[4.0, "bias_bound"]
    assert reason.startswith("m = 64: the least clipped of the candidates' recommended clips (a 4, b 64;")
    with pytest.raises(ValueError, match="at least one candidate"):
        common_clip({})


def test_forest_plot_draws_every_candidate_with_its_intervals(world):
    _, m = world
    res = compare_candidates(m, candidates=_pairs(16.0), reward="like", level=LEVEL)
    fig = candidates_figure(res)
    t = res.table.set_index("policy")
    points = [tr for tr in fig.data if tr.error_x is not None and tr.error_x.array is not None]
    seen = {}
    for tr in points:
        for y, x, up, down in zip(tr.y, tr.x, tr.error_x.array, tr.error_x.arrayminus, strict=True):
            seen.setdefault(y, []).append((x, x + up, x - down))
    for p in CANDS:
        est, eff = sorted(seen[p], key=lambda v: -abs(v[0] - t.loc[p, "effect"]))  # estimate first, effect second
        assert est == pytest.approx((t.loc[p, "estimate"], t.loc[p, "estimate_high"], t.loc[p, "estimate_low"]))
        assert eff == pytest.approx((t.loc[p, "effect"], t.loc[p, "effect_high"], t.loc[p, "effect_low"]))
    star = [tr for tr in fig.data if tr.name == "A/B test next"]
    assert len(star) == (res.next_policy is not None) and (not star or star[0].y[0] == res.next_policy)
    assert fig.layout.yaxis.categoryarray[-1] == res.table["policy"].iloc[0]   # the largest effect on top
    assert fig.layout.title.text == "3 candidates vs the logging policy — like, DCG (log2, Q̂ m=16)"
    lines = [s.x0 for s in fig.layout.shapes]
    assert t["logging"].iloc[0] in lines and 0 in lines                   # the logging estimate and the zero line
    assert np.isfinite(lines).all()
