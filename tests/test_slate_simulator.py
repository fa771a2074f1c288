"""Stochastic-slate simulator: Plackett-Luce tables, exact truth against Monte Carlo, click models."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from offeval_core.slate import SlateConfig, build_world, sample


@pytest.fixture(scope="module")
def world():
    return build_world(SlateConfig(n_items=4, n_slots=3, behaviours=("independent", "cascade", "standard")), rng=3)


def test_plackett_luce_tables(world):
    assert world.slates.shape == (4 * 3 * 2, 3)
    np.testing.assert_allclose(world.logging_prob.sum(1), 1.0, atol=1e-12)
    np.testing.assert_allclose(world.target_prob.sum(1), 1.0, atol=1e-12)
    m = world.marginals("target")
    np.testing.assert_allclose(m.sum(2), 1.0, atol=1e-12)           # each slot shows one item
    assert (m.sum(1) <= 1 + 1e-12).all()                              # an item appears at most once
    # slot 1 of a PL policy is the softmax of the scores
    for x in range(3):
        soft = np.exp(world.target_scores[x]) / np.exp(world.target_scores[x]).sum()
        np.testing.assert_allclose(m[x, 0], soft, atol=1e-12)


def test_pl_probability_by_hand():
    w = build_world(SlateConfig(n_items=3, n_slots=2), rng=0)
    e = np.exp(w.logging_scores[0])
    for s, (a, b) in enumerate(w.slates):
        by_hand = e[a] / e.sum() * e[b] / (e.sum() - e[a])
        assert w.logging_prob[0, s] == pytest.approx(by_hand, rel=1e-12)


def test_click_models_by_hand(world):
    theta = world.attraction
    s = 5
    a = world.slates[s]
    t0, t1, t2 = theta[0][a]
    d = world.config.decay
    np.testing.assert_allclose(world.click_prob[0, s], [t0, t1 * d, t2 * d * d], rtol=1e-12)
    c0, c1, c2 = theta[1][a]
    np.testing.assert_allclose(world.click_prob[1, s], [c0, c1 * (1 - c0), c2 * (1 - c0) * (1 - c1)], rtol=1e-12)
    b = world.config.interaction
    u0, u1, u2 = theta[2][a]
    np.testing.assert_allclose(world.click_prob[2, s], [u0 * (1 - b * u1), u1 * d * (1 - b * u2), u2 * d * d],
                               rtol=1e-12)


def test_exact_logging_value_matches_monte_carlo(world):
    n = 200_000
    smp = sample(world, n, rng=1)
    per = np.bincount(smp.data.session, weights=smp.data.reward, minlength=n)
    se = per.std(ddof=1) / math.sqrt(n)
    assert abs(per.mean() - world.value("logging")) < 4 * se
    # cascade sessions click at most once
    casc = np.flatnonzero(smp.context == 1)
    assert per[casc].max() == 1.0
    # per-slot click rate of each behaviour against the exact expectation under the logging policy
    clicks = smp.data.reward.reshape(n, 3)
    for x in range(3):
        rows = smp.context == x
        exact = world.logging_prob[x] @ world.click_prob[x]
        got = clicks[rows].mean(0)
        se_k = np.sqrt(exact * (1 - exact) / rows.sum())
        assert (np.abs(got - exact) < 4.5 * se_k).all()


def test_logged_propensities_and_next_item_distribution(world):
    smp = sample(world, 300, rng=2)
    d = smp.data
    np.testing.assert_allclose(smp.target_distribution.sum(1), 1.0, atol=1e-12)
    np.testing.assert_allclose(smp.target_distribution[np.arange(d.n_rows), d.item], d.target_conditional,
                               rtol=1e-12)
    # the product of the conditionals over the slate is the slate's probability
    slate_p = np.exp(np.bincount(d.session, weights=np.log(d.logging_conditional)))
    np.testing.assert_allclose(slate_p, world.logging_prob[smp.context, smp.slate], rtol=1e-12)
    # frames round-trip through the log schema
    frame = smp.to_frame()
    assert set(frame.columns) >= {"logging_conditional_propensity", "target_conditional_propensity__target"}


def test_value_enumerates_every_slate():
    w = build_world(SlateConfig(n_items=3, n_slots=2, behaviours=("cascade",)), rng=4)
    total = 0.0
    e = np.exp(w.target_scores[0])
    th = w.attraction[0]
    for a, b in itertools.permutations(range(3), 2):
        p = e[a] / e.sum() * e[b] / (e.sum() - e[a])
        total += p * (th[a] + (1 - th[a]) * th[b])
    assert w.value() == pytest.approx(total, rel=1e-12)


def test_config_errors():
    with pytest.raises(ValueError, match="behaviour must be one of"):
        SlateConfig(behaviours=("dbn",))
    with pytest.raises(ValueError, match="n_items ≤ 9"):
        SlateConfig(n_items=12)
