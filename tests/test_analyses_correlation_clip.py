"""KDD'24 Table 2 across clip values (analyses.correlation_by_clip): each pooled correlation equals NumPy's on
a series computed independently from per-session values and the raw frame; where the finding holds and its
takeaway follow from the table; bad arguments name what is wrong."""

import math

import numpy as np
import pandas as pd
import pytest
from analyses_world import per_session_totals

from offeval_core.analyses import correlation_by_clip, correlation_clip_figure
from offeval_core.engine import Grid, reduce
from offeval_core.estimators import session_values
from offeval_core.logs import read_logs
from offeval_core.simulate import preset_config, simulate

CLIPS = (1.0, 4.0, 64.0, math.inf)


@pytest.fixture(scope="module")
def world():
    logs = read_logs(simulate(preset_config("small"), seed=4).logs)
    m = reduce(logs, Grid(rewards=("like",), policies=("treatment",), discounts=("pbm", "log2"),
                          exposures=("pbm", "log2"), clips=CLIPS))
    return logs, m


@pytest.fixture(scope="module")
def result(world):
    return correlation_by_clip(world[1], reward="like")


def test_each_pooled_r_is_numpys_on_an_independent_series(world, result):
    logs, _ = world
    online = per_session_totals(logs, "like")
    online = online[online["arm"] == "treatment"].groupby(["experiment_id", "day"])["total"].mean()
    assert list(result.table["clip"].unique()) == list(CLIPS)
    for rec in result.table.itertuples():
        sv = session_values(logs, reward="like", policies=["treatment"], discount=rec.discount,
                            exposure=rec.discount, clip=rec.clip)
        sv = sv[sv["arm"].astype(str) == "control"].astype({"experiment_id": str})
        offline = sv.groupby(["experiment_id", "day"])["dcg__treatment"].mean()
        x = online.loc[offline.index].to_numpy()
        assert rec.n_points == len(offline) == 9  # 3 experiments × 3 days
        assert rec.r == pytest.approx(np.corrcoef(x, offline.to_numpy())[0, 1], abs=1e-12), rec.variant


def test_holds_and_best_clip_follow_from_the_table(result):
    r = result.table.set_index(["discount", "clip"])["r"]
    margins = {m: r[("pbm", m)] - max(r[("log2", 1.0)], r[("log2", m)]) for m in CLIPS[1:]}
    d = result.differences
    for m in CLIPS[1:]:   # one row per log2 variant at each m, r and r_vs as in the table
        part = d[d["clip"] == m].set_index("vs")
        assert part["r"].tolist() == pytest.approx([r[("pbm", m)]] * len(part))
        assert part["r_vs"].to_dict() == pytest.approx({f"DCG (log2, {'C' if c == 1 else ('Q̂' if math.isinf(c) else f'Q̂ m={c:g}')})": r[("log2", c)] for c in dict.fromkeys((1.0, m))})
        assert (part["low"] <= part["diff"]).all() and (part["diff"] <= part["high"]).all()
    # a win needs both bootstrap CIs above 0: on 9 experiment-days every positive margin is inside the noise
    assert result.holds == tuple(m for m in CLIPS[1:] if (d.loc[d["clip"] == m, "low"] > 0).all()) == ()
    ahead = [m for m in CLIPS[1:] if margins[m] > 0]
    assert ahead and "ahead by the point estimate but within the noise at m ∈ {" in result.takeaway
    assert result.best_clip == max(margins, key=margins.get)
    for m in CLIPS[1:]:
        assert result.margin(m) == pytest.approx(margins[m], abs=1e-15)
    assert math.isnan(result.margin(1.0))  # raw labels are the reference, not a candidate


def test_takeaway_states_where_it_holds_with_the_numbers(result):
    text = result.takeaway
    assert text.startswith("Pooled over 9 experiment-days of the target policy (like), KDD'24 Table 2's finding")
    r = result.table.set_index(["discount", "clip"])["r"]
    best = result.best_clip
    pair = f"r = {r[('pbm', best)]:.2f} vs {max(r[('log2', 1.0)], r[('log2', best)]):.2f}"
    if result.holds:
        held = ", ".join("∞" if math.isinf(m) else f"{m:g}" for m in result.holds)
        assert f"holds at m ∈ {{{held}}}" in text and "largest margin at m = " in text and pair in text
    else:
        assert "holds at no clip m" in text and pair in text


