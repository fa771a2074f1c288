import math

import numpy as np
import pandas as pd
import pytest
from analyses_world import per_session_totals, small_world
from scipy import stats as sps

from offeval_core.analyses import sensitivity
from offeval_core.analyses.sensitivity import online_settings
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


def _online_direction(on, exp, day):
    g = on[(on["experiment_id"] == exp) & (on["day"] == day)]
    t, c = g[g["arm"] == "treatment"]["total"], g[g["arm"] == "control"]["total"]
    welch = sps.ttest_ind(t, c, equal_var=False)
    return t.mean() - c.mean(), welch.pvalue


@pytest.mark.parametrize("side", ["improvements", "negatives"])
def test_tpr_by_counting_matches_hand_computation(world, side):
    """KDD'24 Sec. 6.2: the settings are the online improvements (or, in the separate view, the online
    negatives) and a setting is detected iff the offline CI is strictly > 0 (< 0 for negatives); the mean p is
    that of H0 "offline effect ≤ 0" (≥ 0), the sign agreement the share with offline effect > 0 (< 0)."""
    _, logs, m = world
    res = sensitivity(m, online_alpha=1.0, level=0.9, metrics=("dcg",), rewards=["like"], side=side)
    on = per_session_totals(logs, "like")
    sign = 1 if side == "improvements" else -1
    for clip in (1.0, 64.0, math.inf):
        hand = _by_hand(logs, "like", clip, 0.9)
        detected, pvals, agrees = [], [], []
        for (exp, day), (mean, lo, hi, p) in hand.items():
            effect, _ = _online_direction(on, exp, day)
            if sign * effect <= 0:
                continue  # the other view's setting: never counted here
            detected.append(lo > 0 if sign > 0 else hi < 0)
            pvals.append(p if sign > 0 else 1 - p)
            agrees.append(sign * mean > 0)
        row = res.table[(res.table["metric"] == "dcg") & (res.table["clip"] == clip)].iloc[0]
        assert 0 < row["n_settings"] == len(detected) < 9
        assert row[res.rate_column] == pytest.approx(np.mean(detected))
        assert row["n_detected"] == sum(detected)
        assert row["mean_p"] == pytest.approx(np.mean(pvals), rel=1e-6)
        assert row["sign_agreement"] == pytest.approx(np.mean(agrees))
    assert res.rate_column == ("tpr" if side == "improvements" else "negatives_detected")
    assert res.rate_name == ("TPR" if side == "improvements" else "negatives detected")


def test_the_two_views_split_the_settings_and_never_share_one(world):
    _, _, m = world
    imp = sensitivity(m, online_alpha=1.0, rewards=["like", "watch_complete"])
    neg = sensitivity(m, online_alpha=1.0, rewards=["like", "watch_complete"], side="negatives")
    keys = ["experiment_id", "day", "reward"]
    a, b = set(map(tuple, imp.settings[keys].to_numpy())), set(map(tuple, neg.settings[keys].to_numpy()))
    assert not a & b and len(a) + len(b) == 18     # 3 experiments × 3 days × 2 rewards, none with effect 0
    assert (imp.settings["online_effect"] > 0).all() and (neg.settings["online_effect"] < 0).all()
    assert (imp.per_setting["direction"] == 1).all() and (neg.per_setting["direction"] == -1).all()
    assert "tpr" in imp.table and "tpr" not in neg.table and "negatives_detected" in neg.table
    assert "not part of the TPR" in neg.takeaway and "Fig. 1 findings" not in neg.takeaway


def test_per_setting_effect_and_online_welch_match_scipy(world):
    _, logs, m = world
    per = pd.concat([sensitivity(m, online_alpha=1.0, level=0.99, metrics=("dcg",), rewards=["watch_complete"],
                                 side=side).per_setting for side in ("improvements", "negatives")])
    hand = _by_hand(logs, "watch_complete", 4.0, 0.99)
    on = per_session_totals(logs, "watch_complete")
    per = per[per["clip"] == 4.0]
    assert len(per) == 9
    for rec in per.itertuples():
        mean, lo, hi, _ = hand[(rec.experiment_id, rec.day)]
        assert rec.effect == pytest.approx(mean, rel=1e-9, abs=1e-12)
        assert (rec.ci_low, rec.ci_high) == pytest.approx((lo, hi), rel=1e-9, abs=1e-12)
        effect, p = _online_direction(on, rec.experiment_id, rec.day)
        assert rec.online_p == pytest.approx(p, rel=1e-6)
        assert rec.online_effect == pytest.approx(effect, rel=1e-9)


