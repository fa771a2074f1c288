"""Plotly figures of the analyses: pure functions from a result object to a ``plotly.graph_objects.Figure``.

One visual language everywhere: a white template, a title that states the question, axis titles with
units, the colour-blind-safe Okabe-Ito palette (one fixed colour per metric and per decision category),
and a log2 clip axis with an "∞" tick for m = ∞ (placed one gap to the right of the largest finite m).
Figures only read attributes of the result objects, so this module imports no analysis code.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from offeval_core.errors import InputError, UnknownName
from offeval_core.formatting import CORRELATION_SYMBOLS, HOVER_NUMBER, format_coefficient, format_p
from offeval_core.labels import label_annotations, place_labels
from offeval_core.validation import format_clip

__all__ = [
    "CAP_AXIS", "DECISION_CAPTION", "DECISION_COLOURS", "DECISION_COLOUR_NAMES", "DECISION_DASH", "DECISION_LABELS", "FONT",
    "INF_GAP", "METRIC_COLOURS", "METRIC_LABELS", "OKABE_ITO", "agreement_figure", "clip_positions",
    "clip_tuning_figure", "correlation_clip_figure", "correlation_figure", "correlation_series_figure", "decision_figure",
    "pbm_curve_figure", "sensitivity_figure", "warm_plotly",
]


OKABE_ITO = ("#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#F0E442", "#000000")
"""Okabe & Ito's colour-blind-safe palette: blue, vermillion, green, purple, orange, sky, yellow, black."""
METRIC_COLOURS = {"dcg": "#0072B2", "ndcg": "#D55E00", "pndcg": "#009E73",
                  "is": "#E69F00", "snips": "#56B4E9", "cis": "#CC79A7", "ncis": "#000000"}
METRIC_LABELS = {"dcg": "DCG", "ndcg": "nDCG", "pndcg": "pnDCG", "is": "IS", "snips": "SNIPS", "cis": "CIS",
                 "ncis": "NCIS"}
CAP_AXIS = "cap c of the weights π_t / π_p (log₂ scale)"
"""The clip axis of estimators with the logged propensities: the cap c plays the role of m (Gilotte Sec. 4.2)."""
DECISION_COLOURS = {"agree": "#009E73", "false positive": "#E69F00", "false negative": "#CC79A7",
                    "other": "#999999"}
"""Okabe-Ito: bluish green = same decision, orange = false positive, reddish purple = false negative (told
apart from orange with every colour-vision deficiency), grey = any other disagreement."""
DECISION_COLOUR_NAMES = {"agree": "green", "false positive": "orange", "false negative": "purple",
                         "other": "grey"}
DECISION_DASH = {"agree": "dot", "false positive": "dash", "false negative": "solid", "other": "longdashdot"}
DECISION_LABELS = {"agree": "same decision", "false positive": "false positive",
                   "false negative": "false negative", "other": "other disagreement"}
DECISION_CAPTION = ("Green: same decision offline and online; orange: false positive (offline says ship, "
                    "online does not); purple: false negative (online says ship, offline misses it); grey: any "
                    "other disagreement (one side negative, the other neutral).")
FONT = {"family": "Inter, Helvetica, Arial, sans-serif", "size": 13}
INF_GAP = 2.0  # log2 units between the largest finite clip and the "∞" tick
CLIP_TICKS = 6  # at most this many labelled ticks on a clip axis


def _layout(fig: go.Figure, title: str, *, height: int = 440) -> go.Figure:
    fig.update_layout(template="plotly_white", title={"text": title, "x": 0.0, "xanchor": "left"},
                      font=FONT, height=height + 70, margin={"l": 70, "r": 30, "t": 70, "b": 150},
                      legend={"orientation": "h", "yanchor": "top", "y": -0.3, "x": 0, "xanchor": "left"})
    return fig


def warm_plotly() -> None:
    """Build and serialise a throwaway figure in the charts' layout: Plotly builds its template and property
    validators on first use (about a quarter of a second), so a server calls this before the first chart a user
    waits for."""
    from plotly.subplots import make_subplots

    fig = make_subplots(rows=1, cols=2)
    fig.add_trace(go.Scatter(x=[0.0], y=[0.0], error_y={"array": [0.0]}), row=1, col=1)
    _layout(fig, "").to_plotly_json()


