import math

import numpy as np
import pandas as pd
import pytest
from analyses_world import CLIPS, small_world

from offeval_core.analyses import clip_tuning
from offeval_core.analyses.clip_tuning import slope_select
from offeval_core.logs import read_logs


def _tiny():
    # session 1: ranks 1-3, like at rank 3; session 2: ranks 1-2, like at rank 1.
    # exposure 0.5^(r-1) → w = 1, 2, 4; the target moves rank 3 → 1 and rank 1 → 2.
    df = pd.DataFrame({"session_id": [1, 1, 1, 2, 2], "rank": [1, 2, 3, 1, 2], "like": [0, 0, 1, 1, 0],
                       "rank__new": [3, 2, 1, 2, 1]})
    return read_logs(df)


def test_hand_computed_table():
    res = clip_tuning(_tiny(), reward="like", policy="new", discount="exponential:0.5",
                      exposure="exponential:0.5", clips=[1, 2, math.inf], level=0.95)
    t = res.table.set_index("clip")
    # per row: w = (1, 2, 4, 1, 2), D(target) = (0.25, 0.5, 1, 0.5, 1)
    # m = 1: excess (0, 1, 3, 0, 1) → Σ D·excess = 0.5 + 3 + 1 = 4.5 over 2 sessions, r_max = 1
    assert t.loc[1.0, "bias_bound"] == pytest.approx(2.25)
    assert t.loc[1.0, "clipped_rows"] == pytest.approx(3 / 5)
    assert t.loc[1.0, "clipped_mass"] == pytest.approx(4.5 / (0.25 + 1 + 4 + 0.5 + 2))
    # bias estimate only from the rewarded rows: session 1 like at w = 4, D = 1 → 3 / 2 sessions
    assert t.loc[1.0, "bias_estimate"] == pytest.approx(1.5)
    v = np.array([0.25, 0.5, 1, 0.5, 1])  # D · min(1, w)
    assert t.loc[1.0, "ess"] == pytest.approx(v.sum() ** 2 / (v ** 2).sum())
    assert t.loc[2.0, "max_weight"] == 2 and t.loc[math.inf, "max_weight"] == 4
    # estimates: m = ∞: session 1 DCG = 1·4·1 = 4, session 2: 1·1·0.5 = 0.5 → mean 2.25
    assert t.loc[math.inf, "estimate"] == pytest.approx(2.25)
    assert t.loc[math.inf, "bias_bound"] == 0
    assert t.loc[1.0, "mse_bound"] == pytest.approx(t.loc[1.0, "variance"] + 2.25 ** 2)


def test_bias_estimate_equals_the_clipped_rewards_summed_row_by_row():
    """The bias estimate V̂(∞) − V̂(m) (read from the moments) equals its row form (1/N) Σ_i c_i D(R(i)) (w_i − m)₊
    over the control rows, computed here independently in numpy."""
    from offeval_core.discounts import parse_discount

    _, logs, m = small_world()
    res = clip_tuning(logs, reward="watch_complete", policy="treatment", clips=CLIPS, moments=m)
    t = res.table.set_index("clip")
    f = logs.frame[logs.frame["arm"] == "control"]
    c = f["watch_complete"].to_numpy(dtype=float)
    w = 1 / parse_discount("pbm", logs=logs)(f["rank"].to_numpy())
    dt = parse_discount("pbm", logs=logs)(f["rank__treatment"].to_numpy())
    n = f["session"].nunique()
    for clip in CLIPS:
        excess = np.maximum(w - clip, 0.0) if math.isfinite(clip) else np.zeros_like(w)
        assert t.loc[clip, "bias_estimate"] == pytest.approx(float(np.sum(c * dt * excess)) / n, rel=1e-9, abs=1e-12)
    assert t.loc[math.inf, "bias_estimate"] == 0.0
    assert (np.diff(res.table["bias_bound"]) <= 0).all()       # bound shrinks as m grows
    assert (np.diff(res.table["clipped_rows"]) <= 0).all()
    assert res.rule_clip in CLIPS
    assert f"m = {res.rule_clip:g}".replace("inf", "∞") in res.rule_text


