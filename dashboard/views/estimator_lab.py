"""Estimator lab: how well do Naive, SNIPS and the stratified GS estimator recover a model's Recall@K (or a
DCG-type gain) from missing-not-at-random held-out data? Bias and spread vs the MCAR truth, Kendall τ of the
model ranking vs the truth's (GS paper Table 1), τ vs the number of popularity strata (Fig. 1) and the
Theorem 4.1 bound terms, on the simulated world (GS paper Sec. 5, Alg. 1). Then the coverage of the normal,
bootstrap-t and empirical-Bernstein intervals of the slate IPS estimators against the exact truth, over
replications of the stochastic-slate simulator."""

from __future__ import annotations

import streamlit as st

from dashboard import data, ui
from offeval_core.defaults import LEVEL
from offeval_core.heldout.analyses import lab_bias_takeaway, lab_takeaway
from offeval_core.heldout.charts import (
    ESTIMATOR_LABELS,
    ESTIMATOR_ORDER,
    lab_bias_chart,
    lab_estimates_chart,
    lab_tau_chart,
    tau_vs_strata_chart,
)
from offeval_core.slate.coverage import HEAVY_TAILED, coverage_chart

c = ui.ctx()
st.title("Estimator lab")
st.caption("Per seed the simulated world's observed (MNAR) interactions are split into train / held-out, a zoo "
           "of models is trained, and every model's metric is estimated on the held-out MNAR data by each "
           "estimator. The truth is the same metric on a small missing-completely-at-random sample (GS paper "
           "Alg. 1). A good estimator has small bias, small spread over seeds, and ranks the models like the "
           "truth (Kendall τ near 1).")

PRESETS = {"quick": "Quick (2 seeds, K = 10…100)", "full": "Full (5 seeds, K = 5…100, ~1 min the first time)"}
LAMS = {"recall": "Recall@K", "dcg": "DCG-type gain@K"}
PROPS = {"true": "true propensities (+ IPS)", "popularity": "popularity model P ∝ pop^((γ+1)/2)"}

with ui.controls():
    a, b, p = st.columns([2, 1, 2])
    for name in ("lab_preset", "lab_lam", "lab_prop"):
        ui.init_control(name)
    preset = a.radio("Settings", list(PRESETS), format_func=PRESETS.get, horizontal=True, key="w_lab_preset")
    lam = b.selectbox("Metric", list(LAMS), format_func=LAMS.get, key="w_lab_lam")
    prop = p.selectbox("Propensities", list(PROPS), format_func=PROPS.get, key="w_lab_prop",
                       help="How the estimators weight the observed interactions; with the simulator's true "
                            "propensities IPS (with the true n_u) is added")

with ui.guarded("Estimator lab"):
    settings = data.LAB_PRESETS[preset]
    label = (f"Running the estimator lab: {len(settings['seeds'])} seeds × the small model zoo, "
             f"K = {', '.join(map(str, settings['ks']))} (first time only)…")
    lab = ui.with_progress(label, data.is_ready("lab", preset, lam, prop),
                           lambda: data.estimator_lab_result(preset, lam, prop))
    prm = lab.params
    st.caption(f"{len(prm['seeds'])} seeds, {prm['n_models']} models ({prm['grid']} zoo), {prm['n_users']:,} "
               f"users × {prm['n_items']} items, train fraction {prm['train_frac']:.0%}, {prm['n_mcar']} MCAR "
               f"items per user, {prm['n_strata']} popularity strata for GS, γ = {prm['gamma']:g}.")

    order = {e: i for i, e in enumerate(ESTIMATOR_ORDER)}
    s = lab.summary.sort_values(["k", "estimator"], key=lambda c: c.map(order) if c.name == "estimator" else c)
    s = s.assign(estimator=s["estimator"].map(lambda e: ESTIMATOR_LABELS.get(e, e)))
    top_k = max(prm["ks"])
    take = lab_takeaway(lab, k=top_k)
    if not c.present:  # presenting: the headline names it
        st.header("Bias and spread vs the MCAR truth")
    ui.show_figure(lab_bias_chart(lab), key="lab_bias", name="estimator_lab_bias",
                   take=lab_bias_takeaway(lab, k=top_k))
    ui.show_table(s, key="lab_summary", name="estimator_lab_summary",
                  caption="Per cut-off and estimator, averaged over models: mean bias and mean |bias| "
                          "(estimate − MCAR truth), spread (standard deviation over seeds), RMSE, and Kendall τ "
                          "vs the truth (mean and standard deviation over seeds).")

    st.header("Ranking the models: Kendall τ vs the truth")
    ui.show_figure(lab_tau_chart(lab), key="lab_tau", name="estimator_lab_tau", take=take)
    ui.show_table(lab.tau, key="lab_tau", name="estimator_lab_tau", height=240)

    st.header("Kendall τ vs the number of strata")
    ui.show_figure(tau_vs_strata_chart(lab), key="lab_strata", name="estimator_lab_tau_vs_strata")
    ui.show_table(lab.tau_strata, key="lab_strata", name="estimator_lab_tau_vs_strata", height=240)

    st.header("Estimate vs truth per model")
    ui.init_control("lab_k", int(prm["ks"][-1]), options=[int(x) for x in prm["ks"]])
    k = st.selectbox("Cut-off K", [int(x) for x in prm["ks"]], key="w_lab_k")
    ui.show_figure(lab_estimates_chart(lab, k=int(k)), key="lab_estimates", name=f"estimator_lab_estimates_at{k}")
    with st.expander("Every estimate (seed × K × model × estimator)"):
        ui.show_table(lab.estimates, key="lab_estimates", name="estimator_lab_estimates", height=320)

    st.header("Theorem 4.1: bias and concentration terms")
    ui.show_table(lab.bounds, key="lab_bounds", name="estimator_lab_bounds",
                  caption="Per seed and estimator, the two terms of the GS paper's Theorem 4.1 bound on the "
                          "estimation error (they depend on the weights only, not on the metric).")

