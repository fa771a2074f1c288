"""Centred moments: variances that keep their digits when the values share a large offset, pooling by Chan et
al.'s formulas, and non-finite results refused with NonFiniteMoments instead of a 0 standard error.

Each formula is checked on values with an offset of 10⁸ (or more): keeping Σx² − (Σx)²/n anywhere (the shift
dropped) loses every digit of these variances, and subtracting the between-group term twice (the shift applied
twice) gives a wrong, sometimes negative, second moment — either fails these tests."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from offeval_core import stats
from offeval_core.engine import Grid, reduce
from offeval_core.errors import EstimatorWarning, NonFiniteMoments
from offeval_core.estimators import aggregate, estimate_from_row, online_results, select
from offeval_core.logs import read_logs
from offeval_core.moment_columns import (
    OFFLINE_ROLES,
    ONLINE_ROLES,
    Layout,
    add_zeros,
    merge,
    pool,
    remove_zeros,
)
from offeval_core.stats import CrossMoments, RatioMoments

OFFSET = 1e8
ONLINE = Layout(("n", "sum", "m2"), ONLINE_ROLES)


def m2(x) -> float:
    """Σ(x − x̄)², on the values less their first element (so the offset never enters a square)."""
    x = np.asarray(x, dtype=float)
    d = x - x[0]
    return float(((d - d.mean()) ** 2).sum())


def co(x, y) -> float:
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    dx, dy = x - x[0], y - y[0]
    return float(((dx - dx.mean()) * (dy - dy.mean())).sum())


# ------------------------------------------------------------------------------------- formulas, by hand


def test_offset_of_1e8_keeps_the_standard_error_exactly():
    """Values 10⁸ + (0, 1, 0, 1): mean 10⁸ + 0.5, M2 = 4 · 0.25 = 1, s² = 1/3, SE = √(1/12) = 0.288675…
    (Σx² − (Σx)²/n gives 0 here: 4·10¹⁶ + … loses the 1)."""
    x = OFFSET + np.array([0.0, 1.0, 0.0, 1.0])
    n, total, m2_ = stats.moments_of(x)
    assert (n, total, m2_) == (4, 400000002.0, 1.0)
    e = stats.mean_estimate(n, total, m2_, level=0.95)
    assert e.value == 100000000.5
    assert e.stderr == pytest.approx(math.sqrt(1 / 12), rel=1e-15)
    raw = (float(np.sum(x * x)) - total * total / n) / (n - 1)  # the old formula, for the record
    assert raw != pytest.approx(1 / 3, rel=0.1)


def test_sample_variance_and_its_n_below_two():
    assert stats.sample_variance(4, 1.0) == pytest.approx(1 / 3, rel=1e-15)
    assert math.isnan(stats.sample_variance(1, 0.0))
    with pytest.raises(NonFiniteMoments, match="the second moments are not finite"):
        stats.sample_variance(3, math.inf)


@pytest.mark.parametrize("offset", [0.0, 1e8, 1e12])
def test_each_formula_equals_its_direct_form_on_offset_values(offset):
    rng = np.random.default_rng(1)
    n = 60
    a, b = offset + rng.normal(0, 1, n), offset + rng.normal(0.3, 2, n)
    y = 1.0 + rng.uniform(0, 1, n)  # a ratio's denominator: no offset (its mean sets the scale)
    # mean and paired effect
    d = b - a
    e = stats.mean_estimate(n, a.sum(), m2(a), level=0.95)
    assert e.stderr == pytest.approx(math.sqrt(m2(a) / (n - 1) / n), rel=1e-12)
    eff = stats.paired_effect(n, d.sum(), m2(d), level=0.95)
    assert eff.stderr == pytest.approx(np.std(d - d[0], ddof=1) / math.sqrt(n), rel=1e-9)
    # Welch: two arms with the offset
    w = stats.welch_effect(n, b.sum(), m2(b), n, a.sum(), m2(a), level=0.95)
    se = math.sqrt(np.var(b - offset, ddof=1) / n + np.var(a - offset, ddof=1) / n)
    assert w.stderr == pytest.approx(se, rel=1e-8)
    # ratio of means Σx/Σy with an offset numerator: SE = sd(x − R y) / (√n ȳ)
    x = b
    r = x.sum() / y.sum()
    est = stats.ratio_estimate(n, x.sum(), m2(x), y.sum(), m2(y), co(x, y), level=0.95)
    phi = x - r * y
    assert est.stderr == pytest.approx(np.std(phi, ddof=1) / (math.sqrt(n) * y.mean()), rel=1e-6)
    # difference of two ratios on the same units
    c, u = a, 1.0 + rng.uniform(0, 2, n)
    diff = stats.ratio_difference(RatioMoments(n, x.sum(), m2(x), y.sum(), m2(y), co(x, y)),
                                  RatioMoments(n, c.sum(), m2(c), u.sum(), m2(u), co(c, u)),
                                  CrossMoments(co(x, c), co(x, u), co(y, c), co(y, u)), level=0.95)
    r0 = c.sum() / u.sum()
    phi = (x - r * y) / y.mean() - (c - r0 * u) / u.mean()
    assert diff.stderr == pytest.approx(np.std(phi, ddof=1) / math.sqrt(n), rel=1e-6)


# ------------------------------------------------------------------------------------------------ pooling


def test_merge_equals_numpy_on_the_concatenated_values():
    rng = np.random.default_rng(2)
    a, b = OFFSET + rng.normal(0, 1, 7), OFFSET + 3 + rng.normal(0, 1, 11)
    both = np.concatenate([a, b])
    got = merge(np.array(stats.moments_of(a), dtype=float), np.array(stats.moments_of(b), dtype=float), ONLINE)
    assert got[0] == 18 and got[1] == pytest.approx(both.sum(), rel=1e-15)
    # the means come from sums of 10⁸-sized values, known to ~1e-8: the between term to ~1e-8 of itself
    assert got[2] == pytest.approx(np.var(both - OFFSET) * 18, rel=1e-7)
    # with the between-group term applied twice (or dropped) the second moment is far off
    within = stats.moments_of(a)[2] + stats.moments_of(b)[2]
    assert abs(got[2] - within) > 10


def test_zeros_added_then_removed_give_the_moments_back():
    x = np.array([4.0, 2.0, 3.0, 5.0])
    with_zeros = np.concatenate([x, np.zeros(3)])
    added = add_zeros(np.array(stats.moments_of(x), dtype=float), 3.0, ONLINE)
    assert added.tolist() == pytest.approx([7, with_zeros.sum(), np.var(with_zeros) * 7], rel=1e-12)
    back = remove_zeros(added, 3.0, ONLINE)
    assert back.tolist() == pytest.approx(list(stats.moments_of(x)), rel=1e-12)
    assert add_zeros(np.array([0.0, 0.0, 0.0]), 5.0, ONLINE).tolist() == [5.0, 0.0, 0.0]


group_sizes = st.lists(st.integers(1, 12), min_size=1, max_size=8)


@settings(max_examples=60, deadline=None)
@given(sizes=group_sizes, offset=st.sampled_from([0.0, 1e4, 1e8, -1e9]), seed=st.integers(0, 2**31 - 1))
def test_pooled_moments_equal_the_moments_of_all_values(sizes, offset, seed):
    """Any partition of the values into groups pools to the moments of the whole (rows of different means:
    the between-group spread must be added exactly once)."""
    rng = np.random.default_rng(seed)
    groups = [offset + rng.normal(rng.normal(0, 5), rng.uniform(0.1, 2), k) for k in sizes]
    frame = pd.DataFrame([dict(zip(("n", "sum", "m2"), stats.moments_of(g), strict=True)) for g in groups])
    pooled = pool(frame, roles=ONLINE_ROLES).iloc[0]
    everything = np.concatenate(groups)
    n, total, direct = stats.moments_of(everything)
    assert pooled["n"] == n
    assert pooled["sum"] == pytest.approx(total, rel=1e-12, abs=1e-9)
    assert pooled["m2"] == pytest.approx(np.var(everything - offset) * n, rel=1e-6, abs=1e-9)
    assert pooled["m2"] == pytest.approx(direct, rel=1e-6, abs=1e-9)


def test_pool_co_moments_and_by_keys():
    rng = np.random.default_rng(4)
    rows, values = [], {}
    for g, shift in (("a", 0.0), ("b", 5.0), ("a", 2.0)):
        x = OFFSET + shift + rng.normal(0, 1, 9)
        y = 1 + rng.uniform(0, 1, 9)
        values.setdefault(g, []).append((x, y))
        rows.append({"g": g, "n": 9, "sum": x.sum(), "m2": m2(x), "den_sum": y.sum(), "den_m2": m2(y),
                     "co_den": co(x, y)})
    pooled = pool(pd.DataFrame(rows), ["g"], OFFLINE_ROLES).set_index("g")
    for g, parts in values.items():
        x = np.concatenate([p[0] for p in parts])
        y = np.concatenate([p[1] for p in parts])
        assert pooled.loc[g, "m2"] == pytest.approx(m2(x), rel=1e-7)
        assert pooled.loc[g, "co_den"] == pytest.approx(co(x, y), rel=1e-7)
        assert pooled.loc[g, "den_m2"] == pytest.approx(m2(y), rel=1e-12)


# ------------------------------------------------------------------------------------- engine end to end


def offset_logs(n=300, *, offset=OFFSET, arms=True):
    """One impression per session at rank 1, reward offset + (0, 1, 2); policy 'same' ranks it 1, 'lower' 2;
    three experiments with different offsets so the pooled variance has a between-group part."""
    s = np.arange(n)
    return pd.DataFrame({"session_id": s, "rank": 1, "like": offset * (1 + s % 3) + (s // 3) % 3,
                         "rank__same": 1, "rank__lower": 2, "experiment_id": [f"e{k}" for k in s % 3],
                         **({"arm": np.where(s % 2 == 0, "control", "treatment")} if arms else {})})


def test_reduce_on_offset_rewards_keeps_every_second_moment():
    df = offset_logs()
    logs = read_logs(df)
    m = reduce(logs, Grid(rewards=("like",), policies=("same", "lower"), discounts=("log2",), exposures=("log2",),
                          clips=(1, math.inf)))
    control = df[df["arm"] == "control"]
    c = control["like"].to_numpy()
    d2 = 1 / math.log2(3)
    for clip in (1, math.inf):
        row = aggregate(select(m, reward="like", policy="lower", metric="dcg", discount="log2", exposure="log2",
                               clip=clip)).iloc[0]
        assert row["n"] == len(c)
        assert row["m2"] == pytest.approx(m2(c * d2), rel=1e-6)
        assert row["den_m2"] == pytest.approx(m2(c), rel=1e-6)
        assert row["co_den"] == pytest.approx(co(c * d2, c), rel=1e-6)
        assert row["m2_diff"] == pytest.approx(m2(c * d2 - c), rel=1e-6)
        assert row["co_diff_den"] == pytest.approx(co(c * d2 - c, c), rel=1e-6)
        # the paired DCG effect: SE = sd(d)/√n of d = (D(2) − 1) c
        eff = estimate_from_row(row, metric="dcg", level=0.95, diff=True)
        assert eff.stderr == pytest.approx(np.std(c - c[0], ddof=1) * (1 - d2) / math.sqrt(len(c)), rel=1e-6)
        # pnDCG = Σ D(2) c / Σ c = D(2) on every session: Var(x − R y) = 0 up to rounding, which the
        # moments cannot resolve: undefined (with a warning), not 0 ± noise of 10⁸
        with pytest.warns(EstimatorWarning):
            ratio = estimate_from_row(row, metric="pndcg", level=0.95)
        assert ratio.value == pytest.approx(d2, rel=1e-12) and math.isnan(ratio.stderr)
        # nDCG of the 'lower' policy is D(2) on every session: M2 = 0
        nd = aggregate(select(m, reward="like", policy="lower", metric="ndcg", discount="log2", exposure="log2",
                              clip=clip)).iloc[0]
        assert nd["m2"] == pytest.approx(0.0, abs=1e-12) and nd["sum"] == pytest.approx(len(c) * d2, rel=1e-12)
    # the online arms: Welch on 10⁸-offset per-session rewards
    on = online_results(m, reward="like")[()]
    t = df[df["arm"] == "treatment"]["like"].to_numpy()
    se = math.sqrt(np.var(t - OFFSET, ddof=1) / len(t) + np.var(c - OFFSET, ddof=1) / len(c))
    assert on.effect.stderr == pytest.approx(se, rel=1e-6)
    assert m.online["m2"].sum() == pytest.approx(sum(m2(g["like"]) for _, g in df.groupby(["experiment_id", "arm"])),
                                                 rel=1e-6)


def test_reduce_pools_groups_of_different_offsets_by_chan():
    """Three experiments with means 10⁸, 2·10⁸, 3·10⁸: the per-experiment moments pool to those of all the
    control sessions (the between-experiment spread counted once)."""
    df = offset_logs()
    m = reduce(read_logs(df), Grid(rewards=("like",), policies=("same",), discounts=("log2",), exposures=("log2",),
                                   clips=(math.inf,)))
    rows = select(m, reward="like", policy=None, metric="dcg", discount="log2", exposure="log2", clip=math.inf)
    assert rows["experiment_id"].nunique() == 3
    c = df[df["arm"] == "control"]["like"].to_numpy()
    assert aggregate(rows).iloc[0]["m2"] == pytest.approx(m2(c), rel=1e-9)
    by = aggregate(rows, ["experiment_id"]).set_index("experiment_id")["m2"]
    for e, g in df[df["arm"] == "control"].groupby("experiment_id"):
        assert by[e] == pytest.approx(m2(g["like"]), rel=1e-6)


def test_importance_moments_on_offset_rewards():
    """IS and SNIPS with propensity weights 0.8 / 1.2 on rewards 10⁸ + (0, 1, 2): IS's moments are exact.
    SNIPS's per-session ratio x / y = r is 10⁸ + (0, 1, 2) on every session, so its delta-method variance
    Var(x − R y) ≈ 0.6 is lost against Var(x) ≈ 4·10¹⁴ in its terms: the standard error is undefined (with a
    warning), never 0; with the offset subtracted from the reward it is the influence-function SD."""
    from offeval_core.importance import reduce_importance

    n = 240
    s = np.arange(n)
    r = OFFSET + s % 3
    df = pd.DataFrame({"session_id": s, "rank": 1, "like": r, "logging_propensity": 0.5,
                       "target_propensity__t": np.where(s % 2, 0.4, 0.6)})
    m = reduce_importance(read_logs(df), clips=(math.inf,), cappings=("max",), scales=("session",))
    w = np.where(s % 2, 0.8, 1.2)
    x = w * r
    row = aggregate(select(m, reward="like", policy="t", metric="is", discount="propensity", exposure="propensity",
                           clip=math.inf)).iloc[0]
    assert row["m2"] == pytest.approx(m2(x), rel=1e-6) and row["ref_m2"] == pytest.approx(m2(r), rel=1e-6)
    assert row["m2_diff"] == pytest.approx(m2(x - r), rel=1e-6)
    snips = aggregate(select(m, reward="like", policy="t", metric="snips", discount="propensity",
                             exposure="propensity", clip=math.inf)).iloc[0]
    with pytest.warns(EstimatorWarning, match="below the precision of its moments"):
        eff = estimate_from_row(snips, metric="snips", level=0.95, diff=True)
    assert math.isnan(eff.stderr) and math.isnan(eff.p_value)
    r = r - OFFSET
    m = reduce_importance(read_logs(df.assign(like=r)), clips=(math.inf,), cappings=("max",), scales=("session",))
    snips = aggregate(select(m, reward="like", policy="t", metric="snips", discount="propensity",
                             exposure="propensity", clip=math.inf)).iloc[0]
    eff = estimate_from_row(snips, metric="snips", level=0.95, diff=True)
    x = w * r
    ratio = x.sum() / w.sum()
    phi = (x - ratio * w) / w.mean() - (r - r.mean())
    assert eff.value == pytest.approx(ratio - r.mean(), rel=1e-12)
    assert eff.stderr == pytest.approx(np.std(phi, ddof=1) / math.sqrt(n), rel=1e-9)


# ---------------------------------------------------------------------------------- beyond the float range


@pytest.mark.parametrize(("reward", "every", "column"), [(1e200, 4, "m2"), (1e308, 4, "m2"), (1e308, 2, "sum")])
def test_values_beyond_double_precision_raise_instead_of_a_zero_stderr(reward, every, column):
    """Half the control sessions at 10²⁰⁰ (their squares overflow), or at 10³⁰⁸; every control session at
    10³⁰⁸ (two of them already sum past 1.8·10³⁰⁸)."""
    df = offset_logs(12, offset=0.0).assign(like=lambda f: np.where(f["session_id"] % every == 0, reward, 0.0))
    with pytest.raises(NonFiniteMoments, match=f"are not finite at .*column '{column}'.*rescale the reward"):
        reduce(read_logs(df), Grid(rewards=("like",), policies=("same",), discounts=("log2",), exposures=("log2",),
                                   clips=(math.inf,)))


def test_values_near_the_limit_that_fit_are_exact():
    """Rewards 10¹⁵⁰ · (1, 0, 1, 0, …): squares of 10³⁰⁰ still fit, the mean and SE are exact."""
    df = offset_logs(40, offset=0.0, arms=False).assign(like=lambda f: np.where(f["session_id"] % 2 == 0, 1e150, 0.0))
    m = reduce(read_logs(df), Grid(rewards=("like",), policies=("same",), discounts=("log2",), exposures=("log2",),
                                   clips=(math.inf,)))
    row = aggregate(select(m, reward="like", policy=None, metric="dcg", discount="log2", exposure="log2",
                           clip=math.inf)).iloc[0]
    e = estimate_from_row(row, metric="dcg", level=0.95)
    assert e.value == pytest.approx(0.5e150, rel=1e-12)
    assert e.stderr == pytest.approx(1e150 * math.sqrt(0.25 * 40 / 39 / 40), rel=1e-12)


def test_stats_refuse_non_finite_moments():
    with pytest.raises(NonFiniteMoments, match="the sums are not finite"):
        stats.mean_estimate(3, math.inf, 1.0, level=0.95)
    with pytest.raises(NonFiniteMoments):
        stats.welch_effect(3, 1.0, math.nan, 3, 1.0, 1.0, level=0.95)
    with pytest.raises(NonFiniteMoments):
        stats.ratio_estimate(3, 1.0, 1.0, 1e-320, 1.0, 0.0, level=0.95)  # the ratio overflows
    with pytest.raises(NonFiniteMoments):
        stats.moments_of([1e200, -1e200, 3.0])
    # an undefined SE (one unit) gives an undefined p, not p = 0
    assert math.isnan(stats.one_sided_p(0.3, math.nan)) and math.isnan(stats.two_sided_p(0.3, math.nan))
    assert math.isnan(stats.paired_effect(1, 0.3, 0.0, level=0.95).p_value)


def test_logs_without_a_single_reward_reduce_to_zero_moments(tmp_path):
    """No rewarded row at all (no group reaches the clip pass): every variant counts the sessions with Σx = 0 and
    M2 = 0, from memory and from the Parquet file alike (the running merge once failed on zero groups)."""
    from offeval_core.engine import connect, source_from_files
    from offeval_core.moment_columns import merge_running

    assert merge_running(np.zeros((3, 0, 3)), ONLINE).shape == (3, 0, 3)
    df = pd.DataFrame({"session_id": ["a", "a", "b"], "rank": [1, 2, 1], "like": 0.0, "rank__new": [2, 1, 1],
                       "arm": ["control", "control", "treatment"]})
    df.to_parquet(tmp_path / "none.parquet", index=False)
    grid = Grid(rewards=("like",), policies=("new",), discounts=("log2",), exposures=("log2",),
                clips=(1.0, 4.0, math.inf))
    for m in (reduce(read_logs(df), grid), reduce(source_from_files(tmp_path / "none.parquet", connect()), grid)):
        off = m.offline
        assert len(off) == 3 * 2 * 2 * 2  # clips × policies × metrics × arms
        assert (off["n"] == 1).all()  # one session in each arm
        assert (off[["sum", "m2", "den_sum", "den_m2"]] == 0).all().all()
        assert m.online.set_index("arm")[["n", "sum", "m2"]].to_dict("index") == {
            "control": {"n": 1, "sum": 0.0, "m2": 0.0}, "treatment": {"n": 1, "sum": 0.0, "m2": 0.0}}
