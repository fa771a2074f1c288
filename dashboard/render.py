"""How results are shown: takeaways (a headline sentence above the chart, the rest under it), charts with PNG /
SVG / HTML exports that carry their title, takeaway, dataset, settings and date (:mod:`offeval_core.figure_text`),
and tables as people read them (:mod:`offeval_core.display`: human headers, ≤ 4 significant digits, p-values as
``< 0.001``, ``n/a — why``) with a CSV download."""

from __future__ import annotations

import functools
import io
import re
from collections.abc import Callable
from pathlib import Path

import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from dashboard import data
from dashboard.context import CTX_KEY, Context
from offeval_core.figure_text import exported_figure, wrap_title
from offeval_core.formatting import clip_text
from offeval_core.sanitize import escape_html, escape_markdown, neutralise_frame, one_line, sanitize_figure

__all__ = ["DEFAULT_UNITS", "PRESENT_CHART_HEIGHT", "chart_chunk", "export_settings",
           "footer_text", "headline", "policy_headline", "preload_chart_code", "raw_logs_notice", "show_figure",
           "show_table", "shown_table", "table_csv", "takeaway"]


def raw_logs_notice(what: str) -> None:
    """The notice shown in place of a part that needs the raw logs when the dataset is a moments file; ``what``
    shows as text (it may name a moments file's discount models)."""
    st.info(data.needs_raw_logs_text(escape_markdown(what)), icon=":material/info:")


def takeaway(text: str) -> None:
    """The one-sentence takeaway shown above a chart (larger in presentation mode)."""
    st.markdown(f'<div class="offeval-takeaway">{escape_html(text)}</div>', unsafe_allow_html=True)


def policy_headline(policy: str | None, text: str) -> str:
    """A takeaway that names the target policy it is about: ``"<policy> vs the logging policy — <text>"`` (a
    capitalised first word such as "Of" or "At" is lower-cased; acronyms such as "DCG" are kept).

    >>> policy_headline("ranker_v2", "Of the 6 settings, DCG detects 50 %.")
    'ranker_v2 vs the logging policy — of the 6 settings, DCG detects 50 %.'
    """
    if not policy:
        return text
    if len(text) > 1 and text[0].isupper() and text[1].islower():
        text = text[0].lower() + text[1:]
    return f"{policy} vs the logging policy — {text}"


PRESENT_CHART_HEIGHT = 350  # px: with the title and a two-line takeaway, the chart fits above the fold at 720 px
SHOWN_WIDTH = {False: 800, True: 1060}
"""The narrowest width (px) a chart gets at 1280 px in each mode (normal: next to the open sidebar;
presentation: the full page): titles are wrapped to it, so they never run past the chart's right edge."""


def _style(fig: go.Figure, present: bool, *, tall: bool = False) -> go.Figure:
    """The figure as the page shows it: in presentation mode larger fonts and ``PRESENT_CHART_HEIGHT`` high
    (unless ``tall``: a chart that needs its rows, e.g. the full heatmap), the title wrapped to the width."""
    if present:
        fig = go.Figure(fig)
        fig.update_layout(font={"size": 16}, title_font={"size": 19},
                          height=fig.layout.height if tall and fig.layout.height else PRESENT_CHART_HEIGHT,
                          margin={"t": 44, "b": 40, "r": 20}, legend={"orientation": "v", "y": 1, "x": 1.01,
                                                                     "xanchor": "left", "yanchor": "top"})
    else:
        fig = go.Figure(fig)
    fig.update_xaxes(automargin=True)  # tick labels and axis titles never cut, whatever the height
    fig.update_yaxes(automargin=True)
    return wrap_title(fig, SHOWN_WIDTH[present])


