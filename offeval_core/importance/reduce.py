"""The importance reduce: per-session sums of capped weights and rewards, every Gilotte estimator's
per-session x and y, and their moments in the ``Moments.offline`` schema (see docs/importance.md).
"""

from __future__ import annotations

import datetime as _dt
import math
from collections.abc import Sequence
from dataclasses import replace

import ibis
import ibis.expr.types as ir
import numpy as np
import pandas as pd

from offeval_core.engine import (
    DEFAULT_CLIPS,
    GROUP_KEYS,
    Grid,
    Moments,
    Source,
    _fetch_table,
    _tidy,
)
from offeval_core.engine import _online as online_moments
from offeval_core.estimators import aggregate, select  # noqa: F401  (doctest namespace)
from offeval_core.importance.keys import CAPPINGS, SCALES, estimator_key
from offeval_core.importance.normalisation import (
    CELL_KEYS,
    POOLED_CONTEXT,
    group_ratio,
    pooled_context,
)
from offeval_core.importance.weights import (
    PROPENSITY,
    WeightSetup,
    capping_variants,
    importance_source,
    resolve_weights,
    weight_expr,
)
from offeval_core.logs import LOGGING_POLICY, Logs
from offeval_core.stats import kish_ess_from_sums
from offeval_core.validation import check_choice

__all__ = ["EXACT_TOL", "EXTRA_COLUMNS", "add_importance", "reduce_importance", "session_table", "weight_diagnostics"]

EXACT_TOL = 1e-6
EXTRA_COLUMNS = ("ref_sum", "ref_m2", "ref_den_sum", "ref_den_m2", "ref_co_den", "co_ref", "co_ref_den",
                 "den_co_ref", "den_co_ref_den", "w_rows", "w_sum", "w_sumsq", "wc_sum", "wc_sumsq", "w_max",
                 "n_exact")


def session_table(source: Source, setup: WeightSetup, policy: str, *, rewards: Sequence[str],
                  variants: pd.DataFrame, logs: Logs | None = None, pbm_floor: float | None = None) -> ir.Table:
    """Per (variant v, session): m (rows), s = Σ w̄, ``a__r`` = Σ w̄ r, ``c__r`` = Σ r, ``p__r`` = Σ w̄ r / ν
    (exact PointNCIS part), ``exact`` (1 if every row had an exact ν), weight diagnostics, and the
    session's group keys, stratum and context."""
    t = source.rows
    w = weight_expr(source, setup, policy, logs=logs, pbm_floor=pbm_floor)
    lp = t["logging_propensity"] if setup.mode == "propensity" else ibis.literal(1.0)
    base = t.select("session", "rank", "item_id", *rewards, w=w.cast("float64"), lp=lp.cast("float64"))
    ctx = source.sessions.select("session", "experiment_id", "arm", "context")
    base = base.join(ctx, "session")
    vt = ibis.memtable(variants[["v", "clip", "zero"]])

    def capped(tab):
        return ibis.ifelse(tab.zero, ibis.ifelse(tab.w < tab.clip, tab.w, 0.0), ibis.least(tab.w, tab.clip))

    x = base.cross_join(vt)
    x = x.mutate(wbar=capped(x))
    ckeys = ["v", "experiment_id", "arm", "context", "rank"]
    if setup.mode == "propensity":
        # exact E_πp[W̄ | context, rank] where the logged actions of the context enumerate π_p (Σ π_p = 1)
        acts = base.select("experiment_id", "arm", "context", "rank", "item_id", "lp", "w").distinct()
        acts = acts.cross_join(vt)
        acts = acts.mutate(wbar=capped(acts))
        nu = acts.group_by(ckeys).aggregate(mass=acts.lp.sum(), nu=(acts.lp * acts.wbar).sum())
        nu = nu.mutate(ok=((nu.mass - 1.0).abs() < EXACT_TOL) & (nu.nu > 0))
        x = x.join(nu.select(*ckeys, "nu", "ok"), ckeys)
        ok, nu_e = x.ok, x.nu
    else:
        ok, nu_e = ibis.literal(False), ibis.literal(1.0)
    x = x.mutate(ok=ok, nu=nu_e)
    aggs = {"m": x.count().cast("float64"), "s": x.wbar.sum(), "exact": x.ok.cast("int64").min(),
            "w_sum": x.w.sum(), "w_sumsq": (x.w * x.w).sum(), "wc_sumsq": (x.wbar * x.wbar).sum(),
            "w_max": x.w.max()}
    for r in rewards:
        aggs[f"a__{r}"] = (x.wbar * x[r]).sum()
        aggs[f"c__{r}"] = x[r].sum()
        aggs[f"p__{r}"] = ibis.ifelse(x.ok, x.wbar * x[r] / x.nu, 0.0).sum()
    per = x.group_by(["v", "session"]).aggregate(**aggs)
    return per.join(source.sessions, "session")


