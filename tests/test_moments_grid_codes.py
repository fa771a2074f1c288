"""The moments file's across-row rules (``moments_checks.check_grid``) decided on codes of the labels' distinct
values (``_grid_holds``) give the same verdict as the text comparison of every row: on valid moments of every
label type the codes decide (the fast path is taken), and on every damaged copy the outcome — passes, or the same
error message — is the one the text comparison alone gives."""

from __future__ import annotations

import datetime
import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from security_support import small_logs

from offeval_core import moments_checks
from offeval_core.engine import Grid, reduce
from offeval_core.errors import MomentsValidationError
from offeval_core.logs import read_logs

GRIDS = {
    "zero": Grid(rewards=("like", "watch"), policies=("treatment",), discounts=("log2",), exposures=("log2",),
                 clips=(1.0, 3.0, math.inf)),
    "drop": Grid(rewards=("like",), policies=("treatment",), discounts=("log2",), exposures=("log2",),
                 clips=(2.0, math.inf), ndcg_rule="drop"),
}


@pytest.fixture(scope="module")
def moments():
    logs = read_logs(small_logs())
    return {rule: reduce(logs, grid) for rule, grid in GRIDS.items()}


def outcome(off: pd.DataFrame, on: pd.DataFrame, grid: Grid, *, codes: bool) -> str | None:
    """None when ``check_grid`` passes, else its message; ``codes=False`` turns the code path off."""
    with pytest.MonkeyPatch.context() as mp:
        if not codes:
            mp.setattr(moments_checks, "_grid_holds", lambda *a: False)
        try:
            moments_checks.check_grid(off.copy(), on.copy(), grid, "f.parquet")
        except MomentsValidationError as exc:
            return str(exc)
    return None


def keys_of(off, on):
    return [k for k in moments_checks.GROUP_KEYS if k in off.columns and k in on.columns]


def retyped(df: pd.DataFrame, how: str) -> pd.DataFrame:
    """The group labels of ``df`` written another way, as other exports write them."""
    df = df.copy()
    if how == "text":
        for k in ("experiment_id", "day", "arm"):
            df[k] = df[k].astype(str)
    elif how == "dates":
        df["day"] = [datetime.date(2026, 3, int(d)) for d in df["day"].astype(int)]
    elif how == "categories":
        for k in ("experiment_id", "arm", "policy", "metric"):
            if k in df.columns:
                df[k] = df[k].astype(str).astype("category")
    elif how == "numbers":
        df["experiment_id"] = 7
    return df


@pytest.mark.parametrize("how", ["as read", "text", "dates", "categories", "numbers"])
@pytest.mark.parametrize("rule", ["zero", "drop"])
def test_valid_moments_are_decided_on_codes(moments, rule, how):
    m = moments[rule]
    off, on = (m.offline, m.online) if how == "as read" else (retyped(m.offline, how), retyped(m.online, how))
    groups = len(on) // len(m.grid.rewards)  # (day, arm): the two arms ran on different days
    assert groups == 2 and len(off) == groups * len(m.grid.rewards) * len(m.grid.clips) * 2 * 2  # × policies × metrics
    assert moments_checks._grid_holds(off, on, m.grid, keys_of(off, on)) is True
    moments_checks.check_grid(off, on, m.grid, "f.parquet")  # passes


def damage(off: pd.DataFrame, on: pd.DataFrame, op: str, i: int, value) -> tuple[pd.DataFrame, pd.DataFrame]:
    off, on = off.copy(), on.copy()
    if not len(off) or not len(on):
        return off, on
    i_off, i_on = i % len(off), i % len(on)
    if op == "drop offline row":
        off = off.drop(index=off.index[i_off]).reset_index(drop=True)
    elif op == "repeat offline row":
        off = pd.concat([off, off.iloc[[i_off]]], ignore_index=True)
    elif op == "repeat online row":
        on = pd.concat([on, on.iloc[[i_on]]], ignore_index=True)
    elif op == "drop every online row":
        on = on.iloc[:0]
    elif op == "drop online row":
        on = on.drop(index=on.index[i_on]).reset_index(drop=True)
    elif op == "offline count":
        off.loc[i_off, "n"] = off.loc[i_off, "n"] + value
    elif op == "online count":
        on.loc[i_on, "n"] = on.loc[i_on, "n"] + value
    elif op.startswith("offline label "):
        col = op.removeprefix("offline label ")
        off[col] = off[col].astype(object)
        off.loc[i_off, col] = value
    elif op.startswith("online label "):
        col = op.removeprefix("online label ")
        on[col] = on[col].astype(object)
        on.loc[i_on, col] = value
    elif op == "offline clip":
        off.loc[i_off, "clip"] = value
    return off, on


OPS = ["drop offline row", "repeat offline row", "repeat online row", "drop online row", "drop every online row",
       "offline count",
       "online count", "offline clip", *(f"offline label {c}" for c in ("experiment_id", "day", "arm", "reward",
                                                                       "discount", "exposure", "policy", "metric")),
       *(f"online label {c}" for c in ("experiment_id", "day", "arm", "reward"))]
