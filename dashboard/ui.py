"""Rendering helpers shared by the pages: the current context, guarded sections with specific error
messages, downloadable tables, exportable charts, takeaways and presentation mode.

Pages read widgets and render; every number comes from :mod:`offeval_core` through :mod:`dashboard.data`.
"""

from __future__ import annotations

import contextlib
import io
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from dashboard import data
from dashboard.state import Settings
from offeval_core import errors
from offeval_core.errors import OffevalError
from offeval_core.formatting import clip_text
from offeval_core.logs import LogValidationError
from offeval_core.sanitize import escape_html, escape_markdown, neutralise_frame, sanitize_figure

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
    if getattr(exc, "unmapped", ()):  # required columns missing: the browser maps them in the form
        names = " and ".join(f"'{c}'" for c in exc.unmapped)
        typed.append(f"Pick your file's column for {names} in the column-mapping form below.")
    by_text = [f for pattern, f in _FIXES if any(re.search(pattern, t) for t in texts)]
    fixes = [*typed, *by_text] if isinstance(exc, LogValidationError) else (typed or by_text)
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


@contextlib.contextmanager
def guarded(context: str) -> Iterator[None]:
    """Run a section; a core error becomes a specific ``st.error`` (never a traceback), a view that a moments
    file cannot support an ``st.info`` saying what needs the raw logs."""
    try:
        yield
    except data.NeedsRawLogs as exc:
        st.info(f"**{context}:** {escape_markdown(exc)}" if context else escape_markdown(exc),
                icon=":material/info:")
    except (OffevalError, ValueError, TypeError, KeyError, LookupError, FileNotFoundError, RuntimeError) as exc:
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
    st.markdown(f'<div class="offeval-takeaway">{escape_html(text)}</div>', unsafe_allow_html=True)


PRESENT_CHART_HEIGHT = 350  # px: with the title and a two-line takeaway, the chart fits above the fold at 720 px


def _style(fig: go.Figure, present: bool) -> go.Figure:
    if present:
        fig = go.Figure(fig)
        fig.update_layout(font={"size": 16}, title_font={"size": 19}, height=PRESENT_CHART_HEIGHT,
                          margin={"t": 44, "b": 40, "r": 20}, legend={"orientation": "v", "y": 1, "x": 1.01,
                                                                     "xanchor": "left", "yanchor": "top"})
    return fig


def export_settings(c: Context | None) -> dict[str, object]:
    """The settings a chart or table of the current page depends on (for export captions and file names)."""
    if c is None or c.dataset is None:
        return {}
    st_ = c.settings
    out: dict[str, object] = {"reward": c.reward, "policy": c.policy, "D": st_.discount, "D0": st_.exposure,
                              "m": st_.clip, "level": st_.level}
    return {k: v for k, v in out.items() if v is not None}


def _settings_text(settings: dict[str, object]) -> str:
    from offeval_core.formatting import clip_text

    return ", ".join(f"{k} = {clip_text(v) if k == 'm' else v}" for k, v in settings.items())


def _export_figure(fig: go.Figure, *, take: str | None, c: Context | None) -> go.Figure:
    """The figure as exported: its title with the takeaway under it, and a footer naming the dataset, the
    settings and the date (so a PNG / SVG pasted into a slide says where it comes from)."""
    import datetime as _dt

    out = go.Figure(fig)
    title = (out.layout.title.text or "") if out.layout.title else ""
    if take:
        plain = re.sub(r"<[^>]+>|\*\*", "", take)
        wrapped = "<br>".join(_wrap(plain, 120))
        out.update_layout(title={"text": f"{title}<br><span style='font-size:13px'>{wrapped}</span>"},
                          margin={"t": 70 + 18 * wrapped.count("<br>") + 20})
    dataset = c.dataset.label if c is not None and c.dataset is not None else "no dataset"
    footer = (f"Dataset: {dataset} · {_settings_text(export_settings(c))} · exported "
              f"{_dt.datetime.now(_dt.UTC):%Y-%m-%d %H:%M} UTC · offeval")
    out.add_annotation(text=footer, xref="paper", yref="paper", x=0, y=0, yshift=-(out.layout.margin.b or 80) + 8,
                       xanchor="left", yanchor="bottom", showarrow=False, font={"size": 11, "color": "#555"})
    return out