def _normalised(p2: ir.Table, a: ir.Value, group: list, *, exposure_session: bool) -> ir.Value:
    """Per-session ψ of an estimator normalised within ``group`` (Σψ over a group = U_g · R_g).

    Propensity weights (or the impression scale): R_g = A_g / Y_g with y = u · s / m, and
    ψ = u R_g + (U_g / Y_g)(a − R_g y). Exposure weights at the session scale: the capped share of the
    target's exposure mass ν_g = S_g / W_g (S = Σ w̄, W = Σ w), R_g = (A_g / U_g) / ν_g, and the
    linearisation of U_g R_g = A_g W_g / S_g in each session's a, s and w:
    ψ = (W_g a − U_g R_g s) / S_g + U_g R_g w / W_g (docs/importance.md). R_g is
    :func:`~offeval_core.importance.normalisation.group_ratio`, as in the bootstrap.
    """
    g = dict(group_by=group)
    big_a, big_u = a.sum().over(**g), p2.u_.sum().over(**g)
    if exposure_session:
        big_y, big_s, big_w = None, p2.s.sum().over(**g), p2.w_sum.sum().over(**g)
    else:
        big_y, big_s, big_w = p2.y_.sum().over(**g), None, None
    rg = group_ratio(big_a, big_y, big_u, big_s, big_w, exposure_session=exposure_session, where=ibis.ifelse)
    if exposure_session:
        total = big_u * rg
        return ibis.ifelse(big_s > 0, (big_w * a - total * p2.s) / big_s + total * p2.w_sum / big_w, 0.0)
    return ibis.ifelse(big_y > 0, p2.u_ * rg + big_u / big_y * (a - rg * p2.y_), 0.0)


def _long_values(per: ir.Table, *, rewards: Sequence[str], scales: Sequence[str], exposure: bool = False) -> ir.Table:
    """Per (v, session, reward, kernel, scale): target x, y and logging c, u (see the module docstring).

    ``exposure``: the weights are exposure ratios D(R(i)) / D0(r_i); at the session scale NCIS, PieceNCIS
    and plug-in PointNCIS then normalise by the capped share of the weight mass Σ w̄ / Σ w (whose
    expectation is the share the estimator assumes) instead of the mean capped weight Σ w̄ / m (whose
    expectation is that share only when E[W] = 1 per row, i.e. for propensity ratios)."""
    cells = ["v", *CELL_KEYS]
    cell_cols = [per[k] for k in cells]
    hc = dict(group_by=[*cell_cols, per.context, per.exact])
    per = per.mutate(ctx_rows_=per.m.sum().over(**hc))
    per = per.mutate(ctx_=ibis.ifelse(pooled_context(per.ctx_rows_, per.exact), ibis.literal(POOLED_CONTEXT),
                                      per.context))
    parts = []
    for scale in scales:
        u = ibis.literal(1.0) if scale == "session" else per.m
        y_ncis = per.s / per.m * u
        p2 = per.mutate(u_=u.cast("float64"), y_=y_ncis.cast("float64"))
        cell = [p2[k] for k in cells]
        exposure_session = exposure and scale == "session"
        for r in rewards:
            a, c = p2[f"a__{r}"], p2[f"c__{r}"]
            common = dict(reward=ibis.literal(r), scale=ibis.literal(scale), c=c, u=p2.u_)
            keep = ["v", "session", *GROUP_KEYS, "m", "s", "exact", "w_sum", "w_sumsq", "wc_sumsq", "w_max"]
            parts.append(p2.select(*keep, kernel=ibis.literal("cis"), x=a, y=p2.u_, **common))
            if exposure_session:  # normalised per cell by the capped share of the weight mass
                ncis = _normalised(p2, a, cell, exposure_session=True)
                parts.append(p2.select(*keep, kernel=ibis.literal("ncis"), x=ncis, y=p2.u_, **common))
            else:
                parts.append(p2.select(*keep, kernel=ibis.literal("ncis"), x=a, y=p2.y_, **common))
            # PieceNCIS: NCIS within cells (v, experiment, day, arm, stratum)
            psi = _normalised(p2, a, [*cell, p2.stratum], exposure_session=exposure_session)
            parts.append(p2.select(*keep, kernel=ibis.literal("piece"), x=psi, y=p2.u_, **common))
            # PointNCIS: exact ν where enumerated, else plug-in = PieceNCIS with one stratum per context
            plug = _normalised(p2, a, [*cell, p2.ctx_, p2.exact], exposure_session=exposure_session)
            point = ibis.ifelse(p2.exact == 1, p2[f"p__{r}"], plug)
            parts.append(p2.select(*keep, kernel=ibis.literal("point"), x=point, y=p2.u_, **common))
    return ibis.union(*parts)


