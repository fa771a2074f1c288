"""The offline-rows rule (offeval_core.arms): the control arm when the data have one, else every row."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from offeval_core.arms import offline_mask, offline_rows
from offeval_core.errors import UnknownName


def test_offline_mask_on_lists_series_and_without_control():
    m = offline_mask(["control", "treatment", "control"])
    assert m.dtype == bool and m.tolist() == [True, False, True]
    # a Series with its own index: the mask is by position
    s = pd.Series(["treatment", "control"], index=[10, 3])
    assert offline_mask(s).tolist() == [False, True]
    # no row in the arm: every row (logs without arms are all the logging policy's)
    none = offline_mask(np.array(["A", "B", "B"]))
    assert none.dtype == bool and none.tolist() == [True, True, True]
    # arm=None: every row
    every = offline_mask(["control", "treatment"], arm=None)
    assert every.dtype == bool and every.tolist() == [True, True]
    # another arm by name
    assert offline_mask(["control", "treatment"], arm="treatment").tolist() == [False, True]
    # categorical and numeric-looking values compare as values
    assert offline_mask(pd.Series(["control", "treatment"], dtype="category")).tolist() == [True, False]
    assert offline_mask([0, 1], arm="control").tolist() == [True, True]


def test_offline_rows():
    f = pd.DataFrame({"arm": ["control", "treatment", "control"], "x": [1, 2, 3]})
    assert offline_rows(f)["x"].tolist() == [1, 3]
    assert offline_rows(f, arm="treatment")["x"].tolist() == [2]
    assert offline_rows(f, arm=None) is f
    no_arm = pd.DataFrame({"x": [1, 2]})
    assert offline_rows(no_arm) is no_arm
    only_treatment = f[f["arm"] == "treatment"]
    assert offline_rows(only_treatment)["x"].tolist() == [2]      # no control row: every row


def test_an_arm_other_than_control_with_no_row_is_an_error_not_the_control_rows():
    """Only the control arm falls back to every row (logs without a control arm are all the logging policy's);
    an estimate asked of the treatment arm of control-only rows is refused, never taken from the control rows."""
    with pytest.raises(UnknownName) as err:
        offline_mask(["control", "control", "control"], arm="treatment")
    assert str(err.value) == ("no row is in the arm 'treatment': the 3 rows are in other arms "
                              "(arm='control' reads the logging policy's rows, arm=None every row)")
    with pytest.raises(UnknownName, match="no row is in the arm 'treatment'"):
        offline_rows(pd.DataFrame({"arm": ["control"], "x": [1]}), arm="treatment")
    assert offline_mask([], arm="treatment").tolist() == []          # no rows: nothing to refuse
    assert offline_mask(["treatment"], arm="control").tolist() == [True]   # the control fallback stays


def test_clip_tuning_of_the_treatment_arm_of_control_only_logs_is_refused():
    import math

    from offeval_core import read_logs
    from offeval_core.analyses import clip_tuning

    df = pd.DataFrame({"session_id": [1, 1, 2], "rank": [1, 2, 1], "click": [1, 0, 1], "rank__new": [2, 1, 1],
                       "arm": "control"})
    kw = {"reward": "click", "discount": "log2", "exposure": "log2", "clips": [1, math.inf]}
    with pytest.raises(UnknownName, match="no row is in the arm 'treatment'"):
        clip_tuning(read_logs(df), policy="new", arm="treatment", **kw)
    assert clip_tuning(read_logs(df), policy="new", **kw).n_sessions == 2


def test_labels_compare_as_given_not_as_numpy_strings():
    """A list mixing numbers and labels is read as objects: numpy's default would turn the number 1 into the
    string '1' (np.asarray([1, "control"]) is ['1', 'control']), making it the arm '1'."""
    assert np.asarray([1, "control"]).tolist() == ["1", "control"]          # what is avoided
    assert offline_mask([1, "control", "treatment"]).tolist() == [False, True, False]
    with pytest.raises(UnknownName) as err:
        offline_mask([1, "control", "treatment"], arm="1")
    assert str(err.value) == ("no row is in the arm '1': the 3 rows are in other arms "
                              "(arm='control' reads the logging policy's rows, arm=None every row)")
    assert offline_mask([1, "control", 1.5], arm=1).tolist() == [True, False, False]


def test_a_missing_label_is_in_no_arm_whatever_the_dtype():
    """pd.NA in a nullable string column compares as <NA>: it is in no arm, as None in an object column and NaN
    in a str column are (the mask was a ValueError for the nullable column)."""
    for dtype in ("string", object, "str"):
        s = pd.Series(["control", None, "treatment"], dtype=dtype)
        assert offline_mask(s).tolist() == [True, False, False], dtype
        assert offline_mask(s, arm="treatment").tolist() == [False, False, True], dtype
        assert offline_mask(s, arm="treatment").dtype == bool
    # only missing and treatment labels: no control row, so every row (the logging policy's)
    assert offline_mask(pd.Series([None, "treatment"], dtype="string")).tolist() == [True, True]


def test_offline_rows_returns_the_frame_itself_when_every_row_is_offline():
    """No copy of the logs when the mask keeps every row (all control, or no control row at all)."""
    all_control = pd.DataFrame({"arm": ["control", "control"], "x": [1, 2]})
    assert offline_rows(all_control) is all_control
    only_treatment = pd.DataFrame({"arm": ["treatment"], "x": [1]})
    assert offline_rows(only_treatment) is only_treatment
    mixed = pd.DataFrame({"arm": ["control", "treatment"], "x": [1, 2]}, index=[5, 7])
    kept = offline_rows(mixed)
    assert kept is not mixed and kept.index.tolist() == [5] and kept["x"].tolist() == [1]
