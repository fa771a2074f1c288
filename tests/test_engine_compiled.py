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


def test_duckdbs_sorted_label_lists_give_the_idcg_of_the_window_ranks(logs):
    """On DuckDB a graded reward's iDCG per (session, binding clip value) is its labels collected into one sorted
    list, dot D(1..n); on a connection with a memory limit (a list cannot spill to disk) and on other backends
    (the Spark and PostgreSQL tests compare that route with DuckDB's) a window ranks them. Both give the same
    moments, with the ties of equal grades capped at the same clip value (at m = 1 every label is its grade)."""
    lists = source_from_logs(logs, connect(threads=1))
    window = source_from_logs(logs, connect(threads=1, memory_limit="1GB"))
    for reward, d, d0, clips in COMBOS:
        if BINARY[reward]:
            continue
        got, want = (compiled_moments(src, rewards=(reward,), policies=("a", "b"), n_clips=len(clips), binary=False)
                     for src in (lists, window))
        sql, window_sql = got.sql.upper(), want.sql.upper()
        assert "LIST_DOT_PRODUCT" in sql and "LIST_DOT_PRODUCT" not in window_sql
        assert window_sql.count("ROW_NUMBER") == sql.count("ROW_NUMBER") + 1  # (one more: the labels' ranks)
        args = {"reward": reward, "clips": clips}
        g = got.run(discount=source_discount(d, lists), exposure=source_discount(d0, lists), **args)
        w = want.run(discount=source_discount(d, window), exposure=source_discount(d0, window), **args)
        assert len(g) == len(w) > 0
        pd.testing.assert_frame_equal(g, w, check_exact=False, rtol=1e-12, atol=1e-12)


def test_only_a_duckdb_connection_without_a_memory_limit_of_its_own_sorts_lists():
    from offeval_core.engine.dialects import sorts_lists

    assert sorts_lists(connect()) and sorts_lists(connect(threads=1))
    assert not sorts_lists(connect(memory_limit="2GB")) and not sorts_lists(connect(memory_limit="100MB"))


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
    # both reduces run the one compiled query of their shape on that source (a new source would compile anew)
    query = compiled_moments(logs_source(logs), rewards=("like",), policies=("a",), n_clips=2, binary=True)
    runs = query.runs
    grid = Grid(rewards=("like",), policies=("a",), clips=(1, math.inf))
    a = reduce(logs, grid, cache=None)
    b = reduce(logs, Grid(rewards=("like",), policies=("a",), discounts=("log2",), clips=(2, 8)), cache=None)
    assert query.runs == runs + 2
    assert set(a.offline["clip"]) == {1.0, math.inf} and set(b.offline["clip"]) == {2.0, 8.0}
    assert set(b.offline["discount"]) == {"log2"}


