"""Correlation: offline vs online across days per (experiment, reward, policy) (KDD'24 Sec. 6.1, Table 2),
with a drill-down into the day-by-day series of one row."""

from __future__ import annotations

import math

import streamlit as st

from dashboard import data, ui
from offeval_core.analyses import Variant
from offeval_core.analyses import variant_label as vlabel
from offeval_core.analyses.plan import PROPENSITY_CURVES, correlation_variants
from offeval_core.discounts import has_cutoff
from offeval_core.estimators import ESTIMATORS
from offeval_core.importance.weights import PROPENSITY
from offeval_core.sanitize import escape_markdown
from offeval_core.validation import format_clip, parse_clip

c = ui.ctx()
ss = st.session_state
st.title("Offline-online correlation")
st.caption("Each cell correlates, across the days of one experiment, the online mean reward per session of a "
           "policy's arm (R₀: control, Rₜ: treatment) with the offline estimate of that policy on the same day's "
           "control logs (KDD'24 Table 2). † p < 0.05; bold: best variant of the row.")
if not ui.needs(c, policy=True, arms=True):
    ui.end_page()
days = c.dataset.days
if len(days) < 3:
    st.error(f"These logs cover {len(days)} day(s); a correlation across days needs at least 3 (4 or more to be "
             "informative). Load logs that span several days per experiment, or simulate a world with more "
             "days on the Data page.", icon=":material/error:")
    ui.end_page()
s = c.settings
st.caption(f"Rₜ = **{ui.md_escape(c.policy)}** (the sidebar's target policy), taken to be the policy that served the "
           "treatment arm; pick another in the sidebar.")


def _to_text(v: Variant) -> str:
    return f"{v.metric}:{v.discount}:{format_clip(v.clip)}"


def _from_text(t: str) -> Variant:
    metric, rest = t.split(":", 1)  # an estimator name has no ':', a model may (exponential:0.85, table:name)
    model, clip = rest.rsplit(":", 1)
    return Variant(metric, model, model, parse_clip(clip))


models = list(dict.fromkeys(["log2", "pbm", *(() if has_cutoff(s.discount) else (s.discount,))]))
if has_cutoff(s.discount) and not c.propensity:
    st.caption(f"The sidebar's D = {ui.md_escape(s.discount)} has a cut-off, which an exposure model D0 cannot have "
               "(logged items were viewed); the table's variants take D = D0, so it is not among them.")
clip_opts = list(dict.fromkeys([1.0, s.clip, math.inf]))
if c.propensity:  # the logged propensities: one weight model, the cap c of the importance estimators
    models = [PROPENSITY]
if c.dataset.is_moments:  # only the variants the moments file holds (D = D0 = model)
    g = c.dataset.file_moments.grid
    models = [mo for mo in models if mo in g.discounts and mo in g.exposures]
    clip_opts = [cl for cl in clip_opts if cl in g.clips]
    if not models:
        ui.raw_logs_notice(f"The moments file holds no variant with D = D0 (D ∈ {', '.join(g.discounts)}, D0 ∈ "
                           f"{', '.join(g.exposures)}); the correlation table compares such variants, so it")
        ui.end_page()
metric_names = list(PROPENSITY_CURVES) if c.propensity else \
    [k for k in ESTIMATORS if data.estimator_family(k) != "importance"]
defaults = [_to_text(v) for v in correlation_variants(c.models[0], s.clip)]
candidates = [Variant(me, mo, mo, float(cl)) for mo in models for me in metric_names for cl in clip_opts
              if not (me in ("is", "snips") and cl != math.inf)]  # IS and SNIPS are uncapped: offered once
options = list(dict.fromkeys(_to_text(v) for v in candidates))
ui.chosen_or_default("variants", "w_variants", [t for t in defaults if t in options], options=options, allow_empty=False)

with ui.controls():
    a, b = st.columns([4, 1])
    picked = a.multiselect("Metric variants (columns)", options, key="w_variants",
                           format_func=lambda t: vlabel(_from_text(t)),
                           help="C = raw labels (m = 1); Q̂ = labels de-biased by 1/D0 (m = ∞), or clipped at "
                                "the sidebar's m")
    method = b.selectbox("Correlation", ["pearson", "kendall", "spearman"], key="w_method",
                         format_func=str.capitalize)
    ui.init_control("corr_full")
    full = st.toggle("Every experiment (the full heatmap)", key="w_corr_full",
                     help="Off: one row per metric variant, a dot per (experiment, policy) with its median — "
                          "readable at any size. On: the heatmap of every experiment and policy.")
