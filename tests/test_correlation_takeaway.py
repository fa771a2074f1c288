"""The Correlation takeaway (KDD'24 Table 2) states the number it rests on and says so when nothing tracks the online
reward. It rests on the target policy's Rₜ rows (its offline estimate on control logs against its own arm): on the
simulator's small world the de-biased DCG follows the treatment arm day by day; on the Open Bandit Dataset sample
(click rates of ~0.5 %, 7 days × 3 campaigns: the daily estimates are noise) nothing does; on the team export the
logging policy's R₀ rows correlate strongly while the tested ranker's do not, and the takeaway does not let the R₀
rows speak for it."""

from __future__ import annotations

import math

import pandas as pd
import pytest
from analyses_world import small_world

from offeval_core.analyses import default_variants, offline_online_correlation
from offeval_core.analyses.correlation import TRACK_R, _takeaway
from offeval_core.analyses.plan import propensity_estimators
from offeval_core.engine import Grid, reduce
from offeval_core.importance import reduce_importance
from offeval_core.logs import LOGGING_POLICY, read_logs
from tests.export_fixtures import ROOT, demo_sample, team_export


def _target_rows(res, policy):
    return res.table[(res.table["policy"] == policy) & ~res.table["identity"]]


def _support(rows, variant):
    r = rows[rows["variant"] == variant]
    return int(((r["r"] > 0) & (r["p_value"] < 0.05)).sum()), len(r)


def test_a_strong_correlation_is_named_with_its_median_r_and_support():
    world, _, _ = small_world()
    logs = read_logs(world.logs)
    m = reduce(logs, Grid(rewards=("like",), policies=("treatment",), discounts=("pbm", "log2"),
                          exposures=("pbm", "log2"), clips=(1.0, math.inf)))
    res = offline_online_correlation(m, variants=default_variants(math.inf))
    rows = _target_rows(res, "treatment")
    med = rows.groupby("variant")["r"].median()
    top = med.idxmax()
    assert med[top] >= 0.9  # the simulator's treatment arm follows its offline DCG day by day
    k, n = _support(rows, top)
    wins = int(rows[rows["best"]].groupby("variant").size().get(top, 0))
    assert res.takeaway.startswith(f"Across the {n} (experiment, reward) rows of Rₜ = treatment, {top} tracks its "
                                   f"online reward best: median r = {med[top]:.2f}, best in {wins} of {n} rows, "
                                   f"positive and significant (p < 0.05) in {k} of {n} rows; ")
    assert 0 < k <= n and "No variant tracks" not in res.takeaway


def test_a_correlation_near_zero_is_said_to_track_nothing():
    logs = read_logs(ROOT / "tests" / "fixtures" / "open_bandit" / "open_bandit.csv.gz", columns={"rank": "position"})
    m = reduce_importance(logs, rewards=("click",), policies=("bts",), clips=(math.inf,), weights="propensity",
                          cappings=("max",), scales=("session",))
    res = offline_online_correlation(m, variants=propensity_estimators(math.inf), policies=(LOGGING_POLICY, "bts"))
    rows = _target_rows(res, "bts")
    med = rows.groupby("variant")["r"].median()
    top = med.idxmax()
    assert abs(med[top]) < 0.3  # 3 campaigns × 7 days of noise: r is near 0
    k, n = _support(rows, top)
    assert n == 3
    why = "below 0.5" + (" and positive and significant in no row" if k == 0 else "")
    assert res.takeaway.startswith(f"No variant tracks the online reward of Rₜ = bts across days on these logs: the "
                                   f"highest median r over its 3 (experiment, reward) rows is {top}'s "
                                   f"{med[top]:.2f}, {why} ({top} is positive and significant (p < 0.05) in {k} "
                                   f"of 3 rows)")
    assert "tracks its online reward best" not in res.takeaway


def test_strong_r0_rows_do_not_speak_for_the_target_policy():
    _, schema = team_export(demo_sample(40))
    logs = read_logs(schema, rewards=["clicked", "completed"])
    m = reduce(logs, Grid(rewards=("clicked", "completed"), policies=("ranker_v2",), discounts=("pbm", "log2"),
                          exposures=("pbm", "log2"), clips=(1.0, math.inf)))
    res = offline_online_correlation(m, variants=default_variants(math.inf), policies=(LOGGING_POLICY, "ranker_v2"))
    med_t = _target_rows(res, "ranker_v2").groupby("variant")["r"].median()
    med_0 = _target_rows(res, LOGGING_POLICY).groupby("variant")["r"].median()
    assert med_0.max() >= TRACK_R > med_t.max()  # R₀ tracks (same sessions), ranker_v2 does not
    assert res.takeaway.startswith(f"No variant tracks the online reward of Rₜ = ranker_v2 across days on these "
                                   f"logs: the highest median r over its 40 (experiment, reward) rows is "
                                   f"{med_t.idxmax()}'s {med_t.max():.2f}, below 0.5")
    assert (f"On the R₀ rows (the logging policy, whose offline and online values read the same control sessions) "
            f"{med_0.idxmax()} has the highest median r, {med_0.max():.2f}.") in res.takeaway
    # the pooled comparison reads the target policy's days whatever it is named
    from offeval_core.analyses.correlation_diff import pooled_difference

    d = pooled_difference(res.daily, "DCG (pbm, Q̂)", "DCG (log2, C)", reward="clicked", policy="ranker_v2")
    assert d.n_points == 140  # 20 experiments × 7 days of ranker_v2
    assert (f"pooled over the target policy's experiment-days: clicked, DCG (pbm, Q̂) — vs DCG (log2, C): "
            f"{d.text()}") in res.takeaway


@pytest.mark.parametrize("r_top", [0.49, 0.5])
def test_the_threshold_is_inclusive_at_track_r(r_top):
    t = pd.DataFrame({"experiment_id": ["e", "f"], "reward": "y", "policy": "treatment", "variant": "V",
                      "metric": "dcg", "discount": "pbm", "exposure": "pbm", "clip": 1.0, "r": [r_top, r_top],
                      "p_value": [0.01, 0.2], "significant": [True, False], "identity": False, "best": True})
    text = _takeaway(t, ("V",), "pearson")  # significant in 1 of 2 rows: one is enough
    if r_top >= TRACK_R:
        assert text == ("Across the 2 (experiment, reward) rows of Rₜ = treatment, V tracks its online reward best: "
                        "median r = 0.50, best in 2 of 2 rows, positive and significant (p < 0.05) in 1 of 2 rows.")
    else:
        assert text == ("No variant tracks the online reward of Rₜ = treatment across days on these logs: the "
                        "highest median r over its 2 (experiment, reward) rows is V's 0.49, below 0.5 (V is positive "
                        "and significant (p < 0.05) in 1 of 2 rows).")


def test_a_strong_r_that_is_significant_in_no_row_does_not_track():
    t = pd.DataFrame({"experiment_id": ["e", "f", "g"], "reward": "y", "policy": "bts", "variant": "IS",
                      "metric": "is", "discount": "propensity", "exposure": "propensity", "clip": math.inf,
                      "r": [0.9, 0.8, 0.7], "p_value": [0.06, 0.2, 0.3], "significant": [False, False, False],
                      "identity": False, "best": True})
    assert _takeaway(t, ("IS",), "pearson") == (
        "No variant tracks the online reward of Rₜ = bts across days on these logs: the highest median r over its 3 "
        "(experiment, reward) rows is IS's 0.80, positive and significant in no row (IS is positive and "
        "significant (p < 0.05) in 0 of 3 rows).")