def test_a_reduce_of_in_memory_logs_on_a_given_backend_runs_on_it(logs):
    def ours(backend):  # the parameter tables of the compiled queries registered on a connection
        return backend.con.sql("select count(*) from duckdb_views() where view_name like 'offeval_par_%'").fetchall()

    grid = Grid(rewards=("like",), policies=("a",), clips=(1, math.inf))
    query = compiled_moments(logs_source(logs), rewards=("like",), policies=("a",), n_clips=2, binary=True)
    runs = query.runs
    backend = connect(threads=1)
    assert ours(backend) == [(0,)]
    got = reduce(logs, grid, backend=backend)
    assert ours(backend) == [(1,)]  # the query was compiled and run there
    assert query.runs == runs       # not on the logs' own source
    want = reduce(logs, grid, cache=None)
    pd.testing.assert_frame_equal(got.offline, want.offline, check_exact=False, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize(("d", "d0"), [("pbm", "log2"), ("log2", "pbm")])
def test_a_reduce_learns_pbm_with_its_floor_as_target_discount_and_as_exposure(logs, d, d0):
    # the logging policy's DCG summed over sessions at m = ∞ is Σ_i c_i D(r_i) / D0(r_i), by hand with the
    # learnt curve floored at 0.3 (it binds: deep ranks are reached by fewer than 30 % of the sessions)
    floor = 0.3
    learnt = learn_pbm(logs, floor=floor)
    assert (learnt == floor).sum() >= 2
    curves = {"pbm": lambda r: learnt[r - 1], "log2": lambda r: 1.0 / np.log2(r + 1.0)}
    f = logs.frame
    ranks = f["rank"].to_numpy()
    want = float((f["click"].to_numpy() * curves[d](ranks) / curves[d0](ranks)).sum())
    m = reduce(logs, Grid(rewards=("click",), policies=("a",), discounts=(d,), exposures=(d0,), clips=(math.inf,)),
               pbm_floor=floor, cache=None)
    o = m.offline
    got = o.loc[(o["metric"] == "dcg") & (o["policy"] == "logging"), "sum"].sum()
    assert got == pytest.approx(want, rel=1e-12)
    default = reduce(logs, Grid(rewards=("click",), policies=("a",), discounts=(d,), exposures=(d0,), clips=(math.inf,)),
                     cache=None).offline
    assert default.loc[(default["metric"] == "dcg") & (default["policy"] == "logging"), "sum"].sum() != pytest.approx(
        want, rel=1e-6)  # the default floor gives another curve


def test_an_exposure_whose_inverse_is_infinite_is_refused_at_m_infinity_and_capped_by_a_finite_clip(tmp_path):
    import warnings

    from offeval_core.errors import NonFiniteMoments, SpecError

    # session a: 160 ranks, clicked at rank 1; session b: clicked at rank 2
    n = 160
    logs = read_logs(pd.DataFrame({"session_id": ["a"] * n + ["b"] * 2, "rank": [*range(1, n + 1), 1, 2],
                                   "click": [1.0] + [0.0] * (n - 1) + [0.0, 1.0],
                                   "rank__p": [*range(n, 0, -1), 2, 1]}))
    table = tmp_path / "exposure.csv"
    table.write_text("rank,probability\n1,1\n2,0\n")

    def grid(exposure, clips):
        return Grid(rewards=("click",), policies=("p",), discounts=("log2",), exposures=(exposure,), clips=clips)

    # 0.01^(r - 1) falls below 1e-300 first at rank 152 (1e-302): 1 / D0 there is past what stands for m = ∞
    with pytest.raises(NonFiniteMoments) as err:
        reduce(logs, grid("exponential:0.01", (1, math.inf)), cache=None)
    assert str(err.value) == (
        "exposure model 'exponential:0.01' gives rank 152 a probability of 1e-302, so the unclipped (m = ∞) weight "
        "1 / D0 there is beyond double precision; use a finite clip grid or an exposure model that stays above "
        "1e-300 at every logged rank")
    with pytest.raises(SpecError) as err:
        reduce(logs, grid(f"table:{table}", (1, math.inf)), cache=None)
    assert str(err.value) == (
        f"exposure model 'table:{table}' gives probability 0 to some ranks, so 1 / D0 is infinite there; logged "
        "items were viewed, so an exposure model must be > 0 at every logged rank (drop the cut-off or use a "
        "finite clip grid)")
    # a finite clip grid caps the weight: b's click at rank 2 gets min(8, 1 / D0(2)) = 8 under both models,
    # a's click at rank 1 weight 1; logging DCG at log2 = 1 + 8 / log2(3)
    for exposure in ("exponential:0.01", f"table:{table}"):
        with warnings.catch_warnings():
            warnings.simplefilter("error", RuntimeWarning)  # no overflow or division warning on the way
            m = reduce(logs, grid(exposure, (1, 8)), cache=None)
        o = m.offline
        dcg = o.loc[(o["metric"] == "dcg") & (o["policy"] == "logging") & (o["clip"] == 8), "sum"].sum()
        assert dcg == pytest.approx(1 + 8 / math.log2(3), rel=1e-12)


def test_every_discount_of_the_grid_is_labelled_by_its_own_spec(logs):
    # "pbm" and "pbm@3" are two models: each keeps its label (the cut-off one did overwrite the plain one's)
    grid = Grid(rewards=("click",), policies=("a",), discounts=("pbm", "pbm@3", "exponential:0.9"),
                exposures=("log2",), clips=(math.inf,))
    assert reduce(logs, grid, cache=None).discount_labels == {
        "pbm": "learnt PBM (session survival)", "pbm@3": "learnt PBM (session survival), cut at 3",
        "exponential:0.9": parse_discount("exponential:0.9").label, "log2": "1/log₂(r+1)"}


def test_the_long_moments_are_float64_and_the_logging_policys_paired_columns_nan(logs):
    m = reduce(logs, Grid(rewards=("click",), policies=("a",), discounts=("pbm",), exposures=("log2",),
                          clips=(2, math.inf)), cache=None)
    o = m.offline
    assert o["n"].dtype == np.int64
    for c in ("sum", "m2", "den_sum", "den_m2", "co_den", "sum_diff", "m2_diff", "co_diff_den"):
        assert o[c].dtype == np.float64, c
    logging = o[o["policy"] == "logging"]
    assert logging[["sum_diff", "m2_diff", "co_diff_den"]].isna().all().all()
    assert o.loc[o["policy"] == "a", ["sum", "sum_diff"]].notna().all().all()


def test_a_reduce_whose_moments_overflow_is_refused_naming_the_first_row():
    from offeval_core.errors import NonFiniteMoments

    df = random_logs(np.random.default_rng(3), n_sessions=30)
    df.loc[df.index[df["click"] > 0][:1], "click"] = 1e200  # its square is beyond double precision
    with pytest.raises(NonFiniteMoments) as err, warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)  # the error alone, no warning of inf − inf before it
        reduce(read_logs(df), Grid(rewards=("click",), policies=("a",), discounts=("log2",), exposures=("log2",),
                                   clips=(math.inf,)), cache=None)
    assert str(err.value) == (
        "the moments of reward 'click' are not finite at discount log2, exposure log2, clip inf, policy logging, "
        "metric dcg (column 'm2'; 4 row(s) in all): the values (or their squares) are beyond double precision "
        "(about 1.8e308); rescale the reward (e.g. to thousands) or use a finite clip value")


