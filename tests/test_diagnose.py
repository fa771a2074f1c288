"""Assumption checks and verdicts: each test against a direct computation on constructed logs, and on
simulated worlds with and without each switch (a few seeds here; the measured rates are in docs/diagnose.md)."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats
from statsmodels.stats.contingency_tables import Table2x2

from offeval_core import cli
from offeval_core.diagnose import (
    AssumptionCheck,
    Diagnosis,
    _cmh,
    _within_slope,
    check_cascade,
    check_context_position_bias,
    check_interaction,
    check_support,
    diagnose,
)
from offeval_core.diagnose_validation import run_world
from offeval_core.logs import read_logs
from offeval_core.verdicts import EstimatorCheck


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


# ---------------------------------------------------------------- every field on logs built by hand
Z99 = 2.5758293035489004   # Φ⁻¹(0.995), the default level 0.99
Z95 = 1.959963984540054   # Φ⁻¹(0.975)


def cascade_frame(t1, t2, *, days=("2024-01-01",), segs=("a",), arms=("control",)):
    """Per (day, segment, arm) cell the same sessions: at rank 1 the table t1 = (reward & continues, reward & stops,
    no reward & continues, no reward & stops); the sessions that continue give rank 2 the table t2 in that order,
    and the ones that continue past rank 2 end with an unrewarded rank 3."""
    rows, sid = [], 0
    for d in days:
        for g in segs:
            for a in arms:
                r1 = [(1, True)] * t1[0] + [(1, False)] * t1[1] + [(0, True)] * t1[2] + [(0, False)] * t1[3]
                r2 = iter([(1, True)] * t2[0] + [(1, False)] * t2[1] + [(0, True)] * t2[2] + [(0, False)] * t2[3])
                for c1, cont1 in r1:
                    clicks = [c1]
                    if cont1:
                        c2, cont2 = next(r2)
                        clicks += [c2, 0] if cont2 else [c2]
                    for k, c in enumerate(clicks):
                        rows.append({"session_id": sid, "rank": k + 1, "item_id": k + 1, "click": float(c),
                                     "segment": g, "day": d, "arm": a, "rank__new": k + 1})
                    sid += 1
    return pd.DataFrame(rows)


def rbg_interval(tables, z):
    """Mantel-Haenszel odds ratio and the Robins-Breslow-Greenland interval, from the 2×2 tables (a, b, c, d)."""
    p_, q_, r_, s_ = [], [], [], []
    for a, b, c, d in tables:
        n = a + b + c + d
        p_.append((a + d) / n)
        q_.append((b + c) / n)
        r_.append(a * d / n)
        s_.append(b * c / n)
    p_, q_, r_, s_ = map(np.array, (p_, q_, r_, s_))
    big_r, big_s = r_.sum(), s_.sum()
    var = ((p_ * r_).sum() / (2 * big_r ** 2) + (p_ * s_ + q_ * r_).sum() / (2 * big_r * big_s)
           + (q_ * s_).sum() / (2 * big_s ** 2))
    orr = big_r / big_s
    return orr, orr * math.exp(-z * math.sqrt(var)), orr * math.exp(z * math.sqrt(var))


def cmh_p(tables):
    """CMH test without continuity correction: (Σ a − E a)² / Σ Var a on 1 df."""
    num, var = 0.0, 0.0
    for a, b, c, d in tables:
        n = a + b + c + d
        num += a - (a + b) * (a + c) / n
        var += (a + b) * (c + d) * (a + c) * (b + d) / (n ** 2 * (n - 1))
    return float(stats.chi2.sf(num ** 2 / var, 1))


def test_cascade_every_field_over_sixteen_strata():
    # 2 days × 2 segments × 2 arms, 16 sessions per cell. Rank 1: 8 rewarded (2 continue), 8 not (6 continue):
    # OR 2·2 / (6·6) = 1/9. Rank 2 (the 8 that continued): 4 rewarded (1 continues), 4 not (3 continue): OR 1/9.
    # Rank 3 is the deepest logged rank, left out. So 8 cells × 2 ranks = 16 strata, each OR 1/9: the MH OR is
    # exactly 1/9. Rows tested: 8 · (16 + 8) = 192; raw continuation 3/12 = 25 % after a reward, 9/12 = 75 % without.
    df = cascade_frame((2, 6, 6, 2), (1, 3, 3, 1), days=("2024-01-01", "2024-01-02"), segs=("a", "b"),
                       arms=("control", "treatment"))
    tables = [(2, 6, 6, 2), (1, 3, 3, 1)] * 8
    orr, lo, hi = rbg_interval(tables, Z99)
    p = cmh_p(tables)   # (8 · (−2 − 1))² / (8 · (4096/3840 + 256/448)) = 43.95 on 1 df: 3.36e-11
    assert orr == pytest.approx(1 / 9, rel=1e-15)
    c = check_cascade(read_logs(df), "click")
    assert (c.name, c.question, c.test, c.effect_label) == (
        "cascade", "does the chance of continuing depend on a reward at this rank?",
        "Cochran-Mantel-Haenszel, strata day × segment × arm × rank", "odds ratio of continuing after a reward")
    assert c.effect == pytest.approx(1 / 9, rel=1e-12)
    assert (c.low, c.high) == (pytest.approx(lo, rel=1e-9), pytest.approx(hi, rel=1e-9))
    assert c.p_value == pytest.approx(p, rel=1e-4)   # (statsmodels takes 1 − cdf: good to ~1e-6 here)
    assert (c.fires, c.n, c.identified) == (True, 192, True)
    assert c.finding == (f"sessions continue after a reward with odds ratio 0.11 [{lo:.2f}, {hi:.2f}] (raw: 25.0% "
                         f"vs 75.0% without), p = {p:.2g} over 16 strata: users stop after rewards — cascade "
                         "behaviour.")
    assert c.finding.startswith("sessions continue after a reward with odds ratio 0.11 [0.05, 0.26] (raw: 25.0% ")
    d = c.to_dict()
    assert (d["effect"], d["low"], d["high"], d["p_value"]) == (c.effect, c.low, c.high, c.p_value)
    assert all(type(d[k]) is float for k in ("effect", "low", "high", "p_value"))


def test_cascade_finding_when_continuing_rises_and_at_alpha_itself():
    # one stratum (rank 2 is the deepest: every session reaching it stops): a = 60, b = 40, c = 50, d = 50:
    # OR 60·50 / (40·50) = 1.5 > 1; CMH (60 − 100·110/200)² / (100·100·110·90 / (200²·199)) = 25 / 12.437: p 0.156
    df = cascade_frame((60, 40, 50, 50), (0, 0, 0, 110))
    p = cmh_p([(60, 40, 50, 50)])
    orr, lo, hi = rbg_interval([(60, 40, 50, 50)], Z95)
    assert orr == pytest.approx(1.5, rel=1e-15)
    c = check_cascade(read_logs(df), "click", alpha=0.5, level=0.95)
    assert c.effect == pytest.approx(1.5, rel=1e-12) and c.p_value == pytest.approx(p, rel=1e-9)
    assert (c.low, c.high) == (pytest.approx(lo, rel=1e-9), pytest.approx(hi, rel=1e-9))
    assert c.fires and c.n == 200
    assert c.finding == (f"sessions continue after a reward with odds ratio 1.50 [{lo:.2f}, {hi:.2f}] (raw: 60.0% "
                         f"vs 50.0% without), p = {p:.2g} over 1 strata: continuing depends on the reward.")
    # a p-value equal to α does not fire
    at = check_cascade(read_logs(df), "click", alpha=c.p_value, level=0.95)
    assert not at.fires and at.finding.endswith("over 1 strata: no evidence of cascade behaviour.")


def test_cascade_not_testable_without_a_rewarded_rank():
    df = cascade_frame((0, 0, 3, 2), (0, 0, 0, 3))   # no reward anywhere: no stratum has both rows
    c = check_cascade(read_logs(df), "click")
    assert c.to_dict() == {
        "name": "cascade", "question": "does the chance of continuing depend on a reward at this rank?",
        "test": "CMH", "effect": None, "effect_label": "odds ratio of continuing after a reward", "low": None,
        "high": None, "p_value": None, "fires": False, "n": 5,
        "finding": "not testable: no rank with both rewarded and unrewarded rows that some sessions leave",
        "identified": False}
    assert c.fires is False and c.identified is False and math.isnan(c.effect)
    assert all(math.isnan(v) for v in (c.low, c.high, c.p_value))


def rewards_above_frame(*, propensities=False):
    """Block A (day 1, segment a; 400 sessions): rank 1 (item 1) rewarded in even sessions, rank 2 (item 2) only
    in sessions s ≡ 1 (mod 4), so never after a reward above. Blocks D (day 2), S (segment b), each 4 sessions: rank
    1 rewarded, rank 2 (item 2) rewarded in 2 of 4. Block R (4 sessions of 3 ranks): rank 1 rewarded, rank 2 is item
    4 (never rewarded), rank 3 is item 2, rewarded in 2 of 4. Outside block A no stratum item × rank × segment × day
    has rows with and without a reward above, so the slope is block A's alone; leaving out the item, the rank, the
    segment or the day pools a block's rows (all after a reward above) with block A's and moves it."""
    rows = []

    def add(sid, clicks, items, day, seg):
        for k, (c, i) in enumerate(zip(clicks, items, strict=True)):
            rows.append({"session_id": sid, "rank": k + 1, "item_id": i, "click": float(c), "segment": seg,
                         "day": day})
    for s in range(400):
        add(s, [s % 2 == 0, s % 4 == 1], [1, 2], "2024-01-01", "a")
    for j in range(4):
        add(400 + j, [1, j % 2], [1, 2], "2024-01-02", "a")
        add(410 + j, [1, j % 2], [1, 2], "2024-01-01", "b")
        add(420 + j, [1, 0, j % 2], [1, 4, 2], "2024-01-01", "a")
    df = pd.DataFrame(rows)
    if propensities:
        df["logging_propensity"] = 0.5
        df["target_propensity__new"] = 0.5
    return df


def _rewards_above_numbers(level):
    # block A: x = a reward above (½ of 400 rows), y = the reward (¼): b = −0.5 (y is 0 whenever x is 1, ½
    # otherwise). Residuals e = y − ¼ + ½(x − ½): 0 where x = 1, ±½ where x = 0, where x − x̄ = −½: each session's
    # score is ∓¼ · √(400/399). se = √(200 · (1/16) · 400/399) / Σ(x − x̄)² = √(5000/399) / 100. The base rate is
    # over every row below rank 1: (100 + 2 + 2 + 2) rewards / (400 + 4 + 4 + 8) rows = 106/416.
    b, se, base = -0.5, math.sqrt(5000 / 399) / 100, 106 / 416
    z = stats.norm.ppf(0.5 + level / 2)
    return b / base, (b - z * se) / base, (b + z * se) / base, float(stats.norm.cdf(b / se))


def test_rewards_above_strata_and_finding_without_categories():
    rel, lo, hi, p = _rewards_above_numbers(0.95)
    c = check_interaction(read_logs(rewards_above_frame()), "click", level=0.95)
    assert (c.name, c.question, c.effect_label) == (
        "reward interaction", "does the reward at rank k depend on the items or rewards above, given the item?",
        "relative change of the reward rate after a reward above")
    assert c.test == ("within-stratum slope on 'a reward above' (item × rank × segment × day), "
                      "session-clustered SE")
    assert c.effect == pytest.approx(rel, rel=1e-12) and rel == pytest.approx(-1.9622641509433962, rel=1e-15)
    assert (c.low, c.high) == (pytest.approx(lo, rel=1e-9), pytest.approx(hi, rel=1e-9))
    assert c.p_value == pytest.approx(p, rel=1e-6)
    assert (c.fires, c.n, c.identified) == (True, 416, True)
    assert c.finding == (f"a reward above changes the reward rate by -196.2% [{lo:+.1%}, {hi:+.1%}] given the item, "
                         f"p = {p:.2g} (one-sided, a fall); no item categories given, so only a fall after rewards "
                         "above is testable.")
    # a p-value equal to α does not fire
    assert check_interaction(read_logs(rewards_above_frame()), "click", level=0.95, alpha=c.p_value).fires is False


def test_rewards_above_is_the_cascade_check_on_slate_logs():
    rel, lo, hi, p = _rewards_above_numbers(0.99)
    logs = read_logs(rewards_above_frame(propensities=True))
    c = check_cascade(logs, "click")
    assert (c.name, c.question) == ("cascade", "does the chance of continuing depend on a reward at this rank?")
    assert c.effect == pytest.approx(rel, rel=1e-12)
    assert (c.low, c.high) == (pytest.approx(lo, rel=1e-9), pytest.approx(hi, rel=1e-9))
    assert c.finding == (f"a reward above changes the reward rate by -196.2% [{lo:+.1%}, {hi:+.1%}] given the item, "
                         f"p = {p:.2g} (one-sided, a fall); every slot of the slate is logged, so the test is whether "
                         "a reward above lowers the chance of a reward below, given the item and slot.")
    # the interaction check has nothing else to test on slate logs without categories
    i = check_interaction(logs, "click")
    assert i.to_dict() == {
        "name": "reward interaction",
        "question": "does the reward at rank k depend on the items or rewards above, given the item?", "test": "—",
        "effect": None, "effect_label": "relative change of the reward rate", "low": None, "high": None,
        "p_value": None, "fires": False, "n": 2 * 400 + 2 * 4 + 2 * 4 + 3 * 4,
        "finding": "not testable without item categories: on slate logs the rewards-above test is the cascade check.",
        "identified": False}
    assert all(math.isnan(v) for v in (i.effect, i.low, i.high, i.p_value))


@pytest.mark.parametrize("rank2", ["never", "no reward above"])
def test_rewards_above_not_testable(rank2):
    # "never": rank 1 rewarded in half the sessions, rank 2 never: slope 0 on a base rate of 0 (0/0, not testable).
    # "no reward above": rank 2 rewarded in half, rank 1 never: no variation of the rewards above (slope undefined).
    s = np.arange(40)
    clicks = np.c_[s % 2 == 0, np.zeros(40)] if rank2 == "never" else np.c_[np.zeros(40), s % 2 == 0]
    df = pd.DataFrame({"session_id": np.repeat(s, 2), "rank": np.tile([1, 2], 40), "item_id": np.tile([1, 2], 40),
                       "click": clicks.astype(float).ravel()})
    assert_interaction_not_testable(check_interaction(read_logs(df), "click"), n=40,
                                    finding="not testable: no reward below rank 1 or no variation in the rewards "
                                            "above within an item.")


def assert_interaction_not_testable(c, *, n: int, finding: str) -> None:
    """The interaction check's whole not-testable result: no effect, interval or p-value (NaN; None in to_dict)."""
    assert c.to_dict() == {
        "name": "reward interaction",
        "question": "does the reward at rank k depend on the items or rewards above, given the item?", "test": "—",
        "effect": None, "effect_label": "relative change of the reward rate", "low": None, "high": None,
        "p_value": None, "fires": False, "n": n, "finding": finding, "identified": False}
    assert c.fires is False and c.identified is False
    assert all(math.isnan(v) for v in (c.effect, c.low, c.high, c.p_value))


