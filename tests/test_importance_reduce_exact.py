"""The importance reduce's two helpers by hand: ``add_importance`` (what it keeps of each reduce: rows, grid,
online rewards, labels, source) and ``weight_diagnostics`` per key (the sums, the ratios, the order and the
groups), on four sessions of one row each.

    session   segment  click  buy  π_p    π_t   w = π_t / π_p   w̄ = min(w, 2)
    1         b        1      0    0.5    0.5   1               1
    2         b        0      1    0.5    0.25  0.5             0.5
    3         a        1      0    0.25   1.0   4               2
    4         a        0      0    0.5    0.5   1               1
"""

from __future__ import annotations

import datetime as dt
import math
import warnings

import numpy as np
import pandas as pd
import pytest

from offeval_core import importance as imp
from offeval_core.engine import Grid, reduce
from offeval_core.estimators import select
from offeval_core.logs import read_logs

P = "propensity"


def frame():
    return pd.DataFrame({"session_id": [1, 2, 3, 4], "rank": 1, "segment": ["b", "b", "a", "a"],
                         "click": [1, 0, 1, 0], "buy": [0, 1, 0, 0], "rank__t": [1, 1, 1, 1],
                         "logging_propensity": [0.5, 0.5, 0.25, 0.5], "target_propensity__t": [0.5, 0.25, 1.0, 0.5]})


def test_add_importance_keeps_both_reduces_whole(tmp_path):
    path = tmp_path / "four.csv"
    frame().to_csv(path, index=False)
    logs = read_logs(path)
    base = reduce(logs, Grid(rewards=("click",), policies=("t",), discounts=("log2",), exposures=("log2",),
                             clips=(math.inf,), ndcg_rule="drop"))
    both = imp.add_importance(base, logs, rewards=("click", "buy"), clips=(2,), cappings=("max",))
    extra = imp.reduce_importance(logs, rewards=("click", "buy"), clips=(2,), cappings=("max",))
    assert len(both.offline) == len(base.offline) + len(extra.offline)
    assert both.offline.index.equals(pd.RangeIndex(len(both.offline)))          # one label per row
    pd.testing.assert_frame_equal(both.offline.iloc[len(base.offline):].reset_index(drop=True), extra.offline)
    assert both.grid.ndcg_rule == "drop"                                        # the base grid's rule
    assert both.grid.rewards == ("click", "buy") and both.grid.clips == (2.0, math.inf)
    assert both.grid.discounts == ("log2", P)
    # the base has click's online moments; buy's come from the importance reduce (per segment: a 0 of 2, b 1 of 2)
    assert both.online.index.equals(pd.RangeIndex(len(both.online)))
    assert both.online.iloc[:len(base.online)].equals(base.online)
    buy = both.online[both.online["reward"] == "buy"]
    assert buy[["segment", "n", "sum", "m2"]].to_dict("records") == [
        {"segment": "a", "n": 2, "sum": 0.0, "m2": 0.0}, {"segment": "b", "n": 2, "sum": 1.0, "m2": 0.5}]
    assert len(both.online) == len(base.online) + 2
    assert both.discount_labels == {**base.discount_labels, P: "logged propensities π_t / π_p"}
    assert both.source == logs.source == str(path)


def cis_rows():
    m = imp.reduce_importance(read_logs(frame()), rewards=("click",), clips=(2,), cappings=("max",))
    rows = select(m, reward="click", policy="t", metric="cis", discount=P, exposure=P, clip=2)
    logging = select(m, reward="click", policy=None, metric="cis", discount=P, exposure=P, clip=2)
    return pd.concat([rows, logging], ignore_index=True)


A = {"segment": "a", "n": 2, "w_rows": 2, "w_sum": 5.0, "w_sumsq": 17.0, "wc_sum": 3.0, "wc_sumsq": 5.0,
     "max_weight": 4.0, "ess": 9 / 5, "ess_uncapped": 25 / 17, "capped_share": 1 - 3 / 5, "mean_weight": 5 / 2,
     "exact_share": 0.0}
B = {"segment": "b", "n": 2, "w_rows": 2, "w_sum": 1.5, "w_sumsq": 1.25, "wc_sum": 1.5, "wc_sumsq": 1.25,
     "max_weight": 1.0, "ess": 1.5 ** 2 / 1.25, "ess_uncapped": 1.5 ** 2 / 1.25, "capped_share": 0.0,
     "mean_weight": 0.75, "exact_share": 0.0}


