"""Cached analysis results of the dashboard: each a thin cached call of an :mod:`offeval_core.analyses`
function on the cached moments of :mod:`dashboard.data.dataset_moments`, keyed by the dataset key and settings.
Which moments each analysis needs comes from the core's planner (:func:`offeval_core.analyses.plan.plan_moments`),
the same one the report uses.
"""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd
import streamlit as st

from dashboard.data.notes import keeps_notes
from dashboard.data.dataset_moments import importance_moments, moments_many, propensity_moments, target_moments
from dashboard.data.datasets import load, needs_raw_logs_text, parse_sim_spec
from offeval_core.analyses.plan import estimator_family, plan_moments
from offeval_core.defaults import LEVEL
from offeval_core.engine import DEFAULT_CLIPS, Moments
from offeval_core.errors import InputError, NeedsRawLogs
from offeval_core.estimators import subset
from offeval_core.importance.weights import PROPENSITY

__all__ = [
    "CANDIDATE_METRICS", "agreement_chart", "agreement_result", "candidate_policies", "candidates_chart",
    "candidates_result", "clip_recommendation", "clip_tuning_chart", "clip_tuning_result",
    "correlation_chart", "correlation_clip_chart", "correlation_clip_result", "correlation_html",
    "correlation_summary_chart",
    "correlation_result", "correlation_series_chart", "decision_result", "diagnosis", "estimates_at", "estimator_family", "online_arms", "planned_moments", "policy_moments", "sensitivity_chart", "sensitivity_result",
    "simulated_topics", "tuned_estimator",
]