def export_settings(c: Context | None) -> dict[str, object]:
    """The settings a chart or table of the current page depends on (for export captions and file names)."""
    if c is None or c.dataset is None:
        return {}
    st_ = c.settings
    out: dict[str, object] = {"reward": c.reward, "policy": c.policy, "D": st_.discount, "D0": st_.exposure,
                              "m": st_.clip, "level": st_.level}
    if c.uses is not None and "policy" not in c.uses:  # e.g. Candidates: every candidate, not the sidebar's one
        out.pop("policy")
    if c.propensity and "policy" in (c.uses or ("policy",)):  # weights π_t / π_p: no discount models
        out.pop("D")
        out.pop("D0")
    return {k: v for k, v in out.items() if v is not None}


def _settings_text(settings: dict[str, object]) -> str:
    return ", ".join(f"{k} = {clip_text(v) if k == 'm' else v}" for k, v in settings.items())


def footer_text(c: Context | None) -> str:
    """What an export says of its origin: the dataset, the settings (the policy among them) and the date."""
    import datetime as _dt

    dataset = c.dataset.label if c is not None and c.dataset is not None else "no dataset"
    settings = _settings_text(export_settings(c))
    return one_line(f"Dataset: {dataset}{' · ' + settings if settings else ''} · exported "
                    f"{_dt.datetime.now(_dt.UTC):%Y-%m-%d %H:%M} UTC · offeval")


def _export_figure(fig: go.Figure, *, take: str | None, c: Context | None) -> go.Figure:
    """The figure as exported (:func:`offeval_core.figure_text.exported_figure`): its title with the takeaway
    under it, and a footer naming the dataset, the settings and the date, wrapped to the export's width."""
    return exported_figure(fig, takeaway=take, footer=footer_text(c))


_SENTENCE_END = re.compile(r"(?:(?<=\.)|(?<=\.\)))\s+(?=[A-Z])")  # "… m = ∞). Fig." splits, "(2 seeds) IPS" not


def headline(text: str) -> tuple[str, str]:
    """The first sentence of a takeaway and the rest (``"Of 18 settings, … m = ∞). Fig. 1 findings: …"`` →
    the part before ``Fig. 1``); decimals such as ``0.154`` and a parenthesis inside a sentence never split.

    >>> headline("At K = 100 (2 seeds) IPS wins: 0.012 vs 0.266. GS is second.")
    ('At K = 100 (2 seeds) IPS wins: 0.012 vs 0.266.', 'GS is second.')
    >>> headline("DCG detects 9 (best finite m.) Fig. 1 holds.")[1]
    'Fig. 1 holds.'
    """
    parts = _SENTENCE_END.split(text, maxsplit=1)
    return (parts[0], parts[1] if len(parts) > 1 else "")


def show_figure(fig: go.Figure, *, key: str, name: str, take: str | None = None, select: bool = False,
                headline_above: bool = True, tall: bool = False):
    """A chart with its headline above (the takeaway's first sentence; the rest under the chart) and PNG / SVG /
    HTML export buttons below; with ``select`` the chart reports clicked points (the selection event is
    returned). Exports carry the title, the whole takeaway, the dataset, the settings and the date; their file
    names carry the settings. ``headline_above=False``: the page has shown the headline already; ``tall``: the chart
    keeps its own height in presentation mode."""
    from offeval_core.formatting import file_stem

    c = st.session_state.get(CTX_KEY)
    present = bool(c and c.present)
    head, rest = headline(take) if take else ("", "")
    if head and headline_above:
        takeaway(head)
    # names from the data show as text, not markup; on a copy: ``fig`` may be a cached figure other sessions share
    clean = sanitize_figure(go.Figure(fig.to_dict(), _validate=False))
    shown = _style(go.Figure(clean.to_dict(), _validate=False), present, tall=tall)
    sel = {"on_select": "rerun", "selection_mode": "points"} if select else {}
    event = st.plotly_chart(shown, key=f"chart_{key}", config={"displaylogo": False}, theme="streamlit", **sel)
    if rest:
        st.markdown(escape_markdown(rest))
    stem = file_stem(name, export_settings(c))
    row = st.container(horizontal=True, gap="small")

    def static(fmt: str) -> Callable[[], bytes]:
        def render() -> bytes:
            from offeval_core.export import figure_to_bytes

            out = _export_figure(clean, take=take, c=c)
            return figure_to_bytes(out, fmt, width=out.layout.width, height=out.layout.height)
        return render

    row.download_button("PNG", static("png"), file_name=f"{stem}.png", mime="image/png",
                        key=f"png_{key}", on_click="ignore", icon=":material/image:",
                        help="Static PNG (title, takeaway, dataset, settings and date included)")
    row.download_button("SVG", static("svg"), file_name=f"{stem}.svg", mime="image/svg+xml",
                        key=f"svg_{key}", on_click="ignore", icon=":material/draw:")
    row.download_button("HTML", lambda: _export_figure(clean, take=take, c=c).to_html(include_plotlyjs=True,
                                                                                      full_html=True),
                        file_name=f"{stem}.html", mime="text/html", key=f"html_{key}", on_click="ignore",
                        icon=":material/public:", help="Interactive chart, works offline")
    return event


