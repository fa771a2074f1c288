"""Cached analysis results of the dashboard: each a thin cached call of an :mod:`offeval_core.analyses`
function on the cached moments of :mod:`dashboard.data.datasets`, keyed by the dataset key and settings.
Which moments each analysis needs comes from the core's planner (:func:`offeval_core.analyses.plan.plan_moments`),
the same one the report uses.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import pandas as pd
import streamlit as st

from dashboard.data.datasets import (
    importance_moments,
    load,
    moments,
    moments_many,
    needs_raw_logs_text,
    parse_sim_spec,
)
from offeval_core.analyses.plan import estimator_family, plan_moments
from offeval_core.engine import DEFAULT_CLIPS, Moments
from offeval_core.errors import NeedsRawLogs
from offeval_core.estimators import subset

__all__ = [
    "agreement_chart", "agreement_result", "clip_recommendation", "clip_tuning_chart", "clip_tuning_result",
    "correlation_chart", "correlation_clip_chart", "correlation_clip_result", "correlation_html",
    "correlation_result", "correlation_series_chart", "decision_defaults", "decision_result", "diagnosis", "estimates_at", "estimator_family", "planned_moments", "sensitivity_chart", "sensitivity_result",
    "simulated_topics",
]


# ------------------------------------------------------------------------------------------ diagnosis
@st.cache_data(show_spinner=False, max_entries=8)
def diagnosis(key: str, reward: str, policy: str | None, discount: str, alpha: float = 0.05):
    """The assumption tests and estimator verdicts of ``offeval diagnose`` on a dataset (the Which-estimator
    page and the Method checklist share it)."""
    from offeval_core.diagnose import diagnose

    return diagnose(load(key).logs, reward=reward, policy=policy, discount=discount, alpha=alpha,
                    categories=simulated_topics(key))


def simulated_topics(key: str):
    """For a simulated world, the simulator's item topics serve as the category table of the
    reward-interaction test (uploaded logs and the demo have none)."""
    if not key.startswith("sim:"):
        return None
    from offeval_core.diagnose_validation import item_topics
    from offeval_core.simulate import preset_config

    spec = parse_sim_spec(key[len("sim:"):])
    return item_topics(preset_config(spec["preset"], **spec["overrides"]), spec["seed"])


# ------------------------------------------------------------------------------------------ analyses


def planned_moments(key: str, reward: str, policy: str | None, variants: Sequence[tuple]) -> Moments:
    """The moments of ``variants`` (``(metric, D, D0, clip)`` tuples) for one reward: each reduce the
    core's planner names (:func:`~offeval_core.analyses.plan.plan_moments`) fetched from its cache over the
    whole clip grid, merged. The importance-sampling family is reduced per target ``policy``."""
    from offeval_core.analyses import merge_moments

    parts = [importance_moments(key, reward, policy, p.discount, p.exposure) if p.family == "importance"
             else moments(key, reward, p.discount, p.exposure) for p in plan_moments(variants)]
    if not parts:
        parts = [moments(key, reward, "pbm", "pbm")]
    return parts[0] if len(parts) == 1 else merge_moments(*parts)


@st.cache_data(show_spinner=False, max_entries=64)
def sensitivity_result(key: str, rewards: tuple[str, ...], discount: str, exposure: str, policy: str,
                       metrics: tuple[str, ...], level: float, online_alpha: float, min_effect: float = 0.0,
                       side: str = "improvements", adjust: str = "none"):
    """KDD'24 Fig. 1 by the paper's protocol on the cached moments: the online improvements (or, with
    ``side="negatives"``, the separate view of online negatives) at p < ``online_alpha`` and |effect| >
    ``min_effect``. The page and the background preparation both call this with the page's arguments."""
    from offeval_core.analyses import sensitivity

    m = moments_many(key, [(r, discount, exposure) for r in rewards])
    return sensitivity(m, policy=policy, metrics=metrics, discount=discount, exposure=exposure, level=level,
                       online_alpha=online_alpha, min_effect=min_effect, side=side, rewards=rewards, adjust=adjust)


@st.cache_data(show_spinner=False, max_entries=64)
def correlation_result(key: str, reward: str, variants: tuple[tuple, ...], method: str):
    from offeval_core.analyses import Variant, offline_online_correlation

    m = planned_moments(key, reward, None, variants)
    return offline_online_correlation(m, variants=[Variant(*v) for v in variants], method=method,
                                      rewards=(reward,))


@st.cache_data(show_spinner=False, max_entries=32)
def correlation_clip_result(key: str, reward: str, model: str, method: str):
    """KDD'24 Table 2 across clip values (``analyses.correlation_by_clip``): DCG (``model``, ·) vs DCG (log2, ·)
    of the target policy, pooled over experiment-days, at every clip of the grid (the two cached reduces)."""
    from offeval_core.analyses import correlation_by_clip

    variants = [("dcg", d, d, c) for d in (model, "log2") for c in DEFAULT_CLIPS]
    return correlation_by_clip(planned_moments(key, reward, None, variants), reward=reward, model=model,
                               method=method)