def test_a_table_where_log2_wins_everywhere_says_so(world):
    import dataclasses

    from offeval_core.analyses.correlation_clip import _holds, _margins, _takeaway

    res = correlation_by_clip(world[1], reward="like")
    t = res.table.copy()
    t.loc[t["discount"] == "log2", "r"] = 0.99
    margins = _margins(t, "pbm")
    assert all(d < 0 for d in margins.values())
    best = max(margins, key=margins.get)
    text = _takeaway(t, margins, (), best, model="pbm", reward="like", sym="r")
    assert "holds at no clip m; closest at m = " in text and "vs 0.99, the better log2 variant)." in text
    # an exact tie is not a win: the finding needs the learnt model strictly above both log2 variants
    t2 = dataclasses.replace(res, table=res.table.assign(r=0.5))
    assert all(t2.margin(m) == 0 for m in CLIPS[1:])
    assert _holds(_margins(t2.table, "pbm")) == ()
    assert _holds({4.0: 1e-12, 64.0: 0.0, math.inf: -0.2}) == (4.0,)


def test_figure_has_both_models_and_stars_where_it_holds(result):
    fig = correlation_clip_figure(result)
    names = [tr.name for tr in fig.data]
    assert names[:2] == ["DCG (pbm, Q̂ at m; C at m = 1)", "DCG (log2, Q̂ at m; C at m = 1)"]
    assert list(fig.data[0].y) == pytest.approx(result.table[result.table["discount"] == "pbm"]["r"].tolist())
    stars = [tr for tr in fig.data if tr.name == "Table 2's finding holds"]
    assert len(stars) == (1 if result.holds else 0)
    if result.holds:
        assert len(stars[0].y) == len(result.holds)
    assert "pooled r: offline vs online" in fig.layout.yaxis.title.text


def test_bad_arguments(world):
    _, m = world
    with pytest.raises(ValueError, match="method must be one of 'pearson', 'kendall', 'spearman'; got 'tau'"):
        correlation_by_clip(m, reward="like", method="tau")
    with pytest.raises(ValueError, match="reward 'watch' was not computed; available: like"):
        correlation_by_clip(m, reward="watch")
    with pytest.raises(ValueError, match=r"^clip 2 was not computed; available: 1, 4, 64, inf$"):
        correlation_by_clip(m, reward="like", clips=(2.0,))
    with pytest.raises(ValueError, match=r"the moments hold no DCG with D = D0 = 'reciprocal'"):
        correlation_by_clip(m, reward="like", model="reciprocal")


def test_equal_margins_pick_the_most_clipped_value(world):
    # no weight of these logs reaches 4096, so DCG at m = 4096 is DCG at m = ∞ in every session: equal r, equal
    # margins, and the best clip is the smaller (more clipped) of the two
    logs, _ = world
    m = reduce(logs, Grid(rewards=("like",), policies=("treatment",), discounts=("pbm", "log2"),
                          exposures=("pbm", "log2"), clips=(1.0, 4096.0, math.inf)))
    res = correlation_by_clip(m, reward="like")
    assert res.margin(4096.0) == res.margin(math.inf)
    assert res.best_clip == 4096.0


def _clip_table():
    """Pooled r by hand: margins 0.8 − max(0.5, 0.6) = 0.2 at m = 4, 0.6 − 0.5 = 0.1 at 16, 0.55 − 0.7 at ∞."""
    r = {("pbm", 1.0): 0.4, ("log2", 1.0): 0.5, ("pbm", 4.0): 0.8, ("log2", 4.0): 0.6, ("pbm", 16.0): 0.6,
         ("log2", 16.0): 0.45, ("pbm", math.inf): 0.55, ("log2", math.inf): 0.7}
    return pd.DataFrame([{"clip": c, "discount": d, "r": v, "n_points": 12 if c < 16 else 11}
                         for (d, c), v in r.items()])


def test_takeaway_by_hand_names_the_bootstrap_level_used():
    """The whole takeaway of a table and differences written by hand: where it holds, where it does not, ahead
    within the noise, the largest margin and the unclipped value each with its worst difference and CI — whose
    level is the one the differences are computed at (LEVEL, 99 %), not a fixed 95 %."""
    from offeval_core.analyses.correlation_clip import _margins, _takeaway
    from offeval_core.defaults import LEVEL

    assert LEVEL == 0.99
    t = _clip_table()
    margins = _margins(t, "pbm")
    assert margins == pytest.approx({4.0: 0.2, 16.0: 0.1, math.inf: -0.15})
    diffs = pd.DataFrame({"clip": [4.0, 4.0, math.inf, math.inf], "vs": ["C", "Q4", "C", "Q"],
                          "diff": [0.3, 0.2, 0.05, -0.15], "low": [0.1, 0.05, -0.1, -0.3],
                          "high": [0.5, 0.35, 0.2, 0.0]})
    text = _takeaway(t, margins, (4.0,), 4.0, model="pbm", reward="like", sym="ρ", differences=diffs)
    assert text == (
        "Pooled over 12 experiment-days of the target policy (like), KDD'24 Table 2's finding — DCG (pbm, Q̂) tracks "
        "the online reward better than DCG (log2, C) and DCG (log2, Q̂) at the same clip, by more than the bootstrap "
        "noise — holds at m ∈ {4} and not at m ∈ {∞}; ahead by the point estimate but within the noise at m ∈ {16}; "
        "largest margin at m = 4 (ρ = 0.80 vs 0.60, difference +0.20, 99 % bootstrap CI +0.05 to +0.35); unclipped "
        "(m = ∞): ρ = 0.55 vs 0.70, difference -0.15, 99 % bootstrap CI -0.30 to +0.00, it does not hold.")


