"""One self-contained HTML report with all five analyses (plotly.js embedded inline; opens offline).

Sections: settings, data summary (with the learnt position-bias curve), sensitivity vs clipping (KDD'24
Fig. 1), offline-online correlation (KDD'24 Table 2), DCG vs nDCG (KDD'24 App. A, Table 1), decision boxes
(Gilotte Fig. 4 / Table 3) and clip tuning (Gilotte Fig. 2). An analysis the logs cannot support (e.g. no
treatment arm) is replaced by a note saying why. The input can also be a moments file (``offeval reduce``;
:func:`offeval_core.moments_io.read_moments`): the sections that need only moments (sensitivity,
correlation, decision boxes, the data summary) are computed from it, the others (DCG vs nDCG over logged
policies, which resamples sessions; clip tuning, which reads per-row weights; the learnt position-bias
curve) are replaced by a notice. With ``heldout=True`` a sixth section adds KDD'24 App. A on
held-out data: DCG@k vs nDCG@k over the simulated model zoo (:func:`offeval_core.heldout.zoo_agreement`).
This module checks the options, plans and runs the reduces and assembles the page; the sections themselves
are in :mod:`offeval_core.report_sections`.
"""

from __future__ import annotations

import datetime as _dt
import html
import math
from collections.abc import Callable, Sequence

from offeval_core.analyses import merge_moments
from offeval_core.analyses._common import clip_text
from offeval_core.analyses.plan import PlannedReduce, plan_moments, report_variants
from offeval_core.defaults import LEVEL, ONLINE_ALPHA
from offeval_core.discounts import has_cutoff, parse_discount
from offeval_core.engine import DEFAULT_CLIPS, Grid, Moments, reduce
from offeval_core.errors import InputError, SpecError, UnknownName, WrongType
from offeval_core.estimators import require, subset
from offeval_core.importance.weights import PROPENSITY
from offeval_core.logs import Logs, summarize
from offeval_core.multiple import LABELS as ADJUST_LABELS
from offeval_core.multiple import METHODS as ADJUST_METHODS
from offeval_core.policies import target_policies
from offeval_core.report_html import HtmlDocument
from offeval_core.report_sections import (
    STEPS,
    ReportSettings,
    analysis_sections,
    data_section,
    moments_data_section,
)
from offeval_core.validation import check_choice, check_clips, check_level

__all__ = [
    "STEPS", "ReportSettings", "build_report", "write_report",
]


