"""The forest plot of a comparison of candidates (:mod:`offeval_core.analyses.candidates`): a pure function from
the result to a plotly figure, in the visual language of :mod:`offeval_core.charts`.

Left: each candidate's offline estimate with its CI, the logging policy's estimate as a dashed line (one per
estimator). Right: the paired effect over the logging policy with its CI and the zero line. One row per
candidate, the largest effect on top; bluish green = beats the logging policy after the adjustment, vermillion =
CI below 0, grey = neither; a star marks the candidate to A/B test next.
"""

from __future__ import annotations

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from offeval_core.charts import OKABE_ITO, _layout

__all__ = ["FOREST_COLOURS", "candidates_figure"]

FOREST_COLOURS = {"beats": "#009E73", "below": "#D55E00", "neither": "#777777"}
FOREST_LABELS = {"beats": "beats the logging policy", "below": "below the logging policy (CI < 0)",
                 "neither": "not distinguishable from the logging policy"}


def _status(row) -> str:
    if bool(row["beats_logging"]):
        return "beats"
    if bool(row["below_logging"]):
        return "below"
    return "neither"


def candidates_figure(result) -> go.Figure:
    """Forest plot of a :class:`~offeval_core.analyses.candidates.CandidatesResult`: estimate and paired effect
    of every candidate with their CIs, side by side (rows share the y axis)."""
    t = result.table
    names = [str(p) for p in t["policy"]][::-1]  # plotly draws the first category at the bottom
    fig = make_subplots(rows=1, cols=2, shared_yaxes=True, horizontal_spacing=0.06,
                        subplot_titles=("(a) offline estimate", "(b) effect over the logging policy"))
    for status, colour in FOREST_COLOURS.items():
        part = t[[_status(r) == status for _, r in t.iterrows()]]
        if part.empty:
            continue
        y = part["policy"].astype(str)
        custom = list(zip(part["estimator"], part["p_adj"], strict=True))
        common = {"mode": "markers", "marker": {"color": colour, "size": 10}, "legendgroup": status, "y": y,
                  "customdata": custom}
        fig.add_trace(go.Scatter(x=part["estimate"], name=FOREST_LABELS[status],
                                 error_x={"type": "data", "symmetric": False,
                                          "array": part["estimate_high"] - part["estimate"],
                                          "arrayminus": part["estimate"] - part["estimate_low"], "color": colour},
                                 hovertemplate="%{y} · %{customdata[0]}<br>estimate %{x:.4g}<extra></extra>",
                                 **common), row=1, col=1)
        fig.add_trace(go.Scatter(x=part["effect"], showlegend=False,
                                 error_x={"type": "data", "symmetric": False,
                                          "array": part["effect_high"] - part["effect"],
                                          "arrayminus": part["effect"] - part["effect_low"], "color": colour},
                                 hovertemplate="%{y} · %{customdata[0]}<br>effect %{x:+.4g}, adjusted p = "
                                               "%{customdata[1]:.3g}<extra></extra>", **common), row=1, col=2)
    for k, (est, part) in enumerate(t.groupby("estimator", sort=False)):
        fig.add_vline(x=float(part["logging"].iloc[0]), row=1, col=1,
                      line={"color": OKABE_ITO[(k + 7) % len(OKABE_ITO)], "dash": "dash", "width": 1})
        fig.add_trace(go.Scatter(x=[None], y=[None], mode="lines", name=f"logging policy, {est}",
                                 line={"color": OKABE_ITO[(k + 7) % len(OKABE_ITO)], "dash": "dash"}), row=1, col=1)
    fig.add_vline(x=0, line={"color": "#333333", "width": 1}, row=1, col=2)
    if result.next_policy is not None:
        best = t[t["policy"] == result.next_policy].iloc[0]
        fig.add_trace(go.Scatter(x=[best["effect"]], y=[str(best["policy"])], mode="markers",
                                 name="A/B test next", marker={"symbol": "star", "size": 18,
                                                               "color": FOREST_COLOURS["beats"],
                                                               "line": {"color": "black", "width": 1}},
                                 hoverinfo="skip"), row=1, col=2)
    fig.update_yaxes(categoryorder="array", categoryarray=names, title_text="candidate", row=1, col=1)
    unit = "per session"
    fig.update_xaxes(title_text=f"{result.reward} {unit}, {result.level:.0%} CI", row=1, col=1)
    fig.update_xaxes(title_text=f"paired difference, {result.reward} {unit}", row=1, col=2)
    estimators = ", ".join(dict.fromkeys(t["estimator"]))  # each label names its clip (m, or the cap c)
    title = f"{len(t)} candidate{'s' * (len(t) != 1)} vs the logging policy — {result.reward}, {estimators}"
    return _layout(fig, title, height=max(300, 90 + 42 * len(t)))
