"""The clip value in force and why, with the recommended clip one click away: the sidebar (every page that reads
the clip) and the Clip tuning page show the same recommendation — ``analyses.clip_tuning.recommended_clip``, the one
rule of the report and ``offeval estimate --clip auto`` — and "Use the recommended m" sets the sidebar's clip to it
(so the URL, and a link shared from it, holds it)."""

from __future__ import annotations

import math

import streamlit as st

from dashboard import data, ui
from dashboard.data.page_defaults import recommendation_args
from offeval_core.errors import OffevalError
from offeval_core.formatting import clip_text
from offeval_core.sanitize import escape_markdown

__all__ = ["clip_reason", "recommendation", "show_clip_choice", "use_clip"]


def recommendation(dataset, reward: str | None, policy: str | None, discount: str, exposure: str, level: float):
    """The recommended clip of the target ``policy`` (a ``ClipRecommendation``), or a sentence saying why there is
    none (a moments file has no per-row weights; no policy)."""
    args = recommendation_args(dataset, reward, policy, discount, exposure, level)
    if isinstance(args, str):
        return args
    try:
        rec = ui.with_progress(f"Tuning the clip of {policy} (first time only)…",
                               data.is_ready("clip recommendation", *args),
                               lambda: data.clip_recommendation(*args))
    except OffevalError as exc:
        return f"the recommendation cannot be computed here ({ui.explain(exc)[0]})"
    data.mark_ready("clip recommendation", *args)
    return rec


def clip_reason(m: float, rec, *, of: str | None = None) -> str:
    """Why the clip in force is what it is: the recommended value (and its reason), the default (unclipped), or a
    choice made in this view, next to the recommendation — of the target policy ``of`` when the page does not show
    which one.

    >>> clip_reason(math.inf, "a moments file has no per-row weights to tune the clip on")
    'm = ∞: the default, unclipped (unbiased, the noisiest); no recommendation: a moments file has no per-row weights to tune the clip on.'
    """
    whose = f" of {of}" if of else ""
    if isinstance(rec, str):
        why = "the default, unclipped (unbiased, the noisiest)" if math.isinf(m) else "set in this view"
        return f"m = {clip_text(m)}: {why}; no recommendation: {rec}."
    if m == rec.clip:
        return f"m = {clip_text(m)}: the recommended clip{whose} — {rec.reason.split(': ', 1)[-1]}"
    why = "the default, unclipped (unbiased, the noisiest)" if math.isinf(m) else "set in this view"
    return f"m = {clip_text(m)}: {why}; the recommended clip{whose} is m = {clip_text(rec.clip)}."


def use_clip(m: float) -> None:
    """Button callback: put ``m`` into the sidebar's clip slider (the URL follows)."""
    st.session_state["w_clip"] = m


def show_clip_choice(where, m: float, rec, *, key: str, of: str | None = None) -> None:
    """Under a clip control: which clip is in force and why, and a "Use the recommended m" button when the clip in
    force is not the recommended one (of the target policy ``of`` when the page does not show it)."""
    where.caption(escape_markdown(clip_reason(m, rec, of=of)))
    if not isinstance(rec, str) and rec.clip != m:
        where.button(f"Use the recommended m = {clip_text(rec.clip)}", key=key, on_click=use_clip, args=(rec.clip,),
                     icon=":material/content_cut:", help=escape_markdown(rec.reason), width="stretch")
