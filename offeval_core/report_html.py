"""The HTML of the report: a document built section by section (headings, escaped paragraphs, figures with
names from the data sanitised, tables) and wrapped into one self-contained page with plotly.js inline."""

from __future__ import annotations

import html

import pandas as pd
import plotly.graph_objects as go
import plotly.offline

from offeval_core.formatting import clip_text
from offeval_core.sanitize import sanitize_figure

__all__ = ["CSS", "HtmlDocument", "fmt_table"]


def fmt_table(df: pd.DataFrame, *, pct_cols=(), digits: int = 4) -> str:
    """A table as escaped HTML: clip values as 64 / ∞, shares as percentages, floats to ``digits`` significant
    digits, missing values as –."""
    out = df.copy()
    for c in out.columns:
        if c == "clip" or c.endswith("_clip"):
            out[c] = [clip_text(float(v)) if pd.notna(v) else "–" for v in out[c]]
        elif c in pct_cols:
            out[c] = [f"{100 * v:.1f} %" if pd.notna(v) else "–" for v in out[c]]
        elif pd.api.types.is_float_dtype(out[c]):
            out[c] = [("–" if pd.isna(v) else f"{v:.{digits}g}") for v in out[c]]
    return out.to_html(index=False, classes="tbl", border=0, escape=True, na_rep="–")


class HtmlDocument:
    """The body of one report, section by section; :meth:`page` wraps it into a self-contained HTML page."""

    def __init__(self) -> None:
        self.parts: list[str] = []
        self.n_figures = 0

    def h2(self, anchor: str, text: str) -> None:
        self.parts.append(f'<h2 id="{anchor}">{html.escape(text)}</h2>')

    def p(self, text: str, cls: str = "") -> None:
        c = f' class="{cls}"' if cls else ""
        self.parts.append(f"<p{c}>{html.escape(text)}</p>")

    def raw(self, text: str) -> None:
        self.parts.append(text)

    def fig(self, fig: go.Figure) -> None:
        self.n_figures += 1
        sanitize_figure(fig)  # names from the data show as text in titles, legends and hover labels
        self.parts.append('<div class="fig">' + fig.to_html(
            full_html=False, include_plotlyjs=False, div_id=f"fig{self.n_figures}",
            config={"displaylogo": False, "responsive": True}) + "</div>")

    def note(self, text: str) -> None:
        self.p(text, "note")

    def page(self, *, title: str, nav: str, head: str) -> str:
        """The whole page: plotly.js inline (opens offline), the title, the navigation, ``head`` (trusted
        HTML built by the caller with escaped values) and the sections."""
        return ("<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'><title>offeval report</title>"
                f"<style>{CSS}</style><script type='text/javascript'>{plotly.offline.get_plotlyjs()}</script>"
                f"</head><body><h1>{html.escape(title)}</h1><nav>{nav}</nav>{head}"
                + "".join(self.parts) + "</body></html>")


CSS = """
body{font:14px/1.45 Inter,Helvetica,Arial,sans-serif;margin:0 auto;max-width:1180px;padding:16px 28px;color:#222}
h1{font-size:24px;margin-bottom:4px} h2{margin-top:36px;border-bottom:2px solid #0072B2;padding-bottom:4px}
nav a{margin-right:14px} .note{background:#fff4e0;border-left:4px solid #E69F00;padding:6px 10px}
.takeaway{background:#e8f3fa;border-left:4px solid #0072B2;padding:6px 10px;font-weight:600}
.tbl{border-collapse:collapse;font-size:12.5px;margin:8px 0} .tbl td,.tbl th{padding:3px 8px;
border-bottom:1px solid #ddd;text-align:right} .tbl th{border-bottom:2px solid #333}
.fig{margin:10px 0} details{margin:8px 0} code{background:#f3f3f3;padding:0 3px}
"""
