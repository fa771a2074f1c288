"""Clip tuning: bias bound, variance, ESS and clipped share vs the clip value m, the recommended m, and
every estimate at the sidebar's m (Gilotte et al. WSDM'18 Sec. 4.2-4.3, Fig. 2; KDD'24 Sec. 6.2)."""

from __future__ import annotations

import math

import streamlit as st

from dashboard import clip_choice, data, ui
from dashboard.data.page_defaults import CLIP_RULE
from offeval_core.analyses.plan import PROPENSITY_METRICS
from offeval_core.estimators import ESTIMATORS
from offeval_core.formatting import format_number as num
from offeval_core.formatting import format_share
from offeval_core.sanitize import escape_markdown

c = ui.ctx()
ss = st.session_state
st.title("Clip tuning")
st.caption("Clipping the de-biased labels at m trades bias for variance: small m = low variance but biased "
           "towards the logging policy, m = ∞ = unbiased but noisy. Move **Clip value m** in the sidebar: the "
           "chart's marker and every number on this page follow.")
if not ui.needs(c, policy=True):
    ui.end_page()

s = c.settings
d_model, e_model = c.models
label = "CIS" if c.propensity else "DCG"  # the clipped estimator: capped IS for a propensity policy (cap c = m)
if c.propensity:
    st.caption(f"**{ui.md_escape(c.policy)}** is given by propensities: the clipped estimator is capped importance "
               "sampling (CIS), the weights π_t / π_p capped at c = m (Gilotte Sec. 4.2, Fig. 2).")
with ui.controls():
    ui.init_control("clip_rule")
    rule = st.radio("Compare with a rule alone", ["slope", "mse"], key="w_clip_rule", horizontal=True,
                    format_func={"slope": "SLOPE / Lepski (CI overlap)", "mse": "worst-case MSE"}.get,
                    help="What one rule would choose on its own, explained under the recommendation; the "
                         "recommendation (the chart's line, the sidebar, every page) is always the one rule")


def _estimates(m: float) -> None:
    st.subheader(f"Every estimate of {c.policy} at m = {ui.clip_label(m)}")
    metrics = (PROPENSITY_METRICS if c.propensity
               else tuple(k for k in ESTIMATORS if data.estimator_family(k) != "importance"))
    est = data.estimates_at(c.key, c.reward, c.policy, d_model, e_model, m, s.level, metrics)
    has_inf = not (c.dataset.is_moments and math.inf not in c.dataset.file_moments.grid.clips)
    if has_inf:  # a moments file reduced without m = ∞ has nothing to compare with
        base = data.estimates_at(c.key, c.reward, c.policy, d_model, e_model, math.inf, s.level, metrics)
        if "effect" in est and "effect" in base:
            est = est.assign(effect_at_inf=base["effect"].to_numpy())
    ui.show_table(est, key="estimates_at_m", name=f"estimates_at_m_{ui.clip_label(m)}",
                  caption="Per A/B test: logging and target estimates on control logs (the target's with its CI), "
                          "the paired offline effect with its CI and one-sided p, the online arms' means and "
                          "effect; effect_at_inf = the unclipped effect for comparison.")


if c.dataset.is_moments:  # the weight diagnostics read rows; the estimates at m are exact from the moments
    ui.raw_logs_notice("The clip-tuning chart and recommendation (bias bound, ESS share and clipped rows come "
                       "from the per-row importance weights)")
    with ui.guarded("Estimates"):
        _estimates(s.clip)
    ui.end_page()

