"""The sections of the HTML report (:mod:`offeval_core.report`): the data summary and the six analyses, each
computed from the moments (or the logs where it needs rows) and written into an
:class:`~offeval_core.report_html.HtmlDocument`, with :class:`ReportSettings`, everything they were computed
with. An analysis the data cannot support is replaced by a note saying why."""

from __future__ import annotations

import html
import math
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from offeval_core import charts
from offeval_core.analyses import (
    clip_tuning,
    correlation_by_clip,
    dcg_vs_ndcg,
    decision_boxes,
    offline_online_correlation,
    sensitivity,
    table1_example,
)
from offeval_core.analyses._common import clip_text
from offeval_core.analyses.plan import PROPENSITY_CURVES, correlation_variants, decision_estimators
from offeval_core.defaults import LEVEL, ONLINE_ALPHA
from offeval_core.discounts import parse_discount
from offeval_core.engine import DEFAULT_CLIPS, Moments
from offeval_core.formatting import needs_raw_logs
from offeval_core.importance.weights import PROPENSITY
from offeval_core.logs import LOGGING_POLICY, Logs
from offeval_core.report_html import HtmlDocument, fmt_table

__all__ = ["STEPS", "ReportSettings", "analysis_sections", "data_section", "moments_data_section"]


STEPS = ("data summary", "moments (main discount)", "moments (log2)", "sensitivity", "correlation",
         "DCG vs nDCG", "decision boxes", "clip tuning", "held-out zoo (App. A)", "writing HTML")


@dataclass
class ReportSettings:
    """Everything the report was computed with (printed at its top)."""

    rewards: tuple[str, ...]
    discount: str = "pbm"
    clips: tuple[float, ...] = DEFAULT_CLIPS
    policy: str = "treatment"
    kind: str | None = "rank"
    """``rank`` (DCG family), ``propensity`` (importance weights π_t / π_p, the cap c as m) or None (no target)."""
    sensitivity_level: float = LEVEL
    online_alpha: float = ONLINE_ALPHA
    online_min_effect: float = 0.0
    decision_level: float = LEVEL
    q_clip: float = math.inf
    adjust: str = "none"
    n_boot: int = 500
    seed: int = 0
    heldout: bool = False
    heldout_grid: str = "small"
    heldout_k: int = 100
    notes: list[str] = field(default_factory=list)
    input_kind: str = "logs"


def moments_data_section(doc: HtmlDocument, m: Moments, meta: dict) -> None:
    doc.h2("data", "Data")
    on = m.online
    first = on[on["reward"] == on["reward"].iloc[0]] if len(on) else on
    keys = [k for k in ("experiment_id", "day", "arm") if k in first]
    lines = [f"moments file: {len(m.offline):,} moment rows, {int(first['n'].sum()):,} sessions"]
    for k in keys:
        lines.append(f"{k}: " + ", ".join(f"{v} ({n:,})" for v, n in first.groupby(k)["n"].sum().items()))
    g = m.grid
    lines += [f"rewards: {', '.join(g.rewards)}", f"policies: {', '.join(g.policies)}",
              f"discounts D: {', '.join(g.discounts)}; exposure models D0: {', '.join(g.exposures)}",
              f"clip grid: {', '.join(clip_text(c) for c in g.clips)}"]
    lines += [f"{k}: {v}" for k, v in (meta.get("settings") or {}).items() if v is not None]
    doc.raw("<pre>" + html.escape("\n".join(lines)) + "</pre>")
    doc.note(_needs_logs("The learnt position-bias curve (session survival per rank)"))


def _needs_logs(what: str) -> str:
    return needs_raw_logs(what) + " Run `offeval report LOGS` on the logs themselves for this section."


def _needs_ab(policy: str, has_target: bool) -> str:
    """Why a section that compares with an online A/B test is skipped."""
    if has_target:
        return (f"Needs an A/B test: control and treatment arms, the treatment arm served by the target policy "
                f"{policy}. The logs have no arms (offline-only): compare the candidates with `offeval estimate` "
                "or the dashboard's Candidates page.")
    return ("Needs an A/B test and a target policy (a rank__<policy> or target_propensity__<policy> column, the "
            "policy that served the treatment arm).")


def _available(moments: Moments, variants, logs: Logs | None) -> list:
    """The variants a moments file holds (all of them when the moments were reduced from logs here)."""
    if logs is not None:
        return list(variants)
    g = moments.grid
    return [v for v in variants if v.discount in g.discounts and v.exposure in g.exposures and v.clip in g.clips]