def build_report(logs: Logs | Moments, *, rewards: Sequence[str] | None = None, discount: str = "pbm",
                 clips: Sequence[float] = DEFAULT_CLIPS, policy: str | None = None, sensitivity_level: float = LEVEL,
                 online_alpha: float = ONLINE_ALPHA, online_min_effect: float = 0.0, decision_level: float = LEVEL,
                 q_clip: float = math.inf,
                 adjust: str = "none", n_boot: int = 500, seed: int = 0, heldout: bool = False, heldout_grid: str = "small",
                 heldout_k: int = 100, heldout_cache_dir=None,
                 progress: Callable[[str], None] | None = None, moments_meta: dict | None = None) -> str:
    """Compute every analysis on ``logs`` and return the report as one HTML string.

    With ``heldout`` the report adds KDD'24 App. A on the simulated model zoo (``heldout_grid`` "small" =
    25 models, about 10 s; "default" = 192 models as in the paper), DCG@``heldout_k`` vs nDCG@``heldout_k``;
    ``heldout_cache_dir`` saves the trained zoo on disk for later reports.

    ``adjust`` ("none", "holm" or "bh") takes the sensitivity detections and the decision boxes on
    multiplicity-adjusted p-values (:mod:`offeval_core.multiple`), as the dashboard's pages do.

    ``policy`` is the target policy taken to have served the treatment arm: any rank policy (``rank__<policy>``,
    DCG family) or propensity policy (``target_propensity__<policy>``, importance weights π_t / π_p with the cap c
    as m, Gilotte Sec. 3-5); None = the default target (:func:`offeval_core.policies.target_policies`, never the
    logging policy while another exists). A policy the logs do not hold is an UnknownName naming the ones they do.

    ``progress`` is called with the name of each step as it starts (the CLI drives a progress bar with it).

    ``logs`` may also be the :class:`~offeval_core.engine.Moments` of a moments file (``read_moments``):
    then the sections that need the rows are replaced by a notice, the clip grid is the part of ``clips``
    the file holds, and ``moments_meta`` (``read_metadata``) fills the data section.
    """
    _check_discount(discount)
    if isinstance(logs, Moments):
        return _build_from_moments(logs, rewards=rewards, discount=discount, clips=clips, policy=policy,
                                   sensitivity_level=sensitivity_level, online_alpha=online_alpha,
                                   online_min_effect=online_min_effect,
                                   decision_level=decision_level, q_clip=q_clip, adjust=adjust, n_boot=n_boot,
                                   seed=seed, heldout=heldout, heldout_grid=heldout_grid, heldout_k=heldout_k,
                                   heldout_cache_dir=heldout_cache_dir, progress=progress,
                                   meta=moments_meta or {})
    if not isinstance(logs, Logs):
        raise WrongType(f"logs must be offeval_core.logs.Logs (from read_logs) or Moments (from read_moments), got {type(logs).__name__}")
    rewards = tuple(rewards) if rewards else logs.rewards
    for r in rewards:
        logs.check_reward(r)
    clips = check_clips(clips)
    check_level(sensitivity_level)
    check_level(decision_level)
    check_choice(adjust, tuple(ADJUST_METHODS), name="adjust")
    parse_discount(discount, logs=logs)
    q_clip = float(q_clip)
    _check_heldout(heldout, heldout_grid, heldout_k)
    if q_clip not in clips:
        clips = check_clips((*clips, q_clip))
    targets = target_policies(logs)
    policy, kind = _target(targets, policy)
    step = progress or (lambda _name: None)
    st = ReportSettings(rewards=rewards, discount=discount, clips=clips, policy=policy or "none", kind=kind,
                        sensitivity_level=sensitivity_level, online_alpha=online_alpha,
                        online_min_effect=online_min_effect, decision_level=decision_level, q_clip=q_clip,
                        adjust=adjust, n_boot=n_boot, seed=seed,
                        heldout=heldout, heldout_grid=heldout_grid, heldout_k=heldout_k)
    has_target = kind is not None
    ab = has_target and logs.has_arms
    doc = HtmlDocument()

    step(STEPS[0])
    summary = summarize(logs)
    data_section(doc, logs, summary, discount)

    step(STEPS[1])
    moments = None
    if has_target:
        parts = []
        planned_reduces = (plan_moments(report_variants(discount, clips, q_clip)) if kind == "rank"
                           else (_PROPENSITY_REDUCE,))
        for i, planned in enumerate(planned_reduces):
            if i == 1:
                step(STEPS[2])
            parts.append(_reduce_planned(logs, planned, rewards=rewards, policy=policy, clips=clips))
        if len(parts) == 1:
            step(STEPS[2])
        moments = parts[0] if len(parts) == 1 else merge_moments(*parts)
    else:
        step(STEPS[2])
        st.notes.append("the logs hold no target policy (no rank__<policy> column, and no "
                        "target_propensity__<policy> column next to a logging_propensity column): the analyses "
                        "that need one (sensitivity, correlation of Rₜ, decision boxes, clip tuning) are skipped")

    analysis_sections(doc, st, moments=moments, logs=logs, ab=ab, has_target=has_target, step=step,
              heldout_cache_dir=heldout_cache_dir)
    step(STEPS[9])
    return _page(doc, logs.source, st)


_PROPENSITY_REDUCE = PlannedReduce("importance", PROPENSITY, PROPENSITY, ())
"""The one reduce of a propensity policy: the importance family with the logged propensities π_t / π_p over the
report's clip grid (the cap c plays the role of m), max-capped, per session, as on the dashboard's pages."""


