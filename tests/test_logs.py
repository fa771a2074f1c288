"""Reading and validating ranking logs: real files, column mappings, and the exact messages for bad input."""

import json

import numpy as np
import pandas as pd
import pytest

from offeval_core.cli import main
from offeval_core.logs import LogValidationError, read_logs, summarize
from offeval_core.mapping import parse_mapping

GOOD = pd.DataFrame({
    "session_id": ["b", "b", "a", "a", "a"],
    "rank": [2, 1, 1, 3, 2],
    "item_id": [10, 11, 12, 13, 14],
    "click": [0, 1, 1, 0, 1],
    "rank__new": [1, 2, 3, 1, 2],
    "day": ["2026-03-02"] * 5,
    "arm": ["treatment", "treatment", "control", "control", "control"],
})


def test_reads_sorts_and_encodes():
    logs = read_logs(GOOD)
    f = logs.frame
    assert list(f["session_id"]) == ["a", "a", "a", "b", "b"]
    assert list(f["rank"]) == [1, 2, 3, 1, 2]
    assert list(f["click"]) == [1.0, 1.0, 0.0, 1.0, 0.0]
    assert list(f["rank__new"]) == [3, 2, 1, 2, 1]
    assert f["rank"].dtype == np.int32 and f["click"].dtype == np.float64
    assert logs.rewards == ("click",) and logs.policies == ("new",)
    assert list(logs.sessions["length"]) == [3, 2]
    assert list(logs.sessions["arm"]) == ["control", "treatment"]
    assert logs.max_rank == 3


@pytest.mark.parametrize("suffix", ["csv", "parquet"])
def test_reads_real_files_with_a_mapping(tmp_path, suffix):
    df = GOOD.rename(columns={"session_id": "visit", "rank": "pos"})
    path = tmp_path / f"logs.{suffix}"
    df.to_csv(path, index=False) if suffix == "csv" else df.to_parquet(path)
    logs = read_logs(path, columns=parse_mapping("session_id=visit, rank=pos"))
    assert logs.n_rows == 5 and logs.n_sessions == 2 and logs.source == str(path)
    assert float(logs.frame["click"].sum()) == 3.0


def test_parse_mapping_rejects_malformed_entries():
    with pytest.raises(ValueError, match=r"--map entries must look like schema_name=your_column, got 'rank'"):
        parse_mapping("rank")


def df(**cols):
    base = {"session_id": [1, 1, 2], "rank": [1, 2, 1], "click": [0, 1, 0]}
    base.update(cols)
    return pd.DataFrame(base)


BAD = [
    (df().rename(columns={"rank": "pos"}),
     "missing required column 'rank' (columns found: session_id, pos, click); if your logs call it "
     "differently, map your column to 'rank'"),
    (df(session_id=["a", "a", "a"], rank=[1, 1, 2]),
     "each (session_id, rank) must appear once, found duplicates: session 'a' rank 1 (data rows 1 and 2)"),
    (df(rank=[1, 0, -3]), "column 'rank' must hold positive integers (1 = top position); found 0, -3 at data rows 2, 3"),
    (df(rank=[1, 2.5, 1]), "column 'rank' must hold positive integers (1 = top position); found 2.5 at data row 2"),
    (df(rank=["1", "two", "1"]), "column 'rank' must hold positive integers; found non-numbers 'two' at data row 2"),
    (df(click=[0, np.nan, 1]),
     "reward column 'click' must hold finite numbers (no NaN, empty or inf); found nan at data row 2"),
    (df(click=[0, np.inf, 1]),
     "reward column 'click' must hold finite numbers (no NaN, empty or inf); found inf at data row 2"),
    (df(click=[0, -1, 1]),
     "reward column 'click' must be non-negative (DCG and nDCG assume gains ≥ 0); found -1 at data row 2"),
    (df(click=["0", "yes", "1"]), "reward column 'click' must be numeric; found 'yes' at data row 2"),
    (df(arm=["control", "control", "B"]),
     "column 'arm' has the labels 'B', 'control': say which label is the control arm and which the treatment arm"),
    (df(arm=["control", "treatment", "control"]),
     "column 'arm' must be the same on every row of a session; session 1 has 'control' and 'treatment' (data row 2)"),
    (df(logging_propensity=[0.5, 0.0, 1.0]),
     "column 'logging_propensity' must hold probabilities in (0, 1]; found 0 at data row 2"),
    (df(target_propensity__new=[1.5, 0.2, 0.1]),
     "column 'target_propensity__new' must hold probabilities in [0, 1]; found 1.5 at data row 1"),
    (df(rank__new=[0, 1, 1]), "column 'rank__new' must hold positive integers (1 = top position); found 0 at data row 1"),
    (df(click=["x", "y", "z"]),
     "no reward column: expected at least one numeric column besides the schema columns (columns found: "
     "session_id, rank, click)"),
    (pd.DataFrame({"session_id": [], "rank": [], "click": []}),
     "no data rows: the logs are empty (expected one row per viewed impression)"),
]


@pytest.mark.parametrize(("frame", "message"), BAD, ids=[m[:40] for _, m in BAD])
def test_bad_input_gets_the_exact_message(frame, message):
    with pytest.raises(LogValidationError) as info:
        read_logs(frame, name="logs.csv")
    assert info.value.problems == [message]
    assert str(info.value).startswith("logs.csv: 1 problem(s) in the logs:")