def _wrap(text: str, width: int) -> list[str]:
    lines, line = [], ""
    for word in text.split():
        if line and len(line) + 1 + len(word) > width:
            lines.append(line)
            line = word
        else:
            line = f"{line} {word}".strip()
    return lines + ([line] if line else [])


_SENTENCE_END = re.compile(r"(?<=[.)])\s+(?=[A-Z])")


def headline(text: str) -> tuple[str, str]:
    """The first sentence of a takeaway and the rest (``"Of 18 settings, … m = ∞). Fig. 1 findings: …"`` →
    the part before ``Fig. 1``); decimals such as ``0.154`` never split."""
    parts = _SENTENCE_END.split(text, maxsplit=1)
    return (parts[0], parts[1] if len(parts) > 1 else "")


def show_figure(fig: go.Figure, *, key: str, name: str, take: str | None = None, select: bool = False):
    """A chart with its takeaway above and PNG / SVG / HTML export buttons below; with ``select`` the chart
    reports clicked points (the selection event is returned). Exports carry the title, the takeaway, the
    dataset, the settings and the date; their file names carry the settings."""
    from offeval_core.formatting import file_stem

    c = st.session_state.get(CTX_KEY)
    present = bool(c and c.present)
    head, rest = (take, "") if not (take and present) else headline(take)
    if head:
        takeaway(head)  # presenting: the headline sentence above the chart, the rest below it (chart above the fold)
    shown = _style(sanitize_figure(fig), present)  # names from the data show as text, not markup
    sel = {"on_select": "rerun", "selection_mode": "points"} if select else {}
    event = st.plotly_chart(shown, key=f"chart_{key}", config={"displaylogo": False}, theme="streamlit", **sel)
    if rest:
        st.markdown(escape_markdown(rest))
    stem = file_stem(name, export_settings(c))
    row = st.container(horizontal=True, gap="small")

    def static(fmt: str) -> Callable[[], bytes]:
        def render() -> bytes:
            from offeval_core.export import figure_to_bytes

            return figure_to_bytes(_export_figure(fig, take=take, c=c), fmt, width=1100)
        return render

    row.download_button("PNG", static("png"), file_name=f"{stem}.png", mime="image/png",
                        key=f"png_{key}", on_click="ignore", icon=":material/image:",
                        help="Static PNG (title, takeaway, dataset, settings and date included)")
    row.download_button("SVG", static("svg"), file_name=f"{stem}.svg", mime="image/svg+xml",
                        key=f"svg_{key}", on_click="ignore", icon=":material/draw:")
    row.download_button("HTML", lambda: _export_figure(fig, take=take, c=c).to_html(include_plotlyjs=True,
                                                                                    full_html=True),
                        file_name=f"{stem}.html", mime="text/html", key=f"html_{key}", on_click="ignore",
                        icon=":material/public:", help="Interactive chart, works offline")
    return event


def readable(df: pd.DataFrame, *, skip=()) -> tuple[pd.DataFrame, list[str]]:
    """The table as shown: p-value columns as ``< 1e-6`` / ``3.2e-12``, missing values as “undefined” (never
    ``None``), counts with thousands separators; returns the columns that hold undefined cells."""
    from offeval_core.formatting import format_p

    out = df.copy()
    undefined = []
    for col in out.columns:
        if col in skip or col == "clip":
            continue
        series = out[col]
        missing = series.isna()
        is_p = str(col).lower() in ("p", "p_value", "mean_p", "online_p", "p_two_sided", "p_value_two_sided") \
            or str(col).lower().endswith(("_p", "p_adj"))
        if is_p and pd.api.types.is_numeric_dtype(series):
            out[col] = [format_p(v) for v in series]
        elif pd.api.types.is_integer_dtype(series) and series.abs().max() >= 10_000 \
                and not str(col).lower().endswith(("_id", "id", "day", "rank")):
            out[col] = [f"{v:,}" for v in series]
        elif missing.any():
            out[col] = [("undefined" if m else v) for v, m in zip(series.astype(object), missing, strict=True)]
        if missing.any():
            undefined.append(str(col))
    return out, undefined


