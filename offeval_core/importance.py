"""Capped and normalised importance sampling on propensity or ranking logs (Gilotte et al., WSDM'18).

Estimators of the expected reward of a target policy π_t from rows logged by π_p (Sec. 3-5, Table 2),
with per-row importance weights

    w_i = target_propensity / logging_propensity          (propensity logs: π_t(a|x) / π_p(a|x))
    w_i = D(R(i)) / D0(r_i)                               (ranking logs without propensities)

and capped weights w̄_i = min(w_i, c) (max-capping) or w_i · 1{w_i < c} (zero-capping), c ∈ [1, ∞].

Everything is reduced per session τ (the independent unit; rows of one session are slots of one
display, or a bandit round each) to

    a_τ = Σ_i w̄_i r_i   (target numerator)      c_τ = Σ_i r_i     (logging numerator)
    s_τ = Σ_i w̄_i       (capped weight mass)    m_τ = number of rows (impressions)

and, with the unit count u_τ = 1 (per-session scale) or u_τ = m_τ (per-impression, CTR-like scale), every
estimator is a ratio of session sums Σx / Σy against the logging value Σc / Σu:

=============  ==================================================  =================================
estimator      per-session x, y                                    paper
=============  ==================================================  =================================
IS / CIS       x = a,  y = u                                       Sec. 3, Sec. 4.2
SNIPS / NCIS   x = a,  y = u · s / m (mean capped weight × u)      Sec. 4.1, Eq. (1)
PieceNCIS      x = ψ (below), y = u                                Sec. 5.3
PointNCIS      x = Σ_i w̄_i r_i / ν(x, rank_i), y = u  (exact ν)    Sec. 5.4
=============  ==================================================  =================================

SNIPS / NCIS normalise over whatever rows an analysis aggregates ("global" normalisation); their paired
effect is a difference of two ratios with different denominators, read through the ``ref_*`` columns
(:func:`offeval_core.estimators.ratio_difference`). At the per-impression scale NCIS is the paper's
Σ w̄ r / Σ w̄ over rows; at the per-session scale the control variate is the session's mean capped weight
(E_πp[W] = 1 per row for propensity logs). IS and SNIPS are CIS and NCIS with c = ∞.

**PieceNCIS** (Σ_g α_g R_g, R_g = A_g / Y_g the NCIS of stratum g, α_g its share of units) is stored as
the mean of the linearised per-session value ψ_τ = u_τ R_g + (U_g / Y_g)(a_τ − R_g y_τ): Σψ / Σu equals
the estimator exactly and the sample variance of ψ is its delta-method variance, including the
randomness of α_g. Strata are crossed with (experiment_id, day, arm); the strata column is ``segment`` by
default, any session-level column, a per-session Series, or value-model buckets (:func:`value_strata`).

**PointNCIS** needs ν(x, k) = E_πt[W̄/W | x, slot k] = E_πp[W̄ | x, k] (Lemma A.3's identity). It is used
*exactly* where the log enumerates the logging distribution of a context: the distinct (item_id, rank)
actions logged in a context (experiment, arm, context) at rank k have logging propensities summing to 1,
so ν = Σ_a π_p(a) w̄(a) by marginalisation. Elsewhere no sampler of π_t is available from a log, so the
context's own rows give the plug-in ν̂ = mean capped weight of the context — PieceNCIS with one stratum
per context (the "simple ratio estimator" the paper warns is biased for small contexts). ``n_exact``
counts the sessions that used the exact normaliser; users who can sample π_t can compute the paper's
Midzuno-Sen estimate with :func:`midzuno_sen_inverse`. The context defaults to the session.
"""

from __future__ import annotations

import datetime as _dt
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

import ibis
import ibis.expr.types as ir
import numpy as np
import pandas as pd

from offeval_core.discounts import parse_discount
from offeval_core.engine import DEFAULT_CLIPS, GROUP_KEYS, Grid, Moments, Source, _lookup, _tidy, connect
from offeval_core.estimators import ESTIMATORS, aggregate, estimate_from_row, select
from offeval_core.logs import LOGGING_POLICY, POLICY_PREFIX, TARGET_PROPENSITY_PREFIX, Logs
from offeval_core.results import ConfidenceInterval, Effect, Estimate, json_number
from offeval_core.validation import check_choice, check_clip, check_clips, check_level

BASES = ("is", "snips", "cis", "ncis", "piece-ncis", "point-ncis")
CAPPINGS = ("max", "zero")
SCALES = ("session", "impression")
WEIGHT_MODES = ("auto", "propensity", "exposure")
PROPENSITY = "propensity"
"""The ``discount`` / ``exposure`` label of rows whose weights come from propensity columns."""
EXACT_TOL = 1e-6
_INF = 1e300
_KERNELS = ("cis", "ncis", "piece", "point")
EXTRA_COLUMNS = ("ref_sum", "ref_sumsq", "ref_den_sum", "ref_den_sumsq", "ref_x_den", "sum_x_ref",
                 "sum_x_ref_den", "sum_den_ref", "sum_den_ref_den", "w_rows", "w_sum", "w_sumsq", "wc_sum",
                 "wc_sumsq", "w_max", "n_exact")