def analysis_sections(doc: HtmlDocument, st: ReportSettings, *, moments: Moments | None, logs: Logs | None, ab: bool,
              has_target: bool, step: Callable[[str], None], heldout_cache_dir) -> None:
    """Sections 1-6; ``logs`` None (a moments file) replaces those that need rows by a notice."""
    rewards, discount, policy, clips, q_clip = st.rewards, st.discount, st.policy, st.clips, st.q_clip
    sensitivity_level, online_alpha, decision_level = st.sensitivity_level, st.online_alpha, st.decision_level
    n_boot, seed, heldout, heldout_grid, heldout_k = st.n_boot, st.seed, st.heldout, st.heldout_grid, st.heldout_k
    propensity = st.kind == "propensity"
    model = PROPENSITY if propensity else discount  # D = D0 of the target's estimators
    needs_ab = _needs_ab(policy, has_target)
    step(STEPS[3])
    doc.h2("sensitivity", "1 · Sensitivity vs clipping (KDD'24 Fig. 1)")
    if ab:
        if propensity:
            doc.p(f"{policy} is given by propensities: its estimators weight the logged rows by π_t / π_p, and the "
                  "cap c of the weights plays the role of the clip m (Gilotte Sec. 4.2).")
        metrics = PROPENSITY_CURVES if propensity else ("dcg", "ndcg")
        common = dict(policy=policy, metrics=metrics, discount=model, exposure=model, level=sensitivity_level,
                      online_alpha=online_alpha, min_effect=st.online_min_effect, adjust=st.adjust)
        res = sensitivity(moments, **common)
        doc.p(res.takeaway, "takeaway")
        if not res.settings.empty:
            doc.p(res.adjustment)
            doc.fig(charts.sensitivity_figure(res))
            doc.raw(fmt_table(res.table, pct_cols=("tpr", "sign_agreement")))
            doc.raw("<details><summary>Settings used (online outcome per experiment, day, reward)</summary>"
                    + fmt_table(res.settings) + "</details>")
        neg = sensitivity(moments, side="negatives", **common)
        doc.raw("<h3>Online negatives: negatives detected (a separate view, not part of the TPR)</h3>")
        doc.p(neg.takeaway)
        if not neg.settings.empty:
            doc.raw(fmt_table(neg.table, pct_cols=("negatives_detected", "sign_agreement")))
    else:
        doc.note(needs_ab)

    step(STEPS[4])
    doc.h2("correlation", "2 · Offline-online correlation across days (KDD'24 Table 2)")
    if ab:
        # Rₜ: the target policy, taken to have served the treatment arm (the dashboard's rule)
        variants = correlation_variants(model, q_clip)
        variants = variants if propensity else _available(moments, variants, logs)
        corr = offline_online_correlation(moments, variants=variants, policies=(LOGGING_POLICY, policy))
        doc.p(corr.takeaway, "takeaway")
        for w in corr.warnings:
            doc.note(w)
        doc.raw(corr.styled_html())
        doc.fig(charts.correlation_figure(corr))
        first = corr.table.iloc[0]
        doc.fig(charts.correlation_series_figure(corr.series(first["experiment_id"], first["reward"],
                                                             first["policy"])))
        if propensity:
            doc.note(f"Table 2 across clip values compares two position-bias models of DCG at every clip m; {policy} "
                     "is given by propensities, whose weights π_t / π_p need no position-bias model.")
        elif discount != "log2":
            doc.raw("<h3>Table 2 across clip values</h3>")
            try:
                by_clip = correlation_by_clip(moments, reward=rewards[0], policy=policy, model=discount)
            except ValueError as exc:  # a moments file without DCG (log2, ·) at these clips
                doc.note(f"Table 2 across clip values: {exc}.")
            else:
                doc.p(by_clip.takeaway, "takeaway")
                doc.fig(charts.correlation_clip_figure(by_clip))
    else:
        doc.note(needs_ab.replace("an A/B test", "an A/B test over several days", 1))

    step(STEPS[5])
    doc.h2("dcg-ndcg", "3 · DCG vs nDCG over candidate policies (KDD'24 App. A, Fig. 2)")
    if logs is None:
        doc.note(_needs_logs("DCG vs nDCG over the logged policies (per-session values and a bootstrap "
                                         "over sessions)"))
    elif len(logs.policies) >= 2:
        agr = dcg_vs_ndcg(logs, reward=rewards[0], discount=discount, exposure=discount, clip=q_clip,
                          n_boot=n_boot, rng=np.random.default_rng(seed))
        doc.p(agr.takeaway, "takeaway")
        doc.p(f"Tie rule: a pair tied under either metric is never inverted but counts in the n(n−1)/2 pairs. "
              f"Reward {rewards[0]}, {agr.n_sessions:,} control sessions, sessions with iDCG = 0 count nDCG = 0.")
        doc.fig(charts.agreement_figure(agr))
        doc.raw(fmt_table(agr.points))
        if len(agr.inverted_pairs):
            doc.raw("<details><summary>Inverted pairs</summary>" + fmt_table(agr.inverted_pairs) + "</details>")
    elif propensity:
        doc.note(f"DCG vs nDCG compares rankings: {policy} is given by propensities, not ranks (rank__<policy> "
                 "columns). The sensitivity, correlation, decision and clip-tuning sections apply to it.")
    else:
        doc.note("Needs at least two candidate policies (rank__* columns).")
    t1 = table1_example()
    doc.raw("<h3>Table 1 of KDD'24, recomputed</h3>")
    doc.raw(fmt_table(t1.table, digits=3))
    doc.p(t1.explanation)

    step(STEPS[6])
    doc.h2("decisions", "4 · Offline vs online decisions per A/B test (Gilotte Fig. 4, Table 3)")
    if ab:
        ests = list(decision_estimators(model, q_clip))
        ests = ests if propensity else _available(moments, ests, logs)
        dec = decision_boxes(moments, estimators=ests, policy=policy, level=decision_level, relative=True,
                             adjust=st.adjust)
        doc.p(dec.takeaway, "takeaway")
        doc.p(dec.adjustment)
        for label in dec.estimators:
            doc.fig(charts.decision_figure(dec, estimator=label))
        doc.raw(fmt_table(dec.summary, pct_cols=("precision", "fnr", "agreement")))
        doc.p(f"CI size: mean relative CI width over {dec.reference}'s. Uplifts are relative to the baseline "
              f"(%), {decision_level:.0%} CIs; all days of each experiment pooled.")
    else:
        doc.note(needs_ab)

    step(STEPS[7])
    doc.h2("clip-tuning", "5 · Bias and variance vs the clip value (Gilotte Fig. 2)")
    if logs is None:
        doc.note(_needs_logs("Clip tuning (the bias bound, ESS and clipped share read per-row weights)"))
    elif has_target:
        ct = clip_tuning(logs, reward=rewards[0], policy=policy, discount=model, exposure=model,
                         clips=clips, moments=moments, level=sensitivity_level)
        doc.p("Recommended " + ct.recommendation.reason, "takeaway")   # the dashboard's recommendation
        doc.fig(charts.clip_tuning_figure(ct))  # the same m
        doc.raw(fmt_table(ct.table, pct_cols=("clipped_rows", "clipped_mass", "ess_share")))
    else:
        doc.note("Needs a target policy: a rank__<policy> or target_propensity__<policy> column.")

    step(STEPS[8])
    if heldout:
        _heldout_section(doc, grid=heldout_grid, k=heldout_k, n_boot=n_boot, seed=seed, cache_dir=heldout_cache_dir)



