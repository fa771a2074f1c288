"""Exact checks of the formula code, one per way it could be subtly wrong (see docs/mutation.md): p-value
helpers, Welch, delta-method SEs against influence-function SDs, capping at a weight equal to the cap,
bootstrap quantiles and p-value, decisions at CI bounds of exactly 0 and the Table-3 summary columns,
Theorem 4.1's SNIPS term, items the target does not show."""

from __future__ import annotations

import datetime as dt
import json
import math

import numpy as np
import pandas as pd
import pytest
from resample_support import replay_counts
from scipy import stats as sps

from offeval_core import importance as imp
from offeval_core import stats
from offeval_core.analyses.decisions import _precision_fnr, _rel, classify, decide, summarize_boxes
from offeval_core.engine import Grid, Moments, reduce
from offeval_core.errors import InputError, SpecError, UnknownName
from offeval_core.estimators import (
    CrossMoments,
    RatioMoments,
    aggregate,
    dcg,
    effect,
    estimate_from_row,
    impression_online_results,
    ndcg,
    online_results,
    pndcg,
    ratio_difference,
    select,
    select_clips,
    session_values,
    subset,
    summarize_groups,
)
from offeval_core.heldout.mnar import theorem41_terms
from offeval_core.logs import read_logs


def m2(x) -> float:
    """Σ(x − x̄)², two-pass."""
    return float(((x - x.mean()) ** 2).sum())


def co(x, y) -> float:
    """Σ(x − x̄)(y − ȳ), two-pass."""
    return float(((x - x.mean()) * (y - y.mean())).sum())


# ------------------------------------------------------------------------------------------- p-values


def test_p_value_helpers_exact():
    assert stats.one_sided_p(1.0, 1.0) == pytest.approx(sps.norm.sf(1.0), rel=1e-12)  # 0.1587, not the cdf
    assert stats.one_sided_p(0.0, 0.0) == 0.5  # no evidence either way
    assert stats.one_sided_p(0.3, 0.0) == 0.0 and stats.one_sided_p(-0.3, 0.0) == 1.0
    assert stats.two_sided_p(1.959963984540054, 1.0) == pytest.approx(0.05, rel=1e-9)  # factor 2
    assert stats.two_sided_p(-1.0, 2.0) == pytest.approx(2 * sps.norm.sf(0.5), rel=1e-12)
    assert stats.two_sided_p(0.0, 0.0) == 1.0 and stats.two_sided_p(0.1, 0.0) == 0.0
    assert stats.normal_quantile(0.95) == pytest.approx(1.959963984540054, rel=1e-12)
    assert stats.normal_ci(1.0, 0.5, level=0.9).low == pytest.approx(1.0 - 0.5 * sps.norm.ppf(0.95), rel=1e-12)


def test_mean_and_variance_against_numpy():
    x = np.array([0.0, 1.0, 1.0, 5.0, 2.5])
    e = stats.mean_estimate(len(x), x.sum(), m2(x), level=0.95)
    assert e.stderr == pytest.approx(x.std(ddof=1) / math.sqrt(len(x)), rel=1e-12)
    assert stats.sample_variance(len(x), m2(x)) == pytest.approx(x.var(ddof=1), rel=1e-12)
    assert math.isnan(stats.sample_variance(1, 0.0)) and stats.sample_variance(2, 0.0) == 0.0


def test_welch_against_scipy():
    t = np.array([3.0, 1.0, 4.0, 1.0, 5.0, 9.0])
    c = np.array([2.0, 6.0, 5.0, 3.0])
    args = (len(t), t.sum(), m2(t), len(c), c.sum(), m2(c))
    ref = sps.ttest_ind(t, c, equal_var=False)
    assert stats.welch_two_sided_p(*args) == pytest.approx(ref.pvalue, rel=1e-10)
    eff = stats.welch_effect(*args, level=0.9)
    assert eff.p_value == pytest.approx(ref.pvalue / 2 if ref.statistic > 0 else 1 - ref.pvalue / 2, rel=1e-10)
    ci = ref.confidence_interval(0.9)
    assert (eff.ci.low, eff.ci.high) == pytest.approx((ci.low, ci.high), rel=1e-10)


def test_ratio_estimate_se_is_the_influence_function_sd():
    rng = np.random.default_rng(0)
    x, y = rng.gamma(2.0, size=40), rng.uniform(0.5, 2.0, size=40)
    e = stats.ratio_estimate(40, x.sum(), m2(x), y.sum(), m2(y), co(x, y), level=0.95)
    r = x.sum() / y.sum()
    phi = (x - r * y) / y.mean()
    assert e.stderr == pytest.approx(phi.std(ddof=1) / math.sqrt(40), rel=1e-10)


def test_ratio_difference_se_is_the_influence_function_sd():
    rng = np.random.default_rng(1)
    n = 50
    a, b = rng.gamma(2.0, size=n), rng.uniform(0.5, 2.0, size=n)
    c, e = a * 0.7 + rng.normal(0, 0.3, n), rng.uniform(0.8, 1.5, size=n)
    eff = ratio_difference(RatioMoments(n, a.sum(), m2(a), b.sum(), m2(b), co(a, b)),
                           RatioMoments(n, c.sum(), m2(c), e.sum(), m2(e), co(c, e)),
                           CrossMoments(co(a, c), co(a, e), co(b, c), co(b, e)), level=0.95)
    r1, r0 = a.sum() / b.sum(), c.sum() / e.sum()
    phi = (a - r1 * b) / b.mean() - (c - r0 * e) / e.mean()
    assert eff.value == pytest.approx(r1 - r0, rel=1e-12)
    assert eff.stderr == pytest.approx(phi.std(ddof=1) / math.sqrt(n), rel=1e-9)
    assert eff.p_value == pytest.approx(sps.norm.sf(eff.value / eff.stderr), rel=1e-9)


