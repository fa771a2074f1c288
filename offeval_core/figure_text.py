"""The text around a chart, fitted to its width: titles wrapped into lines that fit the figure, and the figure
as exported (PNG / SVG / HTML) — its title, the takeaway under it and a footer naming the dataset, the policy and
the settings, all plain text wrapped to the export's width, so a chart pasted into a slide says what it shows
and where it comes from, and nothing runs past its right edge.

Plotly does not wrap text: lines are cut here from an estimate of the text's width (``CHAR_EM`` × font size per
character, an upper bound for the sans-serif fonts the charts use), and the margins grow by the lines added.
Pure functions of plotly figures (no Streamlit).
"""

from __future__ import annotations

import math
import re

import plotly.graph_objects as go

from offeval_core.sanitize import sanitize_figure

__all__ = ["CHAR_EM", "EXPORT_WIDTH", "chars_per_line", "exported_figure", "plain_text", "wrap_lines", "wrap_title"]

CHAR_EM = 0.6
"""Width of one character in em (font sizes): wider than the average letter of Inter / Helvetica / Arial
(≈ 0.5), so a line cut at this width fits."""
EXPORT_WIDTH = 1100
"""Width in px of the static exports (PNG at scale 2, SVG)."""
LINE = 1.3
"""Line height in font sizes."""

_TAG = re.compile(r"<br\s*/?>", re.IGNORECASE)
_FORMAT_TAG = re.compile(r"</?(b|i|em|sup|sub|span|strong)(\s[^<>]*)?>", re.IGNORECASE)


def plain_text(text: str) -> str:
    """Chart text without formatting markup: line breaks become spaces, formatting tags (``<b>``, ``<span
    style=…>``…) and Markdown stars go; any other ``<…>`` stays as text (escaped when the figure is sanitised).

    >>> plain_text("<b>DCG</b> wins<br>by **2** <span style='font-size:13px'>x</span>")
    'DCG wins by 2 x'
    """
    text = _TAG.sub(" ", str(text))
    return " ".join(_FORMAT_TAG.sub("", text).replace("**", "").split())


def chars_per_line(width_px: float, font_px: float) -> int:
    """How many characters of a ``font_px`` font fit in ``width_px`` (at least 20).

    >>> chars_per_line(1100, 13)
    141
    """
    return max(20, int(width_px / (CHAR_EM * font_px)))


def wrap_lines(text: str, width: int) -> list[str]:
    """``text`` cut into lines of at most ``width`` characters at spaces (a longer word gets a line of its own);
    ``m = 256`` and ``19 %`` are never cut.

    >>> [line.replace("\xa0", " ") for line in wrap_lines("DCG detects 19 % at m = 256 (vs 6 % at m = 1)", 20)]
    ['DCG detects 19 % at', 'm = 256 (vs 6 % at', 'm = 1)']
    """
    lines: list[str] = []
    line = ""
    text = str(text).replace(" = ", "\xa0=\xa0").replace(" %", "\xa0%")
    for word in re.split(r"[ \t\r\n]+", text.strip()):
        if line and len(line) + 1 + len(word) > width:
            lines.append(line)
            line = word
        else:
            line = f"{line} {word}".strip()
    return lines + ([line] if line else [])


def _font_size(fig: go.Figure, default: float = 13) -> float:
    size = fig.layout.font.size if fig.layout.font and fig.layout.font.size else default
    return float(size)


def _title_size(fig: go.Figure) -> float:
    t = fig.layout.title
    if t and t.font and t.font.size:
        return float(t.font.size)
    return round(1.2 * _font_size(fig), 1)  # plotly's default title size


def wrap_title(fig: go.Figure, width_px: float) -> go.Figure:
    """``fig`` (changed in place and returned) with its title cut into lines that fit ``width_px`` and the top
    margin grown by the lines added; a title that fits is left as it is."""
    title = fig.layout.title.text if fig.layout.title and fig.layout.title.text else ""
    if not title:
        return fig
    size = _title_size(fig)
    text = plain_text(title)
    lines = wrap_lines(text, chars_per_line(width_px, size))
    if len(lines) <= 1 and "<br" not in title.lower():
        return fig
    fig.layout.title.text = "<br>".join(lines)
    top = fig.layout.margin.t if fig.layout.margin and fig.layout.margin.t is not None else 80
    fig.update_layout(margin={"t": top + math.ceil(LINE * size * (len(lines) - 1))})
    if fig.layout.height:
        fig.update_layout(height=fig.layout.height + math.ceil(LINE * size * (len(lines) - 1)))
    return fig


