"""Exact checks of the formula code, one per way it could be subtly wrong (see docs/mutation.md): p-value
helpers, Welch, delta-method SEs against influence-function SDs, capping at a weight equal to the cap,
bootstrap quantiles and p-value, decisions at CI bounds of exactly 0 and the Table-3 summary columns,
Theorem 4.1's SNIPS term, items the target does not show."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats as sps

from offeval_core import importance as imp
from offeval_core import stats
from offeval_core.analyses.decisions import _precision_fnr, _rel, classify, decide, summarize_boxes
from offeval_core.engine import Grid, reduce
from offeval_core.estimators import (
    CrossMoments,
    RatioMoments,
    aggregate,
    dcg,
    estimate_from_row,
    impression_online_results,
    online_results,
    ratio_difference,
    select,
    session_values,
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
    rng = np.random.default_rng(3)
    n = len(per)
    reps = np.array([imp.values_from_sessions(per, base="ncis", scale="session",
                                              counts=rng.multinomial(n, np.full(n, 1 / n))) for _ in range(25)])
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