@st.cache_data(show_spinner=False, max_entries=32)
def agreement_result(key: str, reward: str, policies: tuple[str, ...], discount: str, exposure: str,
                     clip: float, level: float, n_boot: int):
    from offeval_core.analyses import dcg_vs_ndcg

    if load(key).is_moments:
        raise NeedsRawLogs(needs_raw_logs_text("The DCG vs nDCG bootstrap over sessions"))
    return dcg_vs_ndcg(load(key).logs, reward=reward, policies=policies, discount=discount, exposure=exposure,
                       clip=clip, n_boot=n_boot, rng=0, level=level)


def decision_defaults(discount: str, exposure: str, clip: float) -> tuple[tuple, ...]:
    """The Decisions page's default estimators as (name, D, D0, m): DCG on raw labels, DCG de-biased at the
    sidebar's clip ``clip`` (what KDD'24 recommends), then the rest of ``analyses.DEFAULT_ESTIMATORS``
    (de-biased DCG and nDCG at m = ∞), without repeats.

    >>> [(n, m) for n, _, _, m in decision_defaults("pbm", "pbm", 16.0)]
    [('dcg', 1.0), ('dcg', 16.0), ('dcg', inf), ('ndcg', inf)]
    """
    from offeval_core.analyses import DEFAULT_ESTIMATORS

    first, *rest = [(e.metric, e.clip) for e in DEFAULT_ESTIMATORS]
    picks = dict.fromkeys([first, ("dcg", float(clip)), *rest])
    return tuple((name, discount, exposure, m) for name, m in picks)


@st.cache_data(show_spinner=False, max_entries=64)
def decision_result(key: str, reward: str, policy: str, estimators: tuple[tuple, ...], level: float,
                    relative: bool, adjust: str = "none"):
    from offeval_core.analyses import Variant, decision_boxes

    m = planned_moments(key, reward, policy, estimators)
    return decision_boxes(m, estimators=[Variant(*e) for e in estimators], policy=policy, level=level,
                          relative=relative, rewards=(reward,), adjust=adjust)


@st.cache_data(show_spinner=False, max_entries=32)
def clip_tuning_result(key: str, reward: str, policy: str, discount: str, exposure: str, level: float,
                       rule: str):
    from offeval_core.analyses import clip_tuning

    if load(key).is_moments:
        raise NeedsRawLogs(needs_raw_logs_text("The clip-tuning chart (bias bound, ESS and clipped share come "
                                               "from the per-row weights)"))
    m = moments(key, reward, discount, exposure)
    return clip_tuning(load(key).logs, reward=reward, policy=policy, discount=discount, exposure=exposure,
                       clips=DEFAULT_CLIPS, level=level, rule=rule, moments=m)


@st.cache_data(show_spinner=False, max_entries=32)
def clip_recommendation(key: str, reward: str, policy: str, discount: str, exposure: str, level: float, rule: str):
    """The one clip recommendation (``analyses.clip_tuning.recommend_clip``, as in the report and
    ``offeval estimate --clip auto``) for the clip-tuning result of these settings: the rule's choice, never a
    clip whose bias bound exceeds the mean size of the unclipped offline effect without saying so."""
    from offeval_core.analyses.clip_tuning import mean_offline_effect, recommend_clip

    effect = mean_offline_effect(moments(key, reward, discount, exposure), reward=reward, policy=policy,
                                 discount=discount, exposure=exposure, level=level)
    return recommend_clip(clip_tuning_result(key, reward, policy, discount, exposure, level, rule), effect=effect)


@st.cache_data(show_spinner=False, max_entries=128)
def estimates_at(key: str, reward: str, policy: str | None, discount: str, exposure: str, clip: float,
                 level: float, metrics: tuple[str, ...]) -> pd.DataFrame:
    """Per experiment and metric: logging and target estimates, the paired effect and the online effect
    at one clip value, read from the cached moments (``estimators.summarize_groups``)."""
    from offeval_core.estimators import summarize_groups

    # the cached moments restricted to one clip value and two policies: every lookup below is then cheap
    m = subset(moments(key, reward, discount, exposure), policies=(policy,) if policy else (), clips=(clip,))
    rows = []
    for metric in metrics:
        for g in summarize_groups(m, reward=reward, policy=policy, metric=metric, discount=discount,
                                  exposure=exposure, clip=clip, by=("experiment_id",), level=level):
            rec = {"experiment_id": g.keys["experiment_id"], "metric": metric,
                   "logging": g.logging.value}
            if g.target is not None:
                rec |= {"target": g.target.value, "effect": g.effect.value, "effect_low": g.effect.ci.low,
                        "effect_high": g.effect.ci.high, "p_one_sided": g.effect.p_value}
            if g.online is not None and g.online.effect is not None:
                rec |= {"online_effect": g.online.effect.value, "online_p": g.online.p_two_sided}
            rows.append(rec)
    return pd.DataFrame(rows)


