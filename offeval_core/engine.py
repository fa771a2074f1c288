"""The log reduce: per-session DCG-family values for a grid of variants, aggregated into moments.

Written once as backend-neutral Ibis expressions (DuckDB embedded by default; any Ibis backend with
window functions and arrays, e.g. Spark, runs the same code). Only rewarded rows are read on the heavy
path: DCG, iDCG and every IPS-type sum take contributions only from rows with a non-zero reward
(DESIGN.md "Only rewarded rows matter"); sessions without a reward contribute zeros to the sums and are
counted from the session table.

Per session τ, variant (D, D0, m) and policy R (KDD'24 Eq. 9 with Sec. 6.2 clipping):

    ℓ_i    = c_i · min(m, 1 / D0(r_i))                 de-biased, clipped label
    DCG_τ  = Σ_i ℓ_i · D(R(i))
    iDCG_τ = Σ_j ℓ_(j) · D(j)                          labels of τ sorted descending
    nDCG_τ = DCG_τ / iDCG_τ   (0 when iDCG_τ = 0, or the session is dropped)

Sorting the labels once per (variant, session) serves every policy; it is done per clip value because
c · min(m, w) need not preserve the order of c · w when rewards are not binary.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import ibis
import ibis.expr.types as ir
import numpy as np
import pandas as pd

from offeval_core.discounts import DiscountModel, parse_discount
from offeval_core.logs import LOGGING_POLICY, POLICY_PREFIX, Logs
from offeval_core.validation import check_choice, check_clips

DEFAULT_CLIPS: tuple[float, ...] = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, math.inf)
"""The clip grid of KDD'24 Sec. 6.2 (plus 1024), m = 1 (raw labels) … ∞ (unbiased)."""

GROUP_KEYS = ("experiment_id", "day", "arm", "segment")
METRICS = ("dcg", "ndcg")
NDCG_RULES = ("zero", "drop")
_INF = 1e300  # stands for m = ∞ inside queries: larger than any weight 1 / D0


@dataclass(frozen=True)
class Grid:
    """The variants a reduce computes: rewards × policies × (D, D0) × clip values."""

    rewards: tuple[str, ...]
    policies: tuple[str, ...]
    discounts: tuple[str, ...] = ("pbm",)
    exposures: tuple[str, ...] = ("pbm",)
    clips: tuple[float, ...] = DEFAULT_CLIPS
    ndcg_rule: str = "zero"

    def __post_init__(self):
        object.__setattr__(self, "clips", check_clips(self.clips))
        check_choice(self.ndcg_rule, NDCG_RULES, name="ndcg_rule")
        if not self.rewards:
            raise ValueError("rewards must name at least one reward column, got none")
        if not self.discounts or not self.exposures:
            raise ValueError("discounts and exposures must each list at least one discount model")


@dataclass(frozen=True, eq=False)
class Moments:
    """Per-group sufficient statistics of every variant: everything the analyses need.

    ``offline`` (long): one row per (group keys, reward, discount, exposure, clip, policy, metric) with
    ``n`` sessions, ``sum`` / ``sumsq`` of the per-session value x, the per-session denominator y of
    ratio estimators (for DCG rows y = iDCG, so pnDCG = Σx / Σy): ``den_sum`` / ``den_sumsq`` and
    ``sum_x_den`` = Σ x·y, and for target policies the paired difference d = target − logging on the
    same sessions: ``sum_diff``, ``sumsq_diff``, ``sum_diff_den`` = Σ d·y. The logging policy is named
    ``"logging"``. ``online``: per (group keys, reward) the per-session observed reward: ``n``, ``sum``,
    ``sumsq``.
    """

    offline: pd.DataFrame
    online: pd.DataFrame
    grid: Grid
    discount_labels: dict[str, str] = field(default_factory=dict)
    source: str = ""

    @property
    def keys(self) -> tuple[str, ...]:
        return tuple(k for k in GROUP_KEYS if k in self.online.columns)


# ------------------------------------------------------------------------------------------ ibis inputs


def connect():
    """The embedded default backend: an in-memory DuckDB through Ibis."""
    return ibis.duckdb.connect()


@dataclass(frozen=True, eq=False)
class Source:
    """Ibis tables a reduce reads: ``rows`` (one per impression) and ``sessions`` (one per session)."""

    rows: ir.Table
    sessions: ir.Table
    backend: object
    max_rank: int
    name: str = ""


def source_from_logs(logs: Logs, backend=None) -> Source:
    """Register validated in-memory logs with an Ibis backend (DuckDB by default)."""
    backend = backend or connect()
    cols = ["session", "rank", *logs.rewards, *(POLICY_PREFIX + p for p in logs.policies)]
    rows = backend.create_table(f"rows_{id(logs)}", logs.frame[cols], overwrite=True)
    sess = logs.sessions[["session", *GROUP_KEYS]].copy()
    for k in ("experiment_id", "arm", "segment"):
        sess[k] = sess[k].astype(str)
    sessions = backend.create_table(f"sessions_{id(logs)}", sess, overwrite=True)
    return Source(rows=rows, sessions=sessions, backend=backend, max_rank=logs.max_rank, name=logs.source)


