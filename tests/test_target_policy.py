"""The default target policy is never the logging policy when another policy exists."""

from __future__ import annotations

import pandas as pd
import pytest

import offeval_core as oe
from offeval_core.engine import Grid, reduce
from offeval_core.logs import read_logs
from offeval_core.target_policy import choose_target_policy, target_policies
from tests.export_fixtures import demo_sample, open_bandit_like, team_export


@pytest.mark.parametrize("policies, logging, expected", [
    (["production", "treatment", "cand_01"], ["production"], "treatment"),
    (["current", "ranker_v2", "ranker_v3"], ["current"], "ranker_v2"),
    (["ranker_v2", "current"], ["current"], "ranker_v2"),
    (["treatment", "b"], ["treatment"], "b"),  # a 'treatment' equal to the logged ranks is no default either
    (["a", "b"], [], "a"),
    (["production"], ["production"], "production"),  # the only policy: it is all there is
    ([], [], None),
])
def test_the_rule(policies, logging, expected):
    assert choose_target_policy(policies, logging=logging) == expected


def _logs(**policies):
    """Two control sessions and one treatment session; the policies' ranks given per row."""
    df = pd.DataFrame({"session_id": [1, 1, 2, 2, 3, 3], "rank": [1, 2, 1, 2, 1, 2], "click": [1, 0, 0, 1, 1, 0],
                       "arm": ["control"] * 4 + ["treatment"] * 2, **policies})
    return read_logs(df)


def test_the_logging_policy_is_the_one_whose_ranks_equal_the_logged_ranks_on_control_rows():
    # 'current' equals the logged ranks on the control sessions (not on the treatment session, logged by another
    # policy); 'alt' differs on one control row
    logs = _logs(rank__current=[1, 2, 1, 2, 2, 1], rank__alt=[1, 2, 2, 1, 1, 2])
    t = target_policies(logs)
    assert t.logging == ("current",) and t.default == "alt"
    assert t.reason == "no policy named treatment; the first policy that is not the logging policy (current is)"
    assert oe.default_target_policy(logs) == "alt"


def test_production_is_the_logging_policy_by_name_and_treatment_is_preferred():
    logs = _logs(rank__production=[2, 1, 2, 1, 2, 1], rank__x=[2, 1, 1, 2, 1, 2], rank__treatment=[1, 2, 2, 1, 2, 1])
    t = target_policies(logs)
    assert t.logging == ("production",) and t.default == "treatment" and t.reason == "the policy named treatment"


def test_propensity_policies_count_and_one_equal_to_the_logging_propensity_is_the_logging_policy():
    df = pd.DataFrame({"session_id": [1, 2, 3], "rank": [1, 1, 1], "click": [1, 0, 1],
                       "logging_propensity": [0.5, 0.25, 0.5], "target_propensity__same": [0.5, 0.25, 0.5],
                       "target_propensity__bts": [0.9, 0.05, 0.2]})
    t = target_policies(read_logs(df))
    assert (t.rank, t.propensity, t.logging, t.default) == ((), ("same", "bts"), ("same",), "bts")
    assert t.kind("bts") == "propensity"


def test_team_export_default_is_the_tested_ranker_and_moments_agree():
    export, _ = team_export(demo_sample(80))
    logs = read_logs(export, guess=True)
    t = target_policies(logs)
    assert (t.logging, t.default) == (("current",), "ranker_v2")
    m = reduce(logs, Grid(rewards=("clicked",), policies=logs.policies, discounts=("log2",), clips=(1.0, 64.0)))
    assert target_policies(m).logging == ("current",) and target_policies(m).default == "ranker_v2"


def test_open_bandit_shaped_log_defaults_to_its_propensity_policy():
    _, schema = open_bandit_like(400, both=True)
    assert oe.default_target_policy(read_logs(schema)) == "bts"
    assert target_policies(read_logs(schema)).reason == "no policy named treatment; the first target policy"


def test_demo_default_is_treatment_never_production():
    logs = read_logs(demo_sample(200))
    t = target_policies(logs)
    assert t.logging == ("production",) and t.default == "treatment"
    assert target_policies(["production", "cand_01"]).default == "cand_01"
