"""Method: the assumptions of KDD'24 Sec. 4 as a checklist for the loaded data, the estimator definitions
(read from the registry) and the references."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from dashboard import data, ui
from dashboard.state import PAGE_CONTROLS
from offeval_core.estimators import ESTIMATORS

c = ui.ctx()
st.title("Method")
st.caption("When is an offline number a trustworthy forecast of the online A/B result? DCG with de-biased labels "
           "is an unbiased importance-sampling estimator of the online reward per session under five "
           "assumptions (Jeunen et al., KDD'24, Sec. 4, Eq. 4-9).")

logs = c.logs
summary = c.dataset.summary if c.dataset else None
broken: set[str] = set()
if c.dataset is not None and c.key.startswith("sim:"):
    spec = data.parse_sim_spec(c.key[4:])
    broken = {k for k, v in spec["overrides"].items() if v}


def _gaps() -> str:
    return next((n for n in (summary.notes if summary else ()) if "gaps" in n), "")


st.header("Assumptions (KDD'24 Sec. 4)")
checks = [
    ("1 · Sessions are independent", "Asm. 1: the reward in one session does not depend on the rankings shown in "
     "other sessions.",
     "Holds when sessions are separate visits; breaks with feedback loops (the user's later feed depends on "
     "earlier rewards) — then treat the problem as reinforcement learning.", None),
    ("2 · Position-based viewing", "Asm. 2: the probability of viewing rank r depends only on r: P(V | R).",
     "The learnt curve on the Data page is this P(V | R). It breaks under cascade browsing (users stop after a "
     "satisfying item) or when position bias differs between user groups.",
     "cascade" in broken or "contextual_position_bias" in broken or bool(_gaps())),
    ("3 · Rewards independent across ranks", "Asm. 3: an item's reward does not depend on the other items shown.",
     "Breaks with diversity / fatigue effects (two similar videos in a row). Then per-item labels do not add "
     "up to the session reward.", "reward_interactions" in broken),
    ("4 · Examination hypothesis", "Asm. 4 (Eq. 4): P(C | x, a, r) = P(Q | x, a) · P(V | r), so Q̂ = C / P(V | R) "
     "de-biases a label.",
     "Only viewed items are logged, so a logged row means V = 1 and the label is C; the de-biasing weight is "
     "1 / D0(rank), clipped at m.", None),
    ("5 · Full support", "Asm. 5 (Eq. 7): every item the target policy would expose had non-zero exposure "
     "under the logging policy.",
     "With a learnt PBM the floor keeps weights finite, but items the logger never showed deep enough leave "
     "the estimator blind to them: clipping and a cut-off (e.g. log2@10) are the practical guard.",
     "support_depth" in broken),
]
HOW_TO_CHECK = {
    "1": "a holdout of users whose feeds never depend on earlier rewards, or a test of carry-over between "
         "consecutive sessions of the same user",
    "2": "position-bias curves learnt separately per segment (they should coincide) and the share of sessions "
         "that stop right after a reward (high under cascade browsing)",
    "3": "the reward of an item as a function of the rewards above it in the same session (flat when rewards "
         "do not interact)",
    "4": "a randomised swap experiment (RandPair / intervention harvesting) that measures P(V | R) directly",
    "5": "the share of the target policy's exposure on ranks the logging policy never reached (0 under full "
         "support)",
}
# the tests of `offeval diagnose` (docs/diagnose.md) that bear on each assumption; 1 and 4 have none on logs
ALPHA = PAGE_CONTROLS["which_alpha"].default  # the Which estimator? page's default: the same cached diagnosis
TESTED_BY = {"2": ("cascade", "context-dependent position bias"), "3": ("reward interaction",), "5": ("support",)}
diag = None
if logs is not None and c.reward:
    policy = c.diagnosed_policy
    ready = data.is_ready("diagnosis", c.key, c.reward, policy, c.settings.discount, ALPHA, c.settings.level)
    if ready or st.button("Test the assumptions on these logs (a few seconds, once per dataset)",
                          key="w_method_diagnose"):
        with ui.guarded("Assumption tests"):
            diag = ui.with_progress("Testing the assumptions on the logs…", ready,
                                    lambda: data.diagnosis(c.key, c.reward, policy, c.settings.discount, ALPHA,
                                                           c.settings.level))
            data.mark_ready("diagnosis", c.key, c.reward, policy, c.settings.discount, ALPHA, c.settings.level)
st.caption(f"An assumption shows a tick only when a test on the loaded data (the Which estimator? page, α = {ALPHA:g}, "
           f"reward {ui.md_escape(c.reward or '—')}) finds no evidence against it, and a cross when the test "
           "rejects it; an assumption without a test on logs reads “assumed, not checked”, with what would check "
           "it. A simulated world built with a switch that breaks one says so.")


def _tested(number: str) -> str | None:
    """The status line from the diagnosis, or None when no test applies (or none was run)."""
    if diag is None or number not in TESTED_BY:
        return None
    tests = [diag.check(name) for name in TESTED_BY[number]]
    if not all(t.identified for t in tests):
        return None
    fired = [t for t in tests if t.fires]
    if fired:
        return (":material/cancel: **rejected on these logs** — "
                + "; ".join(f"{t.name}: {ui.md_escape(t.finding)}" for t in fired))
    return (":material/check_circle: **checked: no evidence against it on these logs** — "
            + "; ".join(f"{t.name} p = {t.p_value:.2g}" for t in tests))


for title, what, meaning, is_broken in checks:
    status = (":material/cancel: **broken in this simulated world**" if is_broken is True and broken else
              _tested(title[0]) or
              (":material/warning: **check: the logs show a sign of trouble**" if is_broken else
               ":material/radio_button_unchecked: **assumed, not checked** — would be checked by "
               + HOW_TO_CHECK[title[0]]))
    with st.container(border=True):
        st.markdown(f"#### {title}  \n{status}")
        st.markdown(what)
        st.caption(meaning)
        if title.startswith("2") and _gaps():
            st.warning(_gaps(), icon=":material/warning:")
if summary is not None:
    st.caption(f"Your data: {summary.sessions:,} sessions, session length {summary.length_text()}; "
               f"{len(summary.policies)} target polic{'y' if len(summary.policies) == 1 else 'ies'}.")

st.header("Assumption holds vs assumption broken (simulated)")
st.caption("On small simulated worlds with an exact ground truth: DCG (pbm, Q̂, m = ∞) of five policies against "
           "the truth, per (experiment, day), with each assumption intact and broken (same seed, so the same "
           "users, items and contexts; only the switch differs). Seeds 0 and 1, reward like.")
with ui.guarded("Assumption contrast"):
    if data.is_ready("assumption_contrast") or st.button("Compute the contrast (about 30 s, once per server)",
                                                         key="w_method_contrast"):
        from offeval_core.analyses.assumptions import SWITCHES, contrast_figure

        # per seed one world with every assumption intact and one per switch (heldout.assumption_contrast_result)
        res = ui.with_progress(f"Simulating {2 * (1 + len(SWITCHES))} small worlds with and without each switch…",
                               data.is_ready("assumption_contrast"), data.assumption_contrast_result)
        ui.show_figure(contrast_figure(res), key="assumption_contrast", name="assumption_contrast",
                       take=res.takeaway)
        ui.show_table(res.summary, key="assumption_contrast", name="assumption_contrast",
                      caption="Per switch and world: (seed, policy) rows, share whose relative-bias CI excludes 0, "
                              "mean |relative bias|, mean CI coverage of the truth.")

st.header("Estimators")
st.markdown(
    "Per session τ, target policy R, target discount D, exposure model D0 of the logged ranks, clip m ≥ 1:\n\n"
    "- de-biased, clipped label: ℓᵢ = cᵢ · min(m, 1 / D0(rᵢ)) (m = 1: raw labels C; m = ∞: Q̂ = C / D0)\n"
    "- DCG_τ = Σᵢ ℓᵢ · D(R(i)) — KDD'24 Eq. 9 with the clipping of Sec. 6.2\n"
    "- nDCG_τ = DCG_τ / iDCG_τ with iDCG_τ = Σⱼ ℓ₍ⱼ₎ · D(j) over the labels sorted in decreasing order; "
    "sessions with iDCG_τ = 0 count 0\n"
    "- the metric of a policy is the mean over sessions; the offline effect of Rₜ over R₀ is the mean "
    "per-session paired difference on the same control-arm sessions, with a normal CI\n"
    "- importance-sampling family (Gilotte et al. Sec. 4-5): weights w = D(R(i)) / D0(rᵢ) or logged "
    "propensity ratios, capped at c (max-capping min(w, c) or zero-capping w · 1{w < c})")
reg = pd.DataFrame([{"name": k, "label": v.label, "family": data.estimator_family(k),
                     "definition": v.description} for k, v in ESTIMATORS.items()])
ui.show_table(reg, key="estimators", name="estimators",
              caption="Every estimator the dashboard can show (the pickers read this registry).")

st.header("References")
st.markdown(
    "- Olivier Jeunen, Ivan Potapov, Aleksei Ustimenko. *On (Normalised) Discounted Cumulative Gain as an "
    "Off-Policy Evaluation Metric for Top-n Recommendation.* Proceedings of the 30th ACM SIGKDD Conference on "
    "Knowledge Discovery and Data Mining (KDD 2024). [doi:10.1145/3637528.3671687]"
    "(https://doi.org/10.1145/3637528.3671687), [arXiv:2307.15053](https://arxiv.org/abs/2307.15053) — Sec. 4 "
    "(Asm. 1-5, Eq. 4-9), Sec. 5 (Lemma 5.2, Table 1), Sec. 6 (Table 2, Fig. 1), App. A (Fig. 2).\n"
    "- Alexandre Gilotte, Clément Calauzènes, Thomas Nedelec, Alexandre Abraham, Simon Dollé. *Offline A/B "
    "testing for Recommender Systems.* Proceedings of the 11th ACM International Conference on Web Search and "
    "Data Mining (WSDM 2018). [doi:10.1145/3159652.3159687](https://doi.org/10.1145/3159652.3159687), "
    "[arXiv:1801.07030](https://arxiv.org/abs/1801.07030) — Sec. 4-5 (capped and normalised IS, PieceNCIS, "
    "PointNCIS), Fig. 2, Fig. 4/5, Table 3.\n"
    "- *A missing-data model for implicit feedback and Average Discounted Gain* (why nDCG on observed items is "
    "biased; Theorems 1-2). The copy we work from carries no author, venue or link, so none is given here.\n"
    "- *Generalized Stratified Estimator for Recommendation Systems with Implicit Feedback* (Eq. 5-6, Prop. 3.1 "
    "/ 4.1, Thm 4.1-4.2). An anonymous submission: no authors or venue yet; it builds on the Stratified "
    "estimator of [arXiv:2005.01643](https://arxiv.org/abs/2005.01643).\n"
    "- *Discounted cumulative gain*, Wikipedia — textbook DCG / nDCG and both gain conventions: "
    "[en.wikipedia.org/wiki/Discounted_cumulative_gain](https://en.wikipedia.org/wiki/Discounted_cumulative_gain).")