# -------------------------------------------------------------------------------------- the kernel


def _lookup(models: Sequence[DiscountModel], which: ir.IntegerValue, rank: ir.IntegerValue, max_rank: int):
    """D_which(rank) as an Ibis expression: one array literal per model, indexed by rank (0 outside 1..max)."""
    arrays = [ibis.literal([float(v) for v in m.table(max_rank)], type="array<float64>") for m in models]
    inside = (rank >= 1) & (rank <= max_rank)
    if len(arrays) == 1:
        value = arrays[0][rank - 1]
    else:
        value = ibis.cases(*[(which == k, arr[rank - 1]) for k, arr in enumerate(arrays[:-1])], else_=arrays[-1][rank - 1])
    return ibis.ifelse(inside, value, 0.0)


def variant_table(grid: Grid) -> pd.DataFrame:
    """One row per (discount, exposure, clip) with integer ids used inside the queries."""
    rows = []
    for dm, d in enumerate(grid.discounts):
        for em, e in enumerate(grid.exposures):
            for m in grid.clips:
                rows.append({"v": len(rows), "dm": dm, "em": em, "clip": _INF if math.isinf(m) else float(m),
                             "discount": d, "exposure": e, "clip_value": float(m)})
    return pd.DataFrame(rows)


def session_kernel(
    source: Source, *, reward: str, policies: Sequence[str], discounts: Sequence[DiscountModel],
    exposures: Sequence[DiscountModel], variants: pd.DataFrame,
) -> ir.Table:
    """Per (variant, session with a reward): DCG of the logging and target policies and iDCG.

    Columns ``v``, ``session``, ``dcg__logging``, ``dcg__<policy>``…, ``idcg``. Sessions without a
    positive reward are absent (all their values are 0).
    """
    t = source.rows
    pos = t.filter(t[reward] > 0).select(
        "session", "rank", c=t[reward].cast("float64"),
        **{f"t__{p}": t[POLICY_PREFIX + p] for p in policies},
    )
    vt = ibis.memtable(variants[["v", "dm", "em", "clip"]])
    x = pos.cross_join(vt)
    w0 = 1.0 / _lookup(exposures, x.em, x["rank"], source.max_rank)
    label = x.c * ibis.least(x.clip, w0)
    x = x.mutate(label=label)
    cols = {f"d__{LOGGING_POLICY}": x.label * _lookup(discounts, x.dm, x["rank"], source.max_rank)}
    for p in policies:
        cols[f"d__{p}"] = x.label * _lookup(discounts, x.dm, x[f"t__{p}"], source.max_rank)
    pos_j = ibis.row_number().over(group_by=[x.v, x.session], order_by=[x.label.desc(), x["rank"]]) + 1
    x = x.mutate(**cols, ideal=x.label * _lookup(discounts, x.dm, pos_j, source.max_rank))
    names = [LOGGING_POLICY, *policies]
    return x.group_by(["v", "session"]).aggregate(
        idcg=x.ideal.sum(), **{f"dcg__{p}": x[f"d__{p}"].sum() for p in names}
    )