def clip_positions(clips) -> tuple[np.ndarray, list[float], list[str]]:
    """x positions (log2 m; ∞ one gap past the largest finite m), tick values and tick texts.

    >>> pos, ticks, text = clip_positions([1, 4, float("inf")])
    >>> pos.tolist(), text       # log2(1) = 0, log2(4) = 2, ∞ placed at 2 + 2
    ([0.0, 2.0, 4.0], ['1', '4', '∞'])
    """
    clips = np.asarray(list(clips), dtype=float)
    finite = clips[np.isfinite(clips)]
    top = float(np.log2(finite.max())) if finite.size else -INF_GAP
    pos = np.where(np.isfinite(clips), np.log2(np.where(np.isfinite(clips), clips, 1.0)), top + INF_GAP)
    uniq = sorted(set(clips.tolist()))
    ticks = [float(np.log2(c)) if math.isfinite(c) else top + INF_GAP for c in uniq]
    text = [format_clip(c, symbol=True) for c in uniq]
    return pos, ticks, text


def mark_clip(fig: go.Figure, m: float, clips, *, subplots: bool = False) -> go.Figure:
    """A copy of ``fig`` with the clip value ``m`` drawn as a dotted vertical line on every clip axis (on
    the first only unless ``subplots``) and labelled ``m = …``; ``fig`` itself is unchanged (it may be a
    cached figure). A value not in ``clips`` gives an unmarked copy."""
    out = go.Figure(fig.to_dict(), _validate=False)  # a copy of an already valid figure: ~5x faster unchecked
    clips = list(clips)
    if m not in clips:
        return out
    pos, _, _ = clip_positions(clips)
    x = float(pos[clips.index(m)])
    axes = sorted(k for k in out.layout.to_plotly_json() if k.startswith("xaxis")) if subplots else ["xaxis"]
    line = {"dash": "dot", "color": "#444", "width": 1.5}
    for ax in axes or ["xaxis"]:
        ref = "x" + ax[5:]
        out.add_shape(type="line", x0=x, x1=x, y0=0, y1=1, xref=ref, yref=f"y{ax[5:]} domain", line=line)
    out.add_annotation(x=x, y=1.0, xref="x", yref="y domain", text=f" m = {format_clip(m, symbol=True)}",
                       showarrow=False, yanchor="top", xanchor="left", font={"size": 12, "color": "#444"},
                       bgcolor="rgba(255,255,255,0.8)")
    return out


def _clip_axis(fig, clips, *, row=None, col=None, title="clip value m (log₂ scale)"):
    _, ticks, text = clip_positions(clips)
    # at most CLIP_TICKS labels (every 2nd, 3rd… power of two, and ∞), so they stay upright and apart in a panel of
    # a two-panel chart at projector font size
    for stride in range(1, 8):
        keep = [i for i, (v, t) in enumerate(zip(ticks, text, strict=True)) if t == "∞" or round(v) % stride == 0]
        if len(keep) <= CLIP_TICKS:
            break
    ticks, text = [ticks[i] for i in keep], [text[i] for i in keep]
    fig.update_xaxes(tickvals=ticks, ticktext=text, tickangle=0, title_text=title, row=row, col=col)


# ---------------------------------------------------------------------------------------- sensitivity


def _narrow_log_ticks(values) -> tuple[list[float], list[str]] | None:
    """Ticks for a log axis whose positive values span less than a decade: five values evenly spaced in log from
    the smallest to the largest, at the fewest significant digits (at least 2) that tell them apart; None for a
    wider span, where plotly's own ticks, labelled to 2 digits, are distinct.

    Between 0.5405 and 0.561 (the steps are ratios of (0.561 / 0.5405)^¼ ≈ 1.0094) two digits give 0.54, 0.55,
    0.55, 0.56, 0.56; three tell them apart:

    >>> _narrow_log_ticks([0.5405, 0.561])[1]
    ['0.54', '0.546', '0.551', '0.556', '0.561']
    """
    v = np.asarray(values, dtype=float)
    v = v[np.isfinite(v) & (v > 0)]
    if not len(v) or v.max() >= 10 * v.min():
        return None
    lo, hi = float(v.min()), float(v.max())
    if lo == hi:
        return [lo], [f"{lo:.2g}"]
    raw = np.geomspace(lo, hi, 5)
    for digits in range(2, 10):
        text = [f"{x:.{digits}g}" for x in raw]
        if len(set(text)) == len(text):
            return [float(x) for x in text], text
    return [float(x) for x in raw], [f"{x:.10g}" for x in raw]


