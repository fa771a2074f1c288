"""importance.weights by hand: capping, the weight setup and its errors, per-session labels, the capping grid,
exposure weights in numpy and as the backend expression, and the tables the importance reduce reads.

The ranking logs ``ranked()``: control sessions 10 (ranks 1, 2), 20 (ranks 1, 2, 3) and 30 (rank 1), so the learnt
pbm (the survival of the control lengths 2, 3, 1) is S(1) = 1, S(2) = 2/3, S(3) = 1/3, then its floor; a
treatment session 40 of length 4 does not enter it. The target ranks ``rank__new`` are 2, 1 | 3, 1, 2 | 1 | 4, 3, 2, 1.
"""

import math

import ibis
import numpy as np
import pandas as pd
import pytest

from offeval_core import importance as imp
from offeval_core.engine import connect
from offeval_core.errors import InputError, SpecError, UnknownName, WrongType
from offeval_core.importance.weights import INF_CLIP
from offeval_core.logs import read_logs


def ranked(**extra) -> pd.DataFrame:
    return pd.DataFrame({
        "session_id": [10, 10, 30, 20, 20, 20, 40, 40, 40, 40],
        "rank": [1, 2, 1, 1, 2, 3, 1, 2, 3, 4],
        "click": [0, 1, 0, 1, 1, 1, 1, 0, 0, 1],
        "item_id": ["a", "b", "c", "a", "d", "e", "a", "b", "c", "d"],
        "segment": ["x", "x", "y", "x", "x", "x", "y", "y", "y", "y"],
        "arm": ["control"] * 6 + ["treatment"] * 4,
        "rank__new": [2, 1, 1, 3, 1, 2, 4, 3, 2, 1],
        **extra,
    })


def propensity_logs(**extra):
    return read_logs(pd.DataFrame({"session_id": [1, 2, 3], "rank": 1, "click": [1.0, 0.0, 1.0],
                                   "logging_propensity": [0.5, 0.25, 0.8],
                                   "target_propensity__a": [0.25, 0.5, 0.2], **extra}), name="p.csv")


# ------------------------------------------------------------------------------------------------ cap


def test_cap_returns_float_weights_from_any_numbers():
    # a list of integers and an integer cap: min(w, 2) = 1, 2, 2 and w · 1{w < 2} = 1, 0, 0, as floats
    for capping, expected in (("max", [1.0, 2.0, 2.0]), ("zero", [1.0, 0.0, 0.0])):
        out = imp.cap([1, 2, 3], 2, capping)
        assert out.dtype == np.float64 and out.tolist() == expected


# ----------------------------------------------------------------------------------------- resolve_weights


def test_resolve_weights_defaults_and_the_policies_kept():
    logs = read_logs(ranked(), name="t.csv")
    # auto on logs without logging_propensity: exposure ratios, with the default discount labels pbm / pbm;
    # the logging policy (None or "logging") and repeats are dropped, the order of first mention kept
    assert imp.resolve_weights(logs, [None, "new", "logging", "new"]) == imp.WeightSetup(
        "exposure", ("new",), "pbm", "pbm")
    assert imp.resolve_weights(logs, ("new",), discount="log2", exposure="reciprocal") == imp.WeightSetup(
        "exposure", ("new",), "log2", "reciprocal")
    with pytest.raises(InputError) as err:
        imp.resolve_weights(logs, [None, "logging"])
    assert str(err.value) == "policies must name at least one target policy, got none"
    with pytest.raises(SpecError) as err:
        imp.resolve_weights(logs, ["new"], weights="ratio")
    assert str(err.value) == "weights must be one of 'auto', 'propensity', 'exposure'; got 'ratio'"


def test_resolve_weights_on_propensity_logs_and_the_mode_asked():
    both = propensity_logs(rank__a=[1, 1, 1])
    # auto picks propensities when the logs have them; the labels are then "propensity", whatever was asked
    assert imp.resolve_weights(both, ["a"], discount="log2") == imp.WeightSetup(
        "propensity", ("a",), imp.PROPENSITY, imp.PROPENSITY)
    assert imp.PROPENSITY == "propensity"
    # the mode asked wins over auto
    assert imp.resolve_weights(both, ["a"], weights="exposure", discount="log2") == imp.WeightSetup(
        "exposure", ("a",), "log2", "pbm")
    assert imp.resolve_weights(both, ["a"], weights="propensity").mode == "propensity"


