"""DCG vs nDCG: do they rank the same policies the same way? (KDD'24 App. A, Fig. 2; Sec. 5, Lemma 5.2,
Table 1).

Each candidate policy gets its mean per-session DCG and mean per-session nDCG on the same (control-arm)
sessions. Agreement is measured with Pearson's r, Kendall's τ and the share of unordered policy pairs
whose order nDCG inverts relative to DCG, with a bootstrap CI over sessions; the pairwise statistics come
from :mod:`offeval_core.agreement` (tie rule: a pair tied under either metric is never inverted but stays
in the denominator n(n−1)/2).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from offeval_core.agreement import Agreement, agreement, inverted_share_bootstrap
from offeval_core.analyses._common import pct
from offeval_core.arms import offline_rows
from offeval_core.charts import agreement_figure
from offeval_core.defaults import LEVEL
from offeval_core.errors import InputError, UnknownName, WrongType
from offeval_core.estimators import session_values
from offeval_core.formatting import format_coefficient
from offeval_core.logs import LOGGING_POLICY, Logs
from offeval_core.results import ConfidenceInterval
from offeval_core.validation import check_clip, check_level

__all__ = ["AgreementResult", "Table1Example", "agreement_figure", "dcg_vs_ndcg", "table1_example"]


@dataclass(frozen=True, eq=False)
class AgreementResult:
    """Result of :func:`dcg_vs_ndcg`.

    ``points``: one row per policy (policy, dcg, ndcg, dcg_rank, ndcg_rank; rank 1 = best).
    ``inverted_pairs``: better_by_dcg, better_by_ndcg and both metrics of both policies.
    ``inverted_ci``: bootstrap percentile CI of ``inverted_share`` (None without bootstrap).
    """

    points: pd.DataFrame
    agreement: Agreement
    inverted_pairs: pd.DataFrame
    inverted_ci: ConfidenceInterval | None
    n_sessions: int
    settings: dict
    takeaway: str

    @property
    def pearson(self) -> float:
        return self.agreement.pearson_r

    @property
    def kendall(self) -> float:
        return self.agreement.kendall_tau

    @property
    def inverted_share(self) -> float:
        return self.agreement.inverted_share

    @property
    def n_pairs(self) -> int:
        return self.agreement.n_pairs


def _matrices(sv: pd.DataFrame, policies: Sequence[str] | None) -> tuple[list[str], np.ndarray, np.ndarray]:
    found = [c[len("dcg__"):] for c in sv.columns if c.startswith("dcg__")]
    if policies is None:
        names = [p for p in found if p != LOGGING_POLICY]
    else:
        names = list(policies)
        missing = [p for p in names if p not in found or f"ndcg__{p}" not in sv.columns]
        if missing:
            raise UnknownName(f"policies {missing} have no dcg__/ndcg__ columns; available: {', '.join(found)}")
    if len(names) < 2:
        raise InputError(f"DCG vs nDCG needs at least 2 policies, got {names}")
    x = sv[[f"dcg__{p}" for p in names]].to_numpy(dtype=float)
    y = sv[[f"ndcg__{p}" for p in names]].to_numpy(dtype=float)
    return names, x, y


def dcg_vs_ndcg(logs_or_session_values, *, reward: str | None = None, policies: Sequence[str] | None = None,
                discount: str = "pbm", exposure: str = "pbm", clip: float = math.inf, n_boot: int = 1000,
                rng: np.random.Generator | int = 0, level: float = LEVEL,
                arm: str | None = "control") -> AgreementResult:
    """Agreement of DCG and nDCG over candidate policies, with a bootstrap CI of the inverted share.

    share = #{a < b : (DCG_a − DCG_b)(nDCG_a − nDCG_b) < 0} / (n(n−1)/2), each metric the mean over
    sessions; the CI resamples sessions (``agreement.inverted_share_bootstrap``).

    Parameters
    ----------
    logs_or_session_values : :class:`~offeval_core.logs.Logs` (per-session values are computed with
        ``reward``, ``discount``, ``exposure``, ``clip``) or a DataFrame with ``dcg__<p>`` / ``ndcg__<p>``
        columns, one row per session (e.g. from :func:`offeval_core.estimators.session_values`).
    policies : policies to compare; default every target policy (``rank__*`` columns), not the logged
        ranking (add ``"logging"`` to include it).
    n_boot : bootstrap resamples; 0 skips the CI.
    rng : numpy Generator or an integer seed.
    arm : keep only sessions of this arm when the input has an ``arm`` column (offline = control logs).

    Examples
    --------
    KDD'24 Table 1 as two sessions: DCG prefers R' (1.25 > 1.00), nDCG prefers R (0.64 > 0.36):

    >>> res = dcg_vs_ndcg(table1_example().session_values, n_boot=0)
    >>> res.agreement.n_inverted, res.inverted_share
    (1, 1.0)
    """
    check_level(level)
    if isinstance(logs_or_session_values, Logs):
        logs = logs_or_session_values
        if reward is None:
            raise InputError("reward must name a reward column when logs are given, got None")
        clip = check_clip(clip)
        pols = tuple(policies) if policies is not None else logs.policies
        sv = session_values(logs, reward=reward, policies=[p for p in pols if p != LOGGING_POLICY],
                            discount=discount, exposure=exposure, clip=clip)
        policies = list(pols)
    elif isinstance(logs_or_session_values, pd.DataFrame):
        sv = logs_or_session_values
    else:
        raise WrongType("logs_or_session_values must be Logs or a DataFrame of per-session values, got "
                        f"{type(logs_or_session_values).__name__}")
    sv = offline_rows(sv, arm)
    names, x, y = _matrices(sv, policies)
    dcg, ndcg = x.mean(axis=0), y.mean(axis=0)
    agr = agreement(dcg, ndcg, names=names)
    ci = None
    if n_boot:
        gen = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)
        ci = inverted_share_bootstrap(x, y, n_boot=n_boot, rng=gen, level=level)
    points = pd.DataFrame({"policy": names, "dcg": dcg, "ndcg": ndcg})
    points["dcg_rank"] = points["dcg"].rank(ascending=False, method="min").astype(int)
    points["ndcg_rank"] = points["ndcg"].rank(ascending=False, method="min").astype(int)
    val = dict(zip(names, zip(dcg, ndcg, strict=True), strict=True))
    inv = pd.DataFrame([{"better_by_dcg": a, "better_by_ndcg": b, "dcg_a": val[a][0], "dcg_b": val[b][0],
                         "ndcg_a": val[a][1], "ndcg_b": val[b][1]} for a, b in agr.inverted_pairs],
                       columns=["better_by_dcg", "better_by_ndcg", "dcg_a", "dcg_b", "ndcg_a", "ndcg_b"])
    settings = {"reward": reward, "discount": discount, "exposure": exposure, "clip": clip, "n_boot": n_boot,
                "level": level, "arm": arm, "ndcg_zero_rule": "sessions with iDCG = 0 count nDCG = 0"}
    takeaway = (f"nDCG would have picked the worse policy (by DCG) in {pct(agr.inverted_share)} of pairs "
                f"({agr.n_inverted} of {agr.n_pairs})")
    if ci is not None:
        takeaway += f", {level:.0%} CI {pct(ci.low)}–{pct(ci.high)}"
    takeaway += (f"; Pearson r = {format_coefficient(agr.pearson_r)}, Kendall τ = {format_coefficient(agr.kendall_tau)} "
                 f"over {len(names)} policies.")
    return AgreementResult(points=points, agreement=agr, inverted_pairs=inv, inverted_ci=ci,
                           n_sessions=len(sv), settings=settings, takeaway=takeaway)


# -------------------------------------------------------------------------------------- Table 1


@dataclass(frozen=True, eq=False)
class Table1Example:
    """KDD'24 Table 1 recomputed from its expected labels ρ(x, a) and two top-1 policies.

    ``quality``: ρ per (context, item); ``choices``: the item each policy puts at rank 1 per context;
    ``table``: DCG(x1), DCG(x2), nDCG(x1), nDCG(x2), DCG(X), nDCG(X) per policy (the paper's columns);
    ``session_values``: the same as per-session rows (``dcg__R``, ``ndcg__R``, …) for :func:`dcg_vs_ndcg`.
    """

    quality: pd.DataFrame
    choices: pd.DataFrame
    table: pd.DataFrame
    session_values: pd.DataFrame
    normaliser: str
    explanation: str


def table1_example(*, normaliser: str = "paper") -> Table1Example:
    """The counter-example of KDD'24 Lemma 5.2 (Table 1), computed rather than typed.

    Contexts x1, x2; items a1, a2 with ρ(x1, ·) = (1.0, 0.0), ρ(x2, ·) = (1.0, 2.5). Policy R puts a1 at
    rank 1 in both contexts, R' puts a2. A top-1 policy's DCG is ρ(x, R(x)) (D(1) = 1). The ideal DCG of the
    paper's table is Σ_a ρ(x, a) — the undiscounted gain of the whole ideal list, which reproduces the
    printed 0.29 = 1 / 3.5 and 0.71 = 2.5 / 3.5 (``normaliser="paper"``); ``"top1"`` uses max_a ρ(x, a),
    the ideal DCG of a one-slot list. Either way DCG(X) prefers R' and nDCG(X) prefers R.

    >>> t = table1_example().table.set_index("policy")
    >>> t.loc["R", "nDCG(x2)"].round(2), t.loc["R'", "DCG(X)"], t.loc["R", "nDCG(X)"].round(2)
    (np.float64(0.29), np.float64(1.25), np.float64(0.64))
    """
    if normaliser not in ("paper", "top1"):
        raise InputError(f"normaliser must be 'paper' or 'top1', got {normaliser!r}")
    rho = pd.DataFrame({"a1": [1.0, 1.0], "a2": [0.0, 2.5]}, index=pd.Index(["x1", "x2"], name="context"))
    choices = pd.DataFrame({"R": ["a1", "a1"], "R'": ["a2", "a2"]}, index=rho.index)
    ideal = rho.sum(axis=1) if normaliser == "paper" else rho.max(axis=1)
    rows, sv = [], {"session": [0, 1], "context": ["x1", "x2"]}
    for pol in choices.columns:
        dcg = np.array([rho.loc[x, choices.loc[x, pol]] * 1.0 for x in rho.index])  # D(1) = 1
        ndcg = dcg / ideal.to_numpy()
        rows.append({"policy": pol, "DCG(x1)": dcg[0], "DCG(x2)": dcg[1], "nDCG(x1)": ndcg[0],
                     "nDCG(x2)": ndcg[1], "DCG(X)": dcg.mean(), "nDCG(X)": ndcg.mean()})
        sv[f"dcg__{pol}"] = dcg
        sv[f"ndcg__{pol}"] = ndcg
    table = pd.DataFrame(rows)
    t = table.set_index("policy")
    dcg_best = t["DCG(X)"].idxmax()
    ndcg_best = t["nDCG(X)"].idxmax()
    expl = (f"In each context alone DCG and nDCG agree (Lemma 5.1), but averaged over both contexts DCG "
            f"prefers {dcg_best} ({t.loc[dcg_best, 'DCG(X)']:.2f} vs {t['DCG(X)'].min():.2f}) while nDCG "
            f"prefers {ndcg_best} ({t.loc[ndcg_best, 'nDCG(X)']:.2f} vs {t['nDCG(X)'].min():.2f}): "
            "normalising per context re-weights the contexts (Lemma 5.2).")
    return Table1Example(quality=rho, choices=choices, table=table, session_values=pd.DataFrame(sv),
                         normaliser=normaliser, explanation=expl)
