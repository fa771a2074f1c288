"""Assumption holds vs broken (offeval_core.analyses.assumptions): with Asm. 1-5 intact DCG (pbm, Q̂, m = ∞) is
unbiased against the simulator's exact truth; each switch visibly biases it, on several seeds."""

import functools
import re

import pandas as pd
import pytest

from offeval_core.analyses.assumptions import (
    FINDINGS,
    SWITCHES,
    assumption_contrast,
    contrast_takeaway,
    summarize_contrast,
    visibly_weakened,
)

SEEDS = (3, 4, 5)


@functools.cache
def _contrast():
    """At 95 %: the tests' counts (0-2 of 15 bias CIs excluding 0 by chance) are written for that level."""
    return assumption_contrast(seeds=SEEDS, level=0.95)


@pytest.mark.slow
def test_intact_world_is_unbiased_and_covers_at_nominal():
    s = _contrast().summary
    holds = s[s["world"] == "holds"].iloc[0]
    # 15 (seed, policy) bias CIs at 95 %: 0-2 excluding 0 by chance (P(≥ 3) ≈ 3.6 %)
    assert holds["biased_share"] * holds["n"] <= 2
    assert holds["coverage"] >= 0.90


@pytest.mark.slow
@pytest.mark.parametrize("switch", list(SWITCHES))
def test_each_switch_visibly_biases_dcg(switch):
    s = _contrast().summary.set_index(["switch", "world"])
    h, b = s.loc[(switch, "holds")], s.loc[(switch, "broken")]
    finding = FINDINGS.get(switch, "unbiasedness")
    assert visibly_weakened(h, b, finding), (switch, h.to_dict(), b.to_dict())
    verdict = re.search(rf"{switch} \(.*?— (breaking it [^.(]*)", _contrast().takeaway).group(1).strip()
    assert verdict == ("breaking it visibly lowers the CI coverage" if finding == "coverage"
                       else "breaking it visibly weakens unbiasedness")


@pytest.mark.slow
def test_the_contrast_pairs_worlds_by_seed_and_the_table_matches_the_cells():
    res = _contrast()
    cells = res.cells
    for (sw, world, seed, pol), part in cells.groupby(["switch", "world", "seed", "policy"]):
        row = res.table[(res.table["switch"] == sw) & (res.table["world"] == world) & (res.table["seed"] == seed)
                        & (res.table["policy"] == pol)].iloc[0]
        rel = (part["estimate"] - part["truth"]) / part["truth"]
        assert row["rel_bias"] == pytest.approx(rel.mean(), rel=1e-12)
        assert row["n_cells"] == len(part)
    # every 'holds' world is the same world: one simulation per seed, shared by the four switches
    holds = cells[cells["world"] == "holds"]
    first = holds[holds["switch"] == "cascade"].drop(columns="switch").reset_index(drop=True)
    for sw in SWITCHES:
        other = holds[holds["switch"] == sw].drop(columns="switch").reset_index(drop=True)
        pd.testing.assert_frame_equal(first, other)


def test_takeaway_and_verdict_from_a_constructed_summary():
    t = pd.DataFrame({"switch": ["cascade"] * 4, "assumption": ["Asm. 2"] * 4, "world": ["holds", "holds", "broken",
                                                                                         "broken"],
                      "seed": [0, 1, 0, 1], "policy": ["a"] * 4, "rel_bias": [0.01, -0.02, 0.2, 0.1],
                      "rel_bias_low": [-0.03, -0.05, 0.1, -0.01], "rel_bias_high": [0.05, 0.01, 0.3, 0.2],
                      "coverage": [1.0, 0.9, 0.5, 0.7]})
    s = summarize_contrast(t).set_index("world")
    assert s.loc["holds", "biased_share"] == 0 and s.loc["broken", "biased_share"] == 0.5
    assert s.loc["broken", "mean_abs_bias"] == pytest.approx(0.15)
    assert s.loc["broken", "coverage"] == pytest.approx(0.6)
    text = contrast_takeaway(summarize_contrast(t))
    assert "0 of 2 policy-seeds when the assumption holds" in text and "1 of 2 when broken" in text
    assert "visibly weakens" in text
    # a coverage drop of under 10 points is not called visible
    t.loc[t["world"] == "broken", "coverage"] = 0.9
    assert "does not visibly bias DCG in this world" in contrast_takeaway(summarize_contrast(t))


