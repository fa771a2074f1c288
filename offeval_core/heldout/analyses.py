"""Analyses on held-out evaluation: the KDD'24 App. A reproduction (DCG vs nDCG over many models) and
the estimator lab of the GS paper (Sec. 5, Table 1, Fig. 1) on the simulated MNAR world.

Every function is pure (inputs → a frozen result); the dashboard caches them and draws them with
:mod:`offeval_core.heldout.charts`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from offeval_core.agreement import Agreement, agreement, inverted_share_bootstrap
from offeval_core.defaults import LEVEL
from offeval_core.errors import InputError
from offeval_core.heldout.io import Qrels, Run
from offeval_core.heldout.lab_result import EstimatorLab, lab_bias_takeaway, lab_takeaway
from offeval_core.heldout.mechanism import AgreementMechanism, agreement_mechanism, kendall_tau
from offeval_core.heldout.metrics import MetricSpec, evaluate_run, log2_discount, topn_metrics
from offeval_core.heldout.mnar import (
    BoundTerms,
    mnar_estimate,
    popularity_propensities,
    popularity_strata,
    theorem41_terms,
)
from offeval_core.heldout.world import Split, simulate_world, split_world
from offeval_core.heldout.zoo import Zoo, cached_zoo, train_zoo
from offeval_core.results import ConfidenceInterval
from offeval_core.validation import check_choice, check_level

#: What KDD'24 App. A reports for DCG@100 vs nDCG@100 over 192 EASE^R / KUNN models on MovieLens-1M
#: (50 % train / 50 % held-out interactions): "a linear correlation of ≈ 0.6 (Pearson), and a rank correlation
#: of ≈ 0.5 (Kendall)", and nDCG inverts the DCG order of a random pair of models "roughly 25 %" of the time.
PAPER_APP_A = {
    "pearson_r": 0.6,
    "kendall_tau": 0.5,
    "inverted_share": 0.25,
    "n_models": 192,
    "dataset": "MovieLens-1M",
    "k": 100,
    "source": "KDD'24 App. A, Fig. 2",
}


@dataclass(frozen=True, eq=False)
class MetricAgreement:
    """DCG@k vs nDCG@k over a set of models / runs: per-model means, agreement and the inverted-share CI."""

    source: str
    k: int
    gain: str
    names: tuple[str, ...]
    families: tuple[str, ...]
    dcg: np.ndarray
    ndcg: np.ndarray
    n_users: int
    agreement: Agreement
    inverted_ci: ConfidenceInterval
    paper: dict = field(default_factory=lambda: dict(PAPER_APP_A))
    mechanism: AgreementMechanism | None = None

    def table(self) -> pd.DataFrame:
        """One row per model: name, family, DCG@k, nDCG@k and their ranks (1 = best)."""
        df = pd.DataFrame({"model": self.names, "family": self.families,
                           f"dcg@{self.k}": self.dcg, f"ndcg@{self.k}": self.ndcg})
        df[f"rank_dcg@{self.k}"] = df[f"dcg@{self.k}"].rank(ascending=False, method="min").astype(int)
        df[f"rank_ndcg@{self.k}"] = df[f"ndcg@{self.k}"].rank(ascending=False, method="min").astype(int)
        return df

    def comparison(self) -> pd.DataFrame:
        """Ours beside the paper's App. A numbers."""
        a = self.agreement
        return pd.DataFrame(
            {
                "statistic": ["Pearson r", "Kendall τ", "share of inverted pairs", "models", "users"],
                "ours": [a.pearson_r, a.kendall_tau, a.inverted_share, a.n, self.n_users],
                "ours_ci": ["", "", f"[{self.inverted_ci.low:.3f}, {self.inverted_ci.high:.3f}]", "", ""],
                "paper (App. A)": [self.paper["pearson_r"], self.paper["kendall_tau"],
                                   self.paper["inverted_share"], self.paper["n_models"], math.nan],
            }
        )

    def to_dict(self) -> dict:
        return {
            "source": self.source,
            "k": self.k,
            "gain": self.gain,
            "n_users": self.n_users,
            "agreement": self.agreement.to_dict(),
            "inverted_share_ci": {"low": self.inverted_ci.low, "high": self.inverted_ci.high,
                                  "level": self.inverted_ci.level},
            "paper": self.paper,
        }


