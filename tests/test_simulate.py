"""Tests of the feed simulator: schema, logging invariants, and the exact ground truth against Monte-Carlo.

Over 400 lines on purpose: each assumption switch is tested next to the exact truth it must keep."""

from __future__ import annotations

import datetime as dt
import doctest
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest

import offeval_core.simulate as sim
from offeval_core.cli import main
from offeval_core.simulate import (
    SimulationConfig,
    day_drift,
    preset_config,
    read_world_logs,
    simulate,
    true_survival,
    write_world,
)

REPO = Path(__file__).resolve().parents[1]
DATA = REPO / "data"


@pytest.fixture(scope="module")
def small():
    return simulate(preset_config("small"), seed=0)


def _gt(world, *, arm: str, policy: str, reward: str) -> pd.Series:
    g = world.ground_truth
    sel = g[(g["arm"] == arm) & (g["policy"] == policy) & (g["reward"] == reward)]
    return sel.set_index(["experiment_id", "day"])


def _session_sums(logs: pd.DataFrame, reward: str) -> pd.DataFrame:
    return logs.groupby("session_id", sort=False).agg(
        experiment_id=("experiment_id", "first"), day=("day", "first"), arm=("arm", "first"),
        value=(reward, "sum"), length=("rank", "max"))


# ---------------------------------------------------------------------------------------------------------
# determinism and schema
# ---------------------------------------------------------------------------------------------------------
def test_same_seed_same_frames_different_seed_different(small):
    again = simulate(preset_config("small"), seed=0)
    pd.testing.assert_frame_equal(small.logs, again.logs)
    pd.testing.assert_frame_equal(small.ground_truth, again.ground_truth)
    other = simulate(preset_config("small"), seed=1)
    assert len(other.logs) != len(small.logs) or not other.logs.equals(small.logs)
    assert not np.allclose(other.ground_truth["true_value"], small.ground_truth["true_value"])


def test_written_schema_and_dtypes(tmp_path):
    cfg = preset_config("small")
    write_world(cfg, tmp_path, seed=0)
    schema = pq.read_schema(tmp_path / "logs.parquet")
    types = {f.name: str(f.type) for f in schema}
    assert types["session_id"] == "int64" and types["item_id"] == "int64"
    assert types["rank"] == "int32" and types["rank__production"] == "int32"
    assert types["rank__treatment"] == "int32"
    assert types["day"] == "date32[day]"
    assert types["like"] == "int8" and types["watch_complete"] == "int8" and types["watch_time"] == "float"
    for col in ("experiment_id", "arm", "segment"):
        assert types[col] == "string"
    cands = [c for c in types if c.startswith("rank__cand_")]
    assert cands == [f"rank__cand_{i:02d}" for i in range(1, 11)]
    gt_types = {f.name: str(f.type) for f in pq.read_schema(tmp_path / "ground_truth.parquet")}
    assert gt_types == {"experiment_id": "string", "day": "date32[day]", "arm": "string", "reward": "string",
                        "policy": "string", "true_value": "double", "n_sessions": "int64"}


def test_categorical_values_and_days(small):
    logs = small.logs
    assert set(logs["arm"]) == {"control", "treatment"}
    assert set(logs["segment"]) == {"registered", "guest"}
    assert sorted(logs["experiment_id"].unique()) == ["exp01", "exp02", "exp03"]
    assert sorted(logs["day"].unique()) == [dt.date(2026, 3, 2), dt.date(2026, 3, 3), dt.date(2026, 3, 4)]
    assert logs["session_id"].is_monotonic_increasing
    # session ids are globally unique: one (experiment, day, arm) per session
    per = logs.groupby("session_id")[["experiment_id", "day", "arm", "segment"]].nunique()
    assert (per == 1).all().all()


# ---------------------------------------------------------------------------------------------------------
# logging invariants
# ---------------------------------------------------------------------------------------------------------
def test_rows_are_ranks_one_to_length(small):
    g = small.logs.groupby("session_id")["rank"]
    assert (g.min() == 1).all()
    assert (g.max() == g.size()).all()
    assert (g.nunique() == g.size()).all()