def test_the_table_row_by_row_and_to_dict():
    fired = AssumptionCheck("cascade", "q1", "CMH", 0.5, "odds ratio", 0.25, 0.75, 0.01, True, 10, "f1")
    quiet = AssumptionCheck("support", "q2", "t-test", 0.9, "share", 0.8, 1.0, 0.2, False, 7, "f2")
    untestable = AssumptionCheck("reward interaction", "q3", "—", math.nan, "rel", math.nan, math.nan, math.nan,
                                 False, 3, "f3", identified=False)
    e = EstimatorCheck("ips", "IPS", 0.004, 0.001, 500.0, 0.25, 0.01, 0.1, (), "caution", "why")
    d = Diagnosis("src", "click", None, 0.05, (fired, quiet, untestable), (e,), level=0.95)
    nan = math.nan
    expected = pd.DataFrame({
        "row": ["assumption: cascade", "assumption: support", "assumption: reward interaction", "estimator: IPS"],
        "result": ["violated", "not rejected", "not testable", "caution"],
        "reason": ["f1", "f2", "f3", "why"],
        "estimate": [0.5, 0.9, nan, 0.004],
        "CI low": [0.25, 0.8, nan, 0.004 - Z95 * 0.001],
        "CI high": [0.75, 1.0, nan, 0.004 + Z95 * 0.001],
        "p-value": [0.01, 0.2, nan, nan],
        "ESS share": [nan, nan, nan, 0.25],
        "effect": ["odds ratio", "share", "rel", "value of the target"],   # no policy named
        "test": ["CMH", "t-test", "—", "weights"]})
    pd.testing.assert_frame_equal(d.table(), expected, rtol=1e-12)
    assert Diagnosis("src", "click", "new", 0.05, (), (e,)).table()["effect"].tolist() == ["value of new"]
    assert d.check("support") is quiet
    out = d.to_dict()
    assert out["checks"][0] == {"name": "cascade", "question": "q1", "test": "CMH", "effect": 0.5,
                                "effect_label": "odds ratio", "low": 0.25, "high": 0.75, "p_value": 0.01,
                                "fires": True, "n": 10, "finding": "f1", "identified": True}
    assert out["checks"][2]["effect"] is None and out["level"] == 0.95 and out["policy"] is None
    assert (out["source"], out["reward"], out["alpha"]) == ("src", "click", 0.05)
    assert len(out["estimators"]) == 1 and out["estimators"][0]["verdict"] == "caution"
    # without an estimator the table still has every column; the assumption rows have no ESS share
    bare = Diagnosis("src", "click", None, 0.05, (fired,), ()).table()
    pd.testing.assert_frame_equal(bare, expected.iloc[:1], rtol=1e-12)


