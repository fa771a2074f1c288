import math

import numpy as np
import pandas as pd
import pytest
from analyses_world import per_session_totals, small_world
from scipy import stats as sps

from offeval_core.analyses import sensitivity
from offeval_core.estimators import session_values


@pytest.fixture(scope="module")
def world():
    return small_world()


def _by_hand(logs, reward, clip, level, metric="dcg"):
    """Paired per-session differences on control sessions, CI and detection computed with numpy/scipy."""
    sv = session_values(logs, reward=reward, policies=["treatment"], clip=clip)
    sv = sv[sv["arm"].astype(str) == "control"]
    sv = sv.assign(d=sv[f"{metric}__treatment"] - sv[f"{metric}__logging"])
    z = sps.norm.ppf(0.5 + level / 2)
    out = {}
    for (exp, day), part in sv.groupby(["experiment_id", "day"], observed=True):
        d = part["d"].to_numpy()
        se = d.std(ddof=1) / math.sqrt(d.size)
        out[(str(exp), day)] = (d.mean(), d.mean() - z * se, d.mean() + z * se, sps.norm.sf(d.mean() / se))
    return out


def test_tpr_by_counting_matches_hand_computation(world):
    _, logs, m = world
    res = sensitivity(m, settings="all", level=0.9, metrics=("dcg",), rewards=["like"])
    on = per_session_totals(logs, "like")
    for clip in (1.0, 64.0, math.inf):
        hand = _by_hand(logs, "like", clip, 0.9)
        detected, pvals = [], []
        for (exp, day), (_mean, lo, hi, p) in hand.items():
            g = on[(on["experiment_id"] == exp) & (on["day"] == day)]
            t, c = g[g["arm"] == "treatment"]["total"], g[g["arm"] == "control"]["total"]
            direction = -1 if t.mean() - c.mean() < 0 else 1
            detected.append(lo > 0 if direction > 0 else hi < 0)
            pvals.append(p if direction > 0 else 1 - p)
        row = res.table[(res.table["metric"] == "dcg") & (res.table["clip"] == clip)].iloc[0]
        assert row["n_settings"] == len(hand) == 9
        assert row["tpr"] == pytest.approx(np.mean(detected))
        assert row["mean_p"] == pytest.approx(np.mean(pvals), rel=1e-6)


def test_per_setting_effect_and_online_welch_match_scipy(world):
    _, logs, m = world
    res = sensitivity(m, settings="all", level=0.99, metrics=("dcg",), rewards=["watch_complete"])
    hand = _by_hand(logs, "watch_complete", 4.0, 0.99)
    on = per_session_totals(logs, "watch_complete")
    per = res.per_setting[res.per_setting["clip"] == 4.0]
    for rec in per.itertuples():
        mean, lo, hi, _ = hand[(rec.experiment_id, rec.day)]
        assert rec.effect == pytest.approx(mean, rel=1e-9, abs=1e-12)
        assert (rec.ci_low, rec.ci_high) == pytest.approx((lo, hi), rel=1e-9, abs=1e-12)
        g = on[(on["experiment_id"] == rec.experiment_id) & (on["day"] == rec.day)]
        welch = sps.ttest_ind(g[g["arm"] == "treatment"]["total"], g[g["arm"] == "control"]["total"],
                              equal_var=False)
        assert rec.online_p == pytest.approx(welch.pvalue, rel=1e-6)


@pytest.mark.parametrize("clip", [1.0, 64.0, math.inf])
def test_ndcg_per_setting_effects_match_per_session_values(world, clip):
    """nDCG's paired effect and CI per (experiment, day) equal the mean and normal CI of the per-session
    differences nDCG_τ(Rt) − nDCG_τ(R0) on the control sessions, computed outside the moments."""
    _, logs, m = world
    res = sensitivity(m, settings="all", level=0.99, metrics=("ndcg",), rewards=["like"])
    hand = _by_hand(logs, "like", clip, 0.99, metric="ndcg")
    per = res.per_setting[res.per_setting["clip"] == clip]
    assert len(per) == len(hand) == 9
    for rec in per.itertuples():
        mean, lo, hi, _ = hand[(rec.experiment_id, rec.day)]
        assert rec.effect == pytest.approx(mean, rel=1e-9, abs=1e-12)
        assert (rec.ci_low, rec.ci_high) == pytest.approx((lo, hi), rel=1e-9, abs=1e-12)


