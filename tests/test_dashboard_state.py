"""URL round trip of the dashboard settings (dashboard/state.py) and the simulation spec."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dashboard.data import parse_sim_spec, sim_spec
from dashboard.state import CLIP_CHOICES, LEVELS, Settings, parse_query_params, to_query_params

names = st.text(alphabet="abcdefghijklmnopqrstuvwxyz_0123456789", min_size=1, max_size=12)


@given(dataset=st.sampled_from(["demo", "sim", "upload"]), reward=st.none() | names, policy=st.none() | names,
       discount=st.sampled_from(["pbm", "log2", "exponential:0.9", "log2@10"]), clip=st.sampled_from(CLIP_CHOICES),
       level=st.sampled_from(LEVELS), present=st.booleans(),
       estimators=st.lists(st.sampled_from(["dcg:1", "ndcg:inf", "ncis@impression:64"]), max_size=3, unique=True))
def test_settings_survive_the_url(dataset, reward, policy, discount, clip, level, present, estimators):
    s = Settings(dataset=dataset, reward=reward, policy=policy, discount=discount, clip=clip, level=level,
                 present=present, estimators=tuple(estimators))
    params = to_query_params(s)
    assert all(isinstance(v, str) for v in params.values())
    back = parse_query_params(params)
    assert back == s
    assert back.problems == ()


def test_defaults_give_an_empty_query_string():
    assert to_query_params(Settings()) == {}
    assert parse_query_params({}) == Settings()


def test_clip_infinity_is_written_as_inf():
    assert to_query_params(Settings(clip=64.0))["clip"] == "64"
    assert parse_query_params({"clip": "inf"}).clip == math.inf
    assert parse_query_params({"clip": ["2", "8"]}).clip == 8.0  # repeated key: the last one wins


@pytest.mark.parametrize(("params", "message"), [
    ({"clip": "0.5"}, "ignored clip='0.5': clip must be ≥ 1, got '0.5'"),
    ({"clip": "abc"}, "ignored clip='abc': clip must be a number ≥ 1 or inf"),
    ({"level": "1.5"}, "ignored level='1.5': level must be strictly between 0 and 1"),
    ({"level": "x"}, "ignored level='x': level must be a number between 0 and 1"),
    ({"dataset": "s3"}, "ignored dataset='s3': dataset must be one of demo, sim, upload"),
    ({"present": "maybe"}, "ignored present='maybe': present must be 1 or 0"),
    ({"method": "cosine"}, "ignored method='cosine': method must be one of pearson, kendall, spearman"),
])
def test_bad_values_fall_back_and_are_reported(params, message):
    s = parse_query_params(params)
    assert s.problems == (message,)
    assert s.replace(problems=()) == Settings()


def test_sim_spec_round_trip_and_errors():
    spec = sim_spec("demo", 3, sessions=500, days=4, switches=["reward_interactions", "cascade"], support_depth=10)
    assert spec == "demo;seed=3;sessions=500;days=4;support=10;cascade;reward_interactions"
    parsed = parse_sim_spec(spec)
    assert parsed["seed"] == 3
    assert parsed["overrides"] == {"sessions_per_arm_day": 500, "n_days": 4, "support_depth": 10,
                                   "cascade": True, "reward_interactions": True}
    with pytest.raises(ValueError, match="must start with a preset"):
        parse_sim_spec("huge;seed=1")
    with pytest.raises(ValueError, match="unknown simulation switch 'teleport'"):
        parse_sim_spec("small;teleport")
    with pytest.raises(ValueError, match="needs an integer, got 'many'"):
        parse_sim_spec("small;days=many")
