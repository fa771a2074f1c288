"""What every page uses: the current context (:mod:`dashboard.context`), guarded sections with specific error
messages, progress on long work, page controls and presentation-mode styling; charts, tables and takeaways
come from :mod:`dashboard.render` and are re-exported here, so pages write ``ui.show_figure(...)``.

Pages read widgets and render; every number comes from :mod:`offeval_core` through :mod:`dashboard.data`.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Callable, Iterator, Sequence
from typing import NoReturn

import streamlit as st

from dashboard import data
from dashboard.context import CTX_KEY, Context, ctx
from dashboard.pages import page
from dashboard.render import policy_headline, raw_logs_notice, show_figure, show_table, takeaway
from offeval_core import errors
from offeval_core.errors import OffevalError
from offeval_core.formatting import clip_text
from offeval_core.logs import LogValidationError
from offeval_core.sanitize import escape_markdown

__all__ = [
    "BASE_CSS", "CTX_KEY", "PRESENT_CSS", "Context", "PageEnd", "chosen_or_default", "clip_label", "controls", "ctx", "end_page", "explain",
    "get_moments",
    "guarded", "init_control", "inject_css", "links", "md_escape", "needs", "page_default", "policy_headline", "raw_logs_notice", "show_error",
    "show_figure", "show_notes", "show_table",
    "takeaway", "with_progress",
]

# ------------------------------------------------------------------------------------------ errors

_FIXES_BY_TYPE = (
    (errors.UnreadableInput, "Upload a comma-separated CSV with a header row, or a Parquet file."),
    (errors.LimitExceeded, "The file is over a size limit of this server: upload a sample, or reduce it to moments "
                           "with `offeval reduce` and load the moments file."),
    (errors.SpecError, "Use a discount spec like 'pbm', 'log2', 'reciprocal', 'exponential:0.9' (optionally '@n', "
                       "e.g. 'log2@10'), a clip ≥ 1 or 'inf', and an estimator key like 'ncis-zero@impression'."),
    (errors.UnknownName, "Pick a name the loaded data has in the sidebar (rewards are numeric columns; target "
                         "policies come from the policy columns of the column mapping)."),
    (errors.NeedsAnswers, "Answer in the column mapping on the Data page and apply it: nothing is computed until "
                          "then."),
    (errors.NeedsArms, "These logs have no treatment arm; add an 'arm' column with 'control' and 'treatment' "
                       "sessions to compare offline with online results."),
)
"""How to fix an error, by its type (the first matching type wins)."""

_FIXES_BY_KIND = {
    "reward": "Reward columns (e.g. click) must hold finite numbers ≥ 0.",
    "rank": "Ranks are 1-based positions: 1 = top of the feed, no 0, no text.",
    "duplicate": "Each (session_id, rank) pair must appear once: remove repeated rows or fix the ranks.",
    "arm": "Enter which label is control and which treatment under Arm labels in the column mapping (e.g. "
           "control=A,treatment=B), or none if the column is not the arm.",
}
"""How to fix a problem line of invalid logs, by its :class:`~offeval_core.errors.Problem` kind."""


def explain(exc: BaseException) -> tuple[str, str]:
    """(what is wrong, how to fix it) for an exception raised by the core: the hint is chosen by the error's
    type, the problem lines' kinds and the missing schema columns, never by the message's wording."""
    if isinstance(exc, LogValidationError):
        what = f"{exc.source}: {len(exc.problems)} problem(s) in the logs"
    else:
        what = str(exc).strip() or type(exc).__name__
    fixes = [f for kind, f in _FIXES_BY_TYPE if isinstance(exc, kind)][:1]
    if getattr(exc, "unmapped", ()):  # required columns missing: the browser maps them in the form
        names = " and ".join(f"'{c}'" for c in exc.unmapped)
        fixes.append(f"Pick your file's column for {names} in the column-mapping form below.")
    fixes += [_FIXES_BY_KIND[k] for p in getattr(exc, "problems", ()) if (k := getattr(p, "kind", "")) in _FIXES_BY_KIND]
    return what, " ".join(dict.fromkeys(fixes))


def show_error(exc: BaseException, *, context: str = "") -> None:
    """``st.error`` with what is wrong (names from the data escaped, so they show as text) and how to fix it;
    never a traceback."""
    what, fix = explain(exc)
    what = escape_markdown(what)
    lines = [f"**{context}:** {what}" if context else what]
    if isinstance(exc, LogValidationError):
        lines += [f"- {escape_markdown(p)}" for p in exc.problems]
    if fix:
        lines.append(f"\n**How to fix:** {fix}")
    st.error("\n".join(lines), icon=":material/error:")


def show_notes(notes: Sequence[str], *, context: str = "") -> None:
    """An ``st.warning`` per distinct estimator note (an :class:`~offeval_core.errors.EstimatorWarning` raised while
    the numbers shown were computed, cached ones included: :mod:`dashboard.data.notes`)."""
    for note in dict.fromkeys(notes):
        text = escape_markdown(note)
        st.warning(f"**{context}:** {text}" if context else text, icon=":material/warning:")


@contextlib.contextmanager
def guarded(context: str) -> Iterator[None]:
    """Run a section; an offeval error (:class:`~offeval_core.errors.OffevalError`, raised at the boundary that
    met the bad input) becomes a specific ``st.error`` (never a traceback), a view that a moments file cannot
    support an ``st.info`` saying what needs the raw logs. Any other exception is a bug and is not caught. The
    estimator notes raised inside (:func:`show_notes`) are shown under the section."""
    try:
        with errors.estimator_notes() as notes:
            yield
        show_notes(notes, context=context)
    except data.NeedsRawLogs as exc:
        st.info(f"**{context}:** {escape_markdown(exc)}" if context else escape_markdown(exc),
                icon=":material/info:")
    except OffevalError as exc:  # offeval's own errors only: anything else is a bug and shows as one
        show_error(exc, context=context)


# ------------------------------------------------------------------------------------ ending a page


class PageEnd(BaseException):
    """Raised by :func:`end_page`; ``app.py`` catches it. A ``BaseException``, like Streamlit's own stop, so no
    ``except Exception`` on the way swallows it."""


def end_page() -> NoReturn:
    """End the page here: nothing below it is drawn, and the app still writes the view to the URL.

    Pages end with this, never with ``st.stop()``: a run stopped by ``st.stop()`` drops what the app writes after
    the page (Streamlit raises its stop again at the next message), so a control moved on a page that then
    ended early would leave the link at the earlier view."""
    raise PageEnd


# ------------------------------------------------------------------------------------ long work


def with_progress(label: str, ready: bool, fn: Callable[[], object]):
    """Call ``fn``; when its result is not cached yet, show an ``st.status`` while it runs (then remove it)."""
    if ready:
        return fn()
    slot = st.empty()
    try:
        with slot.status(label, expanded=False) as status:
            out = fn()
            status.update(label=label.rstrip("…. ") + " — done", state="complete")
    finally:
        slot.empty()
    return out


def get_moments(c: Context, reward: str | None = None, discount: str | None = None, exposure: str | None = None):
    """The cached moments of the page's target policy (DCG reduce of D, D0, :func:`data.target_moments`; for a
    propensity policy the importance reduce with the logged propensities), with progress the first time."""
    reward = reward or c.reward
    if c.propensity and discount is None:
        return with_progress(f"Computing the importance-sampling moments of {reward} (weights π_t / π_p) over every "
                             "propensity policy and cap value (first time only)…",
                             data.is_ready("propensity", c.key, reward), lambda: data.propensity_moments(c.key, reward))
    d = discount or c.settings.discount
    e = exposure or c.settings.exposure
    ready = data.moments_ready(c.key, reward, d, e, c.policy)
    return with_progress(f"Computing DCG / nDCG moments for {reward}, D = {d}, D0 = {e} over every clip value "
                         f"(first time only)…", ready,
                         lambda: data.target_moments(c.key, reward, d, e, c.policy))


def needs(c: Context, *, policy: bool = False, arms: bool = False) -> bool:
    """Check the page's prerequisites; render a specific message and return False when one is missing."""
    if c.dataset is None:
        st.error(f"No valid data is loaded. {escape_markdown(c.problem)} Open the **Data** page to load the demo, fix the "
                 "upload, or simulate a world.", icon=":material/error:")
        return False
    ds = c.dataset
    if c.reward is not None and ds.reward_rates.get(c.reward, 0.0) == 0:
        st.error(f"Reward **{escape_markdown(c.reward)}** has no positive value in {escape_markdown(c.dataset.label)}: "
                 "every DCG, nDCG and IS "
                 "estimate would be 0. Pick another reward in the sidebar, or check that the column holds "
                 "the rewards (1 = clicked, liked, …).", icon=":material/error:")
        return False
    if policy and not ds.targets.all:
        st.error("These logs have no target policy: add one `rank__<policy>` column per candidate policy, "
                 "holding the rank at which that policy would show the logged item in the session (or, for a "
                 "stochastic policy, `target_propensity__<policy>` next to `logging_propensity`).",
                 icon=":material/error:")
        return False
    if arms and not ds.has_arms:
        st.warning("These logs have no treatment arm, so there is no online A/B outcome to compare with: this page "
                   "needs an A/B test. Logs of candidates evaluated before any A/B test are compared on the "
                   "**Candidates** page. To compare with an A/B test, add an `arm` column with `control` (logged by "
                   "the production policy) and `treatment` (logged by the tested policy) sessions.",
                   icon=":material/warning:")
        links(("candidates",))
        return False
    return True