def estimator_key(base: str, *, capping: str = "max", scale: str = "session") -> str:
    """Registry key of an importance estimator, e.g. ``ncis-zero@impression``.

    >>> estimator_key("piece-ncis", capping="zero", scale="impression")
    'piece-ncis-zero@impression'
    """
    check_choice(base, BASES, name="estimator")
    check_choice(capping, CAPPINGS, name="capping")
    check_choice(scale, SCALES, name="scale")
    zero = "-zero" if capping == "zero" and base not in ("is", "snips") else ""
    return base + zero + ("@impression" if scale == "impression" else "")


def parse_key(key: str) -> tuple[str, str, str]:
    """``(base, capping, scale)`` of a registry key (inverse of :func:`estimator_key`)."""
    if key not in ESTIMATORS or ESTIMATORS[key].family != "importance":
        names = [k for k, s in ESTIMATORS.items() if s.family == "importance"]
        raise ValueError(f"estimator must be one of {', '.join(map(repr, names))}; got {key!r}")
    body, _, scale = key.partition("@")
    capping = "zero" if body.endswith("-zero") else "max"
    return body.removesuffix("-zero"), capping, scale or "session"


# ------------------------------------------------------------------------------------ input resolution


@dataclass(frozen=True)
class WeightSetup:
    """How importance weights are formed: ``mode`` (propensity / exposure), and the discount labels."""

    mode: str
    policies: tuple[str, ...]
    discount: str
    exposure: str


def resolve_weights(logs: Logs, policies: Sequence[str], *, weights: str = "auto", discount: str = "pbm",
                    exposure: str = "pbm") -> WeightSetup:
    """Check the requested policies have what their weights need; pick propensity or exposure weights.

    ``auto`` uses propensities when the logs have a ``logging_propensity`` column, else exposure ratios
    D(R(i)) / D0(r_i) from the ``rank__<policy>`` columns.
    """
    check_choice(weights, WEIGHT_MODES, name="weights")
    cols = set(logs.frame.columns)
    has_lp = "logging_propensity" in cols
    mode = ("propensity" if has_lp else "exposure") if weights == "auto" else weights
    policies = tuple(dict.fromkeys(p for p in policies if p not in (None, LOGGING_POLICY)))
    if not policies:
        raise ValueError("policies must name at least one target policy, got none")
    if mode == "propensity":
        if not has_lp:
            raise ValueError(
                f"weights='propensity' needs a 'logging_propensity' column; the logs {logs.source} have none "
                f"(use weights='exposure' for exposure ratios D(R(i)) / D0(i) from 'rank__<policy>' columns)")
        for p in policies:
            if TARGET_PROPENSITY_PREFIX + p not in cols:
                known = ", ".join(logs.propensity_policies) or "none"
                raise ValueError(
                    f"policy {p!r}: the logs {logs.source} have no column '{TARGET_PROPENSITY_PREFIX}{p}' "
                    f"(target propensities found: {known}); importance weights π_t / π_p need the target "
                    f"policy's propensity on every logged row")
        return WeightSetup("propensity", policies, PROPENSITY, PROPENSITY)
    for p in policies:
        if p not in logs.policies:
            known = ", ".join(logs.policies) or "none"
            hint = (f"; it has '{TARGET_PROPENSITY_PREFIX}{p}' but no 'logging_propensity'"
                    if TARGET_PROPENSITY_PREFIX + p in cols else "")
            raise ValueError(
                f"policy {p!r}: exposure weights D(R(i)) / D0(i) need the column '{POLICY_PREFIX}{p}', which "
                f"the logs {logs.source} do not have (policies found: {known}){hint}")
    return WeightSetup("exposure", policies, discount, exposure)