def test_bad_switch_and_seeds():
    with pytest.raises(ValueError, match="switches must be among cascade, reward_interactions"):
        assumption_contrast(["nope"], seeds=(0,))
    with pytest.raises(ValueError, match="seeds must list at least one seed, got none"):
        assumption_contrast(seeds=())


SMALL = {"sessions_per_arm_day": 40, "n_experiments": 1, "effects": ("positive",), "n_days": 2, "n_items": 200,
         "n_users": 200}


def test_contrast_on_tiny_worlds_against_per_session_values():
    """Two switches, one seed, two policies on tiny worlds: each cell's estimate is the mean per-session DCG
    (pbm, Q̂, m = ∞) of the day's control sessions, its CI the normal one at the level asked, its truth the
    simulator's control-arm value of that day; each table row is the cells' mean relative bias with the normal
    CI of its standard error, and the covered share; the 'holds' world is simulated once and shared; progress
    counts the worlds."""
    import math

    import numpy as np
    from scipy import stats as sps

    from offeval_core.estimators import session_values
    from offeval_core.logs import read_logs
    from offeval_core.simulate import preset_config, simulate

    calls = []
    pols = ("treatment", "cand_01")
    res = assumption_contrast(("support_depth", "cascade"), seeds=(0,), policies=pols, level=0.9,
                              progress=lambda done, total: calls.append((done, total)), **SMALL)
    assert calls == [(1, 4), (2, 4), (3, 4), (4, 4)]
    assert (res.reward, res.level) == ("like", 0.9)
    z = sps.norm.ppf(0.95)
    for change, worlds in (({}, [("support_depth", "holds"), ("cascade", "holds")]),
                           (SWITCHES["cascade"][1], [("cascade", "broken")]),
                           (SWITCHES["support_depth"][1], [("support_depth", "broken")])):
        world = simulate(preset_config("small", **{**SMALL, **change}), seed=0)
        sv = session_values(read_logs(world.logs), reward="like", policies=pols)
        sv = sv[sv["arm"].astype(str) == "control"]
        gt = world.ground_truth
        for sw, state in worlds:
            cells = res.cells[(res.cells["switch"] == sw) & (res.cells["world"] == state)]
            assert len(cells) == 4 and (cells["seed"] == 0).all()
            assert list(cells.columns) == ["experiment_id", "day", "policy", "estimate", "low", "high", "truth",
                                           "switch", "world", "seed"]
            for rec in cells.itertuples():
                v = sv[(sv["day"] == rec.day)][f"dcg__{rec.policy}"].to_numpy()
                half = z * v.std(ddof=1) / math.sqrt(len(v))
                assert (rec.estimate, rec.low, rec.high) == pytest.approx((v.mean(), v.mean() - half,
                                                                           v.mean() + half), rel=1e-9)
                truth = gt[(gt["arm"] == "control") & (gt["reward"] == "like") & (gt["policy"] == rec.policy)
                           & (gt["day"] == rec.day)]["true_value"]
                assert rec.truth == float(truth.iloc[0])
            for pol, part in cells.groupby("policy"):
                row = res.table[(res.table["switch"] == sw) & (res.table["world"] == state)
                                & (res.table["policy"] == pol)]
                assert len(row) == 1
                row = row.iloc[0]
                rel = ((part["estimate"] - part["truth"]) / part["truth"]).to_numpy()
                se = rel.std(ddof=1) / math.sqrt(2)
                covered = np.mean((part["low"] <= part["truth"]) & (part["truth"] <= part["high"]))
                assert (row["assumption"], row["seed"], row["n_cells"]) == (SWITCHES[sw][0], 0, 2)
                assert (row["rel_bias"], row["rel_bias_low"], row["rel_bias_high"], row["coverage"]) == \
                    pytest.approx((rel.mean(), rel.mean() - z * se, rel.mean() + z * se, covered), rel=1e-9)
    assert list(res.table["policy"]) == list(pols) * 4
    assert list(zip(res.table["switch"], res.table["world"], strict=True)) == [
        (s, w) for s in ("support_depth", "cascade") for w in ("holds", "broken") for _ in pols]
    holds = res.cells[res.cells["world"] == "holds"].drop(columns="switch")
    pd.testing.assert_frame_equal(holds.iloc[:4].reset_index(drop=True), holds.iloc[4:].reset_index(drop=True))
    assert list(res.cells.index) == list(range(16))        # the worlds' cells renumbered
    pd.testing.assert_frame_equal(res.summary, summarize_contrast(res.table))
    assert res.takeaway == contrast_takeaway(res.summary)