def _aggregate(long: ir.Table) -> ir.Table:
    """Per (v, group, reward, kernel, scale): the moments of x, y (target) and c, u (logging) over the
    sessions, second moments centred (the backend's population (co)variance times the count; see
    :data:`offeval_core.moment_columns.OFFLINE_ROLES`), and the weight diagnostics."""
    x, y, c, u = long.x, long.y, long.c, long.u
    d = x - c
    n = long.count()

    def m2(v):
        return v.var(how="pop") * n

    def co(a, b):
        return a.cov(b, how="pop") * n

    return long.group_by(["v", *GROUP_KEYS, "reward", "kernel", "scale"]).aggregate(
        n=n, sum=x.sum(), m2=m2(x), den_sum=y.sum(), den_m2=m2(y), co_den=co(x, y),
        sum_diff=d.sum(), m2_diff=m2(d), co_diff_den=co(d, y),
        ref_sum=c.sum(), ref_m2=m2(c), ref_den_sum=u.sum(), ref_den_m2=m2(u), ref_co_den=co(c, u),
        co_ref=co(x, c), co_ref_den=co(x, u), den_co_ref=co(y, c), den_co_ref_den=co(y, u),
        w_rows=long.m.sum(), w_sum=long.w_sum.sum(), w_sumsq=long.w_sumsq.sum(),
        wc_sum=long.s.sum(), wc_sumsq=long.wc_sumsq.sum(), w_max=long.w_max.max(),
        n_exact=long.exact.cast("int64").sum(),
    )