def _random_logs():
    """300 sessions of 1-3 ranks, clicks at random (rate 0.3), two segments; rank__prod is the logged ranking (the
    logging policy), rank__cand a random reordering, moved one rank down in every 16th session. Seed 1 puts every
    check's p-value between 0.05 and 0.95 (cascade 0.685, interaction 0.322, segments 0.438, support 0.196)."""
    rng = np.random.default_rng(1)
    lengths = rng.integers(1, 4, 300)
    rows = []
    for s in range(300):
        items = rng.permutation(8)[:lengths[s]]
        perm = rng.permutation(lengths[s]) + 1
        for r in range(lengths[s]):
            rows.append({"session_id": s, "rank": r + 1, "item_id": int(items[r]), "click": float(rng.uniform() < 0.3),
                         "segment": "ab"[s % 2], "rank__prod": r + 1, "rank__cand": int(perm[r]) + (s % 16 == 0)})
    return read_logs(pd.DataFrame(rows)), {i: "xy"[i % 2] for i in range(8)}


def test_diagnose_passes_alpha_level_discount_and_categories_to_every_check():
    logs, cat = _random_logs()
    d = diagnose(logs, reward="click", categories=cat, alpha=0.95, level=0.9, discount="reciprocal")
    assert (d.source, d.reward, d.policy, d.alpha, d.level) == (logs.source, "click", "cand", 0.95, 0.9)
    direct = (check_cascade(logs, "click", alpha=0.95, level=0.9),
              check_interaction(logs, "click", categories=cat, alpha=0.95, level=0.9),
              check_context_position_bias(logs, "click", alpha=0.95, level=0.9),
              check_support(logs, policy="cand", discount="reciprocal", alpha=0.95, level=0.9))
    assert [c.to_dict() for c in d.checks] == [c.to_dict() for c in direct]
    # every p-value lies between the default α 0.05 and 0.95, so each check fires only with the α passed on
    assert all(0.05 < c.p_value < 0.95 and c.fires for c in d.checks)
    assert d.check("reward interaction").test.startswith("within-stratum slope on same-category items above")
    assert d.check("support").test == ("one-sided t-test of covered exposure < 1 (D = reciprocal, D0 = learnt PBM)")
    # at level 0.9 the intervals are narrower than at the default 0.99
    default = diagnose(logs, reward="click", categories=cat)
    for c, c99 in zip(d.checks, default.checks, strict=True):
        assert c.high - c.low < c99.high - c99.low
    assert default.check("support").test.endswith("(D = log2, D0 = learnt PBM)")   # the default discount
    assert default.level == 0.99 and default.alpha == 0.05


