"""Adaptive IPS: the estimated-MSE choice of the interaction set, shown per leaf."""

from __future__ import annotations

import numpy as np
import pytest

from offeval_core.slate import SlateConfig, build_world, estimate, sample
from offeval_core.slate.adaptive import _mse, choose


def test_mse_formula_on_known_columns():
    # columns IIPS, RIPS, SIPS over 4 sessions; neighbour differences d1 = IIPS − RIPS = (1, 1, 1, 1)
    v = np.array([[2.0, 1.0, 1.0], [2.0, 1.0, 3.0], [3.0, 2.0, 1.0], [3.0, 2.0, 3.0]])
    mse = _mse(v)
    var = v.var(0, ddof=1) / 4
    d2 = v[:, 1] - v[:, 2]                                  # (0, -2, 1, -1): mean -0.5
    step2 = max(0.25 - d2.var(ddof=1) / 4, 0.0)             # noise exceeds the squared mean → 0
    assert step2 == 0.0
    assert mse.tolist() == pytest.approx([1.0 + step2 + var[0], step2 + var[1], var[2]], abs=1e-12)


def test_large_cascade_sample_rejects_iips_and_independent_keeps_it():
    casc = sample(build_world(SlateConfig(behaviours=("cascade",)), rng=7), 20_000, rng=1).data
    assert choose(casc).table["chosen"].tolist() in (["rips"], ["sips"])
    ind = sample(build_world(SlateConfig(behaviours=("independent",)), rng=7), 20_000, rng=1).data
    c = choose(ind)
    assert c.table["chosen"].tolist() == ["iips"]
    assert c.describe().startswith("adaptive IPS (no split): all sessions → IIPS")


def test_aips_value_is_the_chosen_estimator_per_half():
    d = sample(build_world(SlateConfig(behaviours=("independent",)), rng=7), 20_000, rng=2).data
    res = estimate(d, estimator="aips", rng=0)
    # both halves pick IIPS here, so the value is IIPS's
    assert res.target.value == pytest.approx(estimate(d, estimator="iips").target.value, abs=1e-12)
    assert "IIPS" in res.note