def session_labels(logs: Logs, spec, *, name: str) -> np.ndarray:
    """One label per row of ``logs.sessions``: a session-level column, a Series keyed by session_id,
    ``"session"`` (each session its own label) or ``None`` (one label for all)."""
    sess = logs.sessions
    if spec is None:
        return np.full(len(sess), "all", dtype=object)
    if isinstance(spec, str) and spec == "session":
        return sess["session_id"].astype(str).to_numpy(dtype=object)
    if isinstance(spec, pd.Series):
        mapped = sess["session_id"].map(spec)
        missing = np.flatnonzero(mapped.isna().to_numpy())
        if len(missing):
            ids = ", ".join(repr(v) for v in sess["session_id"].iloc[missing[:5]])
            raise ValueError(f"{name}: no value for {len(missing)} session(s), e.g. session_id {ids}")
        return mapped.astype(str).to_numpy(dtype=object)
    if not isinstance(spec, str):
        raise TypeError(f"{name} must be a column name, a pandas Series or None, got {type(spec).__name__}")
    if spec in sess.columns and spec not in ("session", "length", "n_rows"):
        return sess[spec].astype(str).to_numpy(dtype=object)
    if spec in logs.frame.columns:
        col = logs.frame[spec]
        first = col.groupby(logs.frame["session"].to_numpy()).transform("first")
        differs = np.flatnonzero((col.astype(str) != first.astype(str)).to_numpy())
        if len(differs):
            k = differs[0]
            raise ValueError(
                f"{name} column {spec!r} must be constant within a session (a context property); session "
                f"{logs.frame['session_id'].iat[k]!r} has {first.iat[k]!r} and {col.iat[k]!r}")
        per = col.groupby(logs.frame["session"].to_numpy()).first()
        return per.reindex(sess["session"].to_numpy()).astype(str).to_numpy(dtype=object)
    usable = ["segment", "experiment_id", "day", "arm", *(c for c in logs.frame.columns
                                                          if c not in ("session", "session_id", "rank"))]
    raise ValueError(f"{name} {spec!r} is not a column of the logs {logs.source} (usable: "
                     f"{', '.join(dict.fromkeys(usable))}, 'session', or None)")


def importance_source(logs: Logs, setup: WeightSetup, *, strata=None, context="session", backend=None) -> Source:
    """Register the columns the importance reduce reads with an Ibis backend (DuckDB by default).

    ``rows``: session, rank, item_id, rewards, and the weight inputs; ``sessions``: the group keys plus
    ``stratum`` and ``context`` labels.
    """
    backend = backend or connect()
    f = logs.frame
    rows = pd.DataFrame({"session": f["session"].to_numpy(), "rank": f["rank"].to_numpy(dtype=np.int64)})
    rows["item_id"] = f["item_id"].astype(str).to_numpy(dtype=object) if "item_id" in f else ""
    for r in logs.rewards:
        rows[r] = f[r].to_numpy(dtype=float)
    if setup.mode == "propensity":
        rows["logging_propensity"] = f["logging_propensity"].to_numpy(dtype=float)
        for p in setup.policies:
            rows[TARGET_PROPENSITY_PREFIX + p] = f[TARGET_PROPENSITY_PREFIX + p].to_numpy(dtype=float)
    else:
        for p in setup.policies:
            rows[POLICY_PREFIX + p] = f[POLICY_PREFIX + p].to_numpy(dtype=np.int64)
    sess = logs.sessions[["session", *GROUP_KEYS]].copy()
    for k in ("experiment_id", "arm", "segment"):
        sess[k] = sess[k].astype(str)
    sess["stratum"] = session_labels(logs, strata, name="strata")
    sess["context"] = session_labels(logs, context, name="context")
    tag = f"{id(logs)}_{id(setup)}"
    return Source(rows=backend.create_table(f"irows_{tag}", rows, overwrite=True),
                  sessions=backend.create_table(f"isess_{tag}", sess, overwrite=True),
                  backend=backend, max_rank=logs.max_rank, name=logs.source)


# ------------------------------------------------------------------------------------------ the kernel


def capping_variants(clips: Sequence[float], cappings: Sequence[str]) -> pd.DataFrame:
    """One row per (clip c, capping) with an integer id ``v``; c = ∞ is always included (IS, SNIPS)."""
    clips = check_clips([*clips, math.inf])
    for c in cappings:
        check_choice(c, CAPPINGS, name="capping")
    rows: list[dict] = []
    for capping in dict.fromkeys(cappings):
        for c in clips:
            rows.append({"v": len(rows), "clip": _INF if math.isinf(c) else float(c), "zero": capping == "zero",
                         "clip_value": float(c), "capping": capping})
    return pd.DataFrame(rows)


def weight_expr(source: Source, setup: WeightSetup, policy: str, *, logs: Logs | None = None,
                pbm_floor: float | None = None) -> ir.FloatingValue:
    """The uncapped weight w_i of each row of ``source.rows`` as an Ibis expression."""
    t = source.rows
    if setup.mode == "propensity":
        return t[TARGET_PROPENSITY_PREFIX + policy] / t["logging_propensity"]
    kw = {} if pbm_floor is None else {"floor": pbm_floor}
    d = parse_discount(setup.discount, logs=logs, **kw)
    d0 = parse_discount(setup.exposure, logs=logs, **kw)
    if d0.cutoff is not None or min(d0.table(source.max_rank)) <= 0:
        raise ValueError(f"exposure model {setup.exposure!r} gives probability 0 to some logged ranks, so the "
                         "weight D(R(i)) / D0(i) is infinite there; use an exposure model > 0 at every rank")
    return _lookup([d], 0, t[POLICY_PREFIX + policy], source.max_rank) / _lookup([d0], 0, t["rank"], source.max_rank)


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