COLUMNS = ["n", "w_rows", "w_sum", "w_sumsq", "wc_sum", "wc_sumsq", "n_exact", "max_weight", "ess", "ess_uncapped",
           "capped_share", "mean_weight", "exact_share"]


def check(out, want):
    assert list(out["segment"]) == [w["segment"] for w in want]
    for col in want[0]:
        if col != "segment":
            assert out[col].tolist() == pytest.approx([w[col] for w in want], abs=1e-12), col


def test_weight_diagnostics_per_segment_in_sorted_order_without_the_logging_rows():
    rows = cis_rows()
    assert set(rows["policy"]) == {"t", "logging"} and len(rows) == 4      # two segments × two policies
    check(imp.weight_diagnostics(rows, by=["segment"]), [A, B])
    assert list(imp.weight_diagnostics(rows, by=["segment"]).columns) == ["segment", *COLUMNS]
    check(imp.weight_diagnostics(rows.iloc[::-1], by=["segment"]), [A, B])   # sorted, whatever the row order
    check(imp.weight_diagnostics(rows, by=("segment",)), [A, B])


def test_weight_diagnostics_over_every_row():
    out = imp.weight_diagnostics(cis_rows())
    assert len(out) == 1 and list(out.index) == [0] and list(out.columns) == COLUMNS    # no "index" column
    got = out.iloc[0]
    assert (got["n"], got["w_rows"], got["w_sum"], got["w_sumsq"]) == (4, 4, 6.5, 18.25)
    assert (got["wc_sum"], got["wc_sumsq"], got["max_weight"]) == (4.5, 6.25, 4.0)
    assert got["ess"] == pytest.approx(4.5 ** 2 / 6.25) and got["ess_uncapped"] == pytest.approx(6.5 ** 2 / 18.25)
    assert got["capped_share"] == pytest.approx(2 / 6.5) and got["mean_weight"] == pytest.approx(6.5 / 4)
    assert got["exact_share"] == 0.0


def test_weight_diagnostics_keep_only_the_categories_present():
    rows = cis_rows()
    rows["segment"] = pd.Categorical(rows["segment"], categories=["z", "b", "a"])
    out = imp.weight_diagnostics(rows, by=["segment"])
    assert list(out["segment"]) == ["b", "a"]                                # category order; no row for z
    assert out["w_sum"].tolist() == [1.5, 5.0] and out["max_weight"].tolist() == [1.0, 4.0]


def test_weight_diagnostics_of_a_cell_without_weight():
    # no weight mass: ESS 0 (Kish's convention), the capped share and the mean weight 0 / 0
    rows = cis_rows().iloc[:1].copy()
    rows[["w_sum", "w_sumsq", "wc_sum", "wc_sumsq", "w_max"]] = 0.0
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # 0 / 0 gives NaN without a RuntimeWarning (no errstate needed)
        got = imp.weight_diagnostics(rows).iloc[0]
    assert got["ess"] == 0.0 and got["ess_uncapped"] == 0.0
    assert np.isnan(got["capped_share"]) and got["mean_weight"] == 0.0


def exposure_rows(frame_, **kwargs):
    m = imp.reduce_importance(read_logs(frame_), weights="exposure", discount="log2", exposure="log2", **kwargs)
    return m.offline[m.offline["policy"] == "t"].set_index(["clip", "metric"])


def test_exposure_normalisers_of_a_cell_with_little_or_no_capped_weight():
    # exposure weights at the session scale normalise by the cell's capped weight mass S = Σ w̄ (Σψ = A W / S).
    # One session, logged at rank 1, ranked 2nd by the target: w = D(2) / D(1) = 1 / log2(3) < 1 and, uncapped,
    # W = S, so NCIS, PieceNCIS and PointNCIS are A = w · 1, as IS — a mass S below 1 is still a mass.
    one = exposure_rows(pd.DataFrame({"session_id": [1], "rank": [1], "click": [1], "rank__t": [2]}),
                        clips=(math.inf,), cappings=("max",))
    for metric in ("is", "ncis", "piece-ncis", "point-ncis"):
        assert one.loc[(math.inf, metric), "sum"] == pytest.approx(1 / math.log2(3), abs=1e-12), metric
    # the target ranks as logged: every w = 1, which zero-capping at c = 1 removes (S = 0): the normalised
    # estimators are 0 for each session (not 0 / 0), while IS keeps its 2 clicks
    same = pd.DataFrame({"session_id": [1, 1, 2, 2], "rank": [1, 2, 1, 2], "click": [1, 0, 0, 1], "rank__t": [1, 2, 1, 2]})
    zero = exposure_rows(same, clips=(1,), cappings=("zero",))
    for metric in ("ncis-zero", "piece-ncis-zero", "point-ncis-zero", "piece-ncis-zero@impression",
                   "point-ncis-zero@impression"):
        assert (zero.loc[(1.0, metric), "sum"], zero.loc[(1.0, metric), "m2"]) == (0.0, 0.0), metric
    assert (zero.loc[(1.0, "is"), "sum"], zero.loc[(1.0, "is"), "wc_sum"]) == (2.0, 4.0)
    assert zero.loc[(1.0, "ncis-zero"), "wc_sum"] == 0.0


