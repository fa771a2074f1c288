"""Names from users' files shown safely: escaped for Markdown, HTML and chart text; CSV cells that a
spreadsheet would run as a formula neutralised.

Column, reward, policy and segment names come from uploaded files and shared links, so they are data,
never markup: ``**x**`` must show as two stars and an x, ``<img src=…>`` as that text, and a CSV cell
``=HYPERLINK(…)`` must not become a formula when the download is opened in a spreadsheet.
"""

from __future__ import annotations

import html
import io
import re

import pandas as pd

__all__ = ["FORMULA_LEADS", "TerminalStream", "escape_html", "escape_markdown", "neutralise_cell", "neutralise_frame",
           "one_line", "plot_text", "terminal_text"]

_MD_ALWAYS = re.compile(r"([\\`*\[\]|~$])")
_MD_EDGE_UNDERSCORE = re.compile(r"(?<![A-Za-z0-9])_|_(?![A-Za-z0-9])")
_MD_LEADING = re.compile(r"^([#+\-=]|\d+(?=[.)]))")
FORMULA_LEADS = ("=", "+", "-", "@", "\t", "\r", "\n", "＝", "＋", "－", "＠")
"""Leading characters that make a spreadsheet read a cell as a formula (OWASP's list, the line feed, and their
full-width forms, which some spreadsheets also accept)."""

_BIDI = (*range(0x202A, 0x202F), *range(0x2066, 0x206A))  # embeddings, overrides and isolates: reorder shown text
_TERMINAL = {c: f"\\x{c:02x}" for c in (*range(0x00, 0x09), 0x0B, 0x0C, *range(0x0E, 0x20), 0x7F, *range(0x80, 0xA0))}
_TERMINAL |= {c: f"\\u{c:04x}" for c in _BIDI}
_ONE_LINE = {**_TERMINAL, 0x09: "\\t", 0x0A: "\\n", 0x0D: "\\r", 0x2028: "\\u2028", 0x2029: "\\u2029"}


def terminal_text(text: object) -> str:
    r"""``text`` safe for a terminal: every control character but tab, line feed and carriage return (ESC, which
    starts ANSI colour and OSC title / hyperlink / clipboard sequences, BEL, backspace, the C1 controls, DEL)
    and the bidirectional overrides are shown as escapes such as ``\x1b``.

    >>> terminal_text("like\x1b]0;pwned\x07 ok\n")
    'like\\x1b]0;pwned\\x07 ok\n'
    """
    return str(text).translate(_TERMINAL)


def one_line(text: object) -> str:
    r"""``text`` on one line: as :func:`terminal_text`, and line breaks and tabs shown as ``\n``, ``\r``,
    ``\t`` (names inside a line of terminal output or a CSV comment line).

    >>> one_line("x\n=HYPERLINK(1)")
    'x\\n=HYPERLINK(1)'
    """
    return str(text).translate(_ONE_LINE)


class TerminalStream(io.TextIOBase):
    """A text stream that writes through :func:`terminal_text` to ``inner`` (the command line's stdout and
    stderr, so no name or value from a file can send a control sequence to the user's terminal)."""

    def __init__(self, inner):
        self._inner = inner

    def write(self, text: str) -> int:
        self._inner.write(terminal_text(text))
        return len(text)

    def flush(self) -> None:
        self._inner.flush()

    def writable(self) -> bool:
        return True

    def isatty(self) -> bool:
        return self._inner.isatty()

    def fileno(self) -> int:
        return self._inner.fileno()

    @property
    def encoding(self):
        return getattr(self._inner, "encoding", "utf-8")


def escape_markdown(text: object) -> str:
    """``text`` as literal Markdown: characters that start Markdown, LaTeX or Streamlit markup are
    backslash-escaped (``_`` only where it could open emphasis, not inside ``session_id``), HTML special
    characters become entities, line breaks become spaces and the ends are stripped. Rendered as
    CommonMark, the result is exactly the text.

    >>> escape_markdown("**bold** <b>x</b> [a](http://e) $x$ session_id")
    '\\\\*\\\\*bold\\\\*\\\\* &lt;b&gt;x&lt;/b&gt; \\\\[a\\\\](http://e) \\\\$x\\\\$ session_id'
    """
    s = " ".join(str(text).splitlines()).strip()
    s = s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    s = _MD_ALWAYS.sub(r"\\\1", s)
    s = _MD_EDGE_UNDERSCORE.sub(r"\\_", s)
    m = _MD_LEADING.match(s)  # a line start that would open a heading, list or rule
    if m:
        end = m.end()
        s = s[:end] + "\\" + s[end:] if m.group(1)[0].isdigit() else "\\" + s
    return s


