"""The per-session kernel of the reduce and its compiled, reusable query.

Per session τ, variant (D, D0, m) and policy R (KDD'24 Eq. 9 with Sec. 6.2 clipping):

    ℓ_i    = c_i · min(m, 1 / D0(r_i))                 de-biased, clipped label
    DCG_τ  = Σ_i ℓ_i · D(R(i))
    iDCG_τ = Σ_j ℓ_(j) · D(j)                          labels of τ sorted descending
    nDCG_τ = DCG_τ / iDCG_τ   (0 when iDCG_τ = 0, or the session is dropped)

The per-row lookups 1 / D0(r_i) and D(R(i)) are joins with a small rank table, done once per rewarded row.
A clip value m binds in a session only when m < max_i 1 / D0(r_i); at every larger m the session's values
are those of m = ∞. So the unclipped values of each session are computed once and summed per (group, number
of binding clip values), and only the (session, binding clip value) pairs are computed clip by clip
(:func:`_moments`, finished by :func:`_accumulate`). Sorting the labels once per session serves every clip
value and policy when the reward is binary (c · min(m, w) then sorts like w); for graded rewards the labels
are sorted per binding clip value (in a list on DuckDB, in a window elsewhere). :mod:`offeval_core.engine.per_session` keeps the direct form (every
session at every clip value), the reference this one is tested against.

**Compile once, run many.** Building and compiling the Ibis expression of that query costs about a second,
several times what DuckDB needs to run it on the demo logs. So the query of a *shape* (policies, number of clip
values, group keys, binary or graded reward) is compiled once per source, and everything else enters as
data: the reward (an index into a long table of rewarded rows of every reward), the clip values (a one-row
table and a clip table), D and D0 (the rank table). A new (reward, D, D0, clip grid) replaces those small
tables and runs the cached SQL text (:class:`CompiledMoments`).
"""

from __future__ import annotations

import functools
import itertools
import math
import threading
import weakref
from collections.abc import Sequence

import ibis
import ibis.expr.types as ir
import numpy as np
import pandas as pd
import pyarrow as pa

from offeval_core.discounts import DiscountModel
from offeval_core.engine.dialects import flag, list_dot_product, list_slice, sorts_lists
from offeval_core.engine.grid import INF_CLIP, METRICS, ndcg_of
from offeval_core.engine.lookups import rank_table
from offeval_core.engine.sources import Source, _fetch_table
from offeval_core.logs import LOGGING_POLICY, POLICY_PREFIX
from offeval_core.moment_columns import Layout, Role, merge, merge_running

__all__ = ["CompiledMoments", "binary_rewards", "compiled_moments", "fresh_moments", "wide_roles"]

_STATE: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # Source → its cached tables and queries
_STATE_LOCK = threading.Lock()
_NAMES = itertools.count()


def _state(source: Source) -> dict:
    """Per-source cache: the long table of rewarded rows, binary flags, compiled queries, and a lock that
    serialises runs (the parameter tables of a compiled query are shared)."""
    with _STATE_LOCK:
        if source not in _STATE:
            _STATE[source] = {"lock": threading.RLock(), "plans": {}, "long": {}, "binary": {}, "online": {}}
        return _STATE[source]


def _clip_value(m: float) -> float:
    return INF_CLIP if math.isinf(m) else float(m)


# ------------------------------------------------------------------------------------------ expressions


def _m2(v: ir.Value, n: ir.Value, where=None) -> ir.Value:
    """Σ(v − v̄)² over the aggregated rows: the backend's population variance (DuckDB and Spark update it
    row by row with Welford's recurrence, PostgreSQL with Youngs–Cramer's, so it is centred: no digit lost to
    an offset) times the count."""
    return v.var(how="pop", where=where) * n


def _co(v: ir.Value, y: ir.Value, n: ir.Value, where=None) -> ir.Value:
    """Σ(v − v̄)(y − ȳ) over the aggregated rows (the backend's population covariance times the count)."""
    return v.cov(y, how="pop", where=where) * n