def _long_values(per: ir.Table, *, rewards: Sequence[str], scales: Sequence[str]) -> ir.Table:
    """Per (v, session, reward, kernel, scale): target x, y and logging c, u (see the module docstring)."""
    cells = ["v", "experiment_id", "day", "arm"]
    parts = []
    for scale in scales:
        u = ibis.literal(1.0) if scale == "session" else per.m
        y_ncis = per.s / per.m * u
        p2 = per.mutate(u_=u.cast("float64"), y_=y_ncis.cast("float64"))
        for r in rewards:
            a, c = p2[f"a__{r}"], p2[f"c__{r}"]
            common = dict(reward=ibis.literal(r), scale=ibis.literal(scale), c=c, u=p2.u_)
            keep = ["v", "session", *GROUP_KEYS, "m", "s", "exact", "w_sum", "w_sumsq", "wc_sumsq", "w_max"]
            parts.append(p2.select(*keep, kernel=ibis.literal("cis"), x=a, y=p2.u_, **common))
            parts.append(p2.select(*keep, kernel=ibis.literal("ncis"), x=a, y=p2.y_, **common))
            # PieceNCIS: ψ = u R_g + (U_g / Y_g)(a − R_g y) within cells (v, experiment, day, arm, stratum)
            g = dict(group_by=[*(p2[k] for k in cells), p2.stratum])
            big_a, big_y, big_u = a.sum().over(**g), p2.y_.sum().over(**g), p2.u_.sum().over(**g)
            rg = big_a / big_y
            psi = ibis.ifelse(big_y > 0, p2.u_ * rg + big_u / big_y * (a - rg * p2.y_), 0.0)
            parts.append(p2.select(*keep, kernel=ibis.literal("piece"), x=psi, y=p2.u_, **common))
            # PointNCIS: exact ν where enumerated, else plug-in = PieceNCIS with one stratum per context
            h = dict(group_by=[*(p2[k] for k in cells), p2.context, p2.exact])
            ha, hy, hu = a.sum().over(**h), p2.y_.sum().over(**h), p2.u_.sum().over(**h)
            rh = ha / hy
            plug = ibis.ifelse(hy > 0, p2.u_ * rh + hu / hy * (a - rh * p2.y_), 0.0)
            point = ibis.ifelse(p2.exact == 1, p2[f"p__{r}"], plug)
            parts.append(p2.select(*keep, kernel=ibis.literal("point"), x=point, y=p2.u_, **common))
    return ibis.union(*parts)


def _aggregate(long: ir.Table) -> ir.Table:
    x, y, c, u = long.x, long.y, long.c, long.u
    d = x - c
    return long.group_by(["v", *GROUP_KEYS, "reward", "kernel", "scale"]).aggregate(
        n=long.count(), sum=x.sum(), sumsq=(x * x).sum(), den_sum=y.sum(), den_sumsq=(y * y).sum(),
        sum_x_den=(x * y).sum(), sum_diff=d.sum(), sumsq_diff=(d * d).sum(), sum_diff_den=(d * y).sum(),
        ref_sum=c.sum(), ref_sumsq=(c * c).sum(), ref_den_sum=u.sum(), ref_den_sumsq=(u * u).sum(),
        ref_x_den=(c * u).sum(), sum_x_ref=(x * c).sum(), sum_x_ref_den=(x * u).sum(), sum_den_ref=(y * c).sum(),
        sum_den_ref_den=(y * u).sum(), w_rows=long.m.sum(), w_sum=long.w_sum.sum(), w_sumsq=long.w_sumsq.sum(),
        wc_sum=long.s.sum(), wc_sumsq=long.wc_sumsq.sum(), w_max=long.w_max.max(),
        n_exact=long.exact.cast("int64").sum(),
    )


