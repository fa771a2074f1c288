"""The Ibis reduce against the independent loop implementation, and the identities of KDD'24 Sec. 4-6."""

import itertools
import math
import warnings

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from reference_impl import (
    ref_cutoff,
    ref_exponential,
    ref_learnt_pbm,
    ref_log2,
    ref_paired_effect,
    ref_reciprocal,
    ref_session_values,
)

from offeval_core.engine import Grid, reduce
from offeval_core.errors import UnknownName
from offeval_core.estimators import aggregate, estimate_from_row, select, session_values
from offeval_core.logs import read_logs

FLOOR = 1e-4


def random_logs(rng, *, n_sessions=60, max_len=9, n_items=12, graded=True, policies=("a", "b"), unshown=0.0):
    """Random logs; with ``unshown`` > 0 that share of target ranks is missing (the target does not show
    the item, so its discount is 0)."""
    rows = []
    for s in range(n_sessions):
        length = int(rng.integers(1, max_len + 1))
        perms = {p: rng.permutation(n_items) + 1 for p in policies}
        for r in range(1, length + 1):
            reward = float(rng.random() < 0.35) * (float(rng.integers(1, 4)) if graded else 1.0)
            row = {"session_id": f"s{s:03d}", "rank": r, "click": reward,
                   "day": int(s % 3), "arm": "control" if s % 4 else "treatment", "segment": "gu"[s % 2]}
            row |= {f"rank__{p}": (math.nan if rng.random() < unshown else int(perms[p][r - 1])) for p in policies}
            rows.append(row)
    return pd.DataFrame(rows)


def reference_models(df):
    return {"pbm": ref_learnt_pbm(df, floor=FLOOR, arm="control"), "log2": ref_log2,
            "reciprocal@5": ref_cutoff(ref_reciprocal, 5), "exponential:0.7": ref_exponential(0.7)}


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10_000), graded=st.booleans(), unshown=st.sampled_from([0.0, 0.3]))
def test_reduce_matches_the_reference_loop(seed, graded, unshown):
    rng = np.random.default_rng(seed)
    df = random_logs(rng, graded=graded, unshown=unshown)
    logs = read_logs(df)
    clips = (1, 3, 16, math.inf)
    grid = Grid(rewards=("click",), policies=("a", "b"), discounts=("pbm", "log2", "reciprocal@5"),
                exposures=("pbm", "exponential:0.7"), clips=clips)
    m = reduce(logs, grid)
    models = reference_models(df)
    control = df[df["arm"] == "control"]
    for disc in grid.discounts:
        for expo in grid.exposures:
            for clip in clips:
                kw = dict(reward="click", discount=models[disc], exposure=models[expo], clip=clip)
                ref0 = ref_session_values(control, policy=None, **kw)
                for pol in ("a", "b"):
                    ref = ref_session_values(control, policy=pol, **kw)
                    for metric in ("dcg", "ndcg"):
                        rows = aggregate(select(m, reward="click", policy=pol, metric=metric, discount=disc,
                                                exposure=expo, clip=clip))
                        row = rows.iloc[0]
                        assert row["n"] == len(ref)
                        assert row["sum"] == pytest.approx(ref[metric].sum(), rel=1e-9, abs=1e-9)
                        dev = ref[metric] - ref[metric].mean()
                        assert row["m2"] == pytest.approx((dev ** 2).sum(), rel=1e-9, abs=1e-9)
                        diff = ref[metric] - ref0[metric]
                        assert row["sum_diff"] == pytest.approx(diff.sum(), rel=1e-9, abs=1e-9)
                        assert row["m2_diff"] == pytest.approx(((diff - diff.mean()) ** 2).sum(), rel=1e-9, abs=1e-9)
                        assert row["den_sum"] == pytest.approx(ref["idcg"].sum(), rel=1e-9, abs=1e-9)


