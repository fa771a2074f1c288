"""How results are shown: takeaways (a headline sentence above the chart in presentation mode), charts with
PNG / SVG / HTML exports that carry their title, takeaway, dataset, settings and date, and tables with readable
numbers (p-values, thousands separators, "undefined" instead of empty cells) and a CSV download."""

from __future__ import annotations

import io
import re
from collections.abc import Callable

import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from dashboard import data
from dashboard.context import CTX_KEY, Context
from offeval_core.formatting import clip_text
from offeval_core.sanitize import escape_html, escape_markdown, neutralise_frame, one_line, sanitize_figure

__all__ = ["DEFAULT_UNITS", "PRESENT_CHART_HEIGHT", "export_settings", "headline", "policy_headline",
           "raw_logs_notice", "readable", "show_figure", "show_table", "table_csv", "takeaway"]


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
    if c.uses is not None and "policy" not in c.uses:  # e.g. Candidates: every candidate, not the sidebar's one
        out.pop("policy")
    if c.propensity and "policy" in (c.uses or ("policy",)):  # weights π_t / π_p: no discount models
        out.pop("D")
        out.pop("D0")
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
    return sanitize_figure(out)  # the takeaway and the dataset's name (an upload's file name) show as text


def _wrap(text: str, width: int) -> list[str]:
    lines, line = [], ""
    for word in text.split():
        if line and len(line) + 1 + len(word) > width:
            lines.append(line)
            line = word
        else:
            line = f"{line} {word}".strip()
    return lines + ([line] if line else [])


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
    # names from the data show as text, not markup; on a copy: ``fig`` may be a cached figure other sessions share
    clean = sanitize_figure(go.Figure(fig.to_dict(), _validate=False))
    shown = _style(clean, present)
    sel = {"on_select": "rerun", "selection_mode": "points"} if select else {}
    event = st.plotly_chart(shown, key=f"chart_{key}", config={"displaylogo": False}, theme="streamlit", **sel)
    if rest:
        st.markdown(escape_markdown(rest))
    stem = file_stem(name, export_settings(c))
    row = st.container(horizontal=True, gap="small")

    def static(fmt: str) -> Callable[[], bytes]:
        def render() -> bytes:
            from offeval_core.export import figure_to_bytes

            return figure_to_bytes(_export_figure(clean, take=take, c=c), fmt, width=1100)
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

        dataset = c.dataset.label if c is not None and c.dataset is not None else "no dataset"
        return table_csv(df, name=name, dataset=dataset, settings=export_settings(c), units=units,
                         when=_dt.datetime.now(_dt.UTC))

    from offeval_core.formatting import file_stem

    st.download_button("Download CSV", csv, file_name=f"{file_stem(name, export_settings(c))}.csv", mime="text/csv",
                       key=f"csv_{key}", on_click="ignore", icon=":material/download:",
                       help="Lines starting with # say where the table comes from and its units "
                            "(pandas: read_csv(..., comment='#'))")
    if caption:
        st.caption(caption)
