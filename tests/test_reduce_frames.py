"""The last steps of the reduce on its frames (engine.reduction): the rows sorted by their variant columns with
missing values last, and the group codes replaced by the groups' keys; by hand and against pandas' own
sort_values and merge (what the reduce used before)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from offeval_core.engine.reduction import _expand_groups, _tidy

KEYS = ["experiment_id", "day", "arm", "segment"]


def _frame():
    return pd.DataFrame({
        "experiment_id": ["e2", "e1", "e1", "e1", "e1", "e1", "e1"],
        "day": ["d1"] * 7,
        "arm": ["control"] * 7,
        "segment": ["s", "s", "s", None, "s", "s", "s"],
        "reward": ["like"] * 7,
        "clip": [1.0, np.inf, 1.0, 1.0, np.nan, 2.0, 2.0],
        "policy": ["a", "a", "b", "a", "a", "a", "a"],
        "n": [1, 2, 3, 4, 5, 6, 7],
    })


def test_tidy_sorts_by_the_variant_columns_with_missing_values_last_and_keeps_ties_in_order():
    out = _tidy(_frame(), KEYS)
    # e1 before e2; in e1 segment 's' before the missing one; clip 1, 2, ∞, missing; rows 6 and 7 tie: kept in order
    assert out["n"].tolist() == [3, 6, 7, 2, 5, 4, 1]
    assert list(out.columns) == [*KEYS, "reward", "clip", "policy", "n"] and list(out.index) == list(range(7))
    shuffled = _frame().sample(frac=1, random_state=3).reset_index(drop=True)
    front = [*KEYS, "reward", "clip", "policy"]
    want = shuffled.sort_values(front, kind="stable").reset_index(drop=True)
    for k in ("experiment_id", "arm", "segment"):
        want[k] = want[k].astype(str)
    pd.testing.assert_frame_equal(_tidy(shuffled, KEYS), want, check_exact=True)
    assert len(_tidy(_frame().iloc[:0], KEYS)) == 0


def test_tidy_gives_categorical_keys_the_text_astype_gives_them_a_missing_key_included():
    """Categorical keys (as the engine's groups come back) are turned into text from their categories; a missing
    key stays missing, as astype(str) leaves it, never another category's text (a take of code -1 would give the
    last category)."""
    frame = _frame().assign(experiment_id=lambda f: pd.Categorical(f["experiment_id"], categories=["e2", "e1"]),
                            arm=lambda f: pd.Categorical([7, 7, 7, 7, 7, 7, 8]),
                            segment=lambda f: pd.Categorical(f["segment"], categories=["s", "t"]))
    out = _tidy(frame, KEYS)
    want = frame.sort_values([*KEYS, "reward", "clip", "policy"], kind="stable").reset_index(drop=True)
    for k in ("experiment_id", "arm", "segment"):
        want[k] = want[k].astype(str)
    pd.testing.assert_frame_equal(out, want, check_exact=True)
    assert out["segment"].isna().tolist() == [False] * 5 + [True, False] and "t" not in set(out["segment"])
    assert out["arm"].tolist() == ["7"] * 6 + ["8"]
    assert str(out["experiment_id"].dtype) == "str"


def test_expand_groups_takes_each_rows_keys_by_its_code():
    groups = pd.DataFrame({"g": [10, 11, 12], "experiment_id": ["e1", "e2", "e3"], "arm": ["control", "treatment",
                                                                                            "control"]})
    df = pd.DataFrame({"g": [12, 10, 12, 11], "n": [1, 2, 3, 4]})
    out = _expand_groups(df, groups)
    assert out.to_dict("list") == {"experiment_id": ["e3", "e1", "e3", "e2"],
                                   "arm": ["control", "control", "control", "treatment"], "n": [1, 2, 3, 4]}
    pd.testing.assert_frame_equal(out, groups.merge(df, on="g", how="right").drop(columns="g"), check_exact=True)
    # a code without a group (the reduce makes none) is an internal error, never rows with missing keys
    with pytest.raises(RuntimeError, match="^internal error: group code 99 has no group$"):
        _expand_groups(pd.DataFrame({"g": [10, 99], "n": [1, 2]}), groups)