def test_slope_rule_by_hand():
    # intervals ±2h: ∞ [0.6, 1.4], 64 [0.8, 1.0], 4 [0.7, 0.9] overlaps both, 1 [0.38, 0.42] does not
    clips = [1, 4, 64, math.inf]
    assert slope_select(clips, [0.4, 0.8, 0.9, 1.0], [0.01, 0.05, 0.05, 0.2]) == 4
    assert slope_select(clips, [0.95, 0.95, 0.95, 1.0], [0.01, 0.05, 0.05, 0.2]) == 1
    assert slope_select(clips, [0.4, 0.8, 0.9, 1.0], [0.01, 0.05, float("nan"), 0.2]) == 4


def test_mse_rule_minimises_the_bound():
    _, logs, m = small_world()
    res = clip_tuning(logs, reward="like", policy="treatment", clips=CLIPS, moments=m, rule="mse")
    assert res.rule_clip == res.table.loc[res.table["mse_bound"].idxmin(), "clip"]
    assert "worst-case mean squared error" in res.rule_text


def test_bad_arguments():
    logs = _tiny()
    with pytest.raises(ValueError, match="rule must be one of 'slope', 'mse'; got 'lepski'"):
        clip_tuning(logs, reward="like", policy="new", rule="lepski")
    with pytest.raises(ValueError, match="policy must name a target policy"):
        clip_tuning(logs, reward="like", policy="logging")
    with pytest.raises(ValueError, match="unknown reward 'click'"):
        clip_tuning(logs, reward="click", policy="new")
    with pytest.raises(ValueError, match="clips must be ≥ 1"):
        clip_tuning(logs, reward="like", policy="new", clips=[0.5])


def _result(estimates, stderrs, bounds, *, level=0.95, clips=(1.0, math.inf)):
    from offeval_core.analyses.clip_tuning import ClipTuningResult

    t = pd.DataFrame({"clip": list(clips), "estimate": estimates, "stderr": stderrs, "bias_bound": bounds})
    return ClipTuningResult(t, math.nan, "slope", "", "like", "p", "pbm", "pbm", level, 1.0, 100, 1000)


def test_slope_intervals_are_twice_the_half_width_and_touching_counts():
    # est ± 2h: [0.5, 1.5] and [−0.5, 0.5] share the point 0.5, so m = 1 is admissible; a hair narrower, not
    assert slope_select([1, math.inf], [0.0, 1.0], [0.25, 0.25]) == 1.0
    assert slope_select([1, math.inf], [0.0, 1.0], [0.2499, 0.2499]) == math.inf
    # every candidate NaN: nothing admissible
    assert math.isnan(slope_select([1, math.inf], [math.nan, math.nan], [0.1, 0.1]))


def test_recommend_clip_uses_the_normal_quantile_of_its_level():
    from offeval_core.analyses.clip_tuning import RECOMMENDATION_RULE, recommend_clip

    # estimates 0.3 (m = 1) and 1 (m = ∞), SE 0.1 each: the widened intervals overlap iff 0.7 ≤ 4 · z · 0.1,
    # i.e. z ≥ 1.75: at 95 % (z = 1.960) m = 1 is admitted, at 90 % (z = 1.645) it is not
    r95 = recommend_clip(_result([0.3, 1.0], [0.1, 0.1], [0.0, 0.0]).table, level=0.95, effect=1.0)
    assert (r95.clip, r95.slope_clip) == (1.0, 1.0)
    assert r95.reason == f"m = 1: {RECOMMENDATION_RULE}; its bias bound 0 is below the size of the offline effect (1)."
    r90 = recommend_clip(_result([0.3, 1.0], [0.1, 0.1], [0.0, 0.0]).table, level=0.90, effect=1.0)
    assert (r90.clip, r90.slope_clip) == (math.inf, math.inf)


