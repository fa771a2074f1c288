"""Discount models: closed forms, the learnt survival curve, cut-offs, tables, and spec errors."""

import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st

from offeval_core.discounts import learn_pbm, parse_discount, survival_curve
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
