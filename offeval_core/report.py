"""One self-contained HTML report with all five analyses (plotly.js embedded inline; opens offline).

Sections: settings, data summary (with the learnt position-bias curve), sensitivity vs clipping (KDD'24
Fig. 1), offline-online correlation (KDD'24 Table 2), DCG vs nDCG (KDD'24 App. A, Table 1), decision boxes
(Gilotte Fig. 4 / Table 3) and clip tuning (Gilotte Fig. 2). An analysis the logs cannot support (e.g. no
treatment arm) is replaced by a note saying why. With ``heldout=True`` a sixth section adds KDD'24 App. A on
held-out data: DCG@k vs nDCG@k over the simulated model zoo (:func:`offeval_core.heldout.zoo_agreement`).
"""

from __future__ import annotations

import datetime as _dt
import html
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import plotly.offline

from offeval_core import charts
from offeval_core.analyses import (
    clip_tuning,
    dcg_vs_ndcg,
    decision_boxes,
    default_variants,
    merge_moments,
    offline_online_correlation,
    sensitivity,
    table1_example,
)
from offeval_core.analyses._common import Variant, clip_text
from offeval_core.discounts import parse_discount
from offeval_core.engine import DEFAULT_CLIPS, Grid, reduce
from offeval_core.logs import Logs, summarize
from offeval_core.validation import check_choice, check_clips, check_level

STEPS = ("data summary", "moments (main discount)", "moments (log2)", "sensitivity", "correlation",
         "DCG vs nDCG", "decision boxes", "clip tuning", "held-out zoo (App. A)", "writing HTML")


@dataclass
class ReportSettings:
    """Everything the report was computed with (printed at its top)."""

    rewards: tuple[str, ...]
    discount: str = "pbm"
    clips: tuple[float, ...] = DEFAULT_CLIPS
    policy: str = "treatment"
    sensitivity_level: float = 0.99
    online_alpha: float = 0.001
    decision_level: float = 0.95
    q_clip: float = math.inf
    n_boot: int = 500
    seed: int = 0
    heldout: bool = False
    heldout_grid: str = "small"
    heldout_k: int = 100
    notes: list[str] = field(default_factory=list)


def _fmt_table(df: pd.DataFrame, *, pct_cols=(), digits: int = 4) -> str:
    out = df.copy()
    for c in out.columns:
        if c == "clip" or c.endswith("_clip"):
            out[c] = [clip_text(float(v)) if pd.notna(v) else "–" for v in out[c]]
        elif c in pct_cols:
            out[c] = [f"{100 * v:.1f} %" if pd.notna(v) else "–" for v in out[c]]
        elif pd.api.types.is_float_dtype(out[c]):
            out[c] = [("–" if pd.isna(v) else f"{v:.{digits}g}") for v in out[c]]
    return out.to_html(index=False, classes="tbl", border=0, escape=True, na_rep="–")


class _Html:
    def __init__(self) -> None:
        self.parts: list[str] = []
        self.n_figures = 0

    def h2(self, anchor: str, text: str) -> None:
        self.parts.append(f'<h2 id="{anchor}">{html.escape(text)}</h2>')

    def p(self, text: str, cls: str = "") -> None:
        c = f' class="{cls}"' if cls else ""
        self.parts.append(f"<p{c}>{html.escape(text)}</p>")

    def raw(self, text: str) -> None:
        self.parts.append(text)

    def fig(self, fig: go.Figure) -> None:
        self.n_figures += 1
        self.parts.append('<div class="fig">' + fig.to_html(
            full_html=False, include_plotlyjs=False, div_id=f"fig{self.n_figures}",
            config={"displaylogo": False, "responsive": True}) + "</div>")

    def note(self, text: str) -> None:
        self.p(text, "note")