LINK_LABELS = {"candidates": "Candidates: every candidate vs the logging policy"}
"""A link's label where it says more than the page's name in the navigation (:func:`links`)."""


def below_zero_note(c: Context, low: float) -> None:
    """Under a CI of a 0/1 reward whose lower end is below 0: a caption saying why (the normal interval,
    estimate ± z · SE, is symmetric) and how to read it. Nothing for real-valued rewards or moments files."""
    if not low < 0 or c.dataset is None or c.dataset.is_moments:
        return
    kinds = data.reward_overview(c.key).set_index("reward")["kind"]
    if kinds.get(c.reward) != "0/1 (rate)":
        return
    st.caption(f"The CI's lower end is below 0, which a {md_escape(c.reward)} rate cannot be: the interval is the "
               "normal approximation (estimate ± z · SE), symmetric by construction, so near 0 it reads as "
               "\"not distinguishable from 0 at this level\".")


def links(pages) -> None:
    """Links (``st.page_link``) to the pages that can answer what this page cannot."""
    for name in pages:
        p = page(name)
        st.page_link(p.view, label=LINK_LABELS.get(name, p.label), icon=p.icon)


PRESENT_CSS = """
<style>
html, body, [class*="stMarkdown"] p { font-size: 1.15rem; }
[data-testid="stMainBlockContainer"] { padding-top: 3.6rem !important; padding-bottom: 2rem !important; }
[data-testid="stMain"] h1 { font-size: 2.1rem !important; padding: 0 0 0.2rem 0 !important; }
[data-testid="stMain"] h2 { font-size: 1.5rem !important; padding: 0.4rem 0 0.1rem 0 !important; }
[data-testid="stMain"] [data-testid="stCaptionContainer"] { display: none; }
[data-testid="stMetricValue"], [data-testid="stMetricValue"] p { font-size: 3rem !important;
  line-height: 1.15 !important; }
[data-testid="stMetricLabel"] p { font-size: 1.1rem !important; }
[data-testid="stMetricValue"] .stMarkdownEllipsis, [data-testid="stMetricValue"] .stMarkdownEllipsis p,
[data-testid="stMetricLabel"] .stMarkdownEllipsis, [data-testid="stMetricLabel"] .stMarkdownEllipsis p {
  white-space: normal !important; overflow: visible !important; text-overflow: clip !important; }
.offeval-takeaway { font-size: 1.3rem !important; line-height: 1.35; padding: 0.3rem 0.8rem !important; }
.offeval-deck { font-size: 0.95rem; opacity: 0.75; }
</style>
"""