def test_paired_effect_and_ndcg_drop_rule_match_the_reference():
    df = random_logs(np.random.default_rng(7), n_sessions=80)
    df.loc[df["session_id"].isin(["s001", "s005", "s009"]), "click"] = 0.0
    logs = read_logs(df)
    control = df[df["arm"] == "control"]
    pbm = ref_learnt_pbm(df, floor=FLOOR, arm="control")
    for rule in ("zero", "drop"):
        m = reduce(logs, Grid(rewards=("click",), policies=("a",), clips=(8,), ndcg_rule=rule))
        for metric in ("dcg", "ndcg"):
            row = aggregate(select(m, reward="click", policy="a", metric=metric, clip=8)).iloc[0]
            eff = estimate_from_row(row, metric=metric, level=0.95, diff=True)
            ref_mean, ref_se = ref_paired_effect(control, reward="click", policy="a", discount=pbm, exposure=pbm,
                                                 clip=8, metric=metric, ndcg_rule=rule if metric == "ndcg" else "zero")
            assert eff.value == pytest.approx(ref_mean, rel=1e-9)
            assert eff.stderr == pytest.approx(ref_se, rel=1e-9)
    n_zero = int((control.groupby("session_id")["click"].sum() == 0).sum())
    assert n_zero >= 3  # the drop rule really dropped sessions in this example


def test_logging_policy_dcg_with_d_equal_d0_unclipped_is_the_observed_reward():
    df = random_logs(np.random.default_rng(3))
    logs = read_logs(df)
    for model in ("pbm", "log2", "exponential:0.6"):
        v = session_values(logs, reward="click", discount=model, exposure=model, clip=math.inf)
        observed = df.groupby("session_id")["click"].sum()
        np.testing.assert_allclose(v.set_index("session_id")["dcg__logging"].loc[observed.index], observed,
                                   rtol=1e-12, atol=1e-12)


def test_clip_one_is_raw_label_dcg():
    df = random_logs(np.random.default_rng(4))
    logs = read_logs(df)
    v = session_values(logs, reward="click", policies=["a"], discount="log2", exposure="pbm", clip=1)
    raw = df.assign(g=df["click"] / np.log2(df["rank__a"] + 1)).groupby("session_id")["g"].sum()
    np.testing.assert_allclose(v.set_index("session_id")["dcg__a"].loc[raw.index], raw, rtol=1e-12)


@settings(max_examples=8, deadline=None)
@given(seed=st.integers(0, 10_000))
def test_dcg_monotone_in_clip_and_ndcg_bounded(seed):
    df = random_logs(np.random.default_rng(seed), n_sessions=40)
    logs = read_logs(df)
    clips = (1, 2, 4, 8, 64, math.inf)
    m = reduce(logs, Grid(rewards=("click",), policies=("a", "b"), clips=clips))
    off = m.offline
    sessions = session_values(logs, reward="click", policies=["a", "b"], clip=4)
    for pol in ("logging", "a", "b"):
        dcgs = [aggregate(select(m, reward="click", policy=None if pol == "logging" else pol, metric="dcg",
                                 clip=c)).iloc[0]["sum"] for c in clips]
        assert all(x <= y + 1e-9 for x, y in itertools.pairwise(dcgs))
        nd = sessions[f"ndcg__{pol}"]
        assert nd.between(0, 1 + 1e-12).all()
    assert (off["n"] >= 0).all()


@settings(max_examples=8, deadline=None)
@given(seed=st.integers(0, 10_000))
def test_pndcg_orders_policies_like_dcg(seed):
    df = random_logs(np.random.default_rng(seed), n_sessions=50)
    logs = read_logs(df)
    m = reduce(logs, Grid(rewards=("click",), policies=("a", "b"), clips=(16,)))
    val = {}
    for metric in ("dcg", "pndcg"):
        for pol in ("a", "b"):
            row = aggregate(select(m, reward="click", policy=pol, metric=metric, clip=16)).iloc[0]
            val[metric, pol] = estimate_from_row(row, metric=metric, level=0.95).value
    assert np.sign(val["dcg", "a"] - val["dcg", "b"]) == np.sign(val["pndcg", "a"] - val["pndcg", "b"])