def test_an_observed_reward_whose_moments_overflow_is_refused_when_the_source_is_prepared():
    from offeval_core.engine import prepare
    from offeval_core.errors import NonFiniteMoments

    df = random_logs(np.random.default_rng(3), n_sessions=30)
    df.loc[df.index[df["click"] > 0][:1], "click"] = 1e200
    with pytest.raises(NonFiniteMoments) as err:
        prepare(source_from_logs(read_logs(df), connect(threads=1)))
    assert str(err.value) == (
        "the moments of the observed reward 'click' are not finite (column 'm2'; 1 row(s) in all): the values (or "
        "their squares) are beyond double precision (about 1.8e308); rescale the reward (e.g. to thousands) or use "
        "a finite clip value")


def test_the_online_moments_of_rewards_positive_on_different_rows_are_each_rewards_own():
    # click and buy are positive on different rows (never both): each reward's per-session sums by hand
    df = random_logs(np.random.default_rng(11), n_sessions=40, graded=True)
    rng = np.random.default_rng(12)
    df["buy"] = np.where(df["click"] > 0, 0.0, (rng.random(len(df)) < 0.2) * rng.integers(1, 5, len(df)))
    quiet = (df["day"] == 0) & (df["arm"] == "treatment")  # a group of sessions without any reward: n, Σ 0, m2 0
    df.loc[quiet, ["click", "buy"]] = 0.0
    assert quiet.any()
    logs = read_logs(df)
    m = reduce(logs, Grid(rewards=("click", "buy"), policies=("a",), discounts=("log2",), exposures=("log2",),
                          clips=(math.inf,)), cache=None)
    per = logs.frame.groupby("session")[["click", "buy"]].sum().join(logs.sessions.set_index("session"))
    keys = ["experiment_id", "day", "arm", "segment"]
    for k in keys:
        per[k] = per[k].astype(str)
    assert (per["buy"] > 0).sum() > 5 and (per["click"] > 0).sum() > 5
    for reward in ("click", "buy"):
        got = m.online[m.online["reward"] == reward]
        assert len(got) == per.groupby(keys).ngroups
        for _, row in got.iterrows():
            x = per.loc[(per[keys] == row[keys].astype(str).to_numpy()).all(axis=1), reward].to_numpy()
            assert row["n"] == len(x)
            assert row["sum"] == pytest.approx(x.sum(), rel=1e-12, abs=1e-12)
            assert row["m2"] == pytest.approx(((x - x.mean()) ** 2).sum(), rel=1e-9, abs=1e-9)