BASE_CSS = """
<style>
.offeval-takeaway { font-size: 1.12rem; font-weight: 600; border-left: 4px solid #0072B2;
  padding: 0.35rem 0.8rem; margin: 0.4rem 0 0.6rem 0; background: rgba(0,114,178,0.10); }
[data-testid="stDownloadButton"] button p { white-space: nowrap; }
[data-testid="stMetricValue"], [data-testid="stMetricValue"] p { font-size: 1.7rem; }
[data-testid="stMultiSelectTagsContainer"] { flex-wrap: wrap !important; overflow-x: visible !important; }
[data-testid="stMultiSelect"] div:has(> [data-testid="stMultiSelectTagsContainer"]) { max-height: none !important; }
</style>
"""


def inject_css(present: bool) -> None:
    st.html(BASE_CSS + (PRESENT_CSS if present else ""))


def page_default(name: str, value) -> None:
    """Record the default a page derived from the data for a setting (left out of the URL when equal)."""
    st.session_state.setdefault("_page_defaults", {})[name] = tuple(value) if isinstance(value, list) else value


def _same(a, b) -> bool:
    if isinstance(a, list | tuple) and isinstance(b, list | tuple):
        return tuple(a) == tuple(b)
    return a == b


def chosen_or_default(name: str, key: str, default, *, options=None, allow_empty: bool = True):
    """The value of a control whose default the page derives from the data or the sidebar (``w_estimators``
    follows the clip): the user's choice while it differs from the default it was given, else the current
    ``default`` — so a control left at its default follows it, exactly as a link without the control does. Sets
    the widget's state and records the default (left out of the URL); returns the value. ``allow_empty=False``:
    an emptied list is the default again (a settings list, whose empty value a link cannot tell from the default)."""
    ss = st.session_state
    previous = ss.get("_page_defaults", {}).get(name)
    value = ss.get(key)
    listed = isinstance(default, list | tuple)
    if value is not None and listed:
        kept = [v for v in value if options is None or v in options]
        # an emptied page control stays empty (the page says so; the link holds it); an emptied settings list
        # cannot travel in a link, so it returns to the default
        value = kept if kept or (not value and allow_empty) else None
    elif value is not None and options is not None and value not in options:
        value = None
    if value is None or (previous is not None and _same(value, previous)):
        value = list(default) if listed else default
    page_default(name, default)
    ss[key] = value
    return value


