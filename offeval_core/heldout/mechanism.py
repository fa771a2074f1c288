"""Why nDCG disagrees with DCG over a set of models (KDD'24 App. A as a mechanism, not a number).

nDCG_u = DCG_u / iDCG_u divides each user's DCG by an ideal that grows with the number of the user's relevant
items. Averaged over users, DCG weighs a user by its iDCG_u and nDCG weighs every user alike, so two models
that serve users with many and with few relevant items differently can be ordered differently by the two
metrics; models that differ uniformly over users cannot (beyond noise). The analysis reports, from per-user
matrices (users × models): Pearson r and Kendall τ of the per-model means with user-bootstrap CIs, the share
of model pairs nDCG inverts with its CI, where the inversions sit (share inverted per DCG-gap tercile), and the
spread of per-user iDCG that drives them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from offeval_core.defaults import LEVEL
from offeval_core.engine.grid import ndcg_of
from offeval_core.errors import InputError
from offeval_core.results import ConfidenceInterval
from offeval_core.stats import resample_counts
from offeval_core.validation import check_level

__all__ = ["AgreementMechanism", "agreement_mechanism", "ideal_dcg_from", "mechanism_takeaway", "toy_zoo"]


@dataclass(frozen=True, eq=False)
class AgreementMechanism:
    """Result of :func:`agreement_mechanism`. ``by_gap``: one row per tercile of the pairs' |ΔDCG| with
    ``gap_low`` / ``gap_high``, ``n_pairs``, ``inverted_share``. ``idcg``: p10 / p50 / p90, mean and
    coefficient of variation (std / mean) of the per-user ideal DCG."""

    n_models: int
    n_users: int
    pearson: ConfidenceInterval
    pearson_r: float
    kendall: ConfidenceInterval
    kendall_tau: float
    inverted: ConfidenceInterval
    inverted_share: float
    by_gap: pd.DataFrame
    idcg: dict
    takeaway: str


def _pairs(dcg: np.ndarray, ndcg: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    i, j = np.triu_indices(dcg.size, 1)
    dd, dn = dcg[i] - dcg[j], ndcg[i] - ndcg[j]
    return np.abs(dd), (dd * dn < 0)


def kendall_tau(x, y) -> float:
    """Kendall's τ-b of two sequences (scipy's ``kendalltau``)."""
    from scipy import stats as _sps  # (imported here: ~0.45 s that the first page does not need)

    return float(_sps.kendalltau(x, y).statistic)


def ideal_dcg_from(dcg_u: np.ndarray, ndcg_u: np.ndarray) -> np.ndarray:
    """Per-user iDCG recovered from per-user DCG and nDCG (iDCG = DCG / nDCG wherever nDCG > 0 for some model;
    NaN for users no model scores). The ratio is the same for every model, so any model with nDCG > 0 gives it.

    >>> ideal_dcg_from(np.array([[1.0, 0.5], [0.0, 0.0]]), np.array([[0.5, 0.25], [0.0, 0.0]])).tolist()
    [2.0, nan]
    """
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(ndcg_u > 0, dcg_u / np.where(ndcg_u > 0, ndcg_u, 1.0), np.nan)
    out = np.full(ratio.shape[0], np.nan)
    ok = ~np.all(np.isnan(ratio), axis=1)
    out[ok] = np.nanmax(ratio[ok], axis=1)
    return out


def agreement_mechanism(dcg_u, ndcg_u, idcg_u=None, *, n_boot: int = 300, level: float = LEVEL,
                        rng: np.random.Generator | int | None = None) -> AgreementMechanism:
    """Agreement of DCG and nDCG over models, with user-bootstrap CIs, inversions by DCG gap and the spread of
    per-user iDCG (see the module docstring). ``dcg_u``, ``ndcg_u``: (users × models); ``idcg_u``: per-user
    ideal DCG (default: :func:`ideal_dcg_from`)."""
    check_level(level)
    dcg_u, ndcg_u = np.asarray(dcg_u, float), np.asarray(ndcg_u, float)
    if dcg_u.ndim != 2 or dcg_u.shape != ndcg_u.shape:
        raise InputError(f"dcg_u and ndcg_u must be (users × models) of one shape, got {dcg_u.shape} and "
                         f"{ndcg_u.shape}")
    n_users, n_models = dcg_u.shape
    if n_models < 3 or n_users < 2:
        raise InputError(f"need at least 3 models and 2 users, got {n_models} models and {n_users} users")
    if not isinstance(n_boot, int) or n_boot < 10:
        raise InputError(f"n_boot must be an integer ≥ 10, got {n_boot!r}")
    rng = np.random.default_rng(rng)
    idcg_u = ideal_dcg_from(dcg_u, ndcg_u) if idcg_u is None else np.asarray(idcg_u, float)
    dcg, ndcg = dcg_u.mean(axis=0), ndcg_u.mean(axis=0)
    r = float(np.corrcoef(dcg, ndcg)[0, 1])
    tau = kendall_tau(dcg, ndcg)
    gaps, inv = _pairs(dcg, ndcg)
    share = float(inv.mean())
    boots = np.empty((n_boot, 3))
    counts = resample_counts(n_users, n_boot, rng)
    bd, bn = counts @ dcg_u / n_users, counts @ ndcg_u / n_users
    for b in range(n_boot):
        boots[b] = (np.corrcoef(bd[b], bn[b])[0, 1], kendall_tau(bd[b], bn[b]), _pairs(bd[b], bn[b])[1].mean())
    lo, hi = (1 - level) / 2 * 100, (1 + level) / 2 * 100
    cis = [ConfidenceInterval(float(np.nanpercentile(boots[:, c], lo)), float(np.nanpercentile(boots[:, c], hi)),
                              level) for c in range(3)]
    edges = np.quantile(gaps, [0, 1 / 3, 2 / 3, 1])
    rows = []
    for t in range(3):
        sel = (gaps >= edges[t]) & ((gaps < edges[t + 1]) if t < 2 else (gaps <= edges[t + 1]))
        rows.append({"tercile": ("smallest", "middle", "largest")[t] + " DCG gaps", "gap_low": float(edges[t]),
                     "gap_high": float(edges[t + 1]), "n_pairs": int(sel.sum()),
                     "inverted_share": float(inv[sel].mean()) if sel.any() else math.nan})
    by_gap = pd.DataFrame(rows)
    good = idcg_u[np.isfinite(idcg_u)]
    idcg = {"p10": float(np.quantile(good, 0.1)), "p50": float(np.quantile(good, 0.5)),
            "p90": float(np.quantile(good, 0.9)), "mean": float(good.mean()),
            "cv": float(good.std() / good.mean()) if good.mean() > 0 else math.nan}
    res = AgreementMechanism(n_models, n_users, cis[0], r, cis[1], tau, cis[2], share, by_gap, idcg, "")
    object.__setattr__(res, "takeaway", mechanism_takeaway(res))
    return res


def mechanism_takeaway(m: AgreementMechanism) -> str:
    """The App. A takeaway from a result: agreement with CIs, where inversions sit, and the iDCG spread.

    Says the metrics *disagree* when the inverted share's CI excludes 0 and *agree* otherwise.
    """
    n_pairs = m.n_models * (m.n_models - 1) // 2
    head = (f"Over {m.n_models} models and {m.n_users:,} users: Pearson r = {m.pearson_r:.3f} "
            f"({m.pearson.level:.0%} CI {m.pearson.low:.3f}–{m.pearson.high:.3f}), Kendall τ = {m.kendall_tau:.3f} "
            f"({m.kendall.low:.3f}–{m.kendall.high:.3f}); nDCG inverts {m.inverted_share:.1%} of the {n_pairs} "
            f"model pairs (CI {m.inverted.low:.1%}–{m.inverted.high:.1%}).")
    g = m.by_gap
    where = ("Inverted share by DCG gap: " + ", ".join(
        f"{row.tercile} {row.inverted_share:.0%}" for row in g.itertuples()) + ".")
    spread = (f"Per-user ideal DCG spans {m.idcg['p10']:.2f}–{m.idcg['p90']:.2f} (p10–p90, coefficient of "
              f"variation {m.idcg['cv']:.2f}).")
    if m.inverted.low > 0:
        shares = m.by_gap["inverted_share"].to_numpy()
        close = bool(shares[0] > shares[-1])
        how = "The metrics disagree" if m.inverted_share >= 0.1 else "The metrics disagree on a small share of pairs"
        if close:
            how += ", most often where DCG barely separates the models"
        why = (f"{how}: nDCG divides each user's DCG by that ideal, so it weighs users with few "
               "relevant items as much as users with many, and models that serve the two groups differently are "
               "ordered differently.")
    else:
        why = ("The metrics agree here: the inverted share's CI includes 0 — these models differ alike for users "
               "with many and few relevant items, so dividing by the ideal does not reorder them.")
    return " ".join([head, where, spread, why]).replace("%", " %")


def toy_zoo(kind: str, *, n_users: int = 400, n_models: int = 12, k: int = 100,
            rng: np.random.Generator | int | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[str]]:
    """Per-user DCG@k, nDCG@k and iDCG@k (binary relevance, log2 discount) of a toy model zoo.

    Users are heavy (20-60 relevant items, 30 %) or light (1-3). Every relevant item has a fixed random rank in
    1..k and a fixed uniform draw u (common to all models, as models of one grid agree on most items); a model
    retrieves it iff u < p_heavy or p_light (the user's group). ``kind="tradeoff"``: each model has an overall
    quality q ~ U(0.35, 0.65) and a trade-off t ~ U(−0.5, 0.5): p_heavy = q + 0.4 t, p_light = q − 0.4 t
    (families that favour users with many vs few relevant items); ``kind="near-identical"``: a grid
    p = 0.49 … 0.51, the same for both groups (a hyper-parameter grid of one model).
    """
    if kind not in ("tradeoff", "near-identical"):
        raise InputError(f"kind must be 'tradeoff' or 'near-identical', got {kind!r}")
    rng = np.random.default_rng(rng)
    heavy = rng.random(n_users) < 0.3
    n_rel = np.where(heavy, rng.integers(20, 61, n_users), rng.integers(1, 4, n_users))
    disc = 1.0 / np.log2(np.arange(2, k + 2))
    idcg = np.array([disc[: min(n, k)].sum() for n in n_rel])
    if kind == "tradeoff":
        q, t = rng.uniform(0.35, 0.65, n_models), rng.uniform(-0.5, 0.5, n_models)
        p_heavy, p_light = q + 0.4 * t, q - 0.4 * t
    else:
        p_heavy = p_light = np.linspace(0.49, 0.51, n_models)
    dcg_u = np.zeros((n_users, n_models))
    for u in range(n_users):
        ranks = rng.choice(k, size=min(int(n_rel[u]), k), replace=False)
        draw = rng.random(ranks.size)
        p = p_heavy if heavy[u] else p_light
        dcg_u[u] = (draw[:, None] < p[None, :]).T.astype(float) @ disc[ranks]
    names = [f"{kind}-{m:02d}" for m in range(n_models)]
    return dcg_u, ndcg_of(dcg_u, idcg[:, None]), idcg, names
