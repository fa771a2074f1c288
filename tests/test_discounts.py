"""Discount models: closed forms, the learnt survival curve, cut-offs, tables, and spec errors."""

import hashlib
import math
import threading

import numpy as np
import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st

from offeval_core.discounts import (
    DiscountModel,
    learn_pbm,
    parse_discount,
    read_discount_table,
    register_table,
    restrict_table_files,
    survival_curve,
    survival_from_counts,
    table_files_restricted,
)
from offeval_core.errors import InputError, LimitExceeded, SpecError, UnreadableInput
from offeval_core.logs import read_logs

R = np.arange(1, 7)


def test_closed_forms():
    np.testing.assert_allclose(parse_discount("log2")(R), 1 / np.log2(R + 1))
    np.testing.assert_allclose(parse_discount("reciprocal")(R), 1 / R)
    np.testing.assert_allclose(parse_discount("exponential:0.5")(R), 0.5 ** (R - 1))
    np.testing.assert_allclose(parse_discount("log2@3")(R), [1, 1 / math.log2(3), 0.5, 0, 0, 0])
    # rank < 1 (a target that would not show the item) gets no exposure
    assert parse_discount("log2")(np.array([-1, 0])).tolist() == [0.0, 0.0]


def test_specs_round_trip():
    for spec in ("log2", "reciprocal", "exponential:0.9", "log2@10", "exponential:0.5@4"):
        assert parse_discount(spec).spec == spec


def test_learnt_pbm_is_the_survival_of_control_session_lengths():
    # control sessions of lengths 1, 2, 2, 4; the treatment session (length 9) is ignored
    rows = [(s, r, arm) for s, (n, arm) in enumerate([(1, "control"), (2, "control"), (2, "control"),
                                                       (4, "control"), (9, "treatment")])
            for r in range(1, n + 1)]
    df = pd.DataFrame(rows, columns=["session_id", "rank", "arm"]).assign(click=0)
    logs = read_logs(df)
    assert learn_pbm(logs, floor=0.01).tolist() == [1.0, 0.75, 0.25, 0.25]
    model = parse_discount("pbm", logs=logs, floor=0.01)
    # beyond the longest control session no session reaches the rank: the floor keeps 1/P finite
    assert model(np.array([1, 4, 5, 50])).tolist() == [1.0, 0.25, 0.01, 0.01]


@given(st.lists(st.integers(1, 40), min_size=1, max_size=200), st.floats(1e-6, 0.5))
def test_survival_curve_properties(lengths, floor):
    curve = survival_curve(np.array(lengths), floor=floor)
    assert curve[0] == 1.0
    assert np.all(np.diff(curve) <= 0)
    assert np.all(curve >= floor)
    assert len(curve) == max(lengths)
    # P(L ≥ r) computed by counting
    for r in (1, max(lengths)):
        assert curve[r - 1] == pytest.approx(max(np.mean(np.array(lengths) >= r), floor))


def test_table_discount(tmp_path):
    path = tmp_path / "bias.csv"
    pd.DataFrame({"rank": [2, 1, 3], "probability": [0.5, 1.0, 0.2]}).to_csv(path, index=False)
    model = parse_discount(f"table:{path}")
    assert model(np.array([1, 2, 3, 4])).tolist() == [1.0, 0.5, 0.2, 0.0]
    assert parse_discount(f"table:{path}@2")(np.array([1, 2, 3])).tolist() == [1.0, 0.5, 0.0]
    bad = tmp_path / "bad.csv"
    pd.DataFrame({"rank": [1, 3], "probability": [1.0, 0.2]}).to_csv(bad, index=False)
    with pytest.raises(ValueError, match=f"discount table {bad}: column 'rank' must list every rank 1..n exactly once"):
        parse_discount(f"table:{bad}")


@pytest.mark.parametrize(("spec", "message"), [
    ("log3", "unknown discount 'log3'; expected one of 'log2', 'reciprocal', 'exponential:p', 'pbm', "
             "'table:FILE.csv', optionally followed by a cut-off '@n' (e.g. 'log2@10')"),
    ("exponential:1.5", "exponential discount parameter must be in (0, 1], got 1.5 in 'exponential:1.5'"),
    ("exponential:x", "exponential discount needs a parameter p in (0, 1], e.g. 'exponential:0.9', got 'exponential:x'"),
    ("log2@0", "discount cut-off must be a positive integer after '@', got 'log2@0'"),
    ("log2@ten", "discount cut-off must be a positive integer after '@', got 'log2@ten'"),
    ("pbm", "discount 'pbm' is learnt from the logs, so logs must be given"),
    ("", "discount must be a spec like"),
])
def test_bad_specs(spec, message):
    with pytest.raises(ValueError) as info:
        parse_discount(spec)
    assert str(info.value).startswith(message)