def reduce_importance(
    logs: Logs, *, rewards: Sequence[str] | None = None, policies: Sequence[str] | None = None,
    clips: Sequence[float] = DEFAULT_CLIPS, cappings: Sequence[str] = CAPPINGS, scales: Sequence[str] = SCALES,
    weights: str = "auto", discount: str = "pbm", exposure: str = "pbm", strata="segment", context="session",
    backend=None, pbm_floor: float | None = None,
) -> Moments:
    """Moments of the Gilotte estimator family, in the ``Moments.offline`` schema (one row per group keys,
    reward, discount, exposure, clip, policy, metric = registry key of :data:`ESTIMATORS`).

    ``discount`` / ``exposure`` of the rows are ``"propensity"`` for propensity weights, else the D / D0
    specs. IS and SNIPS rows do not depend on the clip (they are repeated for every clip of the grid).
    Extra columns: ``ref_*`` and cross moments for paired effects of NIS / NCIS, and weight diagnostics
    (``w_rows``, ``w_sum``, ``w_sumsq``, ``wc_sum``, ``wc_sumsq``, ``w_max``, ``n_exact``) — see
    :func:`weight_diagnostics`. ``online``: per-session observed reward per group, as in the DCG reduce.

    >>> from offeval_core.logs import read_logs
    >>> logs = read_logs(pd.DataFrame({"session_id": [1, 2], "rank": [1, 1], "click": [1, 0],
    ...     "logging_propensity": [0.5, 0.5], "target_propensity__new": [0.9, 0.1]}))
    >>> m = reduce_importance(logs, clips=[1.5])
    >>> rows = aggregate(select(m, reward="click", policy="new", metric="cis", discount="propensity",
    ...                         exposure="propensity", clip=1.5))
    >>> float(rows["sum"].iloc[0] / rows["n"].iloc[0])  # (min(1.8, 1.5)·1 + 0.2·0) / 2 sessions
    0.75
    """
    rewards = tuple(rewards) if rewards else logs.rewards
    for r in rewards:
        logs.check_reward(r)
    policies = tuple(policies) if policies else (logs.propensity_policies if "logging_propensity"
                                                 in logs.frame.columns and weights != "exposure" else logs.policies)
    setup = resolve_weights(logs, policies, weights=weights, discount=discount, exposure=exposure)
    for s in scales:
        check_choice(s, SCALES, name="scale")
    scales = tuple(dict.fromkeys(scales))
    variants = capping_variants(clips, cappings)
    source = importance_source(logs, setup, strata=strata, context=context, backend=backend)
    parts = []
    for i, policy in enumerate(setup.policies):
        per = session_table(source, setup, policy, rewards=rewards, variants=variants, logs=logs, pbm_floor=pbm_floor)
        wide = source.backend.execute(_aggregate(_long_values(per, rewards=rewards, scales=scales,
                                                               exposure=setup.mode != PROPENSITY)))
        parts.append(_to_long(wide, variants, policy, setup, with_logging=i == 0))
    offline = pd.concat(parts, ignore_index=True)  # the uncapped rows (IS, SNIPS) may overflow where capped
    grid_clips = tuple(sorted(set(variants["clip_value"])))
    grid = Grid(rewards=rewards, policies=setup.policies, discounts=(setup.discount,),
                exposures=(setup.exposure,), clips=grid_clips)
    online = _match_day(_online(source, rewards), logs)
    offline = _match_day(offline, logs)
    keys = [k for k in GROUP_KEYS if k in online.columns]
    labels = {PROPENSITY: "logged propensities π_t / π_p"} if setup.mode == "propensity" else {}
    return Moments(offline=_tidy(offline, keys), online=online, grid=grid, discount_labels=labels,
                   source=logs.source)


def add_importance(moments: Moments, logs: Logs, **kwargs) -> Moments:
    """A new :class:`Moments` with the importance rows of :func:`reduce_importance` appended to an existing
    (e.g. DCG) reduce of the same logs; the grid becomes the union of both grids."""
    extra = reduce_importance(logs, **kwargs)
    offline = pd.concat([moments.offline, extra.offline], ignore_index=True)
    g0, g1 = moments.grid, extra.grid

    def union(a, b):
        return tuple(dict.fromkeys([*a, *b]))

    grid = Grid(rewards=union(g0.rewards, g1.rewards), policies=union(g0.policies, g1.policies),
                discounts=union(g0.discounts, g1.discounts), exposures=union(g0.exposures, g1.exposures),
                clips=union(g0.clips, g1.clips), ndcg_rule=g0.ndcg_rule)
    online = moments.online
    missing = [r for r in g1.rewards if r not in set(online["reward"])]
    if missing:
        online = pd.concat([online, extra.online[extra.online["reward"].isin(missing)]], ignore_index=True)
    return Moments(offline=offline, online=online, grid=grid,
                   discount_labels={**moments.discount_labels, **extra.discount_labels}, source=moments.source)


