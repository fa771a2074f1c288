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