def _subplot_titles(fig: go.Figure) -> bool:
    """Whether the figure has subplot titles (annotations at the top edge of the plot area)."""
    return any(a.yref == "paper" and a.y is not None and a.y >= 1 and a.yanchor == "bottom"
               for a in fig.layout.annotations or ())


def exported_figure(fig: go.Figure, *, takeaway: str | None, footer: str, width: int = EXPORT_WIDTH) -> go.Figure:
    """The figure as exported: its title and the takeaway under it, wrapped to ``width``, above the plot (and
    above any subplot titles); the legend to the right of the plot; the ``footer`` (dataset, policy, settings,
    date) wrapped at the bottom. Every text is plain text (markup in the takeaway or the names is removed or
    shown as text, never as tags); the plot area keeps its height, the figure grows by the text added.

    >>> fig = go.Figure(go.Scatter(x=[1, 2], y=[3, 4], name="DCG"), layout={"title": {"text": "A chart"},
    ...                                                                      "height": 400})
    >>> out = exported_figure(fig, takeaway="DCG wins. " * 30, footer="Dataset: demo · m = ∞")
    >>> out.layout.title.text, len([a for a in out.layout.annotations if a.name == "takeaway"])
    ('A chart', 1)
    >>> max(len(line) for line in out.layout.annotations[0].text.split("<br>")) <= chars_per_line(1100 - 60, 14)
    True
    """
    out = go.Figure(fig.to_dict(), _validate=False)
    base = _font_size(out)
    title_px = 18.0
    take_px = 14.0
    foot_px = 11.0
    inner = width - 60  # the left and right padding of the text
    title = plain_text(out.layout.title.text or "") if out.layout.title else ""
    title_lines = wrap_lines(title, chars_per_line(inner, title_px)) if title else []
    take_lines = wrap_lines(plain_text(takeaway), chars_per_line(inner, take_px)) if takeaway else []
    foot_lines = wrap_lines(plain_text(footer), chars_per_line(inner, foot_px))
    margin = out.layout.margin
    old_t = margin.t if margin and margin.t is not None else 80
    old_b = margin.b if margin and margin.b is not None else 80
    height = out.layout.height or 450
    plot_h = max(200, height - old_t - old_b)

    pad = 14
    left = max(60, margin.l or 60) if margin else 60
    title_h = math.ceil(LINE * title_px * len(title_lines))
    take_h = math.ceil(LINE * take_px * len(take_lines))
    sub_h = math.ceil(LINE * base) + 16 if _subplot_titles(out) else 10
    top = pad + title_h + (8 if take_lines else 0) + take_h + sub_h + 6
    axis_h = 64  # tick labels and the x axis title
    foot_h = math.ceil(LINE * foot_px * len(foot_lines))
    bottom = axis_h + foot_h + pad
    new_h = top + plot_h + bottom
    out.update_layout(
        width=width, height=new_h,
        margin={"t": top, "b": bottom, "l": left, "r": 20},
        title={"text": "<br>".join(title_lines), "x": 0, "xref": "container", "xanchor": "left", "pad": {"l": 30},
               "y": 1 - pad / new_h, "yref": "container", "yanchor": "top", "font": {"size": title_px}},
        legend={"orientation": "v", "x": 1.02, "xanchor": "left", "y": 1, "yanchor": "top", "yref": "paper"})
    notes = []
    if take_lines:
        notes.append({"text": "<br>".join(take_lines), "name": "takeaway", "xref": "paper", "yref": "paper",
                      "x": 0, "xanchor": "left", "xshift": -(left - 30), "y": 1, "yanchor": "bottom",
                      "yshift": sub_h, "align": "left",
                      "showarrow": False, "font": {"size": take_px, "color": "#222"}})
    notes.append({"text": "<br>".join(foot_lines), "name": "footer", "xref": "paper", "yref": "paper", "x": 0,
                  "xanchor": "left", "xshift": -(left - 30), "y": 0, "yanchor": "bottom", "yshift": -(bottom - pad // 2), "align": "left",
                  "showarrow": False, "font": {"size": foot_px, "color": "#555"}})
    out.layout.annotations = (*notes, *(a.to_plotly_json() for a in out.layout.annotations or ()))
    return sanitize_figure(out)  # names from the data (an upload's file name) show as text