def sensitivity_figure(result) -> go.Figure:
    """KDD'24 Fig. 1: (a) TPR vs clip m (or, for online negatives, the share of negatives detected), (b) mean
    one-sided p-value vs m (log y); one line per metric, every best m of each metric marked with a star (all
    tied ones; none on a flat line)."""
    t = result.table
    rate, rate_name = result.rate_column, result.rate_name
    first = "(a) true-positive rate" if rate == "tpr" else f"(a) {rate_name}"
    fig = make_subplots(rows=1, cols=2, horizontal_spacing=0.12,
                        subplot_titles=(first, "(b) mean p-value (log scale)"))
    for metric in dict.fromkeys(t["metric"]):
        part = t[t["metric"] == metric].sort_values("clip")
        pos, _, _ = clip_positions(part["clip"])
        colour = METRIC_COLOURS.get(metric, OKABE_ITO[3])
        name = METRIC_LABELS.get(metric, metric)
        clip_txt = [format_clip(c, symbol=True) for c in part["clip"]]
        custom = np.column_stack([clip_txt, part["n_detected"], part["n_settings"], part["sign_agreement"]])
        short = "TPR" if rate == "tpr" else "detected"
        fig.add_trace(go.Scatter(x=pos, y=part[rate], mode="lines+markers", name=name, legendgroup=metric,
                                 line={"color": colour}, customdata=custom,
                                 hovertemplate="m = %{customdata[0]}<br>" + short + " %{y:.0%} (%{customdata[1]} "
                                               "of %{customdata[2]})<br>sign agreement %{customdata[3]:.0%}"
                                               "<extra>" + name + "</extra>"), row=1, col=1)
        fig.add_trace(go.Scatter(x=pos, y=part["mean_p"], mode="lines+markers", name=name, legendgroup=metric,
                                 showlegend=False, line={"color": colour}, customdata=custom,
                                 hovertemplate="m = %{customdata[0]}<br>mean p %{y:.2g}<extra>" + name
                                               + "</extra>"), row=1, col=2)
        best = tuple(result.best_clips.get(metric, ()))
        if best:
            hit = part["clip"].isin(best).to_numpy()
            label = f"best m for {name}" + (" (tied)" if len(best) > 1 else "")
            fig.add_trace(go.Scatter(x=pos[hit], y=part[rate][hit], mode="markers", name=label,
                                     legendgroup=metric, marker={"symbol": "star", "size": 16, "color": colour,
                                                                 "line": {"color": "black", "width": 1}},
                                     hovertemplate=label + "<extra></extra>"), row=1, col=1)
    clips = t["clip"].unique() if len(t) else [1.0]
    propensity = result.discount == "propensity"
    for c in (1, 2):
        _clip_axis(fig, clips, row=1, col=c, **({"title": CAP_AXIS} if propensity else {}))
    ylab = "TPR (share of settings)" if rate == "tpr" else f"{rate_name} (share)"
    fig.update_yaxes(title_text=ylab, range=[-0.03, 1.03], tickformat=".0%", row=1, col=1)
    fig.update_yaxes(title_text="mean one-sided p-value", type="log", tickformat=".2g", row=1, col=2)  # full labels
    ticks = _narrow_log_ticks(t["mean_p"]) if len(t) else None
    if ticks is not None:  # within a decade plotly's own ticks repeat a label at 2 digits (0.56, 0.56, 0.55…)
        fig.update_yaxes(tickvals=ticks[0], ticktext=ticks[1], row=1, col=2)
    n = int(t["n_settings"].max()) if len(t) else 0
    what = ("online improvement" if rate == "tpr" else "online negative") + "s" * (n != 1)
    weights = "weights π_t / π_p" if propensity else result.discount
    title = (f"Offline sensitivity vs clipping — {n} {what}, {result.level:.0%} CI "
             f"(policy {result.policy}, {weights})")
    return _layout(fig, title)