if not picked:
    st.warning("Choose at least one metric variant in the page controls.", icon=":material/warning:")
    ui.end_page()

variants = tuple(tuple(_from_text(t)) for t in picked)
pol = c.policy
with ui.guarded("Correlation"):
    if c.propensity:
        ui.get_moments(c)
    else:
        for model in dict.fromkeys(v[1] for v in variants):
            ui.get_moments(c, discount=model, exposure=model)
    res = data.correlation_result(c.key, c.reward, variants, method, pol)
    for w in res.warnings:
        st.warning(w, icon=":material/warning:")
    take = ui.policy_headline(pol, res.takeaway)
    args = (c.key, c.reward, variants, method, pol)
    if full:  # every experiment and policy: the heatmap keeps a row height that stays readable
        ui.show_figure(data.correlation_chart(*args), key="correlation", name="correlation", take=take, tall=True)
    else:
        ui.show_figure(data.correlation_summary_chart(*args), key="correlation_summary", name="correlation_summary",
                       take=take)
    if not c.present or st.checkbox("Show the Table 2 layout", key="show_corr_html"):
        st.markdown("**The Table 2 layout** (r and p per experiment and policy)")
        st.html(data.correlation_html(*args))
    if not c.present:
        with st.expander("Tidy table (one row per experiment, reward, policy and variant)"):
            ui.show_table(res.table, key="correlation_table", name="offline_online_correlation")

    st.subheader("Table 2 across clip values")
    if c.propensity:
        st.info(f"Table 2 across clip values compares two position-bias models of DCG (the learnt PBM and log2) at "
                f"every clip m; **{ui.md_escape(pol)}** is given by propensities, whose weights π_t / π_p need no "
                "position-bias model, so there is nothing to compare. The estimators above vary the cap c; the "
                "Sensitivity and Clip tuning pages show each cap.", icon=":material/info:")
        ui.links(("sensitivity", "clip-tuning"))
    elif c.dataset.is_moments and not all(mo in g.discounts and mo in g.exposures for mo in ("pbm", "log2")):
        st.info("Comparing DCG (pbm, ·) with DCG (log2, ·) at every clip value needs both models in the moments "
                f"file (D = D0 = pbm and D = D0 = log2); it holds D ∈ {{{escape_markdown(', '.join(g.discounts))}}}, "
                f"D0 ∈ {{{escape_markdown(', '.join(g.exposures))}}}. Reduce the logs with both models, or load the logs themselves on "
                "the Data page.", icon=":material/info:")
    else:
        by_clip = data.correlation_clip_result(c.key, c.reward, "pbm", method, pol)
        ui.show_figure(data.correlation_clip_chart(c.key, c.reward, "pbm", method, s.clip, pol),
                       key="correlation_clip", name=f"table2_by_clip_{c.reward}",
                       take=ui.policy_headline(pol, by_clip.takeaway))
        st.caption("Each point correlates the target policy's daily offline DCG (control logs) with its arm's "
                   "online reward over every (experiment, day): C = raw labels at m = 1, Q̂ = labels de-biased by "
                   "min(m, 1/D0). A star marks a clip where the learnt PBM beats both log2 variants.")
        with st.expander("Pooled correlation per clip value"):
            ui.show_table(by_clip.table, key="correlation_clip_table", name=f"table2_by_clip_{c.reward}")

    st.subheader("Drill-down: day by day")
    rows = res.table[["experiment_id", "reward", "policy", "policy_label"]].drop_duplicates()
    labels = {f"{r.experiment_id} · {r.reward} · {r.policy_label}": (r.experiment_id, r.reward, r.policy)
              for r in rows.itertuples()}
    ui.page_default("experiment", str(next(iter(labels.values()))[0]))
    row_default = next((k for k, v in labels.items() if str(v[0]) == str(s.experiment)), next(iter(labels)))
    ui.page_default("corr_row", row_default)  # the first row of the experiment in the link, else the first
    if ss.get("w_corr_row") not in labels:
        ss["w_corr_row"] = row_default
    row = st.selectbox("Row", list(labels), key="w_corr_row")
    exp, reward, policy = labels[row]
    ss["w_experiment"] = str(exp)
    series = res.series(exp, reward, policy)
    ui.show_figure(data.correlation_series_chart(c.key, c.reward, variants, method, exp, reward, policy, pol),
                   key="correlation_series", name=f"series_{exp}_{reward}",
                   take=res.series_takeaway(exp, reward, policy))
    ui.show_table(series, key="correlation_series_table", name=f"series_{exp}_{reward}_{policy}")
