"""Assumption holds vs assumption broken: what each switch of the simulator does to the finding it concerns.

KDD'24 (Sec. 4, Eq. 9) proves DCG with de-biased labels (D = D0 = learnt PBM, m = ∞) unbiased for the online
reward per session of a target policy under Asm. 1-5. On simulated worlds with an exact ground truth this is
checkable: the offline estimate of every policy, on each (experiment, day) of control logs, against the exact
expected reward E[Σ_i c_i | x, π] of the same sessions. Each switch breaks one assumption:

- ``cascade`` (Asm. 2): users stop after a satisfying item, so viewing depends on the items above;
- ``reward_interactions`` (Asm. 3): an item's reward is damped by same-topic items ranked above it;
- ``contextual_position_bias`` (a context-free PBM): registered users scroll 3× deeper;
- ``support_depth`` (Asm. 5): nobody views beyond rank d, so the logs never show what a target moves up from
  there;
- ``huge_candidate_sets`` (sessions that get through the candidates, Asm. 5 in practice): K = 60 candidates and a
  shallow viewing curve (stretched exponential, scale 2), so the target ranks candidates the sessions never
  viewed between the logged ones;
- ``depth_drift`` (one position-bias curve for every day, as the analyses learn it over all days): the scroll
  depth changes from day to day, so the pooled PBM is too flat on some days and too steep on others — the
  errors of opposite sign cancel in the mean bias over days, so what it breaks is the CI coverage per day.

For each world and policy the contrast reports the relative bias of the estimate, (estimate − truth) / truth,
pooled over the (experiment, day) cells of control logs, with a normal CI over cells, and the share of cells
whose own 95 % CI covers the truth. With the assumption intact about 5 % of the policies' CIs exclude 0 and
cell coverage is near 95 %; broken, more policies are visibly biased and coverage falls.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import pandas as pd

from offeval_core import stats
from offeval_core.defaults import LEVEL
from offeval_core.errors import InputError

__all__ = ["FINDINGS", "POLICIES", "SWITCHES", "AssumptionContrast", "assumption_contrast", "contrast_figure", "contrast_takeaway",
           "summarize_contrast",
           "visibly_weakened"]

SWITCHES: dict[str, tuple[str, dict]] = {
    "cascade": ("Asm. 2, position-based viewing", {"cascade": True, "cascade_strength": 0.9}),
    "reward_interactions": ("Asm. 3, rewards independent across ranks", {"reward_interactions": True}),
    "contextual_position_bias": ("one position-bias curve for every context",
                                 {"contextual_position_bias": True, "registered_depth_factor": 8.0}),
    "support_depth": ("Asm. 5, full support", {"support_depth": 8}),
    "huge_candidate_sets": ("sessions that get through the candidates", {"n_candidates": 60, "survival_scale": 2.0}),
    "depth_drift": ("one position-bias curve for every day", {"depth_drift": 0.5, "depth_engagement": 0.25}),
}
# what each switch visibly breaks: the bias of DCG (pbm, Q̂, m = ∞) or, where day-level errors cancel in the
# mean, only the coverage of its per-(experiment, day) CIs
FINDINGS: dict[str, str] = {"depth_drift": "coverage"}


# the target, a strong candidate, one independent of production and the two segment-tuned candidates
POLICIES = ("treatment", "cand_01", "cand_03", "cand_07", "cand_08")


@dataclass(frozen=True, eq=False)
class AssumptionContrast:
    """Result of :func:`assumption_contrast`.

    ``table``: one row per (switch, world ∈ {holds, broken}, seed, policy) with ``n_cells``, ``rel_bias``
    (mean of (estimate − truth) / truth over the (experiment, day) cells), ``rel_bias_low`` / ``rel_bias_high``
    (its normal CI over cells), ``coverage`` (share of cells whose CI covers the truth). ``summary``: per
    (switch, world) the share of (seed, policy) rows whose CI excludes 0, the mean |relative bias| and the
    mean coverage. ``cells``: the per-cell estimates.
    """

    table: pd.DataFrame
    summary: pd.DataFrame
    cells: pd.DataFrame
    reward: str
    level: float
    takeaway: str


def _cells(world, *, reward: str, policies: Sequence[str], level: float) -> pd.DataFrame:
    from offeval_core.engine import Grid, reduce
    from offeval_core.estimators import summarize_groups
    from offeval_core.logs import read_logs

    logs = read_logs(world.logs)
    moments = reduce(logs, Grid(rewards=(reward,), policies=tuple(policies), clips=(math.inf,)))
    gt = world.ground_truth
    gt = gt[(gt["arm"] == "control") & (gt["reward"] == reward)].set_index(["experiment_id", "day", "policy"])
    rows = []
    for pol in policies:
        for g in summarize_groups(moments, reward=reward, policy=pol, by=("experiment_id", "day"), level=level):
            exp, day = str(g.keys["experiment_id"]), pd.Timestamp(g.keys["day"]).date()
            truth = float(gt.loc[(exp, day, pol), "true_value"])
            est = g.target
            rows.append({"experiment_id": exp, "day": day, "policy": pol, "estimate": est.value,
                         "low": est.ci.low, "high": est.ci.high, "truth": truth})
    return pd.DataFrame(rows)


def assumption_contrast(switches: Sequence[str] = tuple(SWITCHES), *, seeds: Sequence[int] = (0, 1, 2),
                        preset: str = "small", reward: str = "like", policies: Sequence[str] = POLICIES,
                        level: float = LEVEL, progress=None, **overrides) -> AssumptionContrast:
    """Relative bias and CI coverage of DCG (pbm, Q̂, m = ∞) against the exact truth, per switch, with the
    assumption holding and broken (same seed: same users, items, contexts; only the switch differs).

    ``overrides`` change the preset for both worlds (default: the ``small`` preset with 1 000 sessions per
    arm and day); ``progress(done, total)`` is called after each world. The switches are set strongly enough
    to show (cascade strength 0.9, registered users scrolling 8× deeper, support depth 8 of 30 ranks) and the
    reward is ``like``, whose base rate differs 5× between segments (so context-dependent viewing matters).
    """
    from offeval_core.simulate import preset_config, simulate

    overrides = {"sessions_per_arm_day": 1000, **overrides}

    unknown = [s for s in switches if s not in SWITCHES]
    if unknown:
        raise InputError(f"switches must be among {', '.join(SWITCHES)}; got {', '.join(map(repr, unknown))}")
    if not seeds:
        raise InputError("seeds must list at least one seed, got none")
    worlds: list[tuple[str, str, dict]] = []
    for sw in switches:
        worlds.append((sw, "holds", {}))
        worlds.append((sw, "broken", SWITCHES[sw][1]))
    cache: dict[tuple, pd.DataFrame] = {}
    parts, rows = [], []
    total, done = len(worlds) * len(seeds), 0
    for sw, state, change in worlds:
        for seed in seeds:
            key = (tuple(sorted(change.items())), seed)
            if key not in cache:
                world = simulate(preset_config(preset, **{**overrides, **change}), seed=int(seed))
                cache[key] = _cells(world, reward=reward, policies=policies, level=level)
            cells = cache[key].assign(switch=sw, world=state, seed=seed)
            parts.append(cells)
            for pol, part in cells.groupby("policy", sort=False):
                rel = (part["estimate"] - part["truth"]) / part["truth"]
                mean = float(rel.mean())
                se = float(rel.std(ddof=1) / math.sqrt(len(rel))) if len(rel) > 1 else math.nan
                ci = stats.normal_ci(mean, se, level=level)
                covered = (part["low"] <= part["truth"]) & (part["truth"] <= part["high"])
                rows.append({"switch": sw, "assumption": SWITCHES[sw][0], "world": state, "seed": seed,
                             "policy": pol, "n_cells": len(part), "rel_bias": mean, "rel_bias_low": ci.low,
                             "rel_bias_high": ci.high, "coverage": float(covered.mean())})
            done += 1
            if progress is not None:
                progress(done, total)
    table = pd.DataFrame(rows)
    summary = summarize_contrast(table)
    return AssumptionContrast(table=table, summary=summary, cells=pd.concat(parts, ignore_index=True),
                              reward=reward, level=level, takeaway=contrast_takeaway(summary))


def summarize_contrast(table: pd.DataFrame) -> pd.DataFrame:
    """Per (switch, world): ``n`` (seed, policy) rows, ``biased_share`` = share whose CI excludes 0,
    ``mean_abs_bias`` = mean |relative bias|, ``coverage`` = mean cell coverage."""
    excl = (table["rel_bias_low"] > 0) | (table["rel_bias_high"] < 0)
    t = table.assign(excluded=excl, abs_bias=table["rel_bias"].abs())
    g = t.groupby(["switch", "assumption", "world"], sort=False)
    return g.agg(n=("excluded", "size"), biased_share=("excluded", "mean"), mean_abs_bias=("abs_bias", "mean"),
                 coverage=("coverage", "mean")).reset_index()


def visibly_weakened(holds, broken, finding: str = "unbiasedness") -> bool:
    """Breaking the assumption visibly weakens the finding. ``unbiasedness``: the share of policy-seeds whose bias
    CI excludes 0 rises by ≥ 0.3, the mean |relative bias| at least doubles and the cell CI coverage falls by ≥ 10
    points. ``coverage``: the cell CI coverage falls by ≥ 10 points (for a switch whose per-day errors cancel in
    the mean bias).

    >>> visibly_weakened({"biased_share": 0.0, "mean_abs_bias": 0.04, "coverage": 0.96},
    ...                  {"biased_share": 0.4, "mean_abs_bias": 0.15, "coverage": 0.65})
    True
    >>> visibly_weakened({"biased_share": 0.0, "mean_abs_bias": 0.04, "coverage": 0.96},
    ...                  {"biased_share": 0.0, "mean_abs_bias": 0.02, "coverage": 0.77}, "coverage")
    True
    """
    covers_less = broken["coverage"] <= holds["coverage"] - 0.1
    if finding == "coverage":
        return bool(covers_less)
    return bool(broken["biased_share"] >= holds["biased_share"] + 0.3
                and broken["mean_abs_bias"] >= 2 * holds["mean_abs_bias"] and covers_less)


def contrast_takeaway(summary: pd.DataFrame) -> str:
    """One sentence per switch from :func:`summarize_contrast`: how many policies' DCG estimates are visibly
    biased (CI excludes 0), the mean |relative bias| and the CI coverage, with the assumption holding and
    broken; "visibly weakens" as in :func:`visibly_weakened`.

    >>> s = pd.DataFrame({"switch": ["support_depth"] * 2, "assumption": ["Asm. 5"] * 2,
    ...                   "world": ["holds", "broken"], "n": [9, 9], "biased_share": [1 / 9, 1.0],
    ...                   "mean_abs_bias": [0.02, 0.26], "coverage": [0.93, 0.25]})
    >>> print(contrast_takeaway(s))
    support_depth (breaks Asm. 5): DCG is visibly biased for 1 of 9 policy-seeds when the assumption holds (mean |bias| 2.0 %, CI coverage 93 %) vs 9 of 9 when broken (26.0 %, coverage 25 %) — breaking it visibly weakens unbiasedness.
    """
    out = []
    for sw, part in summary.groupby("switch", sort=False):
        h, b = part[part["world"] == "holds"], part[part["world"] == "broken"]
        if h.empty or b.empty:
            continue
        h, b = h.iloc[0], b.iloc[0]
        finding = FINDINGS.get(sw, "unbiasedness")
        visible = visibly_weakened(h, b, finding)
        if finding == "coverage":
            verdict = ("breaking it visibly lowers the CI coverage (the per-day errors cancel in the mean bias)"
                       if visible else "breaking it does not visibly lower the coverage in this world")
        else:
            verdict = "breaking it visibly weakens unbiasedness" if visible else \
                "breaking it does not visibly bias DCG in this world"
        out.append(f"{sw} (breaks {part['assumption'].iloc[0]}): DCG is visibly biased for "
                   f"{round(h['biased_share'] * h['n'])} of {h['n']} policy-seeds when the assumption holds (mean "
                   f"|bias| {h['mean_abs_bias']:.1%}, CI coverage {h['coverage']:.0%}) vs "
                   f"{round(b['biased_share'] * b['n'])} of {b['n']} when broken ({b['mean_abs_bias']:.1%}, coverage "
                   f"{b['coverage']:.0%}) — {verdict}.")
    return " ".join(out).replace("%", " %")


def contrast_figure(result: AssumptionContrast):
    """Side by side per switch, "assumption holds" vs "assumption broken": mean |relative bias| of DCG (pbm,
    Q̂, m = ∞) against the exact truth (left) and the share of (experiment, day) CIs that cover it (right,
    dashed line at the nominal level)."""
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    s = result.summary
    fig = make_subplots(rows=1, cols=2, subplot_titles=("mean |relative bias| vs the exact truth",
                                                        f"CI coverage of the truth (nominal {result.level:.0%})"))
    colours = {"holds": "#009E73", "broken": "#D55E00"}
    for world in ("holds", "broken"):
        part = s[s["world"] == world]
        name = f"assumption {world}"
        fig.add_trace(go.Bar(x=part["switch"], y=part["mean_abs_bias"], name=name, marker_color=colours[world],
                             legendgroup=world, text=[f"{v:.1%}" for v in part["mean_abs_bias"]],
                             hovertemplate="%{x}<br>" + name + "<br>mean |bias| %{y:.1%}<extra></extra>"),
                      row=1, col=1)
        fig.add_trace(go.Bar(x=part["switch"], y=part["coverage"], name=name, marker_color=colours[world],
                             legendgroup=world, showlegend=False, text=[f"{v:.0%}" for v in part["coverage"]],
                             hovertemplate="%{x}<br>" + name + "<br>coverage %{y:.0%}<extra></extra>"),
                      row=1, col=2)
    fig.add_hline(y=result.level, line_dash="dash", line_color="grey", row=1, col=2)
    fig.update_yaxes(tickformat=".0%", title_text="mean |(estimate − truth) / truth|", row=1, col=1)
    fig.update_yaxes(tickformat=".0%", range=[0, 1.05], title_text="share of cells covered", row=1, col=2)
    fig.update_xaxes(title_text="switch (assumption broken)")
    fig.update_xaxes(tickangle=0)
    fig.update_layout(barmode="group", height=460, margin={"t": 90}, legend={"orientation": "h", "y": 1.18,
                                                                            "x": 0})
    return fig
