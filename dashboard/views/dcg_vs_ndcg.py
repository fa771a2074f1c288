"""DCG vs nDCG: do the two metrics rank the candidate policies the same way? (KDD'24 App. A, Fig. 2) and the
Table 1 counter-example of Lemma 5.2, explained step by step."""

from __future__ import annotations

import streamlit as st

from dashboard import data, ui
from offeval_core.analyses import agreement_figure, dcg_vs_ndcg, table1_example

c = ui.ctx()
ss = st.session_state
st.title("DCG vs nDCG")
st.caption("One point per candidate policy: its mean per-session DCG and nDCG on the same (control-arm) "
           "sessions. A pair of policies is inverted when nDCG orders it opposite to DCG — DCG estimates the "
           "online reward, so nDCG would pick the worse policy for that pair (KDD'24 Sec. 5, App. A).")
if not ui.needs(c, policy=True):
    st.stop()
policies = list(c.logs.policies)
if len(policies) < 2:
    st.error(f"Comparing rankings needs at least two target policies; these logs have {len(policies)} "
             "(rank__<policy> columns). Add one column per candidate policy.", icon=":material/error:")
    st.stop()

s = c.settings
with ui.controls():
    a, b = st.columns([4, 1])
    picked = a.multiselect("Policies", policies, default=policies, key="w_agr_policies")
    n_boot = b.select_slider("Bootstrap resamples", [0, 100, 200, 500, 1000], value=200, key="w_agr_boot",
                             help="For the CI of the inverted share (resamples sessions); 0 skips it")
if len(picked) < 2:
    st.warning("Choose at least two policies in the page controls.", icon=":material/warning:")
    st.stop()

with ui.guarded("DCG vs nDCG"):
    args = (c.key, c.reward, tuple(picked), s.discount, s.exposure, s.clip, s.level, int(n_boot))
    ready = data.is_ready("agreement", *args)
    res = ui.with_progress("Computing per-session DCG and nDCG of every policy (first time only)…", ready,
                           lambda: data.agreement_result(*args))
    data.mark_ready("agreement", *args)
    ui.show_figure(agreement_figure(res), key="agreement", name="dcg_vs_ndcg", take=res.takeaway)
    m = st.columns(4)
    m[0].metric("Inverted pairs", f"{res.inverted_share:.0%}", help=f"{res.agreement.n_inverted} of {res.n_pairs}")
    if res.inverted_ci is not None:
        m[1].metric(f"{res.inverted_ci.level:.0%} CI", f"{res.inverted_ci.low:.0%} – {res.inverted_ci.high:.0%}")
    m[2].metric("Pearson r", f"{res.pearson:.2f}")
    m[3].metric("Kendall τ", f"{res.kendall:.2f}")
    st.caption(f"{res.n_sessions:,} sessions; {res.settings['ndcg_zero_rule']}; clip m = {ui.clip_label(s.clip)}, "
               f"D = {s.discount}, D0 = {s.exposure}.")
    left, right = st.columns(2)
    with left:
        st.markdown("**Policies**")
        ui.show_table(res.points, key="agreement_points", name="dcg_ndcg_by_policy")
    with right:
        st.markdown("**Pairs nDCG inverts**")
        if res.inverted_pairs.empty:
            st.success("nDCG orders every pair like DCG here.", icon=":material/check_circle:")
        else:
            ui.show_table(res.inverted_pairs, key="agreement_pairs", name="inverted_pairs")

st.divider()
st.header("Why it happens: the Table 1 counter-example")
norm = st.radio("Ideal DCG used to normalise", ["paper", "top1"], horizontal=True, key="w_t1_norm",
                format_func={"paper": "Σ of all labels (as printed in the paper)",
                             "top1": "best single label (ideal top-1 list)"}.get)
with ui.guarded("Table 1"):
    t1 = table1_example(normaliser=norm)
    st.markdown("**Step 1 — two contexts, two items, expected labels ρ(x, a):**")
    st.dataframe(t1.quality, key="table_t1_quality")
    st.markdown("**Step 2 — two top-1 policies: R shows a1 everywhere, R′ shows a2 everywhere:**")
    st.dataframe(t1.choices, key="table_t1_choices")
    st.markdown("**Step 3 — per-context and averaged metrics:**")
    ui.show_table(t1.table, key="t1_table", name="table1_example")
    ui.takeaway(t1.explanation)
    agr = dcg_vs_ndcg(t1.session_values, n_boot=0)
    st.caption(f"As policies on two sessions: {agr.agreement.n_inverted} of {agr.n_pairs} pair inverted — "
               "per-context normalisation gives context x1 (where both items are poor) as much weight as x2, "
               "where R′ earns 2.5 times more.")