def test_resolve_weights_errors_name_what_the_logs_have():
    logs = propensity_logs(target_propensity__b=[0.1, 0.1, 0.1])
    with pytest.raises(UnknownName) as err:
        imp.resolve_weights(logs, ["c"])
    assert str(err.value) == (
        "policy 'c': the logs p.csv have no column 'target_propensity__c' (target propensities found: a, b); "
        "importance weights π_t / π_p need the target policy's propensity on every logged row")
    bare = read_logs(pd.DataFrame({"session_id": [1, 2], "rank": 1, "click": [1.0, 0.0],
                                   "logging_propensity": [0.5, 0.5]}), name="q.csv")
    with pytest.raises(UnknownName) as err:
        imp.resolve_weights(bare, ["a"])
    assert "(target propensities found: none);" in str(err.value)
    no_lp = read_logs(pd.DataFrame({"session_id": [1, 2], "rank": 1, "click": [1.0, 0.0],
                                    "target_propensity__a": [0.5, 0.5]}), name="x.csv")
    with pytest.raises(InputError) as err:
        imp.resolve_weights(no_lp, ["a"], weights="propensity")
    assert str(err.value).startswith("weights='propensity' needs a 'logging_propensity' column; the logs x.csv")
    # exposure weights need rank__<policy>: the policies found, "none", and the hint about a target propensity
    with pytest.raises(UnknownName) as err:
        imp.resolve_weights(read_logs(ranked(), name="t.csv"), ["old"])
    assert str(err.value) == ("policy 'old': exposure weights D(R(i)) / D0(i) need the column 'rank__old', which "
                              "the logs t.csv do not have (policies found: new)")
    with pytest.raises(UnknownName) as err:
        imp.resolve_weights(read_logs(ranked(rank__old=[1, 2, 1, 1, 2, 3, 1, 2, 3, 4]), name="t.csv"), ["x"])
    assert str(err.value).endswith("which the logs t.csv do not have (policies found: new, old)")
    with pytest.raises(UnknownName) as err:
        imp.resolve_weights(no_lp, ["a"])
    assert str(err.value) == ("policy 'a': exposure weights D(R(i)) / D0(i) need the column 'rank__a', which the "
                              "logs x.csv do not have (policies found: none); it has 'target_propensity__a' but no "
                              "'logging_propensity'")
    # with a logging propensity, exposure weights asked for: no hint that the logs lack it
    with pytest.raises(UnknownName) as err:
        imp.resolve_weights(propensity_logs(), ["a"], weights="exposure")
    assert str(err.value) == ("policy 'a': exposure weights D(R(i)) / D0(i) need the column 'rank__a', which the "
                              "logs p.csv do not have (policies found: none)")


# ------------------------------------------------------------------------------------------- per_session


def test_per_session_keeps_the_order_of_first_appearance():
    out = imp.per_session(pd.Series([10, 10, 30, 20]), pd.Series(["a", "a", "c", "b"]), name="segment")
    assert out.index.tolist() == [10, 30, 20] and out.tolist() == ["a", "c", "b"]
    # values are kept as given (objects), compared as text within a session
    nums = imp.per_session(np.array([1, 1, 2]), np.array([5, 5, 7]), name="n")
    assert nums.dtype == object and nums.tolist() == [5, 7] and type(nums.iloc[0]) is int


def test_per_session_names_the_first_session_with_two_values():
    # rows 1, 2 and 4 differ from their session's first value: the first of them is reported
    with pytest.raises(InputError) as err:
        imp.per_session(np.array([1, 1, 1, 2, 2]), ["a", "b", "c", "d", "e"], name="segment")
    assert str(err.value) == ("segment must be constant within a session (a context property); session 1 has 'a' "
                              "and 'b'")
    assert err.value.column == "segment"
    with pytest.raises(InputError) as err:
        imp.per_session(pd.Series(["s1", "s1"]), pd.Series(["u", "v"]), name="context column 'c'")
    assert str(err.value) == ("context column 'c' must be constant within a session (a context property); "
                              "session 's1' has 'u' and 'v'")
    # True and 1 are different labels (their texts differ), as are 1 and 1.0
    for values in ([True, 1], [1, 1.0]):
        with pytest.raises(InputError):
            imp.per_session([7, 7], values, name="v")


# ---------------------------------------------------------------------------------------- session_labels