# ---------------------------------------------------------------------------------------- public reduce


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
        wide = source.backend.execute(_aggregate(_long_values(per, rewards=rewards, scales=scales)))
        parts.append(_to_long(wide, variants, policy, setup, with_logging=i == 0))
    offline = pd.concat(parts, ignore_index=True)
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
    for a, b in (("sum", "ref_sum"), ("sumsq", "ref_sumsq"), ("den_sum", "ref_den_sum"),
                 ("den_sumsq", "ref_den_sumsq"), ("sum_x_den", "ref_x_den")):
        log[a] = log[b]
    for col in ("sum_diff", "sumsq_diff", "sum_diff_den", *EXTRA_COLUMNS):
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
    keys = list(GROUP_KEYS)
    s, t = source.sessions, source.rows
    counts = source.backend.execute(s.group_by(keys).aggregate(n=s.count()))
    parts = []
    for r in rewards:
        tot = t.group_by("session").aggregate(total=t[r].cast("float64").sum()).join(s, "session")
        on = source.backend.execute(tot.group_by(keys).aggregate(sum=tot.total.sum(),
                                                                  sumsq=(tot.total * tot.total).sum()))
        on = counts.merge(on, on=keys, how="left").fillna({"sum": 0.0, "sumsq": 0.0})
        on.insert(len(keys), "reward", r)
        parts.append(on)
    return _tidy(pd.concat(parts, ignore_index=True), keys)




# ------------------------------------------------------------------------------------------ diagnostics


