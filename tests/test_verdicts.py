"""Verdicts of "Which estimator?" (offeval_core.verdicts): every rule at its threshold, and the ranking and
slate estimators' weight diagnostics computed by hand on small logs (which rows, how ESS is counted, the
clip sensitivity at the 99th percentile of the weights), and the ranking values, SEs and capped values equal
to the core's public estimators (one implementation)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from offeval_core.diagnose import AssumptionCheck
from offeval_core.logs import read_logs
from offeval_core.verdicts import (
    RANKING_NEEDS,
    SLATE_NEEDS,
    EstimatorCheck,
    ranking_estimators,
    slate_estimators,
    verdict,
    verdict_clip,
    verdict_summary,
)


def check(name, *, fires=True, effect=0.5, p=0.001, label="odds ratio"):
    return AssumptionCheck(name, "?", "test", effect, label, math.nan, math.nan, p, fires, 100, "")


TRUST = "no assumption it needs is rejected, ESS is {:.0%} of the weights and capping the top 1 % of weights moves it by {:.2f} SE."


def test_trust_when_every_rule_passes_at_its_threshold():
    # ESS share exactly 10 % is not below the caution line, a largest share of exactly 5 % and a clip
    # sensitivity of exactly 1 SE are not above theirs
    assert verdict("IPS", (), {}, 0.10, 0.05, 1.0, 100.0) == ("trust", TRUST.format(0.10, 1.0))
    assert verdict("IPS", (), {}, 0.9, 0.01, 0.25, 900.0) == ("trust", TRUST.format(0.9, 0.25))


def test_ess_lines():
    assert verdict("IPS", (), {}, 0.0999, 0.0, 0.0, 99.9) == (
        "caution", "its effective sample size is only 10.0% of the weights (100).")
    assert verdict("IPS", (), {}, 0.01, 0.0, 0.0, 10.0) == (
        "caution", "its effective sample size is only 1.0% of the weights (10).")     # exactly 1 %: caution
    assert verdict("IPS", (), {}, 0.0099, 0.0, 0.0, 9.9) == (
        "don't", "its effective sample size is 10 (0.99% of the weights): a few sessions decide it.")


def test_weight_share_and_clip_lines():
    assert verdict("IPS", (), {}, 0.5, 0.0501, 0.0, 50.0) == (
        "caution", "a single weight carries 5.0% of the total weight.")
    assert verdict("IPS", (), {}, 0.5, 0.01, 1.01, 50.0) == (
        "caution", "capping the top 1 % of weights moves the estimate by 1.0 standard errors.")
    # the rules are taken in order: ESS before the largest share before the clip
    assert verdict("IPS", (), {}, 0.05, 0.9, 9.0, 5.0)[1].startswith("its effective sample size is only")
    assert verdict("IPS", (), {}, 0.5, 0.9, 9.0, 5.0)[1].startswith("a single weight carries")


def test_a_fired_needed_check_decides_first():
    checks = {"cascade": check("cascade", effect=0.25, p=0.0012), "support": check("support", fires=False)}
    assert verdict("IIPS", ("cascade", "support"), checks, 0.9, 0.0, 0.0, 900.0) == (
        "don't", "IIPS assumes no cascade problem, and the cascade check fires (odds ratio 0.25, p = 0.0012).")
    # a check the estimator does not need, or one that does not fire, changes nothing
    assert verdict("SIPS", ("support",), checks, 0.9, 0.0, 0.0, 900.0)[0] == "trust"
    # a check that is absent (not computed) changes nothing either
    assert verdict("IIPS", ("reward interaction",), checks, 0.9, 0.0, 0.0, 900.0)[0] == "trust"


def test_a_small_support_shortfall_is_a_caution_after_the_weight_rules():
    small = {"support": check("support", effect=0.96, p=0.01, label="share")}      # 4 % lacks support
    assert verdict("IPS", ("support",), small, 0.9, 0.0, 0.0, 900.0) == (
        "caution", "the support check fires but only 4.0% of the target's exposure lacks support (p = 0.01).")
    # the weight rules still come first
    assert verdict("IPS", ("support",), small, 0.05, 0.0, 0.0, 50.0)[1].startswith("its effective sample size")
    large = {"support": check("support", effect=0.94, p=0.01, label="share")}      # 6 %: don't
    assert verdict("IPS", ("support",), large, 0.9, 0.0, 0.0, 900.0) == (
        "don't", "IPS assumes no support problem, and the support check fires (share 0.94, p = 0.01).")


def ranking_logs():
    """Three control sessions of length 2 (so the learnt PBM is 1 at ranks 1 and 2) and one treatment session.

    Target ranks (rank__new) of the logged items and D = reciprocal give the weights w = D(R_t) / D0(R_0):
    session 0: ranks (2, 3) → (1/2, 1/3), rewards (1, 0);  session 1: (3, 2) → (1/3, 1/2), rewards (0, 1);
    session 2: (1, 2) → (1, 1/2), rewards (1, 1). The treatment session (rewards 1, 1) must not count.
    """
    rows = []
    for s, (ranks, rewards, arm) in enumerate([((2, 3), (1, 0), "control"), ((3, 2), (0, 1), "control"),
                                               ((1, 2), (1, 1), "control"), ((1, 2), (1, 1), "treatment")]):
        for k in (1, 2):
            rows.append({"session_id": s, "rank": k, "click": rewards[k - 1], "rank__new": ranks[k - 1],
                         "arm": arm})
    return read_logs(pd.DataFrame(rows))


def test_ranking_estimators_by_hand():
    est = {e.estimator: e for e in ranking_estimators(ranking_logs(), "click", "new", {}, "reciprocal")}
    w = np.array([1 / 2, 1 / 3, 1 / 3, 1 / 2, 1.0, 1 / 2])
    # DCG / IPS: session sums (1/2, 1/2, 3/2), mean 5/6; SE = sd(session sums) / √3 = √(1/3) / √3 = 1/3
    d = est["dcg"]
    assert d.value == pytest.approx(5 / 6, abs=1e-12)
    assert d.stderr == pytest.approx(1 / 3, abs=1e-12)
    # ESS over the 6 control rows: (Σw)² / Σw² = (19/6)² / (71/36) = 361/71; largest share 1 / (19/6) = 6/19
    assert d.ess == pytest.approx(361 / 71, abs=1e-12)
    assert d.ess_share == pytest.approx(361 / 71 / 6, abs=1e-12)
    assert d.max_share == pytest.approx(6 / 19, abs=1e-12)
    # the 99th percentile of the sorted weights (1/3, 1/3, 1/2, 1/2, 1/2, 1) is 1/2 + 0.95 · 1/2 = 0.975 < 1, so
    # the cap is c = 1 (the smallest the estimators take), which no weight exceeds: no clip sensitivity
    assert verdict_clip(w) == 1.0
    assert d.clip_sensitivity == 0.0
    assert d.verdict == "caution" and d.reason == "a single weight carries 31.6% of the total weight."
    assert d.needs == RANKING_NEEDS
    assert d.label == "DCG / IPS (D = reciprocal, D0 = learnt PBM)"
    # SNIPS on ranking logs normalises by the capped share of the weight mass Σ w̄ / Σ w, 1 at c = ∞: it is IS,
    # value 5/6 and SE 1/3 (docs/importance.md); the former Σ w r / Σ w · rows / sessions gave 30/19 here
    s = est["snips"]
    assert s.value == pytest.approx(5 / 6, abs=1e-12)
    assert s.stderr == pytest.approx(1 / 3, abs=1e-12)
    assert s.clip_sensitivity == 0.0
    assert s.ess == d.ess and s.max_share == d.max_share
    assert s.label == "SNIPS (same weights)"
    assert np.isclose(w.sum(), 19 / 6)


def clipped_logs():
    """Four control sessions of lengths (2, 2, 1, 1), so the learnt PBM is D0(1) = 1, D0(2) = 2/4 = 1/2, and one
    treatment session that must not count. D = reciprocal; target ranks, rewards and weights w = D(R(i)) / D0(r_i):

    session 0: target (2, 1), rewards (0, 1): w = (1/2 / 1, 1 / (1/2)) = (1/2, 2)       a = 2
    session 1: target (1, 3), rewards (1, 1): w = (1, (1/3) / (1/2)) = (1, 2/3)          a = 5/3
    session 2: target (2,),   reward 1:       w = 1/2                                    a = 1/2
    session 3: target (1,),   reward 0:       w = 1                                      a = 0
    """
    spec = [((2, 1), (0, 1), "control"), ((1, 3), (1, 1), "control"), ((2,), (1,), "control"),
            ((1,), (0,), "control"), ((1, 2, 3), (1, 1, 1), "treatment")]
    rows = [{"session_id": s, "rank": k, "click": rewards[k - 1], "rank__new": target[k - 1], "arm": arm}
            for s, (target, rewards, arm) in enumerate(spec) for k in range(1, len(target) + 1)]
    return read_logs(pd.DataFrame(rows))


def test_ranking_estimators_are_the_importance_familys_by_hand():
    """The verdict's values are the core's (importance family) on :func:`clipped_logs`, by hand:

    - DCG / IPS = mean a = (2 + 5/3 + 1/2 + 0) / 4 = 25/24; deviations from it (23, 15, −13, −25) / 24, so the
      sample variance is (529 + 225 + 169 + 625) / 576 / 3 = 43/48 and SE = √(43/48 / 4) = √(43/192).
    - SNIPS = IS at c = ∞ (capped share Σ w̄ / Σ w = 1): 25/24, SE √(43/192).
    - c = 99th percentile of the sorted weights (1/2, 1/2, 2/3, 1, 1, 2) = 1 + 0.95 · (2 − 1) = 1.95; only
      session 0's 2 is capped. CIS = (1.95 + 5/3 + 1/2) / 4 = 247/240, |CIS − IS| = 0.05 / 4 = 1/80.
      NCIS = (A / U) / (S / W) with A = 247/60, U = 4, S = Σ w̄ = 17/3 − 1/20 = 337/60, W = Σ w = 340/60:
      (247/240) · (340/337) = 4199/4044, |NCIS − IS| = |4199 · 24 − 25 · 4044| / (4044 · 24) = 324/97056.
    - ESS = (17/3)² / (1/4 + 4 + 1 + 4/9 + 1/4 + 1) = (289/9) / (250/36) = 578/125; largest share 2 / (17/3) = 6/17.
    """
    d, s = ranking_estimators(clipped_logs(), "click", "new", {}, "reciprocal")
    se = math.sqrt(43 / 192)
    assert (d.value, d.stderr) == (pytest.approx(25 / 24, abs=1e-12), pytest.approx(se, abs=1e-12))
    assert d.clip_sensitivity == pytest.approx((1 / 80) / se, abs=1e-12)
    assert (s.value, s.stderr) == (pytest.approx(25 / 24, abs=1e-12), pytest.approx(se, abs=1e-12))
    assert s.clip_sensitivity == pytest.approx((324 / 97056) / se, abs=1e-12)
    assert d.ess == pytest.approx(578 / 125, abs=1e-12) and d.ess_share == pytest.approx(578 / 125 / 6, abs=1e-12)
    assert d.max_share == pytest.approx(6 / 17, abs=1e-12)


@pytest.mark.filterwarnings("ignore::offeval_core.errors.EstimatorWarning")  # the paired effect's SE, not read here
@pytest.mark.parametrize("discount", ["reciprocal", "log2", "pbm"])
@pytest.mark.parametrize("make", [clipped_logs, ranking_logs])
def test_ranking_estimators_equal_the_cores_public_estimators(make, discount):
    """One implementation: the verdict's DCG / IPS value and SE equal ``oe.dcg`` (the engine's DCG at m = ∞) and
    ``oe.estimate_importance`` IS; its SNIPS value and SE equal ``estimate_importance`` SNIPS; its clip sensitivity
    is |CIS(c) − IS| / SE and |NCIS(c) − SNIPS| / SE from ``estimate_importance`` at c = verdict_clip(weights)."""
    import offeval_core as oe

    logs = make()
    d, s = ranking_estimators(logs, "click", "new", {}, discount)
    kw = dict(reward="click", policy="new", weights="exposure", discount=discount, exposure="pbm")
    engine = oe.dcg(logs, reward="click", policy="new", discount=discount, exposure="pbm")
    ips_result = oe.estimate_importance(logs, estimator="is", **kw)
    ips, snips = ips_result.target, oe.estimate_importance(logs, estimator="snips", **kw).target
    assert d.value == pytest.approx(engine.value, abs=1e-12) and d.stderr == pytest.approx(engine.stderr, abs=1e-12)
    assert d.value == pytest.approx(ips.value, abs=1e-12) and d.stderr == pytest.approx(ips.stderr, abs=1e-12)
    assert s.value == pytest.approx(snips.value, abs=1e-12) and s.stderr == pytest.approx(snips.stderr, abs=1e-12)
    f = logs.frame[logs.frame["arm"] == "control"]
    w = (oe.parse_discount(discount, logs=logs)(f["rank__new"].to_numpy())
         / oe.parse_discount("pbm", logs=logs)(f["rank"].to_numpy()))
    c = verdict_clip(w)
    # the row weights of the diagnostics are the reduce's: Kish's ESS and the largest weight agree
    assert d.ess == pytest.approx(ips_result.diagnostics["ess_uncapped"], rel=1e-12)
    assert d.max_share * w.sum() == pytest.approx(ips_result.diagnostics["max_weight"], rel=1e-12)
    cis, ncis = (oe.estimate_importance(logs, estimator=e, clip=c, **kw).target.value for e in ("cis", "ncis"))
    assert d.clip_sensitivity == pytest.approx(abs(cis - ips.value) / ips.stderr, abs=1e-12)
    assert s.clip_sensitivity == pytest.approx(abs(ncis - snips.value) / snips.stderr, abs=1e-12)


def test_ranking_verdict_reads_the_checks_it_needs():
    fired = {"context-dependent position bias": check("context-dependent position bias", effect=1.5, p=0.003)}
    e = ranking_estimators(ranking_logs(), "click", "new", fired, "reciprocal")[0]
    assert e.verdict == "don't"
    assert e.reason == ("DCG / IPS assumes no context-dependent position bias problem, and the context-dependent "
                        "position bias check fires (odds ratio 1.5, p = 0.003).")


def slate_logs():
    """Two control sessions of two slots with conditional propensities (tests/test_slate_dr_exact.py's rows)
    and one treatment session that must not count."""
    rows = []
    spec = [(0, (1, 0), (0.5, 0.8), (0.6, 0.5), "control"), (1, (1, 1), (0.25, 0.5), (0.5, 1.0), "control"),
            (2, (1, 1), (0.5, 0.5), (1.0, 1.0), "treatment")]
    for s, rewards, logp, tgt, arm in spec:
        for k in (1, 2):
            rows.append({"session_id": s, "rank": k, "click": rewards[k - 1], "arm": arm,
                         "logging_conditional_propensity": logp[k - 1],
                         "target_conditional_propensity__new": tgt[k - 1]})
    return read_logs(pd.DataFrame(rows))


def test_slate_estimators_by_hand():
    out = {e.estimator: e for e in slate_estimators(slate_logs(), "click", "new", {})}
    # IIPS needs marginals, which these logs lack; the others are all there
    assert set(out) == {"rips", "snrips", "sips", "snsips", "cascade-dr"}
    assert {k: e.needs for k, e in out.items()} == {k: SLATE_NEEDS[k] for k in out}
    # RIPS: cumulative weights A (1.2, 0.75), B (2, 4); value (1.2 + 2 + 4) / 2 = 3.6. Its worst slot is slot 2:
    # ESS 4.75² / (0.75² + 4²) = 1.3623 of 2 sessions; largest share 4 / 4.75.
    r = out["rips"]
    assert r.value == pytest.approx(3.6, abs=1e-12)
    assert r.ess == pytest.approx(4.75 ** 2 / 16.5625, abs=1e-12)
    assert r.ess_share == pytest.approx(4.75 ** 2 / 16.5625 / 2, abs=1e-12)
    assert r.max_share == pytest.approx(4 / 4.75, abs=1e-12)
    # clipped at the 99th percentile of the weights (0.75, 1.2, 2, 4): 2 + 0.97 · 2 = 3.94 → B (2, 3.94),
    # value (1.2 + 2 + 3.94) / 2 = 3.57; SE of (1.2, 6) is 4.8 / 2 = 2.4; sensitivity 0.03 / 2.4 = 0.0125
    assert r.clip_sensitivity == pytest.approx(0.03 / 2.4, abs=1e-12)
    assert r.verdict == "caution" and r.reason == "a single weight carries 84.2% of the total weight."
    # SIPS: whole-slate weights A 0.75, B 4 at both slots: (0.75 + 8) / 2
    assert out["sips"].value == pytest.approx(4.375, abs=1e-12)
    assert out["cascade-dr"].label == "Cascade-DR"


def test_slate_verdicts_follow_the_needed_checks():
    fired = {"support": check("support", effect=0.5, p=0.001, label="share")}
    out = {e.estimator: e for e in slate_estimators(slate_logs(), "click", "new", fired)}
    assert all(e.verdict == "don't" and "support check fires" in e.reason for e in out.values())
    cascade = {"cascade": check("cascade", effect=0.5, p=0.001)}
    out = {e.estimator: e for e in slate_estimators(slate_logs(), "click", "new", cascade)}
    # no estimator here needs the cascade (IIPS, which does, lacks its columns)
    assert not any("cascade check fires" in e.reason for e in out.values())


def ranking_frame(lengths, target, rewards):
    """Control sessions of the given lengths; ``target`` and ``rewards`` give per session the target rank and
    reward of each logged rank."""
    rows = []
    for s, n in enumerate(lengths):
        for k in range(1, n + 1):
            rows.append({"session_id": s, "rank": k, "click": rewards[s][k - 1], "rank__new": target[s][k - 1]})
    return read_logs(pd.DataFrame(rows))


def test_ranking_weights_divide_by_the_learnt_pbm():
    # lengths (2, 1, 2, 1): the learnt PBM is P(V | 1) = 1, P(V | 2) = 1/2. The target keeps the logged order and
    # D = reciprocal, so w = D(k) / D0(k) = 1 at rank 1 and (1/2) / (1/2) = 1 at rank 2; every item clicked:
    # DCG = mean(2, 1, 2, 1) = 1.5
    logs = ranking_frame([2, 1, 2, 1], [[1, 2], [1], [1, 2], [1]], [[1, 1], [1], [1, 1], [1]])
    d = ranking_estimators(logs, "click", "new", {}, "reciprocal")[0]
    assert d.value == pytest.approx(1.5, abs=1e-12)
    # D = the learnt PBM itself (it needs the logs): w = 1 everywhere, the same 1.5
    assert ranking_estimators(logs, "click", "new", {}, "pbm")[0].value == pytest.approx(1.5, abs=1e-12)


def test_identical_sessions_have_no_clip_sensitivity():
    # 20 identical sessions, weights (1/2, 1) as in ranking_logs' session 0 with both items clicked: the SE is 0,
    # so the clip sensitivity is 0; ESS (30²)/(20 · 1.25) = 36 of 40 rows, largest share 1/30 < 5 %: trust
    logs = ranking_frame([2] * 20, [[2, 1]] * 20, [[1, 1]] * 20)
    d, s = ranking_estimators(logs, "click", "new", {}, "reciprocal")
    assert (d.value, d.stderr, d.clip_sensitivity) == (pytest.approx(1.5, abs=1e-12), 0.0, 0.0)
    assert d.ess == pytest.approx(36.0, abs=1e-12) and d.max_share == pytest.approx(1 / 30, abs=1e-12)
    assert (d.verdict, d.reason) == ("trust", TRUST.format(0.9, 0.0))
    assert s.stderr == 0.0 and s.clip_sensitivity == 0.0


def test_a_rarely_reached_rank_concentrates_the_weights():
    # 29 sessions of length 1 and one of length 2: P(V | 2) = 1/30. The target moves every rank-1 item to
    # rank 2 (w = 1/2) and the one rank-2 item to rank 1 (w = 1 / (1/30) = 30): Σw = 45, Σw² = 907.5,
    # ESS 2025 / 907.5 = 2.23 of 31 rows (7.2 %)
    logs = ranking_frame([1] * 29 + [2], [[2]] * 29 + [[2, 1]], [[0]] * 29 + [[0, 1]])
    d = ranking_estimators(logs, "click", "new", {}, "reciprocal")[0]
    assert d.ess == pytest.approx(2025 / 907.5, abs=1e-12)
    assert (d.verdict, d.reason) == ("caution", "its effective sample size is only 7.2% of the weights (2).")
    assert d.value == pytest.approx(1.0, abs=1e-12)                       # 30 · 1 / 30 sessions


def test_estimator_check_to_dict():
    e = ranking_estimators(ranking_logs(), "click", "new", {}, "reciprocal")[0]
    d = e.to_dict()
    assert d["needs"] == list(RANKING_NEEDS) and d["estimator"] == "dcg"
    assert d["value"] == pytest.approx(5 / 6) and d["clip_sensitivity"] == 0.0
    nan = EstimatorCheck("x", "X", math.nan, math.nan, 1.0, 0.5, 0.1, 0.0, ("support",), "trust", "")
    assert nan.to_dict()["value"] is None and nan.to_dict()["stderr"] is None and nan.to_dict()["ess"] == 1.0


def slate_frame(sessions):
    """Control sessions of two slots: (rewards, logging conditionals, target conditionals) each."""
    rows = []
    for s, (rewards, logp, tgt) in enumerate(sessions):
        for k in (1, 2):
            rows.append({"session_id": s, "rank": k, "click": rewards[k - 1],
                         "logging_conditional_propensity": logp[k - 1],
                         "target_conditional_propensity__new": tgt[k - 1]})
    return read_logs(pd.DataFrame(rows))


def test_slate_clip_at_the_99th_percentile_below_two():
    # cumulative RIPS weights A (1.2, 1.5), B (0.8, 0.8): the 99th percentile of (0.8, 0.8, 1.2, 1.5) is
    # 1.2 + 0.97 · 0.3 = 1.491, the cap. Rewards A (1, 1), B (1, 0): RIPS (2.7 + 0.8) / 2 = 1.75, capped
    # (1.2 + 1.491 + 0.8) / 2 = 1.7455; session values (2.7, 0.8) have SE 0.95
    logs = slate_frame([((1, 1), (0.5, 0.4), (0.6, 0.5)), ((1, 0), (0.5, 0.5), (0.4, 0.5))])
    r = {e.estimator: e for e in slate_estimators(logs, "click", "new", {})}["rips"]
    assert (r.value, r.stderr) == (pytest.approx(1.75, abs=1e-12), pytest.approx(0.95, abs=1e-12))
    assert r.clip_sensitivity == pytest.approx((1.75 - 1.7455) / 0.95, abs=1e-12)


def test_slate_identical_sessions_and_a_concentrated_weight():
    same = slate_frame([((1, 0), (0.5, 0.5), (0.6, 0.5))] * 20)
    for e in slate_estimators(same, "click", "new", {}):
        assert e.stderr == 0.0 and e.clip_sensitivity == 0.0, e.estimator
    # one session of 30 with a slot-1 ratio 50 (0.5 / 0.01): slot-1 ESS (29 + 50)² / (29 + 2500) = 2.47 of 30
    skew = slate_frame([((1, 0), (0.5, 0.5), (0.5, 0.5))] * 29 + [((1, 0), (0.01, 0.5), (0.5, 0.5))])
    r = {e.estimator: e for e in slate_estimators(skew, "click", "new", {})}["rips"]
    assert r.ess == pytest.approx(79 ** 2 / 2529, abs=1e-12)
    assert (r.verdict, r.reason) == ("caution", "its effective sample size is only 8.2% of the weights (2).")


def test_slate_dont_names_the_estimator():
    fired = {"support": check("support", effect=0.5, p=0.001, label="share")}
    r = {e.estimator: e for e in slate_estimators(slate_logs(), "click", "new", fired)}["rips"]
    assert r.reason == "RIPS assumes no support problem, and the support check fires (share 0.5, p = 0.001)."
    assert r.stderr == pytest.approx(2.4, abs=1e-12)


@pytest.mark.parametrize(("by_verdict", "sentence"), [
    ({"trust": [], "caution": ["DCG / IPS", "SNIPS"], "don't": []},
     "No estimator is trusted here; use DCG / IPS and SNIPS with caution."),
    ({"trust": ["IPS"], "caution": [], "don't": []}, "Trusted here: IPS."),
    ({"trust": ["A", "B", "C"], "caution": ["D"], "don't": ["E", "F"]},
     "Trusted here: A, B and C; use D with caution; do not use E and F."),
    ({"trust": [], "caution": [], "don't": ["IPS"]}, "No estimator is trusted here; do not use IPS."),
])
def test_verdict_summary_names_only_the_verdicts_that_have_estimators(by_verdict, sentence):
    """The takeaway of "Which estimator?" lists no empty verdict (never "caution: 0; don't: 0")."""
    assert verdict_summary(by_verdict) == sentence


def test_verdict_summary_of_a_partial_mapping():
    """A verdict missing from the mapping is an empty one."""
    assert verdict_summary({"trust": ["SNIPS"]}) == "Trusted here: SNIPS."
    assert verdict_summary({"don't": ["IPS"]}) == "No estimator is trusted here; do not use IPS."
    assert verdict_summary({}) == "No estimator is trusted here."


def test_cascade_dr_verdict_uses_fixed_folds_by_hand():
    """Cascade-DR's value and its capped value use the same cross-fitting folds (FOLD_SEED): the verdict is the
    same on every run and the clip sensitivity measures the cap alone. On slate_logs' two control sessions
    default_rng(0) puts both in fold 1, so the model of each is fitted on no row (rates 0, q = q̄ = 0) and
    Cascade-DR is RIPS: 3.6, SE 2.4, capped at 3.94 (B's slot-2 weight 4 → 3.94): 3.57, sensitivity 0.03 / 2.4."""
    from offeval_core.verdicts import FOLD_SEED

    assert FOLD_SEED == 0 and np.random.default_rng(0).integers(0, 2, size=2).tolist() == [1, 1]
    runs = [{e.estimator: e for e in slate_estimators(slate_logs(), "click", "new", {})}["cascade-dr"]
            for _ in range(3)]
    assert all(r == runs[0] for r in runs)
    c = runs[0]
    assert (c.value, c.stderr) == (pytest.approx(3.6, abs=1e-12), pytest.approx(2.4, abs=1e-12))
    assert c.clip_sensitivity == pytest.approx(0.03 / 2.4, abs=1e-12)


def test_cascade_dr_verdict_against_the_slate_estimate_with_the_same_folds():
    """Ten sessions: the verdict's value, SE and clip sensitivity are those of slate.estimate with rng = 0 for
    both the full and the capped value (c = the RIPS weights' 99th percentile); with folds drawn afresh for each
    the sensitivity would mix the folds' noise into the cap's effect."""
    from offeval_core.slate import estimate, from_logs
    from offeval_core.slate.estimators import weights_for

    sessions = [((1, 0), (0.5, 0.4), (0.6, 0.5)), ((1, 1), (0.5, 0.5), (0.4, 0.5)), ((0, 1), (0.2, 0.5), (0.5, 0.6)),
                ((1, 1), (0.8, 0.3), (0.4, 0.7)), ((0, 0), (0.5, 0.5), (0.5, 0.5)), ((1, 0), (0.1, 0.9), (0.6, 0.2)),
                ((0, 1), (0.5, 0.2), (0.5, 0.9)), ((1, 1), (0.3, 0.6), (0.7, 0.4)), ((1, 0), (0.6, 0.6), (0.2, 0.8)),
                ((0, 1), (0.4, 0.5), (0.9, 0.3))]
    logs = slate_frame(sessions)
    c = {e.estimator: e for e in slate_estimators(logs, "click", "new", {})}["cascade-dr"]
    data = from_logs(logs, reward="click", policy="new")
    full = estimate(data, estimator="cascade-dr", rng=0).target
    capped = estimate(data, estimator="cascade-dr", clip=verdict_clip(weights_for(data, "rips")), rng=0).target
    assert (c.value, c.stderr) == (full.value, full.stderr)
    assert c.clip_sensitivity == abs(capped.value - full.value) / full.stderr > 0


def test_every_weight_zero_is_a_dont_and_a_small_shortfall_does_not_stop_the_other_checks():
    assert verdict("IPS", (), {}, 0.0, 0.0, 0.0, 0.0) == ("don't", "every weight is zero: no logged session informs it.")
    # an ESS of one session is not "every weight zero": two sessions, share 1/2, trusted
    assert verdict("IPS", (), {}, 0.5, 0.05, 0.0, 1.0) == ("trust", TRUST.format(0.5, 0.0))
    # a small support shortfall (4 %) is a caution, but a later needed check that fires still decides "don't"
    checks = {"support": check("support", effect=0.96, p=0.01, label="share"),
              "cascade": check("cascade", effect=0.25, p=0.0012)}
    assert verdict("IIPS", ("support", "cascade"), checks, 0.9, 0.0, 0.0, 900.0) == (
        "don't", "IIPS assumes no cascade problem, and the cascade check fires (odds ratio 0.25, p = 0.0012).")


def test_ranking_estimators_use_exposure_weights_even_with_propensity_columns():
    """Logging and target propensity columns in the logs change nothing: the verdicts' DCG / IPS and SNIPS are
    of the exposure weights D(R(i)) / D0(r_i) (the reduce's default "auto" would take the propensities)."""
    plain = ranking_logs()
    with_p = read_logs(plain.frame.pipe(lambda f: pd.DataFrame({
        "session_id": f["session_id"], "rank": f["rank"], "click": f["click"], "rank__new": f["rank__new"],
        "arm": f["arm"], "logging_propensity": 0.5, "target_propensity__new": 0.25})))
    for est in (ranking_estimators(plain, "click", "new", {}, "reciprocal"),
                ranking_estimators(with_p, "click", "new", {}, "reciprocal")):
        d = {e.estimator: e for e in est}["dcg"]
        assert (d.value, d.stderr) == (pytest.approx(5 / 6, abs=1e-12), pytest.approx(1 / 3, abs=1e-12))
