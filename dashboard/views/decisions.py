"""Decisions: one box per A/B test, offline uplift CI vs online uplift CI, and the Table 3 style summary
per estimator (Gilotte et al. WSDM'18, Fig. 4/5, Table 3)."""

from __future__ import annotations

import math

import numpy as np
import streamlit as st

from dashboard import data, ui
from offeval_core.analyses import Variant, decision_figure
from offeval_core.analyses import variant_label as vlabel
from offeval_core.analyses.plan import PROPENSITY_METRICS, decision_estimators
from offeval_core.charts import DECISION_CAPTION
from offeval_core.estimators import ESTIMATORS
from offeval_core.formatting import format_number as num
from offeval_core.formatting import format_p
from offeval_core.multiple import LABELS as ADJUST_LABELS
from offeval_core.validation import format_clip, parse_clip

c = ui.ctx()
ss = st.session_state
st.title("Offline vs online decisions")
st.caption("Each A/B test is a box: its width is the offline uplift CI of the target policy over the logging "
           "policy (on control logs), its height the online uplift CI (treatment − control), its label the "
           "A/B test. " + DECISION_CAPTION)
if not ui.needs(c, policy=True, arms=True):
    ui.end_page()
experiments = list(c.dataset.experiments)
if len(experiments) < 2:
    st.warning(f"These logs hold a single experiment ({experiments[0]}): one A/B test makes one box, and "
               "precision, false-negative rate and correlation across tests need several. Load logs with an "
               "`experiment_id` column covering several A/B tests (or simulate a world on the Data page).",
               icon=":material/warning:")

s = c.settings
d_model, e_model = c.models
names = list(ESTIMATORS)
if c.dataset.is_moments:  # the importance-sampling family has its own reduce over the rows
    names = [n for n in names if data.estimator_family(n) != "importance"]
if c.propensity:  # the logged propensities: the importance family, max-capped, per session
    names = list(PROPENSITY_METRICS)
    st.caption(f"**{ui.md_escape(c.policy)}** is given by propensities: the estimators weight the logged rows by "
               "π_t / π_p; m is the cap c of the weights.")


def _to_text(name: str, clip: float) -> str:
    return f"{name}:{format_clip(clip)}"


def _from_text(t: str) -> tuple[str, float]:
    name, clip = t.rsplit(":", 1)
    return name, parse_clip(clip)


clips = list(dict.fromkeys([1.0, s.clip, math.inf]))
uncapped = ("is", "snips") if c.propensity else ()  # the same at every cap: offered once, at c = ∞
options = [_to_text(n, m) for n in names for m in clips if n not in uncapped or math.isinf(m)]
defaults = [_to_text(n, m) for n, _, _, m in decision_estimators(d_model, s.clip, exposure=e_model)]
# left at its default, the choice follows the sidebar's m (as a link without `estimators` does)
ui.chosen_or_default("estimators", "w_estimators", list(dict.fromkeys(t for t in defaults if t in options)),
                     options=options, allow_empty=False)


def _label(t: str) -> str:
    name, m = _from_text(t)
    return vlabel(Variant(name, d_model, e_model, m))


with ui.controls():
    a, d = st.columns([4.2, 1.9])
    b = st
    picked = a.multiselect("Estimators", options, key="w_estimators", format_func=_label,
                           help="Every estimator in the registry, at m = 1, the sidebar's m and ∞, with the "
                                "sidebar's D and D0. The first one is the reference for the relative CI size.")
    ui.init_control("dec_rel")
    relative = b.toggle("Relative uplift (%)", key="w_dec_rel")
    ui.init_control("dec_adj")
    adjust = d.selectbox("Multiple testing", list(ADJUST_LABELS), key="w_dec_adj", format_func=ADJUST_LABELS.get,
                         help="Decide on p-values adjusted over the A/B tests shown at once: Holm controls the "
                              "chance of any wrong decision, Benjamini-Hochberg the share of wrong ones among "
                              "the decisions. Each estimator is its own family; the online decisions are "
                              "adjusted over the same A/B tests.")
if c.dataset.is_moments:
    ui.raw_logs_notice("The importance-sampling estimators (IPS, SNIPS, NCIS…) are not in a moments file and "
                       "are left out of the choices; each")
if not picked:
    st.warning("Choose at least one estimator in the page controls.", icon=":material/warning:")
    ui.end_page()