def test_session_labels_of_each_kind_of_spec():
    logs = read_logs(ranked(), name="t.csv")
    cases = [(None, ["all"] * 4), ("session", ["10", "20", "30", "40"]), ("segment", ["x", "x", "y", "y"]),
             ("arm", ["control", "control", "control", "treatment"]),
             (pd.Series({40: 1, 30: 2, 20: 3, 10: 4}), ["4", "3", "2", "1"])]    # keyed by session_id
    for spec, expected in cases:
        out = imp.session_labels(logs, spec, name="strata")
        assert out.dtype == object and out.tolist() == expected, spec


def test_session_labels_from_a_reward_column_and_its_errors():
    frame = ranked()
    frame["click"] = [1, 1, 0, 2, 2, 2, 0, 0, 0, 0]       # constant within each session
    logs = read_logs(frame, name="t.csv")
    out = imp.session_labels(logs, "click", name="context")
    assert out.dtype == object and out.tolist() == ["1.0", "2.0", "0.0", "0.0"]
    with pytest.raises(InputError) as err:
        imp.session_labels(logs, "item_id", name="context")
    assert str(err.value) == ("context column 'item_id' must be constant within a session (a context property); "
                              "session 10 has 'a' and 'b'")


def test_session_labels_errors():
    logs = read_logs(ranked(), name="t.csv")
    usable = "segment, experiment_id, day, arm, item_id, click, rank__new, 'session', or None"
    # the sessions' own counters are not labels, and neither is an unknown name
    for spec in ("length", "n_rows", "nope"):
        with pytest.raises(UnknownName) as err:
            imp.session_labels(logs, spec, name="strata")
        assert str(err.value) == f"strata {spec!r} is not a column of the logs t.csv (usable: {usable})"
    with pytest.raises(WrongType) as err:
        imp.session_labels(logs, 3, name="context")
    assert str(err.value) == "context must be a column name, a pandas Series or None, got int"
    # a Series missing sessions: how many, and the first five of them
    with pytest.raises(InputError) as err:
        imp.session_labels(logs, pd.Series({10: "u"}), name="strata")
    assert str(err.value) == "strata: no value for 3 session(s), e.g. session_id 20, 30, 40"
    many = read_logs(pd.DataFrame({"session_id": range(1, 9), "rank": 1, "click": 0.0}), name="m.csv")
    with pytest.raises(InputError) as err:
        imp.session_labels(many, pd.Series({8: "z"}), name="context")
    assert str(err.value) == "context: no value for 7 session(s), e.g. session_id 1, 2, 3, 4, 5"


# -------------------------------------------------------------------------------------- capping_variants


def test_capping_variants_by_hand():
    out = imp.capping_variants([2, 1.5, 2], ["zero", "max", "zero"])
    # clips sorted and unique with c = ∞ added; cappings in the order first given, each once
    expected = pd.DataFrame({
        "v": [0, 1, 2, 3, 4, 5],
        "clip": [1.5, 2.0, INF_CLIP] * 2,
        "zero": [True] * 3 + [False] * 3,
        "clip_value": [1.5, 2.0, math.inf] * 2,
        "capping": ["zero"] * 3 + ["max"] * 3,
    })
    pd.testing.assert_frame_equal(out, expected)
    assert INF_CLIP == 1e300
    with pytest.raises(SpecError) as err:
        imp.capping_variants([2], ["max", "min"])
    assert str(err.value) == "capping must be one of 'max', 'zero'; got 'min'"


# -------------------------------------------------------------------------------------- exposure_weights


def test_exposure_weights_of_the_control_rows_by_hand():
    logs = read_logs(ranked(), name="t.csv")
    # D = 1/R over D0 = S(r): rows (r, R) = (1, 2), (2, 1) | (1, 3), (2, 1), (3, 2) | (1, 1); the treatment
    # session 40 is not an offline row
    sess, w = imp.exposure_weights(logs, "new", discount="reciprocal")
    assert sess.tolist() == [0, 0, 1, 1, 1, 2]
    assert w == pytest.approx([0.5, 1.5, 1 / 3, 1.5, 1.5, 1.0], rel=1e-12)
    # D = D0 = S: S(R) / S(r)
    _, w = imp.exposure_weights(logs, "new", discount="pbm", exposure="pbm")
    assert w == pytest.approx([2 / 3, 1.5, 1 / 3, 1.5, 2.0, 1.0], rel=1e-12)
    # D = 1/R, D0 = 1/r: r / R
    _, w = imp.exposure_weights(logs, "new", discount="reciprocal", exposure="reciprocal")
    assert w == pytest.approx([0.5, 2.0, 1 / 3, 2.0, 1.5, 1.0], rel=1e-12)


# ------------------------------------------------------------------------------------------- weight_expr