CSS = """
body{font:14px/1.45 Inter,Helvetica,Arial,sans-serif;margin:0 auto;max-width:1180px;padding:16px 28px;color:#222}
h1{font-size:24px;margin-bottom:4px} h2{margin-top:36px;border-bottom:2px solid #0072B2;padding-bottom:4px}
nav a{margin-right:14px} .note{background:#fff4e0;border-left:4px solid #E69F00;padding:6px 10px}
.takeaway{background:#e8f3fa;border-left:4px solid #0072B2;padding:6px 10px;font-weight:600}
.tbl{border-collapse:collapse;font-size:12.5px;margin:8px 0} .tbl td,.tbl th{padding:3px 8px;
border-bottom:1px solid #ddd;text-align:right} .tbl th{border-bottom:2px solid #333}
.fig{margin:10px 0} details{margin:8px 0} code{background:#f3f3f3;padding:0 3px}
"""


def build_report(logs: Logs, *, rewards: Sequence[str] | None = None, discount: str = "pbm",
                 clips: Sequence[float] = DEFAULT_CLIPS, policy: str = "treatment", sensitivity_level: float = 0.99,
                 online_alpha: float = 0.001, decision_level: float = 0.95, q_clip: float = math.inf,
                 n_boot: int = 500, seed: int = 0, heldout: bool = False, heldout_grid: str = "small",
                 heldout_k: int = 100, heldout_cache_dir=None,
                 progress: Callable[[str], None] | None = None) -> str:
    """Compute every analysis on ``logs`` and return the report as one HTML string.

    With ``heldout`` the report adds KDD'24 App. A on the simulated model zoo (``heldout_grid`` "small" =
    25 models, about 10 s; "default" = 192 models as in the paper), DCG@``heldout_k`` vs nDCG@``heldout_k``;
    ``heldout_cache_dir`` saves the trained zoo on disk for later reports.

    ``progress`` is called with the name of each step as it starts (the CLI drives a progress bar with it).
    """
    if not isinstance(logs, Logs):
        raise TypeError(f"logs must be offeval_core.logs.Logs (from read_logs), got {type(logs).__name__}")
    rewards = tuple(rewards) if rewards else logs.rewards
    for r in rewards:
        logs.check_reward(r)
    clips = check_clips(clips)
    check_level(sensitivity_level)
    check_level(decision_level)
    parse_discount(discount, logs=logs)
    q_clip = float(q_clip)
    if not isinstance(heldout, bool):
        raise TypeError(f"heldout must be True or False, got {heldout!r}")
    if heldout:
        check_choice(heldout_grid, ("small", "default"), name="heldout_grid")
        if isinstance(heldout_k, bool) or not isinstance(heldout_k, int) or not 1 <= heldout_k <= 100:
            raise ValueError(f"heldout_k must be an integer cut-off from 1 to 100, got {heldout_k!r}")
    if q_clip not in clips:
        clips = check_clips((*clips, q_clip))
    step = progress or (lambda _name: None)
    st = ReportSettings(rewards=rewards, discount=discount, clips=clips, policy=policy,
                        sensitivity_level=sensitivity_level, online_alpha=online_alpha,
                        decision_level=decision_level, q_clip=q_clip, n_boot=n_boot, seed=seed, heldout=heldout,
                        heldout_grid=heldout_grid, heldout_k=heldout_k)
    has_target = policy in logs.policies
    ab = has_target and logs.has_arms
    doc = _Html()

    step(STEPS[0])
    summary = summarize(logs)
    _data_section(doc, logs, summary, discount)

    step(STEPS[1])
    moments = None
    if has_target:
        main = reduce(logs, Grid(rewards=rewards, policies=(policy,), discounts=(discount,), exposures=(discount,),
                                 clips=clips))
        step(STEPS[2])
        if discount != "log2":
            extra = reduce(logs, Grid(rewards=rewards, policies=(policy,), discounts=("log2",),
                                      exposures=("log2",), clips=(1.0, q_clip)))
            moments = merge_moments(main, extra)
        else:
            moments = main
    else:
        step(STEPS[2])
        st.notes.append(f"the logs have no column rank__{policy}: the analyses that need the target policy "
                        "(sensitivity, correlation of Rₜ, decision boxes, clip tuning) are skipped")

    step(STEPS[3])
    doc.h2("sensitivity", "1 · Sensitivity vs clipping (KDD'24 Fig. 1)")
    if ab:
        res = sensitivity(moments, policy=policy, discount=discount, exposure=discount, level=sensitivity_level,
                          online_alpha=online_alpha, settings="significant")
        if res.settings.empty:
            doc.note(f"No (experiment, day, reward) has a significant online effect at p < {online_alpha:g}; "
                     "showing all settings instead (detection = offline CI on the side of the online effect).")
            res = sensitivity(moments, policy=policy, discount=discount, exposure=discount,
                              level=sensitivity_level, online_alpha=online_alpha, settings="all")
        doc.p(res.takeaway, "takeaway")
        doc.fig(charts.sensitivity_figure(res))
        doc.raw(_fmt_table(res.table, pct_cols=("tpr", "sign_agreement")))
        doc.raw("<details><summary>Settings used (online outcome per experiment, day, reward)</summary>"
                + _fmt_table(res.settings) + "</details>")
    else:
        doc.note("Needs an A/B test: control and treatment arms and a rank__treatment column.")

    step(STEPS[4])
    doc.h2("correlation", "2 · Offline-online correlation across days (KDD'24 Table 2)")
    if ab:
        corr = offline_online_correlation(moments, variants=default_variants(q_clip, pbm=discount))
        doc.p(corr.takeaway, "takeaway")
        for w in corr.warnings:
            doc.note(w)
        doc.raw(corr.styled_html())
        doc.fig(charts.correlation_figure(corr))
        first = corr.table.iloc[0]
        doc.fig(charts.correlation_series_figure(corr.series(first["experiment_id"], first["reward"],
                                                             first["policy"])))
    else:
        doc.note("Needs an A/B test over several days (arms and a rank__treatment column).")

    step(STEPS[5])
    doc.h2("dcg-ndcg", "3 · DCG vs nDCG over candidate policies (KDD'24 App. A, Fig. 2)")
    if len(logs.policies) >= 2:
        agr = dcg_vs_ndcg(logs, reward=rewards[0], discount=discount, exposure=discount, clip=q_clip,
                          n_boot=n_boot, rng=np.random.default_rng(seed))
        doc.p(agr.takeaway, "takeaway")
        doc.p(f"Tie rule: a pair tied under either metric is never inverted but counts in the n(n−1)/2 pairs. "
              f"Reward {rewards[0]}, {agr.n_sessions:,} control sessions, sessions with iDCG = 0 count nDCG = 0.")
        doc.fig(charts.agreement_figure(agr))
        doc.raw(_fmt_table(agr.points))
        if len(agr.inverted_pairs):
            doc.raw("<details><summary>Inverted pairs</summary>" + _fmt_table(agr.inverted_pairs) + "</details>")
    else:
        doc.note("Needs at least two candidate policies (rank__* columns).")
    t1 = table1_example()
    doc.raw("<h3>Table 1 of KDD'24, recomputed</h3>")
    doc.raw(_fmt_table(t1.table, digits=3))
    doc.p(t1.explanation)

    step(STEPS[6])
    doc.h2("decisions", "4 · Offline vs online decisions per A/B test (Gilotte Fig. 4, Table 3)")
    if ab:
        ests = [Variant("dcg", discount, discount, 1.0), Variant("dcg", discount, discount, q_clip),
                Variant("ndcg", discount, discount, q_clip), Variant("dcg", "log2", "log2", q_clip)]
        ests = list(dict.fromkeys(ests))
        dec = decision_boxes(moments, estimators=ests, policy=policy, level=decision_level, relative=True)
        doc.p(dec.takeaway, "takeaway")
        for label in dec.estimators:
            doc.fig(charts.decision_figure(dec, estimator=label))
        doc.raw(_fmt_table(dec.summary, pct_cols=("precision", "fnr", "agreement")))
        doc.p(f"CI size: mean relative CI width over {dec.reference}'s. Uplifts are relative to the baseline "
              f"(%), {decision_level:.0%} CIs; all days of each experiment pooled.")
    else:
        doc.note("Needs A/B tests (arms and a rank__treatment column).")

    step(STEPS[7])
    doc.h2("clip-tuning", "5 · Bias and variance vs the clip value (Gilotte Fig. 2)")
    if has_target:
        ct = clip_tuning(logs, reward=rewards[0], policy=policy, discount=discount, exposure=discount,
                         clips=clips, moments=moments)
        doc.p(ct.rule_text, "takeaway")
        doc.fig(charts.clip_tuning_figure(ct))
        doc.raw(_fmt_table(ct.table, pct_cols=("clipped_rows", "clipped_mass", "ess_share")))
    else:
        doc.note(f"Needs a target policy (rank__{policy}).")

    step(STEPS[8])
    if heldout:
        _heldout_section(doc, grid=heldout_grid, k=heldout_k, n_boot=n_boot, seed=seed, cache_dir=heldout_cache_dir)

    step(STEPS[9])
    return _page(doc, logs, st)