def test_contrast_defaults_and_a_single_cell():
    """Defaults: the small preset at 1 000 sessions per arm and day (overridable), reward like, LEVEL (99 %); one
    day per experiment gives a single cell per policy, whose bias has no standard error."""
    import math

    from offeval_core.simulate import preset_config, simulate

    one_day = {k: v for k, v in SMALL.items() if k != "sessions_per_arm_day"} | {"n_days": 1}
    calls = []
    res = assumption_contrast(("support_depth",), seeds=(2, 3), policies=("treatment",),
                              progress=lambda done, total: calls.append((done, total)), **one_day)
    assert calls == [(1, 4), (2, 4), (3, 4), (4, 4)]      # two worlds × two seeds
    assert res.level == 0.99 and res.reward == "like"
    # seed 2's world at 1000 sessions per arm and day (at 1001 its day has 1468 control sessions, not 1466)
    gt = simulate(preset_config("small", sessions_per_arm_day=1000, **one_day), seed=2).ground_truth
    gt = gt[(gt["arm"] == "control") & (gt["reward"] == "like") & (gt["policy"] == "treatment")]
    assert res.cells["truth"].iloc[0] == float(gt["true_value"].iloc[0])
    assert res.table["n_cells"].tolist() == [1, 1, 1, 1]
    assert all(math.isnan(v) for v in res.table[["rel_bias_low", "rel_bias_high"]].to_numpy().ravel())
    assert res.table["seed"].tolist() == [2, 3, 2, 3]


def test_visibly_weakened_at_each_threshold():
    """Each rule holds at its boundary (≥ 0.3 more biased, ≥ 2× the bias, ≥ 10 points less coverage) and fails just
    short of it; the coverage finding reads the coverage only."""
    holds = {"biased_share": 0.0, "mean_abs_bias": 0.05, "coverage": 0.9}
    at = {"biased_share": 0.3, "mean_abs_bias": 0.1, "coverage": 0.8}
    assert visibly_weakened(holds, at) is True
    for key, short in (("biased_share", 0.29), ("mean_abs_bias", 0.099), ("coverage", 0.81)):
        assert visibly_weakened(holds, {**at, key: short}) is False, key
    assert visibly_weakened(holds, {**at, "biased_share": 0.0, "mean_abs_bias": 0.0}, "coverage") is True
    assert visibly_weakened(holds, {**at, "coverage": 0.81}, "coverage") is False


