"""The moments of each dataset of the dashboard (the one heavy reduce), cached per (dataset key, reward, D, D0)
and, for a page of one target policy and a (D, D0) no page has used, per policy: read from the persistent
moments cache or a moments file when they are there, else reduced once (after the engine's shared preparation,
:func:`engine_ready`) and stored in that cache. The importance-sampling family's moments (exposure weights per
target policy, or the logged propensities) are reduced here too.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import streamlit as st

from dashboard.data.datasets import Dataset, is_ready, load, mark_ready, needs_raw_logs_text
from offeval_core.engine import DEFAULT_CLIPS, Grid, Moments, prepare, reduce
from offeval_core.errors import NeedsRawLogs, UnknownName
from offeval_core.estimators import require, subset
from offeval_core.logs import Logs
from offeval_core.moments_cache import cached

__all__ = [
    "PROPENSITY_REDUCE", "default_grid", "engine_ready", "file_moments_subset", "importance_moments", "moments",
    "moments_many", "moments_ready", "note_prepared_later", "one_policy_moments", "propensity_moments",
    "target_moments",
]

_PLANNED: set[tuple] = set()  # moments the background preparation computes (:func:`note_prepared_later`)


def _engine(ds: Dataset) -> None:
    """The engine's shared preparation of ``ds`` (:func:`engine_ready`), before the first reduce that is not in
    the moments cache: a dataset whose moments are all cached never pays for it."""
    engine_ready(f"{ds.key}#{id(ds)}", ds)  # keyed by the loaded object: a reloaded demo is prepared again


@st.cache_resource(show_spinner="Preparing the logs for fast analysis (first time only): session table, "
                                 "rank histogram, rewarded rows and the compiled moments queries…", max_entries=8)
def engine_ready(key: str, _ds: Dataset) -> bool:
    """Once per dataset: the work every page shares (``engine.prepare``): the logs registered in the engine
    as Arrow tables, the session table and length histogram, the rewarded rows of every reward, the
    compiled moments query of each reward shape and the online moments. Every later (reward, D, D0)
    combination then costs only the query's execution."""
    prepare(_ds.logs)
    return True


@st.cache_resource(show_spinner=False, max_entries=24)
def moments(key: str, reward: str, discount: str, exposure: str) -> Moments:
    """The reduce of one (reward, D, D0) over every target policy and the whole clip grid (cached); for a
    moments file, the file's rows of that (reward, D, D0)."""
    ds = load(key)
    if ds.is_moments:
        return file_moments_subset(ds.file_moments, reward, discount, exposure)
    grid = default_grid(ds.logs, reward, discount, exposure)
    out = cached(ds.logs, grid)  # the persistent moments cache (offeval_core.moments_cache): nothing computed
    if out is None:
        _engine(ds)
        out = reduce(ds.logs, grid)  # computed and stored in the cache
    mark_ready("moments", key, reward, discount, exposure)
    return out


def target_moments(key: str, reward: str, discount: str, exposure: str, policy: str | None) -> Moments:
    """The moments of one (reward, D, D0) that a page of target policy ``policy`` reads: the reduce over every
    policy (:func:`moments`) when it is at hand or on its way — computed in this process, held by the persistent
    moments cache, planned by the background preparation, or a moments file — else the reduce of that policy alone
    (:func:`one_policy_moments`), a fraction of the whole one for a (D, D0) no page has used yet (the demo, a new
    D: like 0.2 s against 0.7 s). ``policy`` None: every policy."""
    if policy is None or _all_policies_at_hand(key, reward, discount, exposure, policy):
        return moments(key, reward, discount, exposure)
    return one_policy_moments(key, reward, discount, exposure, policy)


def _all_policies_at_hand(key: str, reward: str, discount: str, exposure: str, policy: str) -> bool:
    if is_ready("moments", key, reward, discount, exposure) or ("moments", key, reward, discount, exposure) in _PLANNED:
        return True
    ds = load(key)
    if ds.is_moments or policy not in ds.policies:  # (a policy the logs lack: :func:`moments` says so)
        return True
    from offeval_core.moments_cache import MomentsCache, logs_key

    store = MomentsCache.from_env()
    return store is not None and store.path(logs_key(ds.logs, default_grid(ds.logs, reward, discount,
                                                                           exposure))).is_file()


