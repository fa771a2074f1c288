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


def test_bias_estimate_equals_gap_to_unclipped_estimate():
    _, logs, m = small_world()
    res = clip_tuning(logs, reward="watch_complete", policy="treatment", clips=CLIPS, moments=m)
    t = res.table.set_index("clip")
    for c in CLIPS:
        assert t.loc[c, "bias_estimate"] == pytest.approx(t.loc[math.inf, "estimate"] - t.loc[c, "estimate"],
                                                          rel=1e-9, abs=1e-12)
    assert (np.diff(res.table["bias_bound"]) <= 0).all()       # bound shrinks as m grows
    assert (np.diff(res.table["clipped_rows"]) <= 0).all()
    assert res.recommended_clip in CLIPS
    assert f"m = {res.recommended_clip:g}".replace("inf", "∞") in res.rule_text


def test_slope_rule_by_hand():
    # intervals ±2h: ∞ [0.6, 1.4], 64 [0.8, 1.0], 4 [0.7, 0.9] overlaps both, 1 [0.38, 0.42] does not
    clips = [1, 4, 64, math.inf]
    assert slope_select(clips, [0.4, 0.8, 0.9, 1.0], [0.01, 0.05, 0.05, 0.2]) == 4
    assert slope_select(clips, [0.95, 0.95, 0.95, 1.0], [0.01, 0.05, 0.05, 0.2]) == 1
    assert slope_select(clips, [0.4, 0.8, 0.9, 1.0], [0.01, 0.05, float("nan"), 0.2]) == 4


def test_mse_rule_minimises_the_bound():
    _, logs, m = small_world()
    res = clip_tuning(logs, reward="like", policy="treatment", clips=CLIPS, moments=m, rule="mse")
    assert res.recommended_clip == res.table.loc[res.table["mse_bound"].idxmin(), "clip"]
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