def _values(x: ir.Table, *, policies: Sequence[str]) -> ir.Table:
    """``x`` with the per-row values :func:`_stats` aggregates computed once (a projection, not once per
    aggregate): nDCG ``n0``… (0 where iDCG = 0) and the paired differences ``e1``… (DCG) and ``f1``… (nDCG)."""
    k = len(policies) + 1
    idcg = x.idcg
    x = x.mutate(**{f"n{i}": ndcg_of(x[f"d{i}"], idcg) for i in range(k)})
    return x.mutate(**{f"e{i}": x[f"d{i}"] - x.d0 for i in range(1, k)},
                    **{f"f{i}": x[f"n{i}"] - x.n0 for i in range(1, k)})


def _stats(x: ir.Table, *, policies: Sequence[str]) -> dict[str, ir.Value]:
    """Every moment of DCG and nDCG of the logging and target policies over the rows of ``x`` (from
    :func:`_values`: ``idcg``, DCG ``d0``…, nDCG ``n0``…, differences ``e1``…, ``f1``…; one row per session
    and clip value): the aggregates of one group-by, with the roles of :func:`wide_roles`.

    Every moment is over the ``n_r`` rows, nDCG counting 0 where iDCG = 0; ``n_pos`` counts the rows with
    iDCG > 0 and ``pden_m2`` is iDCG's second moment over them (the ``drop`` rule's sessions,
    :func:`~offeval_core.engine.reduction._to_long`). No other aggregate is filtered: a FILTER clause on
    every nDCG aggregate made DuckDB's group-by three times slower. The paired co-moments with iDCG are not
    aggregated: co-moments are linear, so Σ(d − d̄)(y − ȳ) of d = target − logging is co_den(target) −
    co_den(logging), and a covariance is the costliest aggregate of the query."""
    names = [LOGGING_POLICY, *policies]
    idcg = x.idcg
    pos = idcg > 0
    n_r = x.count()
    aggs = {"n_r": n_r, "n_pos": flag(pos).sum(), "den_sum": idcg.sum(), "den_m2": _m2(idcg, n_r),
            "pden_sum": idcg.sum(),  # = Σ over the rows with iDCG > 0 (iDCG ≥ 0)
            "pden_m2": _m2(idcg, x.count(where=pos), pos)}
    for metric, own, paired in (("dcg", "d", "e"), ("ndcg", "n", "f")):
        for i, p in enumerate(names):
            v = x[f"{own}{i}"]
            aggs |= {f"{metric}__{p}__sum": v.sum(), f"{metric}__{p}__m2": _m2(v, n_r),
                     f"{metric}__{p}__co_den": _co(v, idcg, n_r)}
        for i, p in enumerate(policies, 1):
            dd = x[f"{paired}{i}"]
            aggs |= {f"{metric}__{p}__sum_diff": dd.sum(), f"{metric}__{p}__m2_diff": _m2(dd, n_r)}
    return aggs  # co_diff_den = co_den(target) − co_den(logging), exactly: added by :func:`_accumulate`


@functools.lru_cache(maxsize=32)
def wide_roles(policies: tuple[str, ...]) -> dict[str, Role]:
    """The :class:`~offeval_core.moment_columns.Role` of every column :func:`_stats` aggregates (how the
    parts of :func:`_moments` and the per-session direct form pool). ``pden_m2`` is over the ``n_pos``
    rows with iDCG > 0, whose iDCG sum is ``den_sum`` (the others add 0)."""
    roles = {"n_r": Role("count"), "n_pos": Role("count"),
             "den_sum": Role("sum", ("n_r",)), "den_m2": Role("m2", ("den_sum",)),
             "pden_m2": Role("m2", ("pden_sum",)), "pden_sum": Role("sum", ("n_pos",))}
    for metric in METRICS:
        for p in [LOGGING_POLICY, *policies]:
            pre = f"{metric}__{p}__"
            roles |= {pre + "sum": Role("sum", ("n_r",)), pre + "m2": Role("m2", (pre + "sum",)),
                      pre + "co_den": Role("co", (pre + "sum", "den_sum"))}
        for p in policies:
            pre = f"{metric}__{p}__"
            roles |= {pre + "sum_diff": Role("sum", ("n_r",)), pre + "m2_diff": Role("m2", (pre + "sum_diff",)),
                      pre + "co_diff_den": Role("co", (pre + "sum_diff", "den_sum"))}
    return roles