def _weights(logs, setup, policy, **kw):
    source = imp.importance_source(logs, setup)
    t = source.rows.mutate(w=imp.weight_expr(source, setup, policy, logs=logs, **kw))
    return t.order_by(["session", "rank"]).execute()["w"].tolist()


def test_weight_expr_exposure_ratios_by_hand():
    logs = read_logs(ranked(), name="t.csv")
    setup = imp.resolve_weights(logs, ["new"], discount="reciprocal", exposure="pbm")
    # every row, the treatment session's too: its rank 4 has no control session, so D0(4) = the floor 1e-4
    assert _weights(logs, setup, "new") == pytest.approx(
        [0.5, 1.5, 1 / 3, 1.5, 1.5, 1.0, 0.25, 0.5, 1.5, 1e4], rel=1e-12)
    # a floor of 0.5 raises S to 1, 2/3, 1/2, 1/2 for both D and D0 = pbm
    setup = imp.resolve_weights(logs, ["new"])
    assert _weights(logs, setup, "new", pbm_floor=0.5) == pytest.approx(
        [2 / 3, 1.5, 0.5, 1.5, 4 / 3, 1.0, 0.5, 0.75, 4 / 3, 2.0], rel=1e-12)
    assert _weights(logs, setup, "new") == pytest.approx(
        [2 / 3, 1.5, 1 / 3, 1.5, 2.0, 1.0, 1e-4, 0.5, 2.0, 1e4], rel=1e-12)


def test_weight_expr_propensity_ratio():
    logs = propensity_logs()
    setup = imp.resolve_weights(logs, ["a"])
    assert _weights(logs, setup, "a") == pytest.approx([0.5, 2.0, 0.25], rel=1e-12)


def test_weight_expr_refuses_an_exposure_model_with_a_zero():
    logs = read_logs(ranked(), name="t.csv")
    # exponential:1e-200 gives D0(3) = 1e-400, which is 0 in double precision
    setup = imp.resolve_weights(logs, ["new"], discount="reciprocal", exposure="exponential:1e-200")
    source = imp.importance_source(logs, setup)
    with pytest.raises(SpecError) as err:
        imp.weight_expr(source, setup, "new", logs=logs)
    assert str(err.value) == (
        "exposure model 'exponential:1e-200' gives probability 0 to some logged ranks, so the weight D(R(i)) / D0(i) "
        "is infinite there; use an exposure model > 0 at every rank")
    # a cut-off on a curve D0 is refused as the reduce refuses it, whether it falls inside the logged ranks (1-4)
    # or past them (where it zeroes nothing, so "probability 0 at a logged rank" would be untrue)
    for spec in ("reciprocal@2", "reciprocal@10"):
        setup = imp.resolve_weights(logs, ["new"], discount="reciprocal", exposure=spec)
        source = imp.importance_source(logs, setup)
        with pytest.raises(SpecError) as err:
            imp.weight_expr(source, setup, "new", logs=logs)
        assert str(err.value) == (f"exposure model {spec!r} has a cut-off; a cut-off belongs to the target discount "
                                  "D, not to the exposure model D0 of logged (viewed) ranks")
    # exponential:0.5 stays positive: 1, 1/2, 1/4, 1/8
    setup = imp.resolve_weights(logs, ["new"], discount="reciprocal", exposure="exponential:0.5")
    assert _weights(logs, setup, "new")[:2] == pytest.approx([0.5, 2.0], rel=1e-12)


# ------------------------------------------------------------------------------------- importance_source