# ------------------------------------------------------------------------------ DCG effects from moments


def ab_logs(seed: int = 4, n: int = 160) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    rows = []
    for s in range(n):
        length = int(rng.integers(1, 6))
        perm = rng.permutation(8) + 1
        for r in range(1, length + 1):
            rows.append({"session_id": s, "rank": r, "arm": "control" if s % 3 else "treatment",
                         "experiment_id": "e1", "click": float(rng.uniform() < 0.5 / r), "rank__t": int(perm[r - 1])})
    return pd.DataFrame(rows)


def test_pndcg_paired_effect_se_is_the_influence_function_sd():
    """pnDCG effect = Σ(DCG_t − DCG_l) / Σ iDCG over control sessions; SE = sd(φ)/√n with
    φ = (d − R · iDCG) / mean iDCG (reading Σ x·y instead of Σ d·y would change it)."""
    logs = read_logs(ab_logs())
    m = reduce(logs, Grid(rewards=("click",), policies=("t",), discounts=("log2",), exposures=("log2",), clips=(4,)))
    row = aggregate(select(m, reward="click", policy="t", metric="pndcg", discount="log2", exposure="log2",
                           clip=4)).iloc[0]
    eff = estimate_from_row(row, metric="pndcg", level=0.95, diff=True)
    sv = session_values(logs, reward="click", policies=["t"], discount="log2", exposure="log2", clip=4)
    sv = sv[sv["arm"] == "control"]
    d, y = (sv["dcg__t"] - sv["dcg__logging"]).to_numpy(), sv["idcg"].to_numpy()
    r = d.sum() / y.sum()
    phi = (d - r * y) / y.mean()
    assert len(sv) == row["n"]
    assert eff.value == pytest.approx(r, rel=1e-10)
    assert eff.stderr == pytest.approx(phi.std(ddof=1) / math.sqrt(len(d)), rel=1e-8)
    assert eff.p_value == pytest.approx(sps.norm.sf(eff.value / eff.stderr), rel=1e-9)  # one-sided, H0: ≤ 0


def test_online_results_direction_and_offline_rows():
    df = ab_logs()
    logs = read_logs(df)
    m = reduce(logs, Grid(rewards=("click",), policies=("t",), clips=(math.inf,)))
    per = df.groupby("session_id").agg(click=("click", "sum"), arm=("arm", "first"))
    t, c = per[per["arm"] == "treatment"]["click"], per[per["arm"] == "control"]["click"]
    on = online_results(m, reward="click", level=0.95)[()]
    assert on.effect.value == pytest.approx(t.mean() - c.mean(), rel=1e-12)
    assert on.p_two_sided == pytest.approx(sps.ttest_ind(t, c, equal_var=False).pvalue, rel=1e-9)
    # offline rows are the control arm's sessions
    assert aggregate(select(m, reward="click", policy="t", metric="dcg")).iloc[0]["n"] == len(c)


def test_impression_online_effect_se_adds_the_arm_variances():
    logs = read_logs(ab_logs(5))
    m = imp.reduce_importance(logs, policies=("t",), clips=(2,), cappings=("max",), scales=("impression",),
                              discount="log2", exposure="log2")
    res = impression_online_results(m, reward="click", metric="cis@impression", discount="log2", exposure="log2",
                                    clip=2)[()]
    df = ab_logs(5)
    for arm, est in (("control", res.control), ("treatment", res.treatment)):
        part = df[df["arm"] == arm].groupby("session_id").agg(c=("click", "sum"), m=("click", "size"))
        x, u = part["c"].to_numpy(), part["m"].to_numpy(dtype=float)
        r = x.sum() / u.sum()
        assert est.value == pytest.approx(r, rel=1e-12)
        assert est.stderr == pytest.approx(((x - r * u) / u.mean()).std(ddof=1) / math.sqrt(len(x)), rel=1e-9)
    se = math.hypot(res.control.stderr, res.treatment.stderr)
    assert res.effect.stderr == pytest.approx(se, rel=1e-12)
    assert res.p_two_sided == pytest.approx(2 * sps.norm.sf(abs(res.effect.value) / se), rel=1e-9)


# ---------------------------------------------------------------------------- items the target doesn't show


def test_item_the_target_does_not_show_gets_discount_zero():
    """Session: clicks at logged ranks 1 and 2; the target shows the second item first and not the first
    (missing target rank). DCG with log2 and flat exposure: 1 · D(1) + 1 · 0 = 1 (D = 1 for the missing
    item would give 1 + 1)."""
    df = pd.DataFrame({"session_id": [1, 1], "rank": [1, 2], "click": [1.0, 1.0], "rank__t": [np.nan, 1.0]})
    logs = read_logs(df)
    flat = "exponential:1"
    assert dcg(logs, reward="click", policy="t", discount="log2", exposure=flat, clip=1).value == pytest.approx(1.0)
    # the same rule for exposure weights: w = D(R(i)) / D0(r_i) = 0 for the unshown item
    m = imp.reduce_importance(logs, clips=(math.inf,), discount="log2", exposure=flat)
    row = aggregate(select(m, reward="click", policy="t", metric="is", discount="log2", exposure=flat)).iloc[0]
    assert row["sum"] == pytest.approx(1.0) and row["w_sum"] == pytest.approx(1.0)


# ------------------------------------------------------------------------------------------ capping


