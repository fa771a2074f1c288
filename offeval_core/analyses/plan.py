"""Which moments an analysis needs: one planner shared by the dashboard and the report.

An analysis is given as the estimators (:class:`~offeval_core.analyses.Variant`) it reads. The planner groups
them into the reduces that produce their moments: one per (family, D, D0) with the union of the clip values
the estimators of that pair read. The DCG family (``dcg``, ``ndcg``, ``pndcg``) comes from
:func:`offeval_core.engine.reduce`, the importance-sampling family (Gilotte Sec. 3-5) from
:func:`offeval_core.importance.reduce_importance`. The dashboard then fetches each planned reduce from its
cache (always over the whole clip grid); the report reduces exactly the planned clips.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

from offeval_core.analyses._common import Variant, as_variant
from offeval_core.errors import UnknownName
from offeval_core.registry import ESTIMATORS

__all__ = ["PROPENSITY_CURVES", "PROPENSITY_METRICS", "PlannedReduce", "decision_estimators", "estimator_family", "plan_moments",
           "propensity_estimators", "report_variants"]

PROPENSITY_METRICS = ("is", "snips", "cis", "ncis", "piece-ncis", "point-ncis")
"""The estimators of a propensity policy (importance weights π_t / π_p; Gilotte Sec. 3-5), max-capped, per session."""
PROPENSITY_CURVES = ("is", "snips", "cis", "ncis")
"""The ones a view over the cap c offers (Sensitivity, Table 2's columns): capped and normalised capped IS, with
their uncapped versions IS and SNIPS as references (Gilotte Sec. 3-4)."""


def estimator_family(name: str) -> str:
    """``dcg`` for estimators read from the DCG reduce, ``importance`` for the importance-sampling family.

    >>> estimator_family("ndcg")
    'dcg'
    """
    import offeval_core.importance  # noqa: F401 - registers the importance-sampling family in ESTIMATORS

    if name not in ESTIMATORS:
        raise UnknownName(f"unknown estimator {name!r}; known: {', '.join(ESTIMATORS)}")
    return ESTIMATORS[name].family or "dcg"


@dataclass(frozen=True)
class PlannedReduce:
    """One reduce an analysis needs: the estimator family, target discount D, exposure model D0 and the
    clip values (sorted) its estimators read."""

    family: str
    discount: str
    exposure: str
    clips: tuple[float, ...]


def plan_moments(variants: Iterable) -> tuple[PlannedReduce, ...]:
    """The reduces that give the moments of ``variants``, in order of first appearance.

    >>> [(p.family, p.discount, p.clips) for p in plan_moments([("dcg", "pbm", "pbm", 1.0),
    ...     ("ndcg", "pbm", "pbm", float("inf")), ("ncis", "log2", "log2", 16.0)])]
    [('dcg', 'pbm', (1.0, inf)), ('importance', 'log2', (16.0,))]
    """
    groups: dict[tuple[str, str, str], set[float]] = {}
    for v in variants:
        v = as_variant(v)
        groups.setdefault((estimator_family(v.metric), v.discount, v.exposure), set()).add(v.clip)
    return tuple(PlannedReduce(fam, d, e, tuple(sorted(clips))) for (fam, d, e), clips in groups.items())


def decision_estimators(discount: str, q_clip: float) -> tuple[Variant, ...]:
    """The report's decision-box estimators: DCG on raw labels (m = 1) and de-biased at ``q_clip``, nDCG at
    ``q_clip`` (all with D = D0 = ``discount``) and DCG with the log2 discount at ``q_clip``."""
    out = (Variant("dcg", discount, discount, 1.0), Variant("dcg", discount, discount, float(q_clip)),
           Variant("ndcg", discount, discount, float(q_clip)), Variant("dcg", "log2", "log2", float(q_clip)))
    return tuple(dict.fromkeys(out))


def propensity_estimators(clip: float) -> tuple[Variant, ...]:
    """The default estimators of a propensity policy (D = D0 = ``propensity``): IS and SNIPS (uncapped, Gilotte Sec.
    3 and 4.1), then CIS and NCIS at the cap ``clip`` (Sec. 4.2, Eq. 1) when it is finite (at c = ∞ they are IS and
    SNIPS).

    >>> [(v.metric, v.clip) for v in propensity_estimators(16.0)]
    [('is', inf), ('snips', inf), ('cis', 16.0), ('ncis', 16.0)]
    >>> [v.metric for v in propensity_estimators(float("inf"))]
    ['is', 'snips']
    """
    p = "propensity"
    out = [Variant("is", p, p, math.inf), Variant("snips", p, p, math.inf)]
    if math.isfinite(clip):
        out += [Variant("cis", p, p, float(clip)), Variant("ncis", p, p, float(clip))]
    return tuple(out)


def report_variants(discount: str, clips: Iterable[float], q_clip: float) -> tuple[Variant, ...]:
    """Every estimator the report's sections read: the sensitivity curves (DCG and nDCG over ``clips``),
    KDD'24 Table 2's columns at ``q_clip``, Table 2 across clip values (DCG with the log2 discount over
    ``clips`` beside the learnt model's) and the decision-box estimators.

    >>> [(p.discount, p.clips) for p in plan_moments(report_variants("pbm", (1.0, 8.0), float("inf")))]
    [('pbm', (1.0, 8.0, inf)), ('log2', (1.0, 8.0, inf))]
    """
    from offeval_core.analyses.correlation import default_variants

    sens = tuple(Variant(metric, discount, discount, float(c)) for c in clips for metric in ("dcg", "ndcg"))
    log2 = tuple(Variant("dcg", "log2", "log2", float(c)) for c in clips)
    return tuple(dict.fromkeys((*sens, *default_variants(q_clip, pbm=discount), *log2,
                                *decision_estimators(discount, q_clip))))
