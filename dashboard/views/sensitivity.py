"""Sensitivity: TPR and mean p-value of DCG / nDCG vs the clip value (KDD'24 Sec. 6.2, Fig. 1)."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from dashboard import data, ui
from dashboard.state import PROPENSITY_CONTROLS
from offeval_core.analyses.plan import PROPENSITY_CURVES
from offeval_core.analyses.sensitivity_text import clips_text
from offeval_core.estimators import ESTIMATORS
from offeval_core.formatting import format_p
from offeval_core.multiple import LABELS as ADJUST_LABELS

c = ui.ctx()
ss = st.session_state
st.title("Sensitivity to the clip value")
st.caption("KDD'24 Sec. 6.2, Fig. 1, by the paper's protocol: the settings are the (experiment, day, reward) whose "
           "online A/B effect is a significant improvement; the offline metric detects one when the confidence "
           "interval of the target policy's paired effect over the logging policy is strictly positive. TPR = "
           "share of the improvements detected, as a function of the clip value m, with the sign agreement "
           "(share whose offline effect is > 0; the paper reports 100 %) and the mean p-value next to it. Online "
           "negatives are a separate view, never part of the TPR.")
if not ui.needs(c, policy=True, arms=True):
    ui.end_page()
if c.propensity:
    st.caption(f"**{ui.md_escape(c.policy)}** is given by propensities: its estimators weight the logged rows by "
               "π_t / π_p, and the cap c of the weights plays the role of the clip m (Gilotte Sec. 4.2).")

if c.propensity:  # importance weights π_t / π_p: the cap c of IS / CIS / NCIS / SNIPS plays the role of m
    metric_names = list(PROPENSITY_CURVES)
    default_metrics = list(PROPENSITY_CONTROLS["sens_metrics"])
else:
    metric_names = [k for k in ESTIMATORS if data.estimator_family(k) != "importance"]
    default_metrics = None
SIDE_LABELS = {"improvements": "online improvements (TPR)", "negatives": "online negatives (negatives detected)"}
with ui.controls():
    a, b, d = st.columns([3, 2.4, 2])
    ui.init_control("sens_metrics", default_metrics, options=metric_names)
    ui.init_control("sens_side")
    ui.init_control("sens_alpha")
    ui.init_control("sens_eff")
    ui.init_control("sens_all")
    ui.init_control("sens_adj")
    metrics = a.multiselect("Metrics", metric_names, key="w_sens_metrics", format_func=lambda k: ESTIMATORS[k].label)
    side = b.radio("Settings", list(SIDE_LABELS), key="w_sens_side", format_func=SIDE_LABELS.get,
                   help="Online improvements: the paper's true positives, whose detected share is the TPR. Online "
                        "negatives: significant online degradations, detected when the offline CI is strictly "
                        "negative — shown on their own, never mixed into the TPR")
    alpha = d.select_slider("Online significance p <", [0.05, 0.01, 0.001, 0.0001],
                            key="w_sens_alpha")
    f, g, e = st.columns([2, 2, 1.6], vertical_alignment="bottom")
    min_effect = g.number_input("Online effect beyond", min_value=0.0, step=0.01, format="%g", key="w_sens_eff",
                                help="A setting counts when its online effect (reward per session, treatment − "
                                     "control) is above this (improvements) or below its negative (negatives); "
                                     "the paper: 0")
    all_rewards = e.toggle("All rewards", key="w_sens_all",
                           help="Pool the settings of every reward column, as KDD'24 Fig. 1 pools its reward "
                                "signals (computes each reward's moments once)")
    adjust = f.selectbox("Multiple testing", list(ADJUST_LABELS), key="w_sens_adj", format_func=ADJUST_LABELS.get,
                         help="Detect on p-values adjusted over the settings tested at each clip value m: Holm "
                              "controls the chance of any false detection, Benjamini-Hochberg the share of false "
                              "ones among the detections")
if not metrics:
    st.warning("Choose at least one metric in the page controls to draw the chart.", icon=":material/warning:")
    ui.end_page()

s = c.settings
d_model, e_model = c.models
rewards = data.sensitivity_rewards(c.dataset, c.reward, all_rewards)
min_effect = float(min_effect)
with ui.guarded("Sensitivity"):
    todo = [r for r in rewards if not (data.is_ready("propensity", c.key, r) if c.propensity
                                       else data.moments_ready(c.key, r, s.discount, s.exposure, c.policy))]
    if todo:
        bar = st.progress(0.0, text="Computing moments…")
        for i, r in enumerate(todo):
            bar.progress(i / len(todo), text=f"Computing moments for reward {r} ({i + 1} of {len(todo)}; first "
                                              "time only)…")
            ui.get_moments(c, reward=r)
        bar.empty()
    res = data.sensitivity_result(c.key, rewards, d_model, e_model, c.policy, tuple(metrics), s.level, alpha,
                                  min_effect, side, adjust)
    n_settings = len(res.settings)
    if n_settings == 0:
        st.warning(res.takeaway, icon=":material/warning:")
        # a link to one view (say the online negatives) can reach logs that have none: offer the other view
        other = "negatives" if side == "improvements" else "improvements"
        alt = data.sensitivity_result(c.key, rewards, d_model, e_model, c.policy, tuple(metrics), s.level, alpha,
                                      min_effect, other, adjust)
        if len(alt.settings):
            st.button(f"Show the {len(alt.settings)} {SIDE_LABELS[other]} instead", key="w_sens_other",
                      on_click=lambda: ss.update(w_sens_side=other))
    else:
        fig = data.sensitivity_chart(c.key, rewards, d_model, e_model, c.policy, tuple(metrics), s.level, alpha,
                                     min_effect, side, s.clip, adjust)
        ui.show_figure(fig, key="sensitivity", name="sensitivity", take=ui.policy_headline(c.policy, res.takeaway))
        st.caption(res.adjustment)

        st.markdown(f"**{ui.md_escape(c.policy)} at the sidebar's clip value m = {ui.clip_label(s.clip)}** "
                    f"({n_settings} {SIDE_LABELS[side]}, "
                    f"{s.level:.1%} CIs)".replace(".0%", " %"))
        at = res.table[res.table["clip"] == s.clip].set_index("metric")
        short = "TPR" if side == "improvements" else "negatives detected"
        for metric, row in at.iterrows():   # a row of three per metric: six in one row do not fit at 1280 px
            cols = st.columns(3)
            label = ESTIMATORS[metric].label
            best = res.best_clips.get(metric, ())
            where = (f"most detections at {clips_text(best, grid=res.table.loc[res.table['metric'] == metric, 'clip'])}"
                     if best else "as many at every m (a flat line: no best m)")
            cols[0].metric(f"{label} {short}", f"{row[res.rate_column]:.0%}",
                           help=f"{int(row['n_detected'])} of {int(row['n_settings'])} settings detected; {where}")
            cols[1].metric(f"{label} sign agreement", f"{row['sign_agreement']:.0%}",
                           help="share of the settings whose offline effect has the online effect's sign "
                                "(KDD'24: 100 %)")
            cols[2].metric(f"{label} mean p-value", format_p(row["mean_p"]))

        st.subheader("The table behind the chart")
        ui.show_table(res.table, key="sensitivity_table", name="sensitivity_by_clip",
                      headers={res.rate_column: "TPR" if side == "improvements" else "negatives detected"})
        with st.expander(f"Per setting at m = {ui.clip_label(s.clip)} ({n_settings} settings)"):
            per = res.per_setting[res.per_setting["clip"] == s.clip]
            ui.show_table(pd.DataFrame(per), key="sensitivity_settings", name="sensitivity_per_setting")