# ---------------------------------------------------------------------------------------- correlation


def correlation_figure(result) -> go.Figure:
    """KDD'24 Table 2 as a heatmap: rows (experiment, reward, policy), columns metric variants, colour = r
    (diverging, −1 … 1), cell text r with † where p < 0.05 and a box around the best variant of each row."""
    t = result.table
    rows = list(dict.fromkeys(zip(t["experiment_id"], t["reward"], t["policy_label"], strict=True)))
    cols = list(dict.fromkeys(t["variant"]))
    z = np.full((len(rows), len(cols)), np.nan)
    text = np.full((len(rows), len(cols)), "", dtype=object)
    pvals = np.full((len(rows), len(cols)), np.nan)
    ri = {r: i for i, r in enumerate(rows)}
    ci = {c: j for j, c in enumerate(cols)}
    best_x, best_y = [], []
    ptext = np.full((len(rows), len(cols)), "", dtype=object)
    for rec in t.itertuples(index=False):
        i, j = ri[(rec.experiment_id, rec.reward, rec.policy_label)], ci[rec.variant]
        identity = bool(getattr(rec, "identity", False))
        # an identity (the offline value is the online reward itself, r = 1 by construction) is not a finding:
        # its cell is left uncoloured, marked ≡
        z[i, j] = np.nan if identity else rec.r
        pvals[i, j] = rec.p_value
        ptext[i, j] = "identity (r = 1 by construction)" if identity else f"p {_p_hover(rec.p_value)}"
        text[i, j] = "≡" if identity else ("–" if np.isnan(rec.r) else f"{rec.r:.2f}" + ("†" if rec.significant else ""))
        if rec.best:
            best_x.append(rec.variant)
            best_y.append(" · ".join(map(str, (rec.experiment_id, rec.reward, rec.policy_label))))
    ylabels = [" · ".join(map(str, r)) for r in rows]
    sym = {"pearson": "Pearson r", "kendall": "Kendall τ", "spearman": "Spearman ρ"}[result.method]
    fig = go.Figure(go.Heatmap(z=z, x=cols, y=ylabels, text=text, texttemplate="%{text}", zmin=-1, zmax=1,
                               colorscale="RdBu", customdata=ptext, colorbar={"title": {"text": sym}},
                               hoverongaps=True, hovertemplate="%{y}<br>%{x}<br>" + sym + " = %{z:.3f}, %{customdata}"
                                                               "<extra></extra>"))
    fig.add_trace(go.Scatter(x=best_x, y=best_y, mode="markers", name="best in row",
                             marker={"symbol": "square-open", "size": 34, "color": "black",
                                     "line": {"width": 2}}, hoverinfo="skip"))
    fig.update_yaxes(autorange="reversed", title_text="experiment · reward · policy")
    fig.update_xaxes(title_text="offline metric variant", side="bottom")
    target = getattr(result, "target", "")
    title = f"Offline-online correlation across days ({sym}; † p < 0.05){' — Rₜ = ' + target if target else ''}"
    return _layout(fig, title, height=max(360, 120 + 34 * len(rows)))


def _p_hover(p: float) -> str:
    """A p-value in hover text: ``= 0.0432`` or ``< 0.001``."""
    text = format_p(p)
    return text if text.startswith("<") else f"= {text}"