with ui.guarded("Clip tuning"):
    ui.get_moments(c)
    res = data.clip_tuning_result(c.key, c.reward, c.policy, d_model, e_model, s.level, rule)
    t = res.table.set_index("clip")
    m = s.clip
    row = t.loc[m]
    recommendation = data.clip_recommendation(c.key, c.reward, c.policy, d_model, e_model, s.level, CLIP_RULE)
    rec = recommendation.clip
    verdict = ("is the recommended value" if m == rec else
               f"recommended: m = {ui.clip_label(rec)}")
    take = (f"At m = {ui.clip_label(m)} the {label} estimate of {c.policy} is {num(row['estimate'])} ± "
            f"{num(row['ci_high'] - row['estimate'], 2)}, "
            + ("unbiased (nothing is clipped)" if row["bias_bound"] == 0 else
               f"with a bias of at most {num(row['bias_bound'], 3)}") + " and with an "
            f"effective sample of {format_share(row['ess_share'], 2)} of the rows — {verdict}.")
    online = data.online_arms(c.key, c.reward, d_model, e_model, s.level, c.policy)
    if online is not None and online.treatment is not None:
        on = online.treatment
        inside = row["ci_low"] <= on.value <= row["ci_high"]
        take += (f" Online, the treatment arm measured {num(on.value)} [{num(on.ci.low)}, {num(on.ci.high)}]: "
                 f"{'inside' if inside else 'outside'} the offline {s.level:.0%} CI [{num(row['ci_low'])}, "
                 f"{num(row['ci_high'])}].")
    fig = data.clip_tuning_chart(c.key, c.reward, c.policy, d_model, e_model, s.level, rule, m)
    ui.show_figure(fig, key="clip_tuning", name="clip_tuning", take=take)

    k = st.columns(5)
    k[0].metric("Estimate at m", num(row["estimate"]),
                delta=f"{num(row['estimate'] - t.loc[math.inf, 'estimate'], 3, signed=True)} vs m = ∞"
                if math.inf in t.index and m != math.inf else None,
                delta_color="off", help=f"{s.level:.0%} CI [{num(row['ci_low'])}, {num(row['ci_high'])}] over the "
                                        "control arm's sessions (every session without arms)")
    k[1].metric("Std. error", num(row["stderr"], 3))
    k[2].metric("Bias bound", num(row["bias_bound"], 3), help="r_max × clipped target exposure per session")
    k[3].metric("ESS share", format_share(row["ess_share"], 2), help="Kish effective sample size / rows")
    k[4].metric("Rows clipped", format_share(row["clipped_rows"]))
    if online is not None and online.treatment is not None:  # the estimate next to what the A/B tests measured
        on = online.treatment
        lv = st.columns([2.2, 1.5, 1.5])
        lv[0].metric(f"Offline {s.level:.0%} CI", f"[{num(row['ci_low'])}, {num(row['ci_high'])}]",
                     help=f"The {label} estimate's confidence interval at m = {ui.clip_label(m)}")
        lv[1].metric("Online treatment arm", num(on.value),
                     help=f"Mean reward per session of the treatment arm, every A/B test pooled; {s.level:.0%} CI "
                          f"[{num(on.ci.low)}, {num(on.ci.high)}]")
        lv[2].metric("Covers the online mean", "yes" if row["ci_low"] <= on.value <= row["ci_high"] else "no",
                     help="Whether the offline CI contains the treatment arm's online mean (the treatment arm is "
                          f"taken to be served by {ui.md_escape(c.policy)})")
        ui.below_zero_note(c, float(row["ci_low"]))
    st.info(f"**Recommended {escape_markdown(recommendation.reason)}**", icon=":material/lightbulb:")
    if rec != m:
        st.button(f"Use the recommended m = {ui.clip_label(rec)}", key="w_use_recommended_page",
                  on_click=clip_choice.use_clip, args=(rec,), icon=":material/content_cut:",
                  help="Sets the sidebar's clip value m (and the link) to the recommendation; every page follows")
    with st.expander(f"What the {'SLOPE / Lepski' if rule == 'slope' else 'worst-case MSE'} rule alone chooses"):
        st.markdown(res.rule_text)

    _estimates(m)
    st.subheader("The table behind the chart")
    ui.show_table(res.table, key="clip_table", name="clip_tuning_table")
