"""Sensitivity: TPR and mean p-value of DCG / nDCG vs the clip value (KDD'24 Sec. 6.2, Fig. 1)."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from dashboard import data, ui
from dashboard.state import PROPENSITY_CONTROLS
from offeval_core.analyses.plan import PROPENSITY_CURVES
from offeval_core.estimators import ESTIMATORS
from offeval_core.formatting import format_p
from offeval_core.multiple import LABELS as ADJUST_LABELS

c = ui.ctx()
ss = st.session_state
st.title("Sensitivity to the clip value")
st.caption("For every (experiment, day, reward) whose online A/B effect is significant, does the offline paired "
           "effect of the target policy over the logging policy have a confidence interval strictly on the "
           "online side? TPR = share of such settings detected, as a function of the clip value m "
           "(KDD'24 Sec. 6.2, Fig. 1).")
if not ui.needs(c, policy=True, arms=True):
    st.stop()
if c.propensity:
    st.caption(f"**{ui.md_escape(c.policy)}** is given by propensities: its estimators weight the logged rows by "
               "π_t / π_p, and the cap c of the weights plays the role of the clip m (Gilotte Sec. 4.2).")

if c.propensity:  # importance weights π_t / π_p: the cap c of IS / CIS / NCIS / SNIPS plays the role of m
    metric_names = list(PROPENSITY_CURVES)
    default_metrics = list(PROPENSITY_CONTROLS["sens_metrics"])
else:
    metric_names = [k for k in ESTIMATORS if data.estimator_family(k) != "importance"]
    default_metrics = None
with ui.controls():
    a, b, d = st.columns([3, 2, 2])
    ui.init_control("sens_metrics", default_metrics, options=metric_names)
    ui.init_control("sens_sel")
    ui.init_control("sens_alpha")
    ui.init_control("sens_all")
    ui.init_control("sens_adj")
    metrics = a.multiselect("Metrics", metric_names, key="w_sens_metrics", format_func=lambda k: ESTIMATORS[k].label)
    selection = b.radio("Settings", ["significant", "all"], key="w_sens_sel", horizontal=True,
                        format_func={"significant": "online significant", "all": "all"}.get,
                        help="Which (experiment, day, reward) settings count: those whose online effect is "
                             "significant (the paper) or all of them")
    alpha = d.select_slider("Online significance p <", [0.05, 0.01, 0.001, 0.0001],
                            key="w_sens_alpha")
    f, e, _ = st.columns([2, 1.6, 1.4], vertical_alignment="bottom")
    all_rewards = e.toggle("All rewards", key="w_sens_all",
                           help="Pool the settings of every reward column, as KDD'24 Fig. 1 pools its reward "
                                "signals (computes each reward's moments once)")
    adjust = f.selectbox("Multiple testing", list(ADJUST_LABELS), key="w_sens_adj", format_func=ADJUST_LABELS.get,
                         help="Detect on p-values adjusted over the settings tested at each clip value m: Holm "
                              "controls the chance of any false detection, Benjamini-Hochberg the share of false "
                              "ones among the detections")
if not metrics:
    st.warning("Choose at least one metric in the page controls to draw the chart.", icon=":material/warning:")
    st.stop()

s = c.settings
d_model, e_model = c.models
rewards = tuple(c.dataset.rewards) if all_rewards else (c.reward,)
rates = c.dataset.reward_rates
rewards = tuple(r for r in rewards if rates.get(r, 0) > 0)
with ui.guarded("Sensitivity"):
    todo = [r for r in rewards if not (data.is_ready("propensity", c.key, r) if c.propensity
                                       else data.is_ready("moments", c.key, r, s.discount, s.exposure))]
    if todo:
        bar = st.progress(0.0, text="Computing moments…")
        for i, r in enumerate(todo):
            bar.progress(i / len(todo), text=f"Computing moments for reward {r} ({i + 1} of {len(todo)}; first "
                                              "time only)…")
            ui.get_moments(c, reward=r)
        bar.empty()
    asked = selection
    res, selection = data.shown_sensitivity(c.key, rewards, d_model, e_model, c.policy, tuple(metrics),
                                            s.level, alpha, selection, adjust)
    n_settings = len(res.settings)
    note = ""
    if selection != asked:
        # the same fallback as `offeval report`: with nothing significant online, every setting counts
        note = (f"No (experiment, day, reward) setting has a significant online effect at p < {alpha:g}, so "
                "there is nothing to detect; showing **all** settings instead (detection = offline CI on the "
                "side of the online effect). Choose a larger p threshold in the page controls to keep the "
                "paper's selection.")
        if not c.present:  # when presenting, the note goes below the chart
            st.info(note, icon=":material/info:")
    if n_settings == 0:
        st.warning(res.takeaway, icon=":material/warning:")
        st.stop()
    fig = data.sensitivity_chart(c.key, rewards, d_model, e_model, c.policy, tuple(metrics), s.level, alpha,
                                 selection, s.clip, adjust)
    ui.show_figure(fig, key="sensitivity", name="sensitivity", take=ui.policy_headline(c.policy, res.takeaway))
    st.caption(res.adjustment)
    if note and c.present:
        st.info(note, icon=":material/info:")

    st.markdown(f"**{ui.md_escape(c.policy)} at the sidebar's clip value m = {ui.clip_label(s.clip)}** ({n_settings} settings, "
                f"{s.level:.1%} CIs)".replace(".0%", " %"))
    at = res.table[res.table["clip"] == s.clip].set_index("metric")
    cols = st.columns(max(2, 2 * len(at)))
    for i, (metric, row) in enumerate(at.iterrows()):
        label = ESTIMATORS[metric].label
        best = res.best_clip.get(metric)
        flat = res.table.loc[res.table["metric"] == metric, "tpr"].nunique() <= 1
        best_text = ("the same TPR at every m" if flat else
                     f"best m = {ui.clip_label(best)}" if best is not None else "no best m")
        cols[2 * i].metric(f"{label} TPR", f"{row['tpr']:.0%}",
                           help=f"{int(row['n_detected'])} of {int(row['n_settings'])} settings detected; {best_text}")
        cols[2 * i + 1].metric(f"{label} mean p-value", format_p(row["mean_p"]))

    st.subheader("The table behind the chart")
    ui.show_table(res.table, key="sensitivity_table", name="sensitivity_by_clip",
                  headers={"tpr": "TPR"})
    with st.expander(f"Per setting at m = {ui.clip_label(s.clip)} ({n_settings} settings)"):
        per = res.per_setting[res.per_setting["clip"] == s.clip]
        ui.show_table(pd.DataFrame(per), key="sensitivity_settings", name="sensitivity_per_setting")