@pytest.mark.parametrize("clip", [1.0, 64.0, math.inf])
def test_ndcg_per_setting_effects_match_per_session_values(world, clip):
    """nDCG's paired effect and CI per (experiment, day) equal the mean and normal CI of the per-session
    differences nDCG_τ(Rt) − nDCG_τ(R0) on the control sessions, computed outside the moments."""
    _, logs, m = world
    per = pd.concat([sensitivity(m, online_alpha=1.0, level=0.99, metrics=("ndcg",), rewards=["like"],
                                 side=side).per_setting for side in ("improvements", "negatives")])
    hand = _by_hand(logs, "like", clip, 0.99, metric="ndcg")
    per = per[per["clip"] == clip]
    assert len(per) == len(hand) == 9
    for rec in per.itertuples():
        mean, lo, hi, _ = hand[(rec.experiment_id, rec.day)]
        assert rec.effect == pytest.approx(mean, rel=1e-9, abs=1e-12)
        assert (rec.ci_low, rec.ci_high) == pytest.approx((lo, hi), rel=1e-9, abs=1e-12)


def test_selection_uses_online_alpha_and_min_effect_strictly(world):
    from offeval_core.analyses.sensitivity import online_settings, select_settings

    _, _, m = world
    online = online_settings(m, ("like", "watch_complete"))
    assert len(online) == 18
    for alpha in (0.001, 0.05, 0.5, 1.0):
        for side, sign in (("improvements", 1), ("negatives", -1)):
            res = sensitivity(m, online_alpha=alpha, side=side)
            want = (online["online_p"] < alpha) & (sign * online["online_effect"] > 0)
            assert len(res.settings) == int(want.sum())
            if len(res.settings):
                assert res.table["n_settings"].max() == len(res.settings)
    # the effect threshold: exactly at a setting's effect it is excluded (strict), just below it is kept
    pos = online[online["online_effect"] > 0]["online_effect"].sort_values()
    at = float(pos.iloc[1])
    assert len(select_settings(online, online_alpha=1.0, min_effect=at)) == len(pos) - 2
    assert len(select_settings(online, online_alpha=1.0, min_effect=np.nextafter(at, 0))) == len(pos) - 1
    # and the p threshold is strict too: p equal to α is not below it
    p0 = float(online["online_p"].min())

    def count(a):
        return len(select_settings(online, online_alpha=a)) + len(select_settings(online, online_alpha=a,
                                                                                   side="negatives"))

    assert count(p0) == 0 and count(float(np.nextafter(p0, 1))) == 1
    res = sensitivity(m, online_alpha=1.0, min_effect=at)
    assert len(res.settings) == len(pos) - 2 and res.min_effect == at
    assert f"effect > {at:g}" in res.takeaway


def test_user_list_of_settings_and_best_clips(world):
    _, _, m = world
    all_settings = sensitivity(m, online_alpha=1.0).settings
    chosen = [tuple(r) for r in all_settings[["experiment_id", "day", "reward"]].head(4).itertuples(index=False)]
    res = sensitivity(m, settings=chosen)
    assert len(res.settings) == 4 and res.selection == "list"
    for metric, best in res.best_clips.items():
        t = res.table[res.table["metric"] == metric]
        if best:
            assert set(t.loc[t["n_detected"] == t["n_detected"].max(), "clip"]) == set(best)
            assert t["n_detected"].min() < t["n_detected"].max()
        else:
            assert t["n_detected"].nunique() == 1 or t["n_detected"].max() == 0
    assert isinstance(res.takeaway, str) and res.takeaway.endswith(".")