def test_piece_ncis_influence_values_by_hand():
    # PieceNCIS per segment (session scale, u = 1, y = w̄): ψ = R + (U / Y)(a − R y), R = A / Y.
    # Segment b: a = (1, 0), y = (1, 0.5): R = 2/3, U / Y = 4/3, ψ = (10/9, 2/9); its clicks c = (1, 0).
    # Σψ = U R whatever the sign of the second term; its co-moment with c and the paired difference are not.
    m = imp.reduce_importance(read_logs(frame()), rewards=("click",), clips=(2,), cappings=("max",))
    rows = select(m, reward="click", policy="t", metric="piece-ncis", discount=P, exposure=P, clip=2)
    b = rows[rows["segment"] == "b"].iloc[0]
    assert (b["n"], b["sum"], b["m2"]) == (2, pytest.approx(4 / 3, abs=1e-12), pytest.approx(32 / 81, abs=1e-12))
    assert b["co_ref"] == pytest.approx(4 / 9, abs=1e-12)                        # Σ(ψ − 2/3)(c − 1/2)
    assert b["sum_diff"] == pytest.approx(1 / 3, abs=1e-12)                      # d = ψ − c = (1/9, 2/9)
    assert b["m2_diff"] == pytest.approx(2 * (1 / 18) ** 2, abs=1e-12)


def test_paired_moments_of_an_impression_scale_estimator_by_hand():
    """CIS per impression at c = 2 on four sessions of 1-3 rows (π_p, π_t per row; w̄ = min(π_t / π_p, 2)):

        session  rows (click, π_p, π_t)                        a = Σ w̄ r   c = Σ r   y = m   d = a − c
        1        (1, .5, .5) (0, .25, .5)                      1           1         2       0
        2        (0, .5, .25)                                  0           0         1       0
        3        (1, .25, 1) (1, .5, .5) (0, .5, .25)          2 + 1 = 3   2         3       1
        4        (1, .5, 1)                                    2           1         1       1

    Σd = 2, d̄ = 1/2, m2_diff = 4 · 1/4 = 1; ȳ = 7/4, Σ(y − ȳ)² = 2.75 and
    co_diff_den = Σ(d − d̄)(y − ȳ) = −1/8 + 3/8 + 5/8 − 3/8 = 1/2. The paired effect Σd / Σy = 2/7 shares the
    denominator y of both policies, so its standard error reads co_diff_den (no other test of the importance
    reduce reads that column)."""
    from offeval_core.estimators import estimate_from_row
    from offeval_core.stats import ratio_estimate

    df = pd.DataFrame({"session_id": [1, 1, 2, 3, 3, 3, 4], "rank": [1, 2, 1, 1, 2, 3, 1],
                       "click": [1, 0, 0, 1, 1, 0, 1],
                       "logging_propensity": [0.5, 0.25, 0.5, 0.25, 0.5, 0.5, 0.5],
                       "target_propensity__t": [0.5, 0.5, 0.25, 1.0, 0.5, 0.25, 1.0]})
    m = imp.reduce_importance(read_logs(df), rewards=("click",), clips=(2,), cappings=("max",),
                              scales=("impression",))
    o = m.offline
    row = o[(o["policy"] == "t") & (o["metric"] == "cis@impression") & (o["clip"] == 2)].iloc[0]
    assert (row["n"], row["sum"], row["den_sum"], row["sum_diff"]) == (4, 6.0, 7.0, 2.0)
    assert row["m2_diff"] == pytest.approx(1.0, abs=1e-12)
    assert row["den_m2"] == pytest.approx(2.75, abs=1e-12)
    assert row["co_diff_den"] == pytest.approx(0.5, abs=1e-12)
    effect = estimate_from_row(row, metric="cis@impression", level=0.95, diff=True)
    by_hand = ratio_estimate(4, 2.0, 1.0, 7.0, 2.75, 0.5, level=0.95)
    assert effect.value == pytest.approx(2 / 7, abs=1e-12)
    assert effect.stderr == pytest.approx(by_hand.stderr, rel=1e-12)


