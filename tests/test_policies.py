"""The target policies of some data (offeval_core.policies): their kind, the ones that are the logging policy (named
like it, or equal to it on every offline row: ranks or propensities), and the one rule for the default target
policy — never the logging policy while another exists, 'treatment' when there is one, else the first other
policy; propensity policies count; logs, moments and policy names give the same answer."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from analyses_world import small_world
from hypothesis import given
from hypothesis import strategies as st

import offeval_core as oe
from offeval_core.engine import Grid, reduce
from offeval_core.logs import read_logs
from offeval_core.policies import (
    PROPENSITY_RTOL,
    TargetPolicies,
    choose_target_policy,
    default_target_policy,
    policy_kind,
    target_policies,
)
from tests.export_fixtures import demo_sample, open_bandit_like, team_export


def _logs(**extra):
    """Session 1 in the control arm, session 2 in the treatment arm; two rows each."""
    base = {"session_id": [1, 1, 2, 2], "rank": [1, 2, 1, 2], "click": [1, 0, 0, 1],
            "arm": ["control", "control", "treatment", "treatment"]}
    return read_logs(pd.DataFrame({**base, **extra}))


# ------------------------------------------------------------------------------------------ kinds


def test_rank_and_propensity_policies_are_listed_with_their_kind():
    logs = _logs(rank__prod=[1, 2, 2, 1], rank__new=[2, 1, 1, 2], logging_propensity=[0.5] * 4,
                 target_propensity__bts=[0.9, 0.1, 0.4, 0.6], target_propensity__new=[0.5] * 4)
    t = target_policies(logs)
    assert (t.rank, t.propensity) == (("prod", "new"), ("bts", "new"))
    assert t.all == ("prod", "new", "bts")   # rank policies first; 'new' once
    assert [t.kind(p) for p in t.all] == [policy_kind(logs, p) for p in t.all] == ["rank", "rank", "propensity"]
    assert t.kind(None) is None and policy_kind(logs, None) is None
    with pytest.raises(KeyError, match="unknown target policy 'other'; the data have prod, new, bts"):
        policy_kind(logs, "other")
    with pytest.raises(KeyError, match="unknown target policy 'other'; the data have prod, new, bts"):
        t.kind("other")


def test_a_target_propensity_without_logging_propensities_is_no_policy():
    logs = _logs(target_propensity__bts=[0.9, 0.1, 0.4, 0.6])
    t = target_policies(logs)
    assert (t.all, t.default, t.reason) == ((), None, "no target policy in these data")
    summary = oe.understand(logs).to_text()
    assert ("target policies:    none (no rank__<policy> column, and no target_propensity__<policy> column next to "
            "a logging_propensity column)") in summary


# ------------------------------------------------------------------------------------------ the logging policy


def test_logging_policies_are_found_on_the_offline_rows_only():
    # 'prod' equals the logged ranks on the control arm only (the treatment arm was logged by another policy);
    # 'same' copies the logging propensities on the control rows; 'bts' differs on one control row
    logs = _logs(rank__prod=[1, 2, 2, 1], rank__new=[2, 1, 1, 2], logging_propensity=[0.5, 0.5, 0.2, 0.8],
                 target_propensity__same=[0.5, 0.5, 0.9, 0.1], target_propensity__bts=[0.5, 0.4, 0.2, 0.8])
    t = target_policies(logs)
    assert t.logging == ("prod", "same") and t.default == "new"
    assert t.reason == "no policy named treatment; the first policy that is not the logging policy (prod, same are)"


def test_on_logs_without_arms_every_session_is_offline():
    logs = read_logs(pd.DataFrame({"session_id": [1, 1, 2], "rank": [1, 2, 1], "click": [1, 0, 1],
                                   "rank__a": [1, 2, 1], "rank__b": [1, 2, 2]}))
    t = target_policies(logs)
    assert (t.logging, t.default) == (("a",), "b")


def test_propensities_equal_to_the_logging_ones_within_the_relative_tolerance_are_the_logging_policy():
    lp = np.array([0.5, 0.25, 0.5])
    logs = read_logs(pd.DataFrame({"session_id": [1, 2, 3], "rank": [1, 1, 1], "click": [1, 0, 1],
                                   "logging_propensity": lp,
                                   "target_propensity__near": lp * (1 + PROPENSITY_RTOL / 2),
                                   "target_propensity__off": lp * (1 + 10 * PROPENSITY_RTOL),
                                   "target_propensity__bts": [0.9, 0.05, 0.2]}))
    t = target_policies(logs)
    assert (t.rank, t.propensity, t.logging, t.default) == ((), ("near", "off", "bts"), ("near",), "off")
    assert t.kind("bts") == "propensity"


def test_production_is_the_logging_policy_by_name_and_treatment_is_preferred():
    # 'production' differs from the logged ranks on the control session: it is the logging policy by its name
    logs = _logs(rank__production=[2, 1, 2, 1], rank__x=[2, 1, 1, 2], rank__treatment=[2, 1, 2, 1])
    t = target_policies(logs)
    assert t.logging == ("production",) and t.default == "treatment" and t.reason == "the policy named treatment"


def test_a_treatment_equal_to_the_logged_ranks_is_no_default_either():
    logs = _logs(rank__treatment=[1, 2, 2, 1], rank__b=[2, 1, 1, 2])
    t = target_policies(logs)
    assert (t.logging, t.default) == (("treatment",), "b")


def test_only_the_logging_policy_is_the_default_with_its_reason():
    t = target_policies(_logs(rank__production=[1, 2, 1, 2]))
    assert (t.logging, t.default) == (("production",), "production")
    assert t.reason == "production is the logging policy, and the data hold no other target policy"


def test_on_the_simulated_world_production_copies_the_logged_ranks_and_treatment_is_the_default():
    _, logs, _ = small_world()
    f, control = logs.frame, (logs.frame["arm"] == "control").to_numpy()
    assert np.array_equal(f["rank__production"].to_numpy()[control], f["rank"].to_numpy()[control])
    assert not np.array_equal(f["rank__treatment"].to_numpy()[control], f["rank"].to_numpy()[control])
    t = target_policies(logs)
    assert t.logging == ("production",) and t.default == "treatment"


def test_moments_give_the_same_answer_as_the_logs():
    export, _ = team_export(demo_sample(80))
    logs = read_logs(export, guess=True)
    t = target_policies(logs)
    assert (t.logging, t.default) == (("current",), "ranker_v2")   # 'current' is the logging ranker by its ranks
    m = reduce(logs, Grid(rewards=("clicked",), policies=logs.policies, discounts=("log2",), clips=(1.0, 64.0)))
    tm = target_policies(m)
    assert (tm.rank, tm.logging, tm.default, tm.reason) == (t.rank, t.logging, t.default, t.reason)


def test_policy_names_alone_know_the_logging_policy_by_name():
    t = target_policies(["production", "cand_01"])
    assert (t.rank, t.logging, t.default) == (("production", "cand_01"), ("production",), "cand_01")
    assert default_target_policy(["production", "cand_01"]) == "cand_01"


def test_open_bandit_shaped_log_defaults_to_its_propensity_policy():
    _, schema = open_bandit_like(400, both=True)
    logs = read_logs(schema)
    assert oe.default_target_policy(logs) == "bts"
    assert target_policies(logs).reason == "no policy named treatment; the first target policy"


def test_demo_default_is_treatment_never_production():
    t = target_policies(read_logs(demo_sample(200)))
    assert t.logging == ("production",) and t.default == "treatment"


# ------------------------------------------------------------------------------------------ the rule


@pytest.mark.parametrize(("policies", "logging", "expected"), [
    (["production", "ranker_v2", "ranker_v3"], ["production"], "ranker_v2"),   # no 'treatment': first other one
    (["production", "cand", "treatment"], ["production"], "treatment"),         # 'treatment' preferred
    (["ranker_v2", "current"], ["current"], "ranker_v2"),                       # the order of the file
    (["treatment", "cand"], ["treatment"], "cand"),                             # unless it is the logging policy
    (["bts"], [], "bts"),                                                       # a propensity policy counts
    (["a", "b"], [], "a"),
    (["logging", "a"], [], "a"),                                                # the logging policy's own name
    (["production"], ["production"], "production"),                            # nothing else: the logging policy
    ([], [], None),
])
def test_the_rule(policies, logging, expected):
    assert choose_target_policy(policies, logging=logging) == expected


@given(st.lists(st.sampled_from(["a", "b", "treatment", "prod", "bts"]), max_size=6),
       st.sets(st.sampled_from(["a", "b", "treatment", "prod", "bts"])))
def test_the_default_is_never_the_logging_policy_while_another_policy_exists(policies, logging):
    chosen = choose_target_policy(policies, logging=logging)
    others = [p for p in dict.fromkeys(policies) if p not in logging]
    if others:
        assert chosen in others and chosen not in logging
        assert chosen == ("treatment" if "treatment" in others else others[0])
    else:
        assert chosen == (policies[0] if policies else None)


def test_the_front_door_exports_the_one_module():
    for name in ("target_policies", "default_target_policy", "choose_target_policy", "policy_kind",
                 "TargetPolicies"):
        assert getattr(oe, name).__module__ == "offeval_core.policies"
    assert oe.TargetPolicies is TargetPolicies