@functools.lru_cache(maxsize=32)
def wide_layout(columns: tuple[str, ...], policies: tuple[str, ...]) -> Layout:
    """The :class:`~offeval_core.moment_columns.Layout` of the columns of :func:`_stats` (built once per shape)."""
    return Layout(columns, wide_roles(policies))


def empty_as_zero(values: np.ndarray, layout: Layout) -> np.ndarray:
    """Aggregates over no row (NULL from the backend, NaN here) of groups whose count is 0 become 0; any
    other NaN (an overflow) stays."""
    if not np.isnan(values).any():
        return values
    out = values.copy()
    for cols, counts in ((layout.sums, layout.sum_counts), (layout.second, layout.count)):
        block = out[:, cols]
        block[np.isnan(block) & (values[:, counts] == 0)] = 0.0
        out[:, cols] = block
    return out


def _lookups(pos: ir.Table, lut: ir.Table, *, n_policies: int) -> ir.Table:
    """``w`` = 1 / D0(rank) and ``p0``… = D(rank of each policy) (0 where a policy does not show the item)."""
    pos = pos.join(lut.select(rank="r", w="w", p0="d"), "rank")
    for i in range(1, n_policies):
        look = lut.select(**{f"t{i}": "r", f"p{i}": "d"})
        pos = pos.left_join(look, f"t{i}").drop(f"t{i}_right")
        pos = pos.mutate(**{f"p{i}": pos[f"p{i}"].fill_null(0.0)})
    return pos