def test_diagnose_policies_by_name():
    # a propensity policy whose name holds "__": the name is all that follows target_propensity__
    df = pd.DataFrame({"session_id": [0, 0, 1, 1, 2, 2], "rank": [1, 2] * 3, "click": [1.0, 0, 0, 1, 0, 0],
                       "logging_propensity": 0.5, "target_propensity__a__b": [0.25, 0.5, 0.5, 0.5, 0.75, 0.5]})
    d = diagnose(read_logs(df), reward="click")
    assert d.policy == "a__b" and [e.estimator for e in d.estimators] == ["iips", "sniips"]
    # no target policy at all: no estimator
    none = diagnose(read_logs(df.drop(columns=["target_propensity__a__b"])), reward="click")
    assert none.policy is None and none.estimators == ()
    logs, _ = _random_logs()
    for alpha in (0, 1, -0.5, 1.5):
        with pytest.raises(ValueError, match=rf"^alpha must be in \(0, 1\), got {alpha}$"):
            diagnose(logs, reward="click", alpha=alpha)


def test_checks_default_alpha_is_five_percent():
    # p-values 0.685, 0.322, 0.438 and 0.196: none fires at the default α = 0.05
    logs, cat = _random_logs()
    checks = (check_cascade(logs, "click"), check_interaction(logs, "click", categories=cat),
              check_context_position_bias(logs, "click"), check_support(logs, policy="cand", discount="reciprocal"))
    assert [round(c.p_value, 3) for c in checks] == [0.685, 0.322, 0.438, 0.196]
    assert not any(c.fires for c in checks)


def test_interaction_with_categories_on_slate_logs_is_the_category_slope():
    logs, cat = _random_logs()
    plain = check_interaction(logs, "click", categories=cat)
    f = logs.frame[["session_id", "rank", "item_id", "click", "segment"]].assign(
        logging_propensity=0.5, target_propensity__new=0.5)
    slate = check_interaction(read_logs(f), "click", categories=cat)
    assert slate.to_dict() == plain.to_dict() and slate.identified
    assert slate.finding.startswith("each same-category item above changes the reward rate by ")


def segment_frame(counts, days=None):
    """Unrewarded sessions of 1 or 2 ranks; counts = {segment: (sessions of 2 ranks, sessions of 1 rank)}, each
    segment on its own day if ``days`` names them."""
    rows, sid = [], 0
    for j, (seg, (two, one)) in enumerate(counts.items()):
        for n in [2] * two + [1] * one:
            for r in range(1, n + 1):
                rows.append({"session_id": sid, "rank": r, "item_id": r, "click": 0.0, "segment": seg,
                             "rank__new": r, "day": days[j] if days else "2024-01-01"})
            sid += 1
    return pd.DataFrame(rows)


def test_context_check_two_segments_by_hand():
    # rank 1 only (rank 2 is the deepest logged rank), one stratum: segment a continues in 30 of 40 sessions,
    # b in 10 of 40: OR (30·30) / (10·10) = 9; with two segments only a against b is tested, no Holm.
    # Mean lengths: a (30·2 + 10) / 40 = 1.75, b 1.25.
    df = segment_frame({"a": (30, 10), "b": (10, 30)})
    orr, lo, hi = rbg_interval([(30, 10, 10, 30)], Z99)
    assert orr == pytest.approx(9.0, rel=1e-15)
    p = cmh_p([(30, 10, 10, 30)])
    c = check_context_position_bias(read_logs(df), "click")
    assert (c.name, c.question, c.test, c.effect_label) == (
        "context-dependent position bias", "is the learnt position-bias curve the same in every segment?",
        "Cochran-Mantel-Haenszel per segment, strata day × arm × rank × rewards at the rank",
        "odds ratio of continuing, segment vs the rest")
    assert c.effect == pytest.approx(9.0, rel=1e-12) and c.p_value == pytest.approx(p, rel=1e-6)
    assert (c.low, c.high) == (pytest.approx(lo, rel=1e-9), pytest.approx(hi, rel=1e-9))
    assert (c.fires, c.n, c.identified) == (True, 80, True)
    assert c.finding == (f"segment 'a' continues with odds ratio 9.00 [{lo:.2f}, {hi:.2f}] against the rest (mean "
                         f"session length a 1.8, b 1.2), p = {p:.2g}: one position-bias curve does not fit every "
                         "segment.")
    # a p-value equal to α does not fire
    at = check_context_position_bias(read_logs(df), "click", alpha=c.p_value)
    assert at.fires is False and at.finding.endswith(": one position-bias curve fits every segment.")


def test_context_check_three_segments_holm():
    # each segment against the other two (rank 1 only; 48 of 120 sessions continue): a (24 of 40 continue) vs 24 of
    # 80: OR 24·56 / (16·24) = 3.5; b (4 of 40) vs 44 of 80: OR 4·36 / (36·44) = 1/11; c (20 of 40) vs 28 of 80:
    # OR 20·52 / (20·28). Holm over the three p-values; the smallest adjusted one (b's, not the first segment's) is
    # reported, with b's OR. Mean lengths: a 64/40 = 1.6, b 44/40 = 1.1, c 1.5.
    from statsmodels.stats.multitest import multipletests

    df = segment_frame({"a": (24, 16), "b": (4, 36), "c": (20, 20)})
    tables = {"a": (24, 16, 24, 56), "b": (4, 36, 44, 36), "c": (20, 20, 28, 52)}
    ps = {s: cmh_p([t]) for s, t in tables.items()}
    adj = dict(zip(ps, multipletests(list(ps.values()), method="holm")[1], strict=True))
    assert adj["b"] < adj["a"] < adj["c"]
    orr, lo, hi = rbg_interval([tables["b"]], Z95)
    assert orr == pytest.approx(1 / 11, rel=1e-15)
    c = check_context_position_bias(read_logs(df), "click", level=0.95)
    assert c.effect == pytest.approx(orr, rel=1e-12) and c.p_value == pytest.approx(adj["b"], rel=1e-6)
    assert (c.low, c.high) == (pytest.approx(lo, rel=1e-9), pytest.approx(hi, rel=1e-9))
    assert c.finding == (f"segment 'b' continues with odds ratio 0.09 [{lo:.2f}, {hi:.2f}] against the rest "
                         f"(mean session length a 1.6, b 1.1, c 1.5), p = {adj['b']:.2g} (Holm): one position-bias "
                         "curve does not fit every segment.")
    assert c.fires and c.n == 120