def test_zero_capping_drops_a_weight_equal_to_the_cap():
    """w = 0.5 / 0.25 = 2 exactly with c = 2 (ties are common with power-of-two clips): zero-capping keeps
    w̄ = w · 1{w < c} = 0, max-capping keeps min(w, c) = 2."""
    df = pd.DataFrame({"session_id": [1, 2], "rank": 1, "click": [1.0, 1.0], "logging_propensity": [0.25, 0.5],
                       "target_propensity__t": [0.5, 0.25]})
    logs = read_logs(df)
    m = imp.reduce_importance(logs, clips=(2,))
    val = {k: aggregate(select(m, reward="click", policy="t", metric=k, discount="propensity",
                               exposure="propensity", clip=2)).iloc[0]["sum"] / 2 for k in ("cis", "cis-zero")}
    assert val["cis"] == pytest.approx((2 + 0.5) / 2) and val["cis-zero"] == pytest.approx(0.5 / 2)
    assert imp.cap(np.array([2.0, 1.0]), 2.0, "zero").tolist() == [0.0, 1.0]
    assert imp.cap(np.array([2.0, 3.0]), 2.0, "max").tolist() == [2.0, 2.0]


def test_session_ncis_se_on_ranking_logs_is_the_influence_function_sd():
    """One cell; R = (A / n) / (S / W). Influence φ = R (a/ā + W_τ/W̄ − s/s̄ − 1); SE = sd(φ)/√n."""
    rng = np.random.default_rng(9)
    rows = []
    for s in range(150):
        length = int(rng.integers(1, 5))
        perm = rng.permutation(6)[:length] + 1
        rows += [{"session_id": s, "rank": r, "rank__t": int(perm[r - 1]), "click": float(rng.uniform() < 0.4)}
                 for r in range(1, length + 1)]
    logs = read_logs(pd.DataFrame(rows))
    est = imp.estimate(logs, reward="click", policy="t", estimator="ncis", clip=1.3, discount="log2", exposure="log2")
    per = imp.session_sums(logs, reward="click", policy="t", clip=1.3, discount="log2", exposure="log2")
    a, s, w = (per[k].to_numpy() for k in ("a", "s", "w_sum"))
    r = a.mean() / (s.sum() / w.sum())
    phi = r * (a / a.mean() + w / w.mean() - s / s.mean() - 1)
    assert est.target.value == pytest.approx(r, rel=1e-12)
    assert est.target.stderr == pytest.approx(phi.std(ddof=1) / math.sqrt(len(a)), rel=1e-9)


# ------------------------------------------------------------------------------------------ bootstrap


def test_bootstrap_quantiles_se_and_p_value_against_numpy():
    """Replay the resampling with the same generator: percentile CI = np.quantile at (1 ∓ level)/2, SE = sd
    (ddof = 1) of the replicates, p = share of resampled effects ≤ 0."""
    logs = read_logs(imp.ncis_counterexample(200, rng=np.random.default_rng(2)))
    kw = dict(reward="value", policy="test", clip=10)
    b = imp.bootstrap(logs, estimator="ncis", n_boot=25, level=0.8, rng=3, **kw)
    per = imp.session_sums(logs, **kw)
    per = per[per["arm"] == "control"].reset_index(drop=True)
    reps = np.array([imp.values_from_sessions(per, base="ncis", scale="session", counts=k)
                     for k in replay_counts(3, len(per), 25)])
    diff = reps[:, 0] - reps[:, 1]
    assert (b.target.ci.low, b.target.ci.high) == pytest.approx(tuple(np.quantile(reps[:, 0], [0.1, 0.9])), rel=1e-12)
    assert (b.effect.ci.low, b.effect.ci.high) == pytest.approx(tuple(np.quantile(diff, [0.1, 0.9])), rel=1e-12)
    assert b.logging.stderr == pytest.approx(reps[:, 1].std(ddof=1), rel=1e-12)
    assert b.effect.p_value == pytest.approx(np.mean(diff <= 0), abs=1e-15)
    assert b.effect.p_value == 1.0  # NCIS is biased down on this log (Table 1): every resample ≤ 0


# ------------------------------------------------------------------------------------------ decisions


def test_decide_at_bounds_of_exactly_zero():
    assert decide(0.0, 1.0) == "neutral" and decide(-1.0, 0.0) == "neutral"
    assert decide(1e-12, 1.0) == "positive" and decide(-1.0, -1e-12) == "negative"


def test_classify_every_pair():
    out = {(a, b): classify(a, b) for a in ("positive", "neutral", "negative") for b in ("positive", "neutral", "negative")}
    assert out == {("positive", "positive"): "agree", ("positive", "neutral"): "false positive",
                   ("positive", "negative"): "false positive", ("neutral", "positive"): "false negative",
                   ("neutral", "neutral"): "agree", ("neutral", "negative"): "other",
                   ("negative", "positive"): "false negative", ("negative", "neutral"): "other",
                   ("negative", "negative"): "agree"}


def test_precision_fnr_and_relative_denominator():
    # offline positive in 3 tests, online positive in 2; both in 1: precision 1/3, FNR 1/2
    assert _precision_fnr(["positive", "positive", "positive", "neutral"],
                          ["positive", "neutral", "neutral", "positive"]) == pytest.approx((1 / 3, 1 / 2))
    assert _rel(1.0, -4.0) == 0.25 and math.isnan(_rel(1.0, 0.0))


