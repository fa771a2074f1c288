"""Compile once, run many: the reused compiled reduce query gives exactly the moments of a fresh build.

Both sides run on single-threaded DuckDB connections, so sums are taken in the same order and the
comparison is exact (no tolerance)."""

import math
import warnings

import numpy as np
import pandas as pd
import pytest
from test_engine import random_logs

from offeval_core.discounts import DiscountModel, learn_pbm, parse_discount
from offeval_core.engine import (
    Grid,
    compiled_moments,
    connect,
    fresh_moments,
    logs_source,
    reduce,
    source_discount,
    source_from_logs,
)
from offeval_core.logs import read_logs

COMBOS = [  # (reward, D, D0, clips): binary, graded and real-valued rewards, learnt and parametric curves
    ("click", "pbm", "pbm", (1, 3, 16, math.inf)),
    ("click", "log2", "exponential:0.7", (1, 3, 16, math.inf)),
    ("like", "reciprocal@5", "pbm", (2, 4, 8, 1024)),
    ("click", "exponential:0.9@4", "log2", (1, 2, 64, math.inf)),
    ("like", "pbm", "log2", (1, 3, 16, math.inf)),
    ("watch", "log2", "pbm", (1, 3, 16, math.inf)),
    ("watch", "pbm", "exponential:0.6", (1.5, 2, 4, 8)),
]
BINARY = {"like": True, "click": False, "watch": False}


@pytest.fixture(scope="module")
def logs():
    # policy "b" leaves 30 % of the logged items unshown (no rank: discount 0); "a" shows every item
    df = random_logs(np.random.default_rng(3), n_sessions=90, graded=True, unshown=0.3)
    df["rank__a"] = df.groupby("session_id")["rank"].rank(method="first", ascending=False).astype(int)
    df["like"] = (df["click"] > 0).astype(float)  # a binary reward next to the graded one
    rng = np.random.default_rng(4)
    df["watch"] = df["like"] * rng.exponential(30.0, len(df))  # a real-valued reward (watch seconds)
    return read_logs(df)



def _compiled_equals_fresh(source, reward, policies, disc, expo, clips, binary):
    """Run the compiled query of (reward, D, D0, clips) and check it against a fresh build of the same moments;
    the compiled SQL text is the one that ran (the combination entered as data). Returns the fresh moments."""
    query = compiled_moments(source, rewards=(reward,), policies=policies, n_clips=len(clips), binary=binary)
    sql = query.sql
    got = query.run(reward=reward, discount=disc, exposure=expo, clips=clips)
    assert query.sql is sql
    want = fresh_moments(source, reward=reward, policies=policies, discount=disc, exposure=expo, clips=clips,
                         keys=source.keys, binary=binary)
    order = ["k", *source.keys]
    got = got.sort_values(order).reset_index(drop=True)
    want = want.sort_values(order).reset_index(drop=True)[got.columns]
    # the two read the rewarded rows in a different order, so sums may differ in the last bits
    pd.testing.assert_frame_equal(got, want, check_exact=False, rtol=1e-12, atol=1e-12, check_dtype=False)
    return want

def test_reused_query_gives_the_moments_of_a_fresh_build(logs):
    shared = source_from_logs(logs, connect(threads=1))
    for reward, d, d0, clips in COMBOS:
        grid = Grid(rewards=(reward,), policies=("a", "b"), discounts=(d,), exposures=(d0,), clips=clips)
        reused = reduce(shared, grid)
        fresh = reduce(source_from_logs(logs, connect(threads=1)), grid)
        pd.testing.assert_frame_equal(reused.offline, fresh.offline, check_exact=True)
        pd.testing.assert_frame_equal(reused.online, fresh.online, check_exact=True)
        assert reused.discount_labels == fresh.discount_labels
    # one compiled query per shape (binary / graded reward), run once per combination
    binary = compiled_moments(shared, rewards=("like",), policies=("a", "b"), n_clips=4, binary=True)
    graded = compiled_moments(shared, rewards=("click",), policies=("a", "b"), n_clips=4, binary=False)
    assert (binary.runs, graded.runs) == (2, 5)