def init_control(name: str, default=None, *, options=None):
    """Prepare the page control ``w_<name>`` before its widget is drawn: keep the value from the URL or an
    earlier visit when it is one of ``options`` (and not merely the default it was given before: a control left at
    a default derived from the data follows it), else use ``default`` (the control's own default when None). A
    default derived from the data is recorded so the URL leaves it out. Returns the value."""
    from dashboard.state import PAGE_CONTROLS

    ss = st.session_state
    spec = PAGE_CONTROLS[name]
    key = f"w_{name}"
    if default is not None:
        return chosen_or_default(name, key, list(default) if spec.kind == "list" else default, options=options)
    value = ss.get(key)
    if spec.kind == "list" and value is not None:
        allowed = [v for v in value if options is None or v in options]
        value = allowed if allowed or not value else None
    elif value is not None and options is not None and value not in options:
        value = None
    if value is None:
        value = list(spec.default) if spec.kind == "list" else spec.default
    ss[key] = value
    return value


def controls(label: str = "Page controls"):
    """A container for a page's own controls, one line above the headline and the chart: collapsed until opened,
    so the chart is never pushed below the fold. Its key keeps it the same element (and open) while its controls
    are used, even when elements above it come and go; another page, or a new visit, opens it collapsed."""
    page = st.session_state.get("_page_path") or "data"
    return st.expander(label, expanded=False, icon=":material/tune:",
                       key=f"controls_{page}_" + re.sub(r"\W+", "_", label))


_MD_SPECIAL = re.compile(r"([\\`*_{}\[\]()#+\-.!|<>~$])")


def md_escape(text) -> str:
    """Text shown inside markdown as itself (names from files can hold `*`, `_`, `<`, `[`…)."""
    return _MD_SPECIAL.sub(r"\\\1", str(text))


clip_label = clip_text  # the display form of a clip value (offeval_core.formatting)

