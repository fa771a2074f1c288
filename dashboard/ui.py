"""Rendering helpers shared by the pages: the current context, guarded sections with specific error
messages, downloadable tables, exportable charts, takeaways and presentation mode.

Pages read widgets and render; every number comes from :mod:`offeval_core` through :mod:`dashboard.data`.
"""

from __future__ import annotations

import contextlib
import io
import math
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from dashboard import data
from dashboard.state import Settings
from offeval_core import errors
from offeval_core.logs import LogValidationError

CTX_KEY = "_offeval_ctx"


@dataclass(frozen=True, eq=False)
class Context:
    """What every page needs: the settings (resolved against the data) and the loaded dataset."""

    settings: Settings
    dataset: data.Dataset | None
    problem: str = ""
    notes: tuple[str, ...] = field(default=())

    @property
    def key(self) -> str:
        return self.dataset.key if self.dataset else ""

    @property
    def logs(self):
        return self.dataset.logs if self.dataset else None

    @property
    def reward(self) -> str | None:
        return self.settings.reward

    @property
    def policy(self) -> str | None:
        return self.settings.policy

    @property
    def present(self) -> bool:
        return self.settings.present


def ctx() -> Context:
    """The context the app computed in this run (pages are only run by the app)."""
    c = st.session_state.get(CTX_KEY)
    if c is None:
        st.error("The page was opened without the app: start it with `make run` "
                 "(`streamlit run dashboard/app.py`).")
        st.stop()
    return c


# ------------------------------------------------------------------------------------------ errors

_FIXES = (
    (r"no reward column|reward column .* must be", "Reward columns (e.g. click) must hold finite numbers ≥ 0."),
    (r"column 'rank' must hold", "Ranks are 1-based positions: 1 = top of the feed, no 0, no text."),
    (r"missing required column", "Map your column names to the schema with the column-mapping form below."),
    (r"duplicates", "Each (session_id, rank) pair must appear once: remove repeated rows or fix the ranks."),
    (r"must be 'control' or 'treatment'", "Rename the arm values to 'control' / 'treatment'."),
    (r"cannot read the file|unsupported file type|file is empty",
     "Upload a comma-separated CSV with a header row, or a Parquet file."),
    (r"both arms|no A/B test", "These logs have no treatment arm; add an 'arm' column with 'control' and "
                               "'treatment' sessions to compare offline with online results."),
    (r"policy .* was not computed|unknown policy|target policies", "Pick a target policy in the sidebar; "
                                                                     "policies come from rank__<policy> columns."),
    (r"discount|exposure", "Use a discount spec like 'pbm', 'log2', 'reciprocal', 'exponential:0.9' "
                           "(optionally '@n', e.g. 'log2@10')."),
)


def explain(exc: BaseException) -> tuple[str, str]:
    """(what is wrong, how to fix it) for an exception raised by the core."""
    if isinstance(exc, LogValidationError):
        what = f"{exc.source}: {len(exc.problems)} problem(s) in the logs"
        text = " ".join(exc.problems)
    else:
        what = str(exc).strip() or type(exc).__name__
        text = what
    if isinstance(exc, LogValidationError):
        texts = exc.problems
    else:
        texts = [text]
    # the exception's type decides first; the text patterns only refine untyped errors and the logs'
    # problem lines (which are not typed one by one)
    typed = [f for kind, f in _FIXES_BY_TYPE if isinstance(exc, kind)]
    fixes = typed or [f for pattern, f in _FIXES if any(re.search(pattern, t) for t in texts)]
    return what, " ".join(dict.fromkeys(fixes))


_FIXES_BY_TYPE = (
    (errors.UnreadableInput, "Upload a comma-separated CSV with a header row, or a Parquet file."),
    (errors.LimitExceeded, "The file is over a size limit of this server: upload a sample, or reduce it to moments "
                           "with `offeval reduce` and load the moments file."),
    (errors.SpecError, "Use a discount spec like 'pbm', 'log2', 'reciprocal', 'exponential:0.9' (optionally '@n', "
                       "e.g. 'log2@10'), a clip ≥ 1 or 'inf', and an estimator key like 'ncis-zero@impression'."),
    (errors.UnknownName, "Pick a name the loaded data has (rewards are numeric columns; policies come from "
                         "rank__<policy> columns)."),
)


