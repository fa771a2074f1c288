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
from offeval_core.discounts import has_cutoff
from offeval_core.errors import UnknownName
from offeval_core.importance.weights import PROPENSITY
from offeval_core.registry import ESTIMATORS

__all__ = ["PROPENSITY_CURVES", "PROPENSITY_METRICS", "PlannedReduce", "correlation_variants",
           "decision_estimators", "estimator_family", "plan_moments", "propensity_estimators", "report_variants"]

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


def decision_estimators(discount: str, clip: float, *, exposure: str | None = None) -> tuple[Variant, ...]:
    """The decision boxes' default estimators, for the Decisions page and the report alike: DCG on raw labels
    (m = 1), DCG de-biased at ``clip`` (what KDD'24 recommends), then DCG and nDCG de-biased at m = ∞ (the rest of
    ``analyses.DEFAULT_ESTIMATORS``), without repeats, all with D = ``discount`` and D0 = ``exposure`` (default
    ``discount``); for a propensity policy (D = ``propensity``) the importance estimators of
    :func:`propensity_estimators`.

    >>> [(v.metric, v.clip) for v in decision_estimators("pbm", 16.0)]
    [('dcg', 1.0), ('dcg', 16.0), ('dcg', inf), ('ndcg', inf)]
    >>> [(v.metric, v.clip) for v in decision_estimators("propensity", 16.0)]
    [('is', inf), ('snips', inf), ('cis', 16.0), ('ncis', 16.0)]
    """
    from offeval_core.analyses.decisions import DEFAULT_ESTIMATORS

    if discount == PROPENSITY:
        return propensity_estimators(clip)
    exposure = discount if exposure is None else exposure
    first, *rest = [(e.metric, e.clip) for e in DEFAULT_ESTIMATORS]
    picks = dict.fromkeys([first, ("dcg", float(clip)), *rest])
    return tuple(Variant(name, discount, exposure, m) for name, m in picks)


def correlation_variants(discount: str, clip: float) -> tuple[Variant, ...]:
    """The offline-online correlation's default columns, for the Correlation page and the report alike: KDD'24
    Table 2's five (``analyses.default_variants``: log2 and the learnt pbm, C and Q̂ at m = ∞, nDCG (pbm, Q̂)),
    then DCG (D = D0 = ``discount``, Q̂ clipped at ``clip``) unless it is one of them or ``discount`` has a cut-off
    (no exposure model can: :func:`~offeval_core.discounts.has_cutoff`); for a propensity policy
    (D = ``propensity``) the importance estimators of :func:`propensity_estimators` at the cap ``clip``.

    >>> [(v.discount, v.clip) for v in correlation_variants("pbm", math.inf)][-1]   # Table 2's five only
    ('pbm', inf)
    >>> [(v.metric, v.discount, v.clip) for v in correlation_variants("exponential:0.8", 16.0)][5:]
    [('dcg', 'exponential:0.8', 16.0)]
    >>> len(correlation_variants("log2@10", 16.0))                                  # Table 2's five only
    5
    >>> [v.metric for v in correlation_variants("propensity", 16.0)]
    ['is', 'snips', 'cis', 'ncis']
    """
    from offeval_core.analyses.correlation import default_variants

    if discount == PROPENSITY:
        return propensity_estimators(clip)
    if has_cutoff(discount):
        return default_variants()
    return tuple(dict.fromkeys((*default_variants(), Variant("dcg", discount, discount, float(clip)))))


def propensity_estimators(clip: float) -> tuple[Variant, ...]:
    """The default estimators of a propensity policy (D = D0 = ``propensity``): IS and SNIPS (uncapped, Gilotte Sec.
    3 and 4.1), then CIS and NCIS at the cap ``clip`` (Sec. 4.2, Eq. 1) when it is finite (at c = ∞ they are IS and
    SNIPS).

    >>> [(v.metric, v.clip) for v in propensity_estimators(16.0)]
    [('is', inf), ('snips', inf), ('cis', 16.0), ('ncis', 16.0)]
    >>> [v.metric for v in propensity_estimators(float("inf"))]
    ['is', 'snips']
    """
    p = PROPENSITY
    out = [Variant("is", p, p, math.inf), Variant("snips", p, p, math.inf)]
    if math.isfinite(clip):
        out += [Variant("cis", p, p, float(clip)), Variant("ncis", p, p, float(clip))]
    return tuple(out)


def report_variants(discount: str, clips: Iterable[float], q_clip: float) -> tuple[Variant, ...]:
    """Every estimator the report's sections read: the sensitivity curves (DCG and nDCG over ``clips``),
    the correlation's columns (:func:`correlation_variants` at ``q_clip``), Table 2 across clip values (DCG with the log2 discount over
    ``clips`` beside the learnt model's) and the decision-box estimators.

    >>> [(p.discount, p.clips) for p in plan_moments(report_variants("pbm", (1.0, 8.0), float("inf")))]
    [('pbm', (1.0, 8.0, inf)), ('log2', (1.0, 8.0, inf))]
    """
    sens = tuple(Variant(metric, discount, discount, float(c)) for c in clips for metric in ("dcg", "ndcg"))
    log2 = tuple(Variant("dcg", "log2", "log2", float(c)) for c in clips)
    return tuple(dict.fromkeys((*sens, *correlation_variants(discount, q_clip), *log2,
                                *decision_estimators(discount, q_clip))))