def test_cut_offs_and_parameters_at_their_boundaries():

    r = np.array([1, 2, 3])
    assert parse_discount("reciprocal@2")(r).tolist() == [1.0, 0.5, 0.0]
    assert parse_discount("log2@1")(r).tolist() == [1.0, 0.0, 0.0]             # @1 is the smallest cut-off
    with pytest.raises(ValueError, match="positive integer after '@'"):
        parse_discount("log2@0")
    assert parse_discount("exponential:1")(r).tolist() == [1.0, 1.0, 1.0]      # p = 1: no decay, allowed
    assert parse_discount("exponential:0.5@2")(r).tolist() == [1.0, 0.5, 0.0]
    with pytest.raises(ValueError):
        parse_discount("exponential:0")
    logs = read_logs(pd.DataFrame({"session_id": [1, 1, 2, 3, 3], "rank": [1, 2, 1, 1, 2], "click": 0,
                                   "arm": ["control", "control", "control", "treatment", "treatment"]}))
    # control sessions 1 (length 2) and 2 (length 1): P(V | 2) = 1/2; the treatment session does not count
    assert learn_pbm(logs).tolist() == [1.0, 0.5]
    assert learn_pbm(logs, arm=None).tolist() == pytest.approx([1.0, 2 / 3], abs=1e-12)
    assert learn_pbm(logs, floor=1.0).tolist() == [1.0, 1.0]                    # floor 1 is allowed: no bias
    assert learn_pbm(logs, floor=0.75).tolist() == [1.0, 0.75]                  # the floor reaches the curve
    with pytest.raises(ValueError, match=r"floor must be in \(0, 1\]"):
        learn_pbm(logs, floor=0.0)
    with pytest.raises(ValueError, match=r"floor must be in \(0, 1\]"):
        learn_pbm(logs, floor=1.5)


# ------------------------------------------------------------------ the learnt curve, tables and their limits


def test_learnt_curve_validation_and_cut_off():
    # a single rank is a curve; the floor and the cut-off are applied to the given values
    assert DiscountModel.learnt([1.0], floor=0.01).values == (1.0,)
    assert DiscountModel.learnt([1.0, 0.5], floor=1.0).values == (1.0, 1.0)     # floor 1 is allowed
    assert DiscountModel.learnt([1.0, 0.5, 0.25], floor=0.01, cutoff=2)(np.array([1, 2, 3])).tolist() == [1.0, 0.5, 0.0]
    for floor in (0.0, 1.5):
        with pytest.raises(ValueError, match=r"floor must be in \(0, 1\]"):
            DiscountModel.learnt([1.0], floor=floor)
    # not a probability curve: empty, two-dimensional, above 1 (1.5 is finite), NaN
    for curve in ([], [[1.0, 0.5]], [1.0, 1.5], [1.0, math.nan]):
        with pytest.raises(ValueError, match="non-empty sequence of probabilities in"):
            DiscountModel.learnt(curve, floor=0.01)


def test_pbm_spec_with_a_cut_off_a_given_curve_and_a_floor_below_the_default():
    logs = read_logs(pd.DataFrame({"session_id": [1, 1, 1, 2], "rank": [1, 2, 3, 1], "click": 0}))
    # lengths 3 and 1: P(V | r) = 1, 1/2, 1/2; cut at 2
    assert parse_discount("pbm@2", logs=logs)(np.array([1, 2, 3])).tolist() == [1.0, 0.5, 0.0]
    # a learnt curve given directly needs no logs
    assert parse_discount("pbm", curve=[1.0, 0.4], floor=0.01)(np.array([1, 2, 3])).tolist() == [1.0, 0.4, 0.01]
    # 20 000 sessions of length 1 and one of length 2: P(V | 2) = 1/20 001 ≈ 5e-5, below the default floor
    # 1e-4, so a floor of 1e-6 must reach the survival curve itself
    sid = np.r_[np.arange(20_001), 20_000]
    rank = np.r_[np.ones(20_001, dtype=int), 2]
    many = read_logs(pd.DataFrame({"session_id": sid, "rank": rank, "click": 0}))
    assert parse_discount("pbm", logs=many, floor=1e-6)(np.array([2]))[0] == pytest.approx(1 / 20_001, rel=1e-12)