def test_an_exposure_table_above_zero_everywhere_is_accepted_at_m_infinity(logs, tmp_path):
    # a table of viewing probabilities 1, 0.9, …, 0.2 over ranks 1..9 (no zero, no cut-off) is a valid D0 at m = ∞:
    # the logging DCG at D = log2 is Σ_i c_i · log2-discount(r_i) / D0(r_i)
    probs = np.linspace(1.0, 0.2, 9)
    table = tmp_path / "viewed.csv"
    table.write_text("rank,probability\n" + "".join(f"{r},{float(p)!r}\n" for r, p in enumerate(probs, 1)))
    f = logs.frame
    r = f["rank"].to_numpy()
    assert r.max() <= 9
    want = float((f["click"].to_numpy() / np.log2(r + 1.0) / probs[r - 1]).sum())
    m = reduce(logs, Grid(rewards=("click",), policies=("a",), discounts=("log2",), exposures=(f"table:{table}",),
                          clips=(math.inf,)), cache=None)
    o = m.offline
    assert o.loc[(o["metric"] == "dcg") & (o["policy"] == "logging"), "sum"].sum() == pytest.approx(want, rel=1e-12)


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


def test_prepare_of_in_memory_logs_is_their_one_source_and_a_default_reduce_compiles_nothing(logs):
    from offeval_core.engine import prepare
    from offeval_core.engine.kernel import _state

    source = prepare(logs)
    assert source is logs_source(logs)
    plans = dict(_state(source)["plans"])
    assert {(key[1], key[2], key[3]) for key in plans} >= {(("a", "b"), 14, False), (("a", "b"), 14, True)}
    reduce(logs, Grid(rewards=("like", "click"), policies=("a", "b"), discounts=("log2",), exposures=("pbm",)),
           cache=None)
    assert _state(source)["plans"] == plans


def test_prepare_for_some_policies_compiles_their_shape_only():
    from offeval_core.engine import prepare
    from offeval_core.engine.kernel import _state

    fresh = read_logs(random_logs(np.random.default_rng(8), n_sessions=30, graded=False))
    source = prepare(source_from_logs(fresh, connect(threads=1)), policies=("b",), n_clips=3)
    assert sorted(_state(source)["plans"]) == [(("click",), ("b",), 3, True)]
    reduce(source, Grid(rewards=("click",), policies=("b",), discounts=("log2",), exposures=("pbm",),
                        clips=(1, 4, math.inf)))
    assert sorted(_state(source)["plans"]) == [(("click",), ("b",), 3, True)]  # the prepared one ran


def test_a_source_without_session_counts_counts_them_and_gives_the_same_moments(logs):
    import dataclasses

    from offeval_core.engine import prepare

    grid = Grid(rewards=("click", "like"), policies=("a", "b"), discounts=("log2",), exposures=("pbm",),
                clips=(1, 3, math.inf))
    with_counts = source_from_logs(logs, connect(threads=1))
    bare = prepare(dataclasses.replace(source_from_logs(logs, connect(threads=1)), counts=None))
    assert with_counts.counts is not None
    unprepared = dataclasses.replace(source_from_logs(logs, connect(threads=1)), counts=None)  # counted by reduce
    want, got, got_unprepared = reduce(with_counts, grid), reduce(bare, grid), reduce(unprepared, grid)
    for m in (got, got_unprepared):
        pd.testing.assert_frame_equal(m.offline, want.offline, check_exact=True)
        pd.testing.assert_frame_equal(m.online, want.online, check_exact=True)
    # the counts behind n: every session of its group, rewarded or not
    n_sessions = logs.sessions.groupby(["experiment_id", "day", "arm", "segment"], observed=True).size()
    online = got.online[got.online["reward"] == "click"].set_index(["experiment_id", "day", "arm", "segment"])["n"]
    assert sorted(online.to_numpy().tolist()) == sorted(n_sessions.to_numpy().tolist())


