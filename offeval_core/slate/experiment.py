"""Replications on the stochastic-slate simulator: each estimator's bias, standard deviation and RMSE
against the exact truth (the protocol of the synthetic experiments of Kiyohara et al. WSDM'22 and KDD'23, on small worlds)."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np
import pandas as pd

from offeval_core.defaults import LEVEL
from offeval_core.errors import InputError
from offeval_core.slate.estimators import LABELS, estimate
from offeval_core.slate.simulator import SlateWorld, sample

__all__ = [
    "DEFAULT", "error_chart", "replicate", "summarize",
]


DEFAULT = ("iips", "rips", "sips", "sniips", "snrips", "snsips", "cascade-dr", "aips")


def replicate(world: SlateWorld, *, n_sessions: int, reps: int, estimators: Sequence[str] = DEFAULT, rng=None,
              level: float = LEVEL, progress: Callable[[int, int], None] | None = None) -> pd.DataFrame:
    """Estimates of every estimator on ``reps`` independent logs of ``n_sessions`` sessions (long frame:
    rep, estimator, estimate, covered (the normal CI at ``level`` holds the truth))."""
    if reps < 2 or n_sessions < 2:
        raise InputError(f"need reps ≥ 2 and n_sessions ≥ 2, got {reps}, {n_sessions}")
    seeds = np.random.default_rng(rng).integers(0, 2**63 - 1, size=reps)
    truth = world.value()
    rows = []
    for r, seed in enumerate(seeds):
        s = sample(world, n_sessions, rng=int(seed))
        for name in estimators:
            kw = {"model": "item-slot", "target_distribution": s.target_distribution} if name == "cascade-dr" else {}
            res = estimate(s.data, estimator=name, rng=int(seed), level=level, **kw)
            rows.append({"rep": r, "estimator": name, "estimate": res.target.value,
                         "covered": bool(res.target.ci.low <= truth <= res.target.ci.high)})
        if progress is not None:
            progress(r + 1, reps)
    return pd.DataFrame(rows)


def summarize(runs: pd.DataFrame, truth: float) -> pd.DataFrame:
    """Per estimator: bias, its standard error, SD, RMSE, relative RMSE, |bias| / SE and the coverage of the
    normal CI of :func:`replicate`."""
    out = []
    for name, g in runs.groupby("estimator", sort=False):
        v = g["estimate"].to_numpy()
        bias = float(v.mean() - truth)
        sd = float(v.std(ddof=1))
        se = sd / math.sqrt(len(v))
        rmse = float(np.sqrt(np.mean((v - truth) ** 2)))
        out.append({"estimator": name, "label": LABELS[name], "bias": bias, "bias_se": se,
                    "z": bias / se if se > 0 else math.inf, "sd": sd, "rmse": rmse, "rel_rmse": rmse / abs(truth),
                    "coverage": float(g["covered"].mean()), "reps": len(v)})
    return pd.DataFrame(out)


def error_chart(summary: pd.DataFrame, *, truth: float, title: str):
    """Bias (± 2 SE over replications) and RMSE per estimator, as a plotly figure (pure function)."""
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    fig = make_subplots(rows=1, cols=2, subplot_titles=("Bias (± 2 SE over replications)", "RMSE"),
                        horizontal_spacing=0.12)
    labels = summary["label"].tolist()
    colour = ["#D55E00" if abs(z) > 4 else "#0072B2" for z in summary["z"]]
    fig.add_trace(go.Bar(y=labels, x=summary["bias"], orientation="h", marker_color=colour,
                         error_x={"type": "data", "array": 2 * summary["bias_se"]}, name="bias"), row=1, col=1)
    fig.add_trace(go.Bar(y=labels, x=summary["rmse"], orientation="h", marker_color="#009E73", name="RMSE"),
                  row=1, col=2)
    fig.add_vline(x=0, line_color="grey", row=1, col=1)
    fig.update_xaxes(title_text="estimate − truth (reward per session)", row=1, col=1)
    fig.update_xaxes(title_text="root mean squared error (reward per session)", rangemode="tozero", row=1, col=2)
    fig.update_yaxes(autorange="reversed", type="category")
    fig.update_layout(title=f"{title} — truth V(π) = {truth:.4f}", showlegend=False, height=420,
                      margin={"t": 80, "l": 10, "r": 10, "b": 50})
    return fig