def test_recommend_clip_moves_up_when_the_bias_bound_exceeds_the_effect():
    from offeval_core.analyses.clip_tuning import recommend_clip

    res = _result([0.95, 0.97, 1.0], [0.1, 0.1, 0.1], [0.2, 0.1, 0.0], clips=(1.0, 4.0, math.inf))
    # SLOPE admits m = 1; its bound 0.2 exceeds the effect 0.1, m = 4's bound 0.1 does not (equal is enough)
    r = recommend_clip(res.table, level=res.level, effect=-0.1)
    assert (r.clip, r.slope_clip, r.bias_bound, r.reference) == (4.0, 1.0, 0.1, 0.1)
    assert r.reason == ("m = 4: the SLOPE / Lepski rule alone would clip at m = 1, but its bias bound exceeds the "
                        "size of the offline effect (0.1), so the recommendation moves to the most clipped m whose "
                        "bias bound (0.1) does not.")
    # without an effect the reference is the unclipped estimate, |1.0|: every bound is below it
    r = recommend_clip(res.table, level=res.level)
    assert (r.clip, r.reference) == (1.0, 1.0)
    assert "the unclipped estimate (1)" in r.reason
    # an effect below every finite bound: no clipping
    assert recommend_clip(res.table, level=res.level, effect=0.05).clip == math.inf
    # a non-finite effect falls back to the unclipped estimate
    assert recommend_clip(res.table, level=res.level, effect=math.nan).reference == 1.0


def test_mean_offline_effect_averages_the_sizes_over_ab_tests():
    from offeval_core.analyses.clip_tuning import mean_offline_effect
    from offeval_core.engine import Grid, reduce

    # the target swaps the two logged items; D = D0 = reciprocal, so per session the paired difference is
    # (0.5 c1 + 2 c2) − (c1 + c2) = −0.5 c1 + c2. e1 controls (1,0), (0,1), (0,1), (1,1): mean +0.5;
    # e2 controls (1,0), (1,0), (1,0), (0,1): mean −0.125. The mean size is (0.5 + 0.125) / 2 = 0.3125.
    rows = []
    spec = {"e1": [(1, 0), (0, 1), (0, 1), (1, 1)], "e2": [(1, 0), (1, 0), (1, 0), (0, 1)]}
    s = 0
    for exp, sessions in spec.items():
        for arm in ("control", "treatment"):
            for rewards in sessions:
                for k in (1, 2):
                    rows.append({"session_id": s, "experiment_id": exp, "arm": arm, "rank": k,
                                 "like": rewards[k - 1], "rank__new": 3 - k})
                s += 1
    logs = read_logs(pd.DataFrame(rows))
    m = reduce(logs, Grid(rewards=("like",), policies=("new",), discounts=("reciprocal",),
                          exposures=("reciprocal",), clips=(1.0, math.inf)))
    got = mean_offline_effect(m, reward="like", policy="new", discount="reciprocal", exposure="reciprocal",
                              level=0.95)
    assert got == pytest.approx(0.3125, abs=1e-12)


def _four_sessions() -> pd.DataFrame:
    # ranks 1 and 3 logged (D0 = exponential:0.5: w = 1 and 4), the target swaps them (D = exponential:0.5);
    # clicks at logged rank 3 in sessions 1-2, at logged rank 1 in session 4
    return pd.DataFrame({"session_id": [1, 1, 2, 2, 3, 3, 4, 4], "rank": [1, 3] * 4,
                         "click": [0, 1, 0, 1, 0, 0, 1, 0], "rank__new": [3, 1] * 4})