def test_a_reduce_of_a_source_names_an_unknown_reward_or_policy_and_what_the_source_has(logs):
    import dataclasses

    from offeval_core.errors import UnknownName

    source = source_from_logs(logs, connect(threads=1))
    name = source.name
    with pytest.raises(UnknownName) as err:
        reduce(source, Grid(rewards=("clicks",), policies=("a",)))
    assert str(err.value) == f"unknown reward 'clicks'; the logs {name} have reward columns: click, like, watch"
    with pytest.raises(UnknownName) as err:
        reduce(source, Grid(rewards=("click",), policies=("c",)))
    assert str(err.value) == (f"unknown policy 'c': the logs {name} have no column 'rank__c' "
                              "(policies found: a, b)")
    # a source that does not list its rewards or policies: the columns it has, or "none"
    bare = dataclasses.replace(source, rewards=(), policies=())
    with pytest.raises(UnknownName) as err:
        reduce(bare, Grid(rewards=("clicks",), policies=("a",)))
    assert str(err.value) == (f"unknown reward 'clicks'; the logs {name} have reward columns: "
                              + ", ".join(source.rows.columns))
    with pytest.raises(UnknownName) as err:
        reduce(bare, Grid(rewards=("click",), policies=("c",)))
    assert str(err.value).endswith("(policies found: none)")


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


def test_a_paired_difference_whose_moments_overflow_alone_is_refused():
    """Two sessions: the target ranks the rewarded item where the logging policy did not, and the other way round.
    With D = log2 cut at 1 and D0 = log2, x_target = (0, a·log2 3), x_logging = (a, 0): at a = 8e153 every value
    and its square are finite (the largest, (a·log2 3)² = 1.61e308, under 1.8e308, whichever way the backend sums
    squares) and m2 of the target is (a·log2 3)² / 2 = 8.04e307, but d = x_target − x_logging = (−a, a·log2 3)
    has m2_diff = (a·(1 + log2 3))² / 2 = 2.14e308, beyond double precision: the paired column alone overflows."""
    from offeval_core.errors import NonFiniteMoments

    def logs(a):
        return read_logs(pd.DataFrame({"session_id": ["s1", "s2", "s1", "s2"], "rank": [1, 2, 2, 1],
                                       "click": [a, a, 0.0, 0.0], "rank__a": [2, 1, 1, 2], "day": 0,
                                       "arm": "control", "segment": "g"}))

    grid = Grid(rewards=("click",), policies=("a",), discounts=("log2@1",), exposures=("log2",), clips=(math.inf,))
    row = reduce(logs(1.0), grid, cache=None).offline.set_index(["policy", "metric"]).loc[("a", "dcg")]
    log3 = math.log2(3)
    assert row["m2"] == pytest.approx(log3 ** 2 / 2, rel=1e-12)
    assert row["m2_diff"] == pytest.approx((1 + log3) ** 2 / 2, rel=1e-12)
    with pytest.raises(NonFiniteMoments) as err, warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        reduce(logs(8e153), grid, cache=None)
    assert str(err.value) == (
        "the moments of reward 'click' are not finite at discount log2@1, exposure log2, clip inf, policy a, "
        "metric dcg (column 'm2_diff'; 1 row(s) in all): the values (or their squares) are beyond double precision "
        "(about 1.8e308); rescale the reward (e.g. to thousands) or use a finite clip value")


