"""Candidates: every candidate policy's offline estimate and paired effect over the logging policy, side by side
(a forest plot), adjusted over the candidates, at one clip chosen by a documented rule, and which candidate to A/B
test next — for logs of candidates evaluated before any A/B test (offeval_core.analyses.candidates)."""

from __future__ import annotations

import streamlit as st

from dashboard import data, ui
from offeval_core.estimators import ESTIMATORS
from offeval_core.multiple import LABELS as ADJUST_LABELS

c = ui.ctx()
st.title("Candidates before an A/B test")
st.caption("Every candidate policy is estimated offline on the logging policy's sessions (the control arm, or every "
           "session when the logs hold no A/B test), next to its paired effect over the logging policy with its "
           "confidence interval. The candidates are tested at once, so the p-values are adjusted over them; all "
           "candidates are compared at one clip value, chosen by the rule under the chart.")
if not ui.needs(c, policy=True):
    ui.end_page()

s = c.settings
ds = c.dataset
candidates = data.candidate_policies(c.key)
copies = ds.targets.logging
if not candidates:
    st.error(f"These logs have no candidate besides the logging policy ({ui.md_escape(', '.join(copies))} "
             f"{'is' if len(copies) == 1 else 'are'} the logging policy): add one `rank__<policy>` or "
             "`target_propensity__<policy>` column per candidate.", icon=":material/error:")
    ui.end_page()
kinds = {ds.targets.kind(p) for p in candidates}

with ui.controls():
    a, b, r, p = st.columns([2.2, 2.2, 1.6, 1.6])
    ui.init_control("cand_adj")
    ui.init_control("cand_clip")
    adjust = a.selectbox("Multiple testing", list(ADJUST_LABELS), key="w_cand_adj", format_func=ADJUST_LABELS.get,
                         help="A candidate beats the logging policy when its one-sided p-value, adjusted over the "
                              "candidates, is at most the tail of the CI: Holm controls the chance of any false "
                              "winner, Benjamini-Hochberg the share of false winners")
    clip_rule = b.radio("Clip of the comparison", ["recommended", "sidebar"], key="w_cand_clip", horizontal=True,
                        format_func={"recommended": "recommended", "sidebar": "sidebar's m"}.get,
                        help="recommended: the least clipped of the candidates' own recommended clips (the rule of "
                             "the Clip tuning page), so every candidate's rule holds; sidebar: the Clip value m")
    ui.init_control("cand_rank")
    ui.init_control("cand_prop")
    rank_metric = r.selectbox("Rank policies", data.CANDIDATE_METRICS["rank"], key="w_cand_rank",
                              format_func=lambda k: ESTIMATORS[k].label, disabled="rank" not in kinds,
                              help="The estimator of candidates given by ranks (DCG estimates the online reward; "
                                   "KDD'24 Sec. 4)")
    prop_metric = p.selectbox("Propensity policies", data.CANDIDATE_METRICS["propensity"], key="w_cand_prop",
                              format_func=lambda k: ESTIMATORS[k].label, disabled="propensity" not in kinds,
                              help="The estimator of candidates given by propensities (Gilotte Sec. 3-4)")

args = (c.key, c.reward, s.discount, s.exposure, s.level, adjust, clip_rule, s.clip, rank_metric, prop_metric)
with ui.guarded("Candidates"):
    ready = data.is_ready("candidates", *args)
    what = (f"Tuning the clip of each of the {len(candidates)} candidates and comparing them (first time only)…"
            if clip_rule == "recommended" else "Comparing the candidates (first time only)…")
    res = ui.with_progress(what, ready, lambda: data.candidates_result(*args))
    data.mark_ready("candidates", *args)
    ui.show_figure(data.candidates_chart(*args), key="candidates", name="candidates", take=res.takeaway)
    st.caption(res.adjustment)
    st.info(f"**Clip of the comparison:** {ui.md_escape(res.clip_reason)}", icon=":material/content_cut:")

    k = st.columns(3)
    k[0].metric("Candidates", len(res.table), help=ui.md_escape(", ".join(map(str, res.table["policy"]))))
    k[1].metric("Beat the logging policy", int(res.table["beats_logging"].sum()),
                help=res.adjustment)
    k[2].metric("A/B test next", res.next_policy or "none",
                help="The candidate with the largest offline effect among those that beat the logging policy")

    st.subheader("Every candidate")
    ui.show_table(res.table, key="candidates_table", name=f"candidates_{c.reward}",
                  column_config={"relative_effect": st.column_config.NumberColumn("relative effect",
                                                                                  format="percent"),
                                 "p_value": st.column_config.NumberColumn("p (one-sided)", format="%.3g"),
                                 "p_adj": st.column_config.NumberColumn("adjusted p", format="%.3g")},
                  caption="Per candidate, largest effect first: the logging policy's and the candidate's offline "
                          "estimate on the same sessions with their CIs, the paired effect (candidate − logging) "
                          "with its CI, its one-sided p-value of H0 effect ≤ 0 and that p-value adjusted over the "
                          "candidates; beats_logging = adjusted p ≤ (1 − level) / 2.")
    if copies:
        st.caption(f"Not a candidate: {ui.md_escape(', '.join(copies))} — the logging policy (named like it, or "
                   "equal to it on every offline row; its effect is 0 by construction).")
    if ds.has_arms:
        st.markdown("These logs also hold an online A/B test: compare the offline decisions with its outcome on")
        ui.links(("decisions", "sensitivity"))
