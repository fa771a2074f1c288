"""The choices a page derives from the dataset and the sidebar before it computes, defined once: the page calls
them with its widgets' values, the background preparation (:mod:`.warmup`) with the defaults, so both ask the
cache for the same entry. The default of every control itself is in ``dashboard.state`` (``DEFAULTS``,
``PAGE_CONTROLS``, ``PROPENSITY_CONTROLS``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from offeval_core.importance.weights import PROPENSITY

if TYPE_CHECKING:
    from dashboard.data.datasets import Dataset
    from offeval_core.analyses import Variant

__all__ = ["agreement_policies", "correlation_defaults", "decision_defaults", "sensitivity_rewards"]


def sensitivity_rewards(ds: Dataset, reward: str, all_rewards: bool) -> tuple[str, ...]:
    """The rewards Sensitivity pools: every reward column ("All rewards", as KDD'24 Fig. 1) or the sidebar's
    reward, without those that are never positive (no online effect to detect)."""
    rates = ds.reward_rates
    return tuple(r for r in (ds.rewards if all_rewards else (reward,)) if rates.get(r, 0) > 0)


def correlation_defaults(discount: str, clip: float) -> tuple[Variant, ...]:
    """Correlation's default columns: KDD'24 Table 2's five (``analyses.default_variants``, Q̂ at m = ∞), plus
    DCG (D, Q̂ at the sidebar's m) when the sidebar's D is neither log2 nor pbm; for a propensity policy
    (D = ``propensity``) the importance estimators of ``plan.propensity_estimators`` at the sidebar's m.

    >>> [str(v.metric) for v in correlation_defaults("propensity", 16.0)]
    ['is', 'snips', 'cis', 'ncis']
    >>> len(correlation_defaults("pbm", 16.0)), correlation_defaults("exponential:0.8", 16.0)[-1].clip
    (5, 16.0)
    """
    from offeval_core.analyses import Variant, default_variants
    from offeval_core.analyses.plan import propensity_estimators

    if discount == PROPENSITY:
        return tuple(Variant(*v) for v in propensity_estimators(clip))
    extra = () if discount in ("log2", "pbm") else (Variant("dcg", discount, discount, float(clip)),)
    return (*default_variants(), *extra)


def decision_defaults(discount: str, exposure: str, clip: float) -> tuple[tuple, ...]:
    """The Decisions page's default estimators as (name, D, D0, m): DCG on raw labels, DCG de-biased at the
    sidebar's clip ``clip`` (what KDD'24 recommends), then the rest of ``analyses.DEFAULT_ESTIMATORS``
    (de-biased DCG and nDCG at m = ∞), without repeats; for a propensity policy (D = D0 = ``propensity``) the
    importance estimators of ``plan.propensity_estimators``.

    >>> [(n, m) for n, _, _, m in decision_defaults("pbm", "pbm", 16.0)]
    [('dcg', 1.0), ('dcg', 16.0), ('dcg', inf), ('ndcg', inf)]
    >>> [(n, m) for n, _, _, m in decision_defaults("propensity", "propensity", 16.0)]
    [('is', inf), ('snips', inf), ('cis', 16.0), ('ncis', 16.0)]
    """
    from offeval_core.analyses import DEFAULT_ESTIMATORS
    from offeval_core.analyses.plan import propensity_estimators

    if discount == PROPENSITY:
        return tuple(tuple(v) for v in propensity_estimators(clip))
    first, *rest = [(e.metric, e.clip) for e in DEFAULT_ESTIMATORS]
    picks = dict.fromkeys([first, ("dcg", float(clip)), *rest])
    return tuple((name, discount, exposure, m) for name, m in picks)


def agreement_policies(ds: Dataset) -> tuple[str, ...]:
    """The policies DCG vs nDCG compares by default: every rank policy of the logs (a propensity policy has no
    ranks to score)."""
    return tuple(ds.policies)