def weight_diagnostics(rows: pd.DataFrame, by: Sequence[str] = ()) -> pd.DataFrame:
    """Weight diagnostics of importance rows (target policies), aggregated over every key not in ``by``.

    ``ess`` = (Σ w̄)² / Σ w̄² (Kish's effective sample size of the capped weights, in rows), ``ess_uncapped``
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
    with np.errstate(divide="ignore", invalid="ignore"):
        out["ess"] = out["wc_sum"] ** 2 / out["wc_sumsq"]
        out["ess_uncapped"] = out["w_sum"] ** 2 / out["w_sumsq"]
        out["capped_share"] = 1 - out["wc_sum"] / out["w_sum"]
        out["mean_weight"] = out["w_sum"] / out["w_rows"]
        out["exact_share"] = out["n_exact"] / out["n"]
    return out


# ---------------------------------------------------------------------------------------- estimates


@dataclass(frozen=True)
class ImportanceResult:
    """One estimator on one data set: logging and target values, paired uplift, and weight diagnostics."""

    estimator: str
    scale: str
    logging: Estimate
    target: Estimate
    effect: Effect
    diagnostics: dict

    def to_dict(self) -> dict:
        return {"estimator": self.estimator, "scale": self.scale, "logging": self.logging.to_dict(),
                "target": self.target.to_dict(), "effect": self.effect.to_dict(),
                "diagnostics": {k: json_number(v) for k, v in self.diagnostics.items()}}



def estimate(logs: Logs, *, reward: str, policy: str, estimator: str = "ncis", clip: float = math.inf,
             capping: str = "max", scale: str = "session", weights: str = "auto", discount: str = "pbm",
             exposure: str = "pbm", strata="segment", context="session", arm: str | None = "control",
             level: float = 0.95) -> ImportanceResult:
    """One Gilotte estimator of ``policy`` on the ``arm`` sessions, with delta-method CIs.

    >>> from offeval_core.logs import read_logs
    >>> logs = read_logs(pd.DataFrame({"session_id": [1, 2], "rank": [1, 1], "click": [1, 0],
    ...     "logging_propensity": [0.5, 0.5], "target_propensity__new": [0.9, 0.1]}))
    >>> # NCIS with c = 1.5: Σ w̄ r / Σ w̄ = 1.5 / (1.5 + 0.2)
    >>> round(estimate(logs, reward="click", policy="new", estimator="ncis", clip=1.5).target.value, 4)
    0.8824
    """
    check_level(level)
    clip = check_clip(clip)
    key = estimator if "@" in estimator or estimator.endswith("-zero") else estimator_key(
        estimator, capping=capping, scale=scale)
    _base, capping, scale = parse_key(key)
    m = reduce_importance(logs, rewards=(reward,), policies=(policy,), clips=(clip,), cappings=(capping,),
                          scales=(scale,), weights=weights, discount=discount, exposure=exposure, strata=strata,
                          context=context)
    d, e = m.grid.discounts[0], m.grid.exposures[0]
    lrows = aggregate(select(m, reward=reward, policy=None, metric=key, discount=d, exposure=e, clip=clip, arm=arm))
    trows_full = select(m, reward=reward, policy=policy, metric=key, discount=d, exposure=e, clip=clip, arm=arm)
    trows = aggregate(trows_full)
    lrow, trow = lrows.iloc[0], trows.iloc[0]
    diag = weight_diagnostics(trows_full).iloc[0]
    diagnostics = {k: diag[k] for k in ("ess", "ess_uncapped", "max_weight", "capped_share", "mean_weight",
                                         "exact_share")}
    return ImportanceResult(key, scale, estimate_from_row(lrow, metric=key, level=level),
                            estimate_from_row(trow, metric=key, level=level),
                            estimate_from_row(trow, metric=key, level=level, diff=True), diagnostics)


# ------------------------------------------------------------------------------------------ bootstrap


def session_values(logs: Logs, *, reward: str, policy: str, clip: float = math.inf, capping: str = "max",
                   weights: str = "auto", discount: str = "pbm", exposure: str = "pbm", strata="segment",
                   context="session", pbm_floor: float | None = None) -> pd.DataFrame:
    """Per-session raw sums (one row per session): m, s = Σ w̄, a = Σ w̄ r, c = Σ r, p = exact PointNCIS
    numerator, exact flag, group keys, stratum, context. The input of :func:`bootstrap` and of checks."""
    logs.check_reward(reward)
    clip = check_clip(clip)
    setup = resolve_weights(logs, (policy,), weights=weights, discount=discount, exposure=exposure)
    variants = capping_variants([clip], [capping])
    variants = variants[variants["clip_value"] == clip].assign(v=0)
    source = importance_source(logs, setup, strata=strata, context=context)
    per = session_table(source, setup, policy, rewards=(reward,), variants=variants, logs=logs, pbm_floor=pbm_floor)
    out = source.backend.execute(per).rename(columns={f"a__{reward}": "a", f"c__{reward}": "c", f"p__{reward}": "p"})
    return out.sort_values("session", kind="stable").reset_index(drop=True)


def values_from_sessions(per: pd.DataFrame, *, base: str, scale: str, counts: np.ndarray | None = None
                         ) -> tuple[float, float]:
    """(target, logging) value of an estimator from per-session sums, each session counted ``counts``
    times (bootstrap multiplicities; default once). Normalisation (global, per stratum, per context) is
    done on the weighted sample, so a bootstrap that calls this per resample re-normalises inside it."""
    k = np.ones(len(per)) if counts is None else np.asarray(counts, dtype=float)
    m, s, a, c = (per[col].to_numpy(dtype=float) for col in ("m", "s", "a", "c"))
    u = np.ones_like(m) if scale == "session" else m
    y = s / m * u
    big_u = float(k @ u)
    logging = float(k @ c) / big_u if big_u > 0 else math.nan
    if base in ("is", "cis"):
        return float(k @ a) / big_u, logging
    if base in ("snips", "ncis"):
        return float(k @ a) / float(k @ y), logging

    def stratified(mask, labels):
        codes = pd.factorize(pd.Series(labels[mask]))[0]
        kk = k[mask]
        ga = np.bincount(codes, kk * a[mask])
        gy = np.bincount(codes, kk * y[mask])
        gu = np.bincount(codes, kk * u[mask])
        with np.errstate(divide="ignore", invalid="ignore"):
            r = np.where(gy > 0, ga / gy, 0.0)
        return float(gu @ r)

    cell = (per["experiment_id"].astype(str) + "|" + per["day"].astype(str) + "|" + per["arm"].astype(str))
    if base == "piece-ncis":
        labels = (cell + "|" + per["stratum"].astype(str)).to_numpy()
        return stratified(np.ones(len(per), dtype=bool), labels) / big_u, logging
    exact = per["exact"].to_numpy() == 1
    labels = (cell + "|" + per["context"].astype(str)).to_numpy()
    total = float(k[exact] @ per["p"].to_numpy(dtype=float)[exact]) + stratified(~exact, labels)
    return total / big_u, logging


@dataclass(frozen=True)
class BootstrapResult:
    """Percentile-bootstrap CIs (sessions resampled, estimator re-normalised in every resample)."""

    logging: Estimate
    target: Estimate
    effect: Effect
    n_boot: int


def bootstrap(logs: Logs, *, reward: str, policy: str, estimator: str = "ncis", clip: float = math.inf,
              capping: str = "max", scale: str = "session", arm: str | None = "control", n_boot: int = 1000,
              level: float = 0.95, rng: np.random.Generator, **kwargs) -> BootstrapResult:
    """Session bootstrap of an importance estimator: every resample recomputes the normalisation
    (Σ w̄ for NCIS, per stratum for PieceNCIS, per context for plug-in PointNCIS) from the resampled
    sessions — never normalise once and resample normalised values. Percentile CIs, SE = sd of replicates.
    """
    check_level(level)
    if not isinstance(rng, np.random.Generator):
        raise TypeError(f"rng must be a numpy.random.Generator, got {type(rng).__name__}")
    if isinstance(n_boot, bool) or not isinstance(n_boot, int) or n_boot < 2:
        raise ValueError(f"n_boot must be an integer ≥ 2, got {n_boot!r}")
    base = estimator.partition("@")[0].removesuffix("-zero")
    check_choice(base, BASES, name="estimator")
    per = session_values(logs, reward=reward, policy=policy, clip=clip, capping=capping, **kwargs)
    if arm is not None and (per["arm"] == arm).any():
        per = per[per["arm"] == arm].reset_index(drop=True)
    n = len(per)
    t0, l0 = values_from_sessions(per, base=base, scale=scale)
    reps = np.empty((n_boot, 2))
    p = np.full(n, 1.0 / n)
    for b in range(n_boot):
        reps[b] = values_from_sessions(per, base=base, scale=scale, counts=rng.multinomial(n, p))
    lo, hi = (1 - level) / 2, (1 + level) / 2

    def est(value, col):
        q = np.nanquantile(col, [lo, hi])
        return Estimate(value, float(np.nanstd(col, ddof=1)), n, ConfidenceInterval(float(q[0]), float(q[1]), level))

    diff = reps[:, 0] - reps[:, 1]
    e = est(t0 - l0, diff)
    p_one = float(np.mean(diff <= 0))
    return BootstrapResult(est(l0, reps[:, 1]), est(t0, reps[:, 0]),
                           Effect(e.value, e.stderr, n, e.ci, p_one), n_boot)


# ------------------------------------------------------------------------------ PointNCIS: Midzuno-Sen


def midzuno_sen_inverse(draw: Callable[[int, np.random.Generator], np.ndarray], *, n: int, clip: float,
                        capping: str = "max", rng: np.random.Generator) -> float:
    """Unbiased estimate of 1 / E_πt[W̄/W | x] by the Midzuno-Sen construction (Gilotte Sec. 5.4).

    ``draw(k, rng)`` returns k importance weights w = π_t / π_p of actions sampled from π_t at context x.
    Draw u ~ U(0, 1) and w₁ until w̄₁/w₁ > u (the first draw is accepted with probability ∝ its ratio),
    then w₂..w_n, and return n / Σ_j w̄_j / w_j. PointNCIS is (1/n) Σ ÎP_c(x) w̄ r.
    """
    check_choice(capping, CAPPINGS, name="capping")
    clip = check_clip(clip)

    def ratio(w):
        w = np.asarray(w, dtype=float)
        wbar = np.minimum(w, clip) if capping == "max" else np.where(w < clip, w, 0.0)
        return np.divide(wbar, w, out=np.ones_like(w), where=w > 0)

    for _ in range(1_000_000):
        r1 = ratio(draw(1, rng))[0]
        if rng.uniform() < r1:
            break
    else:
        raise ValueError("Midzuno-Sen: no draw accepted in 10^6 tries; the capped share E[W̄/W | x] is ~0")
    rest = ratio(draw(n - 1, rng)) if n > 1 else np.empty(0)
    return n / (r1 + float(rest.sum()))


# ------------------------------------------------------------------------------------------ strata


def value_strata(logs: Logs, *, reward: str, features: Sequence[str], fit_share: float = 0.5, base: float = 2.0,
                 rng: np.random.Generator) -> tuple[Logs, pd.Series]:
    """Value-model strata of Gilotte Sec. 5.3 from a separate split.

    Sessions are split at random: on the fit part a value model V(x) = mean per-session reward of the
    sessions with the same ``features`` (session-level columns; unseen combinations get the overall mean)
    is fitted; the evaluation part is returned with its strata {V⁻¹([b^k, b^(k+1)))} (V = 0 is its own
    stratum). Estimate PieceNCIS on the returned logs only, so the partition is independent of them.
    """
    if not 0 < fit_share < 1:
        raise ValueError(f"fit_share must be strictly between 0 and 1, got {fit_share!r}")
    if not base > 1:
        raise ValueError(f"base must be > 1, got {base!r}")
    logs.check_reward(reward)
    sess = logs.sessions[["session", "session_id"]].copy()
    for f in features:
        sess[f] = session_labels(logs, f, name="features")
    total = logs.frame.groupby("session")[reward].sum()
    sess["value"] = total.reindex(sess["session"]).to_numpy()
    fit = rng.uniform(size=len(sess)) < fit_share
    if fit.all() or not fit.any():
        raise ValueError("value_strata: the random split left one side empty; use more sessions")
    feats = list(features)
    model = sess[fit].groupby(feats, observed=True)["value"].mean() if feats else None
    ev = sess[~fit].copy()
    overall = float(sess.loc[fit, "value"].mean())
    if feats:
        pred = ev.merge(model.rename("pred").reset_index(), on=feats, how="left")["pred"].fillna(overall)
    else:
        pred = pd.Series(np.full(len(ev), overall))
    v = pred.to_numpy(dtype=float)
    with np.errstate(divide="ignore"):
        k = np.where(v > 0, np.floor(np.log(np.where(v > 0, v, 1.0)) / math.log(base)), np.nan)
    labels = [("V=0" if np.isnan(kk) else f"[{base:g}^{int(kk)}, {base:g}^{int(kk) + 1})") for kk in k]
    strata = pd.Series(labels, index=ev["session_id"].to_numpy(), name="value_stratum")
    return subset_sessions(logs, ev["session"].to_numpy()), strata


def subset_sessions(logs: Logs, sessions: np.ndarray) -> Logs:
    """The logs restricted to the given session codes (codes renumbered densely)."""
    keep = np.isin(logs.frame["session"].to_numpy(), sessions)
    frame = logs.frame[keep].reset_index(drop=True)
    sess = logs.sessions[np.isin(logs.sessions["session"].to_numpy(), sessions)].reset_index(drop=True)
    codes = {old: new for new, old in enumerate(sess["session"].to_numpy())}
    frame["session"] = frame["session"].map(codes).astype(np.int64)
    sess["session"] = np.arange(len(sess), dtype=np.int64)
    return replace(logs, frame=frame, sessions=sess)


# ----------------------------------------------------------------------- Gilotte Table 1 counter-example

COUNTEREXAMPLE_ACTIONS = pd.DataFrame({
    "segment": ["registered"] * 3 + ["unknown"] * 2,
    "item_id": ["good_deal", "popular", "niche", "generic_a", "generic_b"],
    "logging_propensity": [0.01, 0.37, 0.62, 0.6, 0.4],
    "target_propensity": [0.4, 0.3, 0.3, 0.4, 0.6],
    "value": [12.0, 20.0, 4.0, 1.0, 1.0],
})
"""Actions of the Table 1 counter-example (one display slot per session, reward deterministic per action).

