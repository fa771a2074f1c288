"""The offline-rows rule (offeval_core.arms): the control arm when the data have one, else every row."""

from __future__ import annotations

import numpy as np
import pandas as pd

from offeval_core.arms import offline_mask, offline_rows


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