def _agreement_from_matrices(source, k, gain_kind, names, families, dcg_u, ndcg_u, *, n_boot, seed, level):
    dcg = dcg_u.mean(axis=0)
    ndcg = ndcg_u.mean(axis=0)
    agr = agreement(dcg, ndcg, names=names)
    ci = inverted_share_bootstrap(dcg_u, ndcg_u, n_boot=n_boot, rng=np.random.default_rng(seed), level=level)
    mech = agreement_mechanism(dcg_u, ndcg_u, n_boot=max(10, min(n_boot, 300)), level=level,
                               rng=np.random.default_rng(seed)) if dcg_u.shape[1] >= 3 else None
    return MetricAgreement(source, k, gain_kind, tuple(names), tuple(families), dcg, ndcg, dcg_u.shape[0], agr, ci,
                           mechanism=mech)


def zoo_agreement(
    *,
    k: int = 100,
    gain_kind: str = "linear",
    world_seed: int = 0,
    split_seed: int = 0,
    grid: str = "default",
    n_boot: int = 500,
    level: float = LEVEL,
    seed: int = 0,
    cache_dir=None,
) -> MetricAgreement:
    """KDD'24 App. A on the simulated world: train the zoo on 50 % of the observed interactions, compute
    DCG@k and nDCG@k (iDCG truncated at k) on the other 50 % for every model, and compare the two metrics
    (Pearson, Kendall, share of inverted model pairs with a user-bootstrap CI). Users without a held-out
    item are left out (nDCG undefined).
    """
    check_level(level)
    split, zoo = cached_zoo(world_seed=world_seed, split_seed=split_seed, train_frac=0.5, grid=grid,
                            depth=max(k, 100), cache_dir=cache_dir)
    return agreement_over_zoo(split, zoo, k=k, gain_kind=gain_kind, n_boot=n_boot, level=level, seed=seed)


def agreement_over_zoo(split: Split, zoo: Zoo, *, k: int, gain_kind: str = "linear", n_boot: int = 500,
                       level: float = LEVEL, seed: int = 0) -> MetricAgreement:
    """DCG@k vs nDCG@k over the zoo's models on the split's MNAR test set (see :func:`zoo_agreement`)."""
    rel = split.test.astype(float)
    users = np.flatnonzero(rel.sum(axis=1) > 0)
    dcg_u = np.empty((users.size, zoo.n_models))
    ndcg_u = np.empty_like(dcg_u)
    for m in range(zoo.n_models):
        res = topn_metrics(zoo.top_items[m][users], rel[users], k=k, gain_kind=gain_kind)
        dcg_u[:, m] = res["dcg"]
        ndcg_u[:, m] = res["ndcg"]
    return _agreement_from_matrices("simulated model zoo", k, gain_kind, zoo.names, zoo.families, dcg_u, ndcg_u,
                                    n_boot=n_boot, seed=seed, level=level)


def runs_agreement(
    qrels: Qrels,
    runs: list[Run],
    *,
    k: int = 100,
    gain_kind: str = "linear",
    missing_in_run: str = "zero",
    missing_in_qrels: str = "skip",
    n_boot: int = 500,
    level: float = LEVEL,
    seed: int = 0,
) -> MetricAgreement:
    """DCG@k vs nDCG@k over users' own runs (e.g. uploaded TREC files) on the same qrels. Only users
    evaluated in every run enter (so the per-user matrices line up for the bootstrap)."""
    if len(runs) < 2:
        raise InputError(f"runs_agreement needs at least 2 runs, got {len(runs)}")
    names = [r.name for r in runs]
    if len(set(names)) != len(names):
        raise InputError(f"run names must be unique, got {names}")
    specs = [MetricSpec("dcg", k), MetricSpec("ndcg", k)]
    evs = [evaluate_run(qrels, r, specs, gain_kind=gain_kind, missing_in_run=missing_in_run,
                        missing_in_qrels=missing_in_qrels) for r in runs]
    common = evs[0].per_user.index
    for ev in evs[1:]:
        common = common.intersection(ev.per_user.index)
    if common.size < 2:
        raise InputError(f"fewer than 2 users are evaluated in every run ({common.size})")
    dcg_u = np.column_stack([ev.per_user.loc[common, f"dcg@{k}"].to_numpy() for ev in evs])
    ndcg_u = np.column_stack([ev.per_user.loc[common, f"ndcg@{k}"].to_numpy() for ev in evs])
    return _agreement_from_matrices("uploaded runs", k, gain_kind, names, ["run"] * len(runs), dcg_u, ndcg_u,
                                    n_boot=n_boot, seed=seed, level=level)