ests = tuple((n, d_model, e_model, m) for n, m in map(_from_text, picked))
with ui.guarded("Decision boxes"):
    ui.get_moments(c)
    imp = [e for e in ests if data.estimator_family(e[0]) == "importance"]
    if imp and not c.propensity and not data.is_ready("importance", c.key, c.reward, c.policy, s.discount,
                                                      s.exposure):
        ui.with_progress("Computing importance-sampling moments (first time only)…", False,
                         lambda: data.importance_moments(c.key, c.reward, c.policy, s.discount, s.exposure))
    res = data.decision_result(c.key, c.reward, c.policy, ests, s.level, relative, adjust)
    labels = list(res.estimators)
    ui.init_control("dec_est", res.recommended or labels[0], options=labels)
    holder = st.container()  # presenting: the chart first, the estimator picker under it
    picker = st.container() if c.present else holder
    est = picker.segmented_control("Boxes of", labels, key="w_dec_est", required=True) if len(labels) > 1 \
        else labels[0]
    fig = decision_figure(res, estimator=est)
    with holder if c.present else st.container():
        # the headline is about the estimator the chart shows; the comparison of the estimators follows
        compare = len(labels) > 1 and not (res.takeaway.startswith(f"{est} takes") and "; " not in res.takeaway)
        take = res.estimator_takeaway(est) + (f" Across the {len(labels)} estimators: {res.takeaway}" if compare else "")
        event = ui.show_figure(fig, key="decisions", name="decision_boxes", take=take, select=True)
        st.caption(res.adjustment)
    boxes = res.boxes[res.boxes["estimator"] == est]
    points = getattr(getattr(event, "selection", None), "points", None) or []
    clicked = (points[0].get("x"), points[0].get("y")) if points else None
    if clicked and clicked != ss.get("_dec_clicked"):
        # a newly clicked box centre selects that A/B test (a stale selection does not override the picker)
        dist = np.hypot(boxes["offline_effect"] - clicked[0], boxes["online_effect"] - clicked[1])
        if dist.notna().any():
            ss["w_experiment_pick"] = str(boxes.iloc[int(np.nanargmin(dist.to_numpy()))]["experiment_id"])
    ss["_dec_clicked"] = clicked

    st.subheader("One A/B test")
    tests = [str(x) for x in dict.fromkeys(boxes["experiment_id"])]
    ui.page_default("experiment", tests[0])
    pick = ss.pop("w_experiment_pick", None) or (ss.get("w_experiment") if ss.get("w_experiment") in tests
                                                 else tests[0])
    ss["w_experiment"] = pick
    exp = st.selectbox("A/B test (or click its centre point in the chart)", tests, key="w_experiment")
    one = res.boxes[res.boxes["experiment_id"].astype(str) == exp]
    row = one[one["estimator"] == est].iloc[0]
    unit = " %" if relative else ""
    lv = st.columns([1, 1, 1.7, 1.3])
    lv[0].metric("Offline estimate", num(row["offline_target"]),
                 help=f"{ui.md_escape(c.policy)}, {ui.md_escape(est)} on the control logs of {ui.md_escape(exp)}; {res.level:.0%} CI [{num(row['offline_target_low'])}, "
                      f"{num(row['offline_target_high'])}]")
    lv[1].metric("Online treatment arm", num(row["online_treatment"]),
                 help=f"mean reward per session of the treatment arm of {ui.md_escape(exp)}; {res.level:.0%} CI "
                      f"[{num(row['online_treatment_low'])}, {num(row['online_treatment_high'])}]")
    covered = row["offline_target_low"] <= row["online_treatment"] <= row["offline_target_high"]
    lv[2].metric(f"Offline {res.level:.0%} CI", f"[{num(row['offline_target_low'])}, {num(row['offline_target_high'])}]",
                 help="The offline estimate's confidence interval, next to the online treatment mean")
    lv[3].metric("Covers the online mean", "yes" if covered else "no",
                 help="Whether the offline CI of the target's estimate contains the treatment arm's online mean")
    ui.below_zero_note(c, float(row["offline_target_low"]))
    m = st.columns([1, 1, 1.6, 1])
    m[0].metric("Offline uplift", f"{num(row['offline_effect'])}{unit}",
                help=f"{res.level:.0%} CI [{num(row['offline_low'])}, {num(row['offline_high'])}]")
    m[1].metric("Online uplift", f"{num(row['online_effect'])}{unit}",
                help=f"{res.level:.0%} CI [{num(row['online_low'])}, {num(row['online_high'])}]; "
                     f"two-sided p = {format_p(row['online_p'])}")
    m[2].metric("Decisions (offline / online)", f"{str(row['offline_decision'])[:3]} / {str(row['online_decision'])[:3]}",
                help="offline / online decision: pos(itive), neg(ative) or neu(tral)")
    m[3].metric("Verdict", str(row["category"]))
    ui.show_table(one.drop(columns=["colour"]), key="decision_one", name=f"decision_{exp}",
                  kinds={"offline_decision": "text", "online_decision": "text"})

    st.subheader("Estimator summary (Table 3 style)")
    ui.show_table(res.summary, key="decision_summary", name="decision_summary",
                  column_config={"precision": st.column_config.NumberColumn(format="percent"),
                                 "fnr": st.column_config.NumberColumn("false-negative rate", format="percent"),
                                 "agreement": st.column_config.NumberColumn(format="percent"),
                                 "ci_size": st.column_config.NumberColumn("relative CI size", format="%.2f")},
                  caption=f"Relative CI size: mean CI width relative to {res.reference}.")
    with st.expander("Every box"):
        ui.show_table(res.boxes.drop(columns=["colour"]), key="decision_boxes", name="decision_boxes")