DEFAULT_UNITS = ("effects and estimates per session (mean over sessions of the per-session value); rates and "
                 "shares in [0, 1]; clip = m (inf = unclipped); p-values one-sided unless named two-sided")


def _from_column_config(column_config: dict | None) -> tuple[dict, dict, dict]:
    """(kinds, headers, widths) of the columns a page configured: a ``percent`` number column is a share, another
    formatted number column a number; a label is the column's header."""
    kinds: dict = {}
    headers: dict = {}
    widths: dict = {}
    for col, conf in (column_config or {}).items():
        conf = conf if isinstance(conf, dict) else {}
        tc = conf.get("type_config") or {}
        if tc.get("type") == "number":
            kinds[col] = "share" if tc.get("format") == "percent" else "number"
        if conf.get("label"):
            headers[col] = conf["label"]
        if conf.get("width"):
            widths[col] = conf["width"]
    return kinds, headers, widths


def shown_table(df: pd.DataFrame, *, column_config: dict | None = None, kinds: dict | None = None,
                headers: dict | None = None, reasons: dict | None = None) -> tuple[pd.DataFrame, dict[str, str], dict]:
    """The table as the page shows it (:func:`offeval_core.display.display_frame`: human headers, numbers with
    ≤ 4 significant digits, p-values, shares, ``n/a — why``), the reasons of its missing cells, and the column
    configuration of the shown columns (numbers right-aligned)."""
    from offeval_core.display import column_kind, display_frame

    k, h, widths = _from_column_config(column_config)
    k.update(kinds or {})
    h.update(headers or {})
    shown, missing = display_frame(df, kinds=k, headers=h, reasons=reasons)
    config = {}
    for col, title in zip(df.columns, shown.columns, strict=True):
        kind = k.get(col) or column_kind(col, df[col])
        config[title] = st.column_config.TextColumn(title, width=widths.get(col),
                                                    alignment="right" if kind not in ("text", "bool") else None)
    return shown, missing, config


def table_csv(df: pd.DataFrame, *, name: str, dataset: str, settings: dict[str, object], units: str | None,
              when) -> str:
    r"""The CSV download of a table: two ``#`` lines saying where it comes from (each on one line, whatever the
    names hold: a reward named ``"x\n=HYPERLINK(…)"`` must not start a line of its own) and the table with
    formula-leading text cells and names neutralised (:func:`offeval_core.sanitize.neutralise_frame`).

    >>> text = table_csv(pd.DataFrame({"v": ["+1+1"]}), name="t", dataset="a\n=HYPERLINK(1)", settings={},
    ...                  units="u", when=__import__("datetime").datetime(2026, 1, 1))
    >>> [line[:1] for line in text.splitlines()], text.splitlines()[-1]
    (['#', '#', 'v', "'"], "'+1+1")
    """
    buf = io.StringIO()
    buf.write(one_line(f"# {name.replace('_', ' ')} · dataset: {dataset} · {_settings_text(settings)} · exported "
                       f"{when:%Y-%m-%d %H:%M} UTC by offeval") + "\n")
    buf.write(one_line(f"# units: {units or DEFAULT_UNITS}") + "\n")
    neutralise_frame(df).to_csv(buf, index=False)  # formula-leading text cells neutralised
    return buf.getvalue()


