"""The choices a page derives from the dataset and the sidebar before it computes, defined once: the page calls
them with its widgets' values, the background preparation (:mod:`.warmup`) with the defaults, so both ask the
cache for the same entry. The default of every control itself is in ``dashboard.state`` (``DEFAULTS``,
``PAGE_CONTROLS``, ``PROPENSITY_CONTROLS``); the default estimators of Correlation and Decisions are the
report's too (``offeval_core.analyses.plan``: ``correlation_variants``, ``decision_estimators``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from dashboard.data.datasets import Dataset

__all__ = ["CLIP_RULE", "agreement_policies", "recommendation_args", "sensitivity_rewards"]

CLIP_RULE = "slope"
"""The clip-tuning result the recommended clip reads (``recommended_clip`` always applies the SLOPE / Lepski rule with
its bias-bound guard; the rule of the Clip tuning page only changes that page's explanation)."""


def sensitivity_rewards(ds: Dataset, reward: str, all_rewards: bool) -> tuple[str, ...]:
    """The rewards Sensitivity pools: every reward column ("All rewards", as KDD'24 Fig. 1) or the sidebar's
    reward, without those that are never positive (no online effect to detect)."""
    rates = ds.reward_rates
    return tuple(r for r in (ds.rewards if all_rewards else (reward,)) if rates.get(r, 0) > 0)


def agreement_policies(ds: Dataset) -> tuple[str, ...]:
    """The policies DCG vs nDCG compares by default: every rank policy of the logs (a propensity policy has no
    ranks to score)."""
    return tuple(ds.policies)


def recommendation_args(ds: Dataset | None, reward: str | None, policy: str | None, discount: str, exposure: str,
                        level: float) -> tuple | str:
    """The arguments of ``clip_recommendation`` (key, reward, policy, D, D0, level, rule) for the target ``policy``
    under these settings (a propensity policy's weights are π_t / π_p: D = D0 = ``propensity``), or a sentence
    saying why there is no recommendation."""
    from offeval_core.importance.weights import PROPENSITY

    if ds is None or not reward or not policy or policy not in ds.targets.all:
        return "there is no target policy to tune the clip for"
    if ds.is_moments:
        return "a moments file has no per-row weights to tune the clip on"
    if ds.targets.kind(policy) == "propensity":
        discount = exposure = PROPENSITY
    return ds.key, reward, policy, discount, exposure, level, CLIP_RULE