def _moments(pos: ir.Table, lut: ir.Table, clip: ir.Table, wide: ir.Table, *, n_clips: int,
             policies: Sequence[str], keys: Sequence[str], binary: bool, lists: bool = False) -> ir.Table:
    """The moments of one reward and (D, D0), computed only where a clip value changes a session (finished
    by :func:`_accumulate`).

    ``pos``: the rewarded rows (``session``, ``keys``, ``rank``, ``c`` > 0, target ranks ``t1``…); ``clip``:
    the binding clip values of a session by their count ``b`` (:func:`_binding_frame`: number ``k``, value
    ``m``);
    ``wide``: one row with the clip values as columns ``m0``…; ``lut``: the rank table. A clip value m
    binds in a session only when m < max_i 1/D0(r_i); at every larger m the labels are the unclipped
    c_i / D0(r_i) and the session's values those of m = ∞. So the unclipped per-session values are computed
    once (rows with ``k`` = −1 and ``b`` = the number of binding clip values) and only the (session, binding
    clip value) pairs, about a tenth of sessions × clip values on the demo logs, per clip value (rows with
    clip number ``k`` and ``b`` = −1); one group-by sums every moment per (``k``, ``b``, group). Binary rewards
    rank the labels once per session (c · min(m, 1/D0) sorts like 1/D0 for every m); graded rewards are
    ranked per binding clip value: with ``lists`` (:func:`~offeval_core.engine.dialects.sorts_lists`) each
    pair's labels are collected into one sorted list, iDCG = its dot product with (D(1), …, D(n)); without,
    in a window.
    """
    n_pol = len(policies) + 1
    pos = _lookups(pos, lut, n_policies=n_pol)
    pos = pos.select("session", *keys, "rank", "c", "w", *[f"p{i}" for i in range(n_pol)], u=pos.c * pos.w)
    pos = pos.mutate(maxw=pos.w.max().over(group_by=pos.session),
                     j=ibis.row_number().over(group_by=pos.session, order_by=[pos.u.desc(), pos["rank"]]) + 1)
    pos = pos.join(lut.select(j="r", dj="d"), "j").cross_join(wide)
    n_bind = functools.reduce(lambda a, b: a + b, [flag(pos[f"m{k}"] < pos.maxw) for k in range(n_clips)])
    pos = pos.select("session", *keys, "rank", "c", "w", "u", "maxw", "dj", *[f"p{i}" for i in range(n_pol)],
                     b=n_bind)
    # per session, unclipped: counted at every clip number from position b up (rows with k = -1)
    free = pos.filter(pos.b < n_clips)
    dcgs = [f"d{i}" for i in range(n_pol)]
    free = free.group_by("session").aggregate(**{k: free[k].min() for k in keys}, b=free.b.min(),
                                              idcg=(free.u * free.dj).sum(),
                                              **{d: (free.u * free[f"p{i}"]).sum() for i, d in enumerate(dcgs)})
    free = free.mutate(k=ibis.literal(-1, type="int64")).select("k", "b", *keys, "idcg", *dcgs)
    # per (session, binding clip value) (rows with b = -1)
    bound = pos.filter(pos.b > 0)
    pair = bound.join(clip, "b")  # the b binding clip values are the b smallest: an equality join
    pair = pair.mutate(lab=pair.c * ibis.least(pair.m, pair.w))
    sums = {d: (pair.lab * pair[f"p{i}"]).sum() for i, d in enumerate(dcgs)}
    if binary:
        per = pair.group_by(["session", "k"]).aggregate(**{k: pair[k].min() for k in keys},
                                                        idcg=(pair.lab * pair.dj).sum(), **sums)
    elif lists:  # the negated labels sorted ascending: the labels in descending order, negated (exactly)
        per = pair.group_by(["session", "k"]).aggregate(**{k: pair[k].min() for k in keys}, **sums,
                                                        neg=(-pair.lab).collect().sort())
        per = per.cross_join(lut.aggregate(dv=lut.d.collect(order_by=lut.r)))
        per = per.mutate(idcg=-list_dot_product(per.neg, list_slice(per.dv, 1, per.neg.length())))
    else:  # the labels ranked per binding clip value, in a narrow window (the DCG sums need no order)
        ideal = pair.select("session", "k", "rank", "lab")
        ideal = ideal.mutate(j=ibis.row_number().over(group_by=[ideal.session, ideal.k],
                                                      order_by=[ideal.lab.desc(), ideal["rank"]]) + 1)
        ideal = ideal.join(lut.select(j="r", dj="d"), "j")
        ideal = ideal.group_by(["session", "k"]).aggregate(idcg=(ideal.lab * ideal.dj).sum())
        per = pair.group_by(["session", "k"]).aggregate(**{k: pair[k].min() for k in keys}, **sums)
        per = per.join(ideal, ["session", "k"])
    per = per.mutate(b=ibis.literal(-1, type="int64")).select("k", "b", *keys, "idcg", *dcgs)
    # every moment of both kinds of rows in one group-by
    both = ibis.union(per, free)
    both = _values(both, policies=policies)
    return both.group_by(["k", "b", *keys]).aggregate(**_stats(both, policies=policies))


