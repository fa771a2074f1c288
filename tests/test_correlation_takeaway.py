"""The Correlation takeaway (KDD'24 Table 2) states the number it rests on and says so when nothing tracks the online
reward: on the team export (the tested ranker's DCG follows its arm day by day) a variant tracks, on the Open Bandit
Dataset sample (click rates of ~0.5 %, 7 days × 3 campaigns: the daily estimates are noise) none does."""

from __future__ import annotations

import math

import pytest

from offeval_core.analyses import default_variants, offline_online_correlation
from offeval_core.analyses.correlation import TRACK_R
from offeval_core.analyses.plan import propensity_estimators
from offeval_core.engine import Grid, reduce
from offeval_core.importance import reduce_importance
from offeval_core.logs import LOGGING_POLICY, read_logs
from tests.export_fixtures import ROOT, demo_sample, team_export


def _medians(res):
    ranked = res.table[~res.table["identity"]]
    return ranked.groupby("variant")["r"].median()


def _support(res, variant):
    rows = res.table[(res.table["variant"] == variant) & ~res.table["identity"]]
    return int(((rows["r"] > 0) & (rows["p_value"] < 0.05)).sum()), len(rows)


def test_a_strong_correlation_is_named_with_its_median_r_and_support():
    _, schema = team_export(demo_sample(40))
    logs = read_logs(schema, rewards=["clicked", "completed"])
    m = reduce(logs, Grid(rewards=("clicked", "completed"), policies=("ranker_v2",), discounts=("pbm", "log2"),
                          exposures=("pbm", "log2"), clips=(1.0, math.inf)))
    res = offline_online_correlation(m, variants=default_variants(math.inf), policies=(LOGGING_POLICY, "ranker_v2"))
    med = _medians(res)
    top = med.idxmax()
    assert med[top] >= TRACK_R  # a real signal: the arm's online reward follows the offline DCG day by day
    k, n = _support(res, top)
    assert res.takeaway.startswith(f"Across {n} (experiment, reward, policy) rows, {top} tracks the online reward "
                                   f"best: median r = {med[top]:.2f}, best in ")
    assert f"positive and significant (p < 0.05) in {k} of {n} rows" in res.takeaway
    assert 0 < k <= n and "No variant tracks" not in res.takeaway
    # the pooled comparison reads the target policy's days whatever it is named (ranker_v2 here)
    assert "Pooled over the target policy's experiment-days — clicked: " in res.takeaway


def test_a_correlation_near_zero_is_said_to_track_nothing():
    logs = read_logs(ROOT / "tests" / "fixtures" / "open_bandit" / "open_bandit.csv.gz", columns={"rank": "position"})
    m = reduce_importance(logs, rewards=("click",), policies=("bts",), clips=(math.inf,), weights="propensity",
                          cappings=("max",), scales=("session",))
    res = offline_online_correlation(m, variants=propensity_estimators(math.inf), policies=(LOGGING_POLICY, "bts"))
    med = _medians(res)
    top = med.idxmax()
    assert abs(med[top]) < 0.2  # 3 campaigns × 7 days of noise: r is near 0
    k, n = _support(res, top)
    assert res.takeaway.startswith(f"No variant tracks the online reward across days on these logs: the highest "
                                   f"median r over the {n} (experiment, reward, policy) rows is {top}'s "
                                   f"{med[top]:.2f}, below 0.5 ({top} is positive and significant (p < 0.05) in {k} "
                                   f"of {n} rows)")
    assert "tracks the online reward best" not in res.takeaway


@pytest.mark.parametrize("r_top", [0.49, 0.5])
def test_the_threshold_is_inclusive_at_track_r(r_top):
    import pandas as pd

    from offeval_core.analyses.correlation import _takeaway

    t = pd.DataFrame({"experiment_id": ["e", "f"], "reward": "y", "policy": "treatment", "variant": "V",
                      "metric": "dcg", "discount": "pbm", "exposure": "pbm", "clip": 1.0, "r": [r_top, r_top],
                      "p_value": [0.01, 0.2], "significant": [True, False], "identity": False, "best": True})
    text = _takeaway(t, ("V",), "pearson")
    if r_top >= TRACK_R:
        assert text.startswith("Across 2 (experiment, reward, policy) rows, V tracks the online reward best: median "
                               "r = 0.50, best in 2 of 2 rows, positive and significant (p < 0.05) in 1 of 2 rows")
    else:
        assert text.startswith("No variant tracks the online reward across days on these logs: the highest median r "
                               "over the 2 (experiment, reward, policy) rows is V's 0.49, below 0.5")