def correlation_clip_figure(result) -> go.Figure:
    """KDD'24 Table 2 across clip values (:func:`~offeval_core.analyses.correlation_clip.correlation_by_clip`):
    pooled correlation vs m for DCG (learnt model, Q̂) and DCG (log2, Q̂), raw labels (m = 1) at the left end of
    both lines, the clips where the learnt model's line is above both log2 variants filled."""
    t = result.table.sort_values("clip")
    sym = CORRELATION_SYMBOLS[result.method]
    fig = go.Figure()
    colours = {result.model: OKABE_ITO[0], "log2": OKABE_ITO[1]}
    for d in (result.model, "log2"):
        part = t[t["discount"] == d]
        pos, _, _ = clip_positions(part["clip"])
        name = f"DCG ({d}, Q̂ at m; C at m = 1)"
        custom = np.column_stack([[format_clip(c, symbol=True) for c in part["clip"]], part["median_r"],
                                  part["n_points"]])
        fig.add_trace(go.Scatter(x=pos, y=part["r"], mode="lines+markers", name=name, line={"color": colours[d]},
                                 customdata=custom,
                                 hovertemplate="m = %{customdata[0]}<br>pooled " + sym + " = %{y:.3f} over "
                                               "%{customdata[2]} experiment-days<br>median per experiment "
                                               "%{customdata[1]:.2f}<extra>" + name + "</extra>"))
    if result.holds:
        held = t[(t["discount"] == result.model) & t["clip"].isin(result.holds)]
        pos = clip_positions(t["clip"])[0][(t["discount"] == result.model).to_numpy()
                                           & t["clip"].isin(result.holds).to_numpy()]
        fig.add_trace(go.Scatter(x=pos, y=held["r"], mode="markers", name="Table 2's finding holds",
                                 marker={"symbol": "star", "size": 15, "color": OKABE_ITO[0],
                                         "line": {"color": "black", "width": 1}},
                                 hovertemplate="the finding holds at this m<extra></extra>"))
    _clip_axis(fig, t["clip"].unique())
    fig.update_yaxes(title_text=f"pooled {sym}: offline vs online", tickformat=".2f")
    n = int(t["n_points"].max()) if len(t) else 0
    return _layout(fig, f"Table 2 across clip values — {result.reward}, {n} experiment-days of Rₜ = {result.policy}",
                   height=380)


def _padded(values, share: float = 0.08) -> tuple[float, float]:
    """An axis range around ``values`` with ``share`` of their span (or of their size) on each side."""
    v = np.asarray(values, dtype=float)
    v = v[np.isfinite(v)]
    if not v.size:
        return (0.0, 1.0)
    lo, hi = float(v.min()), float(v.max())
    pad = share * ((hi - lo) or abs(hi) or 1.0)
    return (lo - pad, hi + pad)


def _normalised(variant_label: str) -> bool:
    return variant_label.lower().startswith(("ndcg", "pndcg"))


def correlation_series_figure(series: pd.DataFrame) -> go.Figure:
    """Day-by-day online mean reward and each DCG-type offline estimate on one axis (same units: reward per
    session); normalised variants (nDCG) on a right-hand axis."""
    meta = dict(series.attrs)
    fig = make_subplots(specs=[[{"secondary_y": True}]])
    fig.add_trace(go.Scatter(x=series["day"], y=series["online"], mode="lines+markers", name="online reward",
                             line={"color": "black", "width": 3}), secondary_y=False)
    variants = [c for c in series.columns if c not in ("day", "online")]
    rs = meta.get("r", {})
    for k, v in enumerate(variants):
        r = rs.get(v, math.nan)
        name = v if (r is None or np.isnan(r)) else f"{v} (r = {r:.2f})"
        # DCG-type estimates are in the online reward's units (reward per session): same axis, so equal values
        # sit at equal heights; normalised metrics (nDCG, in [0, 1]) get the right-hand axis
        fig.add_trace(go.Scatter(x=series["day"], y=series[v], mode="lines+markers", name=name,
                                 line={"color": OKABE_ITO[k % len(OKABE_ITO)], "dash": "dash"}),
                      secondary_y=_normalised(v))
    fig.update_yaxes(title_text=f"{meta.get('reward', 'reward')} per session (online and DCG-type offline)",
                     secondary_y=False)
    if any(_normalised(v) for v in variants):
        fig.update_yaxes(title_text="normalised offline metric (0–1)", secondary_y=True, showgrid=False,
                         tickmode="auto", nticks=6, tickformat=".3~g")  # own round ticks, not the left grid's
    fig.update_xaxes(title_text="day")
    label, policy = meta.get("policy_label", ""), meta.get("policy", "")
    title = (f"Online vs offline by day — {meta.get('experiment_id', '')}, {meta.get('reward', '')}, "
             f"{f'{label} ({policy})' if label and policy else label or policy}")
    return _layout(fig, title)


# ---------------------------------------------------------------------------------------- DCG vs nDCG