def test_the_reduce_puts_the_group_and_variant_columns_first_and_sorts_the_rows_by_them():
    """The moments' rows in a stable order whatever order the backend returns them in: group keys, reward and the
    variant columns first, rows sorted by them (as sort_values would; policy names alphabetically, 'logging' among
    them)."""
    grid = Grid(rewards=("click",), policies=("b", "a"), discounts=("log2", "reciprocal"), exposures=("log2",),
                clips=(4, 1, math.inf))
    o = reduce(read_logs(random_logs(np.random.default_rng(5), n_sessions=40)), grid, cache=None).offline
    front = ["experiment_id", "day", "arm", "segment", "reward", "discount", "exposure", "clip", "policy", "metric"]
    assert o.columns[:len(front)].tolist() == front
    assert set(o["policy"]) == {"a", "b", "logging"} and set(o["clip"]) == {1.0, 4.0, math.inf}
    pd.testing.assert_frame_equal(o, o.sort_values(front, kind="stable").reset_index(drop=True))


def test_an_empty_moments_frame_keeps_its_columns_in_order():
    from offeval_core.engine.reduction import _tidy

    empty = pd.DataFrame({"sum": pd.Series(dtype=float), "policy": pd.Series(dtype=object),
                          "experiment_id": pd.Series(dtype=object), "day": pd.Series(dtype="int64"),
                          "arm": pd.Series(dtype=object), "segment": pd.Series(dtype=object),
                          "reward": pd.Series(dtype=object), "clip": pd.Series(dtype=float)})
    out = _tidy(empty, ["experiment_id", "day", "arm", "segment"])
    assert out.columns.tolist() == ["experiment_id", "day", "arm", "segment", "reward", "clip", "policy", "sum"]
    assert len(out) == 0 and out.index.equals(pd.RangeIndex(0))


def test_the_finiteness_check_lets_the_weight_diagnostics_overflow_but_not_a_moment():
    """Σw² of uncapped weights (w_sumsq, an ``add`` column) and the largest weight (w_max, a ``max`` column) may
    overflow while the capped estimates stay finite: their summaries say so. A moment column may not."""
    from offeval_core import importance as imp
    from offeval_core.engine import check_finite_moments
    from offeval_core.errors import NonFiniteMoments

    df = pd.DataFrame({"session_id": [1, 2], "rank": 1, "click": [1, 0], "logging_propensity": [0.5, 0.5],
                       "target_propensity__t": [0.5, 0.25]})
    o = imp.reduce_importance(read_logs(df), clips=(2,)).offline
    target = o["policy"] == "t"
    check_finite_moments(o.assign(w_sumsq=np.where(target, math.inf, o["w_sumsq"]),
                                  w_max=np.where(target, math.inf, o["w_max"])), what="the test")
    with pytest.raises(NonFiniteMoments) as err:
        check_finite_moments(o.assign(m2=np.where(target, math.inf, o["m2"])), what="the test")
    assert err.value.column == "m2"
    # an undefined moment too (NaN, not only ±inf), named by its variant with the clip as the pages write it (2,
    # not 2.0); only the logging policy's paired columns may be empty (they are, here), not its own
    with pytest.raises(NonFiniteMoments) as err:
        check_finite_moments(o.assign(m2=np.where(target, math.nan, o["m2"])), what="the test")
    assert err.value.column == "m2"
    assert ("the moments of the test are not finite at experiment_id all, day 1, arm control, segment all, discount "
            "propensity, exposure propensity, clip 2, policy t, metric cis (column 'm2'; 40 row(s) in all)") in str(
        err.value)
    assert o.loc[~target, "sum_diff"].isna().all()
    with pytest.raises(NonFiniteMoments) as err:
        check_finite_moments(o.assign(m2=np.where(target, o["m2"], math.nan)), what="the test")
    assert err.value.column == "m2" and "policy logging" in str(err.value)