def _to_long(wide: pd.DataFrame, variants: pd.DataFrame, policy: str, setup: WeightSetup, *,
             with_logging: bool) -> pd.DataFrame:
    wide = wide.merge(variants[["v", "clip_value", "capping"]], on="v")
    names = {"cis": "cis", "ncis": "ncis", "piece": "piece-ncis", "point": "point-ncis"}
    wide["metric"] = [estimator_key(names[k], capping=c, scale=s)
                      for k, c, s in zip(wide["kernel"], wide["capping"], wide["scale"], strict=True)]
    # IS and SNIPS are CIS and NCIS at c = ∞, repeated for every clip of the grid
    # (at c = ∞ both cappings leave every weight unchanged; use the first computed one)
    first = variants["capping"].iloc[0]
    inf = wide[(wide["clip_value"] == math.inf) & (wide["capping"] == first) & wide["kernel"].isin(["cis", "ncis"])]
    clips = sorted(set(variants["clip_value"]))
    uncapped = []
    for c in clips:
        part = inf.copy()
        part["clip_value"] = c
        part["metric"] = [estimator_key("is" if k == "cis" else "snips", scale=s)
                          for k, s in zip(part["kernel"], part["scale"], strict=True)]
        uncapped.append(part)
    out = pd.concat([wide, *uncapped], ignore_index=True).drop(columns=["v", "kernel", "scale", "capping"])
    out = out.rename(columns={"clip_value": "clip"})
    out["policy"] = policy
    out["discount"], out["exposure"] = setup.discount, setup.exposure
    out["n"] = out["n"].astype(np.int64)
    if not with_logging:
        return out
    log = out.copy()
    log["policy"] = LOGGING_POLICY
    for a, b in (("sum", "ref_sum"), ("m2", "ref_m2"), ("den_sum", "ref_den_sum"), ("den_m2", "ref_den_m2"),
                 ("co_den", "ref_co_den")):
        log[a] = log[b]
    for col in ("sum_diff", "m2_diff", "co_diff_den", *EXTRA_COLUMNS):
        log[col] = np.nan
    return pd.concat([log, out], ignore_index=True)


def _match_day(df: pd.DataFrame, logs: Logs) -> pd.DataFrame:
    """Give ``day`` the Python type the logs use (the backend may return dates as timestamps)."""
    days = logs.sessions["day"]
    sample = days.iloc[0]
    if isinstance(sample, _dt.date) and not isinstance(sample, _dt.datetime):
        df["day"] = pd.to_datetime(df["day"]).dt.date.astype(object)
    elif days.dtype != df["day"].dtype:
        df["day"] = df["day"].astype(days.dtype)
    return df


def _online(source: Source, rewards: Sequence[str]) -> pd.DataFrame:
    """The online moments of :func:`offeval_core.engine.reduce` (one definition), on the importance tables."""
    keys = list(GROUP_KEYS)
    s = source.sessions
    rows = source.rows.select("session", *rewards).join(s.select("session", *keys), "session")
    counts = _fetch_table(source.backend, s.group_by(keys).aggregate(n=s.count()))
    return _tidy(online_moments(replace(source, rows=rows), rewards, counts, keys), keys)


def weight_diagnostics(rows: pd.DataFrame, by: Sequence[str] = ()) -> pd.DataFrame:
    """Weight diagnostics of importance rows (target policies), aggregated over every key not in ``by``.

    ``ess`` = (Σ w̄)² / Σ w̄² (Kish's effective sample size of the capped weights, in rows;
    :func:`~offeval_core.stats.kish_ess_from_sums`), ``ess_uncapped``
    likewise for w, ``max_weight`` = max w, ``capped_share`` = 1 − Σ w̄ / Σ w (share of the weight mass
    removed by capping; the bias bound of CIS is r_max · P(W > c), Gilotte Sec. 4.2), ``mean_weight`` = Σ w /
    rows (≈ 1 for propensity weights with full support), ``exact_share`` = sessions with an exact PointNCIS
    normaliser / sessions.
    """
    rows = rows[rows["policy"] != LOGGING_POLICY]
    cols = ["n", "w_rows", "w_sum", "w_sumsq", "wc_sum", "wc_sumsq", "n_exact"]
    g = rows.groupby(list(by), observed=True, sort=True) if by else None
    summed = g[cols].sum() if by else rows[cols].sum().to_frame().T
    mx = g["w_max"].max() if by else pd.Series([rows["w_max"].max()])
    out = summed.reset_index() if by else summed.reset_index(drop=True)
    out["max_weight"] = mx.to_numpy()
    # pandas Series divide under their own errstate and kish_ess_from_sums sets its own: 0 / 0 gives NaN silently
    out["ess"] = kish_ess_from_sums(out["wc_sum"], out["wc_sumsq"])
    out["ess_uncapped"] = kish_ess_from_sums(out["w_sum"], out["w_sumsq"])
    out["capped_share"] = 1 - out["wc_sum"] / out["w_sum"]
    out["mean_weight"] = out["w_sum"] / out["w_rows"]
    out["exact_share"] = out["n_exact"] / out["n"]
    return out