def test_significant_selection_uses_online_alpha(world):
    _, _, m = world
    everything = sensitivity(m, settings="all")
    online = everything.settings
    for alpha in (0.001, 0.05, 0.5):
        res = sensitivity(m, online_alpha=alpha)
        assert len(res.settings) == int((online["online_p"] < alpha).sum())
        if len(res.settings):
            assert res.table["n_settings"].max() == len(res.settings)


def test_user_list_of_settings_and_best_clip(world):
    _, _, m = world
    all_settings = sensitivity(m, settings="all").settings
    chosen = [tuple(r) for r in all_settings[["experiment_id", "day", "reward"]].head(4).itertuples(index=False)]
    res = sensitivity(m, settings=chosen)
    assert len(res.settings) == 4
    for metric, best in res.best_clip.items():
        t = res.table[res.table["metric"] == metric]
        assert t.loc[t["clip"] == best, "tpr"].iloc[0] == t["tpr"].max()
    assert isinstance(res.takeaway, str) and res.takeaway.endswith(".")


def test_no_significant_settings_gives_empty_table_and_plain_takeaway(world):
    _, _, m = world
    res = sensitivity(m, online_alpha=1e-300)
    assert res.settings.empty and (res.table["n_settings"] == 0).all()
    assert "nothing to detect" in res.takeaway


def test_bad_arguments(world):
    _, _, m = world
    with pytest.raises(ValueError, match="policy 'cand_01' was not computed"):
        sensitivity(m, policy="cand_01")
    with pytest.raises(ValueError, match="settings must be one of 'significant', 'all'; got 'some'"):
        sensitivity(m, settings="some")
    with pytest.raises(ValueError, match="has no online A/B outcome"):
        sensitivity(m, settings=[("exp99", "2026-03-02", "like")])
    with pytest.raises(ValueError, match="discount 'reciprocal' was not computed"):
        sensitivity(m, discount="reciprocal")
    with pytest.raises(TypeError, match="moments must be offeval_core.engine.Moments"):
        sensitivity(pd.DataFrame())


def _verdict_table(dcg, ndcg, clips=(1.0, 4.0, 64.0, math.inf), n=10):
    return pd.DataFrame({"metric": ["dcg"] * len(clips) + ["ndcg"] * len(clips), "clip": list(clips) * 2,
                         "n_detected": [*dcg, *ndcg], "n_settings": n})


def test_paper_verdict_says_which_fig1_finding_holds_with_its_counts():
    from offeval_core.analyses.sensitivity import paper_verdict
    text = paper_verdict(_verdict_table([1, 5, 6, 4], [1, 2, 3, 3]))
    assert "raises DCG's detections from 1 to 6 of 10 (holds)" in text
    assert "nDCG's from 1 to 3 (holds)" in text
    assert "DCG at m = ∞ detects 4, below its best finite m (6)" in text
    assert "at 4 of 4 clip values (holds)" in text
    # flat nDCG, no drop at ∞, nDCG ahead: each said plainly
    text = paper_verdict(_verdict_table([3, 3, 3, 3], [4, 4, 4, 4]))
    assert "does not raise DCG's detections (3 at m = 1, at most 3 at m > 1 of 10; does not hold" in text
    assert "nDCG's stay at 4 of 10 (does not hold on these logs)" in text
    assert "as many as its best finite m (3)" in text and "at 0 of 4 clip values (does not hold" in text
    # a one-step change flips the verdict: ≥ vs >
    assert "below its best" in paper_verdict(_verdict_table([1, 5, 6, 5], [0, 0, 0, 0]))
    assert "as many as" in paper_verdict(_verdict_table([1, 5, 6, 6], [0, 0, 0, 0]))