def test_importance_source_tables_by_hand():
    logs = read_logs(ranked(), name="t.csv")
    setup = imp.resolve_weights(logs, ["new"])
    source = imp.importance_source(logs, setup, strata="segment")
    assert source.max_rank == 4 and source.name == "t.csv"
    assert dict(source.rows.schema().items()) == {
        "session": ibis.dtype("int64"), "rank": ibis.dtype("int64"), "item_id": ibis.dtype("string"),
        "click": ibis.dtype("float64"), "rank__new": ibis.dtype("int64")}
    rows = source.rows.order_by(["session", "rank"]).execute()
    assert rows["session"].tolist() == [0, 0, 1, 1, 1, 2, 3, 3, 3, 3]
    assert rows["rank"].tolist() == [1, 2, 1, 2, 3, 1, 1, 2, 3, 4]
    assert rows["item_id"].tolist() == ["a", "b", "a", "d", "e", "c", "a", "b", "c", "d"]
    assert rows["click"].tolist() == [0.0, 1.0, 1.0, 1.0, 1.0, 0.0, 1.0, 0.0, 0.0, 1.0]
    assert rows["rank__new"].tolist() == [2, 1, 3, 1, 2, 1, 4, 3, 2, 1]
    assert dict(source.sessions.schema().items()) == {
        "session": ibis.dtype("int64"), "experiment_id": ibis.dtype("string"), "day": ibis.dtype("int64"),
        "arm": ibis.dtype("string"), "segment": ibis.dtype("string"), "stratum": ibis.dtype("string"),
        "context": ibis.dtype("string")}
    sess = source.sessions.order_by("session").execute()
    assert sess.drop(columns="day").to_dict("list") == {
        "session": [0, 1, 2, 3], "experiment_id": ["all"] * 4, "arm": ["control"] * 3 + ["treatment"],
        "segment": ["x", "x", "y", "y"], "stratum": ["x", "x", "y", "y"], "context": ["10", "20", "30", "40"]}
    # no strata: one stratum; a context column
    sess = imp.importance_source(logs, setup, context="segment").sessions.order_by("session").execute()
    assert sess["stratum"].tolist() == ["all"] * 4 and sess["context"].tolist() == ["x", "x", "y", "y"]


def test_importance_source_without_item_ids_and_with_propensities():
    logs = propensity_logs()
    assert "item_id" not in logs.frame.columns
    setup = imp.resolve_weights(logs, ["a"])
    rows = imp.importance_source(logs, setup).rows
    assert dict(rows.schema().items()) == {
        "session": ibis.dtype("int64"), "rank": ibis.dtype("int64"), "item_id": ibis.dtype("string"),
        "click": ibis.dtype("float64"), "logging_propensity": ibis.dtype("float64"),
        "target_propensity__a": ibis.dtype("float64")}
    out = rows.order_by("session").execute()
    assert out["item_id"].tolist() == ["", "", ""]
    assert out["logging_propensity"].tolist() == [0.5, 0.25, 0.8]
    assert out["target_propensity__a"].tolist() == [0.25, 0.5, 0.2]


def test_importance_source_tables_are_named_per_logs_and_setup_on_one_backend():
    backend = connect()
    one, two = read_logs(ranked(), name="one.csv"), read_logs(ranked().iloc[:3], name="two.csv")
    both = propensity_logs(rank__a=[2, 1, 1])
    setups = [imp.resolve_weights(one, ["new"]), imp.resolve_weights(both, ["a"]),
              imp.resolve_weights(both, ["a"], weights="exposure")]
    s1 = imp.importance_source(one, setups[0], backend=backend)
    s2 = imp.importance_source(two, setups[0], backend=backend)      # other logs, the same setup
    s3 = imp.importance_source(both, setups[1], backend=backend)
    s4 = imp.importance_source(both, setups[2], backend=backend)     # the same logs, another setup
    assert s1.backend is backend and s2.backend is backend
    assert s1.rows.count().execute() == 10 and s2.rows.count().execute() == 3
    assert s1.sessions.count().execute() == 4 and s2.sessions.count().execute() == 2
    assert s3.rows.execute()["target_propensity__a"].tolist() == [0.25, 0.5, 0.2]
    assert s4.rows.execute()["rank__a"].tolist() == [2, 1, 1]
    # the same logs and setup again: the tables are replaced, not refused
    again = imp.importance_source(one, setups[0], backend=backend, strata="segment")
    assert again.sessions.execute()["stratum"].tolist() == ["x", "x", "y", "y"]


def test_importance_source_label_errors_name_strata_or_context():
    logs = read_logs(ranked(), name="t.csv")
    setup = imp.resolve_weights(logs, ["new"])
    with pytest.raises(InputError) as err:
        imp.importance_source(logs, setup, strata=pd.Series({10: "u"}))
    assert str(err.value) == "strata: no value for 3 session(s), e.g. session_id 20, 30, 40"
    with pytest.raises(InputError) as err:
        imp.importance_source(logs, setup, context=pd.Series({10: "u"}))
    assert str(err.value) == "context: no value for 3 session(s), e.g. session_id 20, 30, 40"
    with pytest.raises(InputError) as err:
        imp.importance_source(logs, setup, strata="item_id")
    assert str(err.value).startswith("strata column 'item_id' must be constant within a session")
    with pytest.raises(InputError) as err:
        imp.importance_source(logs, setup, context="item_id")
    assert str(err.value).startswith("context column 'item_id' must be constant within a session")
