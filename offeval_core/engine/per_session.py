"""Per-session values of every session at every clip value: the direct form of the reduce's kernel.

What :func:`offeval_core.estimators.session_values` reads (:func:`session_kernel`), and the reference the
reduce's moments are tested against (``tests/test_engine_compiled.py``). The reduce itself computes a
session's values at a clip value only where that value binds (:mod:`offeval_core.engine.kernel`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import ibis
import ibis.expr.types as ir
import numpy as np
import pandas as pd

from offeval_core.discounts import DiscountModel
from offeval_core.engine.grid import INF_CLIP, METRICS
from offeval_core.engine.kernel import (
    _NAMES,
    _clip_value,
    _long_rewarded,
    _lookups,
    _put,
    _rewarded,
    _run_sql,
    _state,
    _stats,
    _values,
    binary_rewards,
)
from offeval_core.engine.lookups import rank_table
from offeval_core.engine.sources import Source
from offeval_core.logs import LOGGING_POLICY, POLICY_PREFIX

__all__ = ["CompiledSessionValues", "compiled_session_values", "session_kernel"]


def _session_values(pos: ir.Table, lut: ir.Table, *, n_clips: int, n_policies: int, keys: Sequence[str],
                    binary: bool) -> ir.Table:
    """One row per (session of ``pos``, clip number ``k``): ``idcg`` and ``d0``… (DCG of the logging policy
    and of target policy i ≥ 1), plus ``session`` and ``keys``.

    ``pos`` holds the rewarded rows of one reward: ``session``, ``keys``, ``rank``, the reward ``c``, the
    target ranks ``t1``…, and the clip values ``m0``… (literals or columns of a joined parameter table);
    ``lut`` the rank table (``r``, ``w`` = 1 / D0, ``d`` = D). With one positive reward value (binary
    rewards) the descending order of c · min(m, 1/D0) within a session is that of 1/D0 for every m (equal
    labels may swap without changing iDCG), so one sort per session serves the whole clip grid and the
    per-session sums are taken wide over the grid (one column per m), then crossed with the clip index;
    graded rewards are ranked per clip value.
    """
    pos = base = _lookups(pos, lut, n_policies=n_policies)
    index = ibis.memtable(pd.DataFrame({"k": np.arange(n_clips, dtype=np.int64)}))
    pos = pos.mutate(**{f"l{k}": pos.c * ibis.least(pos[f"m{k}"], pos.w) for k in range(n_clips)})
    if binary:
        pos = pos.mutate(j=ibis.row_number().over(group_by=pos.session, order_by=[pos.w.desc(), pos["rank"]]) + 1)
        pos = pos.join(lut.select(j="r", dj="d"), "j")
    sums = {}
    for k in range(n_clips):
        lab = pos[f"l{k}"]
        if binary:
            sums[f"idcg_{k}"] = (lab * pos["dj"]).sum()
        for i in range(n_policies):
            sums[f"dcg_{k}_{i}"] = (lab * pos[f"p{i}"]).sum()
    # keyed by the session alone (one integer: cheaper to hash); its group keys are constant within it
    per = pos.group_by("session").aggregate(**{k: pos[k].min() for k in keys}, **sums)
    x = per.cross_join(index)
    x = x.select("session", *keys, "k", **({"idcg": _pick(x, "idcg_{}", n_clips)} if binary else {}),
                 **{f"d{i}": _pick(x, f"dcg_{{}}_{i}", n_clips) for i in range(n_policies)})
    if binary:
        return x
    # graded rewards: the labels ranked per clip value, in one narrow window over (session, k)
    lab = base.select("session", "c", "w", "rank", *[f"m{k}" for k in range(n_clips)]).cross_join(index)
    lab = lab.select("session", "k", "rank", lab=lab.c * ibis.least(_pick(lab, "m{}", n_clips), lab.w))
    lab = lab.mutate(j=ibis.row_number().over(group_by=[lab.session, lab.k], order_by=[lab.lab.desc(), lab["rank"]])
                     + 1)
    lab = lab.join(lut.select(j="r", dj="d"), "j")
    ideal = lab.group_by(["session", "k"]).aggregate(idcg=(lab.lab * lab.dj).sum())
    return x.join(ideal, ["session", "k"]).select("session", *keys, "k", "idcg",
                                                  *[f"d{i}" for i in range(n_policies)])


def _pick(x: ir.Table, fmt: str, n_clips: int) -> ir.Value:
    """Column ``fmt.format(k)`` of each row's clip number ``x.k``."""
    if n_clips == 1:
        return x[fmt.format(0)]
    return ibis.cases(*[(x.k == k, x[fmt.format(k)]) for k in range(n_clips - 1)],
                      else_=x[fmt.format(n_clips - 1)])


def _moments_of(x: ir.Table, *, policies: Sequence[str], keys: Sequence[str]) -> ir.Table:
    """Per (clip number ``k``, group): every moment, from the per-(session, clip) values of
    :func:`_session_values` in one group-by (the direct form; :func:`~offeval_core.engine.kernel._moments` is the one the reduce runs)."""
    x = _values(x, policies=policies)
    out = x.group_by(["k", *keys]).aggregate(**_stats(x, policies=policies))
    return out.mutate(**{f"{m}__{p}__co_diff_den": out[f"{m}__{p}__co_den"] - out[f"{m}__{LOGGING_POLICY}__co_den"]
                         for m in METRICS for p in policies})