def show_error(exc: BaseException, *, context: str = "") -> None:
    what, fix = explain(exc)
    lines = [f"**{context}:** {what}" if context else what]
    if isinstance(exc, LogValidationError):
        lines += [f"- {p}" for p in exc.problems]
    if fix:
        lines.append(f"\n**How to fix:** {fix}")
    st.error("\n".join(lines), icon=":material/error:")


@contextlib.contextmanager
def guarded(context: str) -> Iterator[None]:
    """Run a section; a core error becomes a specific ``st.error`` (never a traceback), a view that a moments
    file cannot support an ``st.info`` saying what needs the raw logs."""
    try:
        yield
    except data.NeedsRawLogs as exc:
        st.info(f"**{context}:** {exc}" if context else str(exc), icon=":material/info:")
    except (ValueError, TypeError, KeyError, LookupError, FileNotFoundError, RuntimeError) as exc:
        show_error(exc, context=context)


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


def mark_clip(fig: go.Figure, m: float, clips, *, subplots: bool = False) -> go.Figure:
    """Draw the sidebar's clip value as a dotted vertical line on every clip axis of a chart (in place)."""
    from offeval_core.charts import clip_positions

    clips = list(clips)
    if m not in clips:
        return fig
    pos, _, _ = clip_positions(clips)
    x = float(pos[clips.index(m)])
    axes = sorted(k for k in fig.layout.to_plotly_json() if k.startswith("xaxis")) if subplots else ["xaxis"]
    line = {"dash": "dot", "color": "#444", "width": 1.5}
    for ax in axes or ["xaxis"]:
        ref = "x" + ax[5:]
        fig.add_shape(type="line", x0=x, x1=x, y0=0, y1=1, xref=ref, yref=f"y{ax[5:]} domain", line=line)
    fig.add_annotation(x=x, y=1.0, xref="x", yref="y domain", text=f" m = {clip_label(m)}", showarrow=False,
                       yanchor="top", xanchor="left", font={"size": 12, "color": "#444"},
                       bgcolor="rgba(255,255,255,0.8)")
    return fig


def get_moments(c: Context, reward: str | None = None, discount: str | None = None, exposure: str | None = None):
    reward = reward or c.reward
    d = discount or c.settings.discount
    e = exposure or c.settings.exposure
    ready = data.is_ready("moments", c.key, reward, d, e)
    return with_progress(f"Computing DCG / nDCG moments for {reward}, D = {d}, D0 = {e} over every policy "
                         f"and clip value (first time only)…", ready,
                         lambda: data.moments(c.key, reward, d, e))


# ------------------------------------------------------------------------------------ rendering


def raw_logs_notice(what: str) -> None:
    """The notice shown in place of a part that needs the raw logs when the dataset is a moments file."""
    st.info(data.needs_raw_logs_text(what), icon=":material/info:")


def takeaway(text: str) -> None:
    """The one-sentence takeaway shown above a chart (larger in presentation mode)."""
    st.markdown(f'<div class="offeval-takeaway">{text}</div>', unsafe_allow_html=True)


def _style(fig: go.Figure, present: bool) -> go.Figure:
    if present:
        fig.update_layout(font={"size": 18}, title_font={"size": 22})
    return fig


def show_figure(fig: go.Figure, *, key: str, name: str, take: str | None = None, select: bool = False):
    """A chart with its takeaway above and PNG / SVG / HTML export buttons below; with ``select`` the chart
    reports clicked points (the selection event is returned)."""
    c = st.session_state.get(CTX_KEY)
    present = bool(c and c.present)
    if take:
        takeaway(take)
    fig = _style(fig, present)
    sel = {"on_select": "rerun", "selection_mode": "points"} if select else {}
    event = st.plotly_chart(fig, key=f"chart_{key}", config={"displaylogo": False},
                            theme=None if present else "streamlit", **sel)
    cols = st.columns([1, 1, 1, 4], gap="small")

    def static(fmt: str) -> Callable[[], bytes]:
        def render() -> bytes:
            from offeval_core.export import figure_to_bytes

            return figure_to_bytes(fig, fmt, width=1100)
        return render

    cols[0].download_button("PNG", static("png"), file_name=f"{name}.png", mime="image/png",
                            key=f"png_{key}", on_click="ignore", icon=":material/image:",
                            help="Static PNG rendered by kaleido with the system Chromium")
    cols[1].download_button("SVG", static("svg"), file_name=f"{name}.svg", mime="image/svg+xml",
                            key=f"svg_{key}", on_click="ignore", icon=":material/draw:")
    cols[2].download_button("HTML", lambda: fig.to_html(include_plotlyjs=True, full_html=True),
                            file_name=f"{name}.html", mime="text/html", key=f"html_{key}", on_click="ignore",
                            icon=":material/public:", help="Interactive chart, works offline")
    return event


