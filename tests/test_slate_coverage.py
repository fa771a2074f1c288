"""Coverage study of the slate IPS intervals: the exact value bound, the normal interval equal to the slate
estimator's, replications that compose in blocks, and the coverages on the heavy-tailed world."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from offeval_core.slate.coverage import (
    HEAVY_TAILED,
    coverage_runs,
    interval_coverage,
    summarize_coverage,
    value_bound,
)
from offeval_core.slate.estimators import estimate, plain_kernel, weights_for
from offeval_core.slate.schema import from_arrays
from offeval_core.slate.simulator import SlateConfig, build_world, sample


@pytest.fixture(scope="module")
def world():
    return build_world(HEAVY_TAILED, rng=0)


def every_slate_rewarded(world, x):
    """Context x's every slate as one logged session with a click at every slot (the slate estimators' own path)."""
    s, k = world.slates.shape
    m0, m1 = world.marginals("logging"), world.marginals("target")
    sess, slot = np.repeat(np.arange(s), k), np.tile(np.arange(k), s)
    item = world.slates.ravel()
    return from_arrays(sess, slot + 1, np.ones(s * k), logging_marginal=m0[x, slot, item],
                       target_marginal=m1[x, slot, item],
                       logging_conditional=world.logging_conditional[x].ravel(),
                       target_conditional=world.target_conditional[x].ravel(), item=item)


@pytest.mark.parametrize("estimator", ["iips", "rips", "sips"])
def test_value_bound_is_the_largest_all_clicked_session(estimator):
    w = build_world(SlateConfig(n_items=5, n_slots=3, behaviours=("independent", "cascade")), rng=3)
    direct = max(plain_kernel(d, weights_for(d, estimator), np.ones(3)).max()
                 for d in (every_slate_rewarded(w, x) for x in range(w.n_contexts)))
    assert value_bound(w, estimator) == pytest.approx(direct, rel=1e-12)
    with pytest.raises(ValueError, match="mean of per-session values"):
        value_bound(w, "snips")


def test_sips_bound_closed_form_and_ordering(world):
    ratio = world.target_prob / world.logging_prob
    assert value_bound(world, "sips") == pytest.approx(4 * ratio.max(), rel=1e-12)   # 4 slots × the slate ratio
    assert value_bound(world, "iips") < value_bound(world, "rips") < value_bound(world, "sips")


def test_normal_rows_equal_the_slate_estimator_and_blocks_compose(world):
    full = coverage_runs(world, n_sessions=120, reps=range(6), rng=7)
    parts = pd.concat([coverage_runs(world, n_sessions=120, reps=range(0, 3), rng=7),
                       coverage_runs(world, n_sessions=120, reps=range(3, 6), rng=7)], ignore_index=True)
    pd.testing.assert_frame_equal(full, parts)
    # replay replication 4 by hand: its logs come from default_rng([base, 4])
    base = int(np.random.default_rng(7).integers(0, 2**63 - 1))
    s = sample(world, 120, rng=np.random.default_rng([base, 4]))
    truth = world.value()
    for e in ("iips", "rips", "sips"):
        ci = estimate(s.data, estimator=e).target.ci
        row = full[(full["rep"] == 4) & (full["estimator"] == e) & (full["interval"] == "normal")].iloc[0]
        assert (row["low"], row["high"]) == pytest.approx((ci.low, ci.high), rel=1e-12)
        assert row["covered"] == (ci.low <= truth <= ci.high)
        eb = full[(full["rep"] == 4) & (full["estimator"] == e) & (full["interval"] == "bernstein")].iloc[0]
        assert eb["high"] - eb["low"] > ci.high - ci.low


def test_summary_counts_and_monte_carlo_error(world):
    runs = coverage_runs(world, n_sessions=100, reps=range(20), rng=1)
    res = summarize_coverage(runs, world=world, n_sessions=100)
    row = res.table[(res.table["estimator"] == "SIPS") & (res.table["interval"] == "normal")].iloc[0]
    g = runs[(runs["estimator"] == "sips") & (runs["interval"] == "normal")]
    assert row["coverage"] == g["covered"].mean() and row["reps"] == 20 == res.reps
    assert row["mc_se"] == pytest.approx(math.sqrt(row["coverage"] * (1 - row["coverage"]) / 20))
    assert row["miss_low"] + row["miss_high"] == pytest.approx(1 - row["coverage"])
    assert res.truth == pytest.approx(world.value())
    assert f"SIPS: normal {100 * row['coverage']:.0f} % ± {100 * row['mc_se']:.1f}" in res.takeaway


def test_heavy_tailed_weights_break_the_normal_interval_not_the_others():
    # 400 replications of 100 sessions: Monte-Carlo error ≈ 1 to 2 points
    res = interval_coverage(n_sessions=100, reps=400, rng=0, level=0.95)  # the thresholds below are at 95 %
    t = res.table.set_index(["estimator", "interval"])
    mc = 3 * math.sqrt(0.95 * 0.05 / 400)
    for est in ("IIPS", "RIPS", "SIPS"):
        assert t.loc[(est, "empirical Bernstein"), "coverage"] >= 0.95         # a bound: never below the level
    assert t.loc[("SIPS", "normal"), "coverage"] < 0.95 - 2 * mc              # heavy slate weights: it under-covers
    assert t.loc[("SIPS", "bootstrap-t"), "coverage"] > t.loc[("SIPS", "normal"), "coverage"] + mc
    assert t.loc[("IIPS", "normal"), "coverage"] > 0.95 - mc                  # light item-position weights: it holds
    assert "The normal interval falls short for" in res.takeaway and "SIPS" in res.takeaway


def test_chart_draws_the_table(world):
    from offeval_core.slate.coverage import coverage_chart

    res = summarize_coverage(coverage_runs(world, n_sessions=100, reps=range(10), rng=2), world=world, n_sessions=100)
    fig = coverage_chart(res)
    bars = [t for t in fig.data if t.xaxis == "x"]
    assert [t.name for t in bars] == ["normal", "bootstrap-t", "empirical Bernstein"]
    normal = res.table[res.table["interval"] == "normal"]
    assert list(bars[0].x) == normal["estimator"].tolist() == ["IIPS", "RIPS", "SIPS"]
    np.testing.assert_allclose(bars[0].y, normal["coverage"])
    np.testing.assert_allclose(bars[0].error_y.array, 2 * normal["mc_se"])
    assert res.level == 0.99  # the shared default level (offeval_core.defaults.LEVEL)
    assert any(s.y0 == res.level for s in fig.layout.shapes)   # the nominal level