DEFAULT_UNITS = ("effects and estimates per session (mean over sessions of the per-session value); rates and "
                 "shares in [0, 1]; clip = m (inf = unclipped); p-values one-sided unless named two-sided")


def _number_text(v, fmt) -> str:
    """A number as its column's format shows it (``%.4g``, ``percent``), missing as “undefined”."""
    if pd.isna(v):
        return "undefined"
    if fmt == "percent":
        return f"{float(v):.1%}"
    if isinstance(fmt, str) and fmt.startswith("%"):
        try:
            return fmt % v
        except (TypeError, ValueError):
            pass
    return f"{v:g}" if isinstance(v, float) else str(v)


def _undefined_as_text(df: pd.DataFrame, column_config: dict | None) -> tuple[pd.DataFrame, dict | None]:
    """A number column with missing cells is shown as text in its own format, with “undefined” in those cells
    (a formatted number column would show them as ``None``)."""
    if not column_config:
        return df, column_config
    cfg = dict(column_config)
    for col, conf in column_config.items():
        tc = conf.get("type_config") or {} if isinstance(conf, dict) else {}
        if col not in df.columns or tc.get("type") != "number" or not df[col].isna().any():
            continue
        df[col] = [_number_text(v, tc.get("format")) for v in df[col]]
        cfg[col] = {**st.column_config.TextColumn(conf.get("label"), help=conf.get("help")), "_undefined": True}
    return df, cfg


def show_table(df: pd.DataFrame, *, key: str, name: str, caption: str | None = None, height: int | None = None,
               column_config: dict | None = None, units: str | None = None) -> None:
    """A table with a CSV download of exactly what is shown; folded behind a checkbox in presentation mode."""
    c = st.session_state.get(CTX_KEY)
    if c is not None and c.present and not st.checkbox(f"Show the table ({name.replace('_', ' ')})",
                                                       key=f"show_{key}"):
        return
    shown = df.copy()
    if "clip" in shown.columns:
        shown["clip"] = [clip_text(x) if isinstance(x, float) else x for x in shown["clip"]]
    shown, column_config = _undefined_as_text(shown, column_config)
    shown, undefined = readable(shown, skip=set(column_config or ()))
    undefined += [col for col, conf in (column_config or {}).items() if conf.get("_undefined")]
    column_config = {col: {k: v for k, v in conf.items() if k != "_undefined"}
                     for col, conf in (column_config or {}).items()} or None
    kwargs = {"height": height} if height else {}
    st.dataframe(shown, key=f"table_{key}", hide_index=True, column_config=column_config, **kwargs)
    if undefined:
        st.caption(f"“undefined” in {', '.join(undefined)}: not computable on these data (no variance, a single "
                   "value, or no sessions in the group); the CSV leaves those cells empty.")

    def csv() -> str:
        import datetime as _dt

        buf = io.StringIO()
        dataset = c.dataset.label if c is not None and c.dataset is not None else "no dataset"
        buf.write(f"# {name.replace('_', ' ')} · dataset: {dataset} · {_settings_text(export_settings(c))} · "
                  f"exported {_dt.datetime.now(_dt.UTC):%Y-%m-%d %H:%M} UTC by offeval\n")
        buf.write(f"# units: {units or DEFAULT_UNITS}\n")
        neutralise_frame(df).to_csv(buf, index=False)  # formula-leading text cells neutralised
        return buf.getvalue()

    from offeval_core.formatting import file_stem

    st.download_button("Download CSV", csv, file_name=f"{file_stem(name, export_settings(c))}.csv", mime="text/csv",
                       key=f"csv_{key}", on_click="ignore", icon=":material/download:",
                       help="Lines starting with # say where the table comes from and its units "
                            "(pandas: read_csv(..., comment='#'))")
    if caption:
        st.caption(caption)


