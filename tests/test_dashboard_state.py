"""URL round trip of the dashboard settings (dashboard/state.py) and the simulation spec."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dashboard.data import parse_sim_spec, sim_spec
from dashboard.state import (
    CLIP_CHOICES,
    LEVELS,
    PAGE_CONTROLS,
    Settings,
    control_text,
    parse_query_params,
    to_query_params,
)

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


def _control_values(name):
    spec = PAGE_CONTROLS[name]
    if spec.choices:
        return st.sampled_from(spec.choices)
    if spec.kind == "bool":
        return st.booleans()
    if spec.kind == "list":
        return st.lists(names, min_size=1, max_size=3).map(tuple)
    if spec.kind == "int":
        return st.integers(int(spec.lo), int(spec.hi))
    if spec.kind == "float":
        return st.floats(spec.lo, spec.hi).map(lambda x: float(f"{x:g}"))
    return names


@given(st.data())
def test_every_page_control_survives_the_url_and_only_non_defaults_are_written(data):
    picked = data.draw(st.lists(st.sampled_from(sorted(PAGE_CONTROLS)), unique=True, max_size=8))
    values = {n: data.draw(_control_values(n)) for n in picked}
    s = Settings().with_controls(**values)
    params = to_query_params(s)
    assert set(params) == {n for n, v in values.items() if v != PAGE_CONTROLS[n].default}
    assert params == {n: control_text(v) for n, v in values.items() if n in params}
    back = parse_query_params(params)
    assert back.problems == ()
    assert {n: back.control(n) for n in picked} == values


def test_page_derived_defaults_are_left_out_of_the_url():
    s = Settings(reward="like", policy="treatment").with_controls(dec_est="DCG m=1", dec_rel=True)
    params = to_query_params(s, {"reward": "like", "policy": "treatment", "dec_est": "DCG m=1"})
    assert params == {"dec_rel": "1"}
    assert to_query_params(s, {"reward": "click"})["reward"] == "like"


def test_defaults_give_an_empty_query_string():
    assert to_query_params(Settings()) == {}
    assert parse_query_params({}) == Settings()


def test_clip_infinity_is_written_as_inf():
    assert to_query_params(Settings(clip=64.0))["clip"] == "64"
    assert parse_query_params({"clip": "inf"}).clip == math.inf
    assert parse_query_params({"clip": ["2", "8"]}).clip == 8.0  # repeated key: the last one wins


@pytest.mark.parametrize(("params", "message"), [
    ({"clip": "0.5"}, "ignored clip='0.5': clip must be ≥ 1 (1 = raw labels, inf = unclipped)"),
    ({"clip": "-3"}, "ignored clip='-3': clip must be ≥ 1 (1 = raw labels, inf = unclipped)"),
    ({"clip": "abc"}, "ignored clip='abc': clip must be a number ≥ 1 or inf"),
    ({"level": "1.5"}, "ignored level='1.5': level must be strictly between 0 and 1"),
    ({"level": "x"}, "ignored level='x': level must be a number between 0 and 1"),
    ({"dataset": "s3"}, "ignored dataset='s3': dataset must be one of demo, sim, upload, file"),
    ({"sens_alpha": "0.02"}, "ignored sens_alpha='0.02': sens_alpha must be one of 0.05, 0.01, 0.001, 0.0001"),
    ({"dec_rel": "yes please"}, "ignored dec_rel='yes please': dec_rel must be 1 or 0"),
    ({"pbm_p": "2"}, "ignored pbm_p='2': pbm_p must be between 0.5 and 0.99"),
    ({"lab_k": "ten"}, "ignored lab_k='ten': lab_k must be an integer"),
    ({"clip_rule": "best"}, "ignored clip_rule='best': clip_rule must be one of slope, mse"),
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
