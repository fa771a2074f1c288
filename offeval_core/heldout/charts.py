"""Plotly figures for held-out evaluation: pure functions from a result object to a ``go.Figure``.

A dashboard page is a thin wrapper: call the (cached) analysis, then one of these functions.
"""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from offeval_core.errors import InputError
from offeval_core.heldout.analyses import EstimatorLab, MetricAgreement
from offeval_core.heldout.metrics import RunEvaluation
from offeval_core.stats import normal_quantile

__all__ = [
    "ESTIMATOR_COLORS", "ESTIMATOR_LABELS", "ESTIMATOR_ORDER", "REFERENCE_COLOR", "TITLE_WRAP",
    "agreement_scatter", "heldout_metrics_chart", "lab_bias_chart", "lab_estimates_chart", "lab_tau_chart",
    "tau_vs_strata_chart",
]


ESTIMATOR_LABELS = {"naive": "Naive", "snips": "SNIPS", "gs": "GS", "ips": "IPS (true P, n_u)"}
#: display order of the estimators in every lab chart (unknown names follow in order of appearance)
ESTIMATOR_ORDER = ("naive", "snips", "gs", "ips")
#: one fixed colour per estimator in every lab chart (Okabe-Ito palette, colour-blind safe)
ESTIMATOR_COLORS = {"naive": "#E69F00", "snips": "#56B4E9", "gs": "#009E73", "ips": "#CC79A7"}
#: colour of reference lines such as y = x
REFERENCE_COLOR = "#777777"
#: titles longer than this many characters are split onto two lines
TITLE_WRAP = 80


def _ordered(estimators) -> list[str]:
    """Distinct estimator names in ``ESTIMATOR_ORDER``, any others after them in order of appearance."""
    seen = list(dict.fromkeys(estimators))
    return [e for e in ESTIMATOR_ORDER if e in seen] + [e for e in seen if e not in ESTIMATOR_ORDER]


def _style(e: str) -> dict:
    """Name, legend group and colour of estimator ``e``'s trace (the same in every lab chart)."""
    out = {"name": ESTIMATOR_LABELS.get(e, e), "legendgroup": e}
    if e in ESTIMATOR_COLORS:
        out["marker"] = {"color": ESTIMATOR_COLORS[e]}
    return out


def _wrap_title(head: str, tail: str) -> str:
    """``head — tail`` on one line when short, else ``head`` and ``tail`` on two lines."""
    one = f"{head} — {tail}"
    return one if len(one) <= TITLE_WRAP else f"{head}<br>{tail}"


def agreement_scatter(result: MetricAgreement, *, max_pair_lines: int = 60) -> go.Figure:
    """DCG@k (x) vs nDCG@k (y), one point per model / run, coloured by family (KDD'24 Fig. 2). When the
    number of inverted pairs is at most ``max_pair_lines`` they are drawn as red segments."""
    a = result.agreement
    fig = go.Figure()
    names = np.array(result.names)
    fams = np.array(result.families)
    if a.n_inverted <= max_pair_lines:
        index = {n: i for i, n in enumerate(result.names)}
        xs, ys = [], []
        for p, q in a.inverted_pairs:
            i, j = index[p], index[q]
            xs += [result.dcg[i], result.dcg[j], None]
            ys += [result.ndcg[i], result.ndcg[j], None]
        if xs:
            fig.add_trace(go.Scatter(x=xs, y=ys, mode="lines", line={"color": "rgba(214,39,40,0.4)", "width": 1},
                                     name="inverted pair", hoverinfo="skip"))
    for fam in dict.fromkeys(result.families):
        sel = fams == fam
        fig.add_trace(go.Scatter(x=result.dcg[sel], y=result.ndcg[sel], mode="markers", name=fam,
                                 text=names[sel], hovertemplate="%{text}<br>DCG %{x:.4~g}<br>nDCG %{y:.4~g}"))
    ci = result.inverted_ci
    fig.update_layout(
        title=_wrap_title(f"DCG@{result.k} vs nDCG@{result.k} over {a.n} {result.source}",
                          f"Pearson r = {a.pearson_r:.2f}, Kendall τ = {a.kendall_tau:.2f}, inverted pairs "
                          f"{a.inverted_share:.1%} [{ci.low:.1%}, {ci.high:.1%}]"),
        xaxis_title=f"DCG@{result.k} (mean gain per user, {result.gain} gain)",
        yaxis_title=f"nDCG@{result.k} (mean per user, 0–1)",
        legend_title="family",
    )
    p = result.paper
    fig.add_annotation(
        xref="paper", yref="paper", x=0.01, y=0.99, showarrow=False, align="left",
        text=(f"paper ({p['dataset']}, {p['n_models']} models): r ≈ {p['pearson_r']}, τ ≈ {p['kendall_tau']}, "
              f"inverted ≈ {p['inverted_share']:.0%}"),
    )
    return fig