def test_takeaway_branches_by_hand():
    """Nothing to check; holds nowhere (with and without differences); holds at ∞ (no separate unclipped
    sentence when ∞ is the best) and at every clip; ∞ held but not the best."""
    from offeval_core.analyses.correlation_clip import _margins, _takeaway

    head = ("Pooled over {n} experiment-days of the target policy (like), KDD'24 Table 2's finding — DCG (pbm, Q̂) "
            "tracks the online reward better than DCG (log2, C) and DCG (log2, Q̂) at the same clip, by more than "
            "the bootstrap noise — ")
    empty = pd.DataFrame({"clip": [], "discount": [], "r": [], "n_points": []})
    assert _takeaway(empty, {}, (), math.nan, model="pbm", reward="like", sym="r") == (
        head.format(n=0) + "cannot be checked: no clip m > 1 has a pooled correlation.")
    t = _clip_table()
    margins = _margins(t, "pbm")
    assert _takeaway(t, {4.0: math.nan}, (), math.nan, model="pbm", reward="like", sym="r") == (
        head.format(n=12) + "cannot be checked: no clip m > 1 has a pooled correlation.")
    assert _takeaway(t, margins, (), 4.0, model="pbm", reward="like", sym="r") == (
        head.format(n=12) + "holds at no clip m; ahead by the point estimate but within the noise at m ∈ {4, 16}; "
        "closest at m = 4 (r = 0.80 vs 0.60, the better log2 variant).")
    neg = {4.0: -0.1, math.inf: -0.15}
    diffs = pd.DataFrame({"clip": [4.0, 4.0], "diff": [-0.1, 0.2], "low": [-0.3, 0.1], "high": [0.1, 0.3]})
    assert _takeaway(t, neg, (), 4.0, model="pbm", reward="like", sym="r", differences=diffs) == (
        head.format(n=12) + "holds at no clip m; closest at m = 4 (r = 0.80 vs 0.60, difference -0.10, 99 % "
        "bootstrap CI -0.30 to +0.10, the better log2 variant).")
    assert _takeaway(t, neg, (), 4.0, model="pbm", reward="like", sym="r", differences=diffs.iloc[:0]) == (
        head.format(n=12) + "holds at no clip m; closest at m = 4 (r = 0.80 vs 0.60, the better log2 variant).")
    zero = {4.0: 0.0, 16.0: -0.1}      # a margin of exactly 0 is not ahead
    assert _takeaway(t, zero, (), 4.0, model="pbm", reward="like", sym="r") == (
        head.format(n=12) + "holds at no clip m; closest at m = 4 (r = 0.80 vs 0.60, the better log2 variant).")
    assert _takeaway(t, {4.0: 0.2, 16.0: -0.1, math.inf: -0.2}, (4.0,), 4.0, model="pbm", reward="like",
                     sym="r") == (head.format(n=12) + "holds at m ∈ {4} and not at m ∈ {16, ∞}; largest margin at "
                                  "m = 4 (r = 0.80 vs 0.60); unclipped (m = ∞): r = 0.55 vs 0.70, it does not hold.")
    t2 = t.assign(r=[0.4, 0.5, 0.8, 0.6, 0.6, 0.45, 0.9, 0.7])     # ∞: 0.9 − 0.7 = 0.2, the largest margin
    m2 = _margins(t2, "pbm")
    assert _takeaway(t2, m2, (4.0, 16.0, math.inf), math.inf, model="pbm", reward="like", sym="r") == (
        head.format(n=12) + "holds at m ∈ {4, 16, ∞}; largest margin at m = ∞ (r = 0.90 vs 0.70).")
    assert _takeaway(t2, m2, (16.0, math.inf), 4.0, model="pbm", reward="like", sym="r") == (
        head.format(n=12) + "holds at m ∈ {16, ∞}; ahead by the point estimate but within the noise at m ∈ {4}; "
        "largest margin at m = 4 (r = 0.80 vs 0.60); unclipped (m = ∞): r = 0.90 vs 0.70, it holds.")