@st.cache_resource(show_spinner=False, max_entries=16)
def _clip_tuning_base(key: str, reward: str, policy: str, discount: str, exposure: str, level: float, rule: str):
    from offeval_core.charts import clip_tuning_figure

    res = clip_tuning_result(key, reward, policy, discount, exposure, level, rule)
    rec = clip_recommendation(key, reward, policy, discount, exposure, level, rule)
    # the chart marks the shared recommendation (the rule's own choice is explained under it)
    return clip_tuning_figure(dataclasses.replace(res, recommended_clip=rec.clip)), tuple(res.table["clip"])


@st.cache_resource(show_spinner=False, max_entries=64)
def clip_tuning_chart(key: str, reward: str, policy: str, discount: str, exposure: str, level: float, rule: str,
                      clip: float):
    """The clip-tuning figure with the shared recommendation and the clip value ``clip`` marked. One
    shared, read-only figure per clip value: a slider move to a value seen before costs no figure work."""
    from offeval_core.charts import mark_clip

    fig, clips = _clip_tuning_base(key, reward, policy, discount, exposure, level, rule)
    return mark_clip(fig, clip, clips, subplots=True)


@st.cache_resource(show_spinner=False, max_entries=16)
def _sensitivity_base(key: str, rewards: tuple[str, ...], discount: str, exposure: str, policy: str,
                      metrics: tuple[str, ...], level: float, online_alpha: float, min_effect: float, side: str,
                      adjust: str):
    from offeval_core.analyses import sensitivity_figure

    res = sensitivity_result(key, rewards, discount, exposure, policy, metrics, level, online_alpha, min_effect,
                             side, adjust)
    return sensitivity_figure(res), tuple(res.table["clip"].unique())


@st.cache_resource(show_spinner=False, max_entries=64)
def sensitivity_chart(key: str, rewards: tuple[str, ...], discount: str, exposure: str, policy: str,
                      metrics: tuple[str, ...], level: float, online_alpha: float, min_effect: float, side: str,
                      clip: float, adjust: str = "none"):
    """The sensitivity figure (KDD'24 Fig. 1) with the clip value ``clip`` marked; one shared, read-only
    figure per clip value. ``adjust``: the multiple-testing correction (none / holm / bh)."""
    from offeval_core.charts import mark_clip

    fig, clips = _sensitivity_base(key, rewards, discount, exposure, policy, metrics, level, online_alpha,
                                   min_effect, side, adjust)
    return mark_clip(fig, clip, clips, subplots=True)


# ------------------------------------------------------------------------------- figures of other pages
# One shared, read-only figure per set of arguments: a rerun or a page visit with the same settings
# serialises the figure without building it again.


@st.cache_resource(show_spinner=False, max_entries=32)
def correlation_chart(key: str, reward: str, variants: tuple[tuple, ...], method: str):
    """KDD'24 Table 2 as a heatmap (``charts.correlation_figure``) of :func:`correlation_result`."""
    from offeval_core.analyses import correlation_figure

    return correlation_figure(correlation_result(key, reward, variants, method))


@st.cache_resource(show_spinner=False, max_entries=32)
def correlation_clip_chart(key: str, reward: str, model: str, method: str, clip: float):
    """Table 2 across clip values (``charts.correlation_clip_figure``), the sidebar's ``clip`` marked."""
    from offeval_core.charts import correlation_clip_figure, mark_clip

    res = correlation_clip_result(key, reward, model, method)
    return mark_clip(correlation_clip_figure(res), clip, sorted(res.table["clip"].unique()))


@st.cache_data(show_spinner=False, max_entries=32)
def correlation_html(key: str, reward: str, variants: tuple[tuple, ...], method: str) -> str:
    """The Table 2 layout (``styled_html``) of :func:`correlation_result`."""
    return correlation_result(key, reward, variants, method).styled_html()


@st.cache_resource(show_spinner=False, max_entries=64)
def correlation_series_chart(key: str, reward: str, variants: tuple[tuple, ...], method: str, experiment,
                             row_reward: str, policy: str):
    """The day-by-day drill-down figure of one row of :func:`correlation_result`."""
    from offeval_core.analyses import correlation_series_figure

    res = correlation_result(key, reward, variants, method)
    return correlation_series_figure(res.series(experiment, row_reward, policy))


@st.cache_resource(show_spinner=False, max_entries=32)
def agreement_chart(key: str, reward: str, policies: tuple[str, ...], discount: str, exposure: str, clip: float,
                    level: float, n_boot: int):
    """KDD'24 Fig. 2 (``charts.agreement_figure``) of :func:`agreement_result`."""
    from offeval_core.analyses import agreement_figure

    return agreement_figure(agreement_result(key, reward, policies, discount, exposure, clip, level, n_boot))
