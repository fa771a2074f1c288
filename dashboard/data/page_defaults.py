"""The choices a page derives from the dataset and the sidebar before it computes, defined once: the page calls
them with its widgets' values, the background preparation (:mod:`.warmup`) with the defaults, so both ask the
cache for the same entry. The default of every control itself is in ``dashboard.state`` (``DEFAULTS``,
``PAGE_CONTROLS``, ``PROPENSITY_CONTROLS``); the default estimators of Correlation and Decisions are the
report's too (``offeval_core.analyses.plan``: ``correlation_variants``, ``decision_estimators``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from dashboard.data.datasets import Dataset

__all__ = ["agreement_policies", "sensitivity_rewards"]


def sensitivity_rewards(ds: Dataset, reward: str, all_rewards: bool) -> tuple[str, ...]:
    """The rewards Sensitivity pools: every reward column ("All rewards", as KDD'24 Fig. 1) or the sidebar's
    reward, without those that are never positive (no online effect to detect)."""
    rates = ds.reward_rates
    return tuple(r for r in (ds.rewards if all_rewards else (reward,)) if rates.get(r, 0) > 0)


def agreement_policies(ds: Dataset) -> tuple[str, ...]:
    """The policies DCG vs nDCG compares by default: every rank policy of the logs (a propensity policy has no
    ranks to score)."""
    return tuple(ds.policies)