def test_the_one_recommended_clip_by_hand():
    """The rule every page, the report and ``--clip auto`` use, computed by hand on four sessions.

    Session DCGs at m: (min(m, 4), min(m, 4), 0, 0.25 · 1): means 0.5625 (m = 1), 1.0625 (m = 2), 2.0625 (m ≥ 4);
    standard errors sd/2 with sd² = Σ(v − v̄)²/3: 0.2577, 0.5437, 1.1198. SLOPE at 95 % (z = 1.96, intervals
    ± 2z·se) walks down from ∞: every interval overlaps the running intersection, so it admits m = 1. Bias bounds
    r_max · Σ D(1) · (4 − m)₊ / 4 sessions = 3 (m = 1), 2 (m = 2), 0 (m ≥ 4). The effect it must stay below:
    the target's unclipped DCG 2.0625 minus the logging policy's 3 clicks / 4 sessions = 0.75, i.e. 1.3125. m = 1
    and m = 2 exceed it, so the recommendation is m = 4."""
    from offeval_core.analyses.clip_tuning import recommended_clip

    logs = read_logs(_four_sessions())
    kw = {"reward": "click", "policy": "new", "discount": "exponential:0.5", "exposure": "exponential:0.5",
          "level": 0.95}
    t = clip_tuning(logs, clips=[1, 2, 4, math.inf], **kw).table.set_index("clip")
    assert t["estimate"].tolist() == pytest.approx([0.5625, 1.0625, 2.0625, 2.0625])
    sd = [np.std(v, ddof=1) / 2 for v in ([1, 1, 0, 0.25], [2, 2, 0, 0.25], [4, 4, 0, 0.25], [4, 4, 0, 0.25])]
    assert t["stderr"].tolist() == pytest.approx(sd)
    assert t["stderr"].tolist() == pytest.approx([0.257694, 0.543666, 1.119780, 1.119780], abs=1e-6)
    assert t["bias_bound"].tolist() == pytest.approx([3.0, 2.0, 0.0, 0.0])
    rec = recommended_clip(logs, clips=[1, 2, 4, math.inf], **kw)
    assert (rec.clip, rec.slope_clip, rec.bias_bound) == (4.0, 1.0, 0.0)
    assert rec.reference == pytest.approx(1.3125)
    assert rec.reason.startswith("m = 4: the SLOPE / Lepski rule alone would clip at m = 1, but its bias bound "
                                 "exceeds the size of the offline effect (1.3)")
    # an effect above m = 2's bound (a larger offline effect) would stop at m = 2: the guard compares with `<=`
    from offeval_core.analyses.clip_tuning import recommend_clip

    tuning = clip_tuning(logs, clips=[1, 2, 4, math.inf], **kw)
    assert recommend_clip(tuning.table, level=tuning.level, effect=2.0).clip == 2.0 and recommend_clip(tuning.table, level=tuning.level, effect=1.99).clip == 4.0
    assert recommend_clip(tuning.table, level=tuning.level, effect=3.0).clip == 1.0


def test_clip_auto_is_the_one_recommended_clip(tmp_path, capsys):
    """``offeval estimate --clip auto`` estimates at the rule's clip (m = 4 on the four sessions) and says why."""
    import json

    from offeval_core.cli import main

    path = tmp_path / "four.csv"
    _four_sessions().to_csv(path, index=False)
    assert main(["estimate", str(path), "--reward", "click", "--policy", "new", "--discount", "exponential:0.5",
                 "--exposure", "exponential:0.5", "--clip", "auto", "--level", "0.95", "--json"]) == 0
    out = capsys.readouterr()
    assert "--clip auto: m = 4: the SLOPE / Lepski rule alone would clip at m = 1" in out.err
    settings = json.loads(out.out)["settings"]
    assert settings["clip"] == 4.0


def test_clip_auto_tunes_a_propensity_policy_as_cis(tmp_path, capsys):
    """A policy given by propensities: ``--clip auto`` is the same rule on capped importance sampling (cap c = m),
    the value ``recommended_clip`` computes on the same logs, and a finite one here (the weights reach 18)."""
    from offeval_core.analyses.clip_tuning import recommended_clip
    from offeval_core.cli import main

    rng = np.random.default_rng(0)
    n = 400
    frame = pd.DataFrame({"session_id": np.arange(n), "rank": 1, "click": rng.integers(0, 2, n),
                          "logging_propensity": rng.uniform(0.05, 0.5, n),
                          "target_propensity__new": rng.uniform(0.05, 0.9, n)})
    rec = recommended_clip(read_logs(frame), reward="click", policy="new", level=0.99)
    assert rec.reason.startswith(f"m = {rec.clip:g}: ") and math.isfinite(rec.clip)
    path = tmp_path / "prop.csv"
    frame.to_csv(path, index=False)
    assert main(["estimate", str(path), "--reward", "click", "--policy", "new", "--estimator", "cis",
                 "--clip", "auto", "--level", "0.99"]) == 0
    assert f"--clip auto: {rec.reason}" in capsys.readouterr().err


def test_a_tuning_result_carries_the_one_recommendation():
    """clip_tuning's ``recommendation`` is the one rule (what ``recommended_clip`` returns); ``rule_clip`` is only
    the named rule's own choice. On the four sessions SLOPE alone says m = 1, the recommendation m = 4."""
    from offeval_core.analyses.clip_tuning import recommended_clip

    logs = read_logs(_four_sessions())
    kw = {"reward": "click", "policy": "new", "discount": "exponential:0.5", "exposure": "exponential:0.5",
          "level": 0.95}
    ct = clip_tuning(logs, clips=[1, 2, 4, math.inf], **kw)
    assert (ct.rule_clip, ct.recommendation.clip) == (1.0, 4.0)
    assert ct.recommendation == recommended_clip(logs, clips=[1, 2, 4, math.inf], **kw)
    assert clip_tuning(logs, clips=[1, 2, 4, math.inf], rule="mse", **kw).recommendation == ct.recommendation
    # without m = ∞ in the grid the effect it weighs is still the unclipped one: the same recommendation's reference
    assert clip_tuning(logs, clips=[1, 2, 4], **kw).recommendation.reference == pytest.approx(1.3125)