def test_compiled_query_equals_the_expression_with_literal_clips(logs):
    source = source_from_logs(logs, connect(threads=1))
    for reward, d, d0, clips in COMBOS:  # the same definition: parameter tables vs literals in a fresh build
        binary = BINARY[reward]
        disc, expo = source_discount(d, source), source_discount(d0, source)
        _compiled_equals_fresh(source, reward, ("b",), disc, expo, clips, binary)


def test_query_takes_exactly_its_number_of_clip_values(logs):
    source = source_from_logs(logs, connect(threads=1))
    query = compiled_moments(source, rewards=("click",), policies=("a",), n_clips=2, binary=False)
    with pytest.raises(ValueError, match="this query takes 2 clip values, got 3"):
        query.run(reward="click", discount=parse_discount("log2"), exposure=parse_discount("log2"),
                  clips=(1, 2, 3))


def test_in_memory_logs_keep_one_source(logs):
    assert logs_source(logs) is logs_source(logs)
    grid = Grid(rewards=("like",), policies=("a",), clips=(1, math.inf))
    a = reduce(logs, grid)
    b = reduce(logs, Grid(rewards=("like",), policies=("a",), discounts=("log2",), clips=(2, 8)))
    assert set(a.offline["clip"]) == {1.0, math.inf} and set(b.offline["clip"]) == {2.0, 8.0}
    assert set(b.offline["discount"]) == {"log2"}


def test_learnt_model_from_a_curve_matches_the_one_learnt_from_logs(logs):
    from_logs = parse_discount("pbm@6", logs=logs, floor=0.05)
    from_histogram = source_discount("pbm@6", logs_source(logs), floor=0.05)  # the cached source has no logs
    assert logs_source(logs).logs is None
    assert from_histogram == from_logs
    assert from_logs == DiscountModel.learnt(learn_pbm(logs, floor=0.05), floor=0.05, cutoff=6)
    curve = DiscountModel.learnt([1.0, 0.5, 0.01], floor=0.1)
    assert curve.values == (1.0, 0.5, 0.1) and curve(np.array([4]))[0] == 0.1 and curve.spec == "pbm"
    with pytest.raises(ValueError, match="probabilities in"):
        DiscountModel.learnt([1.0, 1.5])


def test_prepare_compiles_every_shape_a_dashboard_reduce_needs(logs):
    from offeval_core.engine import prepare
    from offeval_core.engine.kernel import _state

    source = prepare(source_from_logs(logs, connect(threads=1)))
    plans = dict(_state(source)["plans"])
    assert sorted(key[3] for key in plans) == [False, True]  # a graded (click) and a binary (like) reward
    # each query names its shape: the source's rewards, every policy, the 14 default clip values, binary or not
    assert {(p.rewards, p.policies, p.n_clips, p.binary) for p in plans.values()} == {
        (("click", "like", "watch"), ("a", "b"), 14, False), (("click", "like", "watch"), ("a", "b"), 14, True)}
    for reward, d, d0, _ in COMBOS:
        reduce(source, Grid(rewards=(reward,), policies=("a", "b"), discounts=(d,), exposures=(d0,)))
    assert _state(source)["plans"] == plans  # nothing compiled after prepare
    assert sum(p.runs for p in plans.values()) == len(COMBOS)


def _direct(source, *, reward, policies, discount, exposure, clips, binary):
    """The moments of the plain per-(session, clip value) values, every session × clip value computed."""
    from offeval_core.engine.per_session import _moments_of, _per_session

    per = _per_session(source, reward=reward, policies=policies, discount=discount, exposure=exposure,
                       clips=clips, keys=source.keys, binary=binary)
    return source.backend.to_pyarrow(_moments_of(per, policies=policies, keys=source.keys)).to_pandas()