def test_survival_counts_drop_trailing_zeros_and_lengths_may_be_floats():
    assert survival_from_counts(np.array([1, 1, 0, 0]), floor=0.01).tolist() == [1.0, 0.5]
    assert survival_curve(np.array([1.0, 2.0, 2.0]), floor=0.01).tolist() == pytest.approx([1.0, 2 / 3], abs=1e-15)


def test_table_of_a_curve():
    assert parse_discount("log2").table(3).tolist() == pytest.approx([1.0, 1 / math.log2(3), 0.5], abs=1e-15)
    assert parse_discount("reciprocal@2").table(3).tolist() == [1.0, 0.5, 0.0]


def test_other_kinds_take_no_argument():
    for spec in ("log2:5", "reciprocal:2", "pbm:x"):
        with pytest.raises(SpecError, match=f"unknown discount '{spec}'"):
            parse_discount(spec)


ONE_RANK = "rank,probability\n1,0.5\n"


def _table(tmp_path, text, name="bias.csv"):
    path = tmp_path / name
    path.write_text(text)
    return path


def test_table_spec_label_and_values(tmp_path):
    path = _table(tmp_path, "rank,probability\n1,1\n2,0\n")  # probability 0 (never viewed) is allowed
    model = parse_discount(f"table:{path}@5")
    assert (model.kind, model.source, model.spec) == ("table", str(path), f"table:{path}@5")
    assert model.label == "table bias.csv, cut at 5"
    assert model(np.array([1, 2, 3])).tolist() == [1.0, 0.0, 0.0]
    one = parse_discount(f"table:{_table(tmp_path, ONE_RANK, 'one.csv')}")  # a table of one rank
    assert one(np.array([1, 2])).tolist() == [0.5, 0.0]


@pytest.mark.parametrize(("text", "error", "message"), [
    ("rank\n1\n", InputError, "must have the columns 'rank' and 'probability'"),
    ("probability\n1\n", InputError, "must have the columns 'rank' and 'probability'"),
    ("rank,probability\n", InputError, "column 'rank' must list every rank 1..n exactly once"),
    ("rank,probability\nfirst,1\n", InputError, "column 'rank' must list every rank 1..n exactly once"),
    ("rank,probability\n1,1\n2,1.5\n3,-0.1\n4,high\n", InputError,
     "column 'probability' must hold numbers in [0, 1]; rows 2, 3 are outside it and rows 4 are not numbers"),
    ("rank,probability\n1,np.float64(1.0)\n2,\n", InputError,
     "column 'probability' must hold numbers in [0, 1]; rows 1, 2 are not numbers"),
    # at most the first five rows of each kind (seven outside, six text)
    ("rank,probability\n" + "".join(f"{r},2\n" for r in range(1, 8)) + "".join(f"{r},x\n" for r in range(8, 14)),
     InputError, "must hold numbers in [0, 1]; rows 1, 2, 3, 4, 5 are outside it and rows 8, 9, 10, 11, 12 are not "
     "numbers"),
    ("", UnreadableInput, "the file is empty (0 bytes)"),
])
def test_bad_tables_name_the_table(tmp_path, text, error, message):
    path = _table(tmp_path, text)
    with pytest.raises(error) as info:
        parse_discount(f"table:{path}")
    assert str(info.value).startswith(f"discount table {path}")
    assert message in str(info.value)


