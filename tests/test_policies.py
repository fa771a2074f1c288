"""The target policies of a log, their kind, the copies of the logging policy and the default target policy
(offeval_core.policies): never the logging policy while another exists, 'treatment' when there is one, else the
first other candidate; propensity policies count."""

from __future__ import annotations

import pandas as pd
import pytest
from analyses_world import small_world
from hypothesis import given
from hypothesis import strategies as st

from offeval_core.logs import read_logs
from offeval_core.policies import default_target_policy, logging_copies, policy_kind, target_policies


def _logs(**extra):
    base = {"session_id": [1, 1, 2, 2], "rank": [1, 2, 1, 2], "click": [1, 0, 0, 1],
            "arm": ["control", "control", "treatment", "treatment"]}
    return read_logs(pd.DataFrame({**base, **extra}))


def test_rank_and_propensity_policies_are_listed_with_their_kind():
    logs = _logs(rank__prod=[1, 2, 1, 2], rank__new=[2, 1, 1, 2], logging_propensity=[0.5] * 4,
                 target_propensity__bts=[0.9, 0.1, 0.4, 0.6], target_propensity__new=[0.5] * 4)
    assert target_policies(logs) == ("prod", "new", "bts")   # rank policies first; 'new' once (ranks win)
    assert [policy_kind(logs, p) for p in target_policies(logs)] == ["rank", "rank", "propensity"]
    with pytest.raises(KeyError, match="unknown target policy 'other'; the logs <DataFrame> have prod, new, bts"):
        policy_kind(logs, "other")


def test_a_target_propensity_without_logging_propensities_is_no_policy():
    logs = _logs(target_propensity__bts=[0.9, 0.1, 0.4, 0.6])
    assert target_policies(logs) == ()


def test_copies_of_the_logging_policy_are_found_on_the_offline_rows_only():
    # 'prod' equals the logged ranks on the control arm only (the treatment arm was logged by another policy);
    # 'same' copies the logging propensities on the control rows; 'bts' does not
    logs = _logs(rank__prod=[1, 2, 2, 1], rank__new=[2, 1, 1, 2], logging_propensity=[0.5, 0.5, 0.2, 0.8],
                 target_propensity__same=[0.5, 0.5, 0.9, 0.1], target_propensity__bts=[0.5, 0.4, 0.2, 0.8])
    assert logging_copies(logs) == ("prod", "same")


def test_copies_on_logs_without_arms_use_every_session():
    logs = read_logs(pd.DataFrame({"session_id": [1, 1, 2], "rank": [1, 2, 1], "click": [1, 0, 1],
                                   "rank__a": [1, 2, 1], "rank__b": [1, 2, 2]}))
    assert logging_copies(logs) == ("a",)


def test_on_the_simulated_world_production_is_the_copy_and_treatment_the_default():
    _, logs, _ = small_world()
    assert logging_copies(logs) == ("production",)
    assert default_target_policy(target_policies(logs), logging=logging_copies(logs)) == "treatment"


@pytest.mark.parametrize(("policies", "logging", "expected"), [
    (["production", "ranker_v2", "ranker_v3"], ["production"], "ranker_v2"),   # no 'treatment': first other one
    (["production", "cand", "treatment"], ["production"], "treatment"),         # 'treatment' preferred
    (["treatment", "cand"], ["treatment"], "cand"),                             # unless it copies the logging policy
    (["bts"], [], "bts"),                                                       # a propensity policy counts
    (["production"], ["production"], "production"),                            # nothing else: the copy
    ([], [], None),
])
def test_default_target_policy(policies, logging, expected):
    assert default_target_policy(policies, logging=logging) == expected


@given(st.lists(st.sampled_from(["a", "b", "treatment", "prod", "bts"]), max_size=6),
       st.sets(st.sampled_from(["a", "b", "treatment", "prod", "bts"])))
def test_the_default_is_never_a_copy_while_another_policy_exists(policies, logging):
    chosen = default_target_policy(policies, logging=logging)
    others = [p for p in policies if p not in logging]
    if others:
        assert chosen in others and chosen not in logging
        assert chosen == ("treatment" if "treatment" in others else others[0])
    else:
        assert chosen == (policies[0] if policies else None)