@pytest.mark.parametrize("clip_order", [None, (2, 0, 3, 1)])
def test_reused_query_gives_the_moments_of_every_session_and_clip_value(logs, clip_order):
    """Sessions whose largest 1/D0 is below a clip value take their unclipped values there; the reused query
    computes those once and only the binding (session, clip value) pairs per clip value. It gives the moments
    of computing every session at every clip value, for every combination, also with the clip values given
    out of order."""
    source = source_from_logs(logs, connect(threads=1))
    checked = 0
    for reward, d, d0, clips in COMBOS:
        if clip_order is not None:
            clips = tuple(clips[i] for i in clip_order)
        disc, expo = source_discount(d, source), source_discount(d0, source)
        query = compiled_moments(source, rewards=(reward,), policies=("a", "b"), n_clips=len(clips),
                                 binary=BINARY[reward])
        with warnings.catch_warnings():
            warnings.simplefilter("error", RuntimeWarning)  # the binding rows' b is never NULL: no cast warning
            got = query.run(reward=reward, discount=disc, exposure=expo, clips=clips)
        want = _direct(source, reward=reward, policies=("a", "b"), discount=disc, exposure=expo, clips=clips,
                       binary=BINARY[reward])
        order = ["k", *source.keys]
        got = got.sort_values(order).reset_index(drop=True)
        want = want.sort_values(order).reset_index(drop=True)[got.columns]
        assert len(got) == len(want) > 0
        pd.testing.assert_frame_equal(got, want, check_exact=False, rtol=1e-12, atol=1e-12, check_dtype=False)
        checked += int((got["dcg__b__sum_diff"] != 0).sum())
    assert checked > 0  # the policies differ, so the paired differences were really compared


def test_concurrent_reduces_of_one_source_match_sequential_ones(logs):
    """The dashboard reduces from several threads: runs on one source are serialised, results unchanged."""
    from concurrent.futures import ThreadPoolExecutor

    source = source_from_logs(logs, connect(threads=1))
    grids = [Grid(rewards=(r,), policies=("a", "b"), discounts=(d,), exposures=(d0,), clips=clips)
             for r, d, d0, clips in COMBOS]
    with ThreadPoolExecutor(max_workers=3) as pool:
        parallel = list(pool.map(lambda g: reduce(source, g), grids))
    for grid, got in zip(grids, parallel, strict=True):
        want = reduce(source_from_logs(logs, connect(threads=1)), grid)
        pd.testing.assert_frame_equal(got.offline, want.offline, check_exact=True)


def test_small_tables_and_compiled_sql_go_through_each_backends_own_calls():
    """_put and _run_sql by backend kind, with recording stand-ins: DuckDB registers an Arrow table and reads Arrow,
    Spark makes a temporary view of a Spark frame and reads toPandas, any other backend creates (overwriting) a
    temporary table and reads to_pandas; a backend without a name is the other kind."""
    from offeval_core.engine.kernel import _put, _run_sql

    frame, calls = pd.DataFrame({"r": [1, 2], "w": [1.0, 2.0]}), []
    result = pd.DataFrame({"x": [7]})

    class Spark:
        name = "pyspark"

        class _session:  # the attribute of pyspark's backend
            @staticmethod
            def createDataFrame(f):
                return type("View", (), {"createOrReplaceTempView": lambda self, n: calls.append(("view", n, f))})()

            @staticmethod
            def sql(s):
                calls.append(("spark sql", s))
                return type("Out", (), {"toPandas": lambda self: result})()

    class Other:
        def create_table(self, name, f, *, overwrite, temp):
            calls.append(("table", name, f, overwrite, temp))

        def sql(self, s):
            calls.append(("sql", s))
            return type("Out", (), {"to_pandas": lambda self: result})()

    _put(Spark(), "t1", frame)
    assert _run_sql(Spark(), "SELECT 1") is result
    _put(Other(), "t2", frame)
    assert _run_sql(Other(), "SELECT 2") is result
    assert [c[:2] for c in calls] == [("view", "t1"), ("spark sql", "SELECT 1"), ("table", "t2"), ("sql", "SELECT 2")]
    assert calls[0][2] is frame and calls[2][2] is frame and calls[2][3:] == (True, True)
    duck = connect(threads=1)
    _put(duck, "offeval_test_put", frame)
    got = _run_sql(duck, "SELECT r, w FROM offeval_test_put ORDER BY r")
    pd.testing.assert_frame_equal(got, frame)