def test_groups_partition_the_sessions_and_online_moments_are_observed_rewards():
    df = random_logs(np.random.default_rng(11))
    logs = read_logs(df)
    m = reduce(logs, Grid(rewards=("click",), policies=("a",), clips=(math.inf,)))
    per_session = df.groupby(["day", "arm", "segment", "session_id"])["click"].sum()
    expected = per_session.groupby(["day", "arm", "segment"]).agg(n="size", sum="sum",
                                                                  m2=lambda x: float(((x - x.mean()) ** 2).sum()))
    got = m.online.set_index(["day", "arm", "segment"])[["n", "sum", "m2"]].sort_index()
    pd.testing.assert_frame_equal(got, expected.sort_index(), check_dtype=False)
    # every variant row counts exactly the sessions of its group
    dcg_rows = m.offline[m.offline["metric"] == "dcg"]
    assert dcg_rows.groupby("policy")["n"].sum().tolist() == [len(per_session)] * 2


def test_unknown_names_are_rejected_with_specific_messages():
    logs = read_logs(random_logs(np.random.default_rng(1), n_sessions=5), name="x.parquet")
    with pytest.raises(ValueError, match="unknown reward 'like'; the logs x.parquet have reward columns: click"):
        reduce(logs, Grid(rewards=("like",), policies=()))
    with pytest.raises(ValueError, match=r"unknown policy 'zzz': the logs x.parquet have no column 'rank__zzz' "
                                         r"\(policies found: a, b\)"):
        reduce(logs, Grid(rewards=("click",), policies=("zzz",)))
    with pytest.raises(ValueError, match=r"clips must be ≥ 1 \(1 = raw labels, inf = unclipped\), got 0.5"):
        Grid(rewards=("click",), policies=(), clips=(0.5,))
    with pytest.raises(ValueError, match="ndcg_rule must be one of 'zero', 'drop'; got 'skip'"):
        Grid(rewards=("click",), policies=(), ndcg_rule="skip")
    m = reduce(logs, Grid(rewards=("click",), policies=("a",), clips=(4,)))
    with pytest.raises(UnknownName, match=r"^clip 8 was not computed; available: 4$"):
        select(m, reward="click", policy="a", metric="dcg", clip=8)
    with pytest.raises(ValueError, match="metric must be one of"):
        select(m, reward="click", policy="a", metric="map", clip=4)


def test_direct_per_session_moments_equal_the_reduces_per_group():
    """engine.per_session's direct form (every session at every clip value, grouped by the logs' keys) gives the
    compiled reduce's moments per (clip number, group): counts, sums, second moments and the paired co-moment
    co_diff_den = co_den(target) − co_den(logging), for a graded and a binary reward; a dropped group key or a
    sum instead of that difference would not match."""
    from offeval_core.engine import compiled_moments, connect, source_discount, source_from_logs
    from offeval_core.engine.per_session import _moments_of, _per_session

    df = random_logs(np.random.default_rng(5), n_sessions=40)
    df["like"] = (df["click"] > 0).astype(float)
    source = source_from_logs(read_logs(df), connect(threads=1))
    disc, expo = source_discount("log2", source), source_discount("pbm", source)
    clips, order = (1, 3, math.inf), ["k", *source.keys]
    for reward, binary in (("click", False), ("like", True)):
        got = compiled_moments(source, rewards=(reward,), policies=("a", "b"), n_clips=3, binary=binary).run(
            reward=reward, discount=disc, exposure=expo, clips=clips)
        per = _per_session(source, reward=reward, policies=("a", "b"), discount=disc, exposure=expo, clips=clips,
                           keys=source.keys, binary=binary)
        want = source.backend.to_pyarrow(_moments_of(per, policies=("a", "b"), keys=source.keys)).to_pandas()
        got = got.sort_values(order).reset_index(drop=True)
        want = want.sort_values(order).reset_index(drop=True)
        assert sorted(want.columns) == sorted(got.columns) and len(want) == len(got) > 3
        pd.testing.assert_frame_equal(got, want[got.columns], check_exact=False, rtol=1e-12, atol=1e-12,
                                      check_dtype=False)
        assert (want["dcg__b__co_diff_den"] != 0).any()
        # every session with a reward is counted once per clip number, in its own group
        rewarded = df[df[reward] > 0]["session_id"].nunique()
        assert want.groupby("k")["n_r"].sum().tolist() == [rewarded] * 3 and want["g"].nunique() > 1