def test_the_logging_rows_read_the_logging_moments_and_leave_the_paired_columns_empty():
    """The same four sessions: the logging policy's NCIS-per-impression row has the logging denominator u = m
    (Σ = 7, Σ(u − ū)² = 2.75), not the target's y = Σ w̄ per session (3, 0.5, 3.5, 2: Σ = 9, Σ(y − ȳ)² = 5.25);
    its paired columns are empty; the frame has exactly the moments schema's columns, n as integers and every
    moment as float64."""
    df = pd.DataFrame({"session_id": [1, 1, 2, 3, 3, 3, 4], "rank": [1, 2, 1, 1, 2, 3, 1],
                       "click": [1, 0, 0, 1, 1, 0, 1],
                       "logging_propensity": [0.5, 0.25, 0.5, 0.25, 0.5, 0.5, 0.5],
                       "target_propensity__t": [0.5, 0.5, 0.25, 1.0, 0.5, 0.25, 1.0]})
    o = imp.reduce_importance(read_logs(df), rewards=("click",), clips=(2,), cappings=("max",),
                              scales=("impression",)).offline
    ncis = o[(o["metric"] == "ncis@impression") & (o["clip"] == 2)].set_index("policy")
    assert (ncis.loc["t", "den_sum"], ncis.loc["logging", "den_sum"]) == (9.0, 7.0)
    assert ncis.loc["t", "den_m2"] == pytest.approx(5.25, abs=1e-12)
    assert ncis.loc["logging", "den_m2"] == pytest.approx(2.75, abs=1e-12)
    assert ncis.loc["logging", "sum"] == 4.0 and ncis.loc["logging", "co_den"] == ncis.loc["t", "ref_co_den"]
    logging_rows = o[o["policy"] == "logging"]
    assert logging_rows[["sum_diff", "m2_diff", "co_diff_den"]].isna().all().all()
    assert o[o["policy"] == "t"][["sum_diff", "m2_diff", "co_diff_den"]].notna().all().all()
    moments = ["sum", "m2", "den_sum", "den_m2", "co_den", "sum_diff", "m2_diff", "co_diff_den", "ref_sum", "ref_m2",
               "ref_den_sum", "ref_den_m2", "ref_co_den", "co_ref", "co_ref_den", "den_co_ref", "den_co_ref_den",
               "w_rows", "w_sum", "w_sumsq", "wc_sum", "wc_sumsq", "w_max", "n_exact"]
    assert o.columns.tolist() == ["experiment_id", "day", "arm", "segment", "reward", "discount", "exposure", "clip",
                                  "policy", "metric", "n", *moments]
    assert o["n"].dtype == np.int64
    assert {c: str(o[c].dtype) for c in moments} == dict.fromkeys(moments, "float64")


@pytest.mark.parametrize("days", [
    [dt.date(2024, 1, 1)] * 3 + [dt.date(2024, 1, 2)] * 4,  # DuckDB returns dates as timestamps
    [20240101.0] * 3 + [20240102.0] * 4,                    # the logs keep float days as objects; DuckDB as float64
], ids=["dates", "float days"])
def test_the_importance_moments_give_day_the_logs_own_type(days):
    """Sessions 1, 2 on the first day, 3, 4 on the second: each day's rows carry the logs' own day values and
    type, in the offline and the online moments alike (so the two merge on day)."""
    df = pd.DataFrame({"session_id": [1, 1, 2, 3, 3, 3, 4], "rank": [1, 2, 1, 1, 2, 3, 1], "day": days,
                       "click": [1, 0, 0, 1, 1, 0, 1],
                       "logging_propensity": [0.5, 0.25, 0.5, 0.25, 0.5, 0.5, 0.5],
                       "target_propensity__t": [0.5, 0.5, 0.25, 1.0, 0.5, 0.25, 1.0]})
    logs = read_logs(df)
    m = imp.reduce_importance(logs, rewards=("click",), clips=(2,), cappings=("max",), scales=("impression",))
    first, second = logs.sessions["day"].iloc[0], logs.sessions["day"].iloc[-1]
    for frame in (m.offline, m.online):
        assert frame["day"].dtype == logs.sessions["day"].dtype
        assert {type(d) for d in frame["day"]} == {type(first)}
        assert frame.groupby("day")["n"].first().to_dict() == {first: 2, second: 2}
    cis = m.offline[(m.offline["policy"] == "t") & (m.offline["metric"] == "cis@impression")
                    & (m.offline["clip"] == 2)].set_index("day")
    assert cis["sum"].to_dict() == {first: 1.0, second: 5.0}  # Σ w̄ r: sessions 1 + 2 = 1 + 0, 3 + 4 = 3 + 2