def reduce(logs: Logs | Source, grid: Grid, *, backend=None, pbm_floor: float | None = None) -> Moments:
    """Compute per-group moments of every variant in ``grid`` (the heavy step; everything else is cheap).

    Groups are (experiment_id, day, arm, segment); analyses sum moments over whichever keys they ignore.
    """
    if isinstance(logs, Logs):
        for r in grid.rewards:
            logs.check_reward(r)
        for p in grid.policies:
            logs.check_policy(p)
        source = source_from_logs(logs, backend)
    else:
        source = logs
    kwargs = {} if pbm_floor is None else {"floor": pbm_floor}
    discounts = [parse_discount(d, logs=logs, **kwargs) for d in grid.discounts]
    exposures = [parse_discount(e, logs=logs, **kwargs) for e in grid.exposures]
    _check_exposures(exposures, grid)
    variants = variant_table(grid)
    keys = list(GROUP_KEYS)
    sessions = source.sessions
    counts = source.backend.execute(sessions.group_by(keys).aggregate(n=sessions.count()))
    names = [LOGGING_POLICY, *grid.policies]

    offline_parts, online_parts = [], []
    for reward in grid.rewards:
        per = session_kernel(source, reward=reward, policies=grid.policies, discounts=discounts,
                             exposures=exposures, variants=variants)
        per = per.join(sessions, "session")
        aggs = {
            "den_sum": per.idcg.sum(), "den_sumsq": (per.idcg * per.idcg).sum(),
            "n_pos": (per.idcg > 0).cast("int64").sum(),
        }
        ndcg = {p: ibis.ifelse(per.idcg > 0, per[f"dcg__{p}"] / per.idcg, 0.0) for p in names}
        for p in names:
            d = per[f"dcg__{p}"]
            aggs |= {f"dcg__{p}__sum": d.sum(), f"dcg__{p}__sumsq": (d * d).sum(),
                     f"dcg__{p}__sum_x_den": (d * per.idcg).sum(),
                     f"ndcg__{p}__sum": ndcg[p].sum(), f"ndcg__{p}__sumsq": (ndcg[p] * ndcg[p]).sum(),
                     f"ndcg__{p}__sum_x_den": (ndcg[p] * per.idcg).sum()}
        for p in grid.policies:
            dd = per[f"dcg__{p}"] - per[f"dcg__{LOGGING_POLICY}"]
            nd = ndcg[p] - ndcg[LOGGING_POLICY]
            aggs |= {f"dcg__{p}__sum_diff": dd.sum(), f"dcg__{p}__sumsq_diff": (dd * dd).sum(),
                     f"dcg__{p}__sum_diff_den": (dd * per.idcg).sum(),
                     f"ndcg__{p}__sum_diff": nd.sum(), f"ndcg__{p}__sumsq_diff": (nd * nd).sum(),
                     f"ndcg__{p}__sum_diff_den": (nd * per.idcg).sum()}
        wide = source.backend.execute(per.group_by(["v", *keys]).aggregate(**aggs))
        offline_parts.append(_to_long(wide, counts, variants, names, grid, reward, keys))

        t = source.rows
        pos = t.filter(t[reward] > 0)
        tot = pos.group_by("session").aggregate(total=pos[reward].cast("float64").sum()).join(sessions, "session")
        online = source.backend.execute(
            tot.group_by(keys).aggregate(sum=tot.total.sum(), sumsq=(tot.total * tot.total).sum())
        )
        online = counts.merge(online, on=keys, how="left").fillna({"sum": 0.0, "sumsq": 0.0})
        online.insert(len(keys), "reward", reward)
        online_parts.append(online)

    offline = pd.concat(offline_parts, ignore_index=True)
    online = pd.concat(online_parts, ignore_index=True)
    labels = {m.spec if m.kind != "pbm" else "pbm": m.label for m in [*discounts, *exposures]}
    return Moments(offline=_tidy(offline, keys), online=_tidy(online, keys), grid=grid,
                   discount_labels=labels, source=source.name)


def _check_exposures(exposures: Sequence[DiscountModel], grid: Grid) -> None:
    for e in exposures:
        if e.kind == "table" and (e.cutoff is not None or min(e.values) <= 0) and math.inf in grid.clips:
            raise ValueError(
                f"exposure model {e.spec!r} gives probability 0 to some ranks, so 1 / D0 is infinite there; "
                "logged items were viewed, so an exposure model must be > 0 at every logged rank "
                "(drop the cut-off or use a finite clip grid)"
            )
        if e.kind != "table" and e.cutoff is not None:
            raise ValueError(
                f"exposure model {e.spec!r} has a cut-off; a cut-off belongs to the target discount D, "
                "not to the exposure model D0 of logged (viewed) ranks"
            )


def _to_long(wide, counts, variants, names, grid, reward, keys) -> pd.DataFrame:
    wide = wide.merge(variants[["v", "discount", "exposure", "clip_value"]], on="v")
    # groups with sessions but no reward in this variant still need rows: complete the grid
    full = counts.merge(variants[["v", "discount", "exposure", "clip_value"]], how="cross")
    wide = full.merge(wide.drop(columns=["discount", "exposure", "clip_value"]), on=["v", *keys], how="left")
    wide = wide.fillna({c: 0 for c in wide.columns if c.startswith(("dcg__", "ndcg__", "den_", "n_pos"))})
    parts = []
    for metric in METRICS:
        for p in names:
            pre = f"{metric}__{p}__"
            part = wide[[*keys, "discount", "exposure", "clip_value", "n", "n_pos", "den_sum", "den_sumsq"]].copy()
            part["reward"] = reward
            part["policy"] = p
            part["metric"] = metric
            for stat in ("sum", "sumsq", "sum_x_den", "sum_diff", "sumsq_diff", "sum_diff_den"):
                part[stat] = wide[pre + stat].to_numpy(dtype=float) if pre + stat in wide else np.nan
            if metric == "ndcg" and grid.ndcg_rule == "drop":
                part["n"] = part["n_pos"]
            parts.append(part)
    out = pd.concat(parts, ignore_index=True).rename(columns={"clip_value": "clip"})
    out["n"] = out["n"].astype(np.int64)
    return out.drop(columns=["n_pos"])


def _tidy(df: pd.DataFrame, keys) -> pd.DataFrame:
    front = [*keys, "reward"] + [c for c in ("discount", "exposure", "clip", "policy", "metric") if c in df.columns]
    rest = [c for c in df.columns if c not in front]
    df = df[front + rest].sort_values(front, kind="stable").reset_index(drop=True)
    for k in ("experiment_id", "arm", "segment"):
        df[k] = df[k].astype(str)
    return df
