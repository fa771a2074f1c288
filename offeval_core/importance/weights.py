"""Importance weights of the Gilotte family: which weights (propensity ratios or exposure ratios), the
session labels (strata, contexts), the backend tables the reduce reads, and capping.

w_i = π_t(a|x) / π_p(a|x) on propensity logs; w_i = D(R(i)) / D0(r_i) on ranking logs; capped weights
w̄_i = min(w_i, c) (max-capping) or w_i · 1{w_i < c} (zero-capping, Gilotte Sec. 4.2).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import ibis.expr.types as ir
import numpy as np
import pandas as pd

from offeval_core.arms import offline_rows
from offeval_core.discounts import check_exposure_cutoff, parse_discount
from offeval_core.engine import GROUP_KEYS, Source, connect
from offeval_core.engine.lookups import rank_lookup
from offeval_core.errors import InputError, SpecError, UnknownName, WrongType
from offeval_core.importance.keys import CAPPINGS
from offeval_core.logs import LOGGING_POLICY, POLICY_PREFIX, TARGET_PROPENSITY_PREFIX, Logs
from offeval_core.validation import check_choice, check_clips

__all__ = ["INF_CLIP", "PROPENSITY", "WEIGHT_MODES", "WeightSetup", "cap", "capping_variants", "exposure_weights",
           "importance_source", "per_session", "resolve_weights", "session_labels", "weight_expr"]

WEIGHT_MODES = ("auto", "propensity", "exposure")
PROPENSITY = "propensity"
"""The ``discount`` / ``exposure`` label of rows whose weights come from propensity columns."""
INF_CLIP = 1e300
"""The stand-in for c = ∞ in backend tables (SQL has no infinite literal everywhere)."""


def cap(w: np.ndarray, clip: float, capping: str) -> np.ndarray:
    """Capped weights: min(w, c) for max-capping, w · 1{w < c} for zero-capping (a weight equal to the
    cap is dropped by zero-capping, kept at c by max-capping).

    >>> cap(np.array([1.0, 2.0, 3.0]), 2.0, "zero").tolist(), cap(np.array([1.0, 2.0, 3.0]), 2.0, "max").tolist()
    ([1.0, 0.0, 0.0], [1.0, 2.0, 2.0])
    """
    w = np.asarray(w, dtype=float)
    return np.where(w < clip, w, 0.0) if capping == "zero" else np.minimum(w, clip)


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
        raise InputError("policies must name at least one target policy, got none")
    if mode == "propensity":
        if not has_lp:
            raise InputError(
                f"weights='propensity' needs a 'logging_propensity' column; the logs {logs.source} have none "
                f"(use weights='exposure' for exposure ratios D(R(i)) / D0(i) from 'rank__<policy>' columns)")
        for p in policies:
            if TARGET_PROPENSITY_PREFIX + p not in cols:
                known = ", ".join(logs.propensity_policies) or "none"
                raise UnknownName(
                    f"policy {p!r}: the logs {logs.source} have no column '{TARGET_PROPENSITY_PREFIX}{p}' "
                    f"(target propensities found: {known}); importance weights π_t / π_p need the target "
                    f"policy's propensity on every logged row")
        return WeightSetup("propensity", policies, PROPENSITY, PROPENSITY)
    for p in policies:
        if p not in logs.policies:
            known = ", ".join(logs.policies) or "none"
            hint = (f"; it has '{TARGET_PROPENSITY_PREFIX}{p}' but no 'logging_propensity'"
                    if TARGET_PROPENSITY_PREFIX + p in cols and not has_lp else "")
            raise UnknownName(
                f"policy {p!r}: exposure weights D(R(i)) / D0(i) need the column '{POLICY_PREFIX}{p}', which "
                f"the logs {logs.source} do not have (policies found: {known}){hint}")
    return WeightSetup("exposure", policies, discount, exposure)


def per_session(session_ids, values, *, name: str) -> pd.Series:
    """One value per session from row-level ``values`` (a context property: it must be constant within a
    session), indexed by session id; an :class:`~offeval_core.errors.InputError` names the first session
    with two values.

    >>> per_session(pd.Series([1, 1, 2]), pd.Series(["a", "a", "b"]), name="segment").to_dict()
    {1: 'a', 2: 'b'}
    """
    ids = pd.Series(np.asarray(session_ids))
    col = pd.Series(np.asarray(values, dtype=object))
    text = col.astype(str)
    first = text.groupby(ids, sort=False).transform("first")
    differs = np.flatnonzero((text != first).to_numpy())
    if len(differs):
        k = differs[0]
        sid = ids.iat[k].item() if isinstance(ids.iat[k], np.generic) else ids.iat[k]
        raise InputError(f"{name} must be constant within a session (a context property); session "
                         f"{sid!r} has {first.iat[k]!r} and {text.iat[k]!r}", column=name)
    return col.groupby(ids, sort=False).first()


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
            raise InputError(f"{name}: no value for {len(missing)} session(s), e.g. session_id {ids}")
        return mapped.astype(str).to_numpy(dtype=object)
    if not isinstance(spec, str):
        raise WrongType(f"{name} must be a column name, a pandas Series or None, got {type(spec).__name__}")
    if spec in sess.columns and spec not in ("session", "length", "n_rows"):
        return sess[spec].astype(str).to_numpy(dtype=object)
    if spec in logs.frame.columns:
        per = per_session(logs.frame["session_id"], logs.frame[spec], name=f"{name} column {spec!r}")
        return per.reindex(sess["session_id"].to_numpy()).astype(str).to_numpy(dtype=object)
    usable = ["segment", "experiment_id", "day", "arm", *(c for c in logs.frame.columns
                                                          if c not in ("session", "session_id", "rank"))]
    raise UnknownName(f"{name} {spec!r} is not a column of the logs {logs.source} (usable: "
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


def capping_variants(clips: Sequence[float], cappings: Sequence[str]) -> pd.DataFrame:
    """One row per (clip c, capping) with an integer id ``v``; c = ∞ is always included (IS, SNIPS)."""
    clips = check_clips([*clips, math.inf])
    for c in cappings:
        check_choice(c, CAPPINGS, name="capping")
    rows: list[dict] = []
    for capping in dict.fromkeys(cappings):
        for c in clips:
            rows.append({"v": len(rows), "clip": INF_CLIP if math.isinf(c) else float(c), "zero": capping == "zero",
                         "clip_value": float(c), "capping": capping})
    return pd.DataFrame(rows)


def exposure_weights(logs: Logs, policy: str, *, discount: str, exposure: str = "pbm") -> tuple[np.ndarray, np.ndarray]:
    """(session, w) of the offline rows (:func:`offeval_core.arms.offline_rows`, in their order): the exposure
    weights w_i = D(R(i)) / D0(r_i) of :func:`weight_expr` in numpy, for the weight diagnostics that need every
    row (a quantile, Kish's ESS, the largest share, the support check).

    >>> from offeval_core.logs import read_logs
    >>> logs = read_logs(pd.DataFrame({"session_id": [1, 1], "rank": [1, 2], "click": [0, 1], "rank__new": [2, 1]}))
    >>> exposure_weights(logs, "new", discount="reciprocal", exposure="reciprocal")[1].tolist()  # (1/2)/1, 1/(1/2)
    [0.5, 2.0]
    """
    f = offline_rows(logs.frame)
    d, d0 = parse_discount(discount, logs=logs), parse_discount(exposure, logs=logs)
    return f["session"].to_numpy(), d(f[POLICY_PREFIX + policy].to_numpy()) / d0(f["rank"].to_numpy())


def weight_expr(source: Source, setup: WeightSetup, policy: str, *, logs: Logs | None = None,
                pbm_floor: float | None = None) -> ir.FloatingValue:
    """The uncapped weight w_i of each row of ``source.rows`` as an Ibis expression."""
    t = source.rows
    if setup.mode == "propensity":
        return t[TARGET_PROPENSITY_PREFIX + policy] / t["logging_propensity"]
    kw = {} if pbm_floor is None else {"floor": pbm_floor}
    d = parse_discount(setup.discount, logs=logs, **kw)
    d0 = parse_discount(setup.exposure, logs=logs, **kw)
    check_exposure_cutoff(d0)
    if min(d0.table(source.max_rank)) <= 0:
        raise SpecError(f"exposure model {setup.exposure!r} gives probability 0 to some logged ranks, so the "
                         "weight D(R(i)) / D0(i) is infinite there; use an exposure model > 0 at every rank")
    return rank_lookup(d, t[POLICY_PREFIX + policy], source.max_rank) / rank_lookup(d0, t["rank"], source.max_rank)