def agreement_figure(result) -> go.Figure:
    """KDD'24 Fig. 2: one point per policy, DCG (x) vs nDCG (y), least-squares line, and the pairs whose
    order nDCG inverts drawn as segments (toggle in the legend)."""
    pts = result.points
    fig = go.Figure()
    x, y = pts["dcg"].to_numpy(float), pts["ndcg"].to_numpy(float)
    if len(pts) >= 2 and np.ptp(x) > 0:
        slope, icept = np.polyfit(x, y, 1)
        xs = np.array([x.min(), x.max()])
        fig.add_trace(go.Scatter(x=xs, y=icept + slope * xs, mode="lines", name="least-squares fit",
                                 line={"color": "#999999", "dash": "dash"}, hoverinfo="skip"))
    seg_x, seg_y = [], []
    pos = {p: (a, b) for p, a, b in zip(pts["policy"], x, y, strict=True)}
    for a, b in zip(result.inverted_pairs["better_by_dcg"], result.inverted_pairs["better_by_ndcg"],
                    strict=True):
        seg_x += [pos[a][0], pos[b][0], None]
        seg_y += [pos[a][1], pos[b][1], None]
    n_inv = len(result.inverted_pairs)
    fig.add_trace(go.Scatter(x=seg_x, y=seg_y, mode="lines", name=f"inverted pairs ({n_inv})",
                             line={"color": METRIC_COLOURS["ndcg"], "width": 1}, opacity=0.5,
                             hoverinfo="skip", visible=True if n_inv <= 40 else "legendonly"))
    fig.add_trace(go.Scatter(x=x, y=y, mode="markers", name="policy", marker={"color": METRIC_COLOURS["dcg"], "size": 10},
                             customdata=pts["policy"],
                             hovertemplate="%{customdata}<br>DCG %{x" + HOVER_NUMBER + "}<br>nDCG %{y" + HOVER_NUMBER
                                           + "}<extra></extra>"))
    if len(pts):
        xr, yr = _padded(x), _padded(y)
        fig.update_xaxes(range=list(xr))
        fig.update_yaxes(range=list(yr))
        names = [str(p) for p in pts["policy"]]
        placed = place_labels(x, y, names, x_range=xr, y_range=yr, max_labels=15)
        fig.layout.annotations = (*fig.layout.annotations, *label_annotations(x, y, names, placed))
    fig.update_xaxes(title_text="DCG (mean per session; ≈ reward per session)")
    fig.update_yaxes(title_text="nDCG (mean per session, 0–1)")
    title = (f"DCG vs nDCG over {len(pts)} policies — r = {format_coefficient(result.pearson)}, "
             f"τ = {format_coefficient(result.kendall)}, "
             f"{100 * result.inverted_share:.0f} % of pairs inverted")
    return _layout(fig, title, height=500)


# ---------------------------------------------------------------------------------------- decisions