def test_session_kernel_over_several_discounts_and_clips():
    """session_kernel over a variant table of two discounts × two clips gives, for each variant, the per-session
    values of that variant alone (session_values at its discount and clip), each session with a reward once (a
    join of the clip numbers dropped would cross every clip with every variant; the union of the discounts'
    blocks dropped would lose the second discount)."""
    from offeval_core.discounts import parse_discount
    from offeval_core.engine import session_kernel, source_from_logs, variant_table

    logs = read_logs(random_logs(np.random.default_rng(6), n_sessions=30, policies=("a",)))
    grid = Grid(rewards=("click",), policies=("a",), discounts=("log2", "pbm"), exposures=("pbm",),
                clips=(2, math.inf))
    source, variants = source_from_logs(logs), variant_table(grid)
    per = source.backend.execute(session_kernel(
        source, reward="click", policies=("a",), discounts=[parse_discount(d, logs=logs) for d in grid.discounts],
        exposures=[parse_discount("pbm", logs=logs)], variants=variants))
    assert sorted(per["v"].unique()) == [0, 1, 2, 3]
    for row in variants.itertuples():
        got = per[per["v"] == row.v].sort_values("session")
        sv = session_values(logs, reward="click", policies=["a"], discount=row.discount, exposure=row.exposure,
                            clip=row.clip_value).set_index("session")
        assert len(got) == int((sv["idcg"] > 0).sum()) > 0
        want = sv.loc[got["session"], ["idcg", "dcg__logging", "dcg__a"]].to_numpy()
        assert got[["idcg", "dcg__logging", "dcg__a"]].to_numpy() == pytest.approx(want, rel=1e-12)
    assert not np.allclose(per[per["v"] == 0]["dcg__a"].sum(), per[per["v"] == 1]["dcg__a"].sum())


def test_rank_lookup_reads_d_at_each_rank_and_zero_outside_the_logged_ranks():
    """The Ibis lookup the importance weights join on, run by DuckDB: D(r) = 1/log2(r + 1) at ranks 1..3 and 0 at
    rank 0 and beyond the deepest logged rank (4 with max_rank 3), never an index error or a wrapped index."""
    import ibis

    from offeval_core.discounts import parse_discount
    from offeval_core.engine.lookups import rank_lookup

    t = ibis.memtable({"r": [0, 1, 2, 3, 4, -1]})
    expr = t.select(d=rank_lookup(parse_discount("log2"), t["r"], 3))
    got = ibis.duckdb.connect().execute(expr)["d"].to_numpy(float)
    np.testing.assert_allclose(got, [0.0, 1.0, 1 / math.log2(3), 0.5, 0.0, 0.0], rtol=0, atol=1e-15)


def test_pbm_from_histogram_reads_the_control_arm_and_falls_back_to_every_session():
    """The learnt pbm curve of a length histogram, by hand: S(r) = (sessions of length ≥ r) / sessions, floored.
    The control arm's counts are used as soon as it has one session (one control session of length 2: S = 1, 1,
    where all four sessions would give 1, 1/4); with no control session every session counts (3 of length 1,
    1 of length 4: 1, 1/4, 1/4, 1/4, a rank no session ends at still counted); the floor lifts what is below it."""
    from offeval_core.engine.lookups import pbm_from_histogram

    one_control = pd.DataFrame({"length": [1, 2], "n": [3, 1], "n_control": [0, 1]})
    assert pbm_from_histogram(one_control, floor=0.01).tolist() == [1.0, 1.0]
    no_control = pd.DataFrame({"length": [1, 4], "n": [3, 1], "n_control": [0, 0]})
    assert pbm_from_histogram(no_control, floor=0.01).tolist() == [1.0, 0.25, 0.25, 0.25]
    assert pbm_from_histogram(no_control, floor=0.5).tolist() == [1.0, 0.5, 0.5, 0.5]
    as_floats = no_control.astype(float)  # a histogram read with float columns: lengths are still ranks
    assert pbm_from_histogram(as_floats, floor=0.01).tolist() == [1.0, 0.25, 0.25, 0.25]


def _hand_logs():
    """Four control sessions of lengths 1, 2, 2, 3 and one treatment session of length 5: the control arm's
    learnt pbm is S = 1, 3/4, 1/4 (then the floor), the treatment session left out."""
    rows = [{"session_id": f"s{s}", "rank": r, "click": float(r == 1), "day": 0, "arm": arm, "segment": "g",
             "rank__a": r}
            for s, (length, arm) in enumerate([(1, "control"), (2, "control"), (2, "control"), (3, "control"),
                                               (5, "treatment")])
            for r in range(1, length + 1)]
    return read_logs(pd.DataFrame(rows))