def test_logged_rank_is_the_serving_policy_rank(small):
    logs = small.logs
    ctrl = logs["arm"] == "control"
    assert (logs.loc[ctrl, "rank"] == logs.loc[ctrl, "rank__production"]).all()
    assert (logs.loc[~ctrl, "rank"] == logs.loc[~ctrl, "rank__treatment"]).all()
    # the other policy's ranks are not simply copies
    assert (logs.loc[ctrl, "rank"] != logs.loc[ctrl, "rank__treatment"]).mean() > 0.3


def test_each_policy_ranks_all_candidates_as_a_permutation():
    # nearly every session views all K items, so every candidate is logged
    cfg = preset_config("small", survival="exponential", survival_p=0.999999, sessions_per_arm_day=20,
                        n_candidates=12)
    logs = simulate(cfg, seed=3).logs
    full = logs.groupby("session_id")["rank"].transform("size") == 12
    assert full.mean() > 0.99
    rank_cols = [c for c in logs.columns if c.startswith("rank__")]
    expected = list(range(1, 13))
    for _, s in logs[full].groupby("session_id"):
        assert s["item_id"].nunique() == 12
        for c in rank_cols:
            assert sorted(s[c]) == expected


def test_reward_rates_in_stated_ranges(small):
    like = small.logs["like"].mean()
    watch = small.logs["watch_complete"].mean()
    assert 0.01 < like < 0.08
    assert 0.20 < watch < 0.40
    seg = small.logs.groupby("segment")["like"].mean()
    assert seg["registered"] > 3 * seg["guest"]  # very different base rates


def test_support_depth_truncates_sessions():
    cfg = preset_config("small", support_depth=5)
    logs = simulate(cfg, seed=2).logs
    assert logs["rank"].max() == 5
    assert true_survival(cfg)[5:].sum() == 0.0


# ---------------------------------------------------------------------------------------------------------
# viewing model and ground truth against Monte-Carlo
# ---------------------------------------------------------------------------------------------------------
def _mc_world(seed: int, **overrides):
    cfg = SimulationConfig(**{
        "n_experiments": 1, "effects": ("positive",), "n_days": 2, "sessions_per_arm_day": 12_000,
        "n_candidates": 20, "n_items": 997, "n_users": 4000, "n_cand_policies": 1, "traffic_drift": 0.0,
        **overrides})
    return simulate(cfg, seed=seed)


@pytest.fixture(scope="module")
def mc():
    return _mc_world(7)


def test_empirical_survival_matches_configured_curve(mc):
    lengths = _session_sums(mc.logs, "like")["length"].to_numpy()
    s = true_survival(mc.config)
    n = len(lengths)
    for r in range(1, 11):
        emp = (lengths >= r).mean()
        se = math.sqrt(s[r - 1] * (1 - s[r - 1]) / n) + 1e-12
        assert abs(emp - s[r - 1]) < 4 * se + 1e-9, (r, emp, s[r - 1])


@pytest.mark.parametrize("reward", ["like", "watch_complete", "watch_time"])
def test_online_arm_means_match_true_values(mc, reward):
    sums = _session_sums(mc.logs, reward)
    for arm, policy in (("control", "production"), ("treatment", "treatment")):
        x = sums[sums["arm"] == arm]
        truth = _gt(mc, arm=arm, policy=policy, reward=reward)
        # average over days, weighted by sessions (the true value is a mean over the same sessions)
        t = (truth["true_value"] * truth["n_sessions"]).sum() / truth["n_sessions"].sum()
        se = x["value"].std(ddof=1) / math.sqrt(len(x))
        assert abs(x["value"].mean() - t) < 4 * se, (arm, reward, x["value"].mean(), t, se)


def test_true_effect_is_positive_for_a_positive_treatment(mc):
    a = _gt(mc, arm="control", policy="production", reward="like")["true_value"]
    b = _gt(mc, arm="control", policy="treatment", reward="like")["true_value"]
    assert (b > 1.1 * a).all()