def test_context_check_not_testable():
    def expect(c, n, why):
        assert c.to_dict() == {
            "name": "context-dependent position bias",
            "question": "is the learnt position-bias curve the same in every segment?", "test": "CMH",
            "effect": None, "effect_label": "odds ratio of continuing, segment vs the rest", "low": None,
            "high": None, "p_value": None, "fires": False, "n": n, "finding": f"not testable: {why}.",
            "identified": False}
        assert c.fires is False and c.identified is False
        assert all(math.isnan(v) for v in (c.effect, c.low, c.high, c.p_value))

    one = segment_frame({"a": (3, 2)})
    expect(check_context_position_bias(read_logs(one), "click"), 8, "one segment only")
    slate = segment_frame({"a": (3, 2), "b": (1, 1)}).assign(logging_propensity=0.5)
    expect(check_context_position_bias(read_logs(slate), "click"), 11,
           "every slot is logged, so session length says nothing")
    # the segments on different days: every stratum (day × arm × rank × rewards) holds one segment
    apart = segment_frame({"a": (3, 1), "b": (1, 3)}, days=("2024-01-01", "2024-01-02"))
    expect(check_context_position_bias(read_logs(apart), "click"), 8, "no stratum with both segments")


def category_frame(rank2_clicked):
    """400 sessions of two ranks: rank 1 shows item 1 (category x) in even sessions, item 2 (y) in odd ones; rank 2
    shows item 3 (x), rewarded where ``rank2_clicked(s)``; rank 1 is never rewarded."""
    s = np.arange(400)
    return pd.DataFrame({"session_id": np.repeat(s, 2), "rank": np.tile([1, 2], 400),
                         "item_id": np.c_[np.where(s % 2 == 0, 1, 2), np.full(400, 3)].ravel(),
                         "click": np.c_[np.zeros(400), rank2_clicked(s)].astype(float).ravel()})


CATEGORIES = {1: "x", 2: "y", 3: "x"}


def test_interaction_with_categories_by_hand():
    # rank 2 (one stratum: item 3 at rank 2) has one same-category item above in even sessions (x = 1) and none in
    # odd ones; it is rewarded in sessions s ≡ 1 (mod 4), all with x = 0. As in the rewards-above example: b = −0.5,
    # se = √(5000/399) / 100, base 100/400: a relative change of −200 %; two-sided p = 2 · Φ(−|b / se|).
    df = category_frame(lambda s: s % 4 == 1)
    b, se, base = -0.5, math.sqrt(5000 / 399) / 100, 0.25
    p = float(2 * stats.norm.sf(abs(b / se)))
    lo, hi = (b - Z95 * se) / base, (b + Z95 * se) / base
    c = check_interaction(read_logs(df), "click", categories=CATEGORIES, level=0.95)
    assert (c.name, c.question, c.effect_label) == (
        "reward interaction", "does the reward at rank k depend on the items or rewards above, given the item?",
        "relative change of the reward rate per same-category item above")
    assert c.test == ("within-stratum slope on same-category items above (item × rank × segment × day), "
                      "session-clustered SE, two-sided")
    assert c.effect == pytest.approx(-2.0, rel=1e-12) and c.p_value == pytest.approx(p, rel=1e-6)
    assert (c.low, c.high) == (pytest.approx(lo, rel=1e-9), pytest.approx(hi, rel=1e-9))
    assert (c.fires, c.n, c.identified) == (True, 400, True)
    assert c.finding == (f"each same-category item above changes the reward rate by -200.0% [{lo:+.1%}, {hi:+.1%}] "
                         f"given the item and rank, p = {p:.2g}: rewards interact across ranks.")
    at = check_interaction(read_logs(df), "click", categories=CATEGORIES, level=0.95, alpha=c.p_value)
    assert at.fires is False and at.finding.endswith(f"p = {p:.2g}: no evidence of reward interactions.")


@pytest.mark.parametrize("case", ["no reward", "no variation"])
def test_interaction_with_categories_not_testable(case):
    df = category_frame(lambda s: np.zeros_like(s))
    if case == "no variation":   # every rank-1 item in category y: no same-category item above anywhere
        df = category_frame(lambda s: s % 2 == 0)
        df.loc[df["rank"] == 1, "item_id"] = 2
    assert_interaction_not_testable(check_interaction(read_logs(df), "click", categories=CATEGORIES), n=400,
                                    finding="not testable: no reward below rank 1 or no variation in same-category "
                                            "items above within an item.")


def test_support_conditional_propensities_and_which_weights():
    # top-slot conditional weights 0.2/0.4, 0.4/0.4, 0.6/0.4, 0.8/0.4 = (0.5, 1, 1.5, 2): mean 1.25, sd √(1.25/3),
    # se = sd / 2; p = Φ(0.25 / se) = 0.78: no evidence of missing support
    df = pd.DataFrame({"session_id": np.repeat(np.arange(4), 2), "rank": np.tile([1, 2], 4), "click": 0.0,
                       "logging_conditional_propensity": 0.4,
                       "target_conditional_propensity__new": [0.2, 0.4, 0.4, 0.4, 0.6, 0.4, 0.8, 0.4]})
    se = math.sqrt(1.25 / 3) / 2
    p = float(stats.norm.cdf(0.25 / se))
    c = check_support(read_logs(df), policy="new", level=0.95)
    assert (c.name, c.question, c.test, c.effect_label) == (
        "support", "does the logging policy show what the target would show?", "one-sided test of mean weight < 1",
        "share of the target's exposure with support")
    assert c.effect == pytest.approx(1.25, rel=1e-15) and c.p_value == pytest.approx(p, rel=1e-12)
    assert (c.low, c.high) == (pytest.approx(1.25 - Z95 * se, rel=1e-12), pytest.approx(1.25 + Z95 * se, rel=1e-12))
    assert (c.fires, c.n, c.identified) == (False, 4, True)
    assert c.finding == (f"the mean importance weight at the top slot is 1.250 [{1.25 - Z95 * se:.3f}, "
                         f"{1.25 + Z95 * se:.3f}] (1 with full support), p = 0.78: no evidence of missing support.")
    assert check_support(read_logs(df), policy="new", alpha=0.5).fires is False
    assert check_support(read_logs(df), policy="new", alpha=c.p_value).fires is False   # p = α does not fire
    assert check_support(read_logs(df), policy="new", alpha=0.79).fires is True
    # with plain propensities as well, the plain weights are the ones read: all 1 here, so se = 0 and p = 1
    both = df.assign(logging_propensity=0.5, target_propensity__new=0.5)
    c = check_support(read_logs(both), policy="new")
    assert (c.effect, c.low, c.high, c.p_value, c.fires) == (1.0, 1.0, 1.0, 1.0, False)
    # weights all 0.5: se = 0 below 1, p = 0
    c = check_support(read_logs(both.assign(target_propensity__new=0.25)), policy="new")
    assert (c.effect, c.p_value, c.fires) == (0.5, 0.0, True)
    assert c.finding.endswith("p = 0: about 50.0% of the target's choices are never logged.")