# ----------------------------------------------------------------------------------------------------------
# estimator lab


def _lam(ranks: np.ndarray, k: int, kind: str) -> np.ndarray:
    hit = ranks <= k
    if kind == "recall":
        return hit.astype(float)
    return np.where(hit, log2_discount(ranks), 0.0)


def estimator_lab(
    *,
    seeds=(0, 1, 2, 3, 4),
    ks=(5, 10, 20, 50, 100),
    lam: str = "recall",
    n_strata: int = 5,
    strata_grid=(1, 2, 3, 5, 10, 20, 50),
    strata_k: int = 100,
    propensity: str = "popularity",
    gamma: float = 2.0,
    grid: str = "small",
    world_seed: int = 0,
    n_users: int = 1000,
    n_items: int = 600,
    train_frac: float = 0.5,
    n_mcar: int = 20,
    delta: float = 0.05,
) -> EstimatorLab:
    """GS paper Alg. 1 over ``seeds`` on the simulated world: per seed split the MNAR data, train the zoo,
    estimate every model's metric (Recall@K, or a DCG-type gain with ``lam="dcg"``) with Naive, SNIPS and GS
    (plus IPS with the true propensities and n_u when ``propensity="true"``) on the MNAR test split, and compare
    with the Naive average on the MCAR sample (the truth of Alg. 1) and the complete-data value.

    ``propensity`` = "popularity" (P ∝ pop^((γ+1)/2), Sec. 5.1.3) or "true" (the simulator's test propensity).
    """
    check_choice(lam, ("recall", "dcg"), name="lam")
    check_choice(propensity, ("popularity", "true"), name="propensity")
    ks = tuple(int(k) for k in ks)
    if not ks or min(ks) < 1 or max(ks) > 100:
        raise InputError(f"ks must be cut-offs between 1 and 100 (the zoo keeps the top 100), got {ks}")
    world = simulate_world(n_users=n_users, n_items=n_items, seed=world_seed)
    pop = world.popularity
    est_names = ["naive", "snips", "gs"] + (["ips"] if propensity == "true" else [])
    rows, tau_rows, strata_rows, bound_rows = [], [], [], []
    for sd in seeds:
        split = split_world(world, train_frac=train_frac, n_mcar=n_mcar, seed=int(sd))
        zoo = train_zoo(split, grid=grid, depth=100)
        tu, ti = np.nonzero(split.test)
        if propensity == "popularity":
            p_item = popularity_propensities(pop, gamma=gamma)
            p_obs = p_item[ti]
        else:
            p_obs = split.test_propensity[tu, ti]
        strata_items = popularity_strata(pop, n_strata=n_strata)
        n_true = split.target.sum(axis=1).astype(float)
        mcar_rel = split.mcar_relevance
        mu, mj = np.nonzero(mcar_rel)
        mi = split.mcar_items[mu, mj]
        cu, ci = np.nonzero(split.target)
        # Theorem 4.1 terms over all relevant non-train pairs (they depend on the weights only)
        p_true_all = split.test_propensity[cu, ci]
        p_est_all = p_item[ci] if propensity == "popularity" else p_true_all
        if propensity == "popularity":
            p_est_all = np.maximum(p_est_all, p_item[p_item > 0].min())
        obs_all = split.test[cu, ci]
        for e in ("naive", "ips", "snips", "gs"):
            t, _, _ = theorem41_terms(cu, p_true_all, p_est_all, obs_all, estimator=e,
                                      rel_strata=strata_items[ci], delta=delta)
            bound_rows.append({"seed": sd, "estimator": e, "bias": t.bias, "concentration": t.concentration,
                               "n_users": t.n_users})
        by_k: dict[int, dict[str, list[float]]] = {k: {e: [] for e in [*est_names, "mcar", "complete"]} for k in ks}
        strata_vals: dict[int, list[float]] = {s: [] for s in strata_grid}
        for m in range(zoo.n_models):
            ranks = zoo.ranks(m)
            for k in ks:
                lam_all = _lam(ranks, k, lam)
                lv = lam_all[tu, ti]
                for e in est_names:
                    kw = {"strata": strata_items[ti]} if e == "gs" else {}
                    if e == "ips":
                        kw["n_relevant"] = n_true
                    by_k[k][e].append(mnar_estimate(tu, lv, p_obs, estimator=e, **kw).estimate.value)
                mc = np.bincount(mu, weights=lam_all[mu, mi], minlength=n_users) / np.maximum(
                    np.bincount(mu, minlength=n_users), 1)
                has = np.bincount(mu, minlength=n_users) > 0
                by_k[k]["mcar"].append(float(mc[has].mean()))
                cv = np.bincount(cu, weights=lam_all[cu, ci], minlength=n_users) / np.maximum(n_true, 1)
                by_k[k]["complete"].append(float(cv[n_true > 0].mean()))
                if k == strata_k:
                    for s in strata_grid:
                        if s > n_items:
                            continue
                        st = popularity_strata(pop, n_strata=int(s))[ti]
                        strata_vals[s].append(mnar_estimate(tu, lv, p_obs, estimator="gs", strata=st).estimate.value)
        for k in ks:
            truth = np.array(by_k[k]["mcar"])
            complete = np.array(by_k[k]["complete"])
            for e in est_names:
                est = np.array(by_k[k][e])
                tau_rows.append({"seed": sd, "k": k, "estimator": e,
                                 "kendall_tau": kendall_tau(est, truth)})
                for m in range(zoo.n_models):
                    rows.append({"seed": sd, "k": k, "model": zoo.names[m], "estimator": e, "estimate": est[m],
                                 "truth_mcar": truth[m], "truth_complete": complete[m]})
        if strata_k in ks:
            truth = np.array(by_k[strata_k]["mcar"])
            for s, vals in strata_vals.items():
                if vals:
                    strata_rows.append({"seed": sd, "n_strata": s,
                                        "kendall_tau": kendall_tau(vals, truth)})
    est_df = pd.DataFrame(rows)
    tau_df = pd.DataFrame(tau_rows)
    est_df["error"] = est_df["estimate"] - est_df["truth_mcar"]
    g = est_df.groupby(["k", "estimator", "model"])
    per_model = pd.DataFrame({"bias": g["error"].mean(), "spread": g["estimate"].std(ddof=1),
                              "sq": g["error"].apply(lambda s: float(np.mean(s**2)))}).reset_index()
    summary = per_model.groupby(["k", "estimator"]).agg(
        mean_bias=("bias", "mean"), mean_abs_bias=("bias", lambda s: float(np.mean(np.abs(s)))),
        spread=("spread", "mean"), rmse=("sq", lambda s: float(np.sqrt(np.mean(s)))),
    ).reset_index()
    taus = tau_df.groupby(["k", "estimator"])["kendall_tau"].agg(["mean", "std"]).reset_index()
    summary = summary.merge(taus.rename(columns={"mean": "tau_mean", "std": "tau_std"}), on=["k", "estimator"])
    params = {"seeds": list(seeds), "ks": list(ks), "lam": lam, "n_strata": n_strata, "propensity": propensity,
              "gamma": gamma, "grid": grid, "world_seed": world_seed, "n_users": n_users, "n_items": n_items,
              "train_frac": train_frac, "n_mcar": n_mcar, "delta": delta, "n_models": zoo.n_models,
              "strata_k": strata_k}
    return EstimatorLab(est_df, tau_df, pd.DataFrame(strata_rows), pd.DataFrame(bound_rows), summary, params)


__all__ = [
    "PAPER_APP_A",
    "BoundTerms",
    "EstimatorLab",
    "MetricAgreement",
    "agreement_over_zoo",
    "estimator_lab",
    "lab_bias_takeaway",
    "lab_takeaway",
    "runs_agreement",
    "zoo_agreement",
]