def test_no_second_clip_recommendation_in_product_code():
    """recommend_clip is called by clip_tuning only; nobody overwrites a result's mark with another value."""
    import re
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    calls = []
    for path in [*(root / "offeval_core").rglob("*.py"), *(root / "dashboard").rglob("*.py")]:
        for line in path.read_text(encoding="utf-8").splitlines():
            code = line.strip()
            if code.startswith((">>>", "def ")):
                continue
            calls += [(path.relative_to(root).as_posix(), m.group(0))
                      for m in re.finditer(r"\brecommend_clip\(|recommended_clip=|slope_select\(", code)]
    assert sorted(calls) == [("offeval_core/analyses/clip_tuning.py", "recommend_clip("),
                             ("offeval_core/analyses/clip_tuning.py", "slope_select("),
                             ("offeval_core/analyses/clip_tuning.py", "slope_select(")]


def test_recommended_clip_reads_its_clips_level_and_default_models():
    """On the four sessions (above): with clips {1, ∞} only, SLOPE admits m = 1, whose bias bound 3 exceeds the effect
    1.3125, so the recommendation is m = ∞ (not m = 4, which is not offered). At level 0.1 (z = 0.1257) the widened
    intervals are ±0.2515 · se: m = ∞ and m = 4 give [1.781, 2.344], m = 2 gives [0.926, 1.199], which misses it, so
    SLOPE alone stops at m = 4. The default models are the learnt PBM for D and D0."""
    from offeval_core.analyses.clip_tuning import recommended_clip

    logs = read_logs(_four_sessions())
    kw = {"reward": "click", "policy": "new", "discount": "exponential:0.5", "exposure": "exponential:0.5"}
    rec = recommended_clip(logs, clips=[1, math.inf], level=0.95, **kw)
    assert (rec.clip, rec.slope_clip, rec.bias_bound) == (math.inf, 1.0, 0.0)
    rec = recommended_clip(logs, clips=[1, 2, 4, math.inf], level=0.1, **kw)
    assert (rec.clip, rec.slope_clip) == (4.0, 4.0)
    assert rec.reason.startswith("m = 4: the most clipped m that the SLOPE / Lepski rule admits")
    default = recommended_clip(logs, reward="click", policy="new", clips=[1, 2, 4, math.inf])
    assert default == clip_tuning(logs, reward="click", policy="new", discount="pbm", exposure="pbm",
                                  clips=[1, 2, 4, math.inf]).recommendation