def test_support_full_on_ranking_logs_and_not_testable():
    # the target ranks every item where it was logged: share Σ D / Σ D = 1 in every session, se = 0, p = 1
    df = pd.DataFrame({"session_id": np.repeat(np.arange(3), 2), "rank": np.tile([1, 2], 3), "click": 0.0,
                       "rank__new": np.tile([1, 2], 3)})
    c = check_support(read_logs(df), policy="new")
    assert (c.effect, c.low, c.high, c.p_value, c.fires, c.n) == (1.0, 1.0, 1.0, 1.0, False, 3)
    assert c.test == "one-sided t-test of covered exposure < 1 (D = log2, D0 = learnt PBM)"
    assert c.finding == ("IPS sees 100.0% [100.0%, 100.0%] of the new policy's exposure under log2; 0.0% of it lies "
                         "beyond the deepest logged rank 2 (of 2), p = 1: no evidence of missing support.")
    for policy in (None, "old"):
        c = check_support(read_logs(df), policy=policy)
        assert c.to_dict() == {
            "name": "support", "question": "does the logging policy show what the target would show?", "test": "—",
            "effect": None, "effect_label": "share of the target's exposure with support", "low": None,
            "high": None, "p_value": None, "fires": False, "n": 6,
            "finding": "not testable: name a target policy with rank__<policy> or propensity columns.",
            "identified": False}
        assert c.fires is False and c.identified is False
        assert all(math.isnan(v) for v in (c.effect, c.low, c.high, c.p_value))


def test_interaction_with_categories_strata():
    # category_frame's 400 sessions (day 1, segment a) plus three blocks of 4 sessions whose rank 1 shows item 1
    # (category x): block D on day 2 and block S in segment b show item 3 (x) at rank 2, rewarded in 2 of 4; block R
    # shows item 4 (y, never rewarded) at rank 2 and item 3 at rank 3, rewarded in 2 of 4. Within a stratum
    # item × rank × segment × day only the first 400 sessions vary the count of same-category items above, so
    # b = −0.5 and se are theirs (as above), on a base rate of (100 + 2 + 2 + 2) / (400 + 4 + 4 + 8). Leaving out
    # the item, the rank, the segment or the day pools a block's rows with the first ones and moves the slope.
    base_df = category_frame(lambda s: s % 4 == 1).assign(segment="a", day="2024-01-01")
    rows = []
    for j in range(4):
        for sid, day, seg, items, clicks in ((400 + j, "2024-01-02", "a", [1, 3], [0, j % 2]),
                                             (410 + j, "2024-01-01", "b", [1, 3], [0, j % 2]),
                                             (420 + j, "2024-01-01", "a", [1, 4, 3], [0, 0, j % 2])):
            for k, (i, c) in enumerate(zip(items, clicks, strict=True)):
                rows.append({"session_id": sid, "rank": k + 1, "item_id": i, "click": float(c), "segment": seg,
                             "day": day})
    df = pd.concat([base_df, pd.DataFrame(rows)], ignore_index=True)
    b, se, base = -0.5, math.sqrt(5000 / 399) / 100, 106 / 416
    c = check_interaction(read_logs(df), "click", categories={**CATEGORIES, 4: "y"}, level=0.95)
    assert c.effect == pytest.approx(b / base, rel=1e-12)
    assert (c.low, c.high) == (pytest.approx((b - Z95 * se) / base, rel=1e-9),
                               pytest.approx((b + Z95 * se) / base, rel=1e-9))
    assert c.p_value == pytest.approx(float(2 * stats.norm.sf(abs(b / se))), rel=1e-6)
    assert c.n == 416


def test_cmh_counts_only_strata_with_every_margin():
    # strata (a, b, c, d) with a = x & y, b = x & not y, c = not x & y, d = neither: S0 (2, 6, 6, 2); S1-S4 each
    # with one empty margin (no x, no non-x, no y, no non-y): no information, left out; S5 (1, 0, 0, 1), every
    # margin 1, counted. MH OR = (2·2/16 + 1·1/2) / (6·6/16 + 0) = 0.75 / 2.25 = 1/3 over k = 2 strata.
    tables = [(2, 6, 6, 2), (0, 0, 3, 2), (3, 2, 0, 0), (0, 3, 0, 2), (3, 0, 2, 0), (1, 0, 0, 1)]
    x, y, strata = [], [], []
    for s, (a, b, c, d) in enumerate(tables):
        for xv, yv, n in ((1, 1, a), (1, 0, b), (0, 1, c), (0, 0, d)):
            x += [xv] * n
            y += [yv] * n
            strata += [s] * n
    orr, lo, hi, p, k = _cmh(np.array(x, bool), np.array(y, bool), np.array(strata), level=0.95)
    ref_or, ref_lo, ref_hi = rbg_interval([tables[0], tables[5]], Z95)
    assert (orr, ref_or) == (pytest.approx(1 / 3, rel=1e-12), pytest.approx(1 / 3, rel=1e-15))
    assert (lo, hi) == (pytest.approx(ref_lo, rel=1e-9), pytest.approx(ref_hi, rel=1e-9))
    assert p == pytest.approx(cmh_p([tables[0], tables[5]]), rel=1e-9) and k == 2
    # no rows: no information
    assert _cmh(np.array([], bool), np.array([], bool), np.array([], int), level=0.95) is None


def test_cmh_complete_separation_is_infinite_without_warnings():
    import warnings

    x = np.array([1, 1, 1, 0, 0, 0], bool)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        orr, lo, hi, p, k = _cmh(x, x, np.zeros(6, int), level=0.95)   # a = d = 3, b = c = 0: OR = 9 / 0
    assert orr == math.inf and math.isnan(lo) and math.isnan(hi) and k == 1
    assert p == pytest.approx(cmh_p([(3, 0, 0, 3)]), rel=1e-9)   # (3 − 1.5)² / (3·3·3·3 / (36·5)) = 5 on 1 df


def test_within_slope_inflation_by_stratum_size_by_hand():
    # S0 (size 2): (x, y) = (0, 0), (1, 1); S1 (size 3): (0, 0), (1, 0), (2, 3); S2 a singleton (5, 7), no
    # information. Demeaned: S0 x (−½, ½), y (−½, ½); S1 x (−1, 0, 1), y (−1, −1, 2). Σx² = 0.5 + 2 = 2.5,
    # Σxy = 0.5 + 3 = 3.5: b = 1.4. Residuals y − b·x: S0 (0.2, −0.2), S1 (0.4, −1, 0.6). Each row its own cluster,
    # scores x · e · √(n_s / (n_s − 1)): S0 (−0.1, −0.1) · √2, S1 (−0.4, 0, 0.6) · √1.5; Σ scores² = 0.04 + 0.78.
    x = np.array([0, 1, 0, 1, 2, 5], float)
    y = np.array([0, 1, 0, 0, 3, 7], float)
    strata = np.array([0, 0, 1, 1, 1, 2])
    b, se = _within_slope(y, x, strata, np.arange(6))
    assert b == pytest.approx(1.4, rel=1e-14)
    assert se == pytest.approx(math.sqrt(0.82) / 2.5, rel=1e-12)
    # integer and boolean inputs are read as numbers
    b2, se2 = _within_slope(y.astype(int), x.astype(int), strata, np.arange(6))
    assert (b2, se2) == (pytest.approx(b, rel=1e-14), pytest.approx(se, rel=1e-12))