def test_summary_columns_on_boxes():
    """Two estimators on three tests: agreement is a share (mean), ci_size the mean ratio of relative CI
    widths to the reference's, false positives / negatives are counts."""
    cats = {"A": ["agree", "agree", "false positive"], "B": ["agree", "false negative", "other"]}
    dec = {"agree": ("positive", "positive"), "false positive": ("positive", "neutral"),
           "false negative": ("neutral", "positive"), "other": ("negative", "neutral")}
    rows = []
    for est, widths in (("A", [1.0, 2.0, 4.0]), ("B", [2.0, 2.0, 2.0])):
        for i, (cat, wd) in enumerate(zip(cats[est], widths, strict=True)):
            rows.append({"experiment_id": f"e{i}", "reward": "click", "estimator": est, "category": cat,
                         "offline_decision": dec[cat][0], "online_decision": dec[cat][1],
                         "offline_effect": [0.1, 0.3, 0.2][i] * (1 if est == "A" else -1),
                         "online_effect": [0.1, 0.2, 0.4][i], "offline_rel_width": wd})
    s = summarize_boxes(pd.DataFrame(rows), ["A", "B"], reference="A").set_index("estimator")
    assert s.loc["A", "agreement"] == pytest.approx(2 / 3) and s.loc["B", "agreement"] == pytest.approx(1 / 3)
    assert s.loc["A", "ci_size"] == pytest.approx(1.0)
    assert s.loc["B", "ci_size"] == pytest.approx((2 / 1 + 2 / 2 + 2 / 4) / 3)
    assert s.loc["A", "n_false_positive"] == 1 and s.loc["B", "n_false_negative"] == 1
    assert s.loc["A", "precision"] == pytest.approx(2 / 3) and s.loc["B", "fnr"] == pytest.approx(1 / 2)
    assert s.loc["A", "correlation"] == pytest.approx(np.corrcoef([0.1, 0.3, 0.2], [0.1, 0.2, 0.4])[0, 1])


# ------------------------------------------------------------------------------------- GS Theorem 4.1


def test_theorem_4_1_snips_term_by_hand():
    """One user, S_u = 3 items, P = (0.5, 0.25, 0.5), the first two observed. n̂_u = 1/0.5 + 1/0.25 = 6 (observed
    items only), SNIPS w = n_u (1/P) / n̂_u = (1, 2, 1); bias = (|0.5 − 1| + |0.5 − 1| + |0.5 − 1|) / 3 = 0.5;
    conc = sqrt(2 log 40 (1 + 4) / (3 · 2)) + 2 · 7 log 40 / (3 · 2)."""
    args = ([0, 0, 0], [0.5, 0.25, 0.5], [0.5, 0.25, 0.5], [True, True, False])
    t, bias_u, _ = theorem41_terms(*args, estimator="snips")
    assert t.bias == pytest.approx(0.5) and bias_u[0] == pytest.approx(0.5)
    log_term = math.log(40)
    assert t.concentration == pytest.approx(math.sqrt(2 * log_term * 5 / 6) + 2 * 7 * log_term / 6)


# ------------------------------------------------------------- estimators from logs and from moments


def two_sessions():
    """Session 1: clicks 0, 1 at logged ranks 1, 2, the target swaps them; session 2: one click at rank 1,
    kept by the target."""
    return read_logs(pd.DataFrame({"session_id": [1, 1, 2], "rank": [1, 2, 1], "click": [0, 1, 1],
                                   "rank__new": [2, 1, 1]}))


def test_effect_by_hand():
    """Paired DCG effect target − logging per session, then its mean: session 1 moves its click from rank 2 to
    rank 1, session 2 is unchanged (d = 0). With log2: d1 = log2 3 · D(1) − 1 = log2 3 − 1 (label de-biased by
    1/D0(2) = log2 3); mean d1 / 2, SE = sd(d1, 0)/√2 = d1 / 2 too, so the one-sided p is Φ(−1). With clip 1 the
    raw labels: d1 = 1 − 1/log2 3. The defaults (DCG, pbm discount and exposure learnt from the session
    lengths: D0 = (1, 1/2), clip ∞, level LEVEL = 0.99) give d1 = 2 − 1 = 1: value 1/2, SE 1/2. Catches an effect that
    returns the target's mean (diff dropped), ignores the clip, the level or the policy."""
    logs = two_sessions()
    d1 = math.log2(3) - 1
    e = effect(logs, reward="click", policy="new", discount="log2", exposure="log2", level=0.9)
    assert (e.value, e.stderr, e.n) == pytest.approx((d1 / 2, d1 / 2, 2), rel=1e-12)
    z = sps.norm.ppf(0.95)
    assert (e.ci.low, e.ci.high) == pytest.approx((d1 / 2 * (1 - z), d1 / 2 * (1 + z)), rel=1e-12)
    assert e.p_value == pytest.approx(sps.norm.sf(1.0), rel=1e-12)
    raw = effect(logs, reward="click", policy="new", discount="log2", exposure="log2", clip=1)
    assert raw.value == pytest.approx((1 - 1 / math.log2(3)) / 2, rel=1e-12)
    d = effect(logs, reward="click", policy="new")
    z = sps.norm.ppf(0.995)
    assert (d.value, d.stderr, d.ci.low, d.ci.high) == pytest.approx((0.5, 0.5, 0.5 - 0.5 * z, 0.5 + 0.5 * z),
                                                                      rel=1e-12)
    # nDCG: the target ranks session 1 ideally (1), the logged order has 1 / log2 3 of its iDCG
    nd = effect(logs, reward="click", policy="new", metric="ndcg", discount="log2", exposure="log2")
    assert nd.value == pytest.approx((1 - 1 / math.log2(3)) / 2, rel=1e-12)
    with pytest.raises(InputError, match=r"^policy must name a target policy for an effect, got None$"):
        effect(logs, reward="click", policy=None)


def grid_moments():
    df = ab_logs()
    rng = np.random.default_rng(7)
    df["view"] = (rng.uniform(size=len(df)) < 0.6).astype(float)
    df["rank__u"] = df.groupby("session_id")["rank"].transform(lambda r: r[::-1].to_numpy())
    logs = read_logs(df)
    return reduce(logs, Grid(rewards=("click", "view"), policies=("t", "u"), discounts=("log2", "pbm"),
                             exposures=("log2", "pbm"), clips=(2, math.inf)))


