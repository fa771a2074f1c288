"""Which estimator? The assumption tests of the loaded logs, each estimator's weights and verdict, and the
slate estimators against the exact truth of a stochastic-slate world (docs/diagnose.md, docs/slate.md)."""

from __future__ import annotations

import numpy as np
import streamlit as st

from dashboard import data, ui
from offeval_core.defaults import LEVEL
from offeval_core.formatting import format_number as num
from offeval_core.sanitize import escape_markdown
from offeval_core.slate.experiment import error_chart
from offeval_core.verdict_chart import verdict_figure
from offeval_core.verdicts import verdict_summary

CLICK_MODELS = {"independent": "position-based", "cascade": "cascade", "standard": "item-below-competes",
                "independent+cascade": "half position-based, half cascade"}
c = ui.ctx()
st.title("Which estimator?")
st.caption("Each offline estimator is unbiased only under some assumptions about how users browse. This page "
           "tests those assumptions on the loaded logs — each test with an effect size, a confidence interval "
           "and a p-value — and gives every estimator a verdict with its reason.")
if not ui.needs(c):
    ui.end_page()

with ui.controls():
    ui.init_control("which_alpha")
    alpha = st.select_slider("Significance level α of every check", options=[0.01, 0.05, 0.1], key="w_which_alpha")

with ui.guarded("Which estimator?"):
    policy = c.diagnosed_policy
    level = c.settings.level
    d = ui.with_progress("Testing the assumptions on the logs…", data.is_ready("diagnosis", c.key, c.reward,
                                                                                policy, c.settings.discount, alpha,
                                                                                level),
                         lambda: data.diagnosis(c.key, c.reward, policy, c.settings.discount, alpha, level))
    data.mark_ready("diagnosis", c.key, c.reward, policy, c.settings.discount, alpha, level)
    fired = [ch for ch in d.checks if ch.fires]
    verdicts = {v: [e.label.split(" (")[0] for e in d.estimators if e.verdict == v]
                for v in ("trust", "caution", "don't")}
    if fired:
        first = fired[0]
        take = (f"{len(fired)} of {len(d.checks)} assumptions are rejected at α = {alpha:g} on {c.reward} "
                f"for {d.policy or 'the logging policy'}: "
                f"{', '.join(ch.name for ch in fired)} — {first.effect_label} {num(first.effect, 3)} "
                f"[{num(first.low, 3)}, {num(first.high, 3)}].")
    else:
        untestable = [ch.name for ch in d.checks if not ch.identified]
        whom = f"on {c.reward} for {d.policy or 'the logging policy'}"
        if len(untestable) == len(d.checks):
            take = (f"None of the {len(d.checks)} assumptions can be tested {whom} (the reasons are below), so "
                    "none is rejected or confirmed; the verdicts below rest on the weights alone.")
        else:
            tested = len(d.checks) - len(untestable)
            take = (f"No assumption is rejected at α = {alpha:g} {whom}"
                    + (f" ({tested} of {len(d.checks)} testable; not testable: {', '.join(untestable)})"
                       if untestable else "")
                    + "; the verdicts below rest on the weights alone.")
    take += " " + verdict_summary(verdicts)
    if d.estimators:
        ui.show_figure(verdict_figure(d), key="which_verdicts", name="which_estimator", take=take)
    else:
        ui.takeaway(take)  # escaped by ui.takeaway
    if c.key.startswith("sim:"):
        st.caption("Simulated world: the simulator's item topics serve as the item categories of the "
                   "reward-interaction test.")
    cols = st.columns(3)
    for col, (v, names) in zip(cols, verdicts.items(), strict=True):
        col.metric(f"Verdict: {v}", len(names), help=escape_markdown(", ".join(names) or "none"))

    table = d.table()
    ui.show_table(table, key="which_table", name="which_estimator",
                  caption=f"Target policy {ui.md_escape(d.policy or '—')}, reward {ui.md_escape(d.reward)}. "
                          "Assumptions: each row is a statistical test (docs/diagnose.md), its estimate the effect "
                          "named in 'effect'; 'violated' when p < α. Estimators: the estimate is the value of the "
                          f"target policy (reward per session) with its {d.level:.0%} CI; ESS share = Kish effective sample "
                          "size / rows; the reason names the rule that set the verdict.",
                  kinds={"ESS share": "share", "p-value": "p"},
                  reasons={"ESS share": "an assumption test has no weights", "p-value": "an estimator is not a test, an untestable assumption has none"},
                  column_config={"row": st.column_config.TextColumn(width="medium"),
                                 "reason": st.column_config.TextColumn(width="large")})
    for ch in d.checks:
        st.markdown(f"- **{escape_markdown(ch.name)}** — {escape_markdown(ch.finding)}")

st.subheader("Slate estimators against the truth")
st.caption("A stochastic-slate world (6 items, 3 slots, Plackett-Luce policies) whose value is known exactly. "
           "Pick how users click; each estimator is run on independent logs and compared with the truth. "
           "Orange bars: bias larger than 4 standard errors.")
with ui.controls("Slate world"):
    for name in ("which_model", "which_n", "which_reps"):
        ui.init_control(name)
    behaviour = st.radio("Click model", list(CLICK_MODELS), key="w_which_model", horizontal=True,
                         format_func=CLICK_MODELS.get)
    n = st.select_slider("Sessions per log", options=[200, 500, 1000], key="w_which_n")
    reps = st.select_slider("Replications", options=[50, 100, 200], key="w_which_reps")

with ui.guarded("Slate world"):
    summary, truth = ui.with_progress(f"Running {reps} replications…", False,
                                      lambda: data.slate_experiment_result(behaviour, n, reps))
    biased = summary.loc[summary["z"].abs() > 4, "label"].tolist()
    best = summary.loc[summary["rmse"].idxmin()]
    take = (f"Lowest RMSE: {best['label']} ({num(best['rmse'])}); "
            + (f"biased here: {', '.join(biased)}." if biased else "no estimator is detectably biased here."))
    fig = error_chart(summary, truth=truth, title=f"{CLICK_MODELS[behaviour]} clicks, n = {n}, {reps} replications")
    ui.show_figure(fig, key="which_slate", name=f"slate_{behaviour}_{n}", take=take)
    ui.show_table(summary.assign(coverage=np.round(summary["coverage"], 3)).drop(columns=["estimator"]),
                  key="which_slate_table", name=f"slate_{behaviour}_{n}",
                  caption=f"bias ± bias_se over replications, z = bias / bias_se, coverage of the {LEVEL:.0%} "
                          "normal CI.")