def _accumulate(parts: pd.DataFrame, order: np.ndarray, keys: Sequence[str], policies: Sequence[str]) -> pd.DataFrame:
    """Per (clip number ``k``, group): the binding-pair moments of :func:`_moments` pooled with the unclipped
    moments of every b ≤ the clip value's position ``order[k]`` (a running Chan merge over b). Every group
    with a rewarded session gets a row for every clip number."""
    keys = list(keys)
    queried = [c for c in parts.columns if c not in ("k", "b", *keys)]
    paired = [(f"{metric}__{p}__co_diff_den", f"{metric}__{p}__co_den", f"{metric}__{LOGGING_POLICY}__co_den")
              for metric in METRICS for p in policies]
    stats = [*queried, *(c for c, _, _ in paired)]
    layout = wide_layout(tuple(stats), tuple(policies))
    n_clips = len(order)
    gid = parts.groupby(keys, sort=True).ngroup().to_numpy()
    groups = parts[keys].assign(_g=gid).drop_duplicates("_g").sort_values("_g")[keys].reset_index(drop=True)
    values = np.empty((len(parts), len(stats)))
    values[:, :len(queried)] = parts[queried].to_numpy(dtype=np.float64)
    pos = {c: i for i, c in enumerate(queried)}
    with np.errstate(invalid="ignore"):  # inf − inf of overflowed moments is NaN: the reduce refuses them after
        values[:, len(queried):] = (values[:, [pos[t] for _, t, _ in paired]]  # co_den(target) − co_den(logging)
                                    - values[:, [pos[lg] for _, _, lg in paired]])
    values = empty_as_zero(values, layout)
    k, b = parts["k"].to_numpy(dtype=np.int64), parts["b"].to_numpy(dtype=np.int64)
    free = np.zeros((n_clips + 1, len(groups), len(stats)))  # (b, group, statistic)
    free[b[b >= 0], gid[b >= 0]] = values[b >= 0]
    out = merge_running(free, layout)[order]  # (clip number, group, statistic): sessions unclipped at b ≤ o
    bind = b < 0
    out[k[bind], gid[bind]] = merge(out[k[bind], gid[bind]], values[bind], layout)
    frame = pd.DataFrame(out.reshape(-1, len(stats)), columns=stats)
    frame.insert(0, "k", np.repeat(np.arange(n_clips, dtype=np.int64), len(groups)))
    for i, key in enumerate(keys):
        frame.insert(1 + i, key, np.tile(groups[key].to_numpy(), n_clips))
    for c in queried:
        if pd.api.types.is_integer_dtype(parts[c].dtype):
            frame[c] = frame[c].round().astype(parts[c].dtype)
    return frame


def _rewarded(source: Source, *, reward: str, policies: Sequence[str], keys: Sequence[str]) -> ir.Table:
    t = source.rows
    pos = t.filter(t[reward] > 0)
    return pos.select("session", *keys, "rank", c=pos[reward].cast("float64"),
                      **{f"t{i}": pos[POLICY_PREFIX + p].cast("int64") for i, p in enumerate(policies, 1)})


def _clip_frame(clips: Sequence[float]) -> pd.DataFrame:
    """Number ``k``, position ``o`` in ascending order and value ``m`` of each clip value (the positions order
    :func:`_accumulate`; :func:`_binding_frame` makes the query's clip table from them)."""
    m = np.array([_clip_value(c) for c in clips], dtype=np.float64)
    order = np.empty(len(m), dtype=np.int64)
    order[np.argsort(m, kind="stable")] = np.arange(len(m))
    return pd.DataFrame({"k": np.arange(len(m), dtype=np.int64), "o": order, "m": m})


def _binding_frame(clip: pd.DataFrame) -> pd.DataFrame:
    """The clip values that bind in a session where ``b`` of them bind: the ``b`` smallest (m binds when
    m < max_i 1/D0(r_i), so the binding values are a prefix of the ascending order, ties included). One row
    per (b, clip value with position o < b): ``b``, number ``k``, value ``m``. Joining the sessions on ``b``
    is an equality join (a hash join), where ``m < max_i 1/D0(r_i)`` was a range join.

    >>> _binding_frame(_clip_frame([8.0, 2.0, math.inf])).to_dict("list")   # ascending: 2 (k 1), 8 (k 0), ∞
    {'b': [1, 2, 2, 3, 3, 3], 'k': [1, 1, 0, 1, 0, 2], 'm': [2.0, 2.0, 8.0, 2.0, 8.0, 1e+300]}
    """
    by_o = clip.sort_values("o", kind="stable")
    n = len(by_o)
    b = np.repeat(np.arange(1, n + 1, dtype=np.int64), np.arange(1, n + 1))
    o = np.concatenate([np.arange(i, dtype=np.int64) for i in range(1, n + 1)]) if n else np.zeros(0, np.int64)
    return pd.DataFrame({"b": b, "k": by_o["k"].to_numpy()[o], "m": by_o["m"].to_numpy()[o]})