def _check_discount(discount) -> None:
    """The report's discount is D and D0 at once (D = D0): a cut-off ``@n`` cannot be an exposure model."""
    if isinstance(discount, str) and has_cutoff(discount):
        raise SpecError(f"the report uses --discount as both the discount D and the exposure model D0 (D = D0); "
                        f"{discount.strip()!r} has a cut-off, which gives every rank after it an exposure of 0, so it "
                        "cannot be an exposure model: use it without '@n', or compare a cut-off D with "
                        "`offeval estimate --discount … --exposure …` or the dashboard's Correlation page")


def _target(targets, policy: str | None) -> tuple[str | None, str | None]:
    """(the target policy, its kind) of the report: ``policy`` or the default target; (None, None) when the data
    hold no target policy and none was asked for."""
    if policy is None:
        policy = targets.default
        if policy is None:
            return None, None
    if policy not in targets.all:
        held = ", ".join(targets.all) or "none"
        raise UnknownName(f"target policy {policy!r} is not in the logs (a rank__{policy} or target_propensity__"
                         f"{policy} column); their target policies: {held}")
    return policy, targets.kind(policy)


def _reduce_planned(logs: Logs, planned: PlannedReduce, *, rewards, policy: str, clips=()) -> Moments:
    """The moments of one planned reduce (:func:`offeval_core.analyses.plan.plan_moments`) for the target."""
    if planned.discount == PROPENSITY:
        from offeval_core.importance import reduce_importance

        return reduce_importance(logs, rewards=rewards, policies=(policy,), clips=clips, weights="propensity",
                                 cappings=("max",), scales=("session",))
    if planned.family == "importance":
        from offeval_core.importance import reduce_importance

        return reduce_importance(logs, rewards=rewards, policies=(policy,), clips=planned.clips,
                                 discount=planned.discount, exposure=planned.exposure, weights="exposure")
    return reduce(logs, Grid(rewards=rewards, policies=(policy,), discounts=(planned.discount,),
                             exposures=(planned.exposure,), clips=planned.clips))


def _check_heldout(heldout, heldout_grid, heldout_k) -> None:
    if not isinstance(heldout, bool):
        raise WrongType(f"heldout must be True or False, got {heldout!r}")
    if heldout:
        check_choice(heldout_grid, ("small", "default"), name="heldout_grid")
        if isinstance(heldout_k, bool) or not isinstance(heldout_k, int) or not 1 <= heldout_k <= 100:
            raise InputError(f"heldout_k must be an integer cut-off from 1 to 100, got {heldout_k!r}")


def _build_from_moments(m: Moments, *, rewards, discount, clips, policy, sensitivity_level, online_alpha,
                        online_min_effect,
                        decision_level, q_clip, adjust, n_boot, seed, heldout, heldout_grid, heldout_k, heldout_cache_dir,
                        progress, meta: dict) -> str:
    """:func:`build_report` on the moments of a moments file: no section reads rows."""
    g = m.grid
    rewards = tuple(rewards) if rewards else g.rewards
    require(m, rewards=rewards, of=" (in the moments file)")
    check_level(sensitivity_level)
    check_level(decision_level)
    check_choice(adjust, tuple(ADJUST_METHODS), name="adjust")
    require(m, discounts=(discount,), exposures=(discount,), of=" (D = D0, in the moments file)")
    q_clip = float(q_clip)
    require(m, clips=(q_clip,), of=" (q_clip, in the moments file)")
    _check_heldout(heldout, heldout_grid, heldout_k)
    clips = tuple(c for c in check_clips((*clips, q_clip)) if c in g.clips)
    if policy is None:
        policy = target_policies(m).default or "treatment"
    step = progress or (lambda _name: None)
    st = ReportSettings(rewards=rewards, discount=discount, clips=clips, policy=policy,
                        sensitivity_level=sensitivity_level, online_alpha=online_alpha,
                        online_min_effect=online_min_effect, decision_level=decision_level, q_clip=q_clip,
                        adjust=adjust, n_boot=n_boot, seed=seed,
                        heldout=heldout, heldout_grid=heldout_grid, heldout_k=heldout_k, input_kind="moments")
    moments = subset(m, rewards=rewards, clips=clips)
    on = moments.online
    has_target = policy in g.policies
    ab = has_target and "arm" in on and set(on["arm"]) >= {"control", "treatment"}
    if not has_target:
        st.notes.append(f"the moments file has no target policy {policy!r} (it holds {', '.join(g.policies)}): "
                        "the analyses that need it are skipped")
    doc = HtmlDocument()
    step(STEPS[0])
    moments_data_section(doc, moments, meta)
    step(STEPS[1])
    step(STEPS[2])
    analysis_sections(doc, st, moments=moments if has_target else None, logs=None, ab=ab, has_target=has_target,
              step=step, heldout_cache_dir=heldout_cache_dir)
    step(STEPS[9])
    source = (meta.get("settings") or {}).get("logs") or m.source
    return _page(doc, f"moments file (offeval reduce) of {source}", st)