def _heldout_section(doc: HtmlDocument, *, grid: str, k: int, n_boot: int, seed: int, cache_dir) -> None:
    """KDD'24 App. A on held-out data: DCG@k vs nDCG@k over the simulated model zoo, ours beside the paper's."""
    from offeval_core.heldout.analyses import zoo_agreement
    from offeval_core.heldout.charts import agreement_scatter

    res = zoo_agreement(k=k, grid=grid, n_boot=max(int(n_boot), 1), seed=seed, cache_dir=cache_dir)
    a, ci, p = res.agreement, res.inverted_ci, res.paper
    doc.h2("heldout", f"6 · Held-out runs: DCG@{k} vs nDCG@{k} over a simulated model zoo (KDD'24 App. A)")
    doc.p(f"nDCG@{k} orders {a.inverted_share:.0%} of the {a.n_pairs} pairs of the {a.n} models opposite to "
          f"DCG@{k} ({ci.level:.0%} CI {ci.low:.0%}–{ci.high:.0%}; Pearson r = {a.pearson_r:.2f}, Kendall τ = "
          f"{a.kendall_tau:.2f}); App. A reports r ≈ {p['pearson_r']}, τ ≈ {p['kendall_tau']} and ≈ "
          f"{p['inverted_share']:.0%} over {p['n_models']} models on {p['dataset']}.", "takeaway")
    doc.p(f"Models trained on 50 % of a simulated world's observed interactions (1,000 users × 600 items, missing "
          f"not at random), evaluated on the other 50 %; {res.n_users:,} users with a held-out item; iDCG "
          f"truncated at k; {res.gain} gain; {grid} grid; {ci.level:.0%} user-bootstrap CI with "
          f"{max(int(n_boot), 1)} resamples, seed {seed}.")
    doc.fig(agreement_scatter(res))
    doc.raw(fmt_table(res.comparison(), digits=3))
    doc.raw("<details><summary>Models</summary>" + fmt_table(res.table()) + "</details>")


def data_section(doc: HtmlDocument, logs: Logs, summary, discount: str) -> None:
    doc.h2("data", "Data")
    doc.raw("<pre>" + html.escape(summary.to_text()) + "</pre>")
    max_rank = min(logs.max_rank, 60)
    curves = {"learnt PBM (session survival)": parse_discount("pbm", logs=logs).table(max_rank),
              "1/log₂(r+1)": parse_discount("log2").table(max_rank),
              "0.85^(r−1)": parse_discount("exponential:0.85").table(max_rank)}
    if discount not in ("pbm", "log2"):
        curves[discount] = parse_discount(discount, logs=logs).table(max_rank)
    doc.fig(charts.pbm_curve_figure(curves))