def test_no_significant_settings_gives_empty_table_and_plain_takeaway(world):
    _, _, m = world
    res = sensitivity(m, online_alpha=1e-300)
    assert res.settings.empty and (res.table["n_settings"] == 0).all()
    # it says how many settings were tested and how close the nearest came: the smallest p of an online
    # improvement is that of the settings selected at p < 1 (every improvement), counted here through the selection
    every = sensitivity(m, online_alpha=1.0)
    n_tested = len(online_settings(m, tuple(m.grid.rewards)))
    assert res.n_tested == n_tested > len(every.settings) > 0
    assert res.closest_p == every.settings["online_p"].min()
    assert res.takeaway == (
        f"None of the {n_tested} (experiment, day, reward) settings has a significant online improvement (p < 1e-300, "
        f"effect > 0): the smallest p of an online improvement is {res.closest_p:.2g}, so there is nothing to "
        "detect; raise the online p threshold (the paper: 0.001) or choose other rewards.")
    # a bound no online effect passes: none is on the side, and the takeaway says that instead of a p
    # the online negatives' nearest is the smallest p among the negatives, not among all settings
    negatives = sensitivity(m, online_alpha=1.0, side="negatives").settings
    none_neg = sensitivity(m, online_alpha=1e-300, side="negatives")
    assert len(negatives) and none_neg.closest_p == negatives["online_p"].min() != res.closest_p
    far = sensitivity(m, online_alpha=1e-300, min_effect=1e9, side="negatives")
    assert math.isnan(far.closest_p)
    assert far.takeaway.startswith(f"None of the {n_tested} (experiment, day, reward) settings has a significant "
                                   "online degradation (p < 1e-300, effect < -1e+09): none has an online effect < "
                                   "-1e+09, so there is nothing to detect; ")


def test_bad_arguments(world):
    _, _, m = world
    with pytest.raises(ValueError, match="policy 'cand_01' was not computed"):
        sensitivity(m, policy="cand_01")
    with pytest.raises(TypeError, match="settings must be None"):
        sensitivity(m, settings="all")
    with pytest.raises(ValueError, match="has no online A/B outcome"):
        sensitivity(m, settings=[("exp99", "2026-03-02", "like")])
    neg = sensitivity(m, online_alpha=1.0, side="negatives").settings.iloc[0]
    with pytest.raises(ValueError, match="not an online improvement: list it with side='negatives'"):
        sensitivity(m, settings=[(neg["experiment_id"], neg["day"], neg["reward"])])
    with pytest.raises(ValueError, match="side must be one of 'improvements', 'negatives'"):
        sensitivity(m, side="all")
    with pytest.raises(ValueError, match=r"online_alpha must be in \(0, 1\]"):
        sensitivity(m, online_alpha=0.0)
    with pytest.raises(ValueError, match="min_effect must be a finite number ≥ 0"):
        sensitivity(m, min_effect=-0.1)
    with pytest.raises(ValueError, match="discount 'reciprocal' was not computed"):
        sensitivity(m, discount="reciprocal")
    with pytest.raises(TypeError, match="moments must be offeval_core.engine.Moments"):
        sensitivity(pd.DataFrame())


def _verdict_table(dcg, ndcg, clips=(1.0, 4.0, 64.0, math.inf), n=10, sign=None):
    sign = sign or [1.0] * len(clips)
    return pd.DataFrame({"metric": ["dcg"] * len(clips) + ["ndcg"] * len(clips), "clip": list(clips) * 2,
                         "n_detected": [*dcg, *ndcg], "n_settings": n, "sign_agreement": [*sign, *sign]})