def test_source_discount_learns_pbm_from_the_logs_or_the_length_histogram_at_the_floor_asked():
    """source_discount's learnt pbm, by hand, from in-memory logs (cached per spec and floor) and from the length
    histogram of the cached source (no logs): 1, 3/4, 1/4 and the floor beyond rank 3, with the floor's own
    value as the model's parameter (1e-4 without one); a cut-off zeroes the ranks past it; other specs need
    neither logs nor a histogram, and pbm without either is refused."""
    from offeval_core.discounts import PBM_FLOOR, SpecError
    from offeval_core.engine import connect, source_discount, source_from_logs
    from offeval_core.engine.sources import Source, logs_source

    logs = _hand_logs()
    with_logs, with_lengths = source_from_logs(logs), logs_source(logs)
    assert with_logs.logs is logs and with_lengths.logs is None and with_lengths.lengths is not None
    for source in (with_logs, with_lengths):
        floored = source_discount("pbm", source, floor=0.2)
        assert floored.param == 0.2 and floored.table(5).tolist() == [1.0, 0.75, 0.25, 0.2, 0.2]
        default = source_discount("pbm", source)
        assert default.param == PBM_FLOOR and default.table(5).tolist() == [1.0, 0.75, 0.25, PBM_FLOOR, PBM_FLOOR]
        cut = source_discount("pbm@2", source, floor=0.2)
        assert cut.table(4).tolist() == [1.0, 0.75, 0.0, 0.0] and cut.label != floored.label
        assert source_discount("log2@2", source, floor=0.2).table(3).tolist() == [1.0, 1 / math.log2(3), 0.0]
    assert source_discount("pbm", with_logs, floor=0.2) is source_discount("pbm", with_logs, floor=0.2)
    bare = Source(rows=with_logs.rows, sessions=with_logs.sessions, backend=connect(threads=1), max_rank=5)
    assert source_discount("reciprocal", bare, floor=0.2).table(3).tolist() == [1.0, 0.5, 1 / 3]
    with pytest.raises(SpecError, match="discount 'pbm' is learnt from the logs, so logs must be given"):
        source_discount("pbm", bare)
    # a floor below the default reaches the histogram's curve: 1 of 20,001 sessions reaches rank 2
    deep = Source(rows=with_logs.rows, sessions=with_logs.sessions, backend=bare.backend, max_rank=3,
                  lengths=pd.DataFrame({"length": [1, 2], "n": [20_000, 1], "n_control": [20_000, 1]}))
    assert source_discount("pbm", deep, floor=1e-6).table(3).tolist() == [1.0, 1 / 20_001, 1e-6]


def test_variant_table_and_rank_table_by_hand():
    """The variant ids: discounts outermost, then exposures, then clips, numbered from 0, m = ∞ as INF_CLIP in
    ``clip`` and as ∞ in ``clip_value``; the rank table: r = 1..max_rank, w = 1 / D0(r) (∞ past D0's cut-off)
    and d = D(r), with no warning for the division by D0 = 0."""
    from offeval_core.discounts import parse_discount
    from offeval_core.engine import rank_table, variant_table
    from offeval_core.engine.grid import INF_CLIP

    grid = Grid(rewards=("click",), policies=("a",), discounts=("log2", "reciprocal"), exposures=("log2", "pbm"),
                clips=(2, math.inf))
    v = variant_table(grid)
    assert list(v.columns) == ["v", "dm", "em", "clip", "discount", "exposure", "clip_value"]
    assert v["v"].tolist() == list(range(8)) and v["dm"].tolist() == [0] * 4 + [1] * 4
    assert v["em"].tolist() == [0, 0, 1, 1] * 2 and v["clip"].tolist() == [2.0, INF_CLIP] * 4
    assert v["clip_value"].tolist() == [2.0, math.inf] * 4
    assert v["discount"].tolist() == ["log2"] * 4 + ["reciprocal"] * 4
    assert v["exposure"].tolist() == ["log2", "log2", "pbm", "pbm"] * 2
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # D0 = 0 past the cut-off gives w = ∞ without a division warning
        t = rank_table(parse_discount("reciprocal"), parse_discount("exponential:0.5@2"), 3)
    assert list(t.columns) == ["r", "w", "d"] and t["r"].dtype == np.int64 and t["r"].tolist() == [1, 2, 3]
    assert t["w"].tolist() == [1.0, 2.0, math.inf] and t["d"].tolist() == [1.0, 0.5, 1 / 3]