def test_context_check_strata_day_arm_rank_and_both_rewards():
    # rewards: a graded rating (0 or 2; r = rating > 0) and a binary click (the rewards at the rank, r_any).
    # Base (day 1, control, no reward): segment a 30 sessions of 2 ranks and 10 of 1, b 10 of 2 and 30 of 1;
    # K: 10 sessions of segment a of 3 ranks (so rank 2 is tested: 3 is the deepest). Then five blocks of 10
    # one-rank sessions of segment a, each in its own stratum (so left out: one segment only): on day 2, in the
    # treatment arm, with a rating of 2, with a click. Strata: rank 1 (40 continue, 10 stop | 10, 30) and rank 2
    # (the base's rank 2 rows all stop, K's continue: 10, 30 | 0, 10). Leaving out the day, the arm, the rank, r or
    # the rewards at the rank pools a block (or rank 2) with rank 1 and moves the odds ratio.
    rows, sid = [], 0

    def add(seg, n, length, *, day="2024-01-01", arm="control", rating=0.0, click=0.0):
        nonlocal sid
        for _ in range(n):
            for r in range(1, length + 1):
                rows.append({"session_id": sid, "rank": r, "item_id": r, "rating": rating, "click": click,
                             "segment": seg, "day": day, "arm": arm})
            sid += 1
    add("a", 30, 2)
    add("a", 10, 1)
    add("b", 10, 2)
    add("b", 30, 1)
    add("a", 10, 3)
    add("a", 10, 1, day="2024-01-02")
    add("a", 10, 1, arm="treatment")
    add("a", 10, 1, rating=2.0)
    add("a", 10, 1, click=1.0)
    logs = read_logs(pd.DataFrame(rows), rewards=["rating", "click"])
    tables = [(40, 10, 10, 30), (10, 30, 0, 10)]
    orr, lo, hi = rbg_interval(tables, Z99)
    c = check_context_position_bias(logs, "rating")
    assert c.effect == pytest.approx(orr, rel=1e-12)
    assert orr == pytest.approx((40 * 30 / 90 + 10 * 10 / 50) / (10 * 10 / 90 + 0), rel=1e-15)
    assert (c.low, c.high) == (pytest.approx(lo, rel=1e-9), pytest.approx(hi, rel=1e-9))
    assert c.p_value == pytest.approx(cmh_p(tables), rel=1e-6)


def test_a_perfect_fit_has_no_p_value():
    # rank 2 is rewarded exactly when an item of its category (or a reward) is above it: slope 1, every residual 0,
    # se = 0, so there is no p-value (and the check does not fire); the interval is the point
    cat = check_interaction(read_logs(category_frame(lambda s: s % 2 == 0)), "click", categories=CATEGORIES)
    assert (cat.effect, cat.low, cat.high) == (2.0, 2.0, 2.0)   # b = 1 on a base rate of ½
    assert math.isnan(cat.p_value) and cat.fires is False
    s = np.arange(40)
    df = pd.DataFrame({"session_id": np.repeat(s, 2), "rank": np.tile([1, 2], 40), "item_id": np.tile([1, 2], 40),
                       "click": np.c_[s % 2 == 0, s % 2 == 0].astype(float).ravel()})
    above = check_interaction(read_logs(df), "click")
    assert (above.effect, above.low, above.high) == (2.0, 2.0, 2.0)
    assert math.isnan(above.p_value) and above.fires is False


def test_support_on_ranking_logs_with_a_spread_by_hand():
    # sessions log ranks 1-2 (learnt PBM 1, 1); D = reciprocal up to the target's deepest rank 3: Σ D = 11/6.
    # Three sessions put the logged items at (3, 1): share (1/3 + 1) / (11/6) = 8/11; two at (1, 2): 9/11.
    # Mean 42/55; deviations −2/55 (×3), 3/55 (×2): sd = √(30/4) / 55, se = sd / √5 = √1.5 / 55;
    # p = Φ((42/55 − 1) / se) = Φ(−13 / √1.5). Beyond the deepest logged rank: D(3) / Σ D = 2/11.
    df = pd.DataFrame({"session_id": np.repeat(np.arange(5), 2), "rank": np.tile([1, 2], 5), "click": 0,
                       "rank__new": [3, 1, 3, 1, 3, 1, 1, 2, 1, 2]})
    m, se = 42 / 55, math.sqrt(1.5) / 55
    p = float(stats.norm.cdf(-13 / math.sqrt(1.5)))
    c = check_support(read_logs(df), policy="new", discount="reciprocal", level=0.95)
    assert c.effect == pytest.approx(m, rel=1e-14) and c.p_value == pytest.approx(p, rel=1e-9)
    assert (c.low, c.high) == (pytest.approx(m - Z95 * se, rel=1e-12), pytest.approx(m + Z95 * se, rel=1e-12))
    assert (c.fires, c.n) == (True, 5)
    assert (c.name, c.question, c.effect_label) == (
        "support", "does the logging policy show what the target would show?",
        "share of the target's exposure with support")
    assert c.finding == (f"IPS sees 76.4% [{m - Z95 * se:.1%}, {m + Z95 * se:.1%}] of the new policy's exposure under "
                         f"reciprocal; 18.2% of it lies beyond the deepest logged rank 2 (of 3), p = {p:.2g}: the "
                         "target shows items the logs never reach.")
    at = check_support(read_logs(df), policy="new", discount="reciprocal", alpha=c.p_value)
    assert at.fires is False and at.finding.endswith(": no evidence of missing support.")
    # D = the learnt PBM (read from the logs): 1, 1 and next to nothing at rank 3, so the shares are ½ and 1
    pbm = check_support(read_logs(df), policy="new", discount="pbm")
    assert pbm.effect == pytest.approx((3 * 0.5 + 2 * 1) / 5, abs=1e-4)
    assert pbm.test == "one-sided t-test of covered exposure < 1 (D = pbm, D0 = learnt PBM)"