def test_unbiased_dcg_with_true_propensities_recovers_target_value(mc):
    """Eq. 9 (KDD'24): mean Σ c_i · S(R_t(i)) / S(R_0(i)) over control logs estimates the target's value."""
    s = true_survival(mc.config)
    ctrl = mc.logs[mc.logs["arm"] == "control"]
    ratio = s[ctrl["rank__treatment"].to_numpy() - 1] / s[ctrl["rank"].to_numpy() - 1]
    per = (ctrl["like"].to_numpy() * ratio)
    per_session = pd.Series(per).groupby(ctrl["session_id"].to_numpy()).sum()
    truth = _gt(mc, arm="control", policy="treatment", reward="like")
    t = (truth["true_value"] * truth["n_sessions"]).sum() / truth["n_sessions"].sum()
    se = per_session.std(ddof=1) / math.sqrt(len(per_session))
    assert abs(per_session.mean() - t) < 4 * se, (per_session.mean(), t, se)


@pytest.mark.slow
def test_cascade_stops_earlier_and_ground_truth_stays_exact():
    w = _mc_world(11, cascade=True, cascade_strength=0.6)
    sums = _session_sums(w.logs, "watch_complete")
    s = true_survival(w.config)
    lengths = sums["length"].to_numpy()
    # viewing falls below the reward-free curve (rewards make users leave)
    assert (lengths >= 4).mean() < s[3] - 0.03
    # rewarded rows are followed by a stop more often than unrewarded ones
    logs = w.logs
    last = logs["rank"] == logs.groupby("session_id")["rank"].transform("max")
    trig = (logs["like"] == 1) | (logs["watch_complete"] == 1)
    assert last[trig].mean() > last[~trig].mean() + 0.1
    for arm, policy in (("control", "production"), ("treatment", "treatment")):
        x = sums[sums["arm"] == arm]
        truth = _gt(w, arm=arm, policy=policy, reward="watch_complete")
        t = (truth["true_value"] * truth["n_sessions"]).sum() / truth["n_sessions"].sum()
        se = x["value"].std(ddof=1) / math.sqrt(len(x))
        assert abs(x["value"].mean() - t) < 4 * se, (arm, x["value"].mean(), t, se)
    # and the true values are lower than without the cascade (same seed, same contexts)
    plain = _mc_world(11)
    a = plain.ground_truth.set_index(["day", "arm", "reward", "policy"])["true_value"]
    b = w.ground_truth.set_index(["day", "arm", "reward", "policy"])["true_value"]
    assert (b < a).all()


@pytest.mark.slow
@pytest.mark.parametrize("switch", [{"reward_interactions": True}, {"contextual_position_bias": True}])
def test_switches_keep_the_ground_truth_exact(switch):
    w = _mc_world(5, **switch)
    sums = _session_sums(w.logs, "like")
    x = sums[sums["arm"] == "treatment"]
    truth = _gt(w, arm="treatment", policy="treatment", reward="like")
    t = (truth["true_value"] * truth["n_sessions"]).sum() / truth["n_sessions"].sum()
    se = x["value"].std(ddof=1) / math.sqrt(len(x))
    assert abs(x["value"].mean() - t) < 4 * se


def test_contextual_position_bias_makes_registered_scroll_deeper():
    cfg = preset_config("small", contextual_position_bias=True)
    assert (true_survival(cfg, segment="registered")[1:] > true_survival(cfg, segment="guest")[1:]).all()
    logs = simulate(cfg, seed=4).logs
    length = logs.groupby("session_id").agg(seg=("segment", "first"), n=("rank", "size"))
    means = length.groupby("seg")["n"].mean()
    assert means["registered"] > 1.5 * means["guest"]


@pytest.fixture(scope="module")
def deep():
    """Two days with very different scroll depth (depth drift), otherwise the Monte-Carlo world."""
    return _mc_world(9, n_days=2, depth_drift=0.6, depth_engagement=0.3, survival_scale=3.0)