def test_rewards_with_different_rewarded_rows_binary_flags_and_the_fresh_build():
    """Rows rewarded in one reward and not in another (the source holds the rows with any positive reward): a
    binary reward stays binary though some of its rows are 0 (only its positive values count: 1), a graded one
    is not (values 1, 2, 3, or 1/2 and 1), a reward never positive counts as binary; the fresh build of one reward reads only its own rewarded
    rows, so its counts (n_r: one row per session with that reward) equal the compiled query's."""
    from offeval_core.engine.kernel import binary_rewards

    df = random_logs(np.random.default_rng(8), n_sessions=40, graded=True)
    df["like"] = (np.random.default_rng(9).random(len(df)) < 0.3).astype(float)  # its own rewarded rows
    df["never"] = 0.0
    df["half"] = df["like"] * np.where(df["rank"] % 2 == 1, 1.0, 0.5)  # graded: 1/2 and 1, none above 1
    source = source_from_logs(read_logs(df, rewards=["click", "like", "never", "half"]), connect(threads=1))
    assert binary_rewards(source, ["like", "click", "never", "half"]) == {"like": True, "click": False,
                                                                         "never": True, "half": False}
    disc, expo, clips = parse_discount("log2"), parse_discount("pbm", logs=read_logs(df)), (1, 4, math.inf)
    for reward, binary in (("like", True), ("click", False)):
        want = _compiled_equals_fresh(source, reward, ("a",), disc, expo, clips, binary)
        rewarded = df[df[reward] > 0]["session_id"].nunique()
        assert want.groupby("k")["n_r"].sum().tolist() == [rewarded] * 3


def test_empty_aggregates_become_zero_and_an_overflow_stays():
    """empty_as_zero by hand: an aggregate over no row (NaN) becomes 0 where its own count is 0 (n_r for the
    iDCG sums, n_pos for the sums over iDCG > 0); a NaN beside a positive count (an overflow) stays; the input is
    not changed, and an input without NaN is returned as it is."""
    from offeval_core.engine.kernel import empty_as_zero, wide_layout

    layout = wide_layout(("n_r", "n_pos", "den_sum", "den_m2", "pden_sum", "pden_m2"), ())
    nan = math.nan
    values = np.array([[0, 0, nan, nan, nan, nan], [2, 0, 3.0, nan, nan, nan], [2, 1, 3.0, 0.5, 3.0, nan]])
    got = empty_as_zero(values, layout)
    np.testing.assert_array_equal(got, [[0, 0, 0, 0, 0, 0], [2, 0, 3.0, nan, 0, 0], [2, 1, 3.0, 0.5, 3.0, nan]])
    assert np.isnan(values[0, 2:]).all()
    finite = np.ones((2, 6))
    assert empty_as_zero(finite, layout) is finite