def test_paper_verdict_says_which_fig1_finding_holds_with_its_counts():
    from offeval_core.analyses.sensitivity import paper_verdict
    text = paper_verdict(_verdict_table([1, 5, 6, 4], [1, 2, 3, 3], sign=[0.5, 0.9, 0.96, 0.97]))
    assert "raises DCG's detections from 1 at m = 1 to 6 of 10 at m = 64 (holds)" in text
    assert "raises nDCG's detections from 1 at m = 1 to 3 of 10 at m = 64 (holds)" in text
    assert "DCG at m = ∞ detects 4, below its best finite m (6)" in text
    assert "DCG's best (6) ≥ nDCG's best (3), and DCG ≥ nDCG at 4 of 4 clip values (holds)" in text
    assert "DCG's sign agreement at its best m is 96 % (the paper: 100 %; holds)" in text
    # flat nDCG, no drop at ∞, nDCG ahead: each said plainly
    text = paper_verdict(_verdict_table([3, 3, 3, 3], [4, 4, 4, 4]))
    assert "leaves DCG's detections at 3 of 10 (no finite m > 1 detects more; does not hold" in text
    assert "leaves nDCG's detections at 4 of 10" in text
    assert "as many as its best finite m (3)" in text
    assert "DCG's best (3) is below nDCG's best (4); DCG ≥ nDCG at 0 of 4 clip values (does not hold" in text
    assert "DCG's sign agreement is 100 % across m (no best m)" in text
    # detections that fall with m are said to fall, not to "stay"
    text = paper_verdict(_verdict_table([3, 3, 3, 3], [3, 2, 2, 2]))
    assert "IPS weighting lowers nDCG's detections from 3 at m = 1 to at most 2 of 10 (does not hold" in text
    # a one-step change flips the verdicts: ≥ vs >, and 95 % sign agreement is the floor
    assert "below its best" in paper_verdict(_verdict_table([1, 5, 6, 5], [0, 1, 1, 0]))
    assert "as many as" in paper_verdict(_verdict_table([1, 5, 6, 6], [0, 1, 1, 0]))
    assert "more than its best finite m (6)" in paper_verdict(_verdict_table([1, 5, 6, 7], [0, 1, 1, 0]))
    assert "is 95 % (the paper: 100 %; holds)" in paper_verdict(
        _verdict_table([1, 5, 6, 5], [0, 1, 1, 0], sign=[0.5, 0.9, 0.95, 0.9]))
    assert "is 94 % (the paper: 100 %; does not hold" in paper_verdict(
        _verdict_table([1, 5, 6, 5], [0, 1, 1, 0], sign=[0.5, 0.9, 0.94, 0.9]))


def test_paper_verdict_says_when_a_finding_holds_only_vacuously():
    from offeval_core.analyses.sensitivity import paper_verdict
    text = paper_verdict(_verdict_table([1, 5, 6, 4], [0, 0, 0, 0]))
    assert "DCG's best (6) ≥ nDCG's best (0) holds only vacuously: nDCG detects no setting at any m" in text
    assert "(holds)" not in text.split("DCG's best")[1].split(";")[0]
    text = paper_verdict(_verdict_table([0, 0, 0, 0], [0, 0, 0, 0]))
    assert "neither DCG nor nDCG detects any setting at any m, so \"DCG ≥ nDCG\" holds only vacuously" in text


def test_ties_are_ties_and_a_flat_line_has_no_best_m(world):
    from offeval_core.analyses.sensitivity import SensitivityResult, best_clips
    from offeval_core.analyses.sensitivity_text import sensitivity_takeaway
    from offeval_core.charts import sensitivity_figure

    t = _verdict_table([1, 6, 6, 4], [2, 2, 2, 2], sign=[0.5, 0.97, 0.99, 0.9])
    t["tpr"], t["mean_p"] = t["n_detected"] / 10, [0.5, 0.02, 0.0201, 0.1] * 2
    best = best_clips(t)
    assert best == {"dcg": (4.0, 64.0), "ndcg": ()}   # never broken by mean p (0.02 vs 0.0201)
    settings = pd.DataFrame({"experiment_id": [f"e{i}" for i in range(10)]})
    res = SensitivityResult(table=t, per_setting=pd.DataFrame(), settings=settings, best_clips=best, takeaway="",
                            policy="treatment", discount="pbm", exposure="pbm", level=0.99, online_alpha=0.001,
                            selection="significant", metrics=("dcg", "ndcg"))
    text = sensitivity_takeaway(res)
    assert "DCG detects 6 (60 %) at m ∈ {4, 64} (tied) (vs 10 % at m = 1 and 40 % at m = ∞), sign agreement " \
           "97–99 %" in text
    assert "nDCG detects 2 (20 %) at every m (a flat line: no best m" in text
    assert res.best_clip("dcg") is None and res.best_clip("ndcg") is None
    stars = [tr for tr in sensitivity_figure(res).data if tr.name.startswith("best m")]
    assert [(tr.name, len(tr.x)) for tr in stars] == [("best m for DCG (tied)", 2)]