def test_table_limits_columns_rows_and_bytes(tmp_path, monkeypatch):
    extra = [f"c{i}" for i in range(14)]
    sixteen = _table(tmp_path, ",".join(["rank", "probability", *extra]) + "\n" + ",".join(["1", "1"] + ["0"] * 14)
                     + "\n", "sixteen.csv")
    assert parse_discount(f"table:{sixteen}")(np.array([1])).tolist() == [1.0]      # at most 16 columns
    seventeen = _table(tmp_path, sixteen.read_text().replace("c13", "c13,c14").replace("\n1,", "\n1,0,", 1),
                       "seventeen.csv")
    with pytest.raises(LimitExceeded, match="more than 16 columns"):
        parse_discount(f"table:{seventeen}")
    three = _table(tmp_path, "rank,probability\n1,1\n2,0.5\n3,0.25\n", "three.csv")
    four = _table(tmp_path, "rank,probability\n1,1\n2,0.5\n3,0.25\n4,0.1\n", "four.csv")
    monkeypatch.setenv("OFFEVAL_MAX_RANK", "3")                               # rows of a table: at most max_rank
    assert parse_discount(f"table:{three}")(np.array([3])).tolist() == [0.25]
    with pytest.raises(LimitExceeded):
        parse_discount(f"table:{four}")
    monkeypatch.delenv("OFFEVAL_MAX_RANK")
    size = four.stat().st_size                                                 # bytes: at most max_table_bytes
    monkeypatch.setenv("OFFEVAL_MAX_TABLE_BYTES", str(size))
    assert parse_discount(f"table:{four}")(np.array([4])).tolist() == [0.1]
    monkeypatch.setenv("OFFEVAL_MAX_TABLE_BYTES", str(size - 1))
    with pytest.raises(LimitExceeded, match=f"more than {size - 1:,} bytes"):
        parse_discount(f"table:{four}")


def _in_a_restricted_thread(fn):
    box = {}

    def target():
        restrict_table_files()
        box["restricted"] = table_files_restricted()
        try:
            box["value"] = fn()
        except Exception as exc:  # re-raised in the test's thread
            box["error"] = exc

    t = threading.Thread(target=target)
    t.start()
    t.join(30)
    assert box["restricted"] is True
    if "error" in box:
        raise box["error"]
    return box["value"]


def test_restricted_tables_are_read_from_the_data_directory_by_name(tmp_path, monkeypatch):
    data = tmp_path / "data"
    data.mkdir()
    _table(data, "rank,probability\n1,1\n2,0.25\n", "bias.csv")
    _table(data, "rank,probability\n1,1\n3,0.2\n", "gap.csv")
    _table(data, "rank,probability\n1,1\n", "notes.txt")
    monkeypatch.setenv("OFFEVAL_DATA_DIR", str(data))
    monkeypatch.chdir(tmp_path)
    _table(tmp_path, "rank,probability\n1,1\n2,0.9\n", "bias.csv")              # the working directory's file
    assert _in_a_restricted_thread(lambda: parse_discount("table:bias.csv")(np.array([2]))).tolist() == [0.25]
    assert parse_discount("table:bias.csv")(np.array([2])).tolist() == [0.9]  # unrestricted: the user's path
    with pytest.raises(InputError) as info:
        _in_a_restricted_thread(lambda: parse_discount("table:gap.csv"))
    assert str(info.value) == "discount table gap.csv: column 'rank' must list every rank 1..n exactly once"
    with pytest.raises(UnreadableInput, match=r"^discount table 'notes.txt' must end with \.csv$"):
        _in_a_restricted_thread(lambda: parse_discount("table:notes.txt"))
    restrict_table_files(False)
    assert not table_files_restricted()
    restrict_table_files()
    try:
        assert table_files_restricted()
    finally:
        restrict_table_files(False)


def test_a_new_thread_reads_the_users_own_table_files(tmp_path):
    # only a thread that called restrict_table_files() is restricted (the dashboard's script threads)
    path = _table(tmp_path, "rank,probability\n1,1\n2,0.75\n")
    box = {}

    def target():
        box["restricted"] = table_files_restricted()
        box["values"] = parse_discount(f"table:{path}")(np.array([2])).tolist()

    t = threading.Thread(target=target)
    t.start()
    t.join(30)
    assert box == {"restricted": False, "values": [0.75]}


def test_registered_table_names_values_and_size_limit(monkeypatch):
    data = b"rank,probability\n1,1\n2,0.125\n"
    digest = hashlib.sha256(data).hexdigest()[:12]
    key = register_table(data)
    assert key == f"upload-{digest}.csv"                                     # the default name
    assert parse_discount(f"table:{key}")(np.array([1, 2, 3])).tolist() == [1.0, 0.125, 0.0]
    assert read_discount_table(key).dtype == np.float64
    assert register_table(data, name="%%%.csv") == f"table-{digest}.csv"      # nothing left of the name
    assert register_table(data, name="a" * 50 + ".csv") == "a" * 40 + f"-{digest}.csv"
    # upper-case letters are kept, every other run of characters becomes one '-', none at either end
    assert register_table(data, name="X-Ray scan!.csv") == f"X-Ray-scan-{digest}.csv"
    monkeypatch.setenv("OFFEVAL_MAX_TABLE_BYTES", str(len(data)))
    assert register_table(data, name="x.csv") == f"x-{digest}.csv"             # exactly the limit is allowed
    monkeypatch.setenv("OFFEVAL_MAX_TABLE_BYTES", str(len(data) - 1))
    with pytest.raises(LimitExceeded, match="larger than"):
        register_table(data, name="x.csv")