def test_ndcg_of_backend_columns_by_hand():
    """ndcg_of on Ibis columns is an expression: DCG / iDCG where iDCG > 0 and ``empty`` where iDCG = 0 (0 by
    default, NaN for held-out users); a backend column against a plain number is an expression too. By hand:
    (1, 0.5, 0) over (2, 0, 0) is (0.5, 0, 0), or (0.5, NaN, NaN) with empty = NaN; (1, 0.5, 0) over 4 is (0.25, 0.125, 0)."""
    import ibis

    from offeval_core.engine import connect
    from offeval_core.engine.grid import ndcg_of

    con = connect(threads=1)
    t = ibis.memtable(pd.DataFrame({"i": [0, 1, 2], "d": [1.0, 0.5, 0.0], "idcg": [2.0, 0.0, 0.0]}))
    out = con.execute(t.select("i", z=ndcg_of(t.d, t.idcg), e=ndcg_of(t.d, t.idcg, empty=math.nan)).order_by("i"))
    assert out["z"].tolist() == [0.5, 0.0, 0.0]
    assert out["e"].iloc[0] == 0.5 and out["e"].iloc[1:].isna().all()
    mixed = con.execute(t.select("i", x=ndcg_of(t.d, 4.0)).order_by("i"))
    assert mixed["x"].tolist() == [0.25, 0.125, 0.0]


def test_ndcg_of_arrays_where_idcg_is_zero_by_hand():
    """ndcg_of on arrays: DCG / iDCG, and ``empty`` wherever iDCG = 0 (never a left-over value). By hand: (0.5, 0, 0)
    over (2, 0, 1) is (0.25, 0, 0), or (0.25, NaN, 0) with empty = NaN; a row against a column broadcasts; 10 000
    sessions without a label are all ``empty``."""
    from offeval_core.engine.grid import ndcg_of

    assert ndcg_of(np.array([0.5, 0.0, 0.0]), np.array([2.0, 0.0, 1.0])).tolist() == [0.25, 0.0, 0.0]
    got = ndcg_of([0.5, 0.0, 0.0], [2, 0, 1], empty=math.nan)
    assert got[0] == 0.25 and math.isnan(got[1]) and got[2] == 0.0
    np.testing.assert_array_equal(ndcg_of(np.array([[1.0, 3.0]]), np.array([[2.0], [0.0]]), empty=math.nan),
                                  [[0.5, 1.5], [math.nan, math.nan]])
    assert np.isnan(ndcg_of(np.ones(10_000), np.zeros(10_000), empty=math.nan)).all()
    assert not ndcg_of(np.ones(10_000), np.zeros(10_000)).any()


def test_grid_normalises_its_clips_and_needs_a_reward_a_discount_and_an_exposure():
    """Grid keeps its clip values sorted, once each, as a tuple (a list of 16, 1, ∞, 16, 4 is (1, 4, 16, ∞)); no
    reward, no discount model or no exposure model is refused, each on its own."""
    from offeval_core.errors import InputError

    grid = Grid(rewards=("click",), policies=(), clips=[16, 1, math.inf, 16, 4])
    assert grid.clips == (1, 4, 16, math.inf) and isinstance(grid.clips, tuple)
    with pytest.raises(InputError, match="^rewards must name at least one reward column, got none$"):
        Grid(rewards=(), policies=())
    for kw in ({"discounts": ()}, {"exposures": ()}):
        with pytest.raises(InputError, match="^discounts and exposures must each list at least one discount model$"):
            Grid(rewards=("click",), policies=(), **kw)


