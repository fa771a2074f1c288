"""Every way in refuses the same logs with the same messages and computes the same numbers: for random logs
written to Parquet, ``read_logs`` → reduce → estimates equals ``offeval reduce`` (the checks and the reduce run
as DuckDB queries over the file) → moments → estimates, and both refuse the same invalid files with the same
problem list (data rows and quoted values included)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from offeval_core.engine import Grid, connect, reduce, source_from_files
from offeval_core.errors import LogValidationError
from offeval_core.estimators import aggregate, estimate_from_row, select
from offeval_core.logs import read_logs

# each hostile value replaces one cell of a valid file; None is a null in Parquet
HOSTILE = {
    "rank": [0, -5, 1.5, None, 300_000_000, float("inf"), float("nan"), "duplicate"],
    "rank__new": [0, -5, 1.5, 300_000_000, "duplicate"],
    "like": [-1.0, float("nan"), float("inf"), None],
    "arm": ["ctrl", "Control", " treatment ", None, "CONTROL"],
    "session_id": [None],
    "day": [None, "mix"],
    "segment": [None, "mix"],
    "logging_propensity": [0.0, 1.5, None],
}


@st.composite
def logs_frames(draw, *, hostile: bool):
    n_sessions = draw(st.integers(1, 6))
    rows = []
    for s in range(n_sessions):
        length = draw(st.integers(1, 4))
        order = draw(st.permutations(list(range(1, 7))))
        arm = draw(st.sampled_from(["control", "treatment"]))
        for r in range(1, length + 1):
            rows.append({"session_id": f"s{s}", "rank": r, "like": float(draw(st.sampled_from([0, 0, 1, 2]))),
                         "arm": arm, "day": 1 + s % 2, "segment": "gu"[s % 2], "logging_propensity": 0.5,
                         "rank__new": order[r - 1] if draw(st.booleans()) or r == 1 else None})
    df = pd.DataFrame(rows)
    if draw(st.booleans()):
        df = df.drop(columns="logging_propensity")
    if hostile:
        for _ in range(draw(st.integers(1, 2))):
            col = draw(st.sampled_from([c for c in HOSTILE if c in df.columns]))
            value = draw(st.sampled_from(HOSTILE[col]))
            i = draw(st.integers(0, len(df) - 1))
            df = _spoil(df, col, i, value)
    return df


def _spoil(df: pd.DataFrame, col: str, i: int, value) -> pd.DataFrame:
    df = df.copy()
    if value == "duplicate":  # the row's target rank repeats another row's of the same session
        same = np.flatnonzero((df["session_id"] == df.loc[i, "session_id"]).fillna(False).to_numpy())
        if not len(same):  # the row's session id is empty: no session to repeat a rank in
            return df
        value = df.loc[same[0], col] if same[0] != i else df.loc[same[-1], col]
        value = 1 if pd.isna(value) else value
    elif value == "mix":  # a session key that changes within a session (when the session has several rows)
        value = 99 if df[col].dtype.kind in "iuf" else "other"
    if df[col].dtype.kind in "iu" and not (isinstance(value, int) and not isinstance(value, bool)):
        df[col] = df[col].astype(object if isinstance(value, str) or value is None else float)
    elif df[col].dtype.kind == "f" and isinstance(value, str):
        df[col] = df[col].astype(object)
    df.loc[i, col] = value
    if df[col].dtype == object:  # a number in a text column is its text, as a file holds it (Parquet has no mixed column)
        df[col] = df[col].map(lambda v: v if v is None or isinstance(v, str) or (isinstance(v, float) and math.isnan(v))
                              else str(v))
    return df


def _problems(fn):
    try:
        fn()
    except LogValidationError as exc:
        return exc.problems
    return None


GRID = Grid(rewards=("like",), policies=("new",), discounts=("pbm", "log2"), exposures=("pbm",),
            clips=(1.0, 4.0, math.inf))


@pytest.fixture(scope="module")
def duckdb():
    return connect(threads=1)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                  HealthCheck.function_scoped_fixture])
@given(df=logs_frames(hostile=True))
def test_read_logs_and_reduce_refuse_the_same_files_with_the_same_problems(df, tmp_path_factory, duckdb):
    path = tmp_path_factory.mktemp("parity") / "logs.parquet"
    df.to_parquet(path, index=False)
    expected = _problems(lambda: read_logs(path, name="logs.parquet"))
    got = _problems(lambda: source_from_files(path, duckdb))
    if expected is not None:
        expected = [p.replace(str(path), "logs.parquet") for p in expected]
    if got is not None:
        got = [p.replace(str(path), "logs.parquet") for p in got]
    assert got == expected


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                  HealthCheck.function_scoped_fixture])
@given(df=logs_frames(hostile=False))
def test_reduce_of_the_file_gives_the_estimates_of_read_logs(df, tmp_path_factory, duckdb):
    path = tmp_path_factory.mktemp("parity") / "logs.parquet"
    df.to_parquet(path, index=False)
    a = reduce(read_logs(path), GRID)
    b = reduce(source_from_files(path, duckdb), GRID)
    for metric in ("dcg", "ndcg"):
        for policy in ("new", None):
            for clip in GRID.clips:
                rows = [aggregate(select(m, reward="like", policy=policy, metric=metric, discount="log2",
                                         exposure="pbm", clip=clip)).iloc[0] for m in (a, b)]
                for diff in ((False, True) if policy else (False,)):
                    x, y = (estimate_from_row(r, metric=metric, level=0.95, diff=diff) for r in rows)
                    assert y.value == pytest.approx(x.value, rel=1e-12, abs=1e-12)
                    if not math.isnan(x.stderr):
                        assert y.stderr == pytest.approx(x.stderr, rel=1e-9, abs=1e-12)


@pytest.mark.parametrize("ranks", [
    [70, 70, 1, 2], [70, 132, 1, 2],        # the second 62-bit word of a session's bitset
    [62, 124, 1, 63], [62, 62, 1, 63],      # the last bit of a word and the first of the next
    [1000, 1000, 1, 2], [1000, 999, 1, 2],  # beyond 8 words: the repeated pairs are grouped instead
])
def test_repeated_target_ranks_are_found_at_every_size_of_rank(ranks, tmp_path, duckdb):
    df = pd.DataFrame({"session_id": ["a", "a", "b", "b"], "rank": [1, 2, 1, 2], "like": [1.0, 0.0, 1.0, 1.0],
                       "rank__new": ranks})
    path = tmp_path / "logs.parquet"
    df.to_parquet(path, index=False)
    expected = _problems(lambda: read_logs(path))
    assert _problems(lambda: source_from_files(path, duckdb)) == expected
    assert (expected is not None) == (ranks[0] == ranks[1])