@st.cache_resource(show_spinner=False, max_entries=24)
def one_policy_moments(key: str, reward: str, discount: str, exposure: str, policy: str) -> Moments:
    """The reduce of one (reward, D, D0) for the logging policy and target ``policy`` alone, over the whole clip
    grid (cached; the persistent moments cache holds it too): the rows of ``policy`` in :func:`moments`."""
    ds = load(key)
    grid = dataclasses.replace(default_grid(ds.logs, reward, discount, exposure), policies=(policy,))
    out = cached(ds.logs, grid)
    if out is None:
        _engine(ds)
        out = reduce(ds.logs, grid)
    mark_ready("moments", key, reward, discount, exposure, policy)
    return out


def moments_ready(key: str, reward: str, discount: str, exposure: str, policy: str | None) -> bool:
    """Whether :func:`target_moments` of these arguments is computed already (for progress UI)."""
    return is_ready("moments", key, reward, discount, exposure) or (
        policy is not None and is_ready("moments", key, reward, discount, exposure, policy))


def note_prepared_later(key: str, reward: str, discount: str, exposure: str) -> None:
    """Note that the background preparation will compute :func:`moments` of these arguments: a page then waits
    for them rather than reducing its own policy alone."""
    _PLANNED.add(("moments", key, reward, discount, exposure))


def default_grid(logs: Logs, reward: str, discount: str, exposure: str) -> Grid:
    """The grid of a page's reduce: one (reward, D, D0) over every target policy and the whole clip grid."""
    return Grid(rewards=(reward,), policies=logs.policies, discounts=(discount,), exposures=(exposure,),
                clips=DEFAULT_CLIPS)


def file_moments_subset(m: Moments, reward: str, discount: str, exposure: str) -> Moments:
    """The rows of one (reward, D, D0) of a moments file; NeedsRawLogs when the file does not hold them."""
    try:
        require(m, rewards=(reward,), discounts=(discount,), exposures=(exposure,), of=" (in the moments file)")
    except UnknownName as exc:
        raise NeedsRawLogs(needs_raw_logs_text(f"The {exc}: choose one of those in the sidebar. Any other "
                                               "variant")) from exc
    return subset(m, rewards=(reward,), discounts=(discount,), exposures=(exposure,))


def moments_many(key: str, pairs: Sequence[tuple[str, str, str]], policy: str | None = None) -> Moments:
    """Moments of several (reward, D, D0) combinations merged into one object (each part cached; of target
    ``policy``, :func:`target_moments`)."""
    from offeval_core.analyses import merge_moments

    parts = [target_moments(key, r, d, e, policy) for r, d, e in dict.fromkeys(pairs)]
    return parts[0] if len(parts) == 1 else merge_moments(*parts)


@st.cache_resource(show_spinner=False, max_entries=12)
def importance_moments(key: str, reward: str, policy: str, discount: str, exposure: str) -> Moments:
    """Moments of the importance-sampling family (Gilotte Sec. 4-5) for one target policy (cached)."""
    from offeval_core.importance import reduce_importance

    ds = load(key)
    if ds.is_moments:
        raise NeedsRawLogs(needs_raw_logs_text("The importance-sampling estimators (Gilotte Sec. 4-5) are not "
                                               "in the moments file; each"))
    _engine(ds)
    out = reduce_importance(ds.logs, rewards=(reward,), policies=(policy,), clips=DEFAULT_CLIPS,
                            discount=discount, exposure=exposure, weights="exposure")
    mark_ready("importance", key, reward, policy, discount, exposure)
    return out


PROPENSITY_REDUCE = {"cappings": ("max",), "scales": ("session",)}
"""The importance estimators the pages offer for propensity policies: max-capping min(w, c), per session
(``offeval estimate`` also has zero-capping and the per-impression scale)."""


@st.cache_resource(show_spinner=False, max_entries=12)
def propensity_moments(key: str, reward: str) -> Moments:
    """Moments of the importance-sampling family (IS, SNIPS, CIS, NCIS, PieceNCIS, PointNCIS; Gilotte Sec. 3-5)
    with the logged propensities π_t / π_p, for every propensity policy of a dataset over the whole clip grid
    (the cap c plays the role of m); cached. Discount and exposure of these rows read ``propensity``."""
    from offeval_core.importance import reduce_importance

    ds = load(key)
    if ds.is_moments:
        raise NeedsRawLogs(needs_raw_logs_text("The importance-sampling estimators (Gilotte Sec. 4-5) are not "
                                               "in the moments file; each"))
    policies = tuple(p for p in ds.targets.all if ds.targets.kind(p) == "propensity")
    _engine(ds)
    out = reduce_importance(ds.logs, rewards=(reward,), policies=policies, clips=DEFAULT_CLIPS,
                            weights="propensity", **PROPENSITY_REDUCE)
    mark_ready("propensity", key, reward)
    return out