def test_reduce_stores_and_reads_its_moments_cache_only_for_its_own_connection(tmp_path):
    """In-memory logs without a backend are looked up in the given moments cache under logs_key(logs, grid): the
    first reduce stores its moments there, the second reads them back (the same frames). With a backend of the
    caller's own, or with cache=None, the cache is neither read nor written."""
    from offeval_core.engine import connect
    from offeval_core.moments_cache import MomentsCache, logs_key

    logs = read_logs(random_logs(np.random.default_rng(5), n_sessions=12))
    grid = Grid(rewards=("click",), policies=("a",), discounts=("log2",), exposures=("log2",), clips=(2, math.inf))
    for kw in ({"backend": connect(threads=1)}, {"cache": None}):
        store = MomentsCache(tmp_path / "unused")
        reduce(logs, grid, **({"cache": store} | kw))
        assert not (tmp_path / "unused").exists() or not any((tmp_path / "unused").iterdir())
    store = MomentsCache(tmp_path / "cache")
    first = reduce(logs, grid, cache=store)
    entry = store.path(logs_key(logs, grid))
    assert entry.exists() and [p.name for p in (tmp_path / "cache").iterdir()] == [entry.name]
    again = reduce(logs, grid, cache=store)
    pd.testing.assert_frame_equal(again.offline, first.offline)
    pd.testing.assert_frame_equal(again.online, first.online)
    # what is read is the stored entry: an entry with every online sum + 1 under the key comes back as stored
    import dataclasses

    store.put(logs_key(logs, grid), dataclasses.replace(first, online=first.online.assign(sum=first.online["sum"] + 1)))
    hit = reduce(logs, grid, cache=store)
    assert hit.online["sum"].tolist() == (first.online["sum"] + 1).tolist() and hit.grid == grid


def test_reduce_cache_key_and_entry_carry_the_pbm_floor_and_the_logs_source(tmp_path):
    """A reduce with a PBM floor is stored under the key of that floor, and what is stored and read back is the
    reduce at that floor (here the floor 0.5 binds: its moments differ from the default floor's); the moments read
    from the cache name the caller's logs (a copy of the same logs under another name shares the entry)."""
    from offeval_core.moments_cache import MomentsCache, logs_key

    logs = read_logs(random_logs(np.random.default_rng(6), n_sessions=12))
    grid = Grid(rewards=("click",), policies=("a",), clips=(math.inf,))
    store = MomentsCache(tmp_path / "cache")
    stored = reduce(logs, grid, pbm_floor=0.5, cache=store)
    assert [p.name for p in (tmp_path / "cache").iterdir()] == [store.path(logs_key(logs, grid, pbm_floor=0.5)).name]
    plain = reduce(logs, grid, pbm_floor=0.5, cache=None)
    default = reduce(logs, grid, cache=None)
    pd.testing.assert_frame_equal(stored.offline, plain.offline)
    assert not np.allclose(plain.offline["sum"], default.offline["sum"])
    hit = reduce(logs, grid, pbm_floor=0.5, cache=store)
    pd.testing.assert_frame_equal(hit.offline, plain.offline)
    assert hit.source == plain.source == logs.source == "<DataFrame>"
    # a copy of the same logs under another name finds the same entry, and the moments name the copy
    copy = read_logs(random_logs(np.random.default_rng(6), n_sessions=12), name="copy.csv")
    shared = reduce(copy, grid, pbm_floor=0.5, cache=store)
    assert len(list((tmp_path / "cache").iterdir())) == 1 and shared.source == "copy.csv"
    pd.testing.assert_frame_equal(shared.offline, plain.offline)


def test_the_rank_table_gives_inf_without_a_warning_where_one_over_d0_overflows_or_divides_by_zero():
    """w = 1 / D0(r) is inf where D0 = 0 (a division by zero) and where D0 is so small that 1 / D0 leaves double
    precision (an overflow: 1 / 1e-310), silently: a finite clip caps it, and the reduce refuses m = ∞ there."""
    from offeval_core.discounts import parse_discount
    from offeval_core.engine.lookups import rank_table

    class Exposure:  # D0 = 1, 1e-310 (subnormal), 0
        def table(self, n):
            return np.array([1.0, 1e-310, 0.0])[:n]

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        table = rank_table(parse_discount("log2"), Exposure(), 3)
    assert table["r"].tolist() == [1, 2, 3]
    assert table["w"].tolist() == [1.0, math.inf, math.inf]
    assert table["d"].tolist() == pytest.approx([1.0, 1 / math.log2(3), 0.5])
