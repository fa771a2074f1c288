"""KDD'24 Table 2 at projector size: one row per metric variant, one dot per (experiment, policy) cell with its
correlation across days, the median and the middle half over the rows the headline ranks on (Rₜ's) drawn over
them — readable with 40 rows of Table 2 where the full heatmap is not. Identity cells (the offline value is the online reward itself, r = 1 by
construction) are left out, as they are from every ranking.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from offeval_core.charts import FONT, OKABE_ITO
from offeval_core.formatting import format_p

__all__ = ["correlation_summary_figure"]

SYMBOLS = {"pearson": "Pearson r", "kendall": "Kendall τ", "spearman": "Spearman ρ"}
POLICY_COLOURS = (OKABE_ITO[0], "#777777")


def correlation_summary_figure(result) -> go.Figure:
    """A dot plot of a :class:`~offeval_core.analyses.correlation.CorrelationResult`: y = metric variant (in the
    table's column order), x = the correlation of one (experiment, reward, policy) row; a diamond marks the
    variant's median and a black bar the middle half over the rows the headline ranks on
    (``result.headline_rows()``: Rₜ's, every variant on the same rows). Dots are spread vertically by policy
    (Rₜ above R₀) so the two sets stay apart."""
    t = result.table
    t = t[~t["identity"].astype(bool) & t["r"].notna()]
    labels = [v for v in result.labels if v in set(t["variant"])] or list(dict.fromkeys(t["variant"]))
    sym = SYMBOLS.get(result.method, "r")
    fig = go.Figure()
    policies = list(dict.fromkeys(t["policy_label"]))
    order = {v: i for i, v in enumerate(labels)}
    for k, pol in enumerate(sorted(policies, key=lambda p: 0 if "ₜ" in str(p) else 1)):
        part = t[t["policy_label"] == pol]
        offset = 0.14 if k == 0 else -0.14
        ys = np.array([order[v] for v in part["variant"]], dtype=float) + offset
        hover = [f"{e} · {r} · {pol}<br>{sym} = {x:.3f}, p {_p(p)}" for e, r, x, p in
                 zip(part["experiment_id"], part["reward"], part["r"], part["p_value"], strict=True)]
        fig.add_trace(go.Scatter(x=part["r"], y=ys, mode="markers", name=f"{pol} ({len(part)} cells)",
                                 marker={"color": POLICY_COLOURS[k % 2], "size": 8, "opacity": 0.65},
                                 text=hover, hovertemplate="%{text}<extra></extra>"))
    # the medians are the headline's: over the same rows (Rₜ's when there are, every variant on the same rows)
    rows = result.headline_rows()
    common = rows.r if rows is not None else pd.DataFrame()
    ranked = [v for v in labels if v in common.columns]
    med = [float(np.median(common[v])) for v in ranked]
    lo = [float(np.quantile(common[v], 0.25)) for v in ranked]
    hi = [float(np.quantile(common[v], 0.75)) for v in ranked]
    ys = np.array([order[v] for v in ranked], dtype=float)
    who = f"the {len(common)} rows of {rows.who}" if rows is not None else "no row"
    fig.add_trace(go.Scatter(x=med, y=ys, mode="markers", name=f"median of {who} (bar: middle half)",
                             marker={"symbol": "diamond", "size": 13, "color": "black"},
                             error_x={"type": "data", "symmetric": False, "array": np.subtract(hi, med),
                                      "arrayminus": np.subtract(med, lo), "color": "black", "thickness": 2.5,
                                      "width": 0},
                             customdata=np.column_stack([lo, hi]) if ranked else None,
                             hovertemplate="median %{x:.2f}, middle half %{customdata[0]:.2f} – %{customdata[1]:.2f}"
                                           "<extra></extra>"))
    fig.add_vline(x=0, line={"color": "#999999", "width": 1})
    fig.update_yaxes(tickvals=list(range(len(labels))), ticktext=labels, autorange="reversed", automargin=True)
    fig.update_xaxes(range=[-1.05, 1.05], title_text=f"{sym} across days: offline estimate vs online reward")
    target = getattr(result, "target", "")
    n_rows = t[["experiment_id", "reward", "policy_label"]].drop_duplicates().shape[0]
    title = (f"Offline-online correlation per variant — {n_rows} (experiment, policy) rows"
             f"{', Rₜ = ' + target if target else ''}")
    height = 140 + 70 * max(1, len(labels))
    fig.update_layout(template="plotly_white", title={"text": title, "x": 0.0, "xanchor": "left"}, font=FONT,
                      height=height + 70, margin={"l": 70, "r": 30, "t": 70, "b": 110},
                      legend={"orientation": "h", "yanchor": "top", "y": -0.35, "x": 0, "xanchor": "left"})
    return fig


def _p(p: float) -> str:
    text = format_p(p)
    return text if text.startswith("<") else f"= {text}"