def needs(c: Context, *, policy: bool = False, arms: bool = False) -> bool:
    """Check the page's prerequisites; render a specific message and return False when one is missing."""
    if c.dataset is None:
        st.error(f"No valid data is loaded. {escape_markdown(c.problem)} Open the **Data** page to load the demo, fix the "
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
html, body, [class*="stMarkdown"] p { font-size: 1.15rem; }
[data-testid="stMainBlockContainer"] { padding-top: 3.6rem !important; padding-bottom: 2rem !important; }
[data-testid="stMain"] h1 { font-size: 2.1rem !important; padding: 0 0 0.2rem 0 !important; }
[data-testid="stMain"] [data-testid="stCaptionContainer"] { display: none; }
[data-testid="stMetricValue"] { font-size: 3rem !important; line-height: 1.15 !important; }
[data-testid="stMetricLabel"] p { font-size: 1.1rem !important; }
.offeval-takeaway { font-size: 1.3rem !important; line-height: 1.35; padding: 0.3rem 0.8rem !important; }
.offeval-deck { font-size: 0.95rem; opacity: 0.75; }
</style>
"""

BASE_CSS = """
<style>
.offeval-takeaway { font-size: 1.12rem; font-weight: 600; border-left: 4px solid #0072B2;
  padding: 0.35rem 0.8rem; margin: 0.4rem 0 0.6rem 0; background: rgba(0,114,178,0.10); }
[data-testid="stDownloadButton"] button p { white-space: nowrap; }
[data-testid="stMetricValue"] { font-size: 1.7rem; }
</style>
"""


def inject_css(present: bool) -> None:
    st.html(BASE_CSS + (PRESENT_CSS if present else ""))


def page_default(name: str, value) -> None:
    """Record the default a page derived from the data for a setting (left out of the URL when equal)."""
    st.session_state.setdefault("_page_defaults", {})[name] = tuple(value) if isinstance(value, list) else value


def init_control(name: str, default=None, *, options=None):
    """Prepare the page control ``w_<name>`` before its widget is drawn: keep the value from the URL or an
    earlier visit when it is one of ``options``, else use ``default`` (the control's own default when None).
    A default derived from the data is recorded so the URL leaves it out. Returns the value."""
    from dashboard.state import PAGE_CONTROLS

    ss = st.session_state
    spec = PAGE_CONTROLS[name]
    key = f"w_{name}"
    if default is None:
        default = spec.default
    else:
        page_default(name, default)
    value = ss.get(key)
    if spec.kind == "list" and value is not None:
        allowed = [v for v in value if options is None or v in options]
        value = allowed if allowed or not value else None
    elif value is not None and options is not None and value not in options:
        value = None
    if value is None:
        value = list(default) if spec.kind == "list" else default
    ss[key] = value
    return value


def controls(label: str = "Page controls"):
    """A container for a page's own controls: collapsed in presentation mode."""
    c = st.session_state.get(CTX_KEY)
    return st.expander(label, expanded=not (c and c.present))


_MD_SPECIAL = re.compile(r"([\\`*_{}\[\]()#+\-.!|<>~$])")


def md_escape(text) -> str:
    """Text shown inside markdown as itself (names from files can hold `*`, `_`, `<`, `[`…)."""
    return _MD_SPECIAL.sub(r"\\\1", str(text))


clip_label = clip_text  # the display form of a clip value (offeval_core.formatting)
