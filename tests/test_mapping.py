"""Column mapping: patterns, guesses for common names, the rank-looking-reward warning, user names kept."""

from __future__ import annotations

import pandas as pd
import pytest

from offeval_core.errors import LogValidationError
from offeval_core.logs import read_logs
from offeval_core.mapping import expand_mapping, guess_mapping, parse_mapping, rank_like_rewards
from tests.user_names import MAP, POLICIES, user_named

_ALL = pd.read_parquet("data/logs.parquet")
DEMO = _ALL[_ALL["session_id"] % 40 == 0].reset_index(drop=True)  # every arm, test and day


def test_pattern_maps_every_policy_column_and_nothing_else():
    cols = ["visit", "pos", "clicked", "pos_production", "pos_cand_01", "posx"]
    got = expand_mapping(cols, parse_mapping(MAP))
    assert got == {"session_id": "visit", "rank": "pos", "rank__production": "pos_production",
                   "rank__cand_01": "pos_cand_01"}


def test_explicit_entry_wins_over_pattern():
    got = expand_mapping(["pos", "pos_a", "pos_b", "other"], {"rank__a": "other", "rank__*": "pos_*"})
    assert got == {"rank__a": "other", "rank__b": "pos_b"}


@pytest.mark.parametrize("text, message", [
    ("rank", "--map entries must look like schema_name=your_column, got 'rank'"),
    ("rank*=pos_*", "a pattern entry looks like rank__*=pos_*"),
    ("rank__*=pos", "a pattern entry looks like rank__*=pos_*"),
    ("session_*=visit_*", "a pattern entry looks like rank__*=pos_*"),
])
def test_malformed_entries_are_named(text, message):
    with pytest.raises(ValueError, match=message.replace("*", r"\*")):
        parse_mapping(text)


def test_pattern_matching_nothing_is_a_validation_error_naming_the_columns():
    df = pd.DataFrame({"session_id": [1, 1], "rank": [1, 2], "click": [0, 1]})
    with pytest.raises(LogValidationError) as e:
        read_logs(df, columns={"rank__*": "pos_*"})
    assert e.value.problems == ["mapping rank__*=pos_*: no column matches 'pos_*' "
                                "(columns found: session_id, rank, click)"]


def test_guesses_common_names_but_not_arm_without_control_treatment():
    df = pd.DataFrame({"Visit": [1], "position": [1], "variant": ["A"], "date": ["2024-01-01"],
                       "test": ["t1"], "user_type": ["guest"], "pos_x": [1]})
    got = guess_mapping(df)
    assert got == {"session_id": "Visit", "rank": "position", "day": "date", "experiment_id": "test",
                   "segment": "user_type"}
    # rank as text is no rank; the policy guess needs the rank column's prefix
    assert "rank" not in guess_mapping(pd.DataFrame({"pos": ["top"]}))


def test_rank_like_rewards_are_positive_integers_on_every_row():
    df = pd.DataFrame({"click": [0, 1, 0], "ranks": [1, 2, 3], "two": [1, 2, 1], "watch": [1.5, 2.0, 3.0],
                       "count": [0, 3, 4]})
    assert rank_like_rewards(df, list(df.columns)) == ["ranks"]


def test_user_named_demo_maps_to_the_same_logs_as_the_schema_named_one():
    """The acceptance file: with the pattern map and guesses, the user's file reads as the demo does."""
    ref = read_logs(DEMO.drop(columns=["item_id", "watch_time"]))
    logs = read_logs(user_named(DEMO), columns=parse_mapping(MAP), guess=True)
    assert logs.policies == POLICIES
    assert logs.rewards == ("clicked", "completed")
    assert logs.has_arms
    assert logs.n_sessions == ref.n_sessions
    assert list(logs.sessions["experiment_id"]) == list(ref.sessions["experiment_id"])
    assert (logs.frame["rank__cand_03"].to_numpy() == ref.frame["rank__cand_03"].to_numpy()).all()
    assert (logs.frame["clicked"].to_numpy() == ref.frame["like"].to_numpy()).all()
    assert logs.user_name("experiment_id") == "test" and logs.schema_name("variant") == "arm"
    assert any(n.startswith("guessed column mapping: day=date; experiment_id=test; arm=variant; "
                            "segment=user_type") for n in logs.notes), logs.notes
    assert not any("look like ranks" in n for n in logs.notes)


def test_unmapped_policy_columns_are_left_out_of_the_rewards_with_a_hint():
    """Policy rank columns that were not mapped look like ranks (whole numbers from 1 on every row): they are no
    rewards; the reading says so and how to map them."""
    logs = read_logs(user_named(DEMO), columns={"session_id": "visit", "rank": "pos", "arm": "variant"})
    assert logs.rewards == ("clicked", "completed") and logs.policies == ()
    col = logs.reading.of("pos_production")
    assert (col.role, col.why) == ("ignored", "looks like ranks (whole numbers from 1 on every row, never 0), "
                                              "not a reward")
    assert col.hint.field == "rank__*"
    assert logs.reading.of("clicked").why == "named like a reward"
