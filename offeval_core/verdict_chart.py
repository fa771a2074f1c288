"""The "Which estimator?" answer as a chart: every estimator's value of the target policy with its confidence
interval, coloured by its verdict (trust / caution / don't), so the estimators that can be trusted on the loaded
logs and the ones that cannot are told apart at a glance (docs/diagnose.md)."""

from __future__ import annotations

import math

import numpy as np
import plotly.graph_objects as go

from offeval_core.charts import FONT
from offeval_core.formatting import HOVER_NUMBER
from offeval_core.stats import normal_quantile

__all__ = ["VERDICT_COLOURS", "verdict_figure"]

VERDICT_COLOURS = {"trust": "#009E73", "caution": "#E69F00", "don't": "#CC79A7"}
"""Okabe-Ito: bluish green = trust, orange = caution, reddish purple = don't."""


def verdict_figure(diagnosis) -> go.Figure:
    """One row per estimator of a :class:`~offeval_core.diagnose.Diagnosis`: its value (reward per session) with
    the normal CI at the diagnosis's level, value ± z · stderr, the marker coloured by its verdict; the reason in
    the hover."""
    level = diagnosis.level
    z = normal_quantile(level)
    ests = list(diagnosis.estimators)
    fig = go.Figure()
    names = [e.label for e in ests]
    for verdict, colour in VERDICT_COLOURS.items():
        part = [e for e in ests if e.verdict == verdict]
        if not part:
            continue
        err = [z * e.stderr if math.isfinite(e.stderr) else 0.0 for e in part]
        fig.add_trace(go.Scatter(
            x=[e.value for e in part], y=[e.label for e in part], mode="markers", name=f"{verdict} ({len(part)})",
            marker={"color": colour, "size": 12, "symbol": "circle"},
            error_x={"type": "data", "array": err, "color": colour, "thickness": 2, "width": 6},
            customdata=np.array([[e.reason, f"{e.ess_share:.0%}" if math.isfinite(e.ess_share) else "n/a"]
                                 for e in part], dtype=object),
            hovertemplate="%{y}: %{x" + HOVER_NUMBER + "}<br>ESS share %{customdata[1]}<br>%{customdata[0]}"
                          "<extra>" + verdict + "</extra>"))
    fig.update_yaxes(categoryorder="array", categoryarray=names[::-1], automargin=True)
    fig.update_xaxes(title_text=f"value of {diagnosis.policy or 'the target policy'} ({diagnosis.reward} per "
                                f"session), {level:.0%} CI")
    title = f"Which estimator? {len(ests)} estimators of {diagnosis.policy or 'the target'} on {diagnosis.reward}"
    fig.update_layout(template="plotly_white", title={"text": title, "x": 0.0, "xanchor": "left"}, font=FONT,
                      height=220 + 45 * max(1, len(ests)), margin={"l": 70, "r": 30, "t": 70, "b": 70},
                      legend={"orientation": "v", "yanchor": "top", "y": 1, "x": 1.01, "xanchor": "left",
                              "title": {"text": "verdict"}})
    return fig
