"""Assumption checks and verdicts: each test against a direct computation on constructed logs, and on
simulated worlds with and without each switch (a few seeds here; the measured rates are in docs/diagnose.md)."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest
from statsmodels.stats.contingency_tables import Table2x2

from offeval_core import cli
from offeval_core.diagnose import (
    _cmh,
    _within_slope,
    check_cascade,
    check_context_position_bias,
    check_support,
    diagnose,
)
from offeval_core.diagnose_validation import run_world
from offeval_core.logs import read_logs


def sessions(lengths, rewards, segment=None):
    rows = []
    for s, (n, rw) in enumerate(zip(lengths, rewards, strict=True)):
        for r in range(1, n + 1):
            rows.append({"session_id": s, "rank": r, "item_id": r, "click": rw[r - 1],
                         "segment": segment[s] if segment else "all", "rank__new": r})
    return pd.DataFrame(rows)


def test_cmh_single_stratum_is_the_plain_odds_ratio():
    # one stratum: a=30 b=10 c=20 d=40 → OR = 30·40 / (10·20) = 6
    x = np.r_[np.ones(40), np.zeros(60)].astype(bool)
    y = np.r_[np.ones(30), np.zeros(10), np.ones(20), np.zeros(40)].astype(bool)
    orr, lo, hi, p, k = _cmh(x, y, np.zeros(100, dtype=int), level=0.95)
    assert orr == pytest.approx(6.0)
    ref = Table2x2(np.array([[30, 10], [20, 40]]))
    assert (lo, hi) == pytest.approx(ref.oddsratio_confint(0.05), rel=1e-6)
    assert k == 1 and p < 1e-4


def test_within_slope_matches_least_squares_with_dummies():
    rng = np.random.default_rng(0)
    n = 200
    strata = rng.integers(0, 5, n)
    x = rng.normal(size=n) + strata
    y = 0.7 * x + 2 * strata + rng.normal(size=n)
    b, se = _within_slope(y, x, strata, np.arange(n))
    design = np.column_stack([x, np.eye(5)[strata]])
    coef = np.linalg.lstsq(design, y, rcond=None)[0]
    assert b == pytest.approx(coef[0], rel=1e-10)
    assert 0 < se < 0.2


def test_cascade_check_on_constructed_logs():
    # sessions that get a click at rank 1 stop there; the others continue to rank 2
    n = 200
    lengths = [1 if s % 2 == 0 else 2 for s in range(n)]
    rewards = [[1.0] if s % 2 == 0 else [0.0, 0.0] for s in range(n)]
    logs = read_logs(sessions(lengths, rewards))
    c = check_cascade(logs, "click")
    assert c.fires and c.effect < 0.1
    # independent stopping: clicks at rank 1 in half of each length group → OR 1, no firing
    rewards = [[float(s % 4 < 2)] + [0.0] * (lengths[s] - 1) for s in range(n)]
    c = check_cascade(read_logs(sessions(lengths, rewards)), "click")
    assert not c.fires and c.effect == pytest.approx(1.0)


def test_context_check_and_support_on_constructed_logs():
    n = 400
    seg = ["a" if s % 2 else "b" for s in range(n)]
    lengths = [3 if seg[s] == "a" else 1 + (s % 4 == 0) for s in range(n)]
    rewards = [[0.0] * k for k in lengths]
    logs = read_logs(sessions(lengths, rewards, seg))
    c = check_context_position_bias(logs, "click")
    assert c.fires and "segment 'a'" in c.finding
    # the target ranks every logged item where it was logged: IPS sees the exposure of the logged depth
    s = check_support(logs, policy="new", discount="log2")
    assert s.identified and s.effect == pytest.approx(1.0, abs=1e-12)   # Σ D / D0 over ranks ≤ 3 = Σ D


def test_verdicts_and_cli_json(tmp_path, capsys):
    n = 200
    lengths = [1 if s % 2 == 0 else 2 for s in range(n)]
    rewards = [[1.0] if s % 2 == 0 else [0.0, 0.0] for s in range(n)]
    path = tmp_path / "logs.csv"
    sessions(lengths, rewards).to_csv(path, index=False)
    assert cli.main(["diagnose", str(path), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["reward"] == "click" and out["policy"] == "new"
    checks = {c["name"]: c for c in out["checks"]}
    assert checks["cascade"]["fires"] is True
    assert {e["estimator"]: e["verdict"] for e in out["estimators"]} == {"dcg": "don't", "snips": "don't"}
    assert all("cascade check fires" in e["reason"] for e in out["estimators"])
    assert cli.main(["diagnose", str(path)]) == 0
    assert "VIOLATED" in capsys.readouterr().out
    with pytest.raises(ValueError, match="unknown policy 'old'"):
        diagnose(read_logs(path), reward="click", policy="old")


@pytest.mark.slow
@pytest.mark.parametrize("switch", ["cascade", "reward interaction", "context-dependent position bias", "support"])
def test_each_switch_fires_its_check_and_only_on(switch):
    on = [run_world(switch, seed)[switch] for seed in (0, 1)]
    off = [run_world("none", seed)[switch] for seed in (0, 1)]
    assert all(on) and not any(off)


def test_slate_logs_verdicts_follow_the_click_model():
    from offeval_core.slate import SlateConfig, build_world, sample

    world = build_world(SlateConfig(behaviours=("cascade",)), rng=7)
    logs = read_logs(sample(world, 3000, rng=3).to_frame())
    d = diagnose(logs, reward="click")
    assert d.check("cascade").fires
    verdicts = {e.estimator: e.verdict for e in d.estimators}
    assert verdicts["iips"] == "don't" and verdicts["rips"] in ("trust", "caution")
    assert not math.isnan(d.check("support").effect)


# ---------------------------------------------------------------- checks by hand


def test_support_on_ranking_logs_counts_exposure_beyond_the_logged_depth():
    # every session logs ranks 1-2 (learnt PBM 1, 1); the target puts the logged items at ranks 3 and 1.
    # D = reciprocal up to the target's deepest rank 3: Σ D = 1 + 1/2 + 1/3 = 11/6. Per session IPS sees
    # D(3)/1 + D(1)/1 = 4/3, a share 8/11 in every session (SE 0, so p = 0 below 1); the exposure at rank 3
    # (1/3 of 11/6 = 2/11) lies beyond the deepest logged rank.
    df = pd.DataFrame({"session_id": np.repeat(np.arange(5), 2), "rank": np.tile([1, 2], 5), "click": 0,
                       "rank__new": np.tile([3, 1], 5)})
    c = check_support(read_logs(df), policy="new", discount="reciprocal")
    assert c.effect == pytest.approx(8 / 11, abs=1e-12)
    assert (c.low, c.high, c.p_value, c.fires, c.n) == (pytest.approx(8 / 11), pytest.approx(8 / 11), 0.0, True, 5)
    assert c.finding == ("IPS sees 72.7% [72.7%, 72.7%] of the new policy's exposure under reciprocal; 18.2% of it "
                         "lies beyond the deepest logged rank 2 (of 3), p = 0: the target shows items the logs "
                         "never reach.")


def test_support_on_propensity_logs_is_the_mean_top_slot_weight():
    # four sessions of two slots; top-slot weights π/π0 = (0.5, 1, 1, 0.5): mean 0.75, sd √(0.25/3),
    # SE 0.1443; one-sided p = Φ((0.75 − 1) / 0.1443) = Φ(−1.732) = 0.0416 < 0.05: fires
    tp = [0.25, 0.5, 0.5, 0.5, 0.5, 0.5, 0.25, 0.5]
    df = pd.DataFrame({"session_id": np.repeat(np.arange(4), 2), "rank": np.tile([1, 2], 4), "click": 0,
                       "logging_propensity": 0.5, "target_propensity__new": tp})
    c = check_support(read_logs(df), policy="new", level=0.95)
    se = math.sqrt(0.25 / 3) / 2
    z = 1.959963984540054
    assert (c.effect, c.n) == (0.75, 4)
    assert (c.low, c.high) == (pytest.approx(0.75 - z * se, abs=1e-12), pytest.approx(0.75 + z * se, abs=1e-12))
    assert c.p_value == pytest.approx(0.5 * math.erfc(0.25 / se / math.sqrt(2)), abs=1e-12)
    assert c.fires and c.finding.endswith("about 25.0% of the target's choices are never logged.")
    # the same weights at a stricter α do not fire
    assert not check_support(read_logs(df), policy="new", alpha=0.04).fires


def test_interaction_check_is_two_sided_with_the_within_item_slope():
    from offeval_core.diagnose import check_interaction

    rng = np.random.default_rng(3)
    n, k = 300, 4
    items = np.array([rng.permutation(6)[:k] for _ in range(n)])          # 4 distinct of 6 items per session
    cat = {i: "x" if i % 2 == 0 else "y" for i in range(6)}
    same_above = np.array([[sum(cat[a] == cat[s[j]] for a in s[:j]) for j in range(k)] for s in items])
    click = (rng.uniform(size=(n, k)) < 0.5 + 0.15 * same_above).astype(float)   # a rise: two-sided matters
    df = pd.DataFrame({"session_id": np.repeat(np.arange(n), k), "rank": np.tile(np.arange(1, k + 1), n),
                       "item_id": items.ravel(), "click": click.ravel()})
    c = check_interaction(read_logs(df), "click", categories=cat, level=0.95)
    rows = np.tile(np.arange(1, k + 1), n) >= 2
    y, x = click.ravel()[rows], same_above.ravel()[rows]
    strata = pd.DataFrame({"i": items.ravel()[rows], "r": np.tile(np.arange(1, k + 1), n)[rows]}).groupby(
        ["i", "r"], sort=False).ngroup().to_numpy()
    b, se = _within_slope(y, x, strata, np.repeat(np.arange(n), k)[rows])
    base = y.mean()
    assert b > 0
    assert c.effect == pytest.approx(b / base, rel=1e-12)
    assert (c.low, c.high) == (pytest.approx((b - 1.959963984540054 * se) / base, rel=1e-9),
                               pytest.approx((b + 1.959963984540054 * se) / base, rel=1e-9))
    assert c.p_value == pytest.approx(math.erfc(abs(b / se) / math.sqrt(2)), rel=1e-9)   # 2·(1 − Φ(|z|))
    assert c.fires == (c.p_value < 0.05) and c.n == rows.sum()
    with pytest.raises(ValueError, match=rf"lacks {(items == 5).sum()} logged row\(s\)' items"):
        check_interaction(read_logs(df), "click", categories={i: "x" for i in range(5)})


def test_rewards_above_says_what_it_was_stratified_on_without_an_item_column():
    """Without item_id the rewards-above slope is taken within rank × segment × day only: the finding must not say
    "given the item" (an export whose item column was left unmapped, e.g. `asset`)."""
    from offeval_core.diagnose import check_interaction

    rng = np.random.default_rng(5)
    n, k = 400, 4
    click = (rng.uniform(size=(n, k)) < 0.3).astype(float)
    df = pd.DataFrame({"session_id": np.repeat(np.arange(n), k), "rank": np.tile(np.arange(1, k + 1), n),
                       "item_id": rng.integers(0, 50, size=n * k), "click": click.ravel()})
    with_item = check_interaction(read_logs(df), "click")
    without = check_interaction(read_logs(df.drop(columns=["item_id"])), "click")
    assert " given the item, " in with_item.finding and "item × rank × segment × day" in with_item.test
    assert " given the rank, segment and day (the logs have no item column), " in without.finding
    assert "given the item" not in without.finding
    assert without.test.startswith("within-stratum slope on 'a reward above' (rank × segment × day; no item column)")


def test_a_reward_at_rank_1_counts_as_a_reward_above():
    """Two ranks, one item per rank: rank 1 is clicked in even sessions, rank 2 only in sessions s ≡ 1 (mod 4), so
    rank 2 is never clicked after a click at rank 1. The slope of rank 2's reward on "a reward above" is then
    0 − 1/2 = −1/2 on a base rate of 100/400 = 1/4: a relative change of exactly −200 %. Counting rewards above
    among ranks ≥ 2 only would see no reward above any rank-2 row and call the check not testable."""
    from offeval_core.diagnose import check_interaction

    n = 400
    s = np.arange(n)
    df = pd.DataFrame({"session_id": np.repeat(s, 2), "rank": np.tile([1, 2], n), "item_id": np.tile([1, 2], n),
                       "click": np.c_[(s % 2 == 0), (s % 4 == 1)].astype(float).ravel()})
    res = check_interaction(read_logs(df), "click")
    assert res.identified
    assert res.n == n  # the rank-2 rows
    assert res.effect == pytest.approx(-2.0, abs=1e-12)
    assert res.fires and res.p_value < 1e-10
    assert res.finding.startswith("a reward above changes the reward rate by -200.0% ")


def test_the_table_and_the_verdict_chart_read_the_diagnosis_level():
    """A diagnosis keeps the level its checks were computed at; its table and the verdict chart draw the estimators'
    CIs at that level (the page passes the sidebar's), value ± z · stderr, not at a level of their own."""
    from offeval_core.diagnose import Diagnosis, EstimatorCheck
    from offeval_core.verdict_chart import verdict_figure

    e = EstimatorCheck("ips", "IPS", 0.004, 0.001, 500.0, 0.25, 0.01, 0.1, (), "trust", "")
    for level, z in ((0.99, 2.5758293035489004), (0.9, 1.6448536269514722)):
        d = Diagnosis("x", "click", "bts", 0.05, (), (e,), level=level)
        row = d.table().iloc[0]
        assert (row["CI low"], row["CI high"]) == (pytest.approx(0.004 - z * 0.001, rel=1e-12),
                                                   pytest.approx(0.004 + z * 0.001, rel=1e-12))
        fig = verdict_figure(d)
        assert fig.data[0].error_x.array == pytest.approx((z * 0.001,), rel=1e-12)
        assert fig.layout.xaxis.title.text.endswith(f"{level:.0%} CI")
        assert d.to_dict()["level"] == level
    assert Diagnosis("x", "click", "bts", 0.05, (), (e,)).level == 0.99  # offeval_core.defaults.LEVEL
