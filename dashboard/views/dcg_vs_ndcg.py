"""DCG vs nDCG: do the two metrics rank the candidates the same way? (KDD'24 App. A, Fig. 2) — over the
logged policies, or over held-out runs (the simulated model zoo of App. A, or the user's own runs uploaded as
TREC / CSV / Parquet files) — and the Table 1 counter-example of Lemma 5.2, explained step by step."""

from __future__ import annotations

import streamlit as st

from dashboard import data, ui
from offeval_core.errors import OffevalError
from offeval_core.formatting import format_coefficient, not_available
from offeval_core.heldout.charts import agreement_scatter


def _coef(x: float, digits: int = 2) -> str:
    """A correlation coefficient, or why there is none (fewer than 3 policies, or no spread)."""
    return format_coefficient(x, digits) if x == x else not_available("fewer than 3 policies or no spread")

c = ui.ctx()
ss = st.session_state
st.title("DCG vs nDCG")
SOURCES = {"logged": "Logged policies", "heldout": "Held-out runs"}
ui.init_control("agr_source")
source = st.radio("Source", list(SOURCES), format_func=SOURCES.get, horizontal=True, key="w_agr_source",
                  label_visibility="collapsed" if c.present else "visible",
                  help="Logged policies: the candidate policies' rank__* columns of the loaded logs, evaluated "
                       "off-policy. Held-out runs: models ranking held-out interactions (KDD'24 App. A).")


def _logged() -> None:
    st.caption("One point per candidate policy: its mean per-session DCG and nDCG on the same (control-arm) "
               "sessions. A pair of policies is inverted when nDCG orders it opposite to DCG — DCG estimates the "
               "online reward, so nDCG would pick the worse policy for that pair (KDD'24 Sec. 5, App. A).")
    if not ui.needs(c, policy=True):
        ui.end_page()
    if c.dataset.is_moments:
        ui.raw_logs_notice("Comparing DCG and nDCG over the logged policies (per-session values and a bootstrap "
                           "over sessions)")
        return
    policies = list(data.agreement_policies(c.dataset))
    targets = c.dataset.targets
    if len(policies) < 2 and len(targets.all) > len(policies):
        given = [p for p in targets.all if targets.kind(p) == "propensity"]
        st.info(f"DCG and nDCG score a ranking: they need the rank at which each candidate would show each item "
                f"(`rank__<policy>` columns, two candidates at least). "
                f"{ui.md_escape(', '.join(given))} {'is' if len(given) == 1 else 'are'} given by propensities "
                "(`target_propensity__<policy>`), which these metrics cannot read. Importance sampling with the "
                "logged propensities (IS, SNIPS, CIS, NCIS; Gilotte et al.) evaluates them on these pages:",
                icon=":material/info:")
        ui.links(("candidates", "decisions", "clip-tuning", "sensitivity", "correlation"))
        ui.end_page()
    if len(policies) < 2:
        st.error(f"Comparing rankings needs at least two target policies; these logs have {len(policies)} "
                 "(rank__<policy> columns). Add one column per candidate policy.", icon=":material/error:")
        ui.end_page()

    s = c.settings
    with ui.controls():
        a, b = st.columns([4, 1])
        ui.init_control("agr_policies", policies, options=policies)
        ui.init_control("agr_boot")
        picked = a.multiselect("Policies", policies, key="w_agr_policies")
        n_boot = b.select_slider("Bootstrap resamples", [0, 100, 200, 500, 1000], key="w_agr_boot",
                                 help="For the CI of the inverted share (resamples sessions); 0 skips it")
    if len(picked) < 2:
        st.warning("Choose at least two policies in the page controls.", icon=":material/warning:")
        ui.end_page()

    with ui.guarded("DCG vs nDCG"):
        args = (c.key, c.reward, tuple(picked), s.discount, s.exposure, s.clip, s.level, int(n_boot))
        ready = data.is_ready("agreement", *args)
        res = ui.with_progress("Computing per-session DCG and nDCG of every policy (first time only)…", ready,
                               lambda: data.agreement_result(*args))
        data.mark_ready("agreement", *args)
        ui.show_figure(data.agreement_chart(*args), key="agreement", name="dcg_vs_ndcg", take=res.takeaway)
        m = st.columns(4)
        m[0].metric("Inverted pairs", f"{res.inverted_share:.0%}", help=f"{res.agreement.n_inverted} of {res.n_pairs}")
        if res.inverted_ci is not None:
            m[1].metric(f"{res.inverted_ci.level:.0%} CI", f"{res.inverted_ci.low:.0%} – {res.inverted_ci.high:.0%}")
        m[2].metric("Pearson r", _coef(res.pearson))
        m[3].metric("Kendall τ", _coef(res.kendall))
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


GRIDS = {"default": "192 models, six families", "paper": "192 near-identical (App. A grids)",
         "small": "25 models (quick)"}
KINDS = {"zoo": "Simulated model zoo", "upload": "Upload qrels + runs"}
GAINS = {"linear": "linear (gain = rel)", "exponential": "exponential (2^rel − 1)"}
UPLOAD_TYPES = ["txt", "trec", "qrels", "run", "tsv", "csv", "parquet", "pq"]