def fresh_moments(source: Source, *, reward: str, policies: Sequence[str], discount: DiscountModel,
                  exposure: DiscountModel, clips: Sequence[float], keys: Sequence[str], binary: bool) -> pd.DataFrame:
    """The moments frame of :meth:`CompiledMoments.run`, from the same definition built and compiled afresh
    with the clip values as literals (the uncached path)."""
    lut = ibis.memtable(rank_table(discount, exposure, source.max_rank))
    pos = _rewarded(source, reward=reward, policies=policies, keys=keys)
    clip = _clip_frame(clips)
    wide = ibis.memtable(pd.DataFrame({f"m{k}": [m] for k, m in enumerate(clip["m"])}))
    expr = _moments(pos, lut, ibis.memtable(_binding_frame(clip)), wide, n_clips=len(clips), policies=policies, keys=keys,
                    binary=binary, lists=sorts_lists(source.backend))
    return _accumulate(_fetch_table(source.backend, expr), clip["o"].to_numpy(), keys, policies)


# ------------------------------------------------------------------------------------- compiled queries


def _put(backend, name: str, frame: pd.DataFrame) -> None:
    """Create or replace a small named table (the data of a compiled query)."""
    kind = getattr(backend, "name", "")
    if kind == "duckdb":
        backend.con.register(name, pa.Table.from_pandas(frame, preserve_index=False))
    elif kind == "pyspark":
        backend._session.createDataFrame(frame).createOrReplaceTempView(name)
    else:
        backend.create_table(name, frame, overwrite=True, temp=True)


def _run_sql(backend, sql: str) -> pd.DataFrame:
    """Run compiled SQL text on the backend it was compiled for."""
    kind = getattr(backend, "name", "")
    if kind == "duckdb":
        return backend.con.sql(sql).to_arrow_table().to_pandas()
    if kind == "pyspark":
        return backend._session.sql(sql).toPandas()
    return backend.sql(sql).to_pandas()


def _long_rewarded(source: Source, rewards: tuple[str, ...]) -> ir.Table:
    """Every reward's rewarded rows stacked, with the reward's index ``q`` (materialised once per source)."""
    state = _state(source)
    if rewards in state["long"]:
        return state["long"][rewards]
    t = source.rows
    keys = list(source.keys)
    pols = [c for c in t.columns if c.startswith(POLICY_PREFIX)]
    parts = [t.filter(t[r] > 0).select(q=ibis.literal(q, type="int64"), session=t.session,
                                       **{k: t[k] for k in keys}, rank=t["rank"].cast("int64"),
                                       c=t[r].cast("float64"), **{p: t[p].cast("int64") for p in pols})
             for q, r in enumerate(rewards)]
    # several rewards: cached on the source's own backend (``Table.cache`` would pick Ibis's default backend for
    # memtables); one reward: read where the rows are (a filter of them, not worth a copy)
    long = source.backend._cached_table(ibis.union(*parts)) if len(parts) > 1 else parts[0]
    state["long"][rewards] = long
    return long