def test_summary_and_takeaway_by_hand():
    """Per (switch, world) in the table's order: rows, the share whose CI excludes 0 (a bound at 0 does not), the
    mean |bias|, the mean coverage; one sentence per switch with both worlds, the coverage switch worded on its own,
    a switch with one world left out."""
    rows = [  # switch, assumption, world, low, bias, high, coverage
        ("support_depth", "Asm. 5", "holds", 0.0, 0.01, 0.02, 1.0), ("support_depth", "Asm. 5", "holds", -0.1, -0.03, 0.0, 0.9),
        ("support_depth", "Asm. 5", "broken", 0.1, 0.2, 0.3, 0.5), ("support_depth", "Asm. 5", "broken", -0.3, -0.2, -0.1, 0.7),
        ("depth_drift", "one curve", "holds", -0.1, 0.0, 0.1, 0.9), ("depth_drift", "one curve", "holds", -0.1, 0.02, 0.1, 0.9),
        ("depth_drift", "one curve", "broken", -0.1, 0.01, 0.1, 0.7), ("depth_drift", "one curve", "broken", -0.1, -0.01, 0.1, 0.8),
        ("cascade", "Asm. 2", "holds", -0.1, 0.0, 0.1, 0.95)]
    t = pd.DataFrame([{"switch": s, "assumption": a, "world": w, "seed": i, "policy": "p", "rel_bias": b,
                       "rel_bias_low": lo, "rel_bias_high": hi, "coverage": c}
                      for i, (s, a, w, lo, b, hi, c) in enumerate(rows)])
    s = summarize_contrast(t)
    want = pd.DataFrame({"switch": ["support_depth"] * 2 + ["depth_drift"] * 2 + ["cascade"],
                         "assumption": ["Asm. 5"] * 2 + ["one curve"] * 2 + ["Asm. 2"],
                         "world": ["holds", "broken", "holds", "broken", "holds"], "n": [2, 2, 2, 2, 1],
                         "biased_share": [0.0, 1.0, 0.0, 0.0, 0.0], "mean_abs_bias": [0.02, 0.2, 0.01, 0.01, 0.0],
                         "coverage": [0.95, 0.6, 0.9, 0.75, 0.95]})
    pd.testing.assert_frame_equal(s, want, check_exact=False, rtol=1e-12)
    assert contrast_takeaway(s) == (
        "support_depth (breaks Asm. 5): DCG is visibly biased for 0 of 2 policy-seeds when the assumption holds "
        "(mean |bias| 2.0 %, CI coverage 95 %) vs 2 of 2 when broken (20.0 %, coverage 60 %) — breaking it visibly "
        "weakens unbiasedness. depth_drift (breaks one curve): DCG is visibly biased for 0 of 2 policy-seeds when "
        "the assumption holds (mean |bias| 1.0 %, CI coverage 90 %) vs 0 of 2 when broken (1.0 %, coverage 75 %) — "
        "breaking it visibly lowers the CI coverage (the per-day errors cancel in the mean bias).")
    first = pd.concat([s[s["switch"] == "cascade"], s[s["switch"] != "cascade"]])   # one world only: skipped
    assert contrast_takeaway(first) == contrast_takeaway(s)
    s2 = s.copy()
    s2.loc[s2["world"] == "broken", "coverage"] = 0.86
    assert contrast_takeaway(s2) == (
        "support_depth (breaks Asm. 5): DCG is visibly biased for 0 of 2 policy-seeds when the assumption holds "
        "(mean |bias| 2.0 %, CI coverage 95 %) vs 2 of 2 when broken (20.0 %, coverage 86 %) — breaking it does not "
        "visibly bias DCG in this world. depth_drift (breaks one curve): DCG is visibly biased for 0 of 2 "
        "policy-seeds when the assumption holds (mean |bias| 1.0 %, CI coverage 90 %) vs 0 of 2 when broken (1.0 %, "
        "coverage 86 %) — breaking it does not visibly lower the coverage in this world.")