def decision_figure(result, estimator: str | None = None) -> go.Figure:
    """Gilotte Fig. 4/5: one box per A/B test, x-extent the offline uplift CI, y-extent the online uplift CI,
    coloured by decision agreement (green same, orange false positive, purple false negative, grey other),
    each labelled by its A/B test; the diagonal offline = online and the zero lines drawn."""
    boxes = result.boxes
    est = estimator or result.estimators[0]
    if est not in set(boxes["estimator"]):
        raise UnknownName(f"estimator {est!r} is not in the result; available: {', '.join(result.estimators)}")
    b = boxes[boxes["estimator"] == est]
    fig = go.Figure()
    for cat in DECISION_COLOURS:
        part = b[b["category"] == cat]
        xs, ys, cx, cy, labels = [], [], [], [], []
        for r in part.itertuples(index=False):
            xs += [r.offline_low, r.offline_high, r.offline_high, r.offline_low, r.offline_low, None]
            ys += [r.online_low, r.online_low, r.online_high, r.online_high, r.online_low, None]
            cx.append(r.offline_effect)
            cy.append(r.online_effect)
            labels.append(f"{r.experiment_id} · {r.reward}<br>offline {r.offline_decision}, "
                          f"online {r.online_decision}")
        if not cx:
            continue
        colour = DECISION_COLOURS[cat]
        fig.add_trace(go.Scatter(x=xs, y=ys, mode="lines", fill="toself", name=f"{DECISION_LABELS[cat]} ({len(cx)})",
                                 legendgroup=cat, line={"color": colour, "dash": DECISION_DASH[cat], "width": 2},
                                 fillcolor=_alpha(colour, 0.15), hoverinfo="skip"))
        fig.add_trace(go.Scatter(x=cx, y=cy, mode="markers", legendgroup=cat, showlegend=False,
                                 marker={"color": colour, "size": 7}, text=labels,
                                 hovertemplate="%{text}<br>offline %{x" + HOVER_NUMBER + "}, online %{y"
                                               + HOVER_NUMBER + "}<extra></extra>"))
    lo = float(np.nanmin([b["offline_low"].min(), b["online_low"].min(), 0.0])) if len(b) else -1.0
    hi = float(np.nanmax([b["offline_high"].max(), b["online_high"].max(), 0.0])) if len(b) else 1.0
    fig.add_trace(go.Scatter(x=[lo, hi], y=[lo, hi], mode="lines", name="offline = online",
                             line={"color": "black", "width": 1, "dash": "dash"}, hoverinfo="skip"))
    fig.add_hline(y=0, line={"color": "#666666", "width": 1})
    fig.add_vline(x=0, line={"color": "#666666", "width": 1})
    pad = 0.06 * ((hi - lo) or 1.0)
    fig.update_xaxes(range=[lo - pad, hi + pad])
    fig.update_yaxes(range=[lo - pad, hi + pad])
    _label_boxes(fig, b, x_range=(lo - pad, hi + pad), y_range=(lo - pad, hi + pad))
    unit = "relative uplift (%)" if result.relative else "uplift (per session)"
    fig.update_xaxes(title_text=f"offline {unit}, {result.level:.0%} CI")
    fig.update_yaxes(title_text=f"online {unit}, {result.level:.0%} CI")
    policy = getattr(result, "policy", "")
    return _layout(fig, f"Offline vs online decisions per A/B test — {policy + ', ' if policy else ''}{est}",
                   height=520)


BOX_LABELS = 12
"""At most this many decision boxes are labelled on the chart (disagreements first); the others name their
A/B test in the hover text of their centre point."""


def _label_boxes(fig: go.Figure, boxes: pd.DataFrame, *, x_range, y_range) -> None:
    """Name boxes by their A/B test next to their centre point, disagreements first, at most ``BOX_LABELS``,
    each label where it overlaps no other label or centre (:func:`offeval_core.labels.place_labels`)."""
    b = boxes.reset_index(drop=True)
    xs = b["offline_effect"].to_numpy(float)
    ys = b["online_effect"].to_numpy(float)
    several = b["reward"].nunique() > 1 if "reward" in b else False  # a test's boxes per reward: say which
    names = [f"{e} · {r}" if several else str(e) for e, r in zip(b["experiment_id"], b.get("reward", b["experiment_id"]),
                                                                   strict=True)]
    order = sorted(range(len(b)), key=lambda i: (b.loc[i, "category"] == "agree", names[i]))
    placed = place_labels(xs, ys, names, x_range=x_range, y_range=y_range, priority=order, max_labels=BOX_LABELS)
    colours = [DECISION_COLOURS[c] for c in b["category"]]
    # set at once: add_annotation one by one re-validates every earlier label (quadratic in the A/B tests)
    fig.layout.annotations = (*fig.layout.annotations,
                              *label_annotations(xs, ys, names, placed, colours=colours, prefix="box"))


def _alpha(hex_colour: str, a: float) -> str:
    h = hex_colour.lstrip("#")
    r, g, b = (int(h[i:i + 2], 16) for i in (0, 2, 4))
    return f"rgba({r},{g},{b},{a})"


# ---------------------------------------------------------------------------------------- clip tuning