def show_table(df: pd.DataFrame, *, key: str, name: str, caption: str | None = None, height: int | None = None,
               column_config: dict | None = None, units: str | None = None, kinds: dict | None = None,
               headers: dict | None = None, reasons: dict | None = None) -> None:
    """A table as people read it (:func:`shown_table`) with a CSV download of the same rows and headers (numbers
    at full precision); folded behind a checkbox in presentation mode."""
    c = st.session_state.get(CTX_KEY)
    if c is not None and c.present and not st.checkbox(f"Show the table ({name.replace('_', ' ')})",
                                                       key=f"show_{key}"):
        return
    shown, missing, config = shown_table(df, column_config=column_config, kinds=kinds, headers=headers,
                                         reasons=reasons)
    kwargs = {"height": height} if height else {}
    st.dataframe(shown, key=f"table_{key}", hide_index=True, column_config=config, **kwargs)
    if missing:
        st.caption("n/a: " + "; ".join(f"{col} — {why}" for col, why in missing.items())
                   + ". The CSV leaves those cells empty.")

    def csv() -> str:
        import datetime as _dt

        dataset = c.dataset.label if c is not None and c.dataset is not None else "no dataset"
        out = df.copy()
        out.columns = list(shown.columns)  # the headers the page shows; the numbers at full precision
        return table_csv(out, name=name, dataset=dataset, settings=export_settings(c),
                         units=f"{units or DEFAULT_UNITS}; numbers at full precision (the page shows ≤ 4 significant "
                               "digits)", when=_dt.datetime.now(_dt.UTC))

    from offeval_core.formatting import file_stem

    st.download_button("Download CSV", csv, file_name=f"{file_stem(name, export_settings(c))}.csv", mime="text/csv",
                       key=f"csv_{key}", on_click="ignore", icon=":material/download:",
                       help="Lines starting with # say where the table comes from and its units "
                            "(pandas: read_csv(..., comment='#'))")
    if caption:
        st.caption(caption)


_CHUNK = re.compile(r"PlotlyChart\.[A-Za-z0-9_-]{4,40}\.js")


def chart_chunk(js_dir: Path) -> str | None:
    """The file name of the frontend's chart code (``PlotlyChart.<hash>.js``) in ``js_dir``, or None unless there
    is exactly one such file with a plain name (letters, digits, ``_`` and ``-`` as the hash: it is written into
    a script)."""
    names = [p.name for p in js_dir.glob("PlotlyChart.*.js")]
    return names[0] if len(names) == 1 and _CHUNK.fullmatch(names[0]) else None


@functools.cache
def _installed_chart_chunk() -> str | None:
    return chart_chunk(Path(st.__file__).parent / "static" / "static" / "js")


_PRELOAD_JS = """
<script>
(function () {
  const w = window.parent && window.parent.document ? window.parent : window;
  if (w.__offevalChartCode) return;
  const main = w.document.querySelector('script[type="module"][src*="static/js/index."]');
  if (!main) return;
  w.__offevalChartCode = import(new URL("./%s", main.src).href).catch(function () { w.__offevalChartCode = null; });
})();
</script>
"""


def preload_chart_code() -> None:
    """Ask the browser to load the frontend's chart code (Plotly, about 4.7 MB of JavaScript) now, from the
    sidebar. A page opened by URL otherwise loads it only when its first chart arrives, after the page's
    analysis, and the chart waits for it (1.3–2 s in headless Chromium on a 2-core machine); asked for at the
    start of the run, it loads while the page computes. Once per browser tab (the module is imported once);
    nothing when the installed Streamlit has no single such file."""
    chunk = _installed_chart_chunk()
    if chunk:
        st.sidebar.html(_PRELOAD_JS % chunk, unsafe_allow_javascript=True)