def test_depth_drift_scales_each_days_survival_curve(deep):
    drift = day_drift(deep.config, seed=9)
    # two standardised days: w = ±1, so depth = exp(±0.6) and engagement moves by ∓0.3 (plus its own drift)
    assert sorted(np.round(drift["depth"], 6)) == pytest.approx([math.exp(-0.6), math.exp(0.6)])
    sums = _session_sums(deep.logs, "like")
    for day, factor in zip(drift["day"], drift["depth"], strict=True):
        lengths = sums.loc[sums["day"] == day, "length"].to_numpy()
        s = true_survival(deep.config, depth=float(factor))
        for r in (2, 4, 8):
            se = math.sqrt(s[r - 1] * (1 - s[r - 1]) / len(lengths))
            assert abs((lengths >= r).mean() - s[r - 1]) < 4 * se + 1e-9, (day, r)
    deep_day = drift.loc[drift["depth"].idxmax(), "day"]
    means = sums.groupby("day")["length"].mean()
    assert means[deep_day] > 1.5 * means.drop(index=deep_day).iloc[0]
    # engagement_d = 0.25·z_d − 0.3·w_d with z, w = ±1: adding back 0.3·w_d leaves the plain drift ±0.25
    w = np.log(drift["depth"].to_numpy()) / 0.6
    assert sorted(drift["engagement"].to_numpy() + 0.3 * w) == pytest.approx([-0.25, 0.25])


@pytest.mark.parametrize("reward", ["like", "watch_complete"])
def test_ground_truth_is_exact_per_day_under_depth_drift(deep, reward):
    sums = _session_sums(deep.logs, reward)
    truth = _gt(deep, arm="treatment", policy="treatment", reward=reward)
    for (_exp, day), row in truth.iterrows():
        x = sums[(sums["arm"] == "treatment") & (sums["day"] == day)]["value"]
        se = x.std(ddof=1) / math.sqrt(len(x))
        assert abs(x.mean() - row["true_value"]) < 4 * se, (day, x.mean(), row["true_value"])


def test_shallow_preset_drifts_in_depth_and_the_demo_and_small_do_not():
    shallow = day_drift(preset_config("shallow"), seed=0)
    assert shallow["depth"].max() / shallow["depth"].min() > 2
    # deep days are less engaged per item (depth_engagement > 0): a negative rank correlation over days
    assert np.corrcoef(np.log(shallow["depth"]), shallow["engagement"])[0, 1] < -0.5
    # the demo keeps one viewing curve on every day (so one learnt PBM is right on each), as does small
    assert (day_drift(preset_config("demo"), seed=0)["depth"] == 1.0).all()
    assert (day_drift(preset_config("small"), seed=0)["depth"] == 1.0).all()


def test_production_error_is_the_model_error_of_production_and_the_treatments_that_copy_it():
    from offeval_core.simulate import _rankers

    cfg = preset_config("small", production_error=2.7,
                        effects=("positive", "neutral", "negative"))
    prod, pos = _rankers(cfg, 0)[:2]
    assert prod.shared == 2.7 and pos.shared == 0.7              # the better model keeps its own error
    assert _rankers(cfg, 1)[1].shared == _rankers(cfg, 2)[1].shared == 2.7   # neutral, negative copy production
    assert _rankers(preset_config("small"), 0)[0].shared == 1.6   # the default: PRODUCTION's
    with pytest.raises(ValueError, match="production_error must be a finite number ≥ 0"):
        preset_config("small", production_error=-1.0)


# ---------------------------------------------------------------------------------------------------------
# writer, CLI, validation
# ---------------------------------------------------------------------------------------------------------
def test_day_partitioned_files_hold_the_same_content(tmp_path, small):
    write_world(preset_config("small"), tmp_path, seed=0, partition_by_day=True)
    files = sorted((tmp_path / "logs").glob("day-*.parquet"))
    assert [f.name for f in files] == ["day-2026-03-02.parquet", "day-2026-03-03.parquet",
                                       "day-2026-03-04.parquet"]
    pd.testing.assert_frame_equal(read_world_logs(tmp_path), small.logs)
    pd.testing.assert_frame_equal(pd.read_parquet(tmp_path / "ground_truth.parquet"), small.ground_truth)


def test_cli_writes_files_and_prints_summary(tmp_path, capsys):
    status = main(["simulate", "--out", str(tmp_path), "--preset", "small", "--seed", "0"])
    assert status == 0
    out = capsys.readouterr().out
    assert "3 experiments x 3 days x 2 arms" in out and "like" in out and "MB" in out
    assert (tmp_path / "logs.parquet").exists() and (tmp_path / "ground_truth.parquet").exists()


def test_cli_impressions_sets_the_size(tmp_path, capsys):
    assert main(["simulate", "--out", str(tmp_path), "--preset", "small", "--impressions", "3000"]) == 0
    n = len(pd.read_parquet(tmp_path / "logs.parquet"))
    assert 2000 < n < 4500