def clip_tuning_figure(result) -> go.Figure:
    """Gilotte Fig. 2: standard error and worst-case bias bound of the clipped estimator vs the clip value
    (log y), with the estimated bias and √(MSE bound); right panel the clipped share and the ESS share.
    The recommended clip (``result.recommendation``, the one rule) is marked by a vertical line."""
    t = result.table.sort_values("clip")
    pos, _, _ = clip_positions(t["clip"])
    capped = getattr(result, "estimator", "dcg") == "cis"  # a propensity policy: CIS, the cap c of π_t / π_p
    fig = make_subplots(rows=1, cols=2, horizontal_spacing=0.12,
                        subplot_titles=("(a) error scales (log)", "(b) how much the clip touches"))
    lines = [("stderr", "standard error", OKABE_ITO[0], "solid"),
             ("bias_bound", "worst-case bias bound", OKABE_ITO[1], "solid"),
             ("bias_estimate", "estimated bias |IS − CIS(c)|" if capped else "estimated bias |DCG(∞) − DCG(m)|",
              OKABE_ITO[1], "dot"),
             ("rmse_bound", "√(variance + bias bound²)", OKABE_ITO[3], "dash")]
    for col, name, colour, dash in lines:
        vals = t[col].abs() if col == "bias_estimate" else t[col]
        vals = vals.where(vals > 0)  # log axis: zero is drawn as a gap
        fig.add_trace(go.Scatter(x=pos, y=vals, mode="lines+markers", name=name,
                                 line={"color": colour, "dash": dash}), row=1, col=1)
    for col, name, colour in (("clipped_mass", "share of target exposure clipped", OKABE_ITO[4]),
                              ("clipped_rows", "share of logged rows clipped", OKABE_ITO[5]),
                              ("ess_share", "effective sample size / rows", OKABE_ITO[2])):
        fig.add_trace(go.Scatter(x=pos, y=t[col], mode="lines+markers", name=name, line={"color": colour}),
                      row=1, col=2)
    rec = result.recommendation.clip
    rpos = float(pos[list(t["clip"]).index(rec)])  # the recommended m is one of the grid's values
    for c in (1, 2):
        _clip_axis(fig, t["clip"], row=1, col=c, **({"title": CAP_AXIS} if capped else {}))
        fig.add_vline(x=rpos, line={"color": "black", "dash": "dash", "width": 1}, row=1, col=c)
    rec_text = format_clip(rec, symbol=True)
    fig.add_annotation(x=rpos, y=0.98, yref="y2 domain", xref="x2", text=f" recommended m = {rec_text}",
                       showarrow=False, xanchor="left", yanchor="top", bgcolor="rgba(255,255,255,0.8)")
    fig.update_yaxes(type="log", dtick=1, exponentformat="power", title_text="per-session reward units",
                     row=1, col=1)
    fig.update_yaxes(title_text="share", tickformat=".0%", range=[-0.02, 1.02], row=1, col=2)
    title = (f"Bias and variance vs the cap c — {result.policy} (CIS, weights π_t / π_p), {result.reward}" if capped
             else f"Bias and variance vs the clip value — {result.policy}, {result.reward}, {result.discount}")
    return _layout(fig, title, height=460)


# ---------------------------------------------------------------------------------------- data page


def pbm_curve_figure(curves: Mapping[str, np.ndarray], *, max_rank: int | None = None) -> go.Figure:
    """Position-bias curves P(V = 1 | R = r) for ranks 1..n, e.g. the learnt PBM vs 1/log₂(r+1) vs p^(r−1).

    ``curves`` maps a legend name to the curve values for ranks 1, 2, …; all are drawn on one axis
    (log y, since learnt curves fall by orders of magnitude).
    """
    if not curves:
        raise InputError("curves must contain at least one named curve, got none")
    fig = go.Figure()
    for k, (name, values) in enumerate(curves.items()):
        v = np.asarray(values, dtype=float)
        if max_rank is not None:
            v = v[:max_rank]
        ranks = np.arange(1, v.size + 1)
        fig.add_trace(go.Scatter(x=ranks, y=np.where(v > 0, v, np.nan), mode="lines+markers", name=str(name),
                                 line={"color": OKABE_ITO[k % len(OKABE_ITO)]}, marker={"size": 5},
                                 hovertemplate="rank %{x}: %{y:.4g}<extra>" + str(name) + "</extra>"))
    fig.update_xaxes(title_text="rank r")
    fig.update_yaxes(title_text="P(V = 1 | R = r) (log scale)", type="log", dtick=1, exponentformat="power")
    return _layout(fig, "Position bias: probability of viewing rank r")