def test_select_clips_is_select_over_the_rewards_and_clips():
    """select_clips(rewards, …) holds exactly the rows of select(reward, …, clip) for each reward and each clip of
    the grid, for every policy, metric (pnDCG reads the DCG rows), discount, exposure and arm; a filter dropped,
    negated or or-ed in would add or lose rows."""
    m = grid_moments()
    off = m.offline
    cases = [dict(rewards=["click"], policy="t", metric="dcg"),
             dict(rewards=["click", "view"], policy=None, metric="pndcg", discount="log2", exposure="pbm", arm=None),
             dict(rewards=["view"], policy="u", metric="ndcg", discount="pbm", exposure="log2", arm="treatment"),
             dict(rewards=("view", "click"), policy="t", metric="dcg", discount="log2", exposure="log2")]
    for case in cases:
        got = select_clips(m, **case)
        args = {k: v for k, v in case.items() if k != "rewards"}
        want = pd.concat([select(m, reward=r, clip=c, **args) for r in case["rewards"] for c in m.grid.clips])
        assert len(got) > 0 and sorted(got.index) == sorted(want.index)
        assert set(got["arm"]) == ({"control", "treatment"} if case.get("arm", "x") is None else
                                   {case.get("arm", "control")})
        assert set(got["reward"]) == set(case["rewards"]) and set(got["clip"]) == {2.0, math.inf}
    # the defaults: pbm discount and exposure, the control arm, here the logging rows
    rows = select_clips(m, rewards=["click"], policy=None, metric="dcg")
    assert set(map(tuple, rows[["policy", "metric", "discount", "exposure", "arm"]].to_numpy())) == {
        ("logging", "dcg", "pbm", "pbm", "control")}
    assert len(rows) == len(off[(off["reward"] == "click") & (off["policy"] == "logging") & (off["metric"] == "dcg")
                                & (off["discount"] == "pbm") & (off["exposure"] == "pbm")
                                & (off["arm"] == "control")])
    with pytest.raises(UnknownName, match=r"^reward 'buy' was not computed; available: click, view$"):
        select_clips(m, rewards=["click", "buy"], policy="t", metric="dcg")
    with pytest.raises(UnknownName, match=r"^policy 'w' was not computed; available: t, u$"):
        select_clips(m, rewards=["click"], policy="w", metric="dcg")


def test_group_and_online_results_to_dict():
    """The JSON of a group: its keys (a date as its ISO text, numbers and strings as they are), the logging and
    target estimates, the paired effect and the online outcome (the effect with its two-sided p); parts that are
    missing (no target policy, no treatment arm) are left out, not written as null."""
    df = ab_logs()
    df["segment"] = ["b" if s % 2 else "a" for s in df["session_id"]]
    df["day"] = dt.date(2024, 3, 1)
    logs = read_logs(df)
    m = reduce(logs, Grid(rewards=("click",), policies=("t",), discounts=("log2",), exposures=("log2",),
                          clips=(math.inf,)))
    groups = summarize_groups(m, reward="click", policy="t", discount="log2", exposure="log2", by=["segment", "day"])
    assert [g.keys for g in groups] == [{"segment": s, "day": dt.date(2024, 3, 1)} for s in "ab"]
    for g in groups:
        on = g.online
        online = {"control": on.control.to_dict(), "treatment": on.treatment.to_dict(),
                  "effect": on.effect.to_dict() | {"p_value_two_sided": on.p_two_sided}}
        assert g.to_dict() == {"segment": g.keys["segment"], "day": "2024-03-01", "logging": g.logging.to_dict(),
                               "target": g.target.to_dict(), "effect": g.effect.to_dict(), "online": online}
        # the control arm's mean click count per session, online and offline alike
        per = df[(df["segment"] == g.keys["segment"]) & (df["arm"] == "control")].groupby("session_id")["click"]
        assert g.to_dict()["online"]["control"]["value"] == pytest.approx(per.sum().mean(), rel=1e-12)
        assert 0 < on.p_two_sided < 1
    (whole,) = summarize_groups(m, reward="click", policy=None, discount="log2", exposure="log2")
    assert set(whole.to_dict()) == {"logging", "online"}
    # without arms every session is the control's: no treatment, effect nor p
    plain = read_logs(df.drop(columns="arm"))
    mp = reduce(plain, Grid(rewards=("click",), policies=(), clips=(math.inf,)))
    (res,) = summarize_groups(mp, reward="click", policy=None)
    assert res.to_dict() == {"logging": res.logging.to_dict(), "online": {"control": res.online.control.to_dict()}}
    assert res.online.control.value == pytest.approx(res.logging.value, rel=1e-12)
    assert res.logging.value == pytest.approx(df.groupby("session_id")["click"].sum().mean(), rel=1e-12)