def _show_agreement(res, *, key: str, caption: str) -> None:
    """Scatter, the agreement numbers, ours beside the paper's, the per-model table (all from the core)."""
    a, ci, p = res.agreement, res.inverted_ci, res.paper
    what = "runs" if res.source == "uploaded runs" else "models"
    take = (f"nDCG@{res.k} orders {a.inverted_share:.1%} of the {a.n_pairs:,} pairs of {a.n} {what} opposite to "
            f"DCG@{res.k} ({ci.level:.0%} CI {ci.low:.1%}–{ci.high:.1%}); App. A reports ≈ "
            f"{p['inverted_share']:.0%} over {p['n_models']} models on {p['dataset']}.")
    fig = agreement_scatter(res)
    ui.show_figure(fig, key=key, name=f"dcg_vs_ndcg_{key}", take=take)
    m = st.columns(4)
    m[0].metric("Inverted pairs", f"{a.inverted_share:.1%}", help=f"{a.n_inverted} of {a.n_pairs}; "
                f"paper ≈ {p['inverted_share']:.0%}")
    m[1].metric(f"{ci.level:.0%} CI", f"{ci.low:.1%} – {ci.high:.1%}", help="user bootstrap")
    m[2].metric("Pearson r", _coef(a.pearson_r, 3), help=f"paper ≈ {p['pearson_r']}")
    m[3].metric("Kendall τ", _coef(a.kendall_tau, 3), help=f"paper ≈ {p['kendall_tau']}")
    st.caption(caption)
    mech = getattr(res, "mechanism", None)
    if mech is not None:
        st.markdown("**Why they disagree (or not): the mechanism on these data**")
        ui.takeaway(mech.takeaway)
        ui.show_table(mech.by_gap, key=f"{key}_by_gap", name=f"app_a_inversions_by_gap_{key}",
                      caption="Share of model pairs nDCG inverts, by tercile of the pair's DCG gap |ΔDCG|.")
    st.markdown(f"**Ours beside the paper ({p['source']})**")
    ui.show_table(res.comparison(), key=f"{key}_comparison", name=f"app_a_comparison_{key}")
    st.markdown(f"**{what.capitalize()}** (rank 1 = best)")
    ui.show_table(res.table(), key=f"{key}_models", name=f"dcg_ndcg_by_model_{key}", height=320)


def _zoo() -> None:
    with ui.controls():
        a, b, g, n = st.columns([3, 1, 2, 2])
        for name in ("ho_grid", "ho_k", "ho_gain", "ho_boot"):
            ui.init_control(name)
        grid = a.radio("Model zoo", list(GRIDS), format_func=GRIDS.get, horizontal=True, key="w_ho_grid",
                       help="EASE, item-kNN, user-kNN, PureSVD, RP3β and popularity over hyper-parameter grids, "
                            "trained on 50 % of a simulated world's interactions")
        k = b.selectbox("Cut-off k", [100, 10, 20, 50], key="w_ho_k")
        gain = g.selectbox("Gain", list(GAINS), format_func=GAINS.get, key="w_ho_gain")
        n_boot = n.select_slider("Bootstrap resamples", [100, 200, 500, 1000], key="w_ho_boot",
                                 help="Users resampled for the CI of the inverted share")
    level = c.settings.level
    with ui.guarded("Model zoo"):
        args = (grid, int(k), gain, int(n_boot), float(level))
        label = (f"Training the model zoo ({GRIDS[grid]}) and scoring DCG@{k} / nDCG@{k} on the held-out half "
                 "(first time only; saved on disk afterwards)…")
        res = ui.with_progress(label, data.is_ready("zoo", *args, 0), lambda: data.zoo_agreement_result(*args))
        _show_agreement(res, key="zoo", caption=(
            f"{res.agreement.n} models, {res.n_users:,} users with a held-out item (the others have no nDCG); "
            f"iDCG truncated at k = {res.k}; {res.gain} gain; {n_boot} bootstrap resamples of users, seed 0. "
            "Simulated world: 1,000 users × 600 items, observed interactions split 50 / 50 into train / held-out "
            "(missing not at random, as in MovieLens)."))


def _remember(kind: str) -> None:
    """Upload callback: keep the bytes in server memory and remember (hash, name) in the session."""
    widget = ss.get(f"w_ho_{kind}_file")
    files = widget if isinstance(widget, list) else [widget] if widget is not None else []
    refs = []
    for f in files:
        payload = f.getvalue()
        sha = data.content_key(payload)
        data.heldout_bytes(sha, f.name, payload)
        refs.append((sha, f.name))
    ss[f"ho_{kind}"] = refs


def _upload_error(context: str, exc: BaseException, layout: str) -> None:
    st.error(f"**{context}:** {exc}\n\n**Expected:** {layout}", icon=":material/error:")


QRELS_LAYOUT = ("TREC qrels `qid iter doc rel` (whitespace-separated, one judgment a line), or a CSV / Parquet "
                "table with user, item and relevance columns.")
