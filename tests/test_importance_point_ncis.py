"""PointNCIS (Gilotte et al. WSDM'18 Sec. 5) with the exact normaliser ν = E_πp[W̄ | context] by hand.

The Table 1 example in tests/test_importance.py logs exact population frequencies, where the exact ν and the
plug-in mean of the capped weights agree; here the logged frequencies differ from π_p, so they do not.

One context (segment "s"), rank 1, two items: π_p = (0.5, 0.5), π_t = (0.9, 0.1), so w = (1.8, 0.2) and with
c = 1.5 the capped weights are W̄ = (1.5, 0.2). The logging policy's actions enumerate π_p (Σ π_p = 1), so
ν = 0.5 · 1.5 + 0.5 · 0.2 = 0.85. Logged: item A three times (clicks 1, 1, 0), item B once (click 0).

    PointNCIS (exact) = (1/4) Σ W̄ r / ν = (1.5 + 1.5) / 0.85 / 4 = 0.882353
    plug-in (NCIS in the one context) = Σ W̄ r / Σ W̄ = 3 / (3 · 1.5 + 0.2) = 0.638298
"""

from __future__ import annotations

import pandas as pd
import pytest

from offeval_core import importance as imp
from offeval_core.logs import read_logs


def logs(items=("A", "A", "A", "B"), clicks=(1, 1, 0, 0)):
    lp = {"A": 0.5, "B": 0.5}
    tp = {"A": 0.9, "B": 0.1}
    return read_logs(pd.DataFrame({
        "session_id": range(len(items)), "rank": 1, "item_id": list(items), "segment": "s", "click": list(clicks),
        "logging_propensity": [lp[i] for i in items], "target_propensity__new": [tp[i] for i in items]}))


def test_exact_nu_where_the_logged_actions_enumerate_the_logging_policy():
    r = imp.estimate(logs(), reward="click", policy="new", estimator="point-ncis", clip=1.5, context="segment")
    assert r.target.value == pytest.approx(3 / 0.85 / 4, abs=1e-12)
    assert r.diagnostics["exact_share"] == 1.0
    assert r.logging.value == pytest.approx(0.5, abs=1e-12)
    assert r.effect.value == pytest.approx(3 / 0.85 / 4 - 0.5, abs=1e-12)
    ncis = imp.estimate(logs(), reward="click", policy="new", estimator="ncis", clip=1.5)
    assert ncis.target.value == pytest.approx(3 / 4.7, abs=1e-12)


def test_plug_in_where_the_logged_actions_do_not_enumerate_it():
    # only item A is logged: Σ π_p = 0.5 ≠ 1, so ν is the plug-in mean of W̄ in the context, 1.5, and
    # PointNCIS = Σ W̄ r / Σ W̄ = 3 · 1.5 / (4 · 1.5) (four sessions, clicks 1, 1, 1, 0)
    r = imp.estimate(logs(items=("A",) * 4, clicks=(1, 1, 1, 0)), reward="click", policy="new",
                     estimator="point-ncis", clip=1.5, context="segment")
    assert r.target.value == pytest.approx(0.75, abs=1e-12)
    assert r.diagnostics["exact_share"] == 0.0


def test_two_logged_items_with_the_same_propensities_are_two_actions_of_the_enumeration():
    # π_p = (0.5, 0.5), π_t = (0.5, 0.5): both items have w = 1, so (π_p, w) alone cannot tell them apart; the
    # logged actions still enumerate π_p (Σ π_p = 1), ν = 0.5 · 1 + 0.5 · 1 = 1 and PointNCIS is exact: the
    # mean click 2 / 4 (the plug-in, Σ W̄ r / Σ W̄, would give the same value but not exact_share 1)
    def flat():
        items, clicks = ("A", "A", "B", "B"), (1, 0, 1, 0)
        return read_logs(pd.DataFrame({
            "session_id": range(4), "rank": 1, "item_id": list(items), "segment": "s", "click": list(clicks),
            "logging_propensity": 0.5, "target_propensity__new": 0.5}))

    r = imp.estimate(flat(), reward="click", policy="new", estimator="point-ncis", clip=1.5, context="segment")
    assert r.target.value == pytest.approx(0.5, abs=1e-12)
    assert r.diagnostics["exact_share"] == 1.0


def test_an_enumerated_context_the_target_never_shows_is_not_exact():
    # π_t = 0 for both logged items: W̄ = 0 everywhere, so ν = Σ π_p W̄ = 0 and Σ W̄ r / ν is undefined; the
    # context is not exact, and the plug-in of a cell without capped weight is 0 (no NaN)
    zero = read_logs(pd.DataFrame({
        "session_id": range(4), "rank": 1, "item_id": ["A", "A", "A", "B"], "segment": "s", "click": [1, 1, 0, 0],
        "logging_propensity": 0.5, "target_propensity__new": 0.0}))
    r = imp.estimate(zero, reward="click", policy="new", estimator="point-ncis", clip=1.5, context="segment")
    assert r.target.value == 0.0
    assert r.diagnostics["exact_share"] == 0.0
