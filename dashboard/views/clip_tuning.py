"""Clip tuning: bias bound, variance, ESS and clipped share vs the clip value m, the recommended m, and
every estimate at the sidebar's m (Gilotte et al. WSDM'18 Sec. 4.2-4.3, Fig. 2; KDD'24 Sec. 6.2)."""

from __future__ import annotations

import math

import streamlit as st

from dashboard import data, ui
from offeval_core.analyses.plan import PROPENSITY_METRICS
from offeval_core.estimators import ESTIMATORS

c = ui.ctx()
ss = st.session_state
st.title("Clip tuning")
st.caption("Clipping the de-biased labels at m trades bias for variance: small m = low variance but biased "
           "towards the logging policy, m = ∞ = unbiased but noisy. Move **Clip value m** in the sidebar: the "
           "chart's marker and every number on this page follow.")
if not ui.needs(c, policy=True):
    st.stop()

s = c.settings
d_model, e_model = c.models
label = "CIS" if c.propensity else "DCG"  # the clipped estimator: capped IS for a propensity policy (cap c = m)
if c.propensity:
    st.caption(f"**{ui.md_escape(c.policy)}** is given by propensities: the clipped estimator is capped importance "
               "sampling (CIS), the weights π_t / π_p capped at c = m (Gilotte Sec. 4.2, Fig. 2).")
with ui.controls():
    ui.init_control("clip_rule")
    rule = st.radio("Recommendation rule", ["slope", "mse"], key="w_clip_rule", horizontal=True,
                    format_func={"slope": "SLOPE / Lepski (CI overlap)", "mse": "worst-case MSE"}.get)


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
    st.stop()

with ui.guarded("Clip tuning"):
    ui.get_moments(c)
    res = data.clip_tuning_result(c.key, c.reward, c.policy, d_model, e_model, s.level, rule)
    t = res.table.set_index("clip")
    m = s.clip
    row = t.loc[m]
    recommendation = data.clip_recommendation(c.key, c.reward, c.policy, d_model, e_model, s.level, rule)
    rec = recommendation.clip
    verdict = ("is the recommended value" if m == rec else
               f"recommended: m = {ui.clip_label(rec)}")
    take = (f"At m = {ui.clip_label(m)} the {label} estimate of {c.policy} is {row['estimate']:.4g} ± "
            f"{row['ci_high'] - row['estimate']:.2g}, with a bias of at most {row['bias_bound']:.3g} and an "
            f"effective sample of {row['ess_share']:.0%} of the rows — {verdict}.")
    online = data.online_arms(c.key, c.reward, d_model, e_model, s.level)
    if online is not None and online.treatment is not None:
        on = online.treatment
        inside = row["ci_low"] <= on.value <= row["ci_high"]
        take += (f" Online, the treatment arm measured {on.value:.4g} [{on.ci.low:.4g}, {on.ci.high:.4g}]: "
                 f"{'inside' if inside else 'outside'} the offline {s.level:.0%} CI [{row['ci_low']:.4g}, "
                 f"{row['ci_high']:.4g}].")
    fig = data.clip_tuning_chart(c.key, c.reward, c.policy, d_model, e_model, s.level, rule, m)
    ui.show_figure(fig, key="clip_tuning", name="clip_tuning", take=take)

    k = st.columns(5)
    k[0].metric("Estimate at m", f"{row['estimate']:.4g}",
                delta=f"{row['estimate'] - t.loc[math.inf, 'estimate']:+.3g} vs m = ∞" if math.inf in t.index and m != math.inf else None,
                delta_color="off", help=f"{s.level:.0%} CI [{row['ci_low']:.4g}, {row['ci_high']:.4g}] over the "
                                        "control arm's sessions (every session without arms)")
    k[1].metric("Std. error", f"{row['stderr']:.3g}")
    k[2].metric("Bias bound", f"{row['bias_bound']:.3g}", help="r_max × clipped target exposure per session")
    k[3].metric("ESS share", f"{row['ess_share']:.0%}", help="Kish effective sample size / rows")
    k[4].metric("Rows clipped", f"{row['clipped_rows']:.1%}")
    if online is not None and online.treatment is not None:  # the estimate next to what the A/B tests measured
        on = online.treatment
        lv = st.columns([2.2, 1.5, 1.5])
        lv[0].metric(f"Offline {s.level:.0%} CI", f"[{row['ci_low']:.4g}, {row['ci_high']:.4g}]",
                     help=f"The {label} estimate's confidence interval at m = {ui.clip_label(m)}")
        lv[1].metric("Online treatment arm", f"{on.value:.4g}",
                     help=f"Mean reward per session of the treatment arm, every A/B test pooled; {s.level:.0%} CI "
                          f"[{on.ci.low:.4g}, {on.ci.high:.4g}]")
        lv[2].metric("Covers the online mean", "yes" if row["ci_low"] <= on.value <= row["ci_high"] else "no",
                     help="Whether the offline CI contains the treatment arm's online mean (the treatment arm is "
                          f"taken to be served by {ui.md_escape(c.policy)})")
    st.info(f"**Recommended {recommendation.reason}**", icon=":material/lightbulb:")
    with st.expander("How the chart's rule chose (the page control)"):
        st.markdown(res.rule_text)

    _estimates(m)
    st.subheader("The table behind the chart")
    ui.show_table(res.table, key="clip_table", name="clip_tuning_table")