def escape_html(text: object) -> str:
    """``text`` for HTML (``<``, ``>``, ``&`` and quotes as entities).

    >>> escape_html("<script>x</script>")
    '&lt;script&gt;x&lt;/script&gt;'
    """
    return html.escape(str(text), quote=True)


def plot_text(text: object) -> str:
    """``text`` for plotly titles, labels and hover text, which interpret a subset of HTML (``<b>``,
    ``<a href>``, ``<br>``): the tags show as text.

    >>> plot_text('<a href="http://e">x</a>')
    '&lt;a href=&quot;http://e&quot;&gt;x&lt;/a&gt;'
    """
    return html.escape(str(text), quote=True)


def neutralise_cell(value: object) -> object:
    """A text cell starting with ``=``, ``+``, ``-``, ``@``, tab or carriage return gets a leading ``'``
    so spreadsheets show it as text; numbers (also negative ones) and other values are unchanged.

    >>> neutralise_cell("=1+1"), neutralise_cell("-x"), neutralise_cell(-1.5), neutralise_cell("ok")
    ("'=1+1", "'-x", -1.5, 'ok')
    """
    if isinstance(value, str) and value.startswith(FORMULA_LEADS):
        return "'" + value
    return value


_LINE_BREAKS = {0x0A: "\\n", 0x0D: "\\r"}


def _export_cell(value: object) -> object:
    return neutralise_cell(value.translate(_LINE_BREAKS)) if isinstance(value, str) else value


def neutralise_frame(df: pd.DataFrame) -> pd.DataFrame:
    r"""A copy of ``df`` whose text cells and column names are neutralised (numeric columns untouched): line
    breaks shown as ``\n`` / ``\r`` (a name ``"x\n=HYPERLINK(…)"`` cannot start a line of the file, even for a
    reader that splits lines before quotes) and formula-leading text prefixed with ``'``.

    >>> neutralise_frame(pd.DataFrame({"=x": ["-a", "b\n=1"], "v": [-1.0, 2.0]})).to_csv(index=False).splitlines()
    ["'=x,v", "'-a,-1.0", 'b\\n=1,2.0']
    """
    out = df.copy()
    for col in out.columns:
        s = out[col]
        if pd.api.types.is_numeric_dtype(s) or pd.api.types.is_bool_dtype(s) or pd.api.types.is_datetime64_any_dtype(s):
            continue
        out[col] = s.astype(object).map(_export_cell)
    out.columns = [_export_cell(c) if isinstance(c, str) else c for c in out.columns]
    return out


_PLOT_TAG = re.compile(r"<[^<>]*>?")
_PLOT_ALLOWED = re.compile(r"</?(b|i|em|sup|sub)>|<br\s*/?>", re.IGNORECASE)


def plot_markup(text: str) -> str:
    """Chart text with only plotly's plain formatting tags kept (``<b> <i> <em> <sup> <sub> <br>``, no
    attributes); any other tag (``<a href>``, ``<span style>``, ``<img>``) shows as text.

    >>> plot_markup('mean<br>per <b>session</b> <a href="http://e">x</a>')
    'mean<br>per <b>session</b> &lt;a href=&quot;http://e&quot;&gt;x&lt;/a&gt;'
    """
    return _PLOT_TAG.sub(lambda m: m.group(0) if _PLOT_ALLOWED.fullmatch(m.group(0)) else escape_html(m.group(0)),
                         str(text))


def sanitize_figure(fig):
    """``fig`` (a plotly Figure, changed in place and returned) with :func:`plot_markup` applied to its
    titles, axis titles, annotations, legend names, trace text and hover text."""
    def clean(value):
        if isinstance(value, str):
            return plot_markup(value)
        if isinstance(value, list | tuple):
            return [clean(v) for v in value]
        return value

    layout = fig.layout
    if layout.title and layout.title.text:
        layout.title.text = plot_markup(layout.title.text)

    def axis_title(axis):
        if axis.title is not None and axis.title.text:
            axis.title.text = plot_markup(axis.title.text)

    fig.for_each_xaxis(axis_title)
    fig.for_each_yaxis(axis_title)
    for ann in layout.annotations or ():
        if ann.text:
            ann.text = plot_markup(ann.text)
    for trace in fig.data:
        for attr in ("name", "text", "hovertext", "legendgroup"):
            if attr in trace and getattr(trace, attr) is not None:
                value = getattr(trace, attr)
                if isinstance(value, str | list | tuple):
                    setattr(trace, attr, clean(value))
    return fig