def test_the_moments_do_not_depend_on_the_order_of_the_rank_tables_rows(logs, monkeypatch):
    """D(j) of the j-th largest label is read by rank (the join on r, and the sorted lists' D vector collected in
    order of r), not by the rank table's row order: the rows reversed give the same moments, fresh and compiled."""
    from offeval_core.engine import kernel

    source = source_from_logs(logs, connect(threads=1))
    real = kernel.rank_table

    def moments(reward, d, d0, clips):
        disc, expo = source_discount(d, source), source_discount(d0, source)
        fresh = fresh_moments(source, reward=reward, policies=("a", "b"), discount=disc, exposure=expo, clips=clips,
                              keys=source.keys, binary=BINARY[reward])
        query = compiled_moments(source, rewards=(reward,), policies=("a", "b"), n_clips=len(clips),
                                 binary=BINARY[reward])
        return fresh, query.run(reward=reward, discount=disc, exposure=expo, clips=clips)

    want = [moments(*combo) for combo in COMBOS]
    monkeypatch.setattr(kernel, "rank_table", lambda *a, **k: real(*a, **k).iloc[::-1].reset_index(drop=True))
    assert kernel.rank_table(parse_discount("log2"), parse_discount("log2"), 3)["r"].tolist() == [3, 2, 1]
    for combo, (fresh, compiled) in zip(COMBOS, want, strict=True):
        got_fresh, got_compiled = moments(*combo)
        pd.testing.assert_frame_equal(got_fresh, fresh, check_exact=False, rtol=1e-12, atol=1e-12)
        pd.testing.assert_frame_equal(got_compiled, compiled, check_exact=False, rtol=1e-12, atol=1e-12)


def test_compiled_session_values_are_the_direct_forms_and_compile_once(logs):
    """estimators.session_values runs one compiled query per reward shape of the logs' source: every (D, D0, clip)
    gives the per-session values of the direct form (engine.per_session.session_kernel, built afresh with literal
    clips), binary, graded and real-valued rewards alike, and the query of a shape is compiled once."""
    from offeval_core.engine import session_kernel, variant_table
    from offeval_core.engine.per_session import compiled_session_values
    from offeval_core.estimators import session_values

    source = logs_source(logs)
    queries = {}
    for reward, d, d0, clips in COMBOS:
        for clip in (clips[0], clips[-1]):
            got = session_values(logs, reward=reward, policies=("a", "b"), discount=d, exposure=d0, clip=clip)
            query = compiled_session_values(source, reward=reward, policies=("a", "b"))
            assert queries.setdefault((reward, query.sql), query) is query
            grid = Grid(rewards=(reward,), policies=("a", "b"), discounts=(d,), exposures=(d0,), clips=(clip,))
            want = source.backend.execute(session_kernel(
                source, reward=reward, policies=("a", "b"), discounts=[source_discount(d, source)],
                exposures=[source_discount(d0, source)], variants=variant_table(grid)))
            want = want.set_index("session").reindex(got["session"]).fillna(0.0)
            assert (got["dcg__b"] != got["dcg__logging"]).any()
            for col in ("idcg", "dcg__logging", "dcg__a", "dcg__b"):
                np.testing.assert_allclose(got[col].to_numpy(), want[col].to_numpy(), rtol=1e-12, atol=1e-12)
    # one compiled query per shape: the binary like and the graded click and watch (the reward enters as data)
    assert len({id(q) for q in queries.values()}) == len({sql for _, sql in queries}) == 2


def test_compiled_session_values_on_one_backend_own_their_parameter_tables(logs):
    """As the moments' queries: the per-session values' queries of two sources on one connection (a binary and a
    graded reward of the first, the graded reward of the second) have 6 parameter and rank table names, all
    different, and each gives its own logs' values after the other source's query ran."""
    from offeval_core.engine.per_session import compiled_session_values

    con = connect(threads=1)
    other = read_logs(random_logs(np.random.default_rng(12), n_sessions=20, graded=True))
    sources = [source_from_logs(logs, con), source_from_logs(other, con)]
    queries = [compiled_session_values(s, reward=r, policies=("a",))
               for s, r in ((sources[0], "like"), (sources[0], "click"), (sources[1], "click"))]
    names = [n for q in queries for n in (q._par, q._lut)]
    assert len(set(names)) == len(names) == 6
    disc = parse_discount("log2")
    first = queries[1].run(reward="click", discount=disc, exposure=disc, clip=2.0)
    queries[2].run(reward="click", discount=disc, exposure=disc, clip=2.0)
    again = queries[1].run(reward="click", discount=disc, exposure=disc, clip=2.0)
    pd.testing.assert_frame_equal(again, first, check_exact=True)