def test_a_propensity_policy_table_by_hand():
    """Four one-slot sessions, weights π_t / π_p = 0.5/0.25, 0.2/0.4, 0.9/0.3, 0.3/0.3 = (2, 0.5, 3, 1), clicks
    (1, 1, 1, 0); CIS at the cap c = 1.5 (a cap outside the default grid) and ∞.
    c = 1.5: values min(c, w) · click = (1.5, 0.5, 1.5, 0): mean 0.875, sd √(1.6875/3) = 0.75, se 0.375;
    excess (w − c)₊ = (0.5, 0, 1.5, 0): bias bound 1 · 2 / 4 = 0.5 (r_max 1), the same bias estimate (every
    clipped row is clicked); 2 of 4 rows clipped; clipped mass 2 / Σw = 2 / 6.5; ESS (Σ min(c, w))² / Σ min(c, w)²
    = 4.5² / 5.75; largest weight 1.5. c = ∞: values (2, 0.5, 3, 0): mean 1.375, se √(5.6875/3) / 2, ESS 6.5² / 14.25.
    The recommendation weighs the bound against the effect 1.375 − 0.75 (the logging policy's clicks): 0.625."""
    df = pd.DataFrame({"session_id": [0, 1, 2, 3], "rank": 1, "click": [1.0, 1, 1, 0],
                       "logging_propensity": [0.25, 0.4, 0.3, 0.3], "target_propensity__new": [0.5, 0.2, 0.9, 0.3]})
    res = clip_tuning(read_logs(df), reward="click", policy="new", clips=[1.5, math.inf], level=0.95)
    assert (res.estimator, res.discount, res.exposure, res.n_sessions, res.n_rows, res.r_max) == (
        "cis", "propensity", "propensity", 4, 4, 1.0)
    t = res.table.set_index("clip")
    assert t.loc[1.5, ["estimate", "stderr", "bias_bound", "bias_estimate", "clipped_rows", "clipped_mass", "ess",
                       "max_weight"]].tolist() == pytest.approx([0.875, 0.375, 0.5, 0.5, 0.5, 2 / 6.5, 4.5 ** 2 / 5.75,
                                                                 1.5], rel=1e-12)
    assert t.loc[math.inf, ["estimate", "stderr", "bias_bound", "clipped_rows", "ess", "max_weight"]].tolist() == \
        pytest.approx([1.375, math.sqrt(5.6875 / 3) / 2, 0.0, 0.0, 6.5 ** 2 / 14.25, 3.0], rel=1e-12)
    assert t.loc[1.5, "ess_share"] == pytest.approx(4.5 ** 2 / 5.75 / 4, rel=1e-12)
    assert (t.loc[1.5, "ci_low"], t.loc[1.5, "ci_high"]) == (pytest.approx(0.875 - 1.959963984540054 * 0.375),
                                                             pytest.approx(0.875 + 1.959963984540054 * 0.375))
    assert t.loc[1.5, "variance"] == pytest.approx(0.375 ** 2, rel=1e-12)
    assert t.loc[1.5, "rmse_bound"] == pytest.approx(0.625, rel=1e-12)   # √(0.375² + 0.5²)
    assert (res.rule, res.reward, res.policy, res.level, res.rule_clip) == ("slope", "click", "new", 0.95, 1.5)
    assert res.rule_text == ("The SLOPE / Lepski rule alone chooses m = 1.5: the most strongly clipped value whose 95% "
                             "confidence interval, widened to twice its half-width, still overlaps the widened "
                             "intervals of every larger m (SLOPE / Lepski selection). Clipping below it would shift "
                             "the estimate by more than the noise of the less-clipped estimators can explain, i.e. "
                             "the bias would show.")
    # weights 0.2, 0.2, 0.4, 0.2 (Σ = 1): nothing clipped, a clipped mass of 0 / 1; a target that never shows the
    # logged items (π_t = 0): no exposure to clip, the clipped mass is undefined
    small = clip_tuning(read_logs(df.assign(logging_propensity=0.5, target_propensity__new=[0.1, 0.1, 0.2, 0.1])),
                        reward="click", policy="new", clips=[1.5, math.inf])
    assert small.table["clipped_mass"].tolist() == [0.0, 0.0]
    none = clip_tuning(read_logs(df.assign(logging_propensity=0.5, target_propensity__new=0.0)), reward="click",
                       policy="new", clips=[1.5, math.inf])
    assert none.table["clipped_mass"].isna().all() and none.table["estimate"].tolist() == [0.0, 0.0]
    assert t.loc[1.5, "mse_bound"] == pytest.approx(0.375 ** 2 + 0.25, rel=1e-12)
    assert (res.recommendation.clip, res.recommendation.reference) == (1.5, pytest.approx(0.625, rel=1e-12))
    # without c = ∞ among the caps the unclipped estimate (the effect's reference) is computed on its own
    alone = clip_tuning(read_logs(df), reward="click", policy="new", clips=[1.5], level=0.95)
    assert alone.table["estimate"].tolist() == [0.875] and alone.table["bias_estimate"].tolist() == [0.5]
    assert alone.recommendation.reference == pytest.approx(0.625, rel=1e-12)