def _fmt_value(v):
    if isinstance(v, float) and math.isinf(v):
        return "∞"
    return v


def show_table(df: pd.DataFrame, *, key: str, name: str, caption: str | None = None, height: int | None = None,
               column_config: dict | None = None) -> None:
    """A table with a CSV download of exactly what is shown."""
    shown = df.copy()
    if "clip" in shown.columns:
        shown["clip"] = [("∞" if math.isinf(x) else f"{x:g}") if isinstance(x, float) else x
                         for x in shown["clip"]]
    kwargs = {"height": height} if height else {}
    st.dataframe(shown, key=f"table_{key}", hide_index=True, column_config=column_config, **kwargs)

    def csv() -> str:
        buf = io.StringIO()
        df.to_csv(buf, index=False)
        return buf.getvalue()

    st.download_button("Download CSV", csv, file_name=f"{name}.csv", mime="text/csv", key=f"csv_{key}",
                         on_click="ignore", icon=":material/download:")
    if caption:
        st.caption(caption)


def needs(c: Context, *, policy: bool = False, arms: bool = False) -> bool:
    """Check the page's prerequisites; render a specific message and return False when one is missing."""
    if c.dataset is None:
        st.error(f"No valid data is loaded. {c.problem} Open the **Data** page to load the demo, fix the "
                 "upload, or simulate a world.", icon=":material/error:")
        return False
    ds = c.dataset
    if c.reward is not None and ds.reward_rates.get(c.reward, 0.0) == 0:
        st.error(f"Reward **{c.reward}** has no positive value in {c.dataset.label}: every DCG, nDCG and IS "
                 "estimate would be 0. Pick another reward in the sidebar, or check that the column holds "
                 "the rewards (1 = clicked, liked, …).", icon=":material/error:")
        return False
    if policy and not ds.policies:
        st.error("These logs have no target policy: add one `rank__<policy>` column per candidate policy, "
                 "holding the rank at which that policy would show the logged item in the session.",
                 icon=":material/error:")
        return False
    if arms and not ds.has_arms:
        st.warning("These logs have no treatment arm, so there is no online A/B outcome to compare with. "
                   "Add an `arm` column with `control` (logged by the production policy) and `treatment` "
                   "(logged by the tested policy) sessions.", icon=":material/warning:")
        return False
    return True


PRESENT_CSS = """
<style>
html, body, [class*="stMarkdown"] p, [data-testid="stMetricValue"] { font-size: 1.18rem; }
[data-testid="stMetricValue"] { font-size: 2.4rem !important; }
h1 { font-size: 2.8rem !important; }
.offeval-takeaway { font-size: 1.6rem !important; }
</style>
"""

BASE_CSS = """
<style>
.offeval-takeaway { font-size: 1.12rem; font-weight: 600; border-left: 4px solid #0072B2;
  padding: 0.35rem 0.8rem; margin: 0.4rem 0 0.6rem 0; background: rgba(0,114,178,0.06); }
[data-testid="stMetricValue"] { font-size: 1.7rem; }
</style>
"""


def inject_css(present: bool) -> None:
    st.html(BASE_CSS + (PRESENT_CSS if present else ""))


def controls(label: str = "Page controls"):
    """A container for a page's own controls: collapsed in presentation mode."""
    c = st.session_state.get(CTX_KEY)
    return st.expander(label, expanded=not (c and c.present))


def clip_label(m: float) -> str:
    return "∞" if math.isinf(m) else f"{m:g}"