def test_impression_online_results_by_group():
    """Per group of ``by`` keys and arm: Σ clicks / Σ impressions of the arm's sessions; a group with only
    treatment sessions has no control and no effect (its JSON has only the treatment). Catches grouping by
    nothing (one pooled group) and a group key that is not a tuple."""
    df = ab_logs(5)
    df.loc[df["session_id"] >= 150, "arm"] = "treatment"
    df.loc[df["session_id"] == 149, "arm"] = "control"
    df["segment"] = np.where(df["session_id"] >= 150, "c", np.where(df["session_id"] % 2 == 1, "b", "a"))
    df.loc[df["session_id"].isin([149, 150, 152]), "segment"] = "d"  # one control and two treatment sessions
    logs = read_logs(df)
    m = imp.reduce_importance(logs, policies=("t",), clips=(2,), cappings=("max",), scales=("impression",),
                              discount="log2", exposure="log2")
    res = impression_online_results(m, reward="click", metric="cis@impression", discount="log2", exposure="log2",
                                    clip=2, by=("segment",), level=0.9)
    assert list(res) == [("a",), ("b",), ("c",), ("d",)]
    for (seg,), r in res.items():
        for arm, est in (("control", r.control), ("treatment", r.treatment)):
            part = df[(df["segment"] == seg) & (df["arm"] == arm)]
            if seg == "c" and arm == "control":
                assert est is None and len(part) == 0
                continue
            assert est.value == pytest.approx(part["click"].sum() / len(part), rel=1e-12)
            assert est.n == part["session_id"].nunique()
    assert res[("d",)].control.n == 1 and res[("d",)].treatment.n == 2
    c = res[("c",)]
    assert c.effect is None and math.isnan(c.p_two_sided) and c.to_dict() == {"treatment": c.treatment.to_dict()}
    a = res[("a",)]
    assert a.effect.value == pytest.approx(a.treatment.value - a.control.value, rel=1e-12)
    assert a.effect.n == a.treatment.n + a.control.n
    assert a.effect.p_value == pytest.approx(stats.one_sided_p(a.effect.value, a.effect.stderr), rel=1e-12)
    z = sps.norm.ppf(0.95)
    assert a.effect.ci.high == pytest.approx(a.effect.value + z * a.effect.stderr, rel=1e-12)
    assert a.to_dict()["effect"]["p_value_two_sided"] == pytest.approx(
        stats.two_sided_p(a.effect.value, a.effect.stderr), rel=1e-12)

    # arms whose moments count no session (a moments file may hold such rows) are left out as missing
    m.offline.loc[(m.offline["segment"] == "b") & (m.offline["arm"] == "control"), ["n", "sum", "den_sum"]] = 0
    b = impression_online_results(m, reward="click", metric="cis@impression", discount="log2", exposure="log2",
                                  clip=2, by=("segment",))[("b",)]
    assert b.control is None and b.effect is None and b.treatment.value == res[("b",)].treatment.value


def test_pndcg_defaults_learn_the_pbm_discount():
    """pnDCG with its defaults (pbm discount and exposure, learnt from the session lengths: D0 = (1, 1/2)):
    session 1's click at rank 2 is de-biased to 2, DCG = 2 · 1/2 = 1, iDCG = 2 · 1 = 2; session 2: DCG = iDCG = 1;
    pnDCG = (1 + 1) / (2 + 1) = 2/3 (log2 would give (1 + 1) / (log2 3 + 1))."""
    logs = two_sessions()
    assert pndcg(logs, reward="click").value == pytest.approx(2 / 3, rel=1e-12)
    assert pndcg(logs, reward="click", discount="log2", exposure="log2").value == pytest.approx(
        2 / (math.log2(3) + 1), rel=1e-12)


def test_subset_keeps_the_grid_labels_source_and_a_fresh_index():
    """subset narrows the grid (keeping its nDCG rule), keeps the discount labels and the source name, renumbers
    the rows from 0 without an index column, and reads clips as clip values (2 and 2.0 are one clip; 0.5 is not a
    clip, named as one of the clips)."""
    df = ab_logs()
    logs = read_logs(df)
    m = reduce(logs, Grid(rewards=("click",), policies=("t",), discounts=("log2", "pbm"), exposures=("log2",),
                          clips=(2, math.inf), ndcg_rule="drop"))
    s = subset(m, discounts=["pbm"], clips=[2, 2.0])
    assert s.grid.clips == (2.0,) and s.grid.discounts == ("pbm",) and s.grid.ndcg_rule == "drop"
    assert s.discount_labels == m.discount_labels == {"log2": "1/log₂(r+1)", "pbm": "learnt PBM (session survival)"}
    assert s.source == m.source == "<DataFrame>"
    off = m.offline
    keep = off[(off["discount"] == "pbm") & (off["clip"] == 2.0)]
    assert list(s.offline.columns) == list(off.columns) and list(s.offline.index) == list(range(len(keep)))
    assert s.offline["sum"].tolist() == keep["sum"].tolist()
    assert list(s.online.columns) == list(m.online.columns)
    assert list(s.online.index) == list(range(len(m.online)))
    with pytest.raises(SpecError, match=r"^clips must be ≥ 1 \(1 = raw labels, inf = unclipped\), got 0\.5$"):
        subset(m, clips=[0.5])



def test_online_results_groups_without_a_control_or_without_arms():
    """Per group: each arm's mean reward per session and Welch's test. A group whose sessions are all in the
    treatment arm has no control and no effect (it was compared with itself: effect 0, two-sided p 1); a reward
    without online rows gives one group of no session; rows whose arm is neither control nor treatment (no A/B
    split) are pooled into the control."""
    df = ab_logs()
    df.loc[df["session_id"] >= 150, "arm"] = "treatment"
    df["segment"] = np.where(df["session_id"] >= 150, "c", np.where(df["session_id"] % 2 == 1, "b", "a"))
    m = reduce(read_logs(df), Grid(rewards=("click",), policies=(), clips=(math.inf,)))
    res = online_results(m, reward="click", by=["segment"], level=0.9)
    assert list(res) == [("a",), ("b",), ("c",)]
    per = df.groupby("session_id").agg(click=("click", "sum"), arm=("arm", "first"), segment=("segment", "first"))
    for (seg,), r in res.items():
        for arm, est in (("control", r.control), ("treatment", r.treatment)):
            x = per[(per["segment"] == seg) & (per["arm"] == arm)]["click"]
            if len(x) == 0:
                assert est is None
                continue
            assert (est.value, est.n) == (pytest.approx(x.mean(), rel=1e-12), len(x))
            assert est.ci.level == 0.9
    c = res[("c",)]
    assert c.control is None and c.effect is None and math.isnan(c.p_two_sided)
    assert c.to_dict() == {"treatment": c.treatment.to_dict()}
    a = per[per["segment"] == "a"]
    t, k = a[a["arm"] == "treatment"]["click"], a[a["arm"] == "control"]["click"]
    assert res[("a",)].p_two_sided == pytest.approx(sps.ttest_ind(t, k, equal_var=False).pvalue, rel=1e-9)
    (empty,) = online_results(m, reward="view").values()
    assert empty.control.n == 0 and math.isnan(empty.control.value) and empty.treatment is None
    other = Moments(offline=m.offline, online=m.online.assign(arm="all"), grid=m.grid)
    (pooled,) = online_results(other, reward="click").values()
    assert (pooled.control.value, pooled.control.n) == (pytest.approx(per["click"].mean(), rel=1e-12), len(per))
    assert pooled.treatment is None and pooled.effect is None