def _heldout_section(doc: _Html, *, grid: str, k: int, n_boot: int, seed: int, cache_dir) -> None:
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
    doc.raw(_fmt_table(res.comparison(), digits=3))
    doc.raw("<details><summary>Models</summary>" + _fmt_table(res.table()) + "</details>")


def _data_section(doc: _Html, logs: Logs, summary, discount: str) -> None:
    doc.h2("data", "Data")
    doc.raw("<pre>" + html.escape(summary.to_text()) + "</pre>")
    max_rank = min(logs.max_rank, 60)
    curves = {"learnt PBM (session survival)": parse_discount("pbm", logs=logs).table(max_rank),
              "1/log₂(r+1)": parse_discount("log2").table(max_rank),
              "0.85^(r−1)": parse_discount("exponential:0.85").table(max_rank)}
    if discount not in ("pbm", "log2"):
        curves[discount] = parse_discount(discount, logs=logs).table(max_rank)
    doc.fig(charts.pbm_curve_figure(curves))


def _page(doc: _Html, logs: Logs, st: ReportSettings) -> str:
    settings = {"logs": logs.source, "rewards": ", ".join(st.rewards), "target policy": st.policy,
                "discount = exposure model": st.discount, "clip grid": ", ".join(clip_text(c) for c in st.clips),
                "Q̂ clip (correlation, DCG vs nDCG, decisions)": clip_text(st.q_clip),
                "sensitivity CI level": f"{st.sensitivity_level:.0%}",
                "online significance (Welch, two-sided)": f"p < {st.online_alpha:g}",
                "decision CI level": f"{st.decision_level:.0%}", "bootstrap resamples / seed": f"{st.n_boot} / {st.seed}",
                "offline estimates on": "control-arm sessions (logging policy)",
                "nDCG when iDCG = 0": "counts 0",
                "held-out section (App. A)": (f"simulated zoo, {st.heldout_grid} grid, k = {st.heldout_k}"
                                              if st.heldout else "off (--heldout)"),
                "generated": _dt.datetime.now().strftime("%Y-%m-%d %H:%M")}
    rows = "".join(f"<tr><th>{html.escape(k)}</th><td>{html.escape(str(v))}</td></tr>" for k, v in settings.items())
    notes = "".join(f'<p class="note">{html.escape(n)}</p>' for n in st.notes)
    nav = "".join(f'<a href="#{a}">{t}</a>' for a, t in (
        ("settings", "Settings"), ("data", "Data"), ("sensitivity", "Sensitivity"), ("correlation", "Correlation"),
        ("dcg-ndcg", "DCG vs nDCG"), ("decisions", "Decisions"), ("clip-tuning", "Clip tuning"))
        + ((("heldout", "Held-out (App. A)"),) if st.heldout else ()))
    return ("<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'><title>offeval report</title>"
            f"<style>{CSS}</style><script type='text/javascript'>{plotly.offline.get_plotlyjs()}</script></head>"
            f"<body><h1>Offline evaluation report</h1><nav>{nav}</nav>"
            f"<h2 id='settings'>Settings</h2><table class='tbl'>{rows}</table>{notes}"
            + "".join(doc.parts) + "</body></html>")


def write_report(logs: Logs, out, **kwargs) -> dict:
    """Build the report and write it to ``out``; returns {"path", "bytes", "figures"}."""
    from pathlib import Path

    text = build_report(logs, **kwargs)
    path = Path(out)
    if path.parent and not path.parent.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return {"path": str(path), "bytes": path.stat().st_size, "figures": text.count('class="fig"')}