Registered customers (share 0.1): π_p earns 0.01·12 + 0.37·20 + 0.62·4 = 10, π_t earns 0.4·12 + 0.3·20 +
0.3·4 = 12; with c = 10 only ``good_deal`` is capped (w = 40), so E_πt[W̄/W] = 0.4·10/40 + 0.6 = 0.7 and
the reward is independent of W̄/W under π_t within the segment (12 on both parts). Unknown customers
(share 0.9): both policies earn 1 and no weight exceeds 1.5. Hence π_p = 1.9, π_t = 2.1 and
NCIS → (0.1·12·0.7 + 0.9·1) / (0.1·0.7 + 0.9) = 1.74 / 0.97 ≈ 1.79 (Gilotte Table 1, Eq. 2)."""
COUNTEREXAMPLE_SEGMENTS = {"registered": 0.1, "unknown": 0.9}


def ncis_counterexample(n: int = 10_000, *, rng: np.random.Generator | None = None, arms: bool = True,
                        policy: str = "test") -> pd.DataFrame:
    """Logs (a DataFrame in the schema; read with :func:`offeval_core.logs.read_logs`) of the NCIS
    counter-example of Gilotte Table 1: ``n`` control sessions logged by π_p and, with ``arms``, ``n``
    treatment sessions logged by π_t (their ``logging_propensity`` is π_t's). Reward column ``value``;
    target column ``target_propensity__<policy>``; ``segment`` registered / unknown; one row per session.

    With ``rng=None`` the sessions follow the population frequencies exactly (n must be a multiple of
    1000), so every estimator returns its population value: logging 1.9, IS 2.1, NCIS(c=10) 1.74/0.97,
    PieceNCIS by segment 2.1. With an ``rng`` the sessions are drawn i.i.d.

    >>> from offeval_core.logs import read_logs
    >>> logs = read_logs(ncis_counterexample(1000))
    >>> r = estimate(logs, reward="value", policy="test", estimator="ncis", clip=10)
    >>> round(r.logging.value, 2), round(r.target.value, 4)  # 1.9 vs 1.74 / 0.97
    (1.9, 1.7938)
    """
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"n must be a positive integer, got {n!r}")
    if rng is None and n % 1000:
        raise ValueError(f"n must be a multiple of 1000 for exact population frequencies (rng=None), got {n}")
    acts = COUNTEREXAMPLE_ACTIONS
    share = acts["segment"].map(COUNTEREXAMPLE_SEGMENTS).to_numpy()
    frames = []
    for arm, col in (("control", "logging_propensity"), ("treatment", "target_propensity"))[: 2 if arms else 1]:
        prob = share * acts[col].to_numpy()
        if rng is None:
            counts = np.rint(prob * n).astype(int)
        else:
            counts = rng.multinomial(n, prob / prob.sum())
        idx = np.repeat(np.arange(len(acts)), counts)
        if rng is not None:
            idx = rng.permutation(idx)
        part = acts.iloc[idx].reset_index(drop=True)
        frames.append(pd.DataFrame({
            "session_id": [f"{arm[0]}{i}" for i in range(len(part))], "rank": 1, "item_id": part["item_id"],
            "segment": part["segment"], "arm": arm, "value": part["value"],
            "logging_propensity": part[col], TARGET_PROPENSITY_PREFIX + policy: part["target_propensity"],
        }))
    return pd.concat(frames, ignore_index=True)