def test_clip_tuning_arm_default_policy_and_moments_it_lacks():
    """The four sessions (above) with sessions 1-2 in the control arm and 3-4 in the treatment arm. Tuned on the
    treatment sessions, the DCGs are 0 and 0.25 · 1 at every m (no weight above 1 is rewarded): estimate 0.125, over 2
    sessions and 4 rows; the bias bound counts their rank-3 rows, w = 4 moved to rank 1 (D = 1): 2 · (4 − m)₊ / 2."""
    from offeval_core.engine import Grid, reduce

    kw = {"reward": "click", "discount": "exponential:0.5", "exposure": "exponential:0.5"}
    df = _four_sessions().assign(arm=["control"] * 4 + ["treatment"] * 4)
    res = clip_tuning(read_logs(df), policy="new", clips=[1, 2, 4, math.inf], arm="treatment", **kw)
    assert res.table["estimate"].tolist() == pytest.approx([0.125] * 4, rel=1e-12)
    assert res.table["bias_bound"].tolist() == pytest.approx([3.0, 2.0, 0.0, 0.0], rel=1e-12)
    assert (res.n_sessions, res.n_rows) == (2, 4)
    # every arm: the four sessions, bias bounds 4 · (4 − m)₊ / 4
    every = clip_tuning(read_logs(df), policy="new", clips=[1, 2, 4, math.inf], arm=None, **kw)
    assert (every.n_sessions, every.n_rows) == (4, 8)
    assert every.table["bias_bound"].tolist() == pytest.approx([3.0, 2.0, 0.0, 0.0], rel=1e-12)
    assert every.table["estimate"].tolist() == pytest.approx([0.5625, 1.0625, 2.0625, 2.0625], rel=1e-12)
    # the default policy is treatment
    logs = read_logs(_four_sessions().rename(columns={"rank__new": "rank__treatment"}))
    default = clip_tuning(logs, clips=[1, 2, 4, math.inf], **kw)
    assert default.policy == "treatment"
    assert default.table["estimate"].tolist() == pytest.approx([0.5625, 1.0625, 2.0625, 2.0625])
    # moments without a clip asked for, and an unknown policy, are refused by name
    m = reduce(logs, Grid(rewards=("click",), policies=("treatment",), discounts=("exponential:0.5",),
                          exposures=("exponential:0.5",), clips=(1, math.inf)))
    with pytest.raises(ValueError, match=r"^clip 2 was not computed; available: 1, inf$"):
        clip_tuning(logs, clips=[1, 2, math.inf], moments=m, **kw)
    with pytest.raises(ValueError, match=r"^unknown policy 'zzz': the logs <DataFrame> have no column 'rank__zzz' "
                                         r"\(policies found: treatment\)$"):
        clip_tuning(logs, policy="zzz", **kw)


def test_the_bias_bound_scales_with_the_largest_reward():
    """The four sessions with a reward of 2 where they clicked: r_max = 2 doubles the bias bounds 2 · (3, 2, 0, 0) and
    the estimates; an r_max given is used as it is."""
    logs = read_logs(_four_sessions().assign(click=lambda d: 2.0 * d["click"]))
    kw = {"reward": "click", "policy": "new", "discount": "exponential:0.5", "exposure": "exponential:0.5",
          "clips": [1, 2, 4, math.inf]}
    res = clip_tuning(logs, **kw)
    assert res.r_max == 2.0
    assert res.table["bias_bound"].tolist() == pytest.approx([6.0, 4.0, 0.0, 0.0], rel=1e-12)
    assert res.table["estimate"].tolist() == pytest.approx([1.125, 2.125, 4.125, 4.125], rel=1e-12)
    assert clip_tuning(logs, r_max=0.5, **kw).table["bias_bound"].tolist() == pytest.approx([1.5, 1.0, 0.0, 0.0])
    # a clip outside the default grid: session DCGs 2 · (3, 3, 0, 0.125) at m = 3
    kw["clips"] = [3, math.inf]
    assert clip_tuning(logs, **kw).table["estimate"].tolist() == pytest.approx([3.125, 4.125], rel=1e-12)