def test_an_exposure_curve_with_a_cut_off_is_refused_by_the_reduce_and_the_weights_alike():
    from offeval_core import read_logs
    from offeval_core.discounts import check_exposure_cutoff
    from offeval_core.engine import Grid, reduce

    text = ("exposure model 'log2@3' has a cut-off; a cut-off belongs to the target discount D, not to the exposure "
            "model D0 of logged (viewed) ranks")
    with pytest.raises(SpecError) as err:
        check_exposure_cutoff(parse_discount("log2@3"))
    assert str(err.value) == text
    check_exposure_cutoff(parse_discount("log2"))                     # no cut-off: nothing to say
    logs = read_logs(pd.DataFrame({"session_id": [1, 1], "rank": [1, 2], "click": [1, 0], "rank__t": [2, 1]}))
    with pytest.raises(SpecError) as err:
        reduce(logs, Grid(rewards=("click",), policies=("t",), discounts=("log2",), exposures=("log2@3",),
                          clips=(1.0, 2.0)))
    assert str(err.value) == text


def test_the_registry_keeps_the_most_recently_used_tables_up_to_its_size(monkeypatch):
    """MAX_REGISTERED tables fill an empty registry; reading the oldest makes it the most recently used, so one more
    upload evicts the second oldest instead; uploading a table already held moves it up the same way. An evicted
    table is named as no longer in memory (in a restricted thread), a kept one gives its values. (The registry is
    emptied first: tables the process uploaded before would otherwise already hold some of these names.)"""
    from collections import OrderedDict

    from offeval_core import discounts
    from offeval_core.discounts import MAX_REGISTERED
    from offeval_core.errors import MissingInput

    monkeypatch.setattr(discounts, "_REGISTERED", OrderedDict())

    def data(k):
        return f"rank,probability\n1,1\n2,{k / 10_000:.4f}\n".encode()

    def read(name):
        return _in_a_restricted_thread(lambda: parse_discount(f"table:{name}")(np.array([2])).tolist())

    names = [register_table(data(k), name=f"lru{k}.csv") for k in range(1, MAX_REGISTERED + 1)]
    assert read(names[0]) == [0.0001]                    # every one of the MAX_REGISTERED is held; the oldest moves up
    extra = register_table(data(MAX_REGISTERED + 1), name="lru-extra.csv")
    with pytest.raises(MissingInput) as info:
        read(names[1])
    assert str(info.value) == (f"the uploaded discount table {names[1]!r} is no longer in memory; upload it again in "
                               "the sidebar")
    assert read(names[0]) == [0.0001] and read(names[2]) == [0.0003] and read(extra) == [(MAX_REGISTERED + 1) / 1e4]
    # the oldest now is names[3]; uploading it again moves it up, so the next upload evicts names[4]
    assert register_table(data(4), name="lru4.csv") == names[3]
    register_table(data(MAX_REGISTERED + 2), name="lru-extra2.csv")
    assert read(names[3]) == [0.0004]
    with pytest.raises(MissingInput):
        read(names[4])


def test_an_exposure_table_with_a_cut_off_is_accepted(tmp_path):
    """Only curves are refused a cut-off as exposure models: a table (a rank → probability list) keeps it."""
    from offeval_core.discounts import check_exposure_cutoff

    path = tmp_path / "bias.csv"
    pd.DataFrame({"rank": [1, 2, 3], "probability": [1.0, 0.5, 0.2]}).to_csv(path, index=False)
    table = parse_discount(f"table:{path}@2")
    assert (table.kind, table.cutoff) == ("table", 2)
    assert check_exposure_cutoff(table) is None
    with pytest.raises(SpecError, match="^exposure model 'reciprocal@2' has a cut-off"):
        check_exposure_cutoff(parse_discount("reciprocal@2"))