def _page(doc: HtmlDocument, source: str, st: ReportSettings) -> str:
    settings = {"input": ("moments file: sections that need the raw logs (bootstraps, per-row weights) are "
                          "replaced by a notice" if st.input_kind == "moments" else "logs"),
                "logs": source, "rewards": ", ".join(st.rewards), "target policy": (f"{st.policy} ({st.kind} policy; taken to have served the treatment arm)"
                                                     if st.kind else "none"),
                "discount = exposure model": st.discount, "clip grid": ", ".join(clip_text(c) for c in st.clips),
                "Q̂ clip (correlation, DCG vs nDCG, decisions)": clip_text(st.q_clip),
                "sensitivity CI level": f"{st.sensitivity_level:.0%}",
                "online settings (Welch, two-sided)": f"p < {st.online_alpha:g} and effect > "
                                                      f"{st.online_min_effect:g} (negatives: < "
                                                      f"{-st.online_min_effect:g})",
                "decision CI level": f"{st.decision_level:.0%}",
                "multiple testing (sensitivity, decisions)": ADJUST_LABELS[st.adjust],
                "bootstrap resamples / seed": f"{st.n_boot} / {st.seed}",
                "offline estimates on": "control-arm sessions (logging policy)",
                "nDCG when iDCG = 0": "counts 0",
                "held-out section (App. A)": (f"simulated zoo, {st.heldout_grid} grid, k = {st.heldout_k}"
                                              if st.heldout else "off (--heldout)"),
                "generated": _dt.datetime.now().strftime("%Y-%m-%d %H:%M")}
    rows = "".join(f"<tr><th>{html.escape(k)}</th><td>{html.escape(str(v))}</td></tr>" for k, v in settings.items())
    notes = "".join(f'<p class="note">{html.escape(n)}</p>' for n in st.notes)
    nav = "".join(f'<a href="#{a}">{t}</a>' for a, t in (
        ("settings", "Settings"), ("data", "Data"), ("sensitivity", "Sensitivity"), ("correlation", "Correlation"),
        ("dcg-ndcg", "DCG vs nDCG"), ("decisions", "Decisions"), ("clip-tuning", "Clip tuning"))
        + ((("heldout", "Held-out (App. A)"),) if st.heldout else ()))
    return doc.page(title="Offline evaluation report", nav=nav,
                    head=f"<h2 id='settings'>Settings</h2><table class='tbl'>{rows}</table>{notes}")


def write_report(logs: Logs | Moments, out, **kwargs) -> dict:
    """Build the report and write it to ``out``; returns {"path", "bytes", "figures"}."""
    from pathlib import Path

    from offeval_core.safe_io import atomic_write_text

    text = build_report(logs, **kwargs)
    path = atomic_write_text(Path(out), text)  # temp file + rename: a failed write keeps the old report
    return {"path": str(path), "bytes": path.stat().st_size, "figures": text.count('class="fig"')}