def test_sessions_whose_ideal_dcg_is_zero_give_zero_moments_over_none():
    """A discount with D(1) = 0 (a table (0, 1)) makes every session's iDCG 0, so the aggregates over the sessions
    with iDCG > 0 are over no row (NULL from the backend) and become 0 (n_pos = 0, pden_m2 = 0), while the DCG of a
    policy that puts the rewarded item at rank 2 is not 0. By hand, D0 = log2 (w = 1 at rank 1), clips 1 and ∞:
    s1 rewards its rank-1 item (c = 1), which policy a ranks 2nd: DCG_logging = 1 · 1 · D(1) = 0, DCG_a = 1 · D(2)
    = 1; s2 rewards its rank-1 item (c = 2), ranked 1st by a: both 0. iDCG = c · D(1) = 0 in both, so nDCG = 0.
    DCG_a = (1, 0): sum 1, Σ(x − ½)² = ½; the difference a − logging is the same (1, 0)."""
    df = pd.DataFrame({"session_id": ["s1", "s1", "s2"], "rank": [1, 2, 1], "click": [1.0, 0.0, 2.0],
                       "rank__a": [2, 1, 1]})
    source = source_from_logs(read_logs(df), connect(threads=1))
    d_one_zero = DiscountModel("table", values=(0.0, 1.0), source="zero-first.csv")
    got = fresh_moments(source, reward="click", policies=("a",), discount=d_one_zero,
                        exposure=parse_discount("log2"), clips=(1, math.inf), keys=source.keys, binary=False)
    assert got["k"].tolist() == [0, 1]
    # the frame: clip number, group key, the query's aggregates, then the paired co-moments computed from them
    moments = [f"{m}__{p}__{s}" for m in ("dcg", "ndcg") for p, stats in (
        ("logging", ("sum", "m2", "co_den")), ("a", ("sum", "m2", "co_den", "sum_diff", "m2_diff"))) for s in stats]
    assert got.columns.tolist() == ["k", "g", "n_r", "n_pos", "den_sum", "den_m2", "pden_sum", "pden_m2", *moments,
                                    "dcg__a__co_diff_den", "ndcg__a__co_diff_den"]
    assert got["k"].dtype == got["n_r"].dtype == got["n_pos"].dtype == np.int64  # counts stay integers
    for _, row in got.iterrows():
        assert (row["n_r"], row["n_pos"], row["den_sum"], row["den_m2"], row["pden_sum"], row["pden_m2"]) == (
            2, 0, 0.0, 0.0, 0.0, 0.0)
        assert (row["dcg__logging__sum"], row["dcg__logging__m2"]) == (0.0, 0.0)
        assert (row["dcg__a__sum"], row["dcg__a__m2"], row["dcg__a__sum_diff"], row["dcg__a__m2_diff"]) == (
            1.0, 0.5, 1.0, 0.5)
        assert (row["ndcg__a__sum"], row["ndcg__a__m2"], row["ndcg__logging__sum"]) == (0.0, 0.0, 0.0)
        assert (row["dcg__a__co_den"], row["dcg__a__co_diff_den"]) == (0.0, 0.0)


def test_the_long_table_of_more_than_128_rewards_keeps_every_reward_index():
    """The long table of rewarded rows stacks one part per reward with the reward's index q, an int64 in every
    part: with 129 rewards q reaches 128, past the int8 a bare literal of 0..127 takes, and the parts of a union
    must share one type. By hand: 128 parts of ``click`` (rewarded at s0's rank 2, c = 3, and s1's rank 1, c = 1)
    and a 129th of ``like`` (rewarded at s0's rank 1 only, c = 1): 257 rows, q = 128 holding ``like``'s one row.
    (The index a reward has in a source of 129 reward columns; the same name repeated keeps the table narrow.)"""
    from offeval_core.engine.kernel import _long_rewarded

    df = pd.DataFrame({"session_id": ["s0", "s0", "s1"], "rank": [1, 2, 1], "rank__a": [2, 1, 1],
                       "click": [0.0, 3.0, 1.0], "like": [1.0, 0.0, 0.0]})
    source = source_from_logs(read_logs(df, rewards=["click", "like"]), connect(threads=1))
    long = source.backend.execute(_long_rewarded(source, ("click",) * 128 + ("like",)))
    assert long["q"].dtype == np.int64 and len(long) == 257
    long = long.sort_values(["q", "rank", "c"]).reset_index(drop=True)
    assert long["q"].tolist() == [q for q in range(128) for _ in range(2)] + [128]
    assert long["c"].tolist() == [1.0, 3.0] * 128 + [1.0]
    assert long["rank"].tolist() == [1, 2] * 128 + [1] and long["rank__a"].tolist() == [1, 1] * 128 + [2]