def _two_policies():
    """The four sessions of the module docstring with a second ranked policy u that has no target propensity."""
    return read_logs(frame().assign(rank__u=1))


def test_the_importance_reduce_reads_only_the_rewards_it_is_asked_for():
    m = imp.reduce_importance(_two_policies(), rewards=("buy",), clips=(2,), cappings=("max",))
    assert set(m.offline["reward"]) == set(m.online["reward"]) == {"buy"}
    cis = m.offline[(m.offline["policy"] == "t") & (m.offline["metric"] == "cis") & (m.offline["clip"] == 2)]
    assert cis["sum"].sum() == 0.5  # buy only in session 2, whose capped weight is 0.5


def test_the_importance_reduce_takes_every_ranked_policy_with_exposure_weights_and_the_logged_ones_otherwise():
    logs = _two_policies()
    propensity = imp.reduce_importance(logs, clips=(2,))
    assert set(propensity.offline["policy"]) == {"logging", "t"}
    assert propensity.discount_labels == {"propensity": "logged propensities π_t / π_p"}
    exposure = imp.reduce_importance(logs, clips=(2,), weights="exposure", discount="log2", exposure="log2")
    assert set(exposure.offline["policy"]) == {"logging", "t", "u"}
    assert exposure.discount_labels == {}  # log2 needs no label of the importance reduce's own
    # exposure ratios have no exact PointNCIS normaliser (no logged propensities to enumerate): every session is
    # plug-in, so PointNCIS is not CIS (which the exact part with ν = 1 would give); items logged at ranks 2, 1, 2, 1
    # and ranked 1, 1, 3, 2 by t have the weights log2(r + 1) / log2(R + 1) = 1.58, 1, 0.79, 0.63, and the
    # clip 1.2 binds, so the plug-in normaliser (the capped share of the weight mass) is not 1
    moved = read_logs(frame().assign(rank=[2, 1, 2, 1], rank__t=[1, 1, 3, 2]))
    exposure = imp.reduce_importance(moved, clips=(1.2,), weights="exposure", discount="log2", exposure="log2")
    targets = exposure.offline[exposure.offline["policy"] != "logging"]   # (the logging rows leave n_exact empty)
    assert len(targets) and (targets["n_exact"] == 0).all()
    rows = targets[(targets["policy"] == "t") & (targets["clip"] == 1.2)].groupby("metric")[["sum"]].sum()
    assert rows.loc["point-ncis", "sum"] != pytest.approx(rows.loc["cis", "sum"])


def test_the_importance_moments_name_the_logs_they_come_from(tmp_path):
    path = tmp_path / "four.csv"
    frame().to_csv(path, index=False)
    assert imp.reduce_importance(read_logs(path), clips=(2,)).source == str(path)


def test_an_unknown_scale_is_refused_by_name():
    from offeval_core.errors import SpecError

    with pytest.raises(SpecError) as err:
        imp.reduce_importance(_two_policies(), scales=("daily",))
    assert str(err.value) == "scale must be one of 'session', 'impression'; got 'daily'"


def test_the_importance_reduce_runs_on_a_given_backend():
    from offeval_core.engine import connect

    def views(backend):
        return backend.con.sql("select count(*) from duckdb_views() where not internal").fetchall()[0][0]

    logs = _two_policies()
    backend = connect(threads=1)
    assert views(backend) == 0
    got = imp.reduce_importance(logs, clips=(2,), backend=backend)
    assert views(backend) >= 1  # the session table was registered there
    want = imp.reduce_importance(logs, clips=(2,))
    pd.testing.assert_frame_equal(got.offline, want.offline, check_exact=False, rtol=1e-12, atol=1e-12)