def test_the_slope_rule_widens_by_z_times_the_standard_error_and_mse_without_a_standard_error():
    """The four sessions with rewards of 0.1: estimates 0.05625, 0.10625, 0.20625 (m = 1, 2, ≥ 4), standard errors
    0.02577, 0.05437, 0.11198. At level 0.1 (z = 0.1257) the widened intervals ±2 · z · se are [0.178, 0.234] for
    m = 4 and ∞ and [0.0926, 0.1199] for m = 2, which misses them: the rule alone stops at m = 4. One session has no
    standard error, so no finite worst-case MSE: the MSE rule falls back to the largest m."""
    logs = read_logs(_four_sessions().assign(click=lambda d: 0.1 * d["click"]))
    kw = {"reward": "click", "policy": "new", "discount": "exponential:0.5", "exposure": "exponential:0.5",
          "clips": [1, 2, 4, math.inf]}
    assert clip_tuning(logs, level=0.1, **kw).rule_clip == 4.0
    # the worst-case MSE var + bound² on the four sessions: 0.2577² + 9, 0.5437² + 4, 1.1198² + 0 at m = 4 and ∞:
    # the first minimum, m = 4
    mse = clip_tuning(read_logs(_four_sessions()), rule="mse", level=0.95, **{**kw, "clips": [1, 2, 4, math.inf]})
    assert mse.rule_clip == 4.0
    one = read_logs(_four_sessions().query("session_id == 1"))
    res = clip_tuning(one, rule="mse", **kw)
    assert res.table["mse_bound"].isna().all() and res.rule_clip == math.inf
    assert res.rule_text.startswith("The worst-case MSE rule alone chooses m = ∞: it minimises the worst-case mean ")


def test_recommend_clip_without_an_unclipped_candidate_keeps_the_largest_m():
    """Candidates m = 1 and 2 only, both admitted by SLOPE (estimates 1.0 and 1.1, SE 0.1), with bias bounds 3 and 2
    above the effect 1: no candidate passes the guard, so the recommendation is the largest m, 2."""
    from offeval_core.analyses.clip_tuning import recommend_clip

    t = pd.DataFrame({"clip": [2.0, 1.0], "estimate": [1.1, 1.0], "stderr": [0.1, 0.1], "bias_bound": [2.0, 3.0]})
    r = recommend_clip(t, level=0.95, effect=1.0)
    assert (r.clip, r.slope_clip, r.bias_bound, r.reference) == (2.0, 1.0, 2.0, 1.0)


def test_a_clip_value_without_moment_rows_has_a_nan_estimate_and_keeps_its_log_columns():
    """Moments whose grid names m = 2 but hold no row for it (the rows of m = 2 dropped): that clip's pooled row is
    empty (n = 0), so its estimate, standard error, interval, bias estimate and worst-case MSE are NaN, while the
    columns read from the logs stay those of the four sessions (bias bound 2 · (4 − 2) / 4 = 1 · 2 = 2, half the
    rows clipped, max weight 2); m = 1 and m = ∞ keep their own estimates 0.5625 and 2.0625 (by hand above), not
    those of another clip value's rows."""
    import dataclasses

    from offeval_core.engine import Grid, reduce

    kw = {"reward": "click", "discount": "exponential:0.5", "exposure": "exponential:0.5"}
    logs = read_logs(_four_sessions().rename(columns={"rank__new": "rank__treatment"}))
    m = reduce(logs, Grid(rewards=("click",), policies=("treatment",), discounts=("exponential:0.5",),
                          exposures=("exponential:0.5",), clips=(1, 2, math.inf)))
    without_2 = dataclasses.replace(m, offline=m.offline[m.offline["clip"] != 2].reset_index(drop=True))
    t = clip_tuning(logs, clips=[1, 2, math.inf], moments=without_2, **kw).table.set_index("clip")
    assert t.loc[1.0, "estimate"] == pytest.approx(0.5625, rel=1e-12)
    assert t.loc[math.inf, "estimate"] == pytest.approx(2.0625, rel=1e-12)
    assert t.loc[1.0, "bias_estimate"] == pytest.approx(1.5, rel=1e-12)
    for col in ("estimate", "stderr", "ci_low", "ci_high", "variance", "bias_estimate", "mse_bound", "rmse_bound"):
        assert math.isnan(t.loc[2.0, col]), col
    assert (t.loc[2.0, "bias_bound"], t.loc[2.0, "clipped_rows"], t.loc[2.0, "max_weight"]) == (2.0, 0.5, 2.0)
    # without the rows of m = ∞, the unclipped reference is the empty row too: every bias estimate is NaN
    without_inf = dataclasses.replace(m, offline=m.offline[m.offline["clip"] != math.inf].reset_index(drop=True))
    t = clip_tuning(logs, clips=[1, 2, math.inf], moments=without_inf, **kw).table.set_index("clip")
    assert t["estimate"].iloc[:2].tolist() == pytest.approx([0.5625, 1.0625], rel=1e-12)
    assert t["bias_estimate"].isna().all() and math.isnan(t.loc[math.inf, "estimate"])