def test_dcg_ndcg_and_session_values_with_their_defaults():
    """The pbm defaults learn D0 = (1, 2/3) from the session lengths (two of three sessions reach rank 2).
    Session 1 (clicks 0, 1; the target swaps them): the click de-biased to 1 / D0(2) = 3/2, logging DCG
    3/2 · D(2) = 1, target 3/2 · D(1) = 3/2, iDCG 3/2; session 2 (a click at rank 1): 1 everywhere; session 3:
    no click, iDCG 0. DCG: logging 2/3, target 5/6; nDCG of the logging ranks (2/3 + 1 + 0) / 3 = 5/9 with the
    zero rule, (2/3 + 1) / 2 = 5/6 with the drop rule (log2 would give 1/log2 3 for session 1). session_values
    leaves out the logging policy and None among the target policies (the logged ranks are always its
    ``logging`` column)."""
    logs = read_logs(pd.DataFrame({"session_id": [1, 1, 2, 3, 3], "rank": [1, 2, 1, 1, 2],
                                   "click": [0, 1, 1, 0, 0], "rank__new": [2, 1, 1, 1, 2]}))
    assert dcg(logs, reward="click").value == pytest.approx(2 / 3, rel=1e-12)
    assert dcg(logs, reward="click", policy="new").value == pytest.approx(5 / 6, rel=1e-12)
    assert ndcg(logs, reward="click").value == pytest.approx(5 / 9, rel=1e-12)
    assert ndcg(logs, reward="click", ndcg_rule="drop").value == pytest.approx(5 / 6, rel=1e-12)
    assert ndcg(logs, reward="click", discount="log2", exposure="log2", ndcg_rule="drop").value == pytest.approx(
        (1 / math.log2(3) + 1) / 2, rel=1e-12)
    sv = session_values(logs, reward="click", policies=["logging", None, "new"])
    assert list(sv.columns) == ["session", "session_id", "experiment_id", "day", "arm", "segment", "idcg",
                                "dcg__logging", "dcg__new", "ndcg__logging", "ndcg__new"]
    assert sv[["idcg", "dcg__logging", "dcg__new", "ndcg__logging", "ndcg__new"]].to_numpy() == pytest.approx(
        np.array([[1.5, 1, 1.5, 2 / 3, 1], [1, 1, 1, 1, 1], [0, 0, 0, 0, 0]]), rel=1e-12)


def test_snips_effect_is_a_difference_of_two_ratios():
    """SNIPS' paired effect is Σw·r / Σw − Σr / n (the logging policy's own ratio has the denominator n, not
    Σw): two sessions with weights w = 0.5 / 0.25 = 2 and 0.25 / 0.5 = 1/2 and clicks 1, 0 give 2 / 2.5 − 1/2 =
    0.3 (Σ(w − 1)·r / Σw = 0.4 would be the shared-denominator reading of pnDCG)."""
    df = pd.DataFrame({"session_id": [1, 2], "rank": 1, "click": [1.0, 0.0], "logging_propensity": [0.25, 0.5],
                       "target_propensity__t": [0.5, 0.25]})
    m = imp.reduce_importance(read_logs(df), clips=(math.inf,))
    row = aggregate(select(m, reward="click", policy="t", metric="snips", discount="propensity",
                           exposure="propensity")).iloc[0]
    assert estimate_from_row(row, metric="snips", level=0.95).value == pytest.approx(0.8, rel=1e-12)
    assert estimate_from_row(row, metric="snips", level=0.95, diff=True).value == pytest.approx(0.3, rel=1e-12)


def test_select_names_what_was_not_computed():
    """select checks the metric and every part of the variant against the grid, each error naming the part and
    what is available ("none" for an empty list), instead of returning no row."""
    m = reduce(two_sessions(), Grid(rewards=("click",), policies=(), clips=(2, math.inf)))
    base = dict(reward="click", policy=None, metric="dcg")
    for kw, message in ((dict(policy="new"), "policy 'new' was not computed; available: none"),
                        (dict(clip=3), "clip 3 was not computed; available: 2, inf"),
                        (dict(discount="log2"), "discount 'log2' was not computed; available: pbm"),
                        (dict(exposure="log2"), "exposure 'log2' was not computed; available: pbm"),
                        (dict(reward="view"), "reward 'view' was not computed; available: click")):
        with pytest.raises(UnknownName) as err:
            select(m, **(base | kw))
        assert str(err.value) == message
    with pytest.raises(SpecError, match=r"^metric must be one of 'dcg', 'ndcg', 'pndcg', 'is', .*; got 'foo'$"):
        select(m, **(base | dict(metric="foo")))
    rows = select(m, **base, clip=2)
    assert len(rows) == 1 and rows.iloc[0]["n"] == 2 and rows.iloc[0]["sum"] == pytest.approx(2.0)