st.header("Intervals under heavy-tailed weights: coverage against the truth")
st.caption(f"A handful of seeds cannot measure an interval's coverage, so this section replicates the "
           f"stochastic-slate simulator {data.COVERAGE_REPS} times ({HEAVY_TAILED.n_items} items, "
           f"{HEAVY_TAILED.n_slots} slots, position-based clicks, a target policy far from the logging one, truth by "
           "enumeration). Each replication logs a fresh sample and forms "
           f"the {LEVEL:.0%} normal, bootstrap-t (200 resamples) and empirical-Bernstein (Maurer & Pontil, with the world's "
           "exact bound on the per-session value) intervals of IIPS, RIPS and SIPS; coverage = share of the "
           "replications whose interval holds the truth, ± its Monte-Carlo error √(c(1 − c)/R).")
with ui.controls("Coverage study"):
    ui.init_control("lab_cov_n")
    n_cov = st.columns([1, 3])[0].selectbox("Sessions per logged sample", [100, 300, 1000], key="w_lab_cov_n",
                         format_func=lambda n: f"{n:,}",
                         help="Fewer sessions make the heavy weights' skew show in the mean")
with ui.guarded("Interval coverage"):
    if not data.is_ready("coverage", n_cov):
        blocks = data.COVERAGE_REPS // data.COVERAGE_BLOCK
        bar = st.progress(0.0, text="Replicating the simulator…")
        for b in range(blocks):
            bar.progress(b / blocks, text=f"Replications {b * data.COVERAGE_BLOCK + 1}–{(b + 1) * data.COVERAGE_BLOCK} "
                                          f"of {data.COVERAGE_REPS} (first time only)…")
            data.coverage_block(n_cov, b)
        bar.empty()
    cov = data.interval_coverage_result(n_cov)
    ui.show_figure(coverage_chart(cov), key="lab_coverage", name=f"estimator_lab_coverage_n{n_cov}", take=cov.takeaway)
    bounds = ", ".join(f"{k} {v:,.0f}" for k, v in cov.bounds.items())
    ui.show_table(cov.table, key="lab_coverage", name=f"estimator_lab_coverage_n{n_cov}",
                  column_config={"coverage": st.column_config.NumberColumn(format="percent"),
                                 "mc_se": st.column_config.NumberColumn("MC error", format="percent"),
                                 "miss_low": st.column_config.NumberColumn("truth above", format="percent"),
                                 "miss_high": st.column_config.NumberColumn("truth below", format="percent"),
                                 "mean_width": st.column_config.NumberColumn(format="%.3f")},
                  caption=f"Truth V(π) = {cov.truth:.4f} reward per session; bound B on the per-session value "
                          f"used by empirical Bernstein: {bounds}. 'truth above' = the interval lies below the "
                          "truth (the normal interval's usual miss when a few heavy weights are not drawn).")