def test_takeaway_carries_the_verdict_of_the_result_on_screen(world):
    from offeval_core.analyses.sensitivity import paper_verdict
    res = sensitivity(world[2], settings="all")
    assert res.takeaway.endswith(paper_verdict(res.table))
    assert "Fig. 1 findings:" in res.takeaway


def test_ndcg_of_a_one_reward_session_does_not_depend_on_the_clip():
    """nDCG_τ = Σ ℓ_i D(R(i)) / Σ ℓ_(j) D(j) is invariant to scaling a session's labels, so with one rewarded
    row ℓ = c · min(m, 1/D0(r)) cancels: nDCG_τ = D(R) / D(1) at every m (KDD'24 Sec. 6.2's IPS weighting
    cannot move it), while DCG_τ = ℓ · D(R) grows with m. With two rewarded rows m moves both."""
    from offeval_core.logs import read_logs

    df = pd.DataFrame({"session_id": [1, 1, 1, 2, 2, 2], "rank": [1, 2, 3, 1, 2, 3],
                       "rank__t": [3, 1, 2, 3, 1, 2], "click": [0, 0, 1, 1, 0, 1]})
    logs = read_logs(df)
    d = {r: 1 / math.log2(r + 1) for r in (1, 2, 3)}
    ndcg, dcg = {}, {}
    for m in (1.0, 1.5, math.inf):
        sv = session_values(logs, reward="click", policies=["t"], discount="log2", exposure="log2",
                            clip=m).set_index("session_id")
        ndcg[m], dcg[m] = sv["ndcg__t"], sv["dcg__t"]
    # session 1: one click at logged rank 3, target rank 2 → nDCG = D(2) / D(1) at every m
    for m in ndcg:
        assert ndcg[m].loc[1] == pytest.approx(d[2] / d[1], rel=1e-12)
    assert dcg[1.0].loc[1] == pytest.approx(d[2]) and dcg[math.inf].loc[1] == pytest.approx(d[2] / d[3])
    # session 2: clicks at logged ranks 1 and 3 (target ranks 3 and 2): ℓ = (1, min(m, 1/D(3))) → m moves nDCG
    def two(m):
        w3 = min(m, 1 / d[3])
        return (d[3] + w3 * d[2]) / (max(w3, 1) * d[1] + min(w3, 1) * d[2])  # ideal: the larger label first

    values = [ndcg[m].loc[2] for m in (1.0, 1.5, math.inf)]
    assert values == pytest.approx([two(1.0), two(1.5), two(math.inf)], rel=1e-12)
    assert values[0] > values[1] > values[2]  # the deep click weighs more: the ideal moves it to rank 1


def test_takeaway_names_no_best_m_on_a_flat_curve():
    """A metric whose TPR is the same at every clip has no best m: the headline says "at every m" instead of
    naming the tie-break's m as if it won ("nDCG detects 6 % at m = 8 (vs 6 % at m = 1 and 6 % at m = ∞)")."""
    from offeval_core.analyses.sensitivity import _best_clips, _takeaway

    clips = [1.0, 8.0, 256.0, math.inf]
    table = pd.DataFrame({"metric": ["dcg"] * 4 + ["ndcg"] * 4, "clip": clips * 2,
                          "tpr": [3 / 47, 9 / 47, 9 / 47, 7 / 47] + [3 / 47] * 4,
                          "mean_p": [0.8, 0.45, 0.44, 0.44, 0.88, 0.87, 0.88, 0.88], "n_settings": 47,
                          "n_detected": [3, 9, 9, 7] + [3] * 4})
    best = _best_clips(table)
    assert best == {"dcg": 256.0, "ndcg": 8.0}  # the tie-break (lowest mean p) still picks an m for the chart
    assert _takeaway(table, best, 47, "significant", 0.01, 0.99).startswith(
        "Of the 47 settings with a significant online effect, at 99% confidence DCG detects 19 % at m = 256 "
        "(vs 6 % at m = 1 and 15 % at m = ∞); nDCG detects 6 % at every m. Fig. 1 findings: ")