# ------------------------------------------------------------------------------------------ diagnosis
@keeps_notes(st.cache_data(show_spinner=False, max_entries=8))
def diagnosis(key: str, reward: str, policy: str | None, discount: str, alpha: float = 0.05, level: float = LEVEL):
    """The assumption tests and estimator verdicts of ``offeval diagnose`` on a dataset (the Which-estimator
    page and the Method checklist share it)."""
    from offeval_core.diagnose import diagnose

    return diagnose(load(key).logs, reward=reward, policy=policy, discount=discount, alpha=alpha, level=level,
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
    whole clip grid, merged; of target ``policy`` (:func:`~dashboard.data.dataset_moments.target_moments`; None: every
    policy). The importance-sampling family is reduced per target ``policy`` (exposure weights)
    or, with D = D0 = ``propensity``, over every propensity policy (the logged propensities)."""
    from offeval_core.analyses import merge_moments

    parts = [(propensity_moments(key, reward) if p.discount == PROPENSITY
              else importance_moments(key, reward, policy, p.discount, p.exposure)) if p.family == "importance"
             else target_moments(key, reward, p.discount, p.exposure, policy) for p in plan_moments(variants)]
    if not parts:
        parts = [target_moments(key, reward, "pbm", "pbm", policy)]
    return parts[0] if len(parts) == 1 else merge_moments(*parts)


def policy_moments(key: str, reward: str, discount: str, exposure: str, policy: str | None) -> Moments:
    """The cached moments target ``policy``'s estimators read: the DCG reduce of (reward, D, D0)
    (:func:`~dashboard.data.dataset_moments.target_moments`), or with D = D0 = ``propensity`` the importance reduce with
    the logged propensities."""
    if discount == PROPENSITY:
        return propensity_moments(key, reward)
    return target_moments(key, reward, discount, exposure, policy)


def tuned_estimator(discount: str) -> str:
    """The estimator whose clip is tuned: DCG for a rank policy, CIS (cap c = m) for a propensity policy."""
    return "cis" if discount == PROPENSITY else "dcg"


@keeps_notes(st.cache_data(show_spinner=False, max_entries=64))
def sensitivity_result(key: str, rewards: tuple[str, ...], discount: str, exposure: str, policy: str,
                       metrics: tuple[str, ...], level: float, online_alpha: float, min_effect: float = 0.0,
                       side: str = "improvements", adjust: str = "none"):
    """KDD'24 Fig. 1 by the paper's protocol on the cached moments: the online improvements (or, with
    ``side="negatives"``, the separate view of online negatives) at p < ``online_alpha`` and |effect| >
    ``min_effect``. The page and the background preparation both call this with the page's arguments."""
    from offeval_core.analyses import sensitivity

    if discount == PROPENSITY:
        from offeval_core.analyses import merge_moments

        parts = [propensity_moments(key, r) for r in dict.fromkeys(rewards)]
        m = parts[0] if len(parts) == 1 else merge_moments(*parts)
    else:
        m = moments_many(key, [(r, discount, exposure) for r in rewards], policy)
    return sensitivity(m, policy=policy, metrics=metrics, discount=discount, exposure=exposure, level=level,
                       online_alpha=online_alpha, min_effect=min_effect, side=side, rewards=rewards, adjust=adjust)


@keeps_notes(st.cache_data(show_spinner=False, max_entries=64))
def correlation_result(key: str, reward: str, variants: tuple[tuple, ...], method: str, policy: str = "treatment"):
    """KDD'24 Table 2 (``analyses.offline_online_correlation``) with Rₜ = ``policy``, the target policy taken
    to have served the treatment arm."""
    from offeval_core.analyses import Variant, offline_online_correlation
    from offeval_core.logs import LOGGING_POLICY

    m = planned_moments(key, reward, policy, variants)
    return offline_online_correlation(m, variants=[Variant(*v) for v in variants], method=method,
                                      rewards=(reward,), policies=(LOGGING_POLICY, policy))


@keeps_notes(st.cache_data(show_spinner=False, max_entries=32))
def correlation_clip_result(key: str, reward: str, model: str, method: str, policy: str = "treatment"):
    """KDD'24 Table 2 across clip values (``analyses.correlation_by_clip``): DCG (``model``, ·) vs DCG (log2, ·)
    of the target policy ``policy``, pooled over experiment-days, at every clip of the grid (the two cached
    reduces)."""
    from offeval_core.analyses import correlation_by_clip

    variants = [("dcg", d, d, c) for d in (model, "log2") for c in DEFAULT_CLIPS]
    return correlation_by_clip(planned_moments(key, reward, policy, variants), reward=reward, model=model,
                               method=method, policy=policy)


@keeps_notes(st.cache_data(show_spinner=False, max_entries=32))
def agreement_result(key: str, reward: str, policies: tuple[str, ...], discount: str, exposure: str,
                     clip: float, level: float, n_boot: int):
    from offeval_core.analyses import dcg_vs_ndcg

    if load(key).is_moments:
        raise NeedsRawLogs(needs_raw_logs_text("The DCG vs nDCG bootstrap over sessions"))
    return dcg_vs_ndcg(load(key).logs, reward=reward, policies=policies, discount=discount, exposure=exposure,
                       clip=clip, n_boot=n_boot, rng=0, level=level)


@keeps_notes(st.cache_data(show_spinner=False, max_entries=64))
def decision_result(key: str, reward: str, policy: str, estimators: tuple[tuple, ...], level: float,
                    relative: bool, adjust: str = "none"):
    from offeval_core.analyses import Variant, decision_boxes

    m = planned_moments(key, reward, policy, estimators)
    return decision_boxes(m, estimators=[Variant(*e) for e in estimators], policy=policy, level=level,
                          relative=relative, rewards=(reward,), adjust=adjust)


@keeps_notes(st.cache_data(show_spinner=False, max_entries=32))
def clip_tuning_result(key: str, reward: str, policy: str, discount: str, exposure: str, level: float,
                       rule: str):
    from offeval_core.analyses import clip_tuning

    if load(key).is_moments:
        raise NeedsRawLogs(needs_raw_logs_text("The clip-tuning chart (bias bound, ESS and clipped share come "
                                               "from the per-row weights)"))
    m = policy_moments(key, reward, discount, exposure, policy)
    return clip_tuning(load(key).logs, reward=reward, policy=policy, discount=discount, exposure=exposure,
                       clips=DEFAULT_CLIPS, level=level, rule=rule, moments=m)


@keeps_notes(st.cache_data(show_spinner=False, max_entries=32))
def clip_recommendation(key: str, reward: str, policy: str, discount: str, exposure: str, level: float, rule: str):
    """The one clip recommendation (``analyses.clip_tuning.recommend_clip``, as in the report and
    ``offeval estimate --clip auto``) for the clip-tuning result of these settings: the rule's choice, never a
    clip whose bias bound exceeds the mean size of the unclipped offline effect without saying so."""
    return clip_tuning_result(key, reward, policy, discount, exposure, level, rule).recommendation


@keeps_notes(st.cache_data(show_spinner=False, max_entries=128))
def estimates_at(key: str, reward: str, policy: str | None, discount: str, exposure: str, clip: float,
                 level: float, metrics: tuple[str, ...]) -> pd.DataFrame:
    """Per experiment and metric: logging and target estimates (the target's with its CI), the paired effect and
    the online arms' means and effect at one clip value, read from the cached moments
    (``estimators.summarize_groups``; D = D0 = ``propensity``: the importance moments of the logged propensities)."""
    from offeval_core.estimators import summarize_groups

    # the cached moments restricted to one clip value and two policies: every lookup below is then cheap
    m = subset(policy_moments(key, reward, discount, exposure, policy), policies=(policy,) if policy else (), clips=(clip,))
    rows = []
    for metric in metrics:
        for g in summarize_groups(m, reward=reward, policy=policy, metric=metric, discount=discount,
                                  exposure=exposure, clip=clip, by=("experiment_id",), level=level):
            rec = {"experiment_id": g.keys["experiment_id"], "metric": metric,
                   "logging": g.logging.value}
            if g.target is not None:
                rec |= {"target": g.target.value, "target_low": g.target.ci.low, "target_high": g.target.ci.high,
                        "effect": g.effect.value, "effect_low": g.effect.ci.low,
                        "effect_high": g.effect.ci.high, "p_one_sided": g.effect.p_value}
            if g.online is not None and g.online.effect is not None:
                rec |= {"online_control": g.online.control.value, "online_treatment": g.online.treatment.value,
                        "online_effect": g.online.effect.value, "online_p": g.online.p_two_sided}
            rows.append(rec)
    return pd.DataFrame(rows)


@keeps_notes(st.cache_data(show_spinner=False, max_entries=64))
def online_arms(key: str, reward: str, discount: str, exposure: str, level: float, policy: str | None = None):
    """The online outcome pooled over every A/B test (``estimators.online_results`` with no grouping): each arm's
    mean reward per session with its CI and the treatment − control effect; None without a treatment arm. Read
    from the moments target ``policy``'s page reads (the online part is the same in all)."""
    from offeval_core.estimators import online_results

    res = online_results(policy_moments(key, reward, discount, exposure, policy), reward=reward,
                         level=level).get(())
    return res if res is not None and res.treatment is not None else None


CANDIDATE_METRICS = {"rank": ("dcg", "pndcg", "ndcg"), "propensity": ("cis", "ncis", "snips", "is")}
"""The estimators the Candidates page offers, by policy kind (the first is the default): DCG (KDD'24 Eq. 9) for
rank policies, CIS (Gilotte Sec. 4.2) for propensity policies — the estimators whose clip the recommendation tunes."""


def candidate_policies(key: str) -> tuple[str, ...]:
    """The candidates of a dataset: every target policy except those that are the logging policy."""
    t = load(key).targets
    return tuple(p for p in t.all if p not in t.logging)


@keeps_notes(st.cache_data(show_spinner=False, max_entries=32))
def candidates_result(key: str, reward: str, discount: str, exposure: str, level: float, adjust: str,
                      clip_rule: str, clip: float, rank_metric: str = "dcg", propensity_metric: str = "cis"):
    """Every candidate vs the logging policy (``analyses.compare_candidates``) at one clip: with ``clip_rule``
    "recommended" the least clipped of the candidates' own recommendations (``analyses.common_clip`` over
    :func:`clip_recommendation`, the rule every page uses), with "sidebar" the sidebar's ``clip``. A rank
    candidate is estimated by ``rank_metric`` with (D, D0), a propensity candidate by ``propensity_metric``."""
    from offeval_core.analyses import Variant, common_clip, compare_candidates
    from offeval_core.formatting import clip_text

    ds = load(key)
    cands = candidate_policies(key)
    if not cands:
        raise InputError(f"{ds.label} has no candidate policy besides the logging policy "
                         f"({', '.join(ds.targets.all) or 'no target policy'}): add one rank__<policy> or "
                         "target_propensity__<policy> column per candidate")
    models = {p: (PROPENSITY, PROPENSITY) if ds.targets.kind(p) == "propensity" else (discount, exposure)
              for p in cands}
    if clip_rule == "recommended" and not ds.is_moments:
        if any(d != PROPENSITY for d, _ in models.values()):  # one reduce over every policy, not one per candidate
            target_moments(key, reward, discount, exposure, None)
        recs = {p: clip_recommendation(key, reward, p, *models[p], level, "slope").clip for p in cands}
        m, reason = common_clip(recs)
    elif clip_rule == "recommended":
        m, reason = clip, (f"m = {clip_text(clip)}: the sidebar's clip value (a moments file has no per-row "
                           "weights to tune the clip on)")
    else:
        m, reason = clip, f"m = {clip_text(clip)}: the sidebar's clip value"
    pairs = [(p, Variant(propensity_metric if models[p][0] == PROPENSITY else rank_metric, *models[p], m))
             for p in cands]
    mom = planned_moments(key, reward, None, [v for _, v in pairs])
    return compare_candidates(mom, candidates=pairs, reward=reward, level=level, adjust=adjust, clip_reason=reason)


@keeps_notes(st.cache_resource(show_spinner=False, max_entries=32))
def candidates_chart(key: str, reward: str, discount: str, exposure: str, level: float, adjust: str, clip_rule: str,
                     clip: float, rank_metric: str = "dcg", propensity_metric: str = "cis"):
    """The forest plot (``forest.candidates_figure``) of :func:`candidates_result`; shared and read-only."""
    from offeval_core.analyses import candidates_figure

    return candidates_figure(candidates_result(key, reward, discount, exposure, level, adjust, clip_rule, clip,
                                               rank_metric, propensity_metric))


@keeps_notes(st.cache_resource(show_spinner=False, max_entries=16))
def _clip_tuning_base(key: str, reward: str, policy: str, discount: str, exposure: str, level: float, rule: str):
    from offeval_core.charts import clip_tuning_figure

    res = clip_tuning_result(key, reward, policy, discount, exposure, level, rule)
    # the chart marks the shared recommendation (the rule's own choice is explained under it)
    return clip_tuning_figure(res), tuple(res.table["clip"])


@keeps_notes(st.cache_resource(show_spinner=False, max_entries=64))
def clip_tuning_chart(key: str, reward: str, policy: str, discount: str, exposure: str, level: float, rule: str,
                      clip: float):
    """The clip-tuning figure with the shared recommendation and the clip value ``clip`` marked. One
    shared, read-only figure per clip value: a slider move to a value seen before costs no figure work."""
    from offeval_core.charts import mark_clip

    fig, clips = _clip_tuning_base(key, reward, policy, discount, exposure, level, rule)
    return mark_clip(fig, clip, clips, subplots=True)


@keeps_notes(st.cache_resource(show_spinner=False, max_entries=16))
def _sensitivity_base(key: str, rewards: tuple[str, ...], discount: str, exposure: str, policy: str,
                      metrics: tuple[str, ...], level: float, online_alpha: float, min_effect: float, side: str,
                      adjust: str):
    from offeval_core.analyses import sensitivity_figure

    res = sensitivity_result(key, rewards, discount, exposure, policy, metrics, level, online_alpha, min_effect,
                             side, adjust)
    return sensitivity_figure(res), tuple(res.table["clip"].unique())


@keeps_notes(st.cache_resource(show_spinner=False, max_entries=64))
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


@keeps_notes(st.cache_resource(show_spinner=False, max_entries=32))
def correlation_chart(key: str, reward: str, variants: tuple[tuple, ...], method: str, policy: str = "treatment"):
    """KDD'24 Table 2 as a heatmap (``charts.correlation_figure``) of :func:`correlation_result`."""
    from offeval_core.analyses import correlation_figure

    return correlation_figure(correlation_result(key, reward, variants, method, policy))


@keeps_notes(st.cache_resource(show_spinner=False, max_entries=32))
def correlation_summary_chart(key: str, reward: str, variants: tuple[tuple, ...], method: str,
                              policy: str = "treatment"):
    """KDD'24 Table 2 at projector size (``correlation_summary.correlation_summary_figure``): one row per variant,
    one dot per (experiment, policy) cell, of :func:`correlation_result`."""
    from offeval_core.correlation_summary import correlation_summary_figure

    return correlation_summary_figure(correlation_result(key, reward, variants, method, policy))


@keeps_notes(st.cache_resource(show_spinner=False, max_entries=32))
def correlation_clip_chart(key: str, reward: str, model: str, method: str, clip: float, policy: str = "treatment"):
    """Table 2 across clip values (``charts.correlation_clip_figure``), the sidebar's ``clip`` marked."""
    from offeval_core.charts import correlation_clip_figure, mark_clip

    res = correlation_clip_result(key, reward, model, method, policy)
    return mark_clip(correlation_clip_figure(res), clip, sorted(res.table["clip"].unique()))


@keeps_notes(st.cache_data(show_spinner=False, max_entries=32))
def correlation_html(key: str, reward: str, variants: tuple[tuple, ...], method: str, policy: str = "treatment") -> str:
    """The Table 2 layout (``styled_html``) of :func:`correlation_result`."""
    return correlation_result(key, reward, variants, method, policy).styled_html()


@keeps_notes(st.cache_resource(show_spinner=False, max_entries=64))
def correlation_series_chart(key: str, reward: str, variants: tuple[tuple, ...], method: str, experiment,
                             row_reward: str, row_policy: str, policy: str = "treatment"):
    """The day-by-day drill-down figure of one row (``row_policy``: logging or the target) of
    :func:`correlation_result` with target ``policy``."""
    from offeval_core.analyses import correlation_series_figure

    res = correlation_result(key, reward, variants, method, policy)
    return correlation_series_figure(res.series(experiment, row_reward, row_policy))


@keeps_notes(st.cache_resource(show_spinner=False, max_entries=32))
def agreement_chart(key: str, reward: str, policies: tuple[str, ...], discount: str, exposure: str, clip: float,
                    level: float, n_boot: int):
    """KDD'24 Fig. 2 (``charts.agreement_figure``) of :func:`agreement_result`."""
    from offeval_core.analyses import agreement_figure

    return agreement_figure(agreement_result(key, reward, policies, discount, exposure, clip, level, n_boot))