RUN_LAYOUT = ("TREC run `qid Q0 doc rank score tag` (one run per tag), or a CSV / Parquet table with user, item "
              "and score and/or rank columns (optionally a run column).")


def _upload() -> None:
    st.caption("Your own runs on your own held-out judgments: qrels plus one or more run files (TREC format, or "
               "CSV / Parquet by file extension). Uploads go to a private temporary directory that is deleted "
               "as soon as the file is read, and are kept only in the server's memory.")
    with ui.controls():
        a, b = st.columns(2)
        a.file_uploader("Qrels", type=UPLOAD_TYPES, key="w_ho_qrels_file", on_change=_remember, args=("qrels",),
                        help=QRELS_LAYOUT)
        b.file_uploader("Runs (two or more, in one or several files)", type=UPLOAD_TYPES,
                        accept_multiple_files=True, key="w_ho_runs_file", on_change=_remember, args=("runs",),
                        help=RUN_LAYOUT)
        k_col, g_col, n_col = st.columns(3)
        for name in ("ho_up_k", "ho_up_gain", "ho_up_boot"):
            ui.init_control(name)
        k = k_col.selectbox("Cut-off k", [100, 10, 20, 50], key="w_ho_up_k")
        gain = g_col.selectbox("Gain", list(GAINS), format_func=GAINS.get, key="w_ho_up_gain")
        n_boot = n_col.select_slider("Bootstrap resamples", [100, 200, 500, 1000], key="w_ho_up_boot")
    qrels_ref = (ss.get("ho_qrels") or [None])[0]
    run_refs = list(ss.get("ho_runs") or [])
    if qrels_ref is None or not run_refs:
        st.info("Upload a qrels file and at least two runs (several runs may share one TREC file, one per tag).",
                icon=":material/upload_file:")
        return
    ok = True
    try:
        qrels = data.heldout_qrels(*qrels_ref)
        st.caption(f"Qrels **{qrels_ref[1]}**: {len(qrels.frame):,} judgments, {len(qrels.users):,} users.")
    except OffevalError as exc:
        _upload_error(f"Qrels file {qrels_ref[1]}", exc, QRELS_LAYOUT)
        ok = False
    for ref in run_refs:
        try:
            runs = data.heldout_runs(*ref)
            st.caption(f"Run file **{ref[1]}**: " + ", ".join(f"{r.name} ({len(r.users):,} users)" for r in runs))
        except OffevalError as exc:
            _upload_error(f"Run file {ref[1]}", exc, RUN_LAYOUT)
            ok = False
    if not ok:
        return
    with ui.guarded("DCG vs nDCG over the uploaded runs"):
        res = data.runs_agreement_result(tuple(qrels_ref), tuple(map(tuple, run_refs)), int(k), gain, int(n_boot),
                                         float(c.settings.level))
        _show_agreement(res, key="runs", caption=(
            f"{res.agreement.n} runs, {res.n_users:,} users evaluated in every run (users without a relevant "
            f"judgment are skipped: nDCG undefined); iDCG truncated at k = {res.k}; {res.gain} gain; "
            "items missing from the qrels count as not relevant."))


def _heldout() -> None:
    st.caption("KDD'24 App. A: one point per model, its mean DCG@k and nDCG@k over users on held-out "
               "interactions. A pair of models is inverted when nDCG orders it opposite to DCG. The paper "
               "finds r ≈ 0.6, τ ≈ 0.5 and ≈ 25 % inverted pairs over 192 models on MovieLens-1M.")
    ui.init_control("ho_kind")
    kind = st.radio("Held-out runs from", list(KINDS), format_func=KINDS.get, horizontal=True, key="w_ho_kind")
    if kind == "zoo":
        _zoo()
    else:
        _upload()


if source == "logged":
    _logged()
else:
    _heldout()

st.divider()
st.header("Why it happens: the Table 1 counter-example")
ui.init_control("t1_norm")
norm = st.radio("Ideal DCG used to normalise", ["paper", "top1"], horizontal=True, key="w_t1_norm",
                format_func={"paper": "Σ of all labels (as printed in the paper)",
                             "top1": "best single label (ideal top-1 list)"}.get)
with ui.guarded("Table 1"):
    t1, agr = data.table1_result(norm)
    st.markdown("**Step 1 — two contexts, two items, expected labels ρ(x, a):**")
    st.dataframe(t1.quality, key="table_t1_quality")
    st.markdown("**Step 2 — two top-1 policies: R shows a1 everywhere, R′ shows a2 everywhere:**")
    st.dataframe(t1.choices, key="table_t1_choices")
    st.markdown("**Step 3 — per-context and averaged metrics:**")
    ui.show_table(t1.table, key="t1_table", name="table1_example")
    ui.takeaway(t1.explanation)
    st.caption(f"As policies on two sessions: {agr.agreement.n_inverted} of {agr.n_pairs} pair inverted — "
               "per-context normalisation gives context x1 (where both items are poor) as much weight as x2, "
               "where R′ earns 2.5 times more.")