VALUES = st.one_of(st.sampled_from(["like", "watch", "log2", "treatment", "logging", "dcg", "ndcg", "e1", "e2",
                                    "control", "1", "2", "nope", "", "nan"]),
                   st.sampled_from([1, 2, 3, 0, -1, 1.0, 2.0, 0.0, -0.0, 3.0, math.inf, math.nan, True, None]),
                   st.just(datetime.date(2026, 3, 1)))


@settings(max_examples=300, deadline=None)
@given(rule=st.sampled_from(["zero", "drop"]), how=st.sampled_from(["as read", "text", "dates", "categories"]),
       ops=st.lists(st.tuples(st.sampled_from(OPS), st.integers(0, 10_000), VALUES), min_size=1, max_size=3))
def test_damaged_moments_get_the_text_comparisons_verdict(moments, rule, how, ops):
    m = moments[rule]
    off, on = (m.offline, m.online) if how == "as read" else (retyped(m.offline, how), retyped(m.online, how))
    for op, i, value in ops:
        if op in ("offline count", "online count") and (not isinstance(value, int) or isinstance(value, bool)):
            continue  # (counts that are not integers are refused row by row before the grid is checked)
        if op == "offline clip" and (not isinstance(value, int | float) or isinstance(value, bool)):
            continue
        off, on = damage(off, on, op, i, value)
    if "clip" in off.columns and not (pd.to_numeric(off["clip"], errors="coerce") >= 1).all():
        return  # read_moments refuses the clip column before the grid is checked
    assert outcome(off, on, m.grid, codes=True) == \
        outcome(off, on, m.grid, codes=False)


def test_each_rule_is_decided_on_codes_as_in_text(moments):
    """One damage per rule, by hand: the code path refuses it, and the message is the text comparison's."""
    m = moments["zero"]
    cases = {
        "repeat offline row": damage(m.offline, m.online, "repeat offline row", 5, None),
        "repeat online row": damage(m.offline, m.online, "repeat online row", 1, None),
        "offline label reward": damage(m.offline, m.online, "offline label reward", 0, "nope"),
        "drop online row": damage(m.offline, m.online, "drop online row", 0, None),
        "drop every online row": damage(m.offline, m.online, "drop every online row", 0, None),
        "offline count": damage(m.offline, m.online, "offline count", 3, 1),
        # the same text written as a number in one part and as text in the other is two groups
        "online label experiment_id": damage(m.offline, m.online, "online label experiment_id", 0, 1),
    }
    messages = {}
    for name, (off, on) in cases.items():
        assert moments_checks._grid_holds(off, on, m.grid, keys_of(off, on)) is False, name
        messages[name] = outcome(off, on, m.grid, codes=True)
        assert messages[name] == outcome(off, on, m.grid, codes=False)
    assert "repeat the same group and variant" in messages["repeat offline row"]
    # the drop rule: an nDCG row may count fewer sessions than its group, never more
    drop = moments["drop"]
    off, on = drop.offline.copy(), drop.online
    row = int(np.flatnonzero((off["metric"] == "ndcg").to_numpy())[0])
    n_on = int(on.loc[(on["day"] == off.loc[row, "day"]) & (on["arm"] == off.loc[row, "arm"]), "n"].iloc[0])
    for n, holds in ((n_on, True), (n_on - 3, True), (n_on + 1, False)):
        off.loc[row, "n"] = n
        assert moments_checks._grid_holds(off, on, drop.grid, keys_of(off, on)) is holds, n
        assert outcome(off, on, drop.grid, codes=True) == outcome(off, on, drop.grid, codes=False)
    assert messages["offline count"].startswith("f.parquet: not a valid moments file: offline counts 'n' at rows 4 ")


def test_labels_the_codes_cannot_decide_go_to_the_text_comparison(moments):
    m = moments["zero"]
    off = m.offline.copy()
    off["discount"] = off["discount"].astype(object)
    off.loc[0, "discount"] = None  # a missing label
    assert moments_checks._text_codes(off["discount"]) is None
    assert moments_checks._text_codes(pd.Series([1.0, -0.0, 0.0])) is None  # 0.0 and -0.0: one value, two texts
    assert moments_checks._text_codes(pd.Series([1, "1"], dtype=object)) is None  # mixed objects
    codes, texts = moments_checks._text_codes(pd.Series(["b", "a", "b"]))
    assert codes.tolist() == [0, 1, 0] and texts == ["b", "a"]
    codes, texts = moments_checks._text_codes(pd.Series([datetime.date(2026, 3, 2)] * 2, dtype=object))
    assert codes.tolist() == [0, 0] and texts == ["2026-03-02"]
    (a, b), texts = moments_checks._shared_codes((np.array([0, 1, 0]), ["x", "y"]), (np.array([0, 0]), ["y"]))
    assert a.tolist() == [0, 1, 0] and b.tolist() == [1, 1] and texts == ["x", "y"]