def test_cli_ncis_counterexample_preset_writes_gilotte_table_1(tmp_path, capsys):
    """Gilotte et al. (WSDM'18) Table 1: the logging policy earns 1.9, the test policy 2.1; IS on the
    control logs recovers 2.1 exactly (population frequencies), and the online treatment arm earns 2.1."""
    from offeval_core.importance import estimate
    from offeval_core.logs import read_logs as read_any

    assert main(["simulate", "--out", str(tmp_path), "--preset", "ncis-counterexample",
                 "--impressions", "2000"]) == 0
    assert "Table 1" in capsys.readouterr().out
    frame = pd.read_parquet(tmp_path / "logs.parquet")
    assert {"logging_propensity", "target_propensity__test", "value"} <= set(frame.columns)
    assert frame.groupby("arm").size().to_dict() == {"control": 2000, "treatment": 2000}
    assert frame.groupby("arm")["value"].mean().round(9).to_dict() == {"control": 1.9, "treatment": 2.1}
    r = estimate(read_any(frame), reward="value", policy="test", estimator="is")
    assert math.isclose(r.logging.value, 1.9) and math.isclose(r.target.value, 2.1)
    assert main(["simulate", "--out", str(tmp_path), "--preset", "ncis-counterexample",
                 "--impressions", "1500"]) == 2
    assert "n must be a multiple of 1000" in capsys.readouterr().err


def test_cli_rejects_bad_impressions(tmp_path, capsys):
    assert main(["simulate", "--out", str(tmp_path), "--preset", "small", "--impressions", "0"]) == 2
    assert "--impressions must be a positive integer, got 0" in capsys.readouterr().err


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"survival": "weird"}, "survival must be one of ('learnt', 'exponential', 'powerlaw'), got 'weird'"),
    ({"n_experiments": 2}, "effects must have one entry per experiment (2)"),
    ({"support_depth": 0}, "support_depth must be None or an integer in [1, n_candidates], got 0"),
    ({"n_candidates": 1}, "n_candidates must be an integer ≥ 2, got 1"),
    ({"effects": ("positive", "neutral", "bogus")}, "effects entries must be one of"),
    ({"depth_drift": -0.1}, "depth_drift must be ≥ 0, got -0.1"),
    ({"fresh_penalty": math.inf}, "fresh_penalty must be a finite number, got inf"),
])
def test_config_validation_messages(kwargs, message):
    with pytest.raises(ValueError, match=None) as info:
        preset_config("small", **kwargs)
    assert message in str(info.value)


def test_fresh_penalty_buries_fresh_items_for_production_and_the_copies_of_it():
    """Production scores fresh items ``fresh_penalty`` lower (RankerSpec); 30 exceeds any spread of the
    other score terms, so in every session R0 ranks each fresh candidate below each other one, while the
    ``positive`` treatment (w_fresh = 0) serves them high and ``neutral`` buries them too."""
    cfg = preset_config("small", fresh_penalty=30.0, sessions_per_arm_day=30, survival="exponential",
                        survival_p=0.999)                   # nearly every session views all 30 ranks
    logs = simulate(cfg, seed=3).logs
    logs = logs.assign(fresh=sim._build_world(cfg, 3).fresh[logs["item_id"].to_numpy()] > 0)

    def buried(frame: pd.DataFrame, column: str) -> None:
        by = frame.groupby(["session_id", "fresh"])[column]
        lo, hi = by.min().unstack(), by.max().unstack()
        both = lo[True].notna() & hi[False].notna()
        assert both.sum() > 20                               # sessions that logged fresh and other items
        assert (lo.loc[both, True] > hi.loc[both, False]).all()

    buried(logs, "rank__production")
    buried(logs[logs["experiment_id"] == "exp02"], "rank__treatment")   # small preset: exp02 is neutral
    positive = logs[(logs["experiment_id"] == "exp01") & logs["fresh"]]
    assert (positive["rank__production"] > 20).all() and (positive["rank__treatment"] <= 10).mean() > 0.2