def test_a_wide_file_without_a_reward_names_30_columns_and_how_many_more():
    """An export with 200 constant columns: the message lists the first 30 column names and counts the rest,
    and the ignored columns the first 10 (a 10 000-column file once gave a 700 kB message)."""
    frame = pd.DataFrame({"session_id": [1, 1, 2], "rank": [1, 2, 1]}
                         | {f"c{i}": [0, 0, 0] for i in range(200)})
    with pytest.raises(LogValidationError) as info:
        read_logs(frame)
    [problem] = info.value.problems
    found = ", ".join(["session_id", "rank", *(f"c{i}" for i in range(28))])
    left = "; ".join(f"'c{i}' (the same value on every row: carries nothing to estimate)" for i in range(10))
    assert problem == ("no reward column: expected at least one numeric column besides the schema columns "
                       f"(columns found: {found} and 172 more); left out: {left} and 190 more")


def test_every_problem_is_reported_at_once_and_rows_are_capped():
    frame = df(rank=[0, 0, 0], click=[np.nan, 1, 1]).loc[[0, 1, 2] * 3].reset_index(drop=True)
    with pytest.raises(LogValidationError) as info:
        read_logs(frame)
    assert info.value.problems == [
        "column 'rank' must hold positive integers (1 = top position); found 0, 0, 0, 0, 0 at data rows "
        "1, 2, 3, 4, 5 and 4 more",
        "reward column 'click' must hold finite numbers (no NaN, empty or inf); found nan, nan, nan at data rows 1, 4, 7",
    ]


def test_unknown_mapping_reward_and_policy_names():
    with pytest.raises(LogValidationError) as info:
        read_logs(df(), columns={"rank": "position"})
    assert info.value.problems == [
        "column mapping rank=position: the logs have no column 'position' (columns found: session_id, rank, click)"
    ]
    with pytest.raises(LogValidationError) as info:
        read_logs(df(), rewards=["like"])
    assert info.value.problems == ["unknown reward 'like': no such column (columns found: session_id, rank, click)"]
    logs = read_logs(df(), name="x.csv")
    with pytest.raises(ValueError, match=r"^unknown reward 'like'; the logs x.csv have reward columns: click$"):
        logs.check_reward("like")
    with pytest.raises(ValueError, match=r"unknown policy 'new': the logs x.csv have no column 'rank__new' "
                                         r"\(policies found: none\)"):
        logs.check_policy("new")


def test_empty_and_unreadable_files(tmp_path):
    empty = tmp_path / "empty.csv"
    empty.write_bytes(b"")
    with pytest.raises(LogValidationError) as info:
        read_logs(empty)
    assert info.value.problems == ["the file is empty (0 bytes); expected a header and data rows"]
    header_only = tmp_path / "header.csv"
    header_only.write_text("session_id,rank,click\n")
    with pytest.raises(LogValidationError) as info:
        read_logs(header_only)
    assert info.value.problems == ["no data rows: the logs are empty (expected one row per viewed impression)"]
    broken = tmp_path / "broken.parquet"
    broken.write_bytes(b"this is not parquet")
    with pytest.raises(LogValidationError) as info:
        read_logs(broken)
    assert info.value.problems[0].startswith("cannot read the file: ")
    with pytest.raises(FileNotFoundError, match="no such file or directory"):
        read_logs(tmp_path / "missing.csv")
    other = tmp_path / "logs.xlsx"
    other.write_text("x")
    with pytest.raises(LogValidationError) as info:
        read_logs(other)
    assert info.value.problems == ["unsupported file type '.xlsx'; expected .csv, .csv.gz, .tsv or .parquet"]


def test_defaults_and_notes_for_optional_columns():
    logs = read_logs(df(note=["a", "b", "c"]))
    assert set(logs.sessions["experiment_id"]) == {"all"} and set(logs.sessions["arm"]) == {"control"}
    assert logs.reading.of("note").role == "ignored" and logs.reading.of("note").why == "text, not a number"
    assert "no 'day' column: every row is treated as day = 1" in logs.notes


def test_summary_counts():
    s = summarize(read_logs(GOOD))
    assert (s.rows, s.sessions, s.arms, s.policies) == (5, 2, {"control": 1, "treatment": 1}, ("new",))
    assert s.reward_rates == {"click": 0.6}
    assert s.sessions_with_reward == {"click": 1.0}
    assert s.mean_length == 2.5


def test_validate_command_exit_status_and_report(tmp_path, capsys):
    good = tmp_path / "good.csv"
    GOOD.to_csv(good, index=False)
    assert main(["validate", str(good)]) == 0
    out = capsys.readouterr().out
    assert f"{good}: valid ranking logs" in out and "sessions:           2" in out
    assert "reward rate per impression: click 60.00%" in out
    bad = tmp_path / "bad.csv"
    df(rank=[1, 0, 1]).to_csv(bad, index=False)
    assert main(["validate", str(bad), "--json"]) == 2
    report = json.loads(capsys.readouterr().out)
    assert report == {"source": str(bad), "valid": False, "problems": [
        "column 'rank' must hold positive integers (1 = top position); found 0 at data row 2"]}