def test_contrast_figure_by_hand():
    """Two bars per world (mean |bias| left, coverage right), the nominal level as a dashed line, the axes."""
    from offeval_core.analyses.assumptions import AssumptionContrast, contrast_figure

    s = pd.DataFrame({"switch": ["cascade", "cascade"], "assumption": ["Asm. 2"] * 2, "world": ["holds", "broken"],
                      "n": [2, 2], "biased_share": [0.0, 1.0], "mean_abs_bias": [0.012, 0.3456],
                      "coverage": [0.95, 0.5]})
    fig = contrast_figure(AssumptionContrast(table=pd.DataFrame(), summary=s, cells=pd.DataFrame(), reward="like",
                                             level=0.9, takeaway=""))
    bars = [(tr.name, list(tr.x), list(tr.y), list(tr.text), tr.marker.color, tr.showlegend, tr.xaxis)
            for tr in fig.data]
    assert bars == [("assumption holds", ["cascade"], [0.012], ["1.2%"], "#009E73", None, "x"),
                    ("assumption holds", ["cascade"], [0.95], ["95%"], "#009E73", False, "x2"),
                    ("assumption broken", ["cascade"], [0.3456], ["34.6%"], "#D55E00", None, "x"),
                    ("assumption broken", ["cascade"], [0.5], ["50%"], "#D55E00", False, "x2")]
    assert fig.data[0].hovertemplate == "%{x}<br>assumption holds<br>mean |bias| %{y:.1%}<extra></extra>"
    assert fig.data[3].hovertemplate == "%{x}<br>assumption broken<br>coverage %{y:.0%}<extra></extra>"
    assert [a.text for a in fig.layout.annotations] == ["mean |relative bias| vs the exact truth",
                                                       "CI coverage of the truth (nominal 90%)"]
    (line,) = fig.layout.shapes
    assert (line.y0, line.y1, line.line.dash, line.line.color, line.xref) == (0.9, 0.9, "dash", "grey", "x2 domain")
    assert (fig.layout.yaxis.title.text, fig.layout.yaxis.tickformat) == ("mean |(estimate − truth) / truth|", ".0%")
    assert (fig.layout.yaxis2.title.text, tuple(fig.layout.yaxis2.range)) == ("share of cells covered", (0, 1.05))
    assert fig.layout.xaxis.title.text == fig.layout.xaxis2.title.text == "switch (assumption broken)"
    assert (fig.layout.barmode, fig.layout.height, fig.layout.legend.orientation) == ("group", 460, "h")
    assert [tr.legendgroup for tr in fig.data] == ["holds", "holds", "broken", "broken"]
    assert sorted(k for k in fig.to_dict()["layout"] if k.startswith(("xaxis", "yaxis"))) == [
        "xaxis", "xaxis2", "yaxis", "yaxis2"]                                   # one row, two columns
    assert fig.layout.yaxis2.tickformat == ".0%" and fig.layout.xaxis.tickangle == fig.layout.xaxis2.tickangle == 0
    assert (fig.layout.margin.t, fig.layout.legend.y, fig.layout.legend.x) == (90, 1.18, 0)


def test_table_from_cells_by_hand(monkeypatch):
    """The per-policy rows from cells written by hand (the worlds stubbed): relative biases (1.1 − 1)/1 = 0.1 and
    (1.4 − 2)/2 = −0.3, mean −0.1, se √(0.08)/√2 = 0.2; a truth exactly at a CI's bound is covered."""
    from scipy import stats as sps

    from offeval_core import simulate as sim
    from offeval_core.analyses import assumptions

    cells = pd.DataFrame({"experiment_id": ["e", "e"], "day": [1, 2], "policy": ["p", "p"], "estimate": [1.1, 1.4],
                          "low": [1.0, 1.0], "high": [1.2, 2.0], "truth": [1.0, 2.0]})
    monkeypatch.setattr(sim, "simulate", lambda config, seed: None)
    monkeypatch.setattr(assumptions, "_cells", lambda world, **kw: cells)
    res = assumption_contrast(("cascade",), seeds=(0,), level=0.9)
    z = sps.norm.ppf(0.95)
    row = res.table.iloc[0]
    assert (row["n_cells"], row["coverage"]) == (2, 1.0)
    assert (row["rel_bias"], row["rel_bias_low"], row["rel_bias_high"]) == pytest.approx(
        (-0.1, -0.1 - z * 0.2, -0.1 + z * 0.2), rel=1e-12)