def test_margins_and_holds_by_hand():
    """Margins only for m > 1, against the better of DCG (log2, C) and DCG (log2, Q̂ at m), NaN where a variant is
    missing; a clip holds when every one of its differences' CIs lies above 0."""
    from offeval_core.analyses.correlation_clip import _holds, _holds_surely, _margins

    t = _clip_table()
    assert _margins(t, "pbm") == pytest.approx({4.0: 0.2, 16.0: 0.1, math.inf: -0.15})
    assert list(_margins(t, "pbm")) == [4.0, 16.0, math.inf]
    no_raw = _margins(t[~((t["discount"] == "log2") & (t["clip"] == 1.0))], "pbm")
    assert all(math.isnan(v) for v in no_raw.values())     # max(NaN, b) is NaN
    no_16 = _margins(t[~((t["discount"] == "log2") & (t["clip"] == 16.0))], "pbm")
    # no verdict against a missing variant (before: max(0.5, NaN) was 0.5, a margin of 0.1 against C alone)
    assert no_16[4.0] == pytest.approx(0.2) and math.isnan(no_16[16.0]) and no_16[math.inf] == pytest.approx(-0.15)
    nan_16 = _margins(t.assign(r=np.where((t["discount"] == "log2") & (t["clip"] == 16.0), np.nan, t["r"])), "pbm")
    assert math.isnan(nan_16[16.0]) and _holds(nan_16) == (4.0,)   # an r that is NaN (< 3 days) the same way
    assert all(math.isnan(v) for v in _margins(t, "other").values())
    d = pd.DataFrame({"clip": [math.inf, 16.0, 16.0, 4.0, 4.0], "low": [0.5, 0.01, 0.02, 0.03, 0.0]})   # sorted
    assert _holds_surely(d) == (16.0, math.inf)
    assert _holds_surely(d.iloc[:0]) == ()
    assert _holds({4.0: 0.2, 16.0: -0.1, math.inf: 0.3}) == (4.0, math.inf)
    two = pd.DataFrame({"clip": [1.0, 1.0, 2.0, 2.0], "discount": ["pbm", "log2"] * 2, "r": [0.1, 0.2, 0.5, 0.3]})
    assert _margins(two, "pbm") == pytest.approx({2.0: 0.5 - 0.3})     # m = 2 is above 1


def test_by_clip_with_its_options_against_the_daily_points(world):
    """Spearman, clips (4, ∞) with m = 1 added, 200 resamples, seed 5: each table row's pooled ρ is SciPy's over
    the experiment-days, its median ρ the median over experiments of the per-experiment cells, each difference
    the paired bootstrap of correlation_diff at LEVEL on the same points; holds, best clip and takeaway follow."""
    from scipy import stats as sps

    from offeval_core.analyses import Variant, offline_online_correlation, variant_label
    from offeval_core.analyses.correlation_clip import _margins, _takeaway
    from offeval_core.analyses.correlation_diff import pooled_difference

    _, m = world
    res = correlation_by_clip(m, reward="like", method="spearman", clips=(math.inf, 4.0), n_boot=200, rng=5)
    assert (res.reward, res.policy, res.method, res.model) == ("like", "treatment", "spearman", "pbm")
    labels = {(d, c): variant_label(Variant("dcg", d, d, c)) for c in (1.0, 4.0, math.inf) for d in ("pbm", "log2")}
    corr = offline_online_correlation(m, variants=[Variant("dcg", d, d, c) for d, c in labels],
                                      policies=("treatment",), method="spearman", rewards=("like",))
    daily = corr.daily
    assert res.table[["clip", "discount", "variant"]].values.tolist() == [[c, d, lab] for (d, c), lab in
                                                                          labels.items()]
    for rec in res.table.itertuples():
        pts = daily[daily["variant"] == rec.variant]
        assert rec.n_points == len(pts) == 9
        assert rec.r == pytest.approx(sps.spearmanr(pts["online"], pts["offline"]).statistic, abs=1e-12)
        cells = corr.table[corr.table["variant"] == rec.variant]["r"]
        assert rec.median_r == pytest.approx(cells.median(), abs=1e-12)
    want = []
    for c in (4.0, math.inf):
        for b in (labels["log2", 1.0], labels["log2", c]):
            d = pooled_difference(daily, labels["pbm", c], b, reward="like", method="spearman", n_boot=200,
                                  level=0.99, rng=5)
            want.append([c, b, d.r_a, d.r_b, d.diff, d.low, d.high])
    pd.testing.assert_frame_equal(res.differences, pd.DataFrame(want, columns=["clip", "vs", "r", "r_vs", "diff",
                                                                                "low", "high"]))
    d = res.differences
    assert res.holds == tuple(c for c in (4.0, math.inf) if (d.loc[d["clip"] == c, "low"] > 0).all())
    margins = _margins(res.table, "pbm")
    assert res.best_clip == max(margins, key=margins.get)
    assert res.takeaway == _takeaway(res.table, margins, res.holds, res.best_clip, model="pbm", reward="like",
                                     sym="ρ", differences=res.differences)
    assert res.takeaway.startswith("Pooled over 9 experiment-days of the target policy (like)")