def test_pndcg_effect_by_hand():
    """pnDCG's paired effect Σd / Σ iDCG on the two sessions with log2: d = (log2 3 − 1, 0), iDCG = (log2 3, 1),
    with its n (2 sessions) and its normal interval value ± z · SE."""
    e = effect(two_sessions(), reward="click", policy="new", metric="pndcg", discount="log2", exposure="log2",
               level=0.9)
    assert e.value == pytest.approx((math.log2(3) - 1) / (math.log2(3) + 1), rel=1e-12)
    z = sps.norm.ppf(0.95)
    assert e.n == 2 and (e.ci.low, e.ci.high) == pytest.approx((e.value - z * e.stderr, e.value + z * e.stderr),
                                                                rel=1e-12)
    assert e.p_value == pytest.approx(sps.norm.sf(e.value / e.stderr), rel=1e-12)


def test_online_results_arms_with_one_session_no_reward_or_other_labels():
    """A treatment arm counts when it has a session (n > 0), even a single one or one without any reward; arms
    of a moments file labelled neither control nor treatment are pooled (Chan's merge: the pooled mean and
    M2) into the control, but not beside a control arm."""
    df = ab_logs()
    df["segment"] = np.where(df["session_id"] % 2 == 1, "b", "a")
    df.loc[df["session_id"] >= 150, "segment"] = "c"
    m = reduce(read_logs(df), Grid(rewards=("click",), policies=(), clips=(math.inf,)))
    on = m.online.copy()
    arm, seg = on["arm"], on["segment"]
    on.loc[(seg == "a") & (arm == "treatment"), ["sum", "m2"]] = 0.0         # sessions without a click
    on.loc[(seg == "b") & (arm == "treatment"), ["n", "sum", "m2"]] = [1, 1.0, 0.0]  # one session
    on.loc[(seg == "c") & (arm == "treatment"), ["n", "sum", "m2"]] = [0, 0.0, 0.0]  # no session
    res = online_results(Moments(offline=m.offline, online=on, grid=m.grid), reward="click", by=["segment"])
    a, b, c = res[("a",)], res[("b",)], res[("c",)]
    assert a.treatment.value == 0.0 and a.effect.value == pytest.approx(-a.control.value, rel=1e-12)
    assert (b.treatment.value, b.treatment.n) == (1.0, 1) and b.effect is not None
    assert c.treatment is None and c.effect is None and c.control.n > 0
    per = df.groupby("session_id").agg(click=("click", "sum"), segment=("segment", "first"))
    labelled = m.online.assign(arm=np.where(m.online["segment"] == "a", "x", "y"))
    (pooled,) = online_results(Moments(offline=m.offline, online=labelled, grid=m.grid), reward="click").values()
    assert (pooled.control.n, pooled.treatment) == (len(per), None)
    assert pooled.control.value == pytest.approx(per["click"].mean(), rel=1e-12)
    assert pooled.control.stderr == pytest.approx(per["click"].std(ddof=1) / math.sqrt(len(per)), rel=1e-12)
    beside = m.online.assign(arm=np.where(m.online["arm"] == "control", "control", "x"))
    (kept,) = online_results(Moments(offline=m.offline, online=beside, grid=m.grid), reward="click").values()
    control = df[df["arm"] == "control"].groupby("session_id")["click"].sum()
    assert (kept.control.n, kept.control.value) == (len(control), pytest.approx(control.mean(), rel=1e-12))


def test_summarize_groups_by_hand():
    """Per segment of the control sessions: the target's mean DCG, the paired effect = mean of (target − logging)
    with SE sd / √n, every interval at the level asked for (the online one too); a numeric key stays a number in
    the JSON; the arm is not a grouping key (the offline rows are the control arm's)."""
    df = ab_logs()
    df["segment"] = np.where(df["session_id"] % 2 == 1, "b", "a")
    logs = read_logs(df)
    m = reduce(logs, Grid(rewards=("click",), policies=("t",), discounts=("log2",), exposures=("log2",),
                          clips=(math.inf,)))
    sv = session_values(logs, reward="click", policies=["t"], discount="log2", exposure="log2")
    groups = summarize_groups(m, reward="click", policy="t", discount="log2", exposure="log2", by=["segment"],
                              level=0.9)
    assert [g.keys for g in groups] == [{"segment": "a"}, {"segment": "b"}]
    for g in groups:
        part = sv[(sv["segment"] == g.keys["segment"]) & (sv["arm"] == "control")]
        d = part["dcg__t"] - part["dcg__logging"]
        assert g.target.value == pytest.approx(part["dcg__t"].mean(), rel=1e-12)
        assert g.logging.value == pytest.approx(part["dcg__logging"].mean(), rel=1e-12)
        assert (g.effect.value, g.effect.stderr) == pytest.approx((d.mean(), d.std(ddof=1) / math.sqrt(len(d))),
                                                                  rel=1e-9)
        assert {g.logging.ci.level, g.target.ci.level, g.effect.ci.level, g.online.control.ci.level,
                g.online.effect.ci.level} == {0.9}
    (by_day,) = summarize_groups(m, reward="click", policy="t", discount="log2", exposure="log2", by=["day"])
    assert by_day.to_dict()["day"] == 1 and type(by_day.to_dict()["day"]) is int      # 1, not 1.0 in the JSON
    assert json.dumps(by_day.to_dict()).startswith('{"day": 1, ')
    for key in ("arm", "region"):
        with pytest.raises(UnknownName) as err:
            summarize_groups(m, reward="click", policy="t", discount="log2", exposure="log2", by=[key])
        assert str(err.value) == f"by keys must be among experiment_id, day, segment; got {key!r}"