def test_compiled_queries_on_one_backend_own_their_parameter_tables(logs):
    """Every compiled query has parameter, rank and clip tables of its own names: sources may share a backend (one
    DuckDB connection passed to both; connect_spark's session is the process's one), and each source's lock only
    serialises its own runs, so two queries writing one table name could run on each other's tables. Two sources
    of one connection, two queries each (a binary and a graded reward): 12 table names, all different, and each
    query still gives the moments of its own logs after the other source's query ran."""
    con = connect(threads=1)
    other = read_logs(random_logs(np.random.default_rng(12), n_sessions=20, graded=True))
    sources = [source_from_logs(logs, con), source_from_logs(other, con)]
    queries = [compiled_moments(s, rewards=("click",), policies=("a",), n_clips=2, binary=b)
               for s in sources for b in (False, True)]
    names = [n for q in queries for n in (q._par, q._lut, q._clip)]
    assert len(set(names)) == len(names) == 12
    disc, clips = parse_discount("log2"), (2, math.inf)
    first = queries[0].run(reward="click", discount=disc, exposure=disc, clips=clips)
    queries[2].run(reward="click", discount=disc, exposure=disc, clips=clips)
    again = queries[0].run(reward="click", discount=disc, exposure=disc, clips=clips)
    pd.testing.assert_frame_equal(again, first, check_exact=True)


def test_the_second_moment_of_ideal_dcg_over_the_sessions_where_it_is_positive():
    """pden_m2 is iDCG's centred second moment over the sessions with iDCG > 0 only (the drop rule's sessions), next
    to den_m2 over every rewarded session. D = (0, 1, 1) (a table) and D0 = 1 at every rank (w = 1, no clip
    binds): s1 rewards one item (c = 1), so iDCG = 1 · D(1) = 0; s2 two (1, 1): iDCG = 0 + 1 = 1; s3 two (2, 2):
    iDCG = 2. Over all three: n_r = 3, Σ = 3, Σ(x − 1)² = 2; over the two with iDCG > 0: n_pos = 2, Σ = 3,
    Σ(x − 3/2)² = 1/2 (the variance of all three times n_pos would be 4/3, that of the two times n_r 3/4)."""
    df = pd.DataFrame({"session_id": ["s1", "s2", "s2", "s3", "s3"], "rank": [1, 1, 2, 1, 2],
                       "click": [1.0, 1.0, 1.0, 2.0, 2.0]})
    source = source_from_logs(read_logs(df), connect(threads=1))
    d = DiscountModel("table", values=(0.0, 1.0, 1.0), source="zero-first.csv")
    flat = DiscountModel("table", values=(1.0, 1.0, 1.0), source="flat.csv")
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)  # the unclipped rows are never NULL-numbered: no cast warning
        got = fresh_moments(source, reward="click", policies=(), discount=d, exposure=flat, clips=(1, math.inf),
                            keys=source.keys, binary=False)
    assert got["k"].tolist() == [0, 1]
    for _, row in got.iterrows():
        assert (row["n_r"], row["den_sum"], row["den_m2"]) == (3, 3.0, 2.0)
        assert (row["n_pos"], row["pden_sum"], row["pden_m2"]) == (2, 3.0, 0.5)
        assert (row["ndcg__logging__sum"], row["ndcg__logging__m2"]) == (2.0, pytest.approx(2 / 3, rel=1e-12))