def test_support_and_slate_checks_on_conditional_propensity_logs():
    # conditional propensities only: the slate checks apply (every slot is logged)
    df = pd.DataFrame({"session_id": np.repeat(np.arange(4), 2), "rank": np.tile([1, 2], 4), "click": 0.0,
                       "logging_conditional_propensity": 0.4, "target_conditional_propensity__new": 0.4})
    c = check_context_position_bias(read_logs(df.assign(segment=["a", "a", "b", "b"] * 2)), "click")
    assert c.finding == "not testable: every slot is logged, so session length says nothing."
    # a plain target propensity without a plain logging one: the conditional weights (all 1) are read
    c = check_support(read_logs(df.assign(target_propensity__new=0.2)), policy="new")
    assert (c.effect, c.p_value, c.fires) == (1.0, 1.0, False)


def test_cascade_a_gap_in_the_ranks_is_not_continuing():
    # rank 1 rows (ranks 1 and 2 are below the deepest logged rank 3): 5 rewarded sessions go on to rank 2 and 10
    # rewarded ones jump to rank 3 (a gap: not continuing past rank 1); 10 unrewarded go on to rank 2, 5 jump.
    # Table (5, 10, 10, 5): OR 25 / 100 = 1/4. Rank 2 rows: never rewarded, never continuing: no information.
    rows, sid = [], 0
    for click, ranks, n in ((1, (1, 2), 5), (1, (1, 3), 10), (0, (1, 2), 10), (0, (1, 3), 5)):
        for _ in range(n):
            for r in ranks:
                rows.append({"session_id": sid, "rank": r, "click": float(click and r == 1)})
            sid += 1
    c = check_cascade(read_logs(pd.DataFrame(rows)), "click")
    assert c.effect == pytest.approx(0.25, rel=1e-12) and c.n == 30 + 15
    assert c.p_value == pytest.approx(cmh_p([(5, 10, 10, 5)]), rel=1e-9)


def test_context_check_with_no_binary_reward_and_a_segment_without_information():
    # the two-segment example (OR 9) with a graded rating (0 or 2): no binary reward, so the rewards at the rank are
    # the rating's r alone. One more session of a, of one rank, rated 2: its stratum (r = 1) holds one segment and
    # is left out. A third segment c, on a day of its own, has no stratum shared with another segment: only a and b
    # are tested (two results: Holm over both, equal p-values: 2p), and a's OR is reported.
    df = segment_frame({"a": (30, 10), "b": (10, 30), "c": (5, 5)}, days=("2024-01-01", "2024-01-01", "2024-01-02"))
    df = df.rename(columns={"click": "rating"})
    df = pd.concat([df, pd.DataFrame([{"session_id": 999, "rank": 1, "item_id": 1, "rating": 2.0, "segment": "a",
                                       "rank__new": 1, "day": "2024-01-01"}])], ignore_index=True)
    p = cmh_p([(30, 10, 10, 30)])
    _, lo, hi = rbg_interval([(30, 10, 10, 30)], Z99)
    c = check_context_position_bias(read_logs(df, rewards=["rating"]), "rating")
    assert c.effect == pytest.approx(9.0, rel=1e-12) and c.p_value == pytest.approx(2 * p, rel=1e-6)
    assert (c.low, c.high) == (pytest.approx(lo, rel=1e-9), pytest.approx(hi, rel=1e-9))
    assert c.finding == (f"segment 'a' continues with odds ratio 9.00 [{lo:.2f}, {hi:.2f}] against the rest (mean "
                         f"session length a 1.7, b 1.2, c 1.5), p = {2 * p:.2g} (Holm): one position-bias curve does "
                         "not fit every segment.")


def test_checks_that_depend_on_neither_policy_nor_discount_are_computed_once_per_logs():
    """A new discount on the same logs (the dashboard's "Which estimator?" page) reuses the cascade, interaction and
    context checks: the same objects, equal to the checks run on their own; the support check is the discount's
    own. The reward, alpha and level are part of the key; another Logs object and a category table compute anew."""
    rng = np.random.default_rng(4)
    n = 400
    lengths = rng.integers(1, 6, n)
    rewards = [list(rng.binomial(1, 0.3, k).astype(float)) for k in lengths]
    frame = sessions(lengths, rewards, segment=[("a", "b")[s % 3 == 0] for s in range(n)])
    frame["like"] = rng.binomial(1, 0.25, len(frame)).astype(float)
    logs = read_logs(frame)
    text = repr  # a check's fields may be NaN (not testable), which == would call different

    a = diagnose(logs, reward="click", discount="log2")
    b = diagnose(logs, reward="click", discount="reciprocal")
    assert all(b.checks[i] is a.checks[i] for i in range(3))
    assert text(a.checks[3]) == text(check_support(logs, policy="new", discount="log2"))
    assert text(b.checks[3]) == text(check_support(logs, policy="new", discount="reciprocal"))
    assert text(a.checks[3]) != text(b.checks[3])
    for got, alone in zip(a.checks[:3], (check_cascade(logs, "click"), check_interaction(logs, "click"),
                                         check_context_position_bias(logs, "click")), strict=True):
        assert got is not alone and text(got) == text(alone)
    assert math.isfinite(a.checks[0].low) and a.checks[0].n > 0
    # the key: reward, alpha, level
    c = diagnose(logs, reward="like", discount="log2")
    assert text(c.checks[0]) == text(check_cascade(logs, "like")) != text(a.checks[0])
    for kw in ({"alpha": 0.6}, {"level": 0.8}):  # each alone (at α = 0.6 the cascade check, p = 0.54, fires)
        d = diagnose(logs, reward="click", discount="log2", **kw)
        for got, alone in zip(d.checks[:3], (check_cascade(logs, "click", **kw), check_interaction(logs, "click", **kw),
                                             check_context_position_bias(logs, "click", **kw)), strict=True):
            assert text(got) == text(alone)
        assert text(d.checks[0]) != text(a.checks[0])
    # another Logs object of the same rows: its own checks, equal
    e = diagnose(read_logs(frame), reward="click", discount="log2")
    assert e.checks[0] is not a.checks[0] and text(e.checks[0]) == text(a.checks[0])
    # a category table is not part of the key: the interaction check is run with it
    cats = {1: "x", 2: "y", 3: "x", 4: "y", 5: "x"}
    f = diagnose(logs, reward="click", discount="log2", categories=cats)
    assert text(f.checks[1]) == text(check_interaction(logs, "click", categories=cats)) != text(a.checks[1])


def test_the_interaction_check_computed_once_reads_alpha():
    """At α = 1e-50 the rewards-above test (p ≈ 1.3e-45) does not fire; at the default 0.05 it does: diagnose's
    interaction row is the one at the α it was given."""
    logs = read_logs(rewards_above_frame())
    row = diagnose(logs, reward="click", alpha=1e-50).checks[1]
    assert row.name == "reward interaction" and row.fires is False and 0 < row.p_value < 1e-44
    assert repr(row) == repr(check_interaction(logs, "click", alpha=1e-50))
    assert diagnose(logs, reward="click").checks[1].fires is True