def test_takeaway_carries_the_verdict_of_the_result_on_screen(world):
    from offeval_core.analyses.sensitivity import paper_verdict
    res = sensitivity(world[2], online_alpha=1.0)
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
    naming a tie-break's m as if it won ("nDCG detects 6 % at m = 8 (vs 6 % at m = 1 and 6 % at m = ∞)"); two m
    with the most detections are both named, never one of them picked by mean p (0.45 vs 0.44)."""
    from offeval_core.analyses.sensitivity import SensitivityResult, best_clips
    from offeval_core.analyses.sensitivity_text import sensitivity_takeaway

    clips = [1.0, 8.0, 256.0, math.inf]
    table = pd.DataFrame({"metric": ["dcg"] * 4 + ["ndcg"] * 4, "clip": clips * 2,
                          "tpr": [3 / 47, 9 / 47, 9 / 47, 7 / 47] + [3 / 47] * 4,
                          "mean_p": [0.8, 0.45, 0.44, 0.44, 0.88, 0.87, 0.88, 0.88], "n_settings": 47,
                          "n_detected": [3, 9, 9, 7] + [3] * 4, "sign_agreement": [0.9] * 8})
    best = best_clips(table)
    assert best == {"dcg": (8.0, 256.0), "ndcg": ()}
    res = SensitivityResult(table=table, per_setting=pd.DataFrame(), settings=pd.DataFrame({"experiment_id": range(47)}),
                            best_clips=best, takeaway="", policy="treatment", discount="pbm", exposure="pbm",
                            level=0.99, online_alpha=0.001, selection="significant", metrics=("dcg", "ndcg"))
    assert sensitivity_takeaway(res).startswith(
        "Of the 47 settings with a significant online improvement (p < 0.001, effect > 0), at 99% confidence DCG "
        "detects 9 (19 %) at m ∈ {8, 256} (tied) (vs 6 % at m = 1 and 15 % at m = ∞), sign agreement 90 %, mean p "
        "0.44; nDCG detects 3 (6 %) at every m (a flat line: no best m; sign agreement 90 %). Fig. 1 findings: ")


@pytest.mark.parametrize(("clips", "text"), [
    ((4.0, 8.0, math.inf), "every m ≥ 4 (tied)"),                    # a run to the grid's end, ∞ included
    ((1.0, 2.0, 4.0, 8.0, math.inf), "every m ≥ 1 (tied)"),
    ((8.0, math.inf), "m ∈ {8, ∞} (tied)"),                         # two: listed
    ((2.0, 4.0, 8.0), "every m from 2 to 8 (tied)"),                # a run that stops before ∞
    ((2.0, 8.0, math.inf), "m ∈ {2, 8, ∞} (tied)"),                 # 4 is not tied: not a run
    ((math.inf, 4.0, 8.0), "every m ≥ 4 (tied)"),                    # order does not matter
    ((3.0, 4.0, 8.0), "m ∈ {3, 4, 8} (tied)"),                      # 3 is not on the grid
])
def test_tied_clips_that_are_a_run_of_the_grid_read_as_every_m_of_the_run(clips, text):
    from offeval_core.analyses.sensitivity_text import clips_text

    assert clips_text(clips, grid=(1.0, 2.0, 4.0, 8.0, math.inf)) == text
    assert clips_text(clips).startswith("m ∈ {")          # without the grid nothing is compressed


def test_the_takeaway_reads_a_tie_over_the_grids_tail_as_every_m():
    """DCG tied at m = 4, 64 and ∞ on the grid 1, 4, 64, ∞ (the whole tail): the takeaway says "every m ≥ 4"."""
    from offeval_core.analyses.sensitivity import SensitivityResult, best_clips
    from offeval_core.analyses.sensitivity_text import sensitivity_takeaway

    t = _verdict_table([1, 6, 6, 6], [2, 3, 2, 2])
    t["tpr"], t["mean_p"] = t["n_detected"] / 10, [0.5, 0.02, 0.02, 0.02] * 2
    best = best_clips(t)
    assert best["dcg"] == (4.0, 64.0, math.inf)
    res = SensitivityResult(table=t, per_setting=pd.DataFrame(), settings=pd.DataFrame({"experiment_id": range(10)}),
                            best_clips=best, takeaway="", policy="treatment", discount="pbm", exposure="pbm",
                            level=0.99, online_alpha=0.001, selection="significant", metrics=("dcg", "ndcg"))
    text = sensitivity_takeaway(res)
    assert "DCG detects 6 (60 %) at every m ≥ 4 (tied) (vs 10 % at m = 1)" in text, text
    assert "nDCG detects 3 (30 %) at m = 4 (vs 20 % at m = 1 and 20 % at m = ∞)" in text, text