def test_by_clip_defaults_another_target_and_two_rewards(world):
    """With its defaults (Pearson, every clip of the grid, 1000 resamples, seed 0) the differences are
    correlation_diff's at LEVEL; on moments of two rewards and a target named cand_01 the pooled r are those of
    the reward and policy asked; a model the moments hold as a discount but not as an exposure is refused."""
    from offeval_core.analyses import Variant, offline_online_correlation, variant_label
    from offeval_core.analyses.correlation_diff import pooled_difference

    logs, m = world
    res = correlation_by_clip(m, reward="like")
    assert res.method == "pearson" and list(res.table["clip"].unique()) == list(CLIPS)
    lab = {(d, c): variant_label(Variant("dcg", d, d, c)) for c in CLIPS for d in ("pbm", "log2")}
    daily = offline_online_correlation(m, variants=[Variant("dcg", d, d, c) for d, c in lab],
                                       policies=("treatment",), rewards=("like",)).daily
    row = res.differences.iloc[0]
    want = pooled_difference(daily, lab["pbm", 4.0], lab["log2", 1.0], reward="like", n_boot=1000, level=0.99, rng=0)
    assert (row["clip"], row["vs"], row["low"], row["high"]) == (4.0, lab["log2", 1.0], want.low, want.high)

    m2 = reduce(logs, Grid(rewards=("like", "watch_complete"), policies=("cand_01",), discounts=("pbm", "log2"),
                           exposures=("pbm", "log2"), clips=(1.0, 2.0)))
    two = correlation_by_clip(m2, reward="watch_complete", policy="cand_01", n_boot=50)
    daily2 = offline_online_correlation(m2, variants=[Variant("dcg", d, d, c) for d in ("pbm", "log2")
                                                      for c in (1.0, 2.0)],
                                        policies=("cand_01",), rewards=("watch_complete",)).daily
    for rec in two.table.itertuples():
        pts = daily2[daily2["variant"] == rec.variant]
        assert rec.n_points == 9
        assert rec.r == pytest.approx(np.corrcoef(pts["online"], pts["offline"])[0, 1], abs=1e-12)
    lab2 = {(d, c): variant_label(Variant("dcg", d, d, c)) for c in (1.0, 2.0) for d in ("pbm", "log2")}
    assert two.differences["clip"].tolist() == [2.0, 2.0]     # m = 2 is a clip above 1
    for rec, b in zip(two.differences.itertuples(), (lab2["log2", 1.0], lab2["log2", 2.0]), strict=True):
        d = pooled_difference(daily2, lab2["pbm", 2.0], b, reward="watch_complete", policy="cand_01", n_boot=50,
                              level=0.99, rng=0)
        assert (rec.vs, rec.r, rec.r_vs, rec.low, rec.high) == (b, d.r_a, d.r_b, d.low, d.high)
    raw = correlation_by_clip(m, reward="like", clips=(1.0,))     # no clip above 1: nothing to compare
    assert raw.table["clip"].tolist() == [1.0, 1.0] and raw.holds == () and math.isnan(raw.best_clip)
    assert list(raw.differences.columns) == ["clip", "vs", "r", "r_vs", "diff", "low", "high"]
    assert raw.differences.empty and raw.takeaway.endswith("cannot be checked: no clip m > 1 has a pooled correlation.")
    m3 = reduce(logs, Grid(rewards=("like",), policies=("treatment",), discounts=("pbm", "log2"),
                           exposures=("log2",), clips=(1.0, 4.0)))
    with pytest.raises(ValueError) as exc:
        correlation_by_clip(m3, reward="like")
    assert str(exc.value) == ("the moments hold no DCG with D = D0 = 'pbm' (D ∈ {pbm, log2}, D0 ∈ {log2}); reduce "
                              "them with that model")