def heldout_metrics_chart(evaluations: list[RunEvaluation], metric: str) -> go.Figure:
    """One bar per run: mean of ``metric`` over users with its 95 % normal CI (± z_0.975 = 1.960 standard errors)."""
    names = [ev.run for ev in evaluations]
    means = [ev.estimates[metric].value for ev in evaluations]
    z = normal_quantile(0.95)
    ses = [z * ev.estimates[metric].stderr for ev in evaluations]
    fig = go.Figure(go.Bar(x=names, y=means, error_y={"type": "data", "array": ses}))
    n = evaluations[0].estimates[metric].n if evaluations else 0
    fig.update_layout(title=f"{metric} per run (mean over {n} users, 95 % normal CI)",
                      xaxis_title="run", yaxis_title=f"{metric} (mean per user)")
    return fig


def lab_tau_chart(lab: EstimatorLab) -> go.Figure:
    """Kendall τ between each estimator's model ranking and the MCAR truth's, per cut-off K, over seeds
    (GS paper Table 1 as box plots)."""
    df = lab.tau
    fig = go.Figure()
    for e in _ordered(df["estimator"]):
        sub = df[df["estimator"] == e]
        fig.add_trace(go.Box(x=[f"@{k}" for k in sub["k"]], y=sub["kendall_tau"], **_style(e),
                             line={"color": ESTIMATOR_COLORS.get(e)}))
    metric = "Recall" if lab.params["lam"] == "recall" else "DCG-type gain"
    fig.update_layout(boxmode="group", title=f"Kendall τ vs MCAR truth over {len(lab.params['seeds'])} seeds, "
                      f"{lab.params['n_models']} models ({metric}@K)",
                      xaxis_title="cut-off K", yaxis_title="Kendall τ (model ranking vs truth, −1…1)")
    return fig


def tau_vs_strata_chart(lab: EstimatorLab) -> go.Figure:
    """Kendall τ of GS vs the number of popularity strata (GS paper Fig. 1); 1 stratum = Naive."""
    df = lab.tau_strata
    fig = go.Figure(go.Box(x=df["n_strata"].astype(str), y=df["kendall_tau"], **_style("gs"),
                           line={"color": ESTIMATOR_COLORS["gs"]}))
    # categorical axis: the strata counts (1, 2, 5, 100, …) evenly spaced, in increasing order
    order = [str(n) for n in sorted(set(df["n_strata"]))] if len(df) else []
    fig.update_xaxes(type="category", categoryorder="array", categoryarray=order)
    fig.update_layout(title=f"GS: Kendall τ vs number of strata (K = {lab.params.get('strata_k', 100)}, "
                      f"{len(lab.params['seeds'])} seeds)",
                      xaxis_title="number of popularity strata", yaxis_title="Kendall τ vs MCAR truth (−1…1)")
    return fig


def lab_bias_chart(lab: EstimatorLab) -> go.Figure:
    """Mean bias (estimate − MCAR truth, averaged over models) per estimator and K, with the mean spread
    (standard deviation over seeds) as error bars."""
    s = lab.summary
    fig = go.Figure()
    for e in _ordered(s["estimator"]):
        sub = s[s["estimator"] == e].sort_values("k")
        fig.add_trace(go.Bar(x=[f"@{k}" for k in sub["k"]], y=sub["mean_bias"], **_style(e),
                             error_y={"type": "data", "array": sub["spread"].to_numpy()}))
    fig.update_layout(barmode="group", title="Bias vs MCAR truth (bars) and spread over seeds (error bars)",
                      xaxis_title="cut-off K", yaxis_title="estimate − truth (metric units)")
    return fig


def lab_estimates_chart(lab: EstimatorLab, *, k: int) -> go.Figure:
    """Estimated vs true (MCAR) metric per model at cut-off ``k``, averaged over seeds; the diagonal is
    perfect estimation."""
    df = lab.estimates[lab.estimates["k"] == k]
    if df.empty:
        raise InputError(f"k must be one of the lab's cut-offs {lab.params['ks']}, got {k}")
    g = df.groupby(["estimator", "model"])[["estimate", "truth_mcar"]].mean().reset_index()
    fig = go.Figure()
    for e in _ordered(g["estimator"]):
        sub = g[g["estimator"] == e]
        fig.add_trace(go.Scatter(x=sub["truth_mcar"], y=sub["estimate"], mode="markers", **_style(e),
                                 text=sub["model"]))
    lo, hi = float(g[["estimate", "truth_mcar"]].min().min()), float(g[["estimate", "truth_mcar"]].max().max())
    fig.add_trace(go.Scatter(x=[lo, hi], y=[lo, hi], mode="lines", name="y = x",
                             line={"dash": "dot", "color": REFERENCE_COLOR}, hoverinfo="skip"))
    name = "Recall" if lab.params["lam"] == "recall" else "DCG-type gain"
    fig.update_layout(title=f"{name}@{k}: MNAR estimate vs MCAR truth per model (mean over seeds)",
                      xaxis_title=f"MCAR truth {name}@{k} (mean per user)",
                      yaxis_title=f"estimate on MNAR test {name}@{k}")
    return fig
