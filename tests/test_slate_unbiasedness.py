"""Slate estimators against the simulator's exact truth over 200 replications (slow suite): which estimator
is unbiased under which click model (Kiyohara et al. WSDM'22), and Cascade-DR's variance reduction."""

from __future__ import annotations

import math

import numpy as np
import pytest

from offeval_core.slate import SlateConfig, build_world
from offeval_core.slate.experiment import replicate, summarize

pytestmark = pytest.mark.slow
REPS = 200
N = 500
Z_UNBIASED = 4.0   # |bias| / SE below this (two-sided false-alarm rate 6e-5 per check)
Z_BIASED = 6.0


def _table(behaviour, *, n=N, estimators=("iips", "rips", "sips", "cascade-dr")):
    world = build_world(SlateConfig(behaviours=(behaviour,)), rng=7)
    runs = replicate(world, n_sessions=n, reps=REPS, estimators=estimators, rng=11)
    return world, runs, summarize(runs, world.value()).set_index("estimator")


def test_independent_clicks_every_estimator_unbiased():
    _, _, t = _table("independent")
    assert (t["z"].abs() < Z_UNBIASED).all(), t[["bias", "bias_se", "z"]]
    # the cheaper assumption buys variance: SD(IIPS) < SD(RIPS) < SD(SIPS)
    assert t.loc["iips", "sd"] < t.loc["rips", "sd"] < t.loc["sips", "sd"]


def test_cascade_clicks_iips_biased_rips_and_cascade_dr_unbiased():
    _, _, t = _table("cascade")
    assert t.loc["iips", "z"] > Z_BIASED
    for name in ("rips", "cascade-dr", "sips"):
        assert abs(t.loc[name, "z"]) < Z_UNBIASED, (name, t.loc[name, ["bias", "bias_se"]])


def test_standard_interactions_only_sips_unbiased():
    _, _, t = _table("standard")
    assert abs(t.loc["sips", "z"]) < Z_UNBIASED
    assert t.loc["rips", "z"] > Z_BIASED / 2 and t.loc["iips", "z"] > Z_BIASED / 2


def test_cascade_dr_mse_below_rips_at_small_n():
    world, runs, _ = _table("cascade", n=200, estimators=("rips", "cascade-dr"))
    truth = world.value()
    sq = runs.pivot(index="rep", columns="estimator", values="estimate").sub(truth) ** 2
    gain = (sq["rips"] - sq["cascade-dr"]).to_numpy()
    # paired comparison of squared errors: the MSE reduction is more than 3 standard errors
    assert gain.mean() > 3 * gain.std(ddof=1) / math.sqrt(len(gain)), gain.mean()
    assert np.sqrt(sq["cascade-dr"].mean()) < np.sqrt(sq["rips"].mean())
