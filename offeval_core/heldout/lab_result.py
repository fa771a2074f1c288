"""The estimator lab's result (:func:`offeval_core.heldout.analyses.estimator_lab`) and its takeaway sentences,
each computed from the lab's summary table: how well each estimator ranks the models (Kendall τ vs the MCAR
truth) and how far its values are from the truth (mean |bias|)."""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

__all__ = ["EstimatorLab", "lab_bias_takeaway", "lab_takeaway"]


@dataclass(frozen=True, eq=False)
class EstimatorLab:
    """Estimator-lab results (long tables).

    - ``estimates``: seed, k, model, estimator, estimate, truth_mcar, truth_complete;
    - ``tau``: seed, k, estimator, kendall_tau (estimator's model ranking vs the MCAR truth's) — GS Table 1;
    - ``tau_strata``: seed, n_strata, kendall_tau for GS at ``strata_k`` — GS Fig. 1;
    - ``bounds``: seed, estimator, bias, concentration — the Theorem 4.1 terms (they do not depend on λ);
    - ``summary``: per (k, estimator) mean bias, spread over seeds, RMSE vs the MCAR truth, mean τ.
    """

    estimates: pd.DataFrame
    tau: pd.DataFrame
    tau_strata: pd.DataFrame
    bounds: pd.DataFrame
    summary: pd.DataFrame
    params: dict


_LAB_NAMES = {"naive": "Naive", "snips": "SNIPS", "gs": "GS", "ips": "IPS"}


def lab_takeaway(lab: EstimatorLab, *, k: int | None = None) -> str:
    """The estimator lab's takeaway at cut-off ``k`` (default the largest), computed from ``lab.summary``:
    Kendall τ of each estimator's model ranking vs the MCAR truth (mean over seeds), best first, the mean
    |bias| of each, and whether the GS paper's finding (GS ranks the models at least as well as SNIPS and
    with less bias, Table 1) holds on this world.

    >>> summ = pd.DataFrame({"k": [10] * 3, "estimator": ["naive", "snips", "gs"], "tau_mean": [0.5, 0.7, 0.8],
    ...                      "mean_abs_bias": [0.2, 0.05, 0.01]})
    >>> lab = EstimatorLab(None, None, None, None, summ, {"seeds": [0, 1]})
    >>> print(lab_takeaway(lab))
    At K = 10, averaged over 2 seeds, Kendall τ vs the MCAR truth: GS 0.80, SNIPS 0.70, Naive 0.50; mean |bias| GS 0.010, SNIPS 0.050, Naive 0.200. The GS paper's finding holds here: GS ranks the models better than SNIPS (τ 0.80 vs 0.70) with less bias (0.010 vs 0.050).
    """
    s = lab.summary
    k = int(s["k"].max()) if k is None else int(k)
    at = s[s["k"] == k].sort_values("tau_mean", ascending=False)
    if at.empty:
        return f"No estimates at K = {k}."
    name = lambda e: _LAB_NAMES.get(e, str(e))  # noqa: E731
    n_seeds = len(lab.params.get("seeds", []))
    text = (f"At K = {k}, averaged over {n_seeds} seeds, Kendall τ vs the MCAR truth: "
            + ", ".join(f"{name(e)} {t:.2f}" for e, t in zip(at["estimator"], at["tau_mean"], strict=True))
            + "; mean |bias| "
            + ", ".join(f"{name(e)} {b:.3f}" for e, b in zip(at["estimator"], at["mean_abs_bias"], strict=True))
            + ".")
    by = at.set_index("estimator")
    if {"gs", "snips"} <= set(by.index):
        tg, ts = by.loc["gs", "tau_mean"], by.loc["snips", "tau_mean"]
        bg, bs = by.loc["gs", "mean_abs_bias"], by.loc["snips", "mean_abs_bias"]
        nums = f"(τ {tg:.2f} vs {ts:.2f}) with {'less' if bg < bs else 'no less'} bias ({bg:.3f} vs {bs:.3f})"
        if tg > ts and bg < bs:
            text += f" The GS paper's finding holds here: GS ranks the models better than SNIPS {nums}."
        elif tg > ts or bg < bs:
            text += (f" The GS paper's finding holds only in part here: GS vs SNIPS {nums}; the popularity strata "
                     f"differ little in this world.")
        else:
            text += (f" The GS paper's finding does not hold here: GS does not rank the models better than SNIPS "
                     f"{nums}; the popularity strata differ little in this world.")
    return text


def lab_bias_takeaway(lab: EstimatorLab, *, k: int | None = None) -> str:
    """The bias chart's takeaway at cut-off ``k`` (default the largest): each estimator's mean |bias| vs the
    MCAR truth (estimate − truth, averaged over seeds per model, then |·| averaged over models), smallest
    first, and how many times smaller the least biased one is than the naive estimate.

    >>> summ = pd.DataFrame({"k": [10] * 3, "estimator": ["naive", "snips", "gs"], "tau_mean": [0.5, 0.7, 0.8],
    ...                      "mean_abs_bias": [0.2, 0.05, 0.01]})
    >>> print(lab_bias_takeaway(EstimatorLab(None, None, None, None, summ, {"seeds": [0, 1]})))
    At K = 10, averaged over 2 seeds, GS is the least biased: mean |bias| vs the MCAR truth GS 0.010, SNIPS 0.050, Naive 0.200 — 20× less than the naive estimate.
    """
    s = lab.summary
    k = int(s["k"].max()) if k is None else int(k)
    at = s[s["k"] == k].sort_values("mean_abs_bias")
    if at.empty:
        return f"No estimates at K = {k}."
    name = lambda e: _LAB_NAMES.get(e, str(e))  # noqa: E731
    n_seeds = len(lab.params.get("seeds", []))
    best, best_bias = at["estimator"].iloc[0], float(at["mean_abs_bias"].iloc[0])
    text = (f"At K = {k}, averaged over {n_seeds} seeds, {name(best)} is the least biased: mean |bias| vs the MCAR "
            "truth " + ", ".join(f"{name(e)} {b:.3f}" for e, b in zip(at["estimator"], at["mean_abs_bias"],
                                                                       strict=True)))
    naive = at.loc[at["estimator"] == "naive", "mean_abs_bias"]
    if best != "naive" and len(naive) and best_bias > 0:
        text += f" — {float(naive.iloc[0]) / best_bias:.3g}× less than the naive estimate"
    return text + "."
