"""Small helpers shared by the analyses: estimator variants, labels, and moment bookkeeping."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import NamedTuple

import numpy as np
import pandas as pd

from offeval_core.engine import Grid, Moments
from offeval_core.errors import InputError, WrongType
from offeval_core.estimators import ESTIMATORS, require
from offeval_core.formatting import clip_text
from offeval_core.importance.weights import PROPENSITY
from offeval_core.validation import check_choice, check_clip

__all__ = [
    "Variant", "as_variant", "check_in_grid", "check_moments", "check_policy_in", "check_rewards", "clip_text",
    "finite", "merge_moments", "pct", "variant_label",
]



class Variant(NamedTuple):
    """One offline estimator: metric (``dcg`` / ``ndcg`` / ``pndcg``), target discount D, exposure model
    D0 of the logged ranks, and clip m (1 = raw labels C, ∞ = de-biased labels Q̂ = C / D0)."""

    metric: str
    discount: str
    exposure: str
    clip: float

    @property
    def label(self) -> str:
        return variant_label(self)


def as_variant(v, *, name: str = "variant") -> Variant:
    """Accept a :class:`Variant` or a plain 4-tuple ``(metric, discount, exposure, clip)``."""
    if isinstance(v, Variant):
        out = v
    elif isinstance(v, Sequence) and not isinstance(v, str) and len(v) == 4:
        out = Variant(*v)
    else:
        raise WrongType(f"{name} must be a (metric, discount, exposure, clip) tuple, got {v!r}")
    check_choice(out.metric, ESTIMATORS, name=f"{name} metric")
    return Variant(out.metric, str(out.discount), str(out.exposure), check_clip(out.clip, name=f"{name} clip"))


def variant_label(v: Variant) -> str:
    """Table-2 style label: ``DCG (pbm, Q̂)``, ``DCG (log2, C)``, ``DCG (pbm, Q̂ m=64)``.

    ``C`` = raw labels (m = 1); ``Q̂`` = de-biased labels C / D0 (m = ∞), clipped at m otherwise. When the
    exposure model differs from the discount it is named too: ``DCG (D=log2, D0=pbm, Q̂)``. Importance estimators
    with the logged propensities name the cap c: ``CIS (propensity, c = 64)``, ``IS (propensity)``.

    >>> variant_label(Variant("cis", "propensity", "propensity", 64.0)), variant_label(Variant("dcg", "pbm", "pbm", 1.0))
    ('CIS (propensity, c = 64)', 'DCG (pbm, C)')
    """
    metric = ESTIMATORS[v.metric].label
    if v.discount == PROPENSITY:  # importance weights π_t / π_p: the clip is the cap c of the weights
        uncapped = v.metric.split("@")[0] in ("is", "snips") and math.isinf(v.clip)
        return f"{metric} (propensity{'' if uncapped else ', c = ' + clip_text(v.clip)})"
    if v.clip == 1:
        labels = "C"
    elif math.isinf(v.clip):
        labels = "Q̂"
    else:
        labels = f"Q̂ m={clip_text(v.clip)}"
    if v.clip == 1 or v.discount == v.exposure:
        model = v.discount
    else:
        model = f"D={v.discount}, D0={v.exposure}"
    return f"{metric} ({model}, {labels})"


def check_in_grid(moments: Moments, v: Variant) -> None:
    """Raise :class:`~offeval_core.errors.UnknownName` when a variant was not computed in ``moments``
    (:func:`~offeval_core.estimators.require`)."""
    require(moments, discounts=(v.discount,), exposures=(v.exposure,), clips=(v.clip,), of=f" of {variant_label(v)}")


def check_moments(moments, *, name: str = "moments") -> Moments:
    if not isinstance(moments, Moments):
        raise WrongType(f"{name} must be offeval_core.engine.Moments (from engine.reduce), "
                        f"got {type(moments).__name__}")
    return moments


def check_policy_in(moments: Moments, policy: str) -> str:
    require(moments, policies=(policy,))
    return policy


def check_rewards(moments: Moments, rewards) -> tuple[str, ...]:
    if rewards is None:
        return tuple(moments.grid.rewards)
    if isinstance(rewards, str):
        rewards = (rewards,)
    rewards = tuple(rewards)
    require(moments, rewards=rewards)
    if not rewards:
        raise InputError("rewards must name at least one reward, got an empty sequence")
    return rewards


def merge_moments(*parts: Moments) -> Moments:
    """Combine moments of the same logs computed for different discount / clip grids into one object.

    Useful to compute only the (discount, exposure) pairs an analysis needs (e.g. log2 with log2 and pbm
    with pbm) instead of their full cross product. Rows of identical variants are kept once (parts of
    different rewards are only concatenated: they share no variant).
    """
    if not parts:
        raise InputError("merge_moments needs at least one Moments, got none")
    for p in parts:
        check_moments(p, name="parts")
    first = parts[0]
    for p in parts[1:]:
        if p.grid.ndcg_rule != first.grid.ndcg_rule:
            raise InputError("cannot merge moments computed with different ndcg_rule values")

    def union(attr):
        out: list = []
        for p in parts:
            out += [x for x in getattr(p.grid, attr) if x not in out]
        return tuple(out)

    keys = [*first.keys, "reward", "discount", "exposure", "clip", "policy", "metric"]
    offline = pd.concat([p.offline for p in parts], ignore_index=True)
    online = pd.concat([p.online for p in parts], ignore_index=True)
    rewards = [r for p in parts for r in dict.fromkeys(p.grid.rewards)]
    if len(set(rewards)) < len(rewards):  # parts of other rewards share no row (a Moments has one row per variant)
        offline = offline.drop_duplicates(subset=keys)
        online = online.drop_duplicates(subset=[*first.keys, "reward"])
    grid = Grid(rewards=union("rewards"), policies=union("policies"), discounts=union("discounts"),
                exposures=union("exposures"), clips=union("clips"), ndcg_rule=first.grid.ndcg_rule)
    labels: dict[str, str] = {}
    for p in parts:
        labels |= p.discount_labels
    return Moments(offline=offline.reset_index(drop=True), online=online.reset_index(drop=True), grid=grid,
                   discount_labels=labels, source=first.source)


def pct(x: float, digits: int = 0) -> str:
    """``0.234 → "23 %"`` (NaN → "n/a")."""
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "n/a"
    return f"{100 * x:.{digits}f} %"


def finite(values) -> np.ndarray:
    arr = np.asarray(values, dtype=float)
    return arr[np.isfinite(arr)]