class CompiledMoments:
    """The moments query of one shape, compiled once and run for any reward, (D, D0) and clip values.

    Shape = (rewards the long table holds, target policies, number of clip values, group keys, binary or
    graded reward). :meth:`run` replaces the parameter table (reward index, clip values), the clip table
    (number, position in ascending order, value) and the rank table (1 / D0, D), then runs the cached SQL
    text; nothing is rebuilt or recompiled.
    """

    def __init__(self, source: Source, *, rewards: tuple[str, ...], policies: tuple[str, ...], n_clips: int,
                 binary: bool):
        self.source, self.rewards, self.policies, self.n_clips = source, rewards, policies, n_clips
        self.binary = binary
        uid = next(_NAMES)
        self._par, self._lut, self._clip = f"offeval_par_{uid}", f"offeval_lut_{uid}", f"offeval_clip_{uid}"
        backend = source.backend
        keys = list(source.keys)
        long = _long_rewarded(source, rewards)
        _put(backend, self._par, self._par_frame(0, [1.0] * n_clips))
        _put(backend, self._lut, pd.DataFrame({"r": np.array([1], dtype=np.int64), "w": [1.0], "d": [1.0]}))
        _put(backend, self._clip, _binding_frame(_clip_frame([1.0] * n_clips)))
        par, lut, clip = backend.table(self._par), backend.table(self._lut), backend.table(self._clip)
        pos = long.join(par, "q")
        pos = pos.select("session", *keys, "rank", "c",
                         **{f"t{i}": pos[POLICY_PREFIX + p] for i, p in enumerate(policies, 1)})
        wide = par.select(*[f"m{k}" for k in range(n_clips)])
        expr = _moments(pos, lut, clip, wide, n_clips=n_clips, policies=policies, keys=keys, binary=binary,
                        lists=sorts_lists(backend))
        backend._run_pre_execute_hooks(expr)  # registers the small in-memory tables the SQL names
        self.sql = backend.compile(expr)
        self._expr = expr  # keeps the tables the SQL names alive as long as the query
        self.runs = 0

    def _par_frame(self, q: int, clips: Sequence[float]) -> pd.DataFrame:
        return pd.DataFrame({"q": np.array([q], dtype=np.int64),
                             **{f"m{k}": np.array([_clip_value(m)], dtype=np.float64) for k, m in enumerate(clips)}})

    def run(self, *, reward: str, discount: DiscountModel, exposure: DiscountModel,
            clips: Sequence[float]) -> pd.DataFrame:
        """Per (clip number ``k``, group): the moments of ``reward`` under (D, D0) at the clip values."""
        if len(clips) != self.n_clips:
            raise ValueError(f"this query takes {self.n_clips} clip values, got {len(clips)}")
        backend = self.source.backend
        with _state(self.source)["lock"]:
            _put(backend, self._par, self._par_frame(self.rewards.index(reward), clips))
            _put(backend, self._lut, rank_table(discount, exposure, self.source.max_rank))
            clip = _clip_frame(clips)
            _put(backend, self._clip, _binding_frame(clip))
            out = _accumulate(_run_sql(backend, self.sql), clip["o"].to_numpy(), self.source.keys, self.policies)
            self.runs += 1
        return out


def compiled_moments(source: Source, *, rewards: Sequence[str], policies: Sequence[str], n_clips: int,
                     binary: bool) -> CompiledMoments:
    """The cached :class:`CompiledMoments` of a shape on ``source`` (compiled on first use)."""
    state = _state(source)
    everything = tuple(dict.fromkeys([*source.rewards, *rewards]))
    key = (everything, tuple(policies), int(n_clips), bool(binary))
    with state["lock"]:
        if key not in state["plans"]:
            state["plans"][key] = CompiledMoments(source, rewards=everything, policies=tuple(policies),
                                                  n_clips=int(n_clips), binary=bool(binary))
        return state["plans"][key]


# ---------------------------------------------------------------------------------------------- the rest


def binary_rewards(source: Source, rewards: Sequence[str]) -> dict[str, bool]:
    """Whether each reward takes a single positive value (then one sort per session serves every clip);
    computed once per source and reward."""
    state = _state(source)
    missing = [r for r in dict.fromkeys(rewards) if r not in state["binary"]]
    if missing:
        t = source.rows
        aggs = {}
        for i, r in enumerate(missing):
            aggs[f"lo{i}"] = t[r].cast("float64").min(where=t[r] > 0)
            aggs[f"hi{i}"] = t[r].cast("float64").max(where=t[r] > 0)
        res = _fetch_table(source.backend, t.aggregate(**aggs)).iloc[0]
        for i, r in enumerate(missing):
            lo, hi = res[f"lo{i}"], res[f"hi{i}"]
            state["binary"][r] = bool(pd.isna(lo) or float(lo) == float(hi))
    return {r: state["binary"][r] for r in rewards}