def _per_session(source: Source, *, reward: str, policies: Sequence[str], discount: DiscountModel,
                 exposure: DiscountModel, clips: Sequence[float], keys: Sequence[str], binary: bool) -> ir.Table:
    """The per-(session, clip number) values of one reward and (D, D0) with the clip values as literals (every
    session at every clip value; the reduce computes only the clip values that bind, :class:`CompiledMoments`)."""
    lut = ibis.memtable(rank_table(discount, exposure, source.max_rank))
    pos = _rewarded(source, reward=reward, policies=policies, keys=keys)
    pos = pos.mutate(**{f"m{k}": ibis.literal(_clip_value(m), type="float64") for k, m in enumerate(clips)})
    return _session_values(pos, lut, n_clips=len(clips), n_policies=len(policies) + 1, keys=keys, binary=binary)


def session_kernel(
    source: Source, *, reward: str, policies: Sequence[str], discounts: Sequence[DiscountModel],
    exposures: Sequence[DiscountModel], variants: pd.DataFrame,
) -> ir.Table:
    """Per (variant, session with a reward): DCG of the logging and target policies and iDCG.

    Columns ``v``, ``session``, ``dcg__logging``, ``dcg__<policy>``…, ``idcg``. Sessions without a
    positive reward are absent (all their values are 0).
    """
    binary = binary_rewards(source, [reward])[reward]
    names = [LOGGING_POLICY, *policies]
    parts = []
    for (dm, em), block in variants.groupby(["dm", "em"], sort=True):
        clips = [math.inf if c >= INF_CLIP else float(c) for c in block["clip"]]
        per = _per_session(source, reward=reward, policies=policies, discount=discounts[dm],
                           exposure=exposures[em], clips=clips, keys=(), binary=binary)
        v_of_k = ibis.memtable(pd.DataFrame({"k": np.arange(len(clips), dtype=np.int64),
                                             "v": block["v"].to_numpy(dtype=np.int64)}))
        per = per.join(v_of_k, "k")
        parts.append(per.select("v", "session", idcg=per.idcg,
                                **{f"dcg__{p}": per[f"d{i}"] for i, p in enumerate(names)}))
    return ibis.union(*parts) if len(parts) > 1 else parts[0]


class CompiledSessionValues:
    """The per-session values of one shape (the source's rewards, target policies, binary or graded reward) at one
    clip value, compiled once: :meth:`run` replaces the parameter table (reward index, clip value) and the rank
    table (1 / D0, D) and runs the cached SQL text, as :class:`~offeval_core.engine.kernel.CompiledMoments` does
    for the moments. Building and compiling the expression took most of a new (D, D0, clip)'s time."""

    def __init__(self, source: Source, *, rewards: tuple[str, ...], policies: tuple[str, ...], binary: bool):
        self.source, self.rewards, self.policies = source, rewards, policies
        uid = next(_NAMES)
        self._par, self._lut = f"offeval_svpar_{uid}", f"offeval_svlut_{uid}"
        backend = source.backend
        _put(backend, self._par, self._par_frame(0, math.inf))
        _put(backend, self._lut, pd.DataFrame({"r": np.array([1], dtype=np.int64), "w": [1.0], "d": [1.0]}))
        par, lut = backend.table(self._par), backend.table(self._lut)
        pos = _long_rewarded(source, rewards).join(par, "q")
        pos = pos.select("session", "rank", "c", "m0", **{f"t{i}": pos[POLICY_PREFIX + p] for i, p in enumerate(policies, 1)})
        per = _session_values(pos, lut, n_clips=1, n_policies=len(policies) + 1, keys=(), binary=binary)
        expr = per.select("session", "idcg", *[f"d{i}" for i in range(len(policies) + 1)])
        backend._run_pre_execute_hooks(expr)  # registers the small in-memory tables the SQL names
        self.sql = backend.compile(expr)
        self._expr = expr  # keeps the tables the SQL names alive as long as the query

    @staticmethod
    def _par_frame(q: int, clip: float) -> pd.DataFrame:
        return pd.DataFrame({"q": np.array([q], dtype=np.int64), "m0": np.array([_clip_value(clip)], dtype=np.float64)})

    def run(self, *, reward: str, discount: DiscountModel, exposure: DiscountModel, clip: float) -> pd.DataFrame:
        """Per session with a reward: ``session``, ``idcg``, ``d0`` (the logged ranking's DCG), ``d1``… (the
        target policies' DCG), of ``reward`` under (D, D0) at the clip value ``clip``."""
        backend = self.source.backend
        with _state(self.source)["lock"]:
            _put(backend, self._par, self._par_frame(self.rewards.index(reward), clip))
            _put(backend, self._lut, rank_table(discount, exposure, self.source.max_rank))
            return _run_sql(backend, self.sql)


def compiled_session_values(source: Source, *, reward: str, policies: Sequence[str]) -> CompiledSessionValues:
    """The cached :class:`CompiledSessionValues` of ``reward``'s shape on ``source`` (compiled on first use)."""
    state = _state(source)
    binary = binary_rewards(source, [reward])[reward]
    everything = tuple(dict.fromkeys([*source.rewards, reward]))
    key = ("session values", everything, tuple(policies), binary)
    with state["lock"]:
        if key not in state["plans"]:
            state["plans"][key] = CompiledSessionValues(source, rewards=everything, policies=tuple(policies),
                                                        binary=binary)
        return state["plans"][key]