def test_powerlaw_survival_and_fresh_drift():
    """The power-law viewing curve S(r) = (1 + (r − 1)/s)^(−α) and the day-level appeal of fresh items."""
    cfg = preset_config("small", survival="powerlaw", survival_scale=2.0, survival_tail=1.5)
    r = np.arange(1, cfg.n_candidates + 1)
    np.testing.assert_allclose(true_survival(cfg), (1 + (r - 1) / 2.0) ** -1.5, rtol=1e-15)
    assert true_survival(cfg)[2] == pytest.approx(2.0 ** -1.5)      # rank 3: (1 + 2/2)^-1.5
    drift = day_drift(preset_config("small", fresh_drift=0.5, n_days=5), seed=0)["fresh_appeal"]
    assert drift.mean() == pytest.approx(0.0, abs=1e-12) and drift.std(ddof=0) == pytest.approx(0.5)
    boosted = day_drift(preset_config("small", fresh_boost=1.0), seed=0)["fresh_appeal"]
    assert boosted.tolist() == [1.0, 1.0, 1.0]
    with pytest.raises(ValueError, match="survival_tail must be > 0, got 0"):
        preset_config("small", survival_tail=0)
    with pytest.raises(ValueError, match="fresh_drift must be ≥ 0, got -1"):
        preset_config("small", fresh_drift=-1)


def test_fresh_appeal_raises_the_exact_truth_of_a_policy_that_shows_fresh_items():
    base = simulate(preset_config("small"), seed=2).ground_truth
    boosted = simulate(preset_config("small", fresh_boost=1.0), seed=2).ground_truth
    key = ["experiment_id", "day", "arm", "reward", "policy"]
    b, f = base.set_index(key)["true_value"], boosted.set_index(key)["true_value"]
    # every policy gains (fresh items are more appealing), the one that surfaces them (cand_03: no fresh
    # penalty) more than production, which buries them
    assert (f > b).all()
    gain = (f / b - 1).xs(("control", "like"), level=("arm", "reward")).groupby("policy").mean()
    assert gain["cand_03"] > 2 * gain["production"]


def test_bad_seed_and_preset():
    with pytest.raises(ValueError, match="seed must be a non-negative integer, got -1"):
        simulate(preset_config("small"), seed=-1)
    with pytest.raises(ValueError, match="preset must be one of 'demo', 'shallow', 'small', 'large'; got 'huge'"):
        preset_config("huge")


def test_doctests():
    result = doctest.testmod(sim)
    assert result.attempted >= 3 and result.failed == 0


# ---------------------------------------------------------------------------------------------------------
# the bundled demo data
# ---------------------------------------------------------------------------------------------------------
def test_demo_data_is_bundled_and_within_budget():
    logs_path, gt_path = DATA / "logs.parquet", DATA / "ground_truth.parquet"
    assert logs_path.stat().st_size < 25e6
    logs = pd.read_parquet(logs_path, columns=["session_id", "day", "experiment_id", "arm", "like",
                                               "watch_complete"])
    assert logs["experiment_id"].nunique() >= 20 and logs["day"].nunique() >= 7
    # data/README.md, "The world": a sparse explicit like (≈ 5.5 %), a dense implicit complete watch (≈ 40 %)
    assert 0.03 < logs["like"].mean() < 0.08 and 0.3 < logs["watch_complete"].mean() < 0.5
    # sessions work through the K = 40 candidates: 8.3 views on average
    assert 7 < len(logs) / logs["session_id"].nunique() < 10
    gt = pd.read_parquet(gt_path)
    # every kind of true effect is represented
    t = gt[(gt["arm"] == "control") & (gt["reward"] == "like")].pivot_table(
        index="experiment_id", columns="policy", values="true_value")
    rel = t["treatment"] / t["production"] - 1
    assert (rel > 0.1).sum() >= 2 and (rel < -0.05).sum() >= 1 and (rel.abs() < 0.01).sum() >= 1


@pytest.mark.slow
def test_demo_data_equals_a_fresh_regeneration(tmp_path):
    write_world(preset_config("demo"), tmp_path, seed=0)
    pd.testing.assert_frame_equal(pd.read_parquet(DATA / "logs.parquet"),
                                  pd.read_parquet(tmp_path / "logs.parquet"))
    pd.testing.assert_frame_equal(pd.read_parquet(DATA / "ground_truth.parquet"),
                                  pd.read_parquet(tmp_path / "ground_truth.parquet"))
